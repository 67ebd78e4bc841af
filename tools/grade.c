/*
 * grade — rollouts in, rollouts with a `grade` sub-map out: the task's
 * tests run in the clean room on the patched task tree, protected files
 * restored, hack detectors applied.  `grade --summary` turns graded
 * rollouts into pass rates, pass@k and retirement lists.  See grade(1).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_cli.h"
#include "fw_grade.h"
#include "fw_judge.h"
#include "fw_model.h"
#include "fw_mp.h"
#include "fw_tok.h"
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
	struct fw_judge *judge;
	struct fw_rubric *rubric;
	struct fw_verdict *verdicts;
	struct fw_buf jbuf, gbuf, rbuf;
	/* --distil: the student's tokenizer and positions, the examples */
	struct fw_tok *stok;
	int smax_pos;
	struct fw_writer *dw;
	struct fw_buf dbuf, pbuf;
	uint64_t distilled;
};

/*
 * --distil: one SFT example per criterion of the judged record rec, the
 * judge prompt as the student reads it (fitted to its tokenizer and
 * positions) and the verdict as its completion: {prompt, completion:
 * " LABEL", criterion, rubric, id, p}.  Returns 0, or -1 with err filled.
 */
static int distil_record(struct run *r, struct fw_mpv rec, char *err, size_t errlen)
{
	struct fw_mpv idv;
	const char *id = "";
	size_t idn = 0;

	if (fw_mp_get(rec, "id", &idv) == 1)
		fw_mp_str(idv, &id, &idn);
	for (int c = 0; c < r->rubric->n; c++) {
		const struct fw_criterion *cr = &r->rubric->c[c];
		const struct fw_verdict *v = &r->verdicts[c];
		const char *lab = cr->labels[v->label];
		msgpack_packer pk;
		int e = 0;

		if (v->skipped)
			continue;
		fw_buf_reset(&r->pbuf);
		if (fw_judge_prompt_fit(&r->pbuf, r->rubric, c, rec, r->stok, r->smax_pos) < 0)
			goto oom;
		fw_buf_reset(&r->dbuf);
		fw_buf_packer(&pk, &r->dbuf);
		e |= msgpack_pack_map(&pk, 7);
		e |= fw_pack_cstr(&pk, "kind");
		e |= fw_pack_cstr(&pk, "sft");
		e |= fw_pack_cstr(&pk, "prompt");
		e |= msgpack_pack_str(&pk, r->pbuf.n);
		e |= msgpack_pack_str_body(&pk, r->pbuf.p, r->pbuf.n);
		e |= fw_pack_cstr(&pk, "completion");
		e |= msgpack_pack_str(&pk, strlen(lab) + 1);
		e |= msgpack_pack_str_body(&pk, " ", 1);
		e |= msgpack_pack_str_body(&pk, lab, strlen(lab));
		e |= fw_pack_cstr(&pk, "rubric");
		e |= fw_pack_cstr(&pk, r->rubric->id ? r->rubric->id : "");
		e |= fw_pack_cstr(&pk, "criterion");
		e |= fw_pack_cstr(&pk, cr->name);
		e |= fw_pack_cstr(&pk, "id");
		e |= msgpack_pack_str(&pk, idn);
		e |= msgpack_pack_str_body(&pk, id, idn);
		e |= fw_pack_cstr(&pk, "p");
		e |= msgpack_pack_double(&pk, v->p[v->label]);
		if (e)
			goto oom;
		if (fw_writer_put(r->dw, r->dbuf.p, r->dbuf.n) < 0) {
			snprintf(err, errlen, "--distil: %s", fw_writer_error(r->dw));
			return -1;
		}
		r->distilled++;
	}
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* A grade reward as a double (the sub-map's "reward"), or 0. */
static double field_double(struct fw_mpv m, const char *key)
{
	struct fw_mpv v;
	double x = 0;
	if (fw_mp_get(m, key, &v) == 1)
		fw_mp_double(v, &x);
	return x;
}

/*
 * Adds grade.judge to the graded record in s->out: every criterion of the
 * rubric judged; with a mixed reward, grade.reward becomes the mix and
 * grade.reward_tests keeps the tests' own.  Returns 0, or -1 with s->err
 * filled.
 */
static int judge_record(struct run *r, struct slot *s)
{
	const struct opts *o = r->pool.o;
	struct fw_mpv rec = fw_mp_view(s->out.p, s->out.p + s->out.n), g, hacks;
	msgpack_packer pk;

	static const unsigned char empty_map[] = { 0x80 };
	if (fw_mp_get(rec, "grade", &g) != 1) {
		if (!o->judge_only) {
			snprintf(s->err, sizeof s->err, "graded record without a grade map");
			return -1;
		}
		/* --judge-only on a record never graded: the judge is all
		 * its grade */
		g = fw_mp_view(empty_map, empty_map + 1);
	}
	for (int c = 0; c < r->rubric->n; c++)
		if (fw_judge_score(r->judge, r->rubric, c, rec, &r->verdicts[c], s->err,
				   sizeof s->err) < 0)
			return -1;
	if (r->dw && distil_record(r, rec, s->err, sizeof s->err) < 0)
		return -1;
	fw_buf_reset(&r->jbuf);
	fw_buf_packer(&pk, &r->jbuf);
	size_t jn, rn;
	if (fw_judge_pack(&pk, r->rubric, r->verdicts) != 0)
		goto oom;
	jn = rn = r->jbuf.n;
	if (o->have_mix) {
		double T = field_double(g, "reward"), R;
		int64_t nh = 0;
		struct fw_mp_iter it;
		if (fw_mp_get(g, "hacks", &hacks) == 1)
			nh = fw_mp_iter_init(&it, hacks);
		R = fw_mix_reward(&o->mix, T, r->rubric, r->verdicts, s->err, sizeof s->err);
		if (R < 0)
			return -1;
		/* a hack the tests zeroed stays zero: a judge cannot buy it back */
		if (nh > 0 && !o->g.hacks_warn)
			R = 0;
		if (msgpack_pack_double(&pk, R))
			goto oom;
		rn = r->jbuf.n;
		if (msgpack_pack_double(&pk, T))
			goto oom;
	}
	struct fw_field f[3] = {
		{ "judge", 5, fw_mp_view(r->jbuf.p, r->jbuf.p + jn) },
		{ "reward", 6, fw_mp_view(r->jbuf.p + jn, r->jbuf.p + rn) },
		{ "reward_tests", 12, fw_mp_view(r->jbuf.p + rn, r->jbuf.p + r->jbuf.n) },
	};
	fw_buf_reset(&r->gbuf);
	if (fw_rec_set(&r->gbuf, g, f, o->have_mix ? 3 : 1) < 0)
		goto oom;
	struct fw_field fg = { "grade", 5, fw_mp_view(r->gbuf.p, r->gbuf.p + r->gbuf.n) };
	fw_buf_reset(&r->rbuf);
	if (fw_rec_set(&r->rbuf, rec, &fg, 1) < 0)
		goto oom;
	/* the judged record becomes the slot's output; its old bytes are
	 * the next record's scratch */
	struct fw_buf t = s->out;
	s->out = r->rbuf;
	r->rbuf = t;
	return 0;
oom:
	snprintf(s->err, sizeof s->err, "out of memory");
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
			if (r->judge && judge_record(r, s) < 0) {
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
	if (o->judge) {
		if (!(r.rubric = fw_rubric_load(o->rubric, err, sizeof err)) ||
		    !(r.judge = fw_judge_open(o->judge, o->judge_tok, o->g.timeout_s > 0 ? o->g.timeout_s : 600, 2,
					      err, sizeof err)) ||
		    !(r.verdicts = calloc((size_t)r.rubric->n, sizeof *r.verdicts))) {
			fw_warn("%s", r.rubric && r.judge ? "out of memory" : err);
			fw_judge_free(r.judge);
			fw_rubric_free(r.rubric);
			free(p->slots);
			return FW_EXIT_DATA;
		}
		for (int i = 0; o->have_mix && i < o->mix.n; i++)
			if (fw_rubric_find(r.rubric, o->mix.crit[i]) < 0) {
				fw_warn("--reward: criterion '%s' is not in %s", o->mix.crit[i],
					o->rubric);
				fw_judge_free(r.judge);
				fw_rubric_free(r.rubric);
				free(r.verdicts);
				free(p->slots);
				return FW_EXIT_DATA;
			}
	}
	if (o->distil) {
		char path[4096];
		struct fw_config cfg;
		snprintf(path, sizeof path, "%s/tokenizer.json", o->student);
		if (!(r.stok = fw_tok_load(path, err, sizeof err)) ||
		    (snprintf(path, sizeof path, "%s/config.json", o->student),
		     fw_config_load(&cfg, path, err, sizeof err) < 0) ||
		    !(r.dw = fw_writer_open(o->distil, o->level, err, sizeof err))) {
			fw_warn("--student %s: %s", o->student, err);
			fw_tok_free(r.stok);
			fw_judge_free(r.judge);
			fw_rubric_free(r.rubric);
			free(r.verdicts);
			free(p->slots);
			return FW_EXIT_DATA;
		}
		r.smax_pos = cfg.max_pos;
	}
	r.w = fw_writer_open(o->out, o->level, err, sizeof err);
	if (!r.w || !p->slots) {
		fw_warn("%s", r.w ? "out of memory" : err);
		fw_writer_abort(r.w);
		free(p->slots);
		return FW_EXIT_DATA;
	}
	pthread_t th[64];
	size_t nt = 0;
	for (; nt < o->jobs; nt++)
		if (pthread_create(&th[nt], NULL, worker, p) != 0)
			break;
	if (nt == 0) {
		fw_warn("cannot start a worker thread");
		fw_writer_abort(r.w);
		free(p->slots);
		return FW_EXIT_DATA;
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
				(unsigned long long)r.distilled, o->distil);
		}
		fw_tok_free(r.stok);
		fw_buf_free(&r.dbuf);
		fw_buf_free(&r.pbuf);
	}
	for (size_t i = 0; i < p->nslots; i++) {
		fw_buf_free(&p->slots[i].in);
		fw_buf_free(&p->slots[i].out);
	}
	free(p->slots);
	fw_judge_free(r.judge);
	fw_rubric_free(r.rubric);
	free(r.verdicts);
	fw_buf_free(&r.jbuf);
	fw_buf_free(&r.gbuf);
	fw_buf_free(&r.rbuf);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv_work);
	pthread_cond_destroy(&p->cv_done);
	if (r.passed)
		fw_warn("%llu records that are not rollouts passed through ungraded",
			(unsigned long long)r.passed);
	if (r.errors || r.fatal)
		r.status = FW_EXIT_DATA;
	return r.status;
}

