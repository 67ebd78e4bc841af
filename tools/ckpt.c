/*
 * ckpt — the user's handle on a model checkpoint: create a fresh model,
 * inspect it, score records, sample, convert between dtypes, and dump the
 * numbers of one forward/backward pass for comparison with other
 * implementations.  See ckpt(1).
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
#include "fw_tok.h"
#include "kernels.h"
#include "kernels_dev.h"

static const char usage_text[] =
	"usage: ckpt init CONFIG.json OUTDIR [--seed S] [--tokenizer byte|FILE] [--dtype D]\n"
	"       ckpt info DIR\n"
	"       ckpt score DIR [-o OUT] [-z] [FILE...]\n"
	"       ckpt sample DIR [--prompt TEXT] [-n N] [--temp T] [--top-p P] [--top-k K]\n"
	"                   [--count C] [--seed S]\n"
	"       ckpt convert --dtype f32|bf16|f16 DIR OUTDIR\n"
	"       ckpt dump DIR (--text TEXT | --tokens IDS) [--batch B] [--weights WS] -o OUT\n"
	"       ckpt bench DIR [--batch B] [--seq T] [--steps N] [-n N] [--count C]\n"
	"Common options: [-j THREADS] [-h | --help] [--version]\n"
	"score, sample and bench: [--device cpu|cuda[:N]]\n";

static char err[1024];

static const struct fw_opt_doc options[] = {
	{ "--seed S", "init: seed of the weights; sample: seed of the draws" },
	{ "--tokenizer byte|FILE", "init: the byte tokenizer, or a copy of tokenizer.json FILE" },
	{ "--dtype D", "the weights' type: f32, bf16 or f16" },
	{ "-o OUT", "score: write to OUT; dump: the tensors' file" },
	{ "-z", "score: compress the output with zstd" },
	{ "--prompt TEXT", "sample: the text to continue" },
	{ "-n N", "sample: tokens to draw; bench: tokens to decode" },
	{ "--temp T", "sample: temperature" },
	{ "--top-p P", "sample: nucleus mass" },
	{ "--top-k K", "sample: keep the K likeliest tokens" },
	{ "--count C", "sample: continuations to draw" },
	{ "--text TEXT", "dump: the text to run" },
	{ "--tokens IDS", "dump: comma-separated token ids to run" },
	{ "--batch B", "dump, bench: rows" },
	{ "--weights WS", "dump: comma-separated per-token loss weights" },
	{ "--seq T", "bench: tokens per row" },
	{ "--steps N", "bench: timed forward+backward steps" },
	{ "-j THREADS", "threads of the kernels" },
	{ "--device cpu|cuda[:N]", "score, sample and bench: where the model runs" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

struct opts {
	uint64_t seed;
	const char *tokenizer, *prompt, *text, *tokens, *weights, *out, *device;
	enum fw_dtype dtype;
	int have_dtype, n, count, top_k, batch, level, seq, steps;
	double temp, top_p;
	char **args;
	int nargs;
};

/* ---- helpers ------------------------------------------------------------------ */

/* Makes a fresh directory beside final ("FINAL.tmp.PID") for a checkpoint
 * to be written into and renamed. */
static char *tmp_dir(const char *final)
{
	char *t;
	size_t n = strlen(final);

	while (n > 1 && final[n - 1] == '/')
		n--;
	if (asprintf(&t, "%.*s.tmp.%ld", (int)n, final, (long)getpid()) < 0)
		return NULL;
	if (mkdir(t, 0777) && errno != EEXIST) {
		fw_warn("%s: %s", t, strerror(errno));
		free(t);
		return NULL;
	}
	return t;
}

/* Renames the finished temp dir over final (which may be absent or an
 * empty directory). */
