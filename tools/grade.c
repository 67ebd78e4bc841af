/*
 * grade — rollouts in, rollouts with a `grade` sub-map out: the task's
 * tests run in the clean room on the patched task tree, protected files
 * restored, hack detectors applied.  `grade --summary` turns graded
 * rollouts into pass rates, pass@k and retirement lists.  See grade(1).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_cli.h"
#include "fw_grade.h"
#include "fw_grade_judge.h"
#include "fw_judge.h"
#include "fw_mp.h"
#include "fw_stream.h"

static const char usage_text[] =
	"usage: grade [--store DIR] [--reward resolved|f2p|shaped] [--hacks zero|warn]\n"
	"             [-j N] [--shard K/N] [--timeout SEC] [--no-time] [-o OUT] [-z]\n"
	"             [--progress] [--judge SPEC --rubric FILE [--judge-tokenizer DIR]\n"
	"             [--judge-only] [--distil OUT --student DIR]] [--env DIR | ID]\n"
	"             [--env-store DIR] [FILE...]\n"
	"       grade --summary [--retire-at X] [--recent N] [--records] [-o OUT]\n"
	"             [FILE...]\n"
	"       grade -h | --help | --version\n";

static const struct fw_opt_doc options[] = {
	{ "--store DIR", "the task store, a bare git repository made by task-mutate(1)" },
	{ "--reward resolved|f2p|shaped|mix:...", "how the reward is computed (see Rewards in grade(1))" },
	{ "--hacks zero|warn", "zero (the default) sets the reward of a rollout with findings to 0" },
	{ "-j N", "grade N rollouts at a time (1 to 64, default 1)" },
	{ "--shard K/N", "grade only the rollouts whose id hashes to K modulo N" },
	{ "--timeout SEC", "wall-clock limit of one test run (default 300)" },
	{ "--no-time", "leave grade.time out, so that two gradings are identical byte for byte" },
	{ "-o OUT", "write to OUT (replaced atomically) instead of standard output" },
	{ "-z", "compress the output with zstd" },
	{ "--progress", "a progress meter on standard error even when it is not a terminal" },
	{ "--judge SPEC", "score each rollout with this judge on the criteria of --rubric" },
	{ "--rubric FILE", "a record stream holding the rubric" },
	{ "--judge-tokenizer DIR", "the checkpoint whose tokenizer an http judge's records use" },
	{ "--judge-only", "judge records without running tests" },
	{ "--distil OUT", "write the student's SFT examples to OUT" },
	{ "--student DIR", "the checkpoint the examples of --distil are fitted to" },
	{ "--env DIR | ID", "run every task's tests in this environment (a directory or an env id)" },
	{ "--env-store DIR", "where task environments are found" },
	{ "--summary", "summarize graded rollouts instead of grading" },
	{ "--retire-at X", "pass rate (0 to 1) at which a task or split is listed for retirement" },
	{ "--recent N", "how many of the latest checkpoints the retirement rate looks at" },
	{ "--records", "write the summary as records" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

struct opts {
	struct fw_grade_opts g;
	uint64_t jobs;
	uint64_t shard_k, shard_n;
	int summary, records, progress, level;
	double retire_at;
	uint64_t recent;
	const char *out;
	const char *judge, *rubric, *judge_tok;
	int judge_only;
	const char *distil, *student;
	struct fw_mix mix;
	int have_mix;
	char **files;
	int nfiles;
};

/* ---- grading: a window of records graded by workers, written in order ---- */

enum { SLOT_FREE = 0, SLOT_PENDING, SLOT_RUNNING, SLOT_DONE };

struct slot {
	int state;
	uint64_t seq;
	struct fw_buf in, out;
	int pass;       /* not a rollout: written as it came */
	int rc;         /* of fw_grade_rollout */
	char err[600];
	const char *file;
	uint64_t index, offset;
};

struct pool {
	const struct opts *o;
	pthread_mutex_t mu;
	pthread_cond_t cv_work, cv_done;
	struct slot *slots;
	size_t nslots;
	uint64_t next_seq;  /* next record to enqueue */
	uint64_t next_take; /* next record a worker takes */
	uint64_t next_out;  /* next record to write */
	int closing;
	int stop;           /* a fatal error: workers take nothing more */
};