/* ---- summary ------------------------------------------------------------------ */

static const char *const scope_names[] = { "checkpoint", "task", "split" };

static void pack_num(msgpack_packer *pk, double x)
{
	if (isnan(x))
		msgpack_pack_nil(pk);
	else
		msgpack_pack_double(pk, x);
}

static int summary_records(const struct fw_gsum_row *rows, long n, struct fw_writer *w)
{
	struct fw_buf b = { 0 };
	int rc = 0;
	for (long i = 0; i < n && rc == 0; i++) {
		const struct fw_gsum_row *r = &rows[i];
		char key[600], id[17], k[8];
		snprintf(key, sizeof key, "%s\n%s", scope_names[r->scope], r->key);
		snprintf(id, sizeof id, "%016llx", (unsigned long long)fw_hash64(key, strlen(key)));
		fw_buf_reset(&b);
		msgpack_packer pk;
		fw_buf_packer(&pk, &b);
		int nf = 16 + (r->scope == FW_GSUM_TASK);
		msgpack_pack_map(&pk, nf);
		fw_pack_cstr(&pk, "kind"); fw_pack_cstr(&pk, "grade-summary");
		fw_pack_cstr(&pk, "id"); fw_pack_cstr(&pk, id);
		fw_pack_cstr(&pk, "v"); msgpack_pack_int(&pk, 1);
		fw_pack_cstr(&pk, "scope"); fw_pack_cstr(&pk, scope_names[r->scope]);
		fw_pack_cstr(&pk, "key"); fw_pack_cstr(&pk, r->key);
		if (r->scope == FW_GSUM_TASK) {
			fw_pack_cstr(&pk, "split");
			fw_pack_cstr(&pk, r->split);
		}
		fw_pack_cstr(&pk, "tasks"); msgpack_pack_uint64(&pk, r->tasks);
		fw_pack_cstr(&pk, "rollouts"); msgpack_pack_uint64(&pk, r->rollouts);
		fw_pack_cstr(&pk, "solved"); msgpack_pack_uint64(&pk, r->solved);
		fw_pack_cstr(&pk, "rate"); pack_num(&pk, r->rate);
		fw_pack_cstr(&pk, "lo"); pack_num(&pk, r->lo);
		fw_pack_cstr(&pk, "hi"); pack_num(&pk, r->hi);
		fw_pack_cstr(&pk, "pass_at");
		int nk = 0;
		for (int j = 0; j < FW_GSUM_NK; j++)
			nk += !isnan(r->pass_at[j]);
		msgpack_pack_map(&pk, nk);
		for (int j = 0; j < FW_GSUM_NK; j++) {
			if (isnan(r->pass_at[j]))
				continue;
			snprintf(k, sizeof k, "%u", fw_gsum_k[j]);
			fw_pack_cstr(&pk, k);
			msgpack_pack_double(&pk, r->pass_at[j]);
		}
		fw_pack_cstr(&pk, "recent_rollouts"); msgpack_pack_uint64(&pk, r->recent_rollouts);
		fw_pack_cstr(&pk, "recent_rate"); pack_num(&pk, r->recent_rate);
		fw_pack_cstr(&pk, "retire");
		r->retire ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
		fw_pack_cstr(&pk, "never_solved");
		r->never_solved ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
		if (fw_writer_put(w, b.p, b.n) < 0) {
			fw_warn("write error: %s", fw_writer_error(w));
			rc = -1;
		}
	}
	fw_buf_free(&b);
	return rc;
}

