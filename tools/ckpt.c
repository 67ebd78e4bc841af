/*
 * ckpt — the user's handle on a model checkpoint: create a fresh model,
 * inspect it, score records, sample, and convert between dtypes.  The
 * test harnesses that dump a pass's numbers and time the model are
 * tests/unit/test_ckpt_harness.c.  See ckpt(1).
 *
 * A checkpoint is a directory: config.json, model.safetensors and
 * tokenizer.json, as the Hugging Face ecosystem has them.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fw_base.h"
#include "fw_cli.h"
#include "fw_model.h"
#include "fw_mp.h"
#include "fw_stream.h"
#include "fw_teach.h"
#include "fw_tok.h"
#include "fw_train.h"
#include "kernels.h"
#include "kernels_dev.h"

static const char usage_text[] =
	"usage: ckpt init CONFIG.json OUTDIR [--seed S] [--tokenizer byte|FILE] [--dtype D]\n"
	"       ckpt info DIR | RUN\n"
	"       ckpt score DIR [-o OUT] [-z] [FILE...]\n"
	"       ckpt sample DIR [--prompt TEXT] [-n N] [--temp T] [--top-p P] [--top-k K]\n"
	"                   [--count C] [--seed S]\n"
	"       ckpt convert --dtype f32|bf16|f16 DIR OUTDIR\n"
	"Common options: [--threads N] [-j N] [-h | --help] [--version]\n"
	"score and sample: [--device cpu|cuda[:N]]\n";

static char err[1024];

static const struct fw_opt_doc options[] = {
	{ "--seed S", "init: seed of the weights; sample: seed of the draws" },
	{ "--tokenizer byte|FILE", "init: the byte tokenizer, or a copy of tokenizer.json FILE" },
	{ "--dtype D", "the weights' type: f32, bf16 or f16" },
	{ "-o OUT", "score: write to OUT" },
	{ "-z", "score: compress the output with zstd" },
	{ "--prompt TEXT", "sample: the text to continue" },
	{ "-n N", "sample: tokens to draw" },
	{ "--temp T", "sample: temperature" },
	{ "--top-p P", "sample: nucleus mass" },
	{ "--top-k K", "sample: keep the K likeliest tokens" },
	{ "--count C", "sample: continuations to draw" },
	{ "--threads N", "threads of the kernels" },
	{ "-j N", "the same as --threads (ckpt runs no parallel workers)" },
	{ "--device cpu|cuda[:N]", "score and sample: where the model runs" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

struct opts {
	uint64_t seed;
	const char *tokenizer, *prompt, *out, *device;
	enum fw_dtype dtype;
	int have_dtype, n, count, top_k, level;
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

/* ---- init --------------------------------------------------------------------- */

static int cmd_init(struct opts *o)
{
	struct fw_config c;
	struct fw_model *m;
	struct fw_tok *t;
	int rc = FW_EXIT_DATA;

	if (o->nargs != 2)
		return fw_usage_fail("%s", "init needs CONFIG.json and OUTDIR");
	if (fw_config_load(&c, o->args[0], err, sizeof(err))) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	if (!o->tokenizer || !strcmp(o->tokenizer, "byte"))
		t = fw_tok_new_byte();
	else if (!(t = fw_tok_load(o->tokenizer, err, sizeof(err)))) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	if (!t)
		return FW_EXIT_DATA;
	if (fw_tok_vocab_size(t) > c.vocab) {
		fw_warn("%s: vocab_size %d is smaller than the tokenizer's %d ids",
			o->args[0], c.vocab, (int)fw_tok_vocab_size(t));
		fw_tok_free(t);
		return FW_EXIT_DATA;
	}
	if (!(m = fw_model_new(&c, o->seed, err, sizeof(err)))) {
		fw_warn("%s", err);
		fw_tok_free(t);
		return FW_EXIT_DATA;
	}
	if (fw_ckpt_create(o->args[1], m, t, NULL, o->have_dtype ? o->dtype : FW_F32, err,
			   sizeof(err)))
		fw_warn("%s", err);
	else
		rc = FW_EXIT_OK;
	fw_model_free(m);
	fw_tok_free(t);
	return rc;
}

/* ---- info --------------------------------------------------------------------- */

