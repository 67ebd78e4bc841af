/*
 * grade — rollouts in, rollouts with a `grade` sub-map out: the task's
 * tests run in the clean room on the patched task tree, protected files
 * restored, hack detectors applied.  `grade --summary` turns graded
 * rollouts into pass rates, pass@k and retirement lists.  See grade(1).
 *
 * Options and the record loop; a rollout is graded by fw_grade_rollout()
 * (fw_grade.h).  With -j N the records go to the shared ordered pool
 * (fw_pool) of N threads, each with its own grader, and are judged and
 * written back in input order by the main thread, which also reads.
 */
#include <getopt.h>
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

/* ---- grading: workers grade, the caller writes in input order ------------ */

struct run {
	const struct opts *o;
	struct fw_writer *w;
	struct fw_progress prog;
	uint64_t written, errors, passed;
	int status;
	int fatal;
	struct fw_grade_judging jg; /* --judge: the judge's pass, and --distil */
};

static void *grader_init(void *arg)
{
	const struct run *r = arg;
	return fw_grader_new(&r->o->g);
}

static void grader_fini(void *g, void *arg)
{
	fw_grader_free(g);
}

static int grade_job(void *g, void *job, void *arg)
{
	return fw_grade_job_run(g, job);
}

static void drop_job(void *job, void *arg)
{
	fw_grade_job_free(job);
}

/* On the caller's thread, in input order: judges and writes one record.
 * Returns 0, or -1 on a write error or a fatal grading error. */
static int write_job(void *job, int rc, void *arg)
{
	struct run *r = arg;
	struct fw_grade_job *j = job;
	int wrc = 0;
	if (j->pass) {
		wrc = fw_writer_put(r->w, j->in.p, j->in.n);
		r->passed++;
	} else if (rc < 0) {
		fw_warn_rec(j->file, j->index, j->offset, "%s", j->err);
		r->fatal = 1;
	} else {
		if (rc == 1) {
			fw_warn_rec(j->file, j->index, j->offset, "%s", j->err);
			r->errors++;
		}
		if (r->jg.judge && fw_grade_judge_record(&r->jg, &j->out, j->err, sizeof j->err) < 0) {
			fw_warn_rec(j->file, j->index, j->offset, "judge: %s", j->err);
			r->fatal = 1;
		} else {
			wrc = fw_writer_put(r->w, j->out.p, j->out.n);
		}
	}
	if (wrc < 0) {
		fw_warn("write error: %s", fw_writer_error(r->w));
		r->fatal = 1;
	}
	r->written++;
	fw_progress_tick(&r->prog, r->written, 0);
	fw_grade_job_free(j);
	return r->fatal ? -1 : 0;
}

/* Reads one operand into the pool; the jobs borrow its name. */
static void grade_file(struct run *r, struct fw_pool *pool, const char *file)
{
	char err[512];
	struct fw_reader *rd = fw_reader_open(file, NULL, err, sizeof err);
	if (!rd) {
		fw_warn("%s", err);
		r->status = FW_EXIT_DATA;
		return;
	}
	struct fw_rec rec;
	int k;
	while ((k = fw_reader_next(rd, &rec)) == 1) {
		if (r->o->shard_n && !fw_shard_keep(rec.v, r->o->shard_k, r->o->shard_n))
			continue;
		struct fw_grade_job *j = fw_grade_job_new(rec.v, r->o->judge_only, file, rec.index,
							  rec.offset);
		if (!j) {
			fw_warn("out of memory");
			r->fatal = 1;
			break;
		}
		if (fw_pool_submit(pool, j) < 0)
			break;
	}
	if (k < 0) {
		fw_warn_reader(rd);
		r->status = FW_EXIT_DATA;
	}
	/* the rest of this file is written before the next is opened, so that
	 * a fatal error ends the run where it did with one worker */
	fw_pool_drain(pool);
	fw_reader_close(rd);
}

