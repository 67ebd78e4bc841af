/*
 * rollout — run a policy on task records in the clean room and write what
 * it did as rollout records.  See rollout(1).
 *
 * Options and the record loop; a task is rolled out by fw_rollout_task()
 * (fw_rollout_run.h).  With -j N the records go to the shared ordered pool
 * (fw_pool) of N threads, each with its own policy, and are written back
 * in input order by the main thread, which also reads.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_agent_tools.h"
#include "fw_cli.h"
#include "fw_mp.h"
#include "fw_rollout_run.h"
#include "fw_stream.h"
#include "kernels_dev.h"

static const char usage_text[] =
	"usage: rollout --policy builtin:DIR | http:URL | exec:CMD [--model NAME] [--store DIR]\n"
	"               [--mode fill | agent [--tools] [--tool-defs FILE]]\n"
	"               [--samples K] [--seed S] [--temp T] [--top-p P] [--top-k K]\n"
	"               [--max-tokens N] [--context BYTES] [--max-steps N] [-j N] [--shard K/N]\n"
	"               [--allow HOST ...]\n"
	"               [--mount PATH ...] [--env DIR | ID] [--env-store DIR]\n"
	"               [--timeout SEC] [--ignore-stop] [--no-time]\n"
	"               [--progress] [--device cpu|cuda[:N]] [-z] [-o OUT] [FILE ...]\n"
	"       rollout --print-tools [--tool-defs FILE]\n"
	"       rollout -h | --help | --version\n";

static const struct fw_opt_doc options[] = {
	{ "--policy SPEC", "the policy: builtin:DIR, http:URL or exec:CMD" },
	{ "--model NAME", "http: the model name sent to the server" },
	{ "--store DIR", "the task store" },
	{ "--mode fill | agent", "the episode of a builtin or http policy (default fill)" },
	{ "--tools", "agent: offer the tool-calling tools" },
	{ "--tool-defs FILE", "agent: tools defined by the user, run as programs in the clean room (implies --tools)" },
	{ "--print-tools", "print the tools of --tools as the JSON array sent to servers, and exit" },
	{ "--samples K", "rollouts per task (default 1)" },
	{ "--seed S", "base seed (default 0)" },
	{ "--temp T", "sampling temperature" },
	{ "--top-p P", "nucleus sampling mass" },
	{ "--top-k K", "sample among the K likeliest tokens" },
	{ "--max-tokens N", "fill: tokens generated at most" },
	{ "--context BYTES", "fill: bytes of context around the site" },
	{ "--max-steps N", "agent: steps at most" },
	{ "-j N", "tasks run at once (1 to 64)" },
	{ "--shard K/N", "run only the tasks whose id hashes to K modulo N" },
	{ "--allow HOST", "exec and agent: a host the sandbox may reach" },
	{ "--mount PATH", "exec and agent: a path mounted read-only in the sandbox" },
	{ "--env DIR | ID", "exec and agent: the environment the episode runs in" },
	{ "--env-store DIR", "exec and agent: where environments are found" },
	{ "--timeout SEC", "exec and agent: wall-clock limit of one episode" },
	{ "--ignore-stop", "fill: generate past the stop sequence" },
	{ "--no-time", "leave time out" },
	{ "--progress", "a progress meter on standard error even when it is not a terminal" },
	{ "--device cpu|cuda[:N]", "where builtin policies run" },
	{ "-z", "compress the output with zstd" },
	{ "-o OUT", "write to OUT (replaced atomically) instead of standard output" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

struct opts {
	struct fw_rollout_cfg c; /* what an episode needs */
	const char *out;
	uint64_t jobs, shard_k, shard_n;
	int progress, level;
	char **files;
	int nfiles;
};

/* A run: the workers' policies, the output and what was written. */
struct run {
	const struct opts *o;
	struct fw_rollout_worker *ws;
	int next_worker;     /* the next of ws a pool worker takes */
	struct fw_writer *out;
	/* the output is flushed after every `batch` records of a file and at
	 * its end, so that a reader downstream gets them in steps */
	size_t batch, unflushed;
	int status, werr;
};

static void *take_worker(void *arg)
{
	struct run *R = arg;
	return &R->ws[__atomic_fetch_add(&R->next_worker, 1, __ATOMIC_RELAXED)];
}

static int work(void *w, void *job, void *arg)
{
	fw_rollout_job_run(w, job);
	return 0;
}

static void drop(void *job, void *arg)
{
	fw_rollout_job_free(job);
}