static void *worker(void *arg)
{
	struct pool *p = arg;
	struct fw_grader *g = fw_grader_new(&p->o->g);
	for (;;) {
		pthread_mutex_lock(&p->mu);
		for (;;) {
			/* records passed through are never taken */
			while (p->next_take < p->next_seq &&
			       (p->slots[p->next_take % p->nslots].seq != p->next_take ||
				p->slots[p->next_take % p->nslots].state != SLOT_PENDING))
				p->next_take++;
			if (p->stop || p->next_take < p->next_seq || p->closing)
				break;
			pthread_cond_wait(&p->cv_work, &p->mu);
		}
		if (p->stop || p->next_take == p->next_seq) {
			pthread_mutex_unlock(&p->mu);
			break;
		}
		struct slot *s = &p->slots[p->next_take++ % p->nslots];
		s->state = SLOT_RUNNING;
		pthread_mutex_unlock(&p->mu);
		if (!g) {
			s->rc = -1;
			snprintf(s->err, sizeof s->err, "out of memory");
		} else {
			s->err[0] = '\0';
			s->rc = fw_grade_rollout(g, (struct fw_mpv){ s->in.p, s->in.n }, &s->out,
						 s->err, sizeof s->err);
		}
		pthread_mutex_lock(&p->mu);
		s->state = SLOT_DONE;
		pthread_cond_broadcast(&p->cv_done);
		pthread_mutex_unlock(&p->mu);
	}
	fw_grader_free(g);
	return NULL;
}

struct run {
	struct pool pool;
	struct fw_writer *w;
	struct fw_progress prog;
	uint64_t written, graded, errors, passed;
	int status;
	int fatal;
	/* --judge: the judge's pass; --distil: where its examples go */
	struct fw_grade_judging jg;
	struct fw_writer *dw;
};

/* --distil: one example to the writer arg. */
static int put_example(void *arg, const void *p, size_t n, char *err, size_t errlen)
{
	struct fw_writer *w = arg;
	if (fw_writer_put(w, p, n) == 0)
		return 0;
	snprintf(err, errlen, "--distil: %s", fw_writer_error(w));
	return -1;
}

/* Writes the finished prefix; with wait, blocks until slot seq `until`
 * is written.  Returns 0, or -1 on a write error or a fatal grading error. */
static int drain(struct run *r, uint64_t until, int wait)
{
	struct pool *p = &r->pool;
	/* after a fatal error nothing past the fault is written */
	if (r->fatal)
		return -1;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		if (p->next_out >= p->next_seq || p->next_out >= until)
			break;
		struct slot *s = &p->slots[p->next_out % p->nslots];
		if (s->state != SLOT_DONE) {
			if (!wait)
				break;
			pthread_cond_wait(&p->cv_done, &p->mu);
			continue;
		}
		pthread_mutex_unlock(&p->mu);
		int rc = 0;
		if (s->pass) {
			rc = fw_writer_put(r->w, s->in.p, s->in.n);
			r->passed++;
		} else if (s->rc < 0) {
			fw_warn_rec(s->file, s->index, s->offset, "%s", s->err);
			r->fatal = 1;
		} else {
			if (s->rc == 1) {
				fw_warn_rec(s->file, s->index, s->offset, "%s", s->err);
				r->errors++;
			}
			r->graded++;
			if (r->jg.judge &&
			    fw_grade_judge_record(&r->jg, &s->out, s->err, sizeof s->err) < 0) {
				fw_warn_rec(s->file, s->index, s->offset, "judge: %s", s->err);
				r->fatal = 1;
			} else {
				rc = fw_writer_put(r->w, s->out.p, s->out.n);
			}
		}
		if (rc < 0) {
			fw_warn("write error: %s", fw_writer_error(r->w));
			r->fatal = 1;
		}
		r->written++;
		fw_progress_tick(&r->prog, r->written, 0);
		pthread_mutex_lock(&p->mu);
		fw_buf_reset(&s->in);
		fw_buf_reset(&s->out);
		s->state = SLOT_FREE;
		p->next_out++;
		if (r->fatal) {
			p->stop = 1;
			pthread_cond_broadcast(&p->cv_work);
			break;
		}
	}
	pthread_mutex_unlock(&p->mu);
	return r->fatal ? -1 : 0;
}