static int grade_main(struct opts *o)
{
	struct run r;
	memset(&r, 0, sizeof r);
	r.o = o;
	char err[512];
	r.jg = (struct fw_grade_judging){ .mix = o->have_mix ? &o->mix : NULL,
					  .hacks_warn = o->g.hacks_warn,
					  .judge_only = o->judge_only,
					  .distil = o->distil, .distil_level = o->level };
	int jk = o->judge ? fw_grade_judging_open(&r.jg, o->judge, o->judge_tok,
						  o->g.timeout_s > 0 ? o->g.timeout_s : 600,
						  o->rubric, o->student, err, sizeof err)
			  : 0;
	if (jk < 0) {
		if (jk == -3)
			fw_warn("--student %s: %s", o->student, err);
		else
			fw_warn(jk == -2 ? "--reward: %s" : "%s", err);
		goto fail;
	}
	r.w = fw_writer_open(o->out, o->level, err, sizeof err);
	if (!r.w) {
		fw_warn("%s", err);
		goto fail;
	}
	const struct fw_pool_conf pc = {
		.workers = (int)o->jobs, .worker_init = grader_init, .worker_fini = grader_fini,
		.work = grade_job, .done = write_job, .drop = drop_job, .arg = &r,
	};
	struct fw_pool *pool = fw_pool_new(&pc);
	if (!pool) {
		fw_warn("cannot start a worker thread");
		goto fail;
	}
	fw_progress_start(&r.prog, o->progress);

	struct fw_operands ops;
	fw_operands_init(&ops, o->nfiles, o->files, 0);
	for (const char *file; !r.fatal && (file = fw_operands_next(&ops));)
		grade_file(&r, pool, file);
	fw_pool_finish(pool);
	fw_pool_free(pool);
	fw_progress_end(&r.prog);
	if (fw_writer_close(r.w, err, sizeof err) < 0) {
		fw_warn("%s", err);
		r.status = FW_EXIT_DATA;
	}
	if (o->distil) {
		if (fw_grade_judging_distil_close(&r.jg, err, sizeof err) < 0) {
			fw_warn("--distil: %s", err);
			r.status = FW_EXIT_DATA;
		} else {
			fw_warn("%llu examples for the student in %s",
				(unsigned long long)r.jg.distilled, o->distil);
		}
	}
	fw_grade_judging_release(&r.jg);
	if (r.passed)
		fw_warn("%llu records that are not rollouts passed through ungraded",
			(unsigned long long)r.passed);
	if (r.errors || r.fatal)
		r.status = FW_EXIT_DATA;
	return r.status;
fail:
	fw_writer_abort(r.w);
	fw_grade_judging_release(&r.jg);
	return FW_EXIT_DATA;
}

/* ---- summary ------------------------------------------------------------------ */

struct summary {
	struct fw_gsum *s;
	int bad; /* a record could not be counted */
};

/* One graded record into the summary; other kinds pass through grading
 * and are not counted.  Stops (-1) when memory runs out. */
static int summary_add(struct fw_each *e, const struct fw_rec *rec, const char *file)
{
	struct summary *sum = e->arg;
	char err[512];
	if (!fw_mp_kind_is(rec->v, "rollout"))
		return 0;
	int a = fw_gsum_add(sum->s, rec->v, err, sizeof err);
	if (a < 0) {
		fw_warn("out of memory");
		return -1;
	}
	if (a == 1) {
		fw_warn_rec(file, rec->index, rec->offset, "%s", err);
		sum->bad = 1;
	}
	return 0;
}

static int summary_main(struct opts *o)
{
	struct fw_gsum *s = fw_gsum_new((unsigned)o->recent, o->retire_at);
	if (!s) {
		fw_warn("out of memory");
		return FW_EXIT_DATA;
	}
	char err[512];
	struct summary sum = { s, 0 };
	struct fw_each e = { .progress = o->progress, .arg = &sum };
	int status = fw_each_record(&e, o->nfiles, o->files, 0, summary_add);
	if (e.stopped) {
		fw_gsum_free(s);
		return FW_EXIT_DATA;
	}
	if (sum.bad)
		status = FW_EXIT_DATA;
	const struct fw_gsum_row *rows;
	long n = fw_gsum_rows(s, &rows);
	if (n < 0) {
		fw_warn("out of memory");
		fw_gsum_free(s);
		return FW_EXIT_DATA;
	}
	if (o->records) {
		struct fw_writer *w = fw_writer_open(o->out, o->level, err, sizeof err);
		if (!w || fw_gsum_put_rows(w, rows, n, err, sizeof err) < 0) {
			fw_warn("%s", err);
			status = FW_EXIT_DATA;
		}
		if (w && fw_writer_close(w, err, sizeof err) < 0) {
			fw_warn("%s", err);
			status = FW_EXIT_DATA;
		}
	} else if (fw_gsum_write_text(s, rows, n, o->out, err, sizeof err) < 0) {
		fw_warn("%s", err);
		status = FW_EXIT_DATA;
	}
	fw_gsum_free(s);
	return status;
}