/* Flushes what was written, so that a reader downstream has it. */
static int flush_out(struct run *R)
{
	R->unflushed = 0;
	if (!fw_writer_flush(R->out))
		return 0;
	fw_warn("write error: %s", fw_writer_error(R->out));
	R->werr = 1;
	return -1;
}

/* On the caller's thread, in input order: says what failed and writes the
 * job's records.  Returns -1 on a write error, which ends the run. */
static int done(void *job, int rc, void *arg)
{
	struct run *R = arg;
	struct fw_rollout_job *j = job;
	if (j->r.failed) {
		fw_warn_rec(j->file, j->index, j->offset, "%d of %d samples failed: %s",
			    j->r.failed, (int)R->o->c.samples, j->r.err);
		R->status = FW_EXIT_DATA;
	}
	if (j->r.out.n && fw_writer_put(R->out, j->r.out.p, j->r.out.n)) {
		fw_warn("write error: %s", fw_writer_error(R->out));
		R->werr = 1;
	}
	fw_rollout_job_free(j);
	if (!R->werr && ++R->unflushed == R->batch)
		flush_out(R);
	return R->werr ? -1 : 0;
}

/* Reads one operand into the pool and writes all it gave. */
static void roll_file(struct run *R, struct fw_pool *pool, struct fw_progress *prog,
		      uint64_t *nrec, const char *file)
{
	char err[1024];
	struct fw_reader *r = fw_reader_open(file, NULL, err, sizeof err);
	struct fw_rec rec;
	int rc;

	if (!r) {
		fw_warn("%s", err);
		R->status = FW_EXIT_DATA;
		return;
	}
	while ((rc = fw_reader_next(r, &rec)) != 0) {
		if (rc < 0) {
			/* one diagnostic, then the next file: input that
			 * is not records is not read value by value */
			fw_warn_reader(r);
			R->status = FW_EXIT_DATA;
			break;
		}
		int task = fw_mp_kind_is(rec.v, "task");
		if (task && R->o->shard_n && !fw_shard_keep(rec.v, R->o->shard_k, R->o->shard_n))
			continue;
		struct fw_rollout_job *j = fw_rollout_job_new(rec.v, task, fw_reader_name(r),
							      rec.index, rec.offset);
		if (!j) {
			fw_warn("out of memory");
			R->status = FW_EXIT_DATA;
			break;
		}
		if (fw_pool_submit(pool, j) < 0)
			break;
		fw_progress_tick(prog, ++*nrec, fw_reader_bytes_in(r));
	}
	/* names point into the reader: write what it gave before closing */
	if (!fw_pool_drain(pool) && R->unflushed)
		flush_out(R);
	fw_reader_close(r);
}

static int rollout_main(struct opts *o)
{
	int nw = (int)o->jobs;
	char err[1024];
	struct fw_rollout_worker ws[64];
	struct run R = { .o = o, .ws = ws, .batch = (size_t)nw * 4 };
	struct fw_progress prog;
	uint64_t nrec = 0;

	memset(ws, 0, sizeof ws);
	if (fw_rollout_workers_load(ws, nw, &o->c, err, sizeof err)) {
		fw_warn("%s", err);
		R.status = FW_EXIT_DATA;
	}
	const struct fw_pool_conf pc = { .workers = nw, .window = R.batch, .worker_init = take_worker,
					 .work = work, .done = done, .drop = drop, .arg = &R };
	struct fw_pool *pool = NULL;
	if (!(R.out = fw_writer_open(o->out, o->level, err, sizeof err))) {
		fw_warn("%s", err);
		R.status = FW_EXIT_DATA;
		goto out;
	}
	if (!(pool = fw_pool_new(&pc))) {
		fw_warn("cannot start a worker thread");
		fw_writer_abort(R.out);
		R.status = FW_EXIT_DATA;
		goto out;
	}
	fw_progress_start(&prog, o->progress);
	struct fw_operands ops;
	fw_operands_init(&ops, o->nfiles, o->files, 0);
	for (const char *file; !R.werr && (file = fw_operands_next(&ops));)
		roll_file(&R, pool, &prog, &nrec, file);
	fw_pool_finish(pool);
	fw_pool_free(pool);
	if (R.werr) {
		fw_writer_abort(R.out);
		R.status = FW_EXIT_DATA;
	} else {
		fw_progress_end(&prog);
		if (fw_writer_close(R.out, err, sizeof err)) {
			fw_warn("%s", err);
			R.status = FW_EXIT_DATA;
		}
	}
out:
	for (int i = 0; i < nw; i++)
		fw_rollout_worker_release(&ws[i]);
	return R.status;
}

