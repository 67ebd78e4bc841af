/*
 * test_ckpt_harness.c — the model's test harnesses, and their own tests.
 *
 *   test_ckpt_harness dump DIR (--text TEXT | --tokens IDS) [--batch B]
 *                     [--weights WS] [--threads N] -o OUT
 *   test_ckpt_harness bench DIR [--batch B] [--seq T] [--steps N] [-n N]
 *                     [--count C] [--threads N] [--device cpu|cuda[:N]]
 *   test_ckpt_harness                 (TAP: the harness's own tests)
 *
 * dump runs one forward/backward pass, key-value-cache decoding and one
 * AdamW step over the given tokens and writes every number as f32 tensors
 * to a safetensors file, for tests/ref/model_ref.py (tests/ckpt.bats) to
 * check against PyTorch.  bench times forward+backward over (batch, seq)
 * random tokens, then decoding of -n tokens after a 16-token prompt, and
 * prints tokens per second (tests/bench/model-vs-torch).
 */
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fw_base.h"
#include "fw_cli.h"
#include "fw_model.h"
#include "fw_tok.h"
#include "kernels.h"
#include "kernels_dev.h"
#include "test.h"

static char err[1024];

/* Parses "1,2,3" (ints or floats) into a new array; returns count or -1. */
static int parse_list(const char *s, double **out)
{
	int n = 0, cap = 16;
	double *v = malloc(sizeof(double) * cap), *q;
	char *end;

	while (v && *s) {
		if (n == cap) {
			if (!(q = realloc(v, sizeof(double) * (cap *= 2))))
				break;
			v = q;
		}
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

/*
 * The dump of m over the n tokens ids in B rows (n a multiple of B, each
 * row at least 2), weights wl (n values, or NULL for 1), to path.
 * Returns 0, or -1 with err filled.
 */
static int dump(struct fw_model *m, const double *ids, int n, int B, const double *wl,
		const char *path)
{
	int T = n / B, N = n, V = m->cfg.vocab, P = (T + 1) / 2, rc = -1, k = 0;
	int32_t *tok = malloc(sizeof(int32_t) * N), *tgt = malloc(sizeof(int32_t) * N);
	float *wts = malloc(sizeof(float) * N), *logp = malloc(sizeof(float) * N), loss, gnorm;
	float *ft = malloc(sizeof(float) * N * 3), *kv = malloc(sizeof(float) * B * (T - P));
	float *lg0 = NULL, *gcopy = NULL, *wafter = NULL;
	struct fw_st_out *out = calloc(2 * m->np + 8, sizeof(*out));
	char **names = calloc(2 * m->np, sizeof(char *));
	struct fw_gen *g = NULL;
	struct fw_opt *opt = NULL;

	fw_seterr(err, sizeof(err), "out of memory");
	if (!tok || !tgt || !wts || !logp || !ft || !kv || !out || !names)
		goto out;
	for (int i = 0; i < N; i++) {
		tok[i] = (int32_t)ids[i];
		tgt[i] = (i % T) + 1 < T ? (int32_t)ids[i + 1] : -1;
		wts[i] = wl ? (float)wl[i] : 1.0f;
	}
	if (fw_model_grads(m) ||
	    fw_model_forward(m, tok, tgt, wts, B, T, 0, logp, &loss, err, sizeof(err)))
		goto out;
	/* The logits before backward turns them into their gradient. */
	if (!(lg0 = malloc(sizeof(float) * (size_t)N * V))) {
		fw_seterr(err, sizeof(err), "out of memory");
		goto out;
	}
	memcpy(lg0, fw_model_logits(m), sizeof(float) * (size_t)N * V);
	if (fw_model_backward(m, err, sizeof(err)) || !(g = fw_gen_new(m, 1, T, err, sizeof(err))))
		goto out;
	/* Each row again through the cache: prefill P tokens, step the rest. */
	for (int b = 0; b < B; b++) {
		const int32_t *row = tok + (size_t)b * T;

		if (fw_gen_prefill(g, row, P, err, sizeof(err)))
			goto out;
		for (int i = P - 1; i < T - 1; i++) {
			const float *lg = fw_gen_logits(g);
			float mx = -INFINITY;
			double z = 0;

			for (int j = 0; j < V; j++)
				mx = lg[j] > mx ? lg[j] : mx;
			for (int j = 0; j < V; j++)
				z += exp((double)lg[j] - mx);
			kv[b * (T - P) + (i - (P - 1))] = (float)(lg[row[i + 1]] - mx - log(z));
			if (i + 1 < T - 1 && fw_gen_step(g, &row[i + 1], err, sizeof(err)))
				goto out;
		}
	}
	/* One AdamW step (clipped) from these gradients: the weights after it. */
	struct fw_adamw_cfg ac = { 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f };

	fw_seterr(err, sizeof(err), "out of memory");
	opt = fw_opt_new(m);
	gcopy = malloc(sizeof(float) * m->nw);
	wafter = malloc(sizeof(float) * m->nw);
	if (!opt || !gcopy || !wafter)
		goto out;
	memcpy(gcopy, m->g, sizeof(float) * m->nw);
	gnorm = (float)fw_opt_step(opt, m, &ac);
	memcpy(wafter, m->w, sizeof(float) * m->nw);
	for (int i = 0; i < N; i++) {
		ft[i] = (float)tok[i];
		ft[N + i] = (float)tgt[i];
		ft[2 * N + i] = wts[i];
	}
	out[k++] = (struct fw_st_out){ "tokens", 2, { B, T }, ft };
	out[k++] = (struct fw_st_out){ "targets", 2, { B, T }, ft + N };
	out[k++] = (struct fw_st_out){ "weights", 2, { B, T }, ft + 2 * N };
	out[k++] = (struct fw_st_out){ "logits", 3, { B, T, V }, lg0 };
	out[k++] = (struct fw_st_out){ "logp", 2, { B, T }, logp };
	out[k++] = (struct fw_st_out){ "loss", 1, { 1 }, &loss };
	out[k++] = (struct fw_st_out){ "kv_logp", 2, { B, T - P }, kv };
	out[k++] = (struct fw_st_out){ "grad_norm", 1, { 1 }, &gnorm };
	for (int i = 0; i < 2 * m->np; i++) {
		const struct fw_param *pp = &m->params[i % m->np];

		if (asprintf(&names[i], "%s.%s", i < m->np ? "grad" : "step", pp->name) < 0) {
			names[i] = NULL;
			goto out;
		}
		out[k++] = (struct fw_st_out){ names[i], pp->ndim, { pp->shape[0], pp->shape[1] },
					       (i < m->np ? gcopy : wafter) + pp->off };
	}
	rc = fw_st_write(path, out, k, FW_F32, err, sizeof(err)) ? -1 : 0;
out:
	if (names)
		for (int i = 0; i < 2 * m->np; i++)
			free(names[i]);
	free(names);
	fw_opt_free(opt);
	fw_gen_free(g);
	free(tok);
	free(tgt);
	free(wts);
	free(logp);
	free(ft);
	free(kv);
	free(lg0);
	free(gcopy);
	free(wafter);
	free(out);
	return rc;
}

/* Times forward+backward over B x T random tokens (steps > 0), then
 * decoding of n tokens of S sequences after a 16-token prompt (n > 0).
 * Prints a line for each.  Returns 0, or -1 with err filled. */
static int bench(struct fw_model *m, int B, int T, int steps, int n, int S)
{
	int N = B * T, V = m->cfg.vocab, rc = -1;
	int32_t *tok = malloc(sizeof(int32_t) * (N + 16)), *tgt = malloc(sizeof(int32_t) * N);
	int32_t *nexts = malloc(sizeof(int32_t) * S);
	float *scr = malloc(sizeof(float) * 2 * V), loss;
	struct fw_gen *g = NULL;
	struct fw_sampler greedy = { 0, 1, 0 };
	uint64_t rng = 1, s = 12345;
	double t0 = 0, t1;

	fw_seterr(err, sizeof(err), "out of memory");
	if (!tok || !tgt || !scr || !nexts)
		goto out;
	for (int i = 0; i < N + 16; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		tok[i] = (int32_t)((s >> 33) % (uint64_t)V);
	}
	for (int i = 0; i < N; i++)
		tgt[i] = tok[i + 1];
	if (steps > 0) {
		if (fw_model_grads(m))
			goto out;
		for (int step = -1; step < steps; step++) {
			if (step == 0)
				t0 = fw_now();
			fw_model_zero_grad(m);
			if (fw_model_forward(m, tok, tgt, NULL, B, T, 0, NULL, &loss, err, sizeof(err)) ||
			    fw_model_backward(m, err, sizeof(err)))
				goto out;
		}
		t1 = fw_now();
		/* 6 flops a token per weight of the products (2 forward, 4
		 * backward), plus attention's scores and sums, 12 L nh hd T
		 * (the PaLM count; the causal half not subtracted) */
		const struct fw_config *c = &m->cfg;
		double pw = (double)m->nw - (double)c->vocab * c->C * !c->tied;
		double fl = 6.0 * pw + 12.0 * c->L * c->nh * c->hd * T;

		printf("train: %.1f tokens/s (batch %d x %d, %d steps, %d threads, activations %zu MB, "
		       "%.3f GFLOP/token, device %s)\n", (double)N * steps / (t1 - t0), B, T, steps,
		       fw_kernels_threads(), fw_model_act_bytes(m) >> 20, fl / 1e9, fw_dev_name());
	}
	if (n > 0) {
		if (!(g = fw_gen_new(m, S, 16 + n, err, sizeof(err))))
			goto out;
		t0 = fw_now();
		if (fw_gen_prefill(g, tok, 16, err, sizeof(err)))
			goto out;
		t1 = fw_now();
		for (int i = 0; i < n; i++) {
			for (int k = 0; k < S; k++)
				nexts[k] = fw_sample(fw_gen_logits(g) + (size_t)k * V, V, &greedy,
						     &rng, scr, NULL);
			if (i + 1 < n && fw_gen_step(g, nexts, err, sizeof(err)))
				goto out;
		}
		printf("decode: %.1f tokens/s (%d tokens each of %d sequence%s after a 16-token "
		       "prompt, prefill %.1f ms)\n", (double)(n - 1) * S / (fw_now() - t1), n, S,
		       S == 1 ? "" : "s", (t1 - t0) * 1e3);
	}
	rc = 0;
out:
	fw_gen_free(g);
	free(tok);
	free(tgt);
	free(scr);
	free(nexts);
	return rc;
}

/* A positive int option, or -1 after a diagnostic. */
static int pos_int(const char *name, const char *arg, uint64_t lo, uint64_t hi)
{
	uint64_t u;

	if (fw_parse_u64(arg, &u, 0) || u < lo || u > hi) {
		fprintf(stderr, "test_ckpt_harness: bad %s '%s'\n", name, arg);
		return -1;
	}
	return (int)u;
}

/* The harness's command line: dump or bench (argv[1]).  Exit status. */
static int harness(int argc, char **argv)
{
	enum { O_TEXT = 256, O_TOKENS, O_BATCH, O_WEIGHTS, O_SEQ, O_STEPS, O_COUNT, O_THREADS,
	       O_DEVICE };
	static const struct option lo[] = {
		{ "text", required_argument, NULL, O_TEXT },
		{ "tokens", required_argument, NULL, O_TOKENS },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "weights", required_argument, NULL, O_WEIGHTS },
		{ "seq", required_argument, NULL, O_SEQ },
		{ "steps", required_argument, NULL, O_STEPS },
		{ "count", required_argument, NULL, O_COUNT },
		{ "threads", required_argument, NULL, O_THREADS },
		{ "device", required_argument, NULL, O_DEVICE },
		{ NULL, 0, NULL, 0 },
	};
	const char *text = NULL, *tokens = NULL, *weights = NULL, *out = NULL, *device = NULL;
	int B = 1, T = 256, steps = 3, n = 64, S = 1, c, v, rc = 1, is_dump = !strcmp(argv[1], "dump");
	struct fw_model *m = NULL;
	struct fw_tok *t = NULL;
	struct fw_tok_ids ids = { 0 };
	double *list = NULL, *wl = NULL;

	if (!is_dump && strcmp(argv[1], "bench")) {
		fprintf(stderr, "test_ckpt_harness: unknown command '%s' (dump, bench)\n", argv[1]);
		return 2;
	}
	optind = 2;
	while ((c = getopt_long(argc, argv, "n:o:j:", lo, NULL)) != -1) {
		switch (c) {
		case O_TEXT: text = optarg; break;
		case O_TOKENS: tokens = optarg; break;
		case O_WEIGHTS: weights = optarg; break;
		case O_DEVICE: device = optarg; break;
		case 'o': out = optarg; break;
		case O_BATCH: if ((B = pos_int("--batch", optarg, 1, 65536)) < 0) return 2; break;
		case O_SEQ: if ((T = pos_int("--seq", optarg, 1, 1 << 20)) < 0) return 2; break;
		case O_STEPS: if ((steps = pos_int("--steps", optarg, 0, 1 << 20)) < 0) return 2; break;
		case O_COUNT: if ((S = pos_int("--count", optarg, 1, 4096)) < 0) return 2; break;
		case 'n': if ((n = pos_int("-n", optarg, 0, INT_MAX / 2)) < 0) return 2; break;
		case 'j':
		case O_THREADS:
			if ((v = pos_int("--threads", optarg, 1, 1024)) < 0)
				return 2;
			fw_kernels_set_threads(v);
			break;
		default: return 2;
		}
	}
	if (optind + 1 != argc || (is_dump && (!out || !text == !tokens))) {
		fprintf(stderr, "test_ckpt_harness: %s\n", is_dump ?
			"dump needs DIR, -o OUT and one of --text, --tokens" : "bench needs DIR");
		return 2;
	}
	if ((!is_dump && fw_dev_select(device, err, sizeof(err)) < 0) ||
	    !(m = fw_model_load(argv[optind], err, sizeof(err))))
		goto fail;
	if (!is_dump) {
		rc = bench(m, B, T, steps, n, S) ? 1 : 0;
		goto done;
	}
	int k = 0;

	if (tokens && (k = parse_list(tokens, &list)) < 0) {
		fprintf(stderr, "test_ckpt_harness: cannot parse --tokens '%s'\n", tokens);
		goto done;
	}
	if (text) {
		char p[PATH_MAX];

		snprintf(p, sizeof(p), "%s/tokenizer.json", argv[optind]);
		if (!(t = fw_tok_load(p, err, sizeof(err))) ||
		    fw_tok_encode(t, text, strlen(text), FW_TOK_ADD_BOS, 0, &ids) ||
		    !(list = malloc(sizeof(double) * (ids.n + 1))))
			goto fail;
		k = (int)ids.n;
		for (int i = 0; i < k; i++)
			list[i] = ids.ids[i];
	}
	if (k < 2 * B || k % B) {
		fprintf(stderr, "test_ckpt_harness: %d tokens do not split into %d rows of at least 2\n",
			k, B);
		goto done;
	}
	if (weights && parse_list(weights, &wl) != k) {
		fprintf(stderr, "test_ckpt_harness: --weights needs %d values\n", k);
		goto done;
	}
	if (!dump(m, list, k, B, wl, out)) {
		rc = 0;
		goto done;
	}
fail:
	fprintf(stderr, "test_ckpt_harness: %s\n", err);
done:
	if (rc == 0 && fflush(stdout))
		rc = 1;
	free(list);
	free(wl);
	fw_tok_ids_release(&ids);
	fw_tok_free(t);
	fw_model_free(m);
	return rc;
}

/* ---- the harness's own tests ---------------------------------------------------- */

static struct fw_model *tiny(void)
{
	static const char j[] =
		"{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 37, "
		"\"hidden_size\": 16, \"intermediate_size\": 24, "
		"\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
		"\"num_key_value_heads\": 2, \"max_position_embeddings\": 64, "
		"\"rms_norm_eps\": 1e-6, \"initializer_range\": 0.3}";
	struct fw_config c;

	if (fw_config_parse(&c, j, strlen(j), "cfg", err, sizeof(err)))
		return NULL;
	return fw_model_new(&c, 3, err, sizeof(err));
}

/* Dumps the tiny model over 2 rows of 8 tokens into a new file; returns
 * the opened dump or NULL. */
static struct fw_st *tiny_dump(char *path, size_t len, struct fw_model **mp)
{
	double ids[16];

	for (int i = 0; i < 16; i++)
		ids[i] = (i * 7 + 3) % 37;
	snprintf(path, len, "%s/ckpt-harness-%ld.st", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
		 (long)getpid());
	if (!(*mp = tiny()) || dump(*mp, ids, 16, 2, NULL, path)) {
		printf("# %s\n", err);
		return NULL;
	}
	return fw_st_open(path, err, sizeof(err));
}

TEST(dump_writes_every_tensor_the_reference_reads_in_its_shape)
{
	char path[4200];
	struct fw_model *m = NULL;
	struct fw_st *st = tiny_dump(path, sizeof(path), &m);
	static const struct { const char *name; int ndim; int64_t d0, d1, d2; } want[] = {
		{ "tokens", 2, 2, 8, 0 }, { "targets", 2, 2, 8, 0 }, { "weights", 2, 2, 8, 0 },
		{ "logits", 3, 2, 8, 37 }, { "logp", 2, 2, 8, 0 }, { "loss", 1, 1, 0, 0 },
		{ "kv_logp", 2, 2, 4, 0 }, { "grad_norm", 1, 1, 0, 0 },
	};

	CHECK(st != NULL);
	if (!st || !m)
		goto out;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct fw_st_tensor *t = fw_st_find(st, want[i].name);

		CHECK(t != NULL);
		if (!t)
			continue;
		CHECK_EQ_INT(t->ndim, want[i].ndim);
		CHECK_EQ_INT(t->shape[0], want[i].d0);
		if (want[i].ndim > 1)
			CHECK_EQ_INT(t->shape[1], want[i].d1);
		if (want[i].ndim > 2)
			CHECK_EQ_INT(t->shape[2], want[i].d2);
	}
	CHECK_EQ_INT(st->n, 8 + 2 * m->np);
	for (int i = 0; i < m->np; i++) {
		char g[300], s[300];

		snprintf(g, sizeof(g), "grad.%s", m->params[i].name);
		snprintf(s, sizeof(s), "step.%s", m->params[i].name);
		CHECK(fw_st_find(st, g) != NULL);
		CHECK(fw_st_find(st, s) != NULL);
	}
out:
	fw_st_free(st);
	fw_model_free(m);
	unlink(path);
}