static int cmd_info(struct opts *o)
{
	struct fw_model *m;
	struct fw_tok *t;
	struct fw_train_state ts;
	char dir[PATH_MAX], p[PATH_MAX + 32], link[PATH_MAX];
	struct fw_st *st;
	const struct fw_config *c;
	ssize_t ln;

	if (o->nargs != 1)
		return fw_usage_fail("%s", "info needs DIR");
	if (resolve(o))
		return FW_EXIT_DATA;
	snprintf(dir, sizeof(dir), "%s", o->args[0]);
	if (fw_train_state_load(&ts, dir, err, sizeof(err))) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	if (!(m = load_model(dir)))
		return FW_EXIT_DATA;
	c = &m->cfg;
	snprintf(p, sizeof(p), "%s/model.safetensors", dir);
	st = fw_st_open(p, NULL, 0);
	if ((ln = readlink(dir, link, sizeof(link) - 1)) > 0) {
		link[ln] = '\0';
		printf("checkpoint: %s -> %s\n", dir, link);
	} else
		printf("checkpoint: %s\n", dir);
	printf("step: %ld\n", ts.step);
	printf("parent: %s\n", ts.parent[0] ? ts.parent : "none");
	printf("architecture: %s\n", c->arch_name);
	printf("parameters: %ld\n", m->nw);
	printf("dtype: %s\n", st && st->n ? st->t[0].dtype_name : c->dtype);
	printf("vocab_size: %d\n", c->vocab);
	printf("hidden_size: %d\n", c->C);
	printf("intermediate_size: %d\n", c->I);
	printf("layers: %d\n", c->L);
	printf("heads: %d\n", c->nh);
	printf("kv_heads: %d\n", c->nkv);
	printf("head_dim: %d\n", c->hd);
	printf("max_position_embeddings: %d\n", c->max_pos);
	printf("rope_theta: %g\n", c->rope_theta);
	printf("rms_norm_eps: %g\n", c->eps);
	printf("tied_embeddings: %s\n", c->tied ? "yes" : "no");
	printf("qkv_bias: %s\n", c->qkv_bias ? "yes" : "no");
	printf("qk_norm: %s\n", c->qk_norm ? "yes" : "no");
	fw_st_free(st);
	if ((t = load_tok(dir, 0))) {
		printf("tokenizer: %d ids, bos %d, eos %d\n", (int)fw_tok_vocab_size(t),
		       (int)fw_tok_bos(t), (int)fw_tok_eos(t));
		fw_tok_free(t);
	} else
		printf("tokenizer: none\n");
	fw_model_free(m);
	return FW_EXIT_OK;
}

/* ---- convert ------------------------------------------------------------------- */

static int cmd_convert(struct opts *o)
{
	struct fw_model *m;
	char a[PATH_MAX + 32];
	int rc = FW_EXIT_DATA;

	if (o->nargs != 2)
		return fw_usage_fail("%s", "convert needs DIR and OUTDIR");
	if (!o->have_dtype)
		return fw_usage_fail("%s", "convert needs --dtype f32|bf16|f16");
	if (resolve(o))
		return FW_EXIT_DATA;
	if (!(m = load_model(o->args[0])))
		return FW_EXIT_DATA;
	snprintf(a, sizeof(a), "%s/tokenizer.json", o->args[0]);
	if (fw_ckpt_create(o->args[1], m, NULL, a, o->dtype, err, sizeof(err)))
		fw_warn("%s", err);
	else
		rc = FW_EXIT_OK;
	fw_model_free(m);
	return rc;
}

/* ---- sample ------------------------------------------------------------------- */

