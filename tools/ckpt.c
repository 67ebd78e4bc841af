/*
 * ckpt — the user's handle on a model checkpoint: create a fresh model,
 * inspect it, score records, sample, and convert between dtypes.  The
 * test harnesses that dump a pass's numbers and time the model are
 * tests/unit/test_ckpt_harness.c.  See ckpt(1).
 *
 * A checkpoint is a directory: config.json, model.safetensors and
 * tokenizer.json, as the Hugging Face ecosystem has them.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fw_base.h"
#include "fw_cli.h"
#include "fw_model.h"
#include "fw_mp.h"
#include "fw_teach.h"
#include "fw_tok.h"
#include "fw_train.h"
#include "kernels.h"
#include "kernels_dev.h"

static const char usage_text[] =
	"usage: ckpt init CONFIG.json OUTDIR [--seed S] [--tokenizer byte|FILE] [--dtype D]\n"
	"       ckpt info DIR | RUN\n"
	"       ckpt score DIR [-j N] [-o OUT] [-z] [--shard K/N] [--progress] [FILE...]\n"
	"       ckpt sample DIR [--prompt TEXT] [-n N] [--temp T] [--top-p P] [--top-k K]\n"
	"                   [--count C] [--seed S]\n"
	"       ckpt convert --dtype f32|bf16|f16 DIR OUTDIR\n"
	"Common options: [--threads N] [-h | --help] [--version]\n"
	"score and sample: [--device cpu|cuda[:N]]\n";

static char err[1024];

static const struct fw_opt_doc options[] = {
	{ "--seed S", "init: seed of the weights; sample: seed of the draws" },
	{ "--tokenizer byte|FILE", "init: the byte tokenizer, or a copy of tokenizer.json FILE" },
	{ "--dtype D", "the weights' type: f32, bf16 or f16" },
	{ "-j N", "score: records scored at once, by N threads (1 to 64, default 1)" },
	{ "-o OUT", "score: write to OUT" },
	{ "-z", "score: compress the output with zstd" },
	{ "--shard K/N", "score: only the records whose id hashes to K modulo N" },
	{ "--progress", "score: a progress meter on standard error even when it is not a terminal" },
	{ "--prompt TEXT", "sample: the text to continue" },
	{ "-n N", "sample: tokens to draw" },
	{ "--temp T", "sample: temperature" },
	{ "--top-p P", "sample: nucleus mass" },
	{ "--top-k K", "sample: keep the K likeliest tokens" },
	{ "--count C", "sample: continuations to draw" },
	{ "--threads N", "threads of the kernels" },
	{ "--device cpu|cuda[:N]", "score and sample: where the model runs" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

struct opts {
	uint64_t seed;
	const char *tokenizer, *prompt, *out, *device;
	enum fw_dtype dtype;
	int have_dtype, n, count, top_k, level, progress;
	int jobs, have_jobs;     /* score -j: workers; given */
	uint64_t shard_k, shard_n;
	double temp, top_p;
	char **args;
	int nargs;
};

/* ---- helpers ------------------------------------------------------------------ */

/* A training run's directory names its latest checkpoint, as it does for
 * train-step --ckpt RUN: o->args[0] becomes the checkpoint's.  0, or -1
 * after a diagnostic. */
static int resolve(struct opts *o)
{
	static char dir[PATH_MAX];

	if (fw_ckpt_resolve(o->args[0], dir, sizeof(dir), err, sizeof(err))) {
		fw_warn("%s", err);
		return -1;
	}
	o->args[0] = dir;
	return 0;
}

static struct fw_tok *load_tok(const char *dir, int required)
{
	char p[PATH_MAX];
	struct fw_tok *t;

	snprintf(p, sizeof(p), "%s/tokenizer.json", dir);
	if (access(p, F_OK) && !required)
		return NULL;
	if (!(t = fw_tok_load(p, err, sizeof(err))))
		fw_warn("%s", err);
	return t;
}

static struct fw_model *load_model(const char *dir)
{
	struct fw_model *m = fw_model_load(dir, err, sizeof(err));

	if (!m)
		fw_warn("%s", err);
	return m;
}

/* The exit status of a library call that fills err when it fails. */
static int result(int rc)
{
	if (rc)
		fw_warn("%s", err);
	return rc ? FW_EXIT_DATA : FW_EXIT_OK;
}

/* ---- init, info, convert ------------------------------------------------------- */

static int cmd_init(struct opts *o)
{
	if (o->nargs != 2)
		return fw_usage_fail("%s", "init needs CONFIG.json and OUTDIR");
	return result(fw_ckpt_init(o->args[0], o->tokenizer, o->seed,
				   o->have_dtype ? o->dtype : FW_F32, o->args[1], err, sizeof(err)));
}

