/*
 * teach — hints for rollouts (environment, rules, demos, a teacher model),
 * and the per-token credit a teacher gives the policy's tokens with the
 * hint in context.  See teach(1).
 *
 * Options and the record loop; a record is taught by fw_teach_one().  With
 * -j N the records go to the shared ordered pool (fw_pool) of N threads
 * and are written back in input order by the main thread, which also
 * reads; each thread keeps its own teachers (a model is used by one
 * thread at a time).
 */
#include <curl/curl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_cli.h"
#include "fw_mp.h"
#include "fw_stream.h"
#include "fw_teach.h"
#include "fw_teach_run.h"
#include "fw_tok.h"
#include "kernels_dev.h"

static const char usage_text[] =
	"usage: teach [--hints SOURCE[,SOURCE ...]] [--rules FILE]\n"
	"             [--teacher builtin:DIR | http:URL | none] [--tokenizer FILE]\n"
	"             [--clip X] [--topk K] [--max-chars N] [--hint-tokens N] [--hint-prompt N]\n"
	"             [--hint-temp X] [--seed N] [--timeout SEC] [--device cpu|cuda[:N]]\n"
	"             [-j N] [-o OUT] [-z] [--shard K/N] [--progress] [FILE ...]\n"
	"       teach -h | --help | --version\n";