TEST(dump_loss_is_the_mean_negative_logp_of_the_scored_positions)
{
	char path[4200];
	struct fw_model *m = NULL;
	struct fw_st *st = tiny_dump(path, sizeof(path), &m);
	float lp[16], tg[16], loss;
	const struct fw_st_tensor *a = st ? fw_st_find(st, "logp") : NULL;
	const struct fw_st_tensor *b = st ? fw_st_find(st, "targets") : NULL;
	const struct fw_st_tensor *l = st ? fw_st_find(st, "loss") : NULL;

	CHECK(a && b && l);
	if (!a || !b || !l)
		goto out;
	CHECK_EQ_INT(fw_st_read_f32(st, a, lp, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_st_read_f32(st, b, tg, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_st_read_f32(st, l, &loss, err, sizeof(err)), 0);
	double sum = 0, abs = 0;
	int n = 0;

	for (int i = 0; i < 16; i++) {
		if (tg[i] < 0) {
			CHECK(lp[i] == 0); /* the last position of a row is not scored */
			continue;
		}
		CHECK(lp[i] < 0);
		sum -= lp[i];
		abs += fabs(lp[i]);
		n++;
	}
	CHECK_EQ_INT(n, 14);
	/* The model sums 14 f32 terms: each addition rounds by at most
	 * FLT_EPSILON/2 of the partial sum, so the total is off by at most
	 * n * FLT_EPSILON * sum|logp| (and the division by n rounds once). */
	CHECK(fabs(loss - sum / n) <= (n + 1) * FLT_EPSILON * abs / n);
out:
	fw_st_free(st);
	fw_model_free(m);
	unlink(path);
}

#define main tap_main
TEST_MAIN()
#undef main

int main(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "dump") || !strcmp(argv[1], "bench")))
		return harness(argc, argv);
	return tap_main(argc, argv);
}