static int finish_dir(const char *tmp, const char *final)
{
	if (rename(tmp, final)) {
		fw_warn("%s: %s", final, strerror(errno));
		fw_rmtree(tmp);
		return -1;
	}
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

/* Parses "1,2,3" (ints or floats) into a new array; returns count or -1. */
static int parse_list(const char *s, double **out)
{
	int n = 0, cap = 16;
	double *v = malloc(sizeof(double) * cap);
	char *end;

	while (v && *s) {
		if (n == cap && !(v = realloc(v, sizeof(double) * (cap *= 2))))
			break;
		errno = 0;
		v[n++] = strtod(s, &end);
		if (end == s || errno || (*end && *end != ','))
			break;
		s = *end ? end + 1 : end;
	}
	if (!v || *s) {
		free(v);
		return -1;
	}
	*out = v;
	return n;
}

/* ---- init --------------------------------------------------------------------- */

static int cmd_init(struct opts *o)
{
	struct fw_config c;
	struct fw_model *m;
	struct fw_tok *t;
	char *tmp, p[PATH_MAX];
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
	if (!(tmp = tmp_dir(o->args[1])))
		goto out;
	snprintf(p, sizeof(p), "%s/tokenizer.json", tmp);
	if (fw_model_save(m, tmp, o->have_dtype ? o->dtype : FW_F32, err, sizeof(err)) ||
	    fw_tok_save(t, p, err, sizeof(err))) {
		fw_warn("%s", err);
		fw_rmtree(tmp);
	} else if (!finish_dir(tmp, o->args[1]))
		rc = FW_EXIT_OK;
	free(tmp);
out:
	fw_model_free(m);
	fw_tok_free(t);
	return rc;
}

/* ---- info --------------------------------------------------------------------- */

static int cmd_info(struct opts *o)
{
	struct fw_model *m;
	struct fw_tok *t;
	char p[PATH_MAX];
	struct fw_st *st;
	const struct fw_config *c;

	if (o->nargs != 1)
		return fw_usage_fail("%s", "info needs DIR");
	if (!(m = load_model(o->args[0])))
		return FW_EXIT_DATA;
	c = &m->cfg;
	snprintf(p, sizeof(p), "%s/model.safetensors", o->args[0]);
	st = fw_st_open(p, NULL, 0);
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
	if ((t = load_tok(o->args[0], 0))) {
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
	char *tmp, a[PATH_MAX], b[PATH_MAX];
	int rc = FW_EXIT_DATA;

	if (o->nargs != 2)
		return fw_usage_fail("%s", "convert needs DIR and OUTDIR");
	if (!o->have_dtype)
		return fw_usage_fail("%s", "convert needs --dtype f32|bf16|f16");
	if (!(m = load_model(o->args[0])))
		return FW_EXIT_DATA;
	if (!(tmp = tmp_dir(o->args[1]))) {
		fw_model_free(m);
		return FW_EXIT_DATA;
	}
	snprintf(a, sizeof(a), "%s/tokenizer.json", o->args[0]);
	snprintf(b, sizeof(b), "%s/tokenizer.json", tmp);
	if (fw_model_save(m, tmp, o->dtype, err, sizeof(err))) {
		fw_warn("%s", err);
		fw_rmtree(tmp);
	} else if (access(a, F_OK) == 0 && fw_copy_file(a, b)) {
		fw_warn("%s: %s", b, strerror(errno));
		fw_rmtree(tmp);
	} else if (!finish_dir(tmp, o->args[1]))
		rc = FW_EXIT_OK;
	free(tmp);
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

/* Scores n ids: lp[i] = log p(ids[i+1] | ids[..i]) for i < n-1.  The batch
 * is padded to a multiple of 64 positions so that records of similar length
 * share one activation plan. */
static int score_ids(struct fw_model *m, const int32_t *ids, int n, float *lp,
		     int32_t *tok, int32_t *tgt, float *buf)
{
	int T = (n + 63) / 64 * 64;

	if (T > m->cfg.max_pos)
		T = n;
	for (int i = 0; i < T; i++) {
		tok[i] = i < n ? ids[i] : 0;
		tgt[i] = i + 1 < n ? ids[i + 1] : -1;
	}
	if (fw_model_forward(m, tok, tgt, NULL, 1, T, 0, buf, NULL, err, sizeof(err)))
		return -1;
	memcpy(lp, buf, sizeof(float) * (n - 1));
	return 0;
}

static int cmd_score(struct opts *o)
{
	struct fw_operands ops;
	struct fw_model *m;
	struct fw_tok *t;
	struct fw_writer *w = NULL;
	struct fw_buf ob = { 0 }, fb = { 0 }, tb = { 0 };
	struct fw_tok_ids ids = { 0 };
	int maxT, rc = FW_EXIT_OK;
	int32_t *tok = NULL, *tgt = NULL, *own = NULL;
	float *lp = NULL, *buf = NULL;

	if (o->nargs < 1)
		return fw_usage_fail("%s", "score needs DIR");
	fw_operands_init(&ops, o->nargs, o->args, 1);
	if (!(m = load_model(o->args[0])))
		return FW_EXIT_DATA;
	m->no_grad = 1;
	t = load_tok(o->args[0], 0);
	maxT = m->cfg.max_pos;
	tok = malloc(sizeof(int32_t) * maxT);
	tgt = malloc(sizeof(int32_t) * maxT);
	own = malloc(sizeof(int32_t) * maxT);
	lp = malloc(sizeof(float) * maxT);
	buf = malloc(sizeof(float) * maxT);
	if (!tok || !tgt || !own || !lp || !buf) {
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
			struct fw_mpv v;
			const char *s;
			size_t sl;
			int n = 0, add_tokens = 0;
			const char *why = NULL;

			if (got < 0) {
				fw_warn_reader(r);
				rc = FW_EXIT_DATA;
				if (!fw_reader_recoverable(r))
					break;
				continue;
			}
			if (fw_mp_get(rec.v, "tokens", &v) == 1) {
				struct fw_mp_iter it;
				struct fw_mpv e;
				int64_t x, cnt = fw_mp_iter_init(&it, v);

				if (cnt < 0 || fw_mp_type(v) != FW_MP_ARRAY)
					why = "'tokens' is not an array";
				else if (cnt > maxT)
					why = "'tokens' exceeds max_position_embeddings";
				while (!why && fw_mp_iter_next(&it, &e) > 0) {
					if (fw_mp_int(e, &x) || x < 0 || x >= m->cfg.vocab)
						why = "'tokens' holds an id outside the vocabulary";
					else
						own[n++] = (int32_t)x;
				}
			} else if (fw_mp_get(rec.v, "text", &v) == 1 &&
				   fw_mp_str(v, &s, &sl) == 0) {
				if (!t)
					why = "'text' needs DIR/tokenizer.json";
				else {
					ids.n = 0;
					if (fw_tok_encode(t, s, sl, FW_TOK_ADD_BOS, 0, &ids))
						why = "out of memory";
					else if ((int)ids.n > maxT)
						why = "'text' exceeds max_position_embeddings";
					else {
						memcpy(own, ids.ids, sizeof(int32_t) * ids.n);
						n = (int)ids.n;
						add_tokens = 1;
					}
				}
			} else
				why = "record has neither 'tokens' nor 'text'";
			if (!why && n >= 2 && score_ids(m, own, n, lp, tok, tgt, buf))
				why = err;
			if (why) {
				fw_warn_rec(fw_reader_name(r), rec.index, rec.offset, "%s", why);
				rc = FW_EXIT_DATA;
				continue;
			}
			msgpack_packer pk;
			struct fw_field fl[2];
			int nf = 0;

			fb.n = tb.n = ob.n = 0;
			int e;

			fw_buf_packer(&pk, &fb);
			e = msgpack_pack_array(&pk, n > 1 ? n - 1 : 0);
			for (int i = 0; i + 1 < n; i++)
				e |= msgpack_pack_float(&pk, lp[i]);
			if (add_tokens) {
				fw_buf_packer(&pk, &tb);
				e |= msgpack_pack_array(&pk, n);
				for (int i = 0; i < n; i++)
					e |= msgpack_pack_int32(&pk, own[i]);
				fl[nf++] = (struct fw_field){ "tokens", 6, { tb.p, tb.n } };
			}
			fl[nf++] = (struct fw_field){ "logprobs", 8, { fb.p, fb.n } };
			if (e) {
				fw_warn("out of memory");
				rc = FW_EXIT_DATA;
				fw_reader_close(r);
				goto out;
			}
			if (fw_rec_set(&ob, rec.v, fl, nf) ||
			    fw_writer_put(w, ob.p, ob.n)) {
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
	free(tok);
	free(tgt);
	free(own);
	free(lp);
	free(buf);
	fw_tok_free(t);
	fw_model_free(m);
	return rc;
}

/* ---- dump ---------------------------------------------------------------------- */

/* One forward/backward pass and key-value-cache decoding over the given
 * tokens, everything written as f32 tensors to a safetensors file, so
 * another implementation (tests/ref/model_ref.py) can check each number. */
static int cmd_dump(struct opts *o)
{
	struct fw_model *m;
	struct fw_tok *t = NULL;
	struct fw_tok_ids ids = { 0 };
	double *list = NULL, *wl = NULL;
	int n = 0, B = o->batch, T, N, V, rc = FW_EXIT_DATA, P;
	int32_t *tok = NULL, *tgt = NULL;
	float *wts = NULL, *logp = NULL, loss, *ft = NULL, *kv = NULL, *fw = NULL;
	float *gcopy = NULL, *wafter = NULL;
	struct fw_st_out *out = NULL;
	struct fw_gen *g = NULL;

	if (o->nargs != 1 || !o->out || (!o->text == !o->tokens))
		return fw_usage_fail("%s", "dump needs DIR, -o OUT and one of --text, --tokens");
	if (!(m = load_model(o->args[0])))
		return FW_EXIT_DATA;
	V = m->cfg.vocab;
	if (o->tokens) {
		if ((n = parse_list(o->tokens, &list)) < 0) {
			fw_warn("cannot parse --tokens '%s'", o->tokens);
			goto out;
		}
	} else {
		if (!(t = load_tok(o->args[0], 1)) ||
		    fw_tok_encode(t, o->text, strlen(o->text), FW_TOK_ADD_BOS, 0, &ids))
			goto out;
		n = (int)ids.n;
		list = malloc(sizeof(double) * (n + 1));
		for (int i = 0; i < n; i++)
			list[i] = ids.ids[i];
	}
	if (B <= 0 || n < 2 * B || n % B) {
		fw_warn("%d tokens do not split into %d rows of at least 2", n, B);
		goto out;
	}
	T = n / B;
	N = n;
	tok = malloc(sizeof(int32_t) * N);
	tgt = malloc(sizeof(int32_t) * N);
	wts = malloc(sizeof(float) * N);
	logp = malloc(sizeof(float) * N);
	ft = malloc(sizeof(float) * N * 3);
	P = (T + 1) / 2;
	kv = malloc(sizeof(float) * B * (T - P));
	out = calloc(2 * m->np + 8, sizeof(*out));
	if (!tok || !tgt || !wts || !logp || !ft || !kv || !out)
		goto out;
	for (int i = 0; i < N; i++) {
		tok[i] = (int32_t)list[i];
		tgt[i] = (i % T) + 1 < T ? (int32_t)list[i + 1] : -1;
		wts[i] = 1.0f;
	}
	if (o->weights) {
		if (parse_list(o->weights, &wl) != N) {
			fw_warn("--weights needs %d values", N);
			goto out;
		}
		for (int i = 0; i < N; i++)
			wts[i] = (float)wl[i];
	}
	if (fw_model_grads(m) ||
	    fw_model_forward(m, tok, tgt, wts, B, T, 0, logp, &loss, err, sizeof(err))) {
		fw_warn("%s", err);
		goto out;
	}
	/* The logits before backward turns them into their gradient. */
	fw = malloc(sizeof(float) * (size_t)N * V);
	if (!fw)
		goto out;
	memcpy(fw, fw_model_logits(m), sizeof(float) * (size_t)N * V);
	if (fw_model_backward(m, err, sizeof(err))) {
		fw_warn("%s", err);
		goto out;
	}
	/* Each row again through the cache: prefill P tokens, step the rest. */
	if (!(g = fw_gen_new(m, 1, T, err, sizeof(err)))) {
		fw_warn("%s", err);
		goto out;
	}
	for (int b = 0; b < B; b++) {
		const int32_t *row = tok + (size_t)b * T;

		if (fw_gen_prefill(g, row, P, err, sizeof(err))) {
			fw_warn("%s", err);
			goto out;
		}
		for (int i = P - 1; i < T - 1; i++) {
			const float *lg = fw_gen_logits(g);
			float mx = -INFINITY;
			double z = 0;

			for (int j = 0; j < V; j++)
				mx = lg[j] > mx ? lg[j] : mx;
			for (int j = 0; j < V; j++)
				z += exp((double)lg[j] - mx);
			kv[b * (T - P) + (i - (P - 1))] = (float)(lg[row[i + 1]] - mx - log(z));
			if (i + 1 < T - 1 && fw_gen_step(g, &row[i + 1], err, sizeof(err))) {
				fw_warn("%s", err);
				goto out;
			}
		}
	}
	/* One AdamW step (clipped) from these gradients: the weights after it. */
	struct fw_adamw_cfg ac = { 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f };
	struct fw_opt *opt = fw_opt_new(m);
	float gnorm;

	gcopy = malloc(sizeof(float) * m->nw);
	wafter = malloc(sizeof(float) * m->nw);
	if (!opt || !gcopy || !wafter) {
		fw_opt_free(opt);
		goto out;
	}
	memcpy(gcopy, m->g, sizeof(float) * m->nw);
	gnorm = (float)fw_opt_step(opt, m, &ac);
	memcpy(wafter, m->w, sizeof(float) * m->nw);
	fw_opt_free(opt);
	for (int i = 0; i < N; i++) {
		ft[i] = (float)tok[i];
		ft[N + i] = (float)tgt[i];
		ft[2 * N + i] = wts[i];
	}
	int k = 0;
	out[k++] = (struct fw_st_out){ "tokens", 2, { B, T }, ft };
	out[k++] = (struct fw_st_out){ "targets", 2, { B, T }, ft + N };
	out[k++] = (struct fw_st_out){ "weights", 2, { B, T }, ft + 2 * N };
	out[k++] = (struct fw_st_out){ "logits", 3, { B, T, V }, fw };
	out[k++] = (struct fw_st_out){ "logp", 2, { B, T }, logp };
	out[k++] = (struct fw_st_out){ "loss", 1, { 1 }, &loss };
	out[k++] = (struct fw_st_out){ "kv_logp", 2, { B, T - P }, kv };
	out[k++] = (struct fw_st_out){ "grad_norm", 1, { 1 }, &gnorm };
	char **names = calloc(2 * m->np, sizeof(char *));
	for (int i = 0; i < 2 * m->np; i++) {
		const struct fw_param *pp = &m->params[i % m->np];

		if (asprintf(&names[i], "%s.%s", i < m->np ? "grad" : "step", pp->name) < 0)
			goto out;
		out[k] = (struct fw_st_out){ names[i], pp->ndim, { pp->shape[0], pp->shape[1] },
					     (i < m->np ? gcopy : wafter) + pp->off };
		k++;
	}
	if (fw_st_write(o->out, out, k, FW_F32, err, sizeof(err)))
		fw_warn("%s", err);
	else
		rc = FW_EXIT_OK;
	for (int i = 0; i < 2 * m->np; i++)
		free(names[i]);
	free(names);
out:
	fw_gen_free(g);
	fw_tok_ids_release(&ids);
	fw_tok_free(t);
	free(list);
	free(wl);
	free(tok);
	free(tgt);
	free(wts);
	free(logp);
	free(ft);
	free(kv);
	free(fw);
	free(gcopy);
	free(wafter);
	free(out);
	fw_model_free(m);
	return rc;
}

/* ---- bench --------------------------------------------------------------------- */

/* Times forward+backward over (batch, seq) random tokens, then decoding
 * of -n tokens after a 16-token prompt (one sequence, greedy).  Prints
 * tokens per second of each and the peak activation memory. */
static int cmd_bench(struct opts *o)
{
	struct fw_model *m;
	int B = o->batch, T = o->seq, N = B * T, V, rc = FW_EXIT_DATA;
	int32_t *tok = NULL, *tgt = NULL, p[16], *nexts = NULL;
	struct fw_gen *g = NULL;
	struct fw_sampler greedy = { 0, 1, 0 };
	uint64_t rng = 1, s = 12345;
	float *scr = NULL, loss;
	double t0 = 0, t1;

	if (o->nargs != 1)
		return fw_usage_fail("%s", "bench needs DIR");
	if (!(m = load_model(o->args[0])))
		return FW_EXIT_DATA;
	V = m->cfg.vocab;
	tok = malloc(sizeof(int32_t) * (N + 1));
	tgt = malloc(sizeof(int32_t) * N);
	scr = malloc(sizeof(float) * 2 * V);
	if (!tok || !tgt || !scr)
		goto out;
	for (int i = 0; i <= N; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		tok[i] = (int32_t)((s >> 33) % (uint64_t)V);
	}
	for (int i = 0; i < N; i++)
		tgt[i] = tok[i + 1];
	if (o->steps > 0) {
		if (fw_model_grads(m))
			goto out;
		for (int step = -1; step < o->steps; step++) {
			if (step == 0)
				t0 = fw_now();
			fw_model_zero_grad(m);
			if (fw_model_forward(m, tok, tgt, NULL, B, T, 0, NULL, &loss, err, sizeof(err)) ||
			    fw_model_backward(m, err, sizeof(err))) {
				fw_warn("%s", err);
				goto out;
			}
		}
		t1 = fw_now();
		/* 6 flops a token per weight of the products (2 forward, 4
		 * backward), plus attention's scores and sums, 12 L nh hd T
		 * (the PaLM count; the causal half not subtracted) */
		const struct fw_config *c = &m->cfg;
		double pw = (double)m->nw - (double)c->vocab * c->C * !c->tied;
		double fl = 6.0 * pw + 12.0 * c->L * c->nh * c->hd * T;

		printf("train: %.1f tokens/s (batch %d x %d, %d steps, %d threads, activations %zu MB, "
		       "%.3f GFLOP/token, device %s)\n",
		       (double)N * o->steps / (t1 - t0), B, T, o->steps,
		       fw_kernels_threads(), fw_model_act_bytes(m) >> 20, fl / 1e9,
		       fw_dev_name());
	}
	if (o->n > 0) {
		int S = o->count;

		if (!(g = fw_gen_new(m, S, 16 + o->n, err, sizeof(err))) ||
		    !(nexts = malloc(sizeof(int32_t) * S))) {
			fw_warn("%s", g ? "out of memory" : err);
			goto out;
		}
		memcpy(p, tok, sizeof(p));
		t0 = fw_now();
		if (fw_gen_prefill(g, p, 16, err, sizeof(err)))
			goto fail;
		t1 = fw_now();
		double t2 = t1;
		for (int i = 0; i < o->n; i++) {
			for (int k = 0; k < S; k++)
				nexts[k] = fw_sample(fw_gen_logits(g) + (size_t)k * V, V, &greedy,
						     &rng, scr, NULL);
			if (i + 1 < o->n && fw_gen_step(g, nexts, err, sizeof(err)))
				goto fail;
		}
		t2 = fw_now();
		printf("decode: %.1f tokens/s (%d tokens each of %d sequence%s after a 16-token "
		       "prompt, prefill %.1f ms)\n", (double)(o->n - 1) * S / (t2 - t1), o->n, S,
		       S == 1 ? "" : "s", (t1 - t0) * 1e3);
	}
	rc = FW_EXIT_OK;
	goto out;
fail:
	fw_warn("%s", err);
out:
	fw_gen_free(g);
	free(tok);
	free(tgt);
	free(scr);
	free(nexts);
	fw_model_free(m);
	return rc;
}

/* ---- main --------------------------------------------------------------------- */

enum { O_SEED = 256, O_TOK, O_DTYPE, O_PROMPT, O_TEMP, O_TOPP, O_TOPK,
       O_COUNT, O_TEXT, O_TOKENS, O_BATCH, O_WEIGHTS, O_SEQ, O_STEPS,
       O_DEVICE, O_VERSION };

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
		{ "text", required_argument, NULL, O_TEXT },
		{ "tokens", required_argument, NULL, O_TOKENS },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "weights", required_argument, NULL, O_WEIGHTS },
		{ "seq", required_argument, NULL, O_SEQ },
		{ "steps", required_argument, NULL, O_STEPS },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .prompt = "", .n = 64, .count = 1, .temp = 1.0,
			  .top_p = 1.0, .batch = 1, .level = -1, .seq = 256,
			  .steps = 3 };
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
			if (fw_parse_u64(optarg, &u, 0) || u < 1 || u > 1024)
				return fw_usage_fail("bad -j '%s'", optarg);
			fw_kernels_set_threads((int)u);
			break;
		case 'o': o.out = optarg; break;
		case 'z': o.level = 3; break;
		case O_TEXT: o.text = optarg; break;
		case O_DEVICE: o.device = optarg; break;
		case O_TOKENS: o.tokens = optarg; break;
		case O_BATCH:
			if (fw_parse_u64(optarg, &u, 0) || u < 1 || u > 65536)
				return fw_usage_fail("bad --batch '%s'", optarg);
			o.batch = (int)u;
			break;
		case O_WEIGHTS: o.weights = optarg; break;
		case O_SEQ:
			if (fw_parse_u64(optarg, &u, 0) || u < 1 || u > 1 << 20)
				return fw_usage_fail("bad --seq '%s'", optarg);
			o.seq = (int)u;
			break;
		case O_STEPS:
			if (fw_parse_u64(optarg, &u, 0) || u > 1 << 20)
				return fw_usage_fail("bad --steps '%s'", optarg);
			o.steps = (int)u;
			break;
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
	/* Scoring, sampling and timing run where --device or $FW_DEVICE say
	 * (a GPU when there is one); the others read or write weights on the
	 * host and stay on the CPU. */
	if (!strcmp(cmd, "score") || !strcmp(cmd, "sample") || !strcmp(cmd, "bench")) {
		if (fw_dev_select(o.device, err, sizeof(err)) < 0) {
			fw_warn("%s", err);
			return FW_EXIT_DATA;
		}
	} else if (o.device) {
		return fw_usage_fail("--device is for score, sample and bench, not %s", cmd);
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
	else if (!strcmp(cmd, "dump"))
		rc = cmd_dump(&o);
	else if (!strcmp(cmd, "bench"))
		rc = cmd_bench(&o);
	else
		return fw_usage_fail("unknown command '%s'", cmd);
	if (fw_close_stdout() && rc == FW_EXIT_OK)
		rc = FW_EXIT_DATA;
	return rc;
}