static void fmt_num(char *buf, size_t n, double x)
{
	if (isnan(x))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.3f", x);
}

/* Prints one table line without its trailing blanks. */
static void put_line(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_line(FILE *f, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	size_t n = strlen(buf);
	while (n && buf[n - 1] == ' ')
		n--;
	fprintf(f, "%.*s\n", (int)n, buf);
}

static void summary_text(FILE *f, struct fw_gsum *s, const struct fw_gsum_row *rows, long n,
			 double retire_at)
{
	int kw = 10;
	for (long i = 0; i < n; i++)
		if ((int)strlen(rows[i].key) > kw)
			kw = (int)strlen(rows[i].key);
	char a[32], b[32], c[32], d[32];
	for (int scope = 0; scope < 3; scope++) {
		int any = 0;
		for (long i = 0; i < n; i++) {
			const struct fw_gsum_row *r = &rows[i];
			if ((int)r->scope != scope)
				continue;
			if (!any) {
				if (scope)
					fputc('\n', f);
				put_line(f, "%-*s  %-7s %5s %8s %6s  %-5s  %-13s  %-6s  %-6s  %-7s  %s",
					kw, scope_names[scope], scope == FW_GSUM_TASK ? "split" : "",
					"tasks", "rollouts", "solved", "rate", "95% wilson", "pass@1",
					"pass@5", "pass@10", scope ? "recent" : "");
				any = 1;
			}
			fmt_num(a, sizeof a, r->rate);
			fmt_num(b, sizeof b, r->pass_at[0]);
			fmt_num(c, sizeof c, r->pass_at[1]);
			fmt_num(d, sizeof d, r->pass_at[2]);
			char ci[40], rec[64];
			snprintf(ci, sizeof ci, "%.3f-%.3f", r->lo, r->hi);
			rec[0] = '\0';
			if (scope) {
				fmt_num(rec, sizeof rec, r->recent_rate);
				if (r->retire)
					strcat(rec, " retire");
				if (r->never_solved)
					strcat(rec, " never-solved");
			}
			put_line(f, "%-*s  %-7s %5llu %8llu %6llu  %-5s  %-13s  %-6s  %-6s  %-7s  %s", kw,
				r->key, r->split ? r->split : "", (unsigned long long)r->tasks,
				(unsigned long long)r->rollouts, (unsigned long long)r->solved, a, ci, b,
				c, d, rec);
		}
	}
	size_t nr;
	const char *const *recent = fw_gsum_recent(s, &nr);
	fprintf(f, "\nrecent checkpoints:");
	for (size_t i = 0; i < nr; i++)
		fprintf(f, "%s %s", i ? "," : "", recent[i]);
	fprintf(f, "\nretire (recent pass rate >= %g):", retire_at);
	int any = 0;
	for (long i = 0; i < n; i++)
		if (rows[i].retire)
			fprintf(f, "%s %s %s", any++ ? "," : "", scope_names[rows[i].scope], rows[i].key);
	fprintf(f, "%s\nnever solved (too hard or broken):", any ? "" : " none");
	any = 0;
	for (long i = 0; i < n; i++)
		if (rows[i].never_solved)
			fprintf(f, "%s task %s", any++ ? "," : "", rows[i].key);
	fprintf(f, "%s\n", any ? "" : " none");
}

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
	if (o->records) {
		struct fw_writer *w = fw_writer_open(o->out, o->level, err, sizeof err);
		if (!w) {
			fw_warn("%s", err);
			status = FW_EXIT_DATA;
		} else {
			if (summary_records(rows, n, w) < 0)
				status = FW_EXIT_DATA;
			if (fw_writer_close(w, err, sizeof err) < 0) {
				fw_warn("%s", err);
				status = FW_EXIT_DATA;
			}
		}
	} else {
		FILE *f = stdout;
		if (o->out && strcmp(o->out, "-") != 0 && !(f = fopen(o->out, "w"))) {
			fw_warn("%s: %s", o->out, strerror(errno));
			fw_gsum_free(s);
			return FW_EXIT_DATA;
		}
		summary_text(f, s, rows, n, o->retire_at);
		if (f != stdout && fclose(f) != 0) {
			fw_warn("%s: %s", o->out, strerror(errno));
			status = FW_EXIT_DATA;
		}
	}
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