static int cmd_info(struct opts *o)
{
	struct fw_buf b = { 0 };
	struct fw_tok *t;

	if (o->nargs != 1)
		return fw_usage_fail("%s", "info needs DIR");
	if (resolve(o))
		return FW_EXIT_DATA;
	if (fw_ckpt_describe(o->args[0], &b, err, sizeof(err))) {
		fw_warn("%s", err);
		fw_buf_release(&b);
		return FW_EXIT_DATA;
	}
	fwrite(b.p, 1, b.n, stdout);
	fw_buf_release(&b);
	if ((t = load_tok(o->args[0], 0))) {
		printf("tokenizer: %d ids, bos %d, eos %d\n", (int)fw_tok_vocab_size(t),
		       (int)fw_tok_bos(t), (int)fw_tok_eos(t));
		fw_tok_free(t);
	} else
		printf("tokenizer: none\n");
	return FW_EXIT_OK;
}

static int cmd_convert(struct opts *o)
{
	if (o->nargs != 2)
		return fw_usage_fail("%s", "convert needs DIR and OUTDIR");
	if (!o->have_dtype)
		return fw_usage_fail("%s", "convert needs --dtype f32|bf16|f16");
	if (resolve(o))
		return FW_EXIT_DATA;
	return result(fw_ckpt_convert(o->args[0], o->args[1], o->dtype, err, sizeof(err)));
}

/* ---- sample ------------------------------------------------------------------- */

static int cmd_sample(struct opts *o)
{
	struct fw_model *m;
	struct fw_tok *t;
	struct fw_tok_ids ids = { 0 };
	struct fw_sampler s = { (float)o->temp, (float)o->top_p, o->top_k };
	int rc = FW_EXIT_DATA, *len = NULL;
	int32_t *out = NULL, eos;

	if (o->nargs != 1)
		return fw_usage_fail("%s", "sample needs DIR");
	if (resolve(o))
		return FW_EXIT_DATA;
	if (!(m = load_model(o->args[0])))
		return FW_EXIT_DATA;
	if (!(t = load_tok(o->args[0], 1)))
		goto out;
	eos = fw_tok_eos(t) >= 0 ? fw_tok_eos(t) : m->cfg.eos;
	if (fw_tok_encode(t, o->prompt, strlen(o->prompt), FW_TOK_ADD_BOS, 0, &ids))
		goto out;
	if (ids.n == 0) {
		int32_t b = fw_tok_bos(t) >= 0 ? fw_tok_bos(t) : eos >= 0 ? eos : 0;

		fw_tok_encode(t, "", 0, 0, 0, &ids);
		ids.ids = realloc(ids.ids, sizeof(int32_t));
		ids.ids[0] = b;
		ids.n = 1;
	}
	if ((int)ids.n + o->n > m->cfg.max_pos) {
		fw_warn("prompt (%zu tokens) and -n %d exceed max_position_embeddings %d",
			ids.n, o->n, m->cfg.max_pos);
		goto out;
	}
	out = malloc(sizeof(*out) * ((size_t)o->count * o->n + 1));
	len = calloc(o->count, sizeof(*len));
	if (!out || !len)
		goto out;
	if (fw_sample_seqs(m, ids.ids, (int)ids.n, o->n, o->count, &s, o->seed, eos, out, len,
			   err, sizeof(err))) {
		fw_warn("%s", err);
		goto out;
	}
	for (int b = 0; b < o->count; b++) {
		size_t n;
		char *txt = fw_tok_decode(t, out + (size_t)b * o->n, len[b], FW_TOK_SKIP_SPECIAL,
					  &n, err, sizeof(err));

		if (!txt) {
			fw_warn("%s", err);
			goto out;
		}
		fwrite(txt, 1, n, stdout);
		putchar('\n');
		free(txt);
	}
	rc = FW_EXIT_OK;
out:
	free(out);
	free(len);
	fw_tok_ids_release(&ids);
	fw_tok_free(t);
	fw_model_free(m);
	return rc;
}

/* ---- score -------------------------------------------------------------------- */

/* The records scored on o->jobs workers and written in input order, the
 * bytes of -j 1 (fw_recscore_files). */
static int cmd_score(struct opts *o)
{
	struct fw_recscore_opts so = { .workers = o->jobs, .out = o->out, .level = o->level,
				       .progress = o->progress, .shard_k = o->shard_k,
				       .shard_n = o->shard_n };
	struct fw_model *m;
	struct fw_tok *t;
	int rc;

	if (o->nargs < 1)
		return fw_usage_fail("%s", "score needs DIR");
	if (resolve(o) || !(m = load_model(o->args[0])))
		return FW_EXIT_DATA;
	t = load_tok(o->args[0], 0);
	rc = fw_recscore_files(m, t, &so, o->nargs, o->args, 1);
	fw_tok_free(t);
	fw_model_free(m);
	return rc;
}

/* ---- main --------------------------------------------------------------------- */

