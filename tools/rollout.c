/*
 * rollout — run a policy on task records in the clean room and write what
 * it did as rollout records.  See rollout(1).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_agent_tools.h"
#include "fw_cli.h"
#include "fw_mp.h"
#include "fw_policy.h"
#include "fw_rollout.h"
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

/* One input record and what became of it. */
struct job {
	uint8_t *rec;
	size_t n;
	const char *file;
	uint64_t index, offset;
	int is_task;
	struct fw_rollout_out r; /* the records written for it */
};

/* A worker: its own policy and task store, and the batch it shares. */
struct worker {
	struct fw_rollout_worker w;
	struct job *jobs;
	size_t njobs;
	size_t *next;
	pthread_mutex_t *mu;
};

static void run_job(struct worker *w, struct job *j)
{
	if (!j->is_task)
		fw_buf_append(&j->r.out, j->rec, j->n);
	else
		fw_rollout_task(&w->w, j->rec, j->n, &j->r);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (;;) {
		pthread_mutex_lock(w->mu);
		size_t i = (*w->next)++;
		pthread_mutex_unlock(w->mu);
		if (i >= w->njobs)
			break;
		run_job(w, &w->jobs[i]);
	}
	return NULL;
}

static int is_task(struct fw_mpv rec)
{
	struct fw_mpv k;

	return fw_mp_get(rec, "kind", &k) == 1 && fw_mp_str_eq(k, "task", 4);
}

/* Runs the batch, writes its records in input order, frees them. */
static int flush_batch(struct worker *ws, int nw, struct job *jobs, size_t n,
		       struct fw_writer *out, int *status)
{
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_t th[64];
	size_t next = 0;
	int nt = 0;

	for (int i = 0; i < nw; i++) {
		ws[i].jobs = jobs;
		ws[i].njobs = n;
		ws[i].next = &next;
		ws[i].mu = &mu;
	}
	if (nw == 1 || n == 1) {
		worker_main(&ws[0]);
	} else {
		for (int i = 0; i < nw && (size_t)i < n; i++)
			if (!pthread_create(&th[nt], NULL, worker_main, &ws[i]))
				nt++;
		if (!nt)
			worker_main(&ws[0]);
		for (int i = 0; i < nt; i++)
			pthread_join(th[i], NULL);
	}
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		struct job *j = &jobs[i];
		if (j->r.failed) {
			fw_warn_rec(j->file, j->index, j->offset, "%d of %d samples failed: %s",
				    j->r.failed, (int)ws[0].w.o->samples, j->r.err);
			*status = FW_EXIT_DATA;
		}
		if (!rc && j->r.out.n && fw_writer_put(out, j->r.out.p, j->r.out.n)) {
			fw_warn("write error: %s", fw_writer_error(out));
			rc = -1;
		}
		free(j->rec);
		fw_buf_free(&j->r.out);
	}
	if (!rc && fw_writer_flush(out)) {
		fw_warn("write error: %s", fw_writer_error(out));
		rc = -1;
	}
	return rc;
}

static int rollout_main(struct opts *o)
{
	static char *stdin_only[] = { "-" };
	char **files = o->nfiles ? o->files : stdin_only;
	int nfiles = o->nfiles ? o->nfiles : 1, status = FW_EXIT_OK, nw = (int)o->jobs;
	char err[1024];
	struct worker ws[64];
	size_t cap = (size_t)nw * 4, n = 0;
	struct job *jobs = calloc(cap, sizeof *jobs);
	struct fw_writer *out;
	struct fw_progress prog;
	uint64_t nrec = 0;

	if (!jobs)
		return FW_EXIT_DATA;
	memset(ws, 0, sizeof ws);
	for (int i = 0; i < nw; i++) {
		ws[i].w.o = &o->c;
		if (o->c.backend == FW_POLICY_HTTP &&
		    !(ws[i].w.h = fw_http_new(o->c.arg, o->c.model,
					    getenv("FW_API_KEY") ? "FW_API_KEY" : "OPENAI_API_KEY",
					    o->c.timeout_s, 3, ws[i].w.load_err, sizeof ws[i].w.load_err))) {
			fw_warn("%s", ws[i].w.load_err);
			status = FW_EXIT_DATA;
			break;
		}
		if (o->c.backend == FW_POLICY_BUILTIN &&
		    !(ws[i].w.b = fw_builtin_load(o->c.arg, ws[i].w.load_err, sizeof ws[i].w.load_err))) {
			/* every record says why; the first failure is enough */
			fw_warn("%s", ws[i].w.load_err);
			for (int k = i + 1; k < nw; k++) {
				ws[k].w.o = &o->c;
				memcpy(ws[k].w.load_err, ws[i].w.load_err, sizeof ws[i].w.load_err);
			}
			status = FW_EXIT_DATA;
			break;
		}
	}
	if (!(out = fw_writer_open(o->out, o->level, err, sizeof err))) {
		fw_warn("%s", err);
		status = FW_EXIT_DATA;
		goto done;
	}
	fw_progress_start(&prog, o->progress);
	for (int f = 0; f < nfiles; f++) {
		struct fw_reader *r = fw_reader_open(files[f], NULL, err, sizeof err);
		struct fw_rec rec;
		int rc;

		if (!r) {
			fw_warn("%s", err);
			status = FW_EXIT_DATA;
			continue;
		}
		while ((rc = fw_reader_next(r, &rec)) != 0) {
			if (rc < 0) {
				/* one diagnostic, then the next file: input that
				 * is not records is not read value by value */
				fw_warn_reader(r);
				status = FW_EXIT_DATA;
				break;
			}
			int task = is_task(rec.v);
			if (task && o->shard_n && !fw_shard_keep(rec.v, o->shard_k, o->shard_n))
				continue;
			struct job *j = &jobs[n];
			memset(j, 0, sizeof *j);
			if (!(j->rec = malloc(rec.v.n))) {
				fw_warn("out of memory");
				status = FW_EXIT_DATA;
				break;
			}
			memcpy(j->rec, rec.v.p, rec.v.n);
			j->n = rec.v.n;
			j->file = fw_reader_name(r);
			j->index = rec.index;
			j->offset = rec.offset;
			j->is_task = task;
			if (++n == cap) {
				if (flush_batch(ws, nw, jobs, n, out, &status)) {
					fw_reader_close(r);
					fw_writer_abort(out);
					out = NULL;
					status = FW_EXIT_DATA;
					goto done;
				}
				n = 0;
			}
			fw_progress_tick(&prog, ++nrec, fw_reader_bytes_in(r));
		}
		/* names point into the reader: run what it gave before closing */
		if (n && flush_batch(ws, nw, jobs, n, out, &status)) {
			fw_reader_close(r);
			fw_writer_abort(out);
			out = NULL;
			status = FW_EXIT_DATA;
			goto done;
		}
		n = 0;
		fw_reader_close(r);
	}
	fw_progress_end(&prog);
	if (fw_writer_close(out, err, sizeof err)) {
		fw_warn("%s", err);
		status = FW_EXIT_DATA;
	}
done:
	for (int i = 0; i < nw; i++) {
		fw_rollout_worker_clear(&ws[i].w);
	}
	free(jobs);
	return status;
}