int main(int argc, char **argv)
{
	fw_cli_init("grade");
	fw_usage_init(usage_text, options);
	struct opts o = { .jobs = 1, .level = -1, .retire_at = 0.9, .recent = 3 };
	o.g.reward = FW_REWARD_RESOLVED;
	/* grading's options, then --summary's, then those of both */
	enum { O_STORE = 256, O_REWARD, O_HACKS, O_SHARD, O_TIMEOUT, O_NO_TIME, O_JUDGE, O_RUBRIC,
	       O_JUDGE_TOK, O_ENV, O_ENV_STORE, O_JUDGE_ONLY, O_DISTIL, O_STUDENT,
	       O_RETIRE_AT, O_RECENT, O_RECORDS, O_PROGRESS, O_SUMMARY, O_VERSION };
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
	int ch, grade_only = 0, summary_only = 0;
	char err[4096]; /* a usage message quotes the argument */
	while ((ch = getopt_long(argc, argv, "j:o:zh", longopts, NULL)) != -1) {
		grade_only |= ch == 'j' || (ch >= O_STORE && ch <= O_STUDENT);
		summary_only |= ch >= O_RETIRE_AT && ch <= O_RECORDS;
		switch (ch) {
		case O_STORE: o.g.store = optarg; break;
		case O_REWARD:
			fw_mix_release(&o.mix);
			if (fw_grade_reward_opt(optarg, &o.g.reward, &o.mix, &o.have_mix, err,
						sizeof err) < 0)
				return fw_usage_fail("%s", err);
			break;
		case O_HACKS:
			if (strcmp(optarg, "zero") == 0)
				o.g.hacks_warn = 0;
			else if (strcmp(optarg, "warn") == 0)
				o.g.hacks_warn = 1;
			else
				return fw_usage_fail("unknown hacks mode '%s' (zero, warn)", optarg);
			break;
		case 'j':
			if (fw_parse_u64(optarg, &o.jobs, 0) < 0 || o.jobs < 1 || o.jobs > 64)
				return fw_usage_fail("bad job count '%s' (1..64)", optarg);
			break;
		case O_SHARD:
			if (fw_parse_shard(optarg, &o.shard_k, &o.shard_n) < 0)
				return fw_usage_fail("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case O_TIMEOUT:
			if (fw_parse_double(optarg, &o.g.timeout_s) < 0 || !(o.g.timeout_s > 0))
				return fw_usage_fail("bad timeout '%s'", optarg);
			break;
		case O_NO_TIME: o.g.no_time = 1; break;
		case O_JUDGE: o.judge = optarg; break;
		case O_RUBRIC: o.rubric = optarg; break;
		case O_JUDGE_TOK: o.judge_tok = optarg; break;
		case O_ENV: o.g.env = optarg; break;
		case O_ENV_STORE: o.g.env_store = optarg; break;
		case O_JUDGE_ONLY: o.judge_only = 1; break;
		case O_DISTIL: o.distil = optarg; break;
		case O_STUDENT: o.student = optarg; break;
		case 'o': o.out = optarg; break;
		case 'z': o.level = 3; break;
		case O_PROGRESS: o.progress = 1; break;
		case O_SUMMARY: o.summary = 1; break;
		case O_RETIRE_AT:
			if (fw_parse_double(optarg, &o.retire_at) < 0 || o.retire_at < 0 ||
			    o.retire_at > 1)
				return fw_usage_fail("bad pass rate '%s' (0..1)", optarg);
			break;
		case O_RECENT:
			if (fw_parse_u64(optarg, &o.recent, 0) < 0 || o.recent < 1)
				return fw_usage_fail("bad checkpoint count '%s'", optarg);
			break;
		case O_RECORDS: o.records = 1; break;
		case 'h': return fw_help_exit();
		case O_VERSION: return fw_version_exit();
		default: return fw_usage_exit();
		}
	}
	if (o.summary && grade_only)
		return fw_usage_fail("%s", "--summary takes no grading options");
	if (!o.summary && summary_only)
		return fw_usage_fail("%s", "--retire-at, --recent and --records need --summary");
	if (!o.judge != !o.rubric)
		return fw_usage_fail("%s", "--judge and --rubric go together");
	if (o.have_mix && !o.judge)
		return fw_usage_fail("%s", "a mix: reward needs --judge and --rubric");
	if ((o.judge_only || o.distil) && !o.judge)
		return fw_usage_fail("%s", "--judge-only and --distil need --judge and --rubric");
	if (!o.distil != !o.student)
		return fw_usage_fail("%s", "--distil and --student go together");
	o.files = argv + optind;
	o.nfiles = argc - optind;
	int status = o.summary ? summary_main(&o) : grade_main(&o);
	fw_mix_release(&o.mix);
	if (fw_close_stdout() < 0)
		status = FW_EXIT_DATA;
	return status;
}