enum { O_SEED = 256, O_TOK, O_DTYPE, O_PROMPT, O_TEMP, O_TOPP, O_TOPK,
       O_COUNT, O_THREADS, O_DEVICE, O_SHARD, O_PROGRESS, O_VERSION };

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "seed", required_argument, NULL, O_SEED },
		{ "device", required_argument, NULL, O_DEVICE },
		{ "tokenizer", required_argument, NULL, O_TOK },
		{ "dtype", required_argument, NULL, O_DTYPE },
		{ "prompt", required_argument, NULL, O_PROMPT },
		{ "temp", required_argument, NULL, O_TEMP },
		{ "top-p", required_argument, NULL, O_TOPP },
		{ "top-k", required_argument, NULL, O_TOPK },
		{ "count", required_argument, NULL, O_COUNT },
		{ "threads", required_argument, NULL, O_THREADS },
		{ "shard", required_argument, NULL, O_SHARD },
		{ "progress", no_argument, NULL, O_PROGRESS },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .prompt = "", .n = 64, .count = 1, .temp = 1.0,
			  .top_p = 1.0, .level = -1, .jobs = 1 };
	const char *cmd;
	uint64_t u;
	int c, rc;

	fw_cli_init("ckpt");
	fw_usage_init(usage_text, options);
	/* GNU getopt permutes: options may come before or after the
	 * subcommand and its operands. */
	while ((c = getopt_long(argc, argv, "hn:j:o:z", lo, NULL)) != -1) {
		switch (c) {
		case O_SEED:
			if (fw_parse_u64(optarg, &o.seed, 0))
				return fw_usage_fail("bad --seed '%s'", optarg);
			break;
		case O_TOK: o.tokenizer = optarg; break;
		case O_DTYPE:
			if (fw_dtype_parse(optarg, &o.dtype))
				return fw_usage_fail("bad --dtype '%s' (f32, bf16, f16)", optarg);
			o.have_dtype = 1;
			break;
		case O_PROMPT: o.prompt = optarg; break;
		case O_TEMP:
			if (fw_parse_double(optarg, &o.temp) || o.temp < 0)
				return fw_usage_fail("bad --temp '%s'", optarg);
			break;
		case O_TOPP:
			if (fw_parse_double(optarg, &o.top_p) || !(o.top_p > 0) || o.top_p > 1)
				return fw_usage_fail("bad --top-p '%s'", optarg);
			break;
		case O_TOPK:
			if (fw_parse_u64(optarg, &u, 0) || u > INT_MAX)
				return fw_usage_fail("bad --top-k '%s'", optarg);
			o.top_k = (int)u;
			break;
		case O_COUNT:
			if (fw_parse_u64(optarg, &u, 0) || u < 1 || u > 4096)
				return fw_usage_fail("bad --count '%s'", optarg);
			o.count = (int)u;
			break;
		case 'n':
			if (fw_parse_u64(optarg, &u, 0) || u > INT_MAX / 2)
				return fw_usage_fail("bad -n '%s'", optarg);
			o.n = (int)u;
			break;
		case 'j':
			if (fw_parse_u64(optarg, &u, 0) || u < 1 || u > 64)
				return fw_usage_fail("bad -j '%s' (1 to 64)", optarg);
			o.jobs = (int)u;
			o.have_jobs = 1;
			break;
		case O_THREADS:
			if (fw_parse_u64(optarg, &u, 0) || u < 1 || u > 1024)
				return fw_usage_fail("bad --threads '%s'", optarg);
			fw_kernels_set_threads((int)u);
			break;
		case 'o': o.out = optarg; break;
		case 'z': o.level = 3; break;
		case O_DEVICE: o.device = optarg; break;
		case O_SHARD:
			if (fw_parse_shard(optarg, &o.shard_k, &o.shard_n) < 0)
				return fw_usage_fail("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case O_PROGRESS: o.progress = 1; break;
		case 'h': return fw_help_exit();
		case O_VERSION: return fw_version_exit();
		default: return fw_usage_exit();
		}
	}
	if (optind >= argc)
		return fw_usage_exit();
	cmd = argv[optind++];
	o.args = argv + optind;
	o.nargs = argc - optind;
	/* Scoring and sampling run where --device or $FW_DEVICE say (a GPU
	 * when there is one); the others read or write weights on the host
	 * and stay on the CPU. */
	if (!strcmp(cmd, "score") || !strcmp(cmd, "sample")) {
		if (fw_dev_select(o.device, err, sizeof(err)) < 0) {
			fw_warn("%s", err);
			return FW_EXIT_DATA;
		}
	} else if (o.device) {
		return fw_usage_fail("--device is for score and sample, not %s", cmd);
	}
	/* only score runs workers; the kernels' threads are --threads */
	if (o.have_jobs && strcmp(cmd, "score"))
		return fw_usage_fail("-j is for score, not %s (the kernels' threads are --threads N)",
				     cmd);
	if (!strcmp(cmd, "init"))
		rc = cmd_init(&o);
	else if (!strcmp(cmd, "info"))
		rc = cmd_info(&o);
	else if (!strcmp(cmd, "score"))
		rc = cmd_score(&o);
	else if (!strcmp(cmd, "sample"))
		rc = cmd_sample(&o);
	else if (!strcmp(cmd, "convert"))
		rc = cmd_convert(&o);
	else
		return fw_usage_fail("unknown command '%s'", cmd);
	if (fw_close_stdout() && rc == FW_EXIT_OK)
		rc = FW_EXIT_DATA;
	return rc;
}