static int push(const char ***v, size_t *n, const char *s)
{
	const char **p = realloc(*v, sizeof(*p) * (*n + 2));

	if (!p)
		return -1;
	p[(*n)++] = s;
	p[*n] = NULL;
	*v = p;
	return 0;
}

int main(int argc, char **argv)
{
	fw_cli_init("rollout");
	fw_usage_init(usage_text, options);
	struct opts o = { .c = { .samples = 1, .max_tokens = 256, .temp = 1.0, .top_p = 1.0,
				.timeout_s = 600, .max_steps = 20 },
			  .jobs = 1, .level = -1 };
	enum { O_POLICY = 256, O_STORE, O_MODE, O_SAMPLES, O_SEED, O_TEMP, O_TOP_P, O_TOP_K,
	       O_MAX_TOKENS, O_CONTEXT, O_SHARD, O_ALLOW, O_MOUNT, O_TIMEOUT, O_NO_TIME, O_PROGRESS,
	       O_IGNORE_STOP, O_MAX_STEPS, O_MODEL, O_DEVICE, O_VERSION, O_ENV, O_ENV_STORE, O_TOOLS,
	       O_PRINT_TOOLS, O_TOOL_DEFS };
	static const struct option longopts[] = {
		{ "policy", required_argument, NULL, O_POLICY },
		{ "store", required_argument, NULL, O_STORE },
		{ "mode", required_argument, NULL, O_MODE },
		{ "samples", required_argument, NULL, O_SAMPLES },
		{ "seed", required_argument, NULL, O_SEED },
		{ "temp", required_argument, NULL, O_TEMP },
		{ "top-p", required_argument, NULL, O_TOP_P },
		{ "top-k", required_argument, NULL, O_TOP_K },
		{ "max-tokens", required_argument, NULL, O_MAX_TOKENS },
		{ "context", required_argument, NULL, O_CONTEXT },
		{ "jobs", required_argument, NULL, 'j' },
		{ "shard", required_argument, NULL, O_SHARD },
		{ "allow", required_argument, NULL, O_ALLOW },
		{ "mount", required_argument, NULL, O_MOUNT },
		{ "env", required_argument, NULL, O_ENV },
		{ "env-store", required_argument, NULL, O_ENV_STORE },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "no-time", no_argument, NULL, O_NO_TIME },
		{ "ignore-stop", no_argument, NULL, O_IGNORE_STOP },
		{ "tools", no_argument, NULL, O_TOOLS },
		{ "print-tools", no_argument, NULL, O_PRINT_TOOLS },
		{ "tool-defs", required_argument, NULL, O_TOOL_DEFS },
		{ "max-steps", required_argument, NULL, O_MAX_STEPS },
		{ "model", required_argument, NULL, O_MODEL },
		{ "device", required_argument, NULL, O_DEVICE },
		{ "progress", no_argument, NULL, O_PROGRESS },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	int ch;
	uint64_t u;
	const char *device = NULL;
	int print_tools = 0;

	while ((ch = getopt_long(argc, argv, "j:o:zh", longopts, NULL)) != -1) {
		switch (ch) {
		case O_POLICY: o.c.policy = optarg; break;
		case O_DEVICE: device = optarg; break;
		case O_STORE: o.c.store = optarg; break;
		case O_MODE:
			if (!strcmp(optarg, "agent"))
				o.c.agent = 1;
			else if (strcmp(optarg, "fill"))
				return fw_usage_fail("unknown mode '%s' (fill, agent)", optarg);
			break;
		case O_MAX_STEPS:
			if (fw_parse_u64(optarg, &o.c.max_steps, 0) || o.c.max_steps > 100000)
				return fw_usage_fail("bad step count '%s'", optarg);
			break;
		case O_SAMPLES:
			if (fw_parse_u64(optarg, &o.c.samples, 0) || o.c.samples < 1 || o.c.samples > 1024)
				return fw_usage_fail("bad sample count '%s' (1..1024)", optarg);
			break;
		case O_SEED:
			if (fw_parse_u64(optarg, &o.c.seed, 0))
				return fw_usage_fail("bad seed '%s'", optarg);
			break;
		case O_TEMP:
			if (fw_parse_double(optarg, &o.c.temp) || !(o.c.temp >= 0))
				return fw_usage_fail("bad temperature '%s'", optarg);
			break;
		case O_TOP_P:
			if (fw_parse_double(optarg, &o.c.top_p) || !(o.c.top_p > 0 && o.c.top_p <= 1))
				return fw_usage_fail("bad top-p '%s' (0 < P <= 1)", optarg);
			break;
		case O_TOP_K:
			if (fw_parse_u64(optarg, &u, 0) || u > 1u << 24)
				return fw_usage_fail("bad top-k '%s'", optarg);
			o.c.top_k = (int)u;
			break;
		case O_CONTEXT:
			if (fw_parse_u64(optarg, &o.c.context, 0) || o.c.context < 1 ||
			    o.c.context > 1u << 30)
				return fw_usage_fail("bad --context '%s'", optarg);
			break;
		case O_MAX_TOKENS:
			if (fw_parse_u64(optarg, &o.c.max_tokens, 0) || o.c.max_tokens < 1 ||
			    o.c.max_tokens > 1u << 20)
				return fw_usage_fail("bad token count '%s'", optarg);
			break;
		case 'j':
			if (fw_parse_u64(optarg, &o.jobs, 0) || o.jobs < 1 || o.jobs > 64)
				return fw_usage_fail("bad job count '%s' (1..64)", optarg);
			break;
		case O_SHARD:
			if (fw_parse_shard(optarg, &o.shard_k, &o.shard_n))
				return fw_usage_fail("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case O_ALLOW:
			if (push(&o.c.allow, &o.c.nallow, optarg))
				return FW_EXIT_DATA;
			break;
		case O_MOUNT:
			if (push(&o.c.mounts, &o.c.nmounts, optarg))
				return FW_EXIT_DATA;
			break;
		case O_ENV: o.c.env = optarg; break;
		case O_ENV_STORE: o.c.env_store = optarg; break;
		case O_TIMEOUT:
			if (fw_parse_double(optarg, &o.c.timeout_s) || !(o.c.timeout_s > 0))
				return fw_usage_fail("bad timeout '%s'", optarg);
			break;
		case O_NO_TIME: o.c.no_time = 1; break;
		case O_MODEL: o.c.model = optarg; break;
		case O_IGNORE_STOP: o.c.ignore_stop = 1; break;
		case O_TOOLS: o.c.tools = 1; break;
		case O_PRINT_TOOLS: print_tools = 1; break;
		case O_TOOL_DEFS: o.c.tool_defs = optarg; break;
		case O_PROGRESS: o.progress = 1; break;
		case 'o': o.out = optarg; break;
		case 'z': o.level = 3; break;
		case 'h': return fw_help_exit();
		case O_VERSION: return fw_version_exit();
		default: return fw_usage_exit();
		}
	}
	if (o.c.tool_defs) {
		char err[1024];

		if (!(o.c.toolset = fw_toolset_load(o.c.tool_defs, err, sizeof err))) {
			fw_warn("%s: %s", o.c.tool_defs, err);
			return FW_EXIT_DATA;
		}
	}
	if (print_tools) {
		/* the tools an agent with --tools is given, as sent */
		puts(fw_toolset_json(o.c.toolset));
		fw_toolset_free(o.c.toolset);
		return fw_close_stdout() ? FW_EXIT_DATA : 0;
	}
	if (!o.c.policy)
		return fw_usage_fail("%s", "--policy is required");
	if (fw_rollout_cfg_policy(&o.c))
		return fw_usage_fail("unknown policy '%s' (builtin:DIR, http:URL, exec:CMD)", o.c.policy);
	if (o.c.tool_defs)
		o.c.tools = 1;
	if (o.c.tools && !o.c.agent)
		return fw_usage_fail("%s", o.c.tool_defs ? "--tool-defs needs --mode agent"
						     : "--tools needs --mode agent");
	if (o.c.agent && o.c.backend == FW_POLICY_EXEC)
		return fw_usage_fail("%s", "--mode agent needs a builtin or http policy");
	if (o.c.model && o.c.backend != FW_POLICY_HTTP)
		return fw_usage_fail("%s", "--model needs an http policy");
	if (device && o.c.backend != FW_POLICY_BUILTIN)
		return fw_usage_fail("%s", "--device needs a builtin policy");
	if (o.c.backend == FW_POLICY_BUILTIN) {
		char derr[256];

		if (fw_dev_select(device, derr, sizeof(derr)) < 0) {
			fw_warn("%s", derr);
			return FW_EXIT_DATA;
		}
	}
	o.files = argv + optind;
	o.nfiles = argc - optind;
	int status = rollout_main(&o);
	free(o.c.allow);
	free(o.c.mounts);
	fw_toolset_free(o.c.toolset);
	if (fw_close_stdout() < 0)
		status = FW_EXIT_DATA;
	return status;
}