static int is_rollout(struct fw_mpv v)
{
	struct fw_mpv k;
	return fw_mp_get(v, "kind", &k) == 1 && fw_mp_str_eq(k, "rollout", 7);
}

static int is_traj(struct fw_mpv v)
{
	struct fw_mpv k;
	return fw_mp_get(v, "kind", &k) == 1 && fw_mp_str_eq(k, "traj", 4);
}

/* Enqueues one record.  Returns 0 or -1 (stop). */
static int enqueue(struct run *r, const struct fw_rec *rec, const char *file)
{
	struct pool *p = &r->pool;
	uint64_t seq = p->next_seq;
	/* the slot is free once record seq - nslots is written */
	if (seq >= p->nslots && drain(r, seq - p->nslots + 1, 1) < 0)
		return -1;
	struct slot *s = &p->slots[seq % p->nslots];
	fw_buf_reset(&s->in);
	if (fw_buf_append(&s->in, rec->v.p, rec->v.n) < 0) {
		fw_warn("out of memory");
		return -1;
	}
	s->file = file;
	s->index = rec->index;
	s->offset = rec->offset;
	int judge_now = r->pool.o->judge_only && (is_rollout(rec->v) || is_traj(rec->v));
	s->pass = !judge_now && !is_rollout(rec->v);
	if (judge_now) {
		/* --judge-only: the record as it is goes to the judge */
		s->rc = 0;
		fw_buf_reset(&s->out);
		if (fw_buf_append(&s->out, rec->v.p, rec->v.n) < 0) {
			fw_warn("out of memory");
			return -1;
		}
	}
	pthread_mutex_lock(&p->mu);
	s->seq = seq;
	s->state = s->pass || judge_now ? SLOT_DONE : SLOT_PENDING;
	p->next_seq++;
	pthread_cond_signal(&p->cv_work);
	pthread_mutex_unlock(&p->mu);
	return drain(r, UINT64_MAX, 0);
}