static const struct fw_opt_doc options[] = {
	{ "--hints SOURCE[,SOURCE ...]", "where hints come from: env, rules, demo, model:TEACHER (default env)" },
	{ "--rules FILE", "the rules file of --hints rules" },
	{ "--teacher builtin:DIR | http:URL | none", "the teacher that re-scores the rollouts" },
	{ "--tokenizer FILE", "the tokenizer.json of the rollouts' tokens, for an http teacher" },
	{ "--clip X", "bound of each advantage (default 5)" },
	{ "--topk K", "keep the teacher's K most likely tokens at each credited token (1 to 64; a builtin teacher)" },
	{ "--max-chars N", "bytes of an environment or model hint (default 400)" },
	{ "--hint-tokens N", "tokens a model hint may take (1 to 4096, default 48)" },
	{ "--hint-prompt N", "bytes of the hint prompt at most" },
	{ "--hint-temp X", "temperature of a model hint" },
	{ "--seed N", "base seed of the model hints drawn (default 0)" },
	{ "--timeout SEC", "seconds an http request may take (default 120)" },
	{ "--device cpu|cuda[:N]", "where builtin teachers score (default FW_DEVICE, else a GPU when there is one)" },
	{ "-j N", "records taught at once, by N threads (1 to 64, default 1)" },
	{ "-o OUT", "write there (via a temporary file, renamed at the end)" },
	{ "-z", "compress the output with zstd" },
	{ "--shard K/N", "teach only the records whose id hashes to K modulo N" },
	{ "--progress", "a progress meter on standard error even when it is not a terminal" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

/* What the pool's callbacks share: the workers' teachers outlive a file's
 * pool, so that each file does not open them again. */
struct run {
	const struct fw_teach_conf *C;
	struct fw_teach_worker **W;
	int nw, next_w;         /* workers; the next to hand to a pool thread */
	pthread_mutex_t mu;
	struct fw_writer *w;
	int status, write_failed;
	struct fw_teach_tally tally;
};

/* A pool thread's worker: each of a pool's nw threads gets its own. */
static void *take_worker(void *arg)
{
	struct run *R = arg;

	pthread_mutex_lock(&R->mu);
	struct fw_teach_worker *W = R->W[R->next_w++ % R->nw];
	pthread_mutex_unlock(&R->mu);
	return W;
}

static int work(void *state, void *job, void *arg)
{
	struct fw_teach_job *J = job;
	struct run *R = arg;

	fw_teach_one(R->C, state, (struct fw_mpv){ J->rec.p, J->rec.n },
		     (struct fw_mpv){ J->demo.p, J->demo.n }, &J->res);
	return 0;
}

/* Prints the job's diagnostics, counts it and writes its record. */
static int done(void *job, int rc, void *arg)
{
	struct fw_teach_job *J = job;
	struct run *R = arg;
	const char *s = (const char *)J->res.diag.p, *e = s + J->res.diag.n;

	(void)rc;
	while (s < e) {
		const char *nl = memchr(s, '\n', (size_t)(e - s));

		fw_warn_rec(J->file, J->index, J->offset, "%.*s", (int)(nl - s), s);
		s = nl + 1;
	}
	if (J->res.bad)
		R->status = FW_EXIT_DATA;
	fw_teach_tally_add(&R->tally, &J->res);
	if (J->res.out.n && !R->write_failed && fw_writer_put(R->w, J->res.out.p, J->res.out.n)) {
		fw_warn("write error: %s", fw_writer_error(R->w));
		R->status = FW_EXIT_DATA;
		R->write_failed = 1;
	}
	fw_teach_job_free(J);
	return 0;
}

static void drop(void *job, void *arg)
{
	(void)arg;
	fw_teach_job_free(job);
}

/* Hands a copy of the record (and its demo, demo.n 0: none) from file to
 * the pool.  0, or -1 when out of memory. */
static int submit(struct fw_pool *P, const char *file, uint64_t index, uint64_t offset,
		  struct fw_mpv v, struct fw_mpv demo)
{
	struct fw_teach_job *J = fw_teach_job_new(file, index, offset, v, demo);

	if (!J)
		return -1;
	fw_pool_submit(P, J);
	return 0;
}

/* Submits the group's records with its demo; empties G.  0 or -1. */
static int flush(struct fw_pool *P, struct fw_teach_group *G, const char *file)
{
	struct fw_mpv demo = fw_teach_group_demo(G);

	for (size_t i = 0; i < G->n; i++)
		if (submit(P, file, G->r[i].index, G->r[i].offset, fw_teach_group_rec(G, i), demo))
			return -1;
	fw_teach_group_reset(G);
	return 0;
}

/* Says what is wrong with an option's value: exit 2, without the usage. */
static int bad_value(const char *fmt, const char *arg)
{
	fw_warn(fmt, arg);
	return FW_EXIT_USAGE;
}

int main(int argc, char **argv)
{
	enum { OPT_HINTS = 256, OPT_RULES, OPT_TEACHER, OPT_TOKENIZER, OPT_CLIP, OPT_MAX_CHARS,
	       OPT_HINT_TOKENS, OPT_HINT_PROMPT, OPT_HINT_TEMP, OPT_SEED, OPT_TIMEOUT,
	       OPT_DEVICE, OPT_VERSION, OPT_SHARD, OPT_PROGRESS, OPT_TOPK };
	static const struct option longopts[] = {
		{ "hints", required_argument, NULL, OPT_HINTS },
		{ "device", required_argument, NULL, OPT_DEVICE },
		{ "rules", required_argument, NULL, OPT_RULES },
		{ "teacher", required_argument, NULL, OPT_TEACHER },
		{ "tokenizer", required_argument, NULL, OPT_TOKENIZER },
		{ "clip", required_argument, NULL, OPT_CLIP },
		{ "topk", required_argument, NULL, OPT_TOPK },
		{ "max-chars", required_argument, NULL, OPT_MAX_CHARS },
		{ "hint-tokens", required_argument, NULL, OPT_HINT_TOKENS },
		{ "hint-prompt", required_argument, NULL, OPT_HINT_PROMPT },
		{ "hint-temp", required_argument, NULL, OPT_HINT_TEMP },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "jobs", required_argument, NULL, 'j' },
		{ "shard", required_argument, NULL, OPT_SHARD },
		{ "progress", no_argument, NULL, OPT_PROGRESS },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL, *rules_path = NULL;
	int use_rules = 0, use_demo = 0;
	struct fw_teach_conf C = { .use_env = 1, .clip = 5, .timeout_s = 120 };
	uint64_t max_chars = 400, u, jobs = 1;
	double d;
	int c, status = FW_EXIT_OK;
	char err[512], *hints_arg = NULL;
	const char *device = NULL;
	int level = -1, progress = 0;
	uint64_t shard_k = 0, shard_n = 0;

	fw_cli_init("teach");
	fw_usage_init(usage_text, options);
	while ((c = getopt_long(argc, argv, "j:o:zh", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_HINTS: {
			const char *bad;

			free(hints_arg);
			if (!(hints_arg = strdup(optarg)))
				return FW_EXIT_DATA;
			if ((bad = fw_teach_parse_hints(hints_arg, &C, &use_rules, &use_demo))) {
				fw_warn("--hints: unknown or unsupported source '%s'", bad);
				fputs(usage_text, stderr);
				free(hints_arg);
				return FW_EXIT_USAGE;
			}
			break;
		}
		case OPT_RULES:
			rules_path = optarg;
			break;
		case OPT_TEACHER:
			if (!strcmp(optarg, "none")) {
				C.no_teacher = 1;
			} else if (!fw_teach_spec_ok(optarg)) {
				C.no_teacher = 0;
				C.teacher = optarg;
			} else {
				return bad_value("--teacher: want builtin:DIR, http:URL or none, not '%s'",
						 optarg);
			}
			break;
		case OPT_TOKENIZER:
			C.tokenizer = optarg;
			break;
		case OPT_CLIP:
			if (fw_parse_double(optarg, &C.clip) || !(C.clip > 0))
				return bad_value("--clip: want a positive number, not '%s'", optarg);
			break;
		case OPT_TOPK:
			if (fw_parse_u64(optarg, &u, 0) || !u || u > 64)
				return bad_value("--topk: want 1 to 64, not '%s'", optarg);
			C.topk = (int)u;
			break;
		case OPT_MAX_CHARS:
			if (fw_parse_u64(optarg, &max_chars, 0) || !max_chars || max_chars > 1u << 20)
				return bad_value("--max-chars: want 1 to 1048576, not '%s'", optarg);
			break;
		case OPT_HINT_TOKENS:
			if (fw_parse_u64(optarg, &u, 0) || !u || u > 4096)
				return bad_value("--hint-tokens: want 1 to 4096, not '%s'", optarg);
			C.ho.max_tokens = (int)u;
			break;
		case OPT_HINT_PROMPT:
			if (fw_parse_u64(optarg, &u, 1) || u < 256 || u > 1u << 24)
				return bad_value("--hint-prompt: want 256 to 16M bytes, not '%s'", optarg);
			C.ho.prompt_bytes = (size_t)u;
			break;
		case OPT_HINT_TEMP:
			if (fw_parse_double(optarg, &d) || d < 0 || d > 10)
				return bad_value("--hint-temp: want 0 to 10, not '%s'", optarg);
			C.ho.temp = (float)d;
			break;
		case OPT_SEED:
			if (fw_parse_u64(optarg, &C.ho.seed, 0))
				return bad_value("--seed: want an unsigned integer, not '%s'", optarg);
			break;
		case OPT_TIMEOUT:
			if (fw_parse_double(optarg, &C.timeout_s) || !(C.timeout_s > 0))
				return bad_value("--timeout: want a positive number of seconds, not '%s'",
						 optarg);
			break;
		case 'j':
			if (fw_parse_u64(optarg, &jobs, 0) || jobs < 1 || jobs > 64)
				return bad_value("-j: want 1 to 64, not '%s'", optarg);
			break;
		case 'o':
			out = optarg;
			break;
		case OPT_DEVICE:
			device = optarg;
			break;
		case 'z':
			level = 3;
			break;
		case OPT_SHARD:
			if (fw_parse_shard(optarg, &shard_k, &shard_n) < 0)
				return fw_usage_fail("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case OPT_PROGRESS:
			progress = 1;
			break;
		case 'h':
			return fw_help_exit();
		case OPT_VERSION:
			return fw_version_exit();
		default:
			return fw_usage_exit();
		}
	}
	if (C.topk && C.teacher && !strncmp(C.teacher, "http:", 5)) {
		fw_warn("--topk needs a builtin teacher: an http one gives no top-k");
		return FW_EXIT_USAGE;
	}
	if (use_rules && !rules_path) {
		fw_warn("--hints rules needs --rules FILE");
		return FW_EXIT_USAGE;
	}
	if (use_rules && !(C.rules = fw_teach_rules_load(rules_path, err, sizeof err))) {
		fw_warn("%s", err);
		return FW_EXIT_USAGE;
	}
	/* builtin teachers score on --device ($FW_DEVICE, a GPU when there is one) */
	if (fw_dev_select(device, err, sizeof err) < 0) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	C.max_chars = max_chars;
	C.demo_chars = 5 * max_chars;
	C.ho.max_chars = max_chars;
	struct fw_writer *w = fw_writer_open(out, level, err, sizeof err);

	if (!w) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	/* The workers share the kernels' thread pool as it is (FW_THREADS):
	 * a forward's sums depend on how its work is split, so a different
	 * split per worker would change the bytes written. */
	/* http teachers open libcurl in the workers: set it up before them,
	 * since its global setup is not safe from several threads at once */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	struct run R = { .C = &C, .nw = (int)jobs, .w = w };
	struct fw_pool_conf pc = { .workers = (int)jobs, .worker_init = take_worker,
				   .work = work, .done = done, .drop = drop, .arg = &R };
	struct fw_teach_group G = { 0 };
	struct fw_operands ops;
	struct fw_progress meter;
	uint64_t nread = 0, bytes_before = 0;
	const char *path;

	pthread_mutex_init(&R.mu, NULL);
	int nw = 0;

	if ((R.W = calloc(jobs, sizeof *R.W)))
		while (nw < (int)jobs && (R.W[nw] = fw_teach_worker_new()))
			nw++;
	if (nw < (int)jobs) {
		fw_warn("out of memory");
		return FW_EXIT_DATA;
	}
	fw_progress_start(&meter, progress);
	fw_operands_init(&ops, argc, argv, optind);
	while (meter.on && (path = fw_operands_next(&ops)))
		fw_progress_expect(&meter, path);
	fw_operands_init(&ops, argc, argv, optind);
	while ((path = fw_operands_next(&ops))) {
		struct fw_reader *r = fw_reader_open(path, NULL, err, sizeof err);
		struct fw_pool *P;
		struct fw_rec rec;
		int got = 0, oom = 0;

		if (!r) {
			fw_warn("%s", err);
			status = FW_EXIT_DATA;
			continue;
		}
		/* a pool per file: its jobs name the reader's file, and are
		 * written before it closes */
		R.next_w = 0;
		if (!(P = fw_pool_new(&pc))) {
			fw_warn("cannot start a worker thread");
			fw_reader_close(r);
			status = FW_EXIT_DATA;
			break;
		}
		const char *name = fw_reader_name(r);

		while (!oom && (got = fw_reader_next(r, &rec)) == 1) {
			uint64_t key = 0;
			if (shard_n && !fw_shard_keep(rec.v, shard_k, shard_n))
				continue;
			fw_progress_tick(&meter, ++nread, bytes_before + fw_reader_bytes_in(r));
			int has = use_demo && fw_teach_group_key(rec.v, &key);

			if (!use_demo) {
				oom = submit(P, name, rec.index, rec.offset, rec.v, (struct fw_mpv){ 0 });
				continue;
			}
			if (fw_teach_group_ends(&G, has, key))
				oom = flush(P, &G, name);
			oom = oom || fw_teach_group_add(&G, rec.v, rec.index, rec.offset, has, key);
		}
		if (!oom && G.n)
			oom = flush(P, &G, name);
		if (oom) {
			fw_warn("out of memory");
			status = FW_EXIT_DATA;
		} else if (got < 0) {
			fw_warn_reader(r);
			status = FW_EXIT_DATA;
		}
		fw_pool_finish(P);
		fw_pool_free(P);
		bytes_before += fw_reader_bytes_in(r);
		fw_reader_close(r);
		if (oom)
			break;
	}
	fw_progress_end(&meter);
	if (R.status)
		status = R.status;
	struct fw_buf sum = { 0 };

	if (fw_teach_tally_text(&R.tally, fw_prog, &sum) == 0)
		fwrite(sum.p, 1, sum.n, stderr);
	fw_buf_free(&sum);
	for (uint64_t i = 0; i < jobs; i++)
		fw_teach_worker_free(R.W[i]);
	free(R.W);
	pthread_mutex_destroy(&R.mu);
	fw_teach_group_release(&G);
	free(hints_arg);
	fw_teach_rules_free(C.rules);
	if (fw_writer_close(w, err, sizeof err)) {
		fw_warn("%s", err);
		status = FW_EXIT_DATA;
	}
	return status;
}