static int cmd_sample(struct opts *o)
{
	struct fw_model *m;
	struct fw_tok *t;
	struct fw_tok_ids ids = { 0 };
	struct fw_gen *g = NULL;
	struct fw_sampler s = { (float)o->temp, (float)o->top_p, o->top_k };
	int rc = FW_EXIT_DATA, V, C = o->count;
	int32_t *next = NULL, **out = NULL, eos;
	int *len = NULL, *done = NULL;
	float *scratch = NULL;
	uint64_t rng = o->seed * 0x9e3779b97f4a7c15ull + 1;

	if (o->nargs != 1)
		return fw_usage_fail("%s", "sample needs DIR");
	if (resolve(o))
		return FW_EXIT_DATA;
	if (!(m = load_model(o->args[0])))
		return FW_EXIT_DATA;
	if (!(t = load_tok(o->args[0], 1)))
		goto out;
	V = m->cfg.vocab;
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
	if (!(g = fw_gen_new(m, C, (int)ids.n + o->n, err, sizeof(err))) ||
	    fw_gen_prefill(g, ids.ids, (int)ids.n, err, sizeof(err))) {
		fw_warn("%s", err);
		goto out;
	}
	next = calloc(C, sizeof(*next));
	out = calloc(C, sizeof(*out));
	len = calloc(C, sizeof(*len));
	done = calloc(C, sizeof(*done));
	scratch = malloc(sizeof(float) * 2 * V);
	if (!next || !out || !len || !done || !scratch)
		goto out;
	for (int b = 0; b < C; b++)
		if (!(out[b] = malloc(sizeof(int32_t) * (o->n + 1))))
			goto out;
	for (int step = 0; step < o->n; step++) {
		int live = 0;

		for (int b = 0; b < C; b++) {
			next[b] = fw_sample(fw_gen_logits(g) + (size_t)b * V, V, &s,
					    &rng, scratch, NULL);
			if (done[b])
				continue;
			if (next[b] == eos)
				done[b] = 1;
			else
				out[b][len[b]++] = next[b];
			live += !done[b];
		}
		if (!live || step + 1 == o->n)
			break;
		if (fw_gen_step(g, next, err, sizeof(err))) {
			fw_warn("%s", err);
			goto out;
		}
	}
	for (int b = 0; b < C; b++) {
		size_t n;
		char *txt = fw_tok_decode(t, out[b], len[b], FW_TOK_SKIP_SPECIAL, &n,
					  err, sizeof(err));

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
	if (out)
		for (int b = 0; b < C; b++)
			free(out[b]);
	free(out);
	free(next);
	free(len);
	free(done);
	free(scratch);
	fw_tok_ids_release(&ids);
	fw_gen_free(g);
	fw_tok_free(t);
	fw_model_free(m);
	return rc;
}

/* ---- score -------------------------------------------------------------------- */

static int cmd_score(struct opts *o)
{
	struct fw_operands ops;
	struct fw_model *m;
	struct fw_tok *t;
	struct fw_writer *w = NULL;
	struct fw_buf ob = { 0 }, fb = { 0 }, tb = { 0 };
	struct fw_tok_ids ids = { 0 };
	struct fw_kvscore *ks = NULL;
	int maxT, rc = FW_EXIT_OK;
	int32_t *own = NULL;
	float *lp = NULL;

	if (o->nargs < 1)
		return fw_usage_fail("%s", "score needs DIR");
	if (resolve(o))
		return FW_EXIT_DATA;
	fw_operands_init(&ops, o->nargs, o->args, 1);
	if (!(m = load_model(o->args[0])))
		return FW_EXIT_DATA;
	m->no_grad = 1;
	t = load_tok(o->args[0], 0);
	maxT = m->cfg.max_pos;
	/* the teacher's scorer: the same numbers as teach's for these ids */
	own = malloc(sizeof(int32_t) * maxT);
	lp = malloc(sizeof(float) * maxT);
	if (!own || !lp || !(ks = fw_kvscore_new(m, err, sizeof(err)))) {
		fw_warn("%s", ks || !own || !lp ? "out of memory" : err);
		rc = FW_EXIT_DATA;
		goto out;
	}
	if (!(w = fw_writer_open(o->out, o->level, err, sizeof(err)))) {
		fw_warn("%s", err);
		rc = FW_EXIT_DATA;
		goto out;
	}
	for (const char *file; (file = fw_operands_next(&ops));) {
		struct fw_reader *r = fw_reader_open(file, NULL, err, sizeof(err));
		struct fw_rec rec;
		int got;

		if (!r) {
			fw_warn("%s", err);
			rc = FW_EXIT_DATA;
			continue;
		}
		while ((got = fw_reader_next(r, &rec)) != 0) {
			const char *why = NULL;
			int n, add_tokens;

			if (got < 0) {
				fw_warn_reader(r);
				rc = FW_EXIT_DATA;
				if (!fw_reader_recoverable(r))
					break;
				continue;
			}
			n = fw_score_ids(rec.v, t, m->cfg.vocab, maxT, own, &ids, &add_tokens, &why);
			if (n >= 2 && fw_kvscore_run(ks, own, n, 0, lp, err, sizeof(err)))
				why = err;
			if (why) {
				fw_warn_rec(fw_reader_name(r), rec.index, rec.offset, "%s", why);
				rc = FW_EXIT_DATA;
				continue;
			}
			if (fw_score_record(&ob, rec.v, own, n, lp, add_tokens, &fb, &tb)) {
				fw_warn("out of memory");
				rc = FW_EXIT_DATA;
				fw_reader_close(r);
				goto out;
			}
			if (fw_writer_put(w, ob.p, ob.n)) {
				fw_warn("%s", fw_writer_error(w));
				rc = FW_EXIT_DATA;
				fw_reader_close(r);
				goto out;
			}
		}
		fw_reader_close(r);
	}
	if (fw_writer_close(w, err, sizeof(err))) {
		fw_warn("%s", err);
		rc = FW_EXIT_DATA;
	}
	w = NULL;
out:
	fw_writer_abort(w);
	fw_buf_free(&ob);
	fw_buf_free(&fb);
	fw_buf_free(&tb);
	fw_tok_ids_release(&ids);
	fw_kvscore_free(ks);
	free(own);
	free(lp);
	fw_tok_free(t);
	fw_model_free(m);
	return rc;
}

/* ---- main --------------------------------------------------------------------- */

enum { O_SEED = 256, O_TOK, O_DTYPE, O_PROMPT, O_TEMP, O_TOPP, O_TOPK,
       O_COUNT, O_THREADS, O_DEVICE, O_VERSION };

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
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .prompt = "", .n = 64, .count = 1, .temp = 1.0,
			  .top_p = 1.0, .level = -1 };
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
		case O_THREADS:
			if (fw_parse_u64(optarg, &u, 0) || u < 1 || u > 1024)
				return fw_usage_fail(c == 'j' ? "bad -j '%s'" : "bad --threads '%s'",
						     optarg);
			fw_kernels_set_threads((int)u);
			break;
		case 'o': o.out = optarg; break;
		case 'z': o.level = 3; break;
		case O_DEVICE: o.device = optarg; break;
		case 'h':
			fw_help();
			return FW_EXIT_OK;
		case O_VERSION:
			fw_print_version();
			return FW_EXIT_OK;
		default:
			fw_usage(stderr);
			return FW_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		fw_usage(stderr);
		return FW_EXIT_USAGE;
	}
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