static int grade_main(struct opts *o)
{
	struct run r;
	memset(&r, 0, sizeof r);
	struct pool *p = &r.pool;
	p->o = o;
	p->nslots = o->jobs * 4 < 8 ? 8 : o->jobs * 4;
	p->slots = calloc(p->nslots, sizeof *p->slots);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv_work, NULL);
	pthread_cond_init(&p->cv_done, NULL);
	char err[512];
	r.jg = (struct fw_grade_judging){ .mix = o->have_mix ? &o->mix : NULL,
					  .hacks_warn = o->g.hacks_warn,
					  .judge_only = o->judge_only, .put = put_example };
	int jk = o->judge ? fw_grade_judging_open(&r.jg, o->judge, o->judge_tok,
						  o->g.timeout_s > 0 ? o->g.timeout_s : 600,
						  o->rubric, o->student, err, sizeof err)
			  : 0;
	if (jk == 0 && o->distil && !(r.dw = fw_writer_open(o->distil, o->level, err, sizeof err)))
		jk = -3;
	if (jk < 0) {
		if (jk == -3)
			fw_warn("--student %s: %s", o->student, err);
		else
			fw_warn(jk == -2 ? "--reward: %s" : "%s", err);
		goto fail;
	}
	r.jg.put_arg = r.dw;
	r.w = fw_writer_open(o->out, o->level, err, sizeof err);
	if (!r.w || !p->slots) {
		fw_warn("%s", r.w ? "out of memory" : err);
		goto fail;
	}
	pthread_t th[64];
	size_t nt = 0;
	for (; nt < o->jobs; nt++)
		if (pthread_create(&th[nt], NULL, worker, p) != 0)
			break;
	if (nt == 0) {
		fw_warn("cannot start a worker thread");
		goto fail;
	}
	fw_progress_start(&r.prog, o->progress);

	static char *stdin_only[] = { "-" };
	char **files = o->nfiles ? o->files : stdin_only;
	int nfiles = o->nfiles ? o->nfiles : 1;
	for (int f = 0; f < nfiles && !r.fatal; f++) {
		struct fw_reader *rd = fw_reader_open(files[f], NULL, err, sizeof err);
		if (!rd) {
			fw_warn("%s", err);
			r.status = FW_EXIT_DATA;
			continue;
		}
		struct fw_rec rec;
		int k;
		while ((k = fw_reader_next(rd, &rec)) == 1) {
			if (o->shard_n && !fw_shard_keep(rec.v, o->shard_k, o->shard_n))
				continue;
			if (enqueue(&r, &rec, files[f]) < 0)
				break;
		}
		if (k < 0) {
			fw_warn_reader(rd);
			r.status = FW_EXIT_DATA;
		}
		/* the rest of this file must be written before its name goes */
		drain(&r, UINT64_MAX, 1);
		fw_reader_close(rd);
	}
	pthread_mutex_lock(&p->mu);
	p->closing = 1;
	pthread_cond_broadcast(&p->cv_work);
	pthread_mutex_unlock(&p->mu);
	drain(&r, UINT64_MAX, 1);
	for (size_t i = 0; i < nt; i++)
		pthread_join(th[i], NULL);
	fw_progress_end(&r.prog);
	if (fw_writer_close(r.w, err, sizeof err) < 0) {
		fw_warn("%s", err);
		r.status = FW_EXIT_DATA;
	}
	if (r.dw) {
		if (fw_writer_close(r.dw, err, sizeof err) < 0) {
			fw_warn("--distil: %s", err);
			r.status = FW_EXIT_DATA;
		} else {
			fw_warn("%llu examples for the student in %s",
				(unsigned long long)r.jg.distilled, o->distil);
		}
	}
	for (size_t i = 0; i < p->nslots; i++) {
		fw_buf_free(&p->slots[i].in);
		fw_buf_free(&p->slots[i].out);
	}
	free(p->slots);
	fw_grade_judging_release(&r.jg);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv_work);
	pthread_cond_destroy(&p->cv_done);
	if (r.passed)
		fw_warn("%llu records that are not rollouts passed through ungraded",
			(unsigned long long)r.passed);
	if (r.errors || r.fatal)
		r.status = FW_EXIT_DATA;
	return r.status;
fail:
	fw_writer_abort(r.dw);
	fw_writer_abort(r.w);
	fw_grade_judging_release(&r.jg);
	free(p->slots);
	return FW_EXIT_DATA;
}

/* ---- summary ------------------------------------------------------------------ */

static int summary_main(struct opts *o)
{
	struct fw_gsum *s = fw_gsum_new((unsigned)o->recent, o->retire_at);
	if (!s) {
		fw_warn("out of memory");
		return FW_EXIT_DATA;
	}
	int status = FW_EXIT_OK;
	static char *stdin_only[] = { "-" };
	char **files = o->nfiles ? o->files : stdin_only;
	int nfiles = o->nfiles ? o->nfiles : 1;
	char err[512];
	for (int f = 0; f < nfiles; f++) {
		struct fw_reader *rd = fw_reader_open(files[f], NULL, err, sizeof err);
		if (!rd) {
			fw_warn("%s", err);
			status = FW_EXIT_DATA;
			continue;
		}
		struct fw_rec rec;
		int k;
		while ((k = fw_reader_next(rd, &rec)) == 1) {
			/* other kinds pass through grading; they are not counted */
			if (!is_rollout(rec.v))
				continue;
			int a = fw_gsum_add(s, rec.v, err, sizeof err);
			if (a < 0) {
				fw_warn("out of memory");
				fw_reader_close(rd);
				fw_gsum_free(s);
				return FW_EXIT_DATA;
			}
			if (a == 1) {
				fw_warn_rec(fw_reader_name(rd), rec.index, rec.offset, "%s", err);
				status = FW_EXIT_DATA;
			}
		}
		if (k < 0) {
			fw_warn_reader(rd);
			status = FW_EXIT_DATA;
		}
		fw_reader_close(rd);
	}
	const struct fw_gsum_row *rows;
	long n = fw_gsum_rows(s, &rows);
	if (n < 0) {
		fw_warn("out of memory");
		fw_gsum_free(s);
		return FW_EXIT_DATA;
	}
	struct fw_buf b = { 0 };
	if (o->records) {
		struct fw_writer *w = fw_writer_open(o->out, o->level, err, sizeof err);
		if (!w) {
			fw_warn("%s", err);
			status = FW_EXIT_DATA;
		} else {
			for (long i = 0; i < n; i++) {
				fw_buf_reset(&b);
				if (fw_gsum_pack_row(&b, &rows[i]) < 0) {
					fw_warn("out of memory");
					status = FW_EXIT_DATA;
					break;
				}
				if (fw_writer_put(w, b.p, b.n) < 0) {
					fw_warn("write error: %s", fw_writer_error(w));
					status = FW_EXIT_DATA;
					break;
				}
			}
			if (fw_writer_close(w, err, sizeof err) < 0) {
				fw_warn("%s", err);
				status = FW_EXIT_DATA;
			}
		}
	} else {
		FILE *f = stdout;
		if (fw_gsum_text(&b, s, rows, n) < 0) {
			fw_warn("out of memory");
			status = FW_EXIT_DATA;
		} else if (o->out && strcmp(o->out, "-") != 0 && !(f = fopen(o->out, "w"))) {
			fw_warn("%s: %s", o->out, strerror(errno));
			status = FW_EXIT_DATA;
		} else {
			fwrite(b.p, 1, b.n, f);
			if (f != stdout && fclose(f) != 0) {
				fw_warn("%s: %s", o->out, strerror(errno));
				status = FW_EXIT_DATA;
			}
		}
	}
	fw_buf_free(&b);
	fw_gsum_free(s);
	return status;
}