static int usage_error(const char *fmt, const char *arg)
{
	return fw_usage_error(usage_text, fmt, arg);
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
				return usage_error("unknown mode '%s' (fill, agent)", optarg);
			break;
		case O_MAX_STEPS:
			if (fw_parse_u64(optarg, &o.c.max_steps, 0) || o.c.max_steps > 100000)
				return usage_error("bad step count '%s'", optarg);
			break;
		case O_SAMPLES:
			if (fw_parse_u64(optarg, &o.c.samples, 0) || o.c.samples < 1 || o.c.samples > 1024)
				return usage_error("bad sample count '%s' (1..1024)", optarg);
			break;
		case O_SEED:
			if (fw_parse_u64(optarg, &o.c.seed, 0))
				return usage_error("bad seed '%s'", optarg);
			break;
		case O_TEMP:
			if (fw_parse_double(optarg, &o.c.temp) || !(o.c.temp >= 0))
				return usage_error("bad temperature '%s'", optarg);
			break;
		case O_TOP_P:
			if (fw_parse_double(optarg, &o.c.top_p) || !(o.c.top_p > 0 && o.c.top_p <= 1))
				return usage_error("bad top-p '%s' (0 < P <= 1)", optarg);
			break;
		case O_TOP_K:
			if (fw_parse_u64(optarg, &u, 0) || u > 1u << 24)
				return usage_error("bad top-k '%s'", optarg);
			o.c.top_k = (int)u;
			break;
		case O_CONTEXT:
			if (fw_parse_u64(optarg, &o.c.context, 0) || o.c.context < 1 ||
			    o.c.context > 1u << 30)
				return usage_error("bad --context '%s'", optarg);
			break;
		case O_MAX_TOKENS:
			if (fw_parse_u64(optarg, &o.c.max_tokens, 0) || o.c.max_tokens < 1 ||
			    o.c.max_tokens > 1u << 20)
				return usage_error("bad token count '%s'", optarg);
			break;
		case 'j':
			if (fw_parse_u64(optarg, &o.jobs, 0) || o.jobs < 1 || o.jobs > 64)
				return usage_error("bad job count '%s' (1..64)", optarg);
			break;
		case O_SHARD:
			if (fw_parse_shard(optarg, &o.shard_k, &o.shard_n))
				return usage_error("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
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
				return usage_error("bad timeout '%s'", optarg);
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
		case 'h': fw_help(); return fw_close_stdout() ? FW_EXIT_DATA : 0;
		case O_VERSION: fw_print_version(); return fw_close_stdout() ? FW_EXIT_DATA : 0;
		default: fputs(usage_text, stderr); return FW_EXIT_USAGE;
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
		return usage_error("%s", "--policy is required");
	if (!strncmp(o.c.policy, "builtin:", 8) && o.c.policy[8]) {
		o.c.backend = FW_POLICY_BUILTIN;
		o.c.arg = o.c.policy + 8;
	} else if (!strncmp(o.c.policy, "exec:", 5) && o.c.policy[5]) {
		o.c.backend = FW_POLICY_EXEC;
		o.c.arg = o.c.policy + 5;
	} else if (!strncmp(o.c.policy, "http:", 5) && o.c.policy[5]) {
		o.c.backend = FW_POLICY_HTTP;
		o.c.arg = o.c.policy + 5;
	} else {
		return usage_error("unknown policy '%s' (builtin:DIR, http:URL, exec:CMD)", o.c.policy);
	}
	if (o.c.tool_defs)
		o.c.tools = 1;
	if (o.c.tools && !o.c.agent)
		return usage_error("%s", o.c.tool_defs ? "--tool-defs needs --mode agent"
						     : "--tools needs --mode agent");
	if (o.c.agent && o.c.backend == FW_POLICY_EXEC)
		return usage_error("%s", "--mode agent needs a builtin or http policy");
	if (o.c.model && o.c.backend != FW_POLICY_HTTP)
		return usage_error("%s", "--model needs an http policy");
	if (device && o.c.backend != FW_POLICY_BUILTIN)
		return usage_error("%s", "--device needs a builtin policy");
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