static int usage_error(const char *fmt, const char *arg)
{
	return fw_usage_error(usage_text, fmt, arg);
}

int main(int argc, char **argv)
{
	fw_cli_init("grade");
	fw_usage_init(usage_text, options);
	struct opts o = { .jobs = 1, .level = -1, .retire_at = 0.9, .recent = 3 };
	o.g.reward = FW_REWARD_RESOLVED;
	enum { O_STORE = 256, O_REWARD, O_HACKS, O_SHARD, O_TIMEOUT, O_NO_TIME, O_PROGRESS,
	       O_SUMMARY, O_RETIRE_AT, O_RECENT, O_RECORDS, O_VERSION, O_JUDGE, O_RUBRIC,
	       O_JUDGE_TOK, O_ENV, O_ENV_STORE, O_JUDGE_ONLY, O_DISTIL, O_STUDENT };
	static const struct option longopts[] = {
		{ "store", required_argument, NULL, O_STORE },
		{ "reward", required_argument, NULL, O_REWARD },
		{ "hacks", required_argument, NULL, O_HACKS },
		{ "jobs", required_argument, NULL, 'j' },
		{ "shard", required_argument, NULL, O_SHARD },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "no-time", no_argument, NULL, O_NO_TIME },
		{ "output", required_argument, NULL, 'o' },
		{ "progress", no_argument, NULL, O_PROGRESS },
		{ "summary", no_argument, NULL, O_SUMMARY },
		{ "retire-at", required_argument, NULL, O_RETIRE_AT },
		{ "recent", required_argument, NULL, O_RECENT },
		{ "records", no_argument, NULL, O_RECORDS },
		{ "judge", required_argument, NULL, O_JUDGE },
		{ "rubric", required_argument, NULL, O_RUBRIC },
		{ "judge-tokenizer", required_argument, NULL, O_JUDGE_TOK },
		{ "env", required_argument, NULL, O_ENV },
		{ "env-store", required_argument, NULL, O_ENV_STORE },
		{ "judge-only", no_argument, NULL, O_JUDGE_ONLY },
		{ "distil", required_argument, NULL, O_DISTIL },
		{ "student", required_argument, NULL, O_STUDENT },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	int ch, k, grade_only = 0, summary_only = 0;
	while ((ch = getopt_long(argc, argv, "j:o:zh", longopts, NULL)) != -1) {
		switch (ch) {
		case O_STORE: o.g.store = optarg; grade_only = 1; break;
		case O_REWARD:
			if (!strncmp(optarg, "mix:", 4)) {
				char e[200];
				fw_mix_clear(&o.mix);
				if (fw_mix_parse(&o.mix, optarg, e, sizeof e) < 0)
					return usage_error("bad reward: %s", e);
				o.have_mix = 1;
				o.g.reward = (enum fw_reward)o.mix.test;
			} else if ((k = fw_reward_parse(optarg)) < 0) {
				return usage_error("unknown reward '%s' (resolved, f2p, shaped, mix:...)",
						   optarg);
			} else {
				o.g.reward = (enum fw_reward)k;
				o.have_mix = 0;
			}
			grade_only = 1;
			break;
		case O_HACKS:
			if (strcmp(optarg, "zero") == 0)
				o.g.hacks_warn = 0;
			else if (strcmp(optarg, "warn") == 0)
				o.g.hacks_warn = 1;
			else
				return usage_error("unknown hacks mode '%s' (zero, warn)", optarg);
			grade_only = 1;
			break;
		case 'j':
			if (fw_parse_u64(optarg, &o.jobs, 0) < 0 || o.jobs < 1 || o.jobs > 64)
				return usage_error("bad job count '%s' (1..64)", optarg);
			grade_only = 1;
			break;
		case O_SHARD:
			if (fw_parse_shard(optarg, &o.shard_k, &o.shard_n) < 0)
				return usage_error("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			grade_only = 1;
			break;
		case O_TIMEOUT:
			if (fw_parse_double(optarg, &o.g.timeout_s) < 0 || !(o.g.timeout_s > 0))
				return usage_error("bad timeout '%s'", optarg);
			grade_only = 1;
			break;
		case O_NO_TIME: o.g.no_time = 1; grade_only = 1; break;
		case O_JUDGE: o.judge = optarg; grade_only = 1; break;
		case O_RUBRIC: o.rubric = optarg; grade_only = 1; break;
		case O_JUDGE_TOK: o.judge_tok = optarg; grade_only = 1; break;
		case O_ENV: o.g.env = optarg; grade_only = 1; break;
		case O_ENV_STORE: o.g.env_store = optarg; grade_only = 1; break;
		case O_JUDGE_ONLY: o.judge_only = 1; grade_only = 1; break;
		case O_DISTIL: o.distil = optarg; grade_only = 1; break;
		case O_STUDENT: o.student = optarg; grade_only = 1; break;
		case 'o': o.out = optarg; break;
		case 'z': o.level = 3; break;
		case O_PROGRESS: o.progress = 1; break;
		case O_SUMMARY: o.summary = 1; break;
		case O_RETIRE_AT:
			if (fw_parse_double(optarg, &o.retire_at) < 0 || o.retire_at < 0 ||
			    o.retire_at > 1)
				return usage_error("bad pass rate '%s' (0..1)", optarg);
			summary_only = 1;
			break;
		case O_RECENT:
			if (fw_parse_u64(optarg, &o.recent, 0) < 0 || o.recent < 1)
				return usage_error("bad checkpoint count '%s'", optarg);
			summary_only = 1;
			break;
		case O_RECORDS: o.records = 1; summary_only = 1; break;
		case 'h': fw_help(); return fw_close_stdout() ? FW_EXIT_DATA : 0;
		case O_VERSION: fw_print_version(); return fw_close_stdout() ? FW_EXIT_DATA : 0;
		default: fputs(usage_text, stderr); return FW_EXIT_USAGE;
		}
	}
	if (o.summary && grade_only)
		return usage_error("%s", "--summary takes no grading options");
	if (!o.summary && summary_only)
		return usage_error("%s", "--retire-at, --recent and --records need --summary");
	if (!o.judge != !o.rubric)
		return usage_error("%s", "--judge and --rubric go together");
	if (o.have_mix && !o.judge)
		return usage_error("%s", "a mix: reward needs --judge and --rubric");
	if ((o.judge_only || o.distil) && !o.judge)
		return usage_error("%s", "--judge-only and --distil need --judge and --rubric");
	if (!o.distil != !o.student)
		return usage_error("%s", "--distil and --student go together");
	o.files = argv + optind;
	o.nfiles = argc - optind;
	int status = o.summary ? summary_main(&o) : grade_main(&o);
	fw_mix_clear(&o.mix);
	if (fw_close_stdout() < 0)
		status = FW_EXIT_DATA;
	return status;
}
