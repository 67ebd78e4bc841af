/*
 * test_model.c — the model without PyTorch: config errors, safetensors
 * round trips and bad files, whole-model gradients against finite
 * differences, the key-value cache against the full forward, sampling.
 * (tests/ckpt.bats compares the same model with a PyTorch build of it.)
 */
#include <stdint.h>
#include <unistd.h>
#include <sys/stat.h>

#include "fw_model.h"
#include "kernels.h"
#include "test.h"

static char err[512];
static char tmpdir[256];

static const char *tmp(void)
{
	if (!tmpdir[0]) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_model.XXXXXX");
		if (!mkdtemp(tmpdir))
			abort();
	}
	return tmpdir;
}

static void write_file(const char *path, const void *p, size_t n);

static const char *cfg_json(const char *arch, int tied, int extra_big)
{
	static char buf[1024];

	snprintf(buf, sizeof(buf),
		 "{\"architectures\": [\"%s\"], \"vocab_size\": 37, "
		 "\"hidden_size\": 16, \"intermediate_size\": 24, "
		 "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
		 "\"num_key_value_heads\": 2, \"head_dim\": %d, "
		 "\"max_position_embeddings\": 128, \"rope_theta\": 10000.0, "
		 "\"rms_norm_eps\": 1e-6, \"initializer_range\": %s, "
		 "\"tie_word_embeddings\": %s}",
		 arch, extra_big ? 6 : 4, extra_big ? "0.3" : "0.02",
		 tied ? "true" : "false");
	return buf;
}

static struct fw_model *tiny(const char *arch, int tied, float range)
{
	struct fw_config c;
	const char *j = cfg_json(arch, tied, range > 0.1f);

	if (fw_config_parse(&c, j, strlen(j), "cfg", err, sizeof(err))) {
		printf("# %s\n", err);
		return NULL;
	}
	return fw_model_new(&c, 7, err, sizeof(err));
}

TEST(config_reads_the_three_architectures)
{
	struct fw_config c;
	const char *j = cfg_json("Qwen2ForCausalLM", 1, 0);

	CHECK_EQ_INT(fw_config_parse(&c, j, strlen(j), "c", err, sizeof(err)), 0);
	CHECK_EQ_INT(c.arch, FW_ARCH_QWEN2);
	CHECK(c.qkv_bias && !c.o_bias && !c.qk_norm && c.tied);
	CHECK_EQ_INT(c.nkv, 2);
	j = cfg_json("Qwen3ForCausalLM", 0, 0);
	CHECK_EQ_INT(fw_config_parse(&c, j, strlen(j), "c", err, sizeof(err)), 0);
	CHECK(c.qk_norm && !c.qkv_bias && !c.tied);
	j = cfg_json("LlamaForCausalLM", 0, 0);
	CHECK_EQ_INT(fw_config_parse(&c, j, strlen(j), "c", err, sizeof(err)), 0);
	CHECK(!c.qk_norm && !c.qkv_bias);
	CHECK_NEAR(c.rope_theta, 10000.0, 0);
}

TEST(config_errors_name_the_file_and_the_problem)
{
	struct fw_config c;
	const char *j = cfg_json("GPT2LMHeadModel", 0, 0);

	CHECK_EQ_INT(fw_config_parse(&c, j, strlen(j), "x/config.json", err, sizeof(err)), -1);
	CHECK(strstr(err, "x/config.json: unsupported architecture 'GPT2LMHeadModel'") != NULL);
	const char *r = "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 10, "
			"\"hidden_size\": 8, \"intermediate_size\": 8, \"num_hidden_layers\": 1, "
			"\"num_attention_heads\": 2, \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4}}";
	CHECK_EQ_INT(fw_config_parse(&c, r, strlen(r), "c.json", err, sizeof(err)), -1);
	CHECK(strstr(err, "c.json: rope_scaling type 'yarn' is not supported") != NULL);
	const char *d = "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 10, "
			"\"hidden_size\": 8, \"intermediate_size\": 8, \"num_hidden_layers\": 1, "
			"\"num_attention_heads\": 2, \"rope_scaling\": {\"rope_type\": \"default\"}}";
	CHECK_EQ_INT(fw_config_parse(&c, d, strlen(d), "c.json", err, sizeof(err)), 0);
	CHECK_EQ_INT(c.rope_type, FW_ROPE_DEFAULT);
	const char *m = "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 10}";
	CHECK_EQ_INT(fw_config_parse(&c, m, strlen(m), "c.json", err, sizeof(err)), -1);
	CHECK(strstr(err, "'hidden_size' missing") != NULL);
	CHECK_EQ_INT(fw_config_parse(&c, "[1]", 3, "c.json", err, sizeof(err)), -1);
}

TEST(fresh_models_are_seeded_and_hf_shaped)
{
	struct fw_model *a = tiny("Qwen2ForCausalLM", 1, 0), *b = tiny("Qwen2ForCausalLM", 1, 0);
	const struct fw_param *p;

	CHECK(a && b);
	CHECK(memcmp(a->w, b->w, sizeof(float) * a->nw) == 0);
	CHECK(fw_model_param(a, "lm_head.weight") == NULL);
	CHECK(a->lm_head == a->embed);
	p = fw_model_param(a, "model.layers.1.self_attn.k_proj.bias");
	CHECK(p && p->shape[0] == 8 && a->w[p->off] == 0);
	p = fw_model_param(a, "model.layers.0.input_layernorm.weight");
	CHECK(p && a->w[p->off] == 1.0f);
	p = fw_model_param(a, "model.layers.0.mlp.down_proj.weight");
	CHECK(p && p->shape[0] == 16 && p->shape[1] == 24);
	double ss = fw_sumsq(a->embed, 37 * 16) / (37 * 16);
	CHECK(sqrt(ss) > 0.015 && sqrt(ss) < 0.025);
	fw_model_free(a);
	fw_model_free(b);
	fw_model_free(NULL);
}

TEST(save_and_load_round_trip_in_every_dtype)
{
	struct fw_model *a = tiny("Qwen3ForCausalLM", 0, 0.3f), *b;
	enum fw_dtype dts[3] = { FW_F32, FW_BF16, FW_F16 };

	for (int d = 0; d < 3; d++) {
		CHECK_EQ_INT(fw_model_save(a, tmp(), dts[d], err, sizeof(err)), 0);
		b = fw_model_load(tmp(), err, sizeof(err));
		CHECK(b != NULL);
		if (!b) {
			printf("# %s\n", err);
			continue;
		}
		CHECK_EQ_INT(b->nw, a->nw);
		double worst = 0;
		for (long i = 0; i < a->nw; i++) {
			double e = fabs(b->w[i] - a->w[i]) / fmax(fabs(a->w[i]), 1e-3);
			if (e > worst)
				worst = e;
		}
		CHECK(worst <= (d == 0 ? 0 : d == 1 ? 1.0 / 256 : 1.0 / 2048));
		CHECK_EQ_INT(b->cfg.arch, FW_ARCH_QWEN3);
		fw_model_free(b);
	}
	fw_model_free(a);
}

TEST(sharded_checkpoints_load_through_the_index)
{
	struct fw_model *a = tiny("LlamaForCausalLM", 0, 0.3f), *b;
	struct fw_st_out *t = calloc(a->np, sizeof(*t));
	char path[512], *idx = malloc(65536);
	size_t o = 0;
	int half = a->np / 2;

	CHECK_EQ_INT(fw_model_save(a, tmp(), FW_F32, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/model.safetensors", tmp());
	unlink(path);
	o += snprintf(idx + o, 65536 - o, "{\"metadata\": {}, \"weight_map\": {");
	for (int i = 0; i < a->np; i++) {
		t[i] = (struct fw_st_out){ a->params[i].name, a->params[i].ndim,
					   { a->params[i].shape[0], a->params[i].shape[1] },
					   a->w + a->params[i].off };
		o += snprintf(idx + o, 65536 - o, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"",
			      i ? ", " : "", t[i].name, i < half ? 1 : 2);
	}
	snprintf(idx + o, 65536 - o, "}}");
	snprintf(path, sizeof(path), "%s/model-00001-of-00002.safetensors", tmp());
	CHECK_EQ_INT(fw_st_write(path, t, half, FW_BF16, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/model-00002-of-00002.safetensors", tmp());
	CHECK_EQ_INT(fw_st_write(path, t + half, a->np - half, FW_F32, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", tmp());
	write_file(path, idx, strlen(idx));
	b = fw_model_load(tmp(), err, sizeof(err));
	CHECK(b != NULL);
	if (!b)
		printf("# %s\n", err);
	else {
		long last = a->params[a->np - 1].off;
		CHECK(memcmp(b->w + last, a->w + last, sizeof(float) * a->params[a->np - 1].n) == 0);
		CHECK(fabs(b->w[5] - a->w[5]) <= fabs(a->w[5]) / 256);
	}
	/* A shard missing from disk is named. */
	snprintf(path, sizeof(path), "%s/model-00002-of-00002.safetensors", tmp());
	unlink(path);
	CHECK(fw_model_load(tmp(), err, sizeof(err)) == NULL);
	CHECK(strstr(err, "model-00002-of-00002.safetensors: No such file") != NULL);
	snprintf(path, sizeof(path), "%s/model-00001-of-00002.safetensors", tmp());
	unlink(path);
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", tmp());
	unlink(path);
	fw_model_free(a);
	fw_model_free(b);
	free(t);
	free(idx);
}

TEST(f16_and_bf16_conversions_round_to_nearest_even)
{
	CHECK(fw_f32_to_bf16(1.0f) == 0x3f80);
	CHECK(fw_bf16_to_f32(0x3f80) == 1.0f);
	CHECK(fw_f32_to_f16(1.0f) == 0x3c00);
	CHECK(fw_f32_to_f16(65504.0f) == 0x7bff);
	CHECK(fw_f32_to_f16(1e6f) == 0x7c00);
	CHECK(fw_f16_to_f32(0x0001) == ldexpf(1, -24));
	CHECK(fw_f32_to_f16(ldexpf(1, -24)) == 0x0001);
	CHECK(fw_f32_to_f16(-2.0f) == 0xc000);
	CHECK(fw_f16_to_f32(0x3555) == 0.333251953125f);
	/* 1 + 2^-11 is halfway between two f16 values: to the even one. */
	CHECK(fw_f32_to_f16(1.0f + ldexpf(1, -11)) == 0x3c00);
	CHECK(fw_f32_to_f16(1.0f + 3 * ldexpf(1, -11)) == 0x3c02);
	for (int h = 0; h < 0x7c00; h += 7)
		if (fw_f32_to_f16(fw_f16_to_f32((uint16_t)h)) != h) {
			CHECK(!"f16 round trip");
			break;
		}
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	fwrite(p, 1, n, f);
	fclose(f);
}

static char *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *b;

	fseek(f, 0, SEEK_END);
	*n = (size_t)ftell(f);
	rewind(f);
	b = malloc(*n + 1);
	if (fread(b, 1, *n, f) != *n)
		abort();
	fclose(f);
	return b;
}

TEST(bad_safetensors_files_give_errors_naming_file_and_tensor)
{
	struct fw_model *a = tiny("LlamaForCausalLM", 0, 0), *b;
	char path[512];
	size_t n;
	char *img;

	CHECK_EQ_INT(fw_model_save(a, tmp(), FW_F32, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/model.safetensors", tmp());
	img = read_file(path, &n);

	write_file(path, img, n - 10); /* truncated data */
	CHECK((b = fw_model_load(tmp(), err, sizeof(err))) == NULL);
	CHECK(strstr(err, "model.safetensors: tensor '") && strstr(err, "truncated"));

	write_file(path, img, 5); /* not even a header length */
	CHECK((b = fw_model_load(tmp(), err, sizeof(err))) == NULL);
	CHECK(strstr(err, "not a safetensors file") != NULL);

	char *bad = malloc(n);
	memcpy(bad, img, n);
	bad[8] = '['; /* header is not an object */
	write_file(path, bad, n);
	CHECK((b = fw_model_load(tmp(), err, sizeof(err))) == NULL);
	CHECK(strstr(err, "header is not a JSON object") != NULL);

	memcpy(bad, img, n);
	bad[3] = 0x7f; /* absurd header length */
	write_file(path, bad, n);
	CHECK((b = fw_model_load(tmp(), err, sizeof(err))) == NULL);
	CHECK(strstr(err, "header length") != NULL);

	/* A config with a different width: shapes disagree. */
	struct fw_model *w = tiny("LlamaForCausalLM", 0, 0);
	w->cfg.I = 32;
	write_file(path, img, n);
	char cpath[512];
	snprintf(cpath, sizeof(cpath), "%s/config.json", tmp());
	CHECK_EQ_INT(fw_config_save(&w->cfg, cpath, NULL, err, sizeof(err)), 0);
	CHECK((b = fw_model_load(tmp(), err, sizeof(err))) == NULL);
	CHECK(strstr(err, "tensor 'model.layers.0.mlp.gate_proj.weight': shape [24, 16], "
		      "config.json implies [32, 16]") != NULL);

	/* An integer tensor where weights belong. */
	float zero[16] = { 0 };
	struct fw_st_out t = { "x", 1, { 16 }, zero };
	CHECK_EQ_INT(fw_st_write(path, &t, 1, FW_F32, err, sizeof(err)), 0);
	img = (free(img), read_file(path, &n));
	char *f32 = memmem(img, n, "\"F32\"", 5);
	CHECK(f32 != NULL);
	if (f32)
		memcpy(f32, "\"I32\"", 5);
	write_file(path, img, n);
	struct fw_st *st = fw_st_open(path, err, sizeof(err));
	CHECK(st != NULL);
	float out[16];
	CHECK_EQ_INT(fw_st_read_f32(st, &st->t[0], out, err, sizeof(err)), -1);
	CHECK(strstr(err, "tensor 'x': unsupported dtype I32") != NULL);
	fw_st_free(st);
	free(bad);
	free(img);
	fw_model_free(a);
	fw_model_free(w);
}

/* Whole-model gradient against central differences of the loss. */
static void gradcheck(const char *arch, int tied)
{
	struct fw_model *m = tiny(arch, tied, 0.3f);
	int B = 2, T = 5;
	int32_t tok[10] = { 1, 5, 9, 36, 2, 0, 3, 3, 8, 30 };
	int32_t tgt[10] = { 5, 9, 36, 2, -1, 3, 3, 8, 30, 4 };
	float wts[10] = { 1, 0.5f, 2, 1, 1, -0.5f, 1, 1, 1, 0.25f };
	float loss, lp, lm;
	int bad = 0, checked = 0;

	CHECK(m != NULL);
	if (!m)
		return;
	CHECK_EQ_INT(fw_model_forward(m, tok, tgt, wts, B, T, 0, NULL, &loss, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_model_backward(m, err, sizeof(err)), 0);
	for (int i = 0; i < m->np; i++) {
		const struct fw_param *p = &m->params[i];

		for (long j = 0; j < p->n; j += p->n / 3 + 1) {
			float *x = m->w + p->off + j, x0 = *x, h = 1e-2f;

			*x = x0 + h;
			fw_model_forward(m, tok, tgt, wts, B, T, 0, NULL, &lp, err, sizeof(err));
			*x = x0 - h;
			fw_model_forward(m, tok, tgt, wts, B, T, 0, NULL, &lm, err, sizeof(err));
			*x = x0;
			double fd = ((double)lp - lm) / (2 * h), an = m->g[p->off + j];

			checked++;
			if (fabs(fd - an) > 2e-2 * fmax(fabs(fd), 0.05)) {
				if (bad++ < 5)
					printf("# %s %s[%ld]: analytic %.6g numeric %.6g\n",
					       arch, p->name, j, an, fd);
			}
		}
	}
	CHECK(checked > 40);
	CHECK_EQ_INT(bad, 0);
	fw_model_free(m);
}

TEST(llama_gradients_match_finite_differences) { gradcheck("LlamaForCausalLM", 0); }
TEST(qwen2_gradients_match_finite_differences) { gradcheck("Qwen2ForCausalLM", 1); }
TEST(qwen3_gradients_match_finite_differences) { gradcheck("Qwen3ForCausalLM", 0); }

/*
 * A soft target (row r, token j, weight w) is the loss term of a second
 * copy of the sequence scored on j at r alone: a batch of the sequence
 * twice, the copy's only target j at r with weight w, has the same loss
 * and gradient at norm 1 (activations are per sequence; gradients add).
 * The two sum the same terms in other orders, so they agree to float
 * rounding of sums of a few hundred terms: 1e-5 relative to the largest
 * gradient.
 */
TEST(soft_targets_score_and_train_like_a_copy_of_the_sequence)
{
	struct fw_model *m = tiny("Qwen2ForCausalLM", 1, 0.3f);
	int T = 5, V;
	int32_t tok[10] = { 1, 5, 9, 36, 2, 1, 5, 9, 36, 2 };
	int32_t tgt[10] = { 5, 9, 36, 2, -1, -1, -1, -1, -1, -1 };
	float wts[10] = { 1, 0.5f, 2, 1, 1, 0, 0, 0, 0, 0 };
	/* three soft targets: two at row 1 (one its own target 9), one at 3 */
	int32_t srow[3] = { 1, 1, 3 }, stok[3] = { 7, 9, 20 };
	float sw[3] = { 0.25f, 0.5f, 0.75f }, slp[3], lp2[10], l1, l2;
	struct fw_soft sf = { 3, srow, stok, sw, slp };

	CHECK(m != NULL);
	if (!m)
		return;
	V = m->cfg.vocab;
	long nw = m->nw;
	float *g1 = malloc(sizeof(float) * nw), *g2 = malloc(sizeof(float) * nw);

	fw_model_grads(m);
	fw_model_zero_grad(m);
	CHECK_EQ_INT(fw_model_forward_soft(m, tok, tgt, wts, 1, T, 1, NULL, &l1, &sf, err,
					   sizeof(err)), 0);
	CHECK_EQ_INT(fw_model_backward(m, err, sizeof(err)), 0);
	memcpy(g1, m->g, sizeof(float) * nw);
	/* the copies: row 1 twice more (7 and 9), row 3 once (20) */
	int32_t tok3[20], tgt3[20];
	float w3[20];
	for (int c = 0; c < 4; c++)
		for (int i = 0; i < T; i++) {
			tok3[c * T + i] = tok[i];
			tgt3[c * T + i] = c == 0 ? tgt[i] : -1;
			w3[c * T + i] = c == 0 ? wts[i] : 0;
		}
	for (int k = 0; k < 3; k++) {
		tgt3[(k + 1) * T + srow[k]] = stok[k];
		w3[(k + 1) * T + srow[k]] = sw[k];
	}
	fw_model_zero_grad(m);
	float lp3[20];
	CHECK_EQ_INT(fw_model_forward(m, tok3, tgt3, w3, 4, T, 1, lp3, &l2, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_model_backward(m, err, sizeof(err)), 0);
	memcpy(g2, m->g, sizeof(float) * nw);
	CHECK_NEAR(l1, l2, 1e-5 * fabs(l2));
	for (int k = 0; k < 3; k++)
		CHECK_NEAR(slp[k], lp3[(k + 1) * T + srow[k]], 1e-6);
	double gmax = 0, dmax = 0;
	for (long i = 0; i < nw; i++) {
		gmax = fmax(gmax, fabs(g2[i]));
		dmax = fmax(dmax, fabs(g1[i] - g2[i]));
	}
	CHECK(gmax > 0);
	CHECK(dmax <= 1e-5 * gmax);
	/* without the soft targets the gradient is another one */
	fw_model_zero_grad(m);
	CHECK_EQ_INT(fw_model_forward(m, tok, tgt, wts, 1, T, 1, lp2, NULL, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_model_backward(m, err, sizeof(err)), 0);
	dmax = 0;
	for (long i = 0; i < nw; i++)
		dmax = fmax(dmax, fabs(m->g[i] - g2[i]));
	CHECK(dmax > 1e-3 * gmax);
	/* refused: a position without a target, a token outside, no_grad */
	int32_t bad_row[1] = { 4 }, bad_tok[1] = { V };
	struct fw_soft b1 = { 1, bad_row, stok, sw, NULL }, b2 = { 1, srow, bad_tok, sw, NULL };
	CHECK_EQ_INT(fw_model_forward_soft(m, tok, tgt, wts, 1, T, 1, NULL, NULL, &b1, err,
					   sizeof(err)), -1);
	CHECK(strstr(err, "soft target 0 (position 4") != NULL);
	CHECK_EQ_INT(fw_model_forward_soft(m, tok, tgt, wts, 1, T, 1, NULL, NULL, &b2, err,
					   sizeof(err)), -1);
	m->no_grad = 1;
	CHECK_EQ_INT(fw_model_forward_soft(m, tok, tgt, wts, 1, T, 1, NULL, NULL, &sf, err,
					   sizeof(err)), -1);
	CHECK(strstr(err, "soft targets need") != NULL);
	free(g1);
	free(g2);
	fw_model_free(m);
}

TEST(kv_cache_decoding_matches_the_full_forward)
{
	const char *archs[3] = { "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM" };

	for (int a = 0; a < 3; a++) {
		struct fw_model *m = tiny(archs[a], a != 0, 0.3f);
		int32_t seq[80];
		int n = 70, P = 67; /* a prompt longer than one prefill chunk */

		for (int i = 0; i < n; i++)
			seq[i] = (i * 7 + 3) % 37;
		CHECK_EQ_INT(fw_model_forward(m, seq, NULL, NULL, 1, n, 0, NULL, NULL, err, sizeof(err)), 0);
		float *full = malloc(sizeof(float) * n * 37);
		memcpy(full, fw_model_logits(m), sizeof(float) * n * 37);

		struct fw_gen *g = fw_gen_new(m, 3, 72, err, sizeof(err));
		CHECK(g != NULL);
		CHECK_EQ_INT(fw_gen_prefill(g, seq, P, err, sizeof(err)), 0);
		double worst = 0;
		for (int t = P - 1; t < n; t++) {
			for (int b = 0; b < 3; b++)
				for (int v = 0; v < 37; v++) {
					double e = fabs(fw_gen_logits(g)[b * 37 + v] - full[t * 37 + v]);
					if (e > worst)
						worst = e;
				}
			if (t + 1 < n) {
				int32_t nx[3] = { seq[t + 1], seq[t + 1], seq[t + 1] };
				CHECK_EQ_INT(fw_gen_step(g, nx, err, sizeof(err)), 0);
			}
		}
		CHECK(worst < 1e-4);
		if (worst >= 1e-4)
			printf("# %s: worst logit difference %g\n", archs[a], worst);
		CHECK_EQ_INT(fw_gen_len(g, 2), n);
		int32_t bad[3] = { 1, 99, 2 };
		CHECK_EQ_INT(fw_gen_step(g, bad, err, sizeof(err)), -1);
		CHECK(strstr(err, "token 99 is outside the vocabulary") != NULL);
		fw_gen_free(g);
		free(full);
		fw_model_free(m);
	}
}

/* The worst logit difference between decoding n tokens of seq (a prompt
 * of P, then steps of 3 sequences) and the full forward of m. */
static double decode_vs_forward(struct fw_model *m, const int32_t *seq, int n,
				int P)
{
	float *full = malloc(sizeof(float) * n * 37);
	struct fw_gen *g;
	double worst = 0;

	CHECK_EQ_INT(fw_model_forward(m, seq, NULL, NULL, 1, n, 0, NULL, NULL, err, sizeof(err)), 0);
	memcpy(full, fw_model_logits(m), sizeof(float) * n * 37);
	g = fw_gen_new(m, 3, n + 2, err, sizeof(err));
	CHECK(g != NULL);
	CHECK_EQ_INT(fw_gen_prefill(g, seq, P, err, sizeof(err)), 0);
	for (int t = P - 1; t < n; t++) {
		for (int b = 0; b < 3; b++)
			for (int v = 0; v < 37; v++)
				worst = fmax(worst, fabs(fw_gen_logits(g)[b * 37 + v] -
							 full[t * 37 + v]));
		if (t + 1 < n) {
			int32_t nx[3] = { seq[t + 1], seq[t + 1], seq[t + 1] };
			CHECK_EQ_INT(fw_gen_step(g, nx, err, sizeof(err)), 0);
		}
	}
	fw_gen_free(g);
	free(full);
	return worst;
}

/* Decoding from the packed copy gives the full forward's logits (the
 * tolerance of the test above); an optimizer step drops the copy, and
 * decoding then follows the new weights. */
TEST(packed_decoding_matches_the_full_forward_until_the_weights_change)
{
	struct fw_model *m = tiny("Qwen2ForCausalLM", 1, 0.3f);
	struct fw_opt *o = fw_opt_new(m);
	struct fw_adamw_cfg c = { 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f };
	int32_t seq[80], tgt[80];
	int n = 70, P = 67;
	double worst;

	for (int i = 0; i < n; i++) {
		seq[i] = (i * 7 + 3) % 37;
		tgt[i] = (i * 7 + 10) % 37;
	}
	CHECK_EQ_INT(fw_model_pack(m, err, sizeof(err)), 0);
	CHECK(!m->pk == !fw_matmul_pack_ok());
	if (!m->pk)
		printf("# no packed kernel here: the unpacked path is tested\n");
	CHECK((worst = decode_vs_forward(m, seq, n, P)) < 1e-4);
	if (worst >= 1e-4)
		printf("# packed: worst logit difference %g\n", worst);
	fw_model_grads(m);
	fw_model_zero_grad(m);
	CHECK_EQ_INT(fw_model_forward(m, seq, tgt, NULL, 1, n, 0, NULL, NULL, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_model_backward(m, err, sizeof(err)), 0);
	fw_opt_step(o, m, &c);
	CHECK(m->pk == NULL && m->pk_lw == NULL && m->pk_lm_head == NULL);
	CHECK((worst = decode_vs_forward(m, seq, n, P)) < 1e-4);
	if (worst >= 1e-4)
		printf("# after a step: worst logit difference %g\n", worst);
	/* packed again from the new weights */
	CHECK_EQ_INT(fw_model_pack(m, err, sizeof(err)), 0);
	CHECK((worst = decode_vs_forward(m, seq, n, P)) < 1e-4);
	fw_model_unpack(m);
	fw_model_unpack(m);
	fw_opt_free(o);
	fw_model_free(m);
}

TEST(no_grad_forward_gives_the_same_logprobs_in_less_memory)
{
	struct fw_model *m = tiny("Qwen3ForCausalLM", 1, 0.3f);
	int32_t tok[240], tgt[240];
	float lp1[240], lp2[240], l1, l2;
	size_t full;
	double worst = 0;

	/* 2 x 120: more than one chunk of rows per sequence */
	for (int i = 0; i < 240; i++) {
		tok[i] = (i * 5 + 1) % 37;
		tgt[i] = i % 17 == 3 ? -1 : (i * 5 + 6) % 37;
	}
	CHECK_EQ_INT(fw_model_forward(m, tok, tgt, NULL, 2, 120, 0, lp1, &l1, err, sizeof(err)), 0);
	full = fw_model_act_bytes(m);
	m->no_grad = 1;
	CHECK_EQ_INT(fw_model_forward(m, tok, tgt, NULL, 2, 120, 0, lp2, &l2, err, sizeof(err)), 0);
	CHECK(fw_model_act_bytes(m) < full / 3);
	CHECK(fw_model_logits(m) == NULL);
	for (int i = 0; i < 240; i++)
		worst = fmax(worst, fabs(lp1[i] - lp2[i]));
	CHECK(worst < 1e-5);
	CHECK_NEAR(l1, l2, 1e-6);
	CHECK_EQ_INT(fw_model_backward(m, err, sizeof(err)), -1);
	CHECK(strstr(err, "no_grad") != NULL);
	/* A smaller shape laid out in the same allocation gives what a fresh
	 * model gives, gradients included. */
	struct fw_model *f = tiny("Qwen3ForCausalLM", 1, 0.3f);
	float a[30], b[30];
	m->no_grad = 0;
	fw_model_grads(m);
	fw_model_zero_grad(m);
	CHECK_EQ_INT(fw_model_forward(m, tok, tgt, NULL, 1, 30, 0, a, NULL, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_model_backward(m, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_model_forward(f, tok, tgt, NULL, 1, 30, 0, b, NULL, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_model_backward(f, err, sizeof(err)), 0);
	CHECK(memcmp(a, b, sizeof(a)) == 0);
	CHECK(memcmp(m->g, f->g, sizeof(float) * m->nw) == 0);
	fw_model_free(f);
	fw_model_free(m);
}

TEST(sequences_of_different_lengths_decode_like_separate_forwards)
{
	struct fw_model *m = tiny("Qwen3ForCausalLM", 0, 0.3f);
	int32_t a[90], b[90];
	int na = 80, nb = 50, P = 10;
	float *fa = malloc(sizeof(float) * 90 * 37), *fb = malloc(sizeof(float) * 90 * 37);
	double worst = 0;

	for (int i = 0; i < 90; i++) {
		a[i] = i < P ? (i * 3 + 1) % 37 : (i * 11 + 5) % 37;
		b[i] = i < P ? a[i] : (i * 13 + 2) % 37;
	}
	fw_model_forward(m, a, NULL, NULL, 1, na, 0, NULL, NULL, err, sizeof(err));
	memcpy(fa, fw_model_logits(m), sizeof(float) * na * 37);
	fw_model_forward(m, b, NULL, NULL, 1, nb, 0, NULL, NULL, err, sizeof(err));
	memcpy(fb, fw_model_logits(m), sizeof(float) * nb * 37);

	/* Shared prompt, then sequence 0 gets a 70-token "tool output" at
	 * once (more than one chunk) and sequence 1 one of 35; then both
	 * step together, at different positions. */
	struct fw_gen *g = fw_gen_new(m, 2, 96, err, sizeof(err));
	CHECK_EQ_INT(fw_gen_prefill(g, a, P, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_gen_append(g, 0, a + P, na - P - 5, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_gen_append(g, 1, b + P, nb - P - 5, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_gen_len(g, 0), na - 5);
	CHECK_EQ_INT(fw_gen_len(g, 1), nb - 5);
	for (int s = 0; s < 5; s++) {
		int la = na - 5 + s, lb = nb - 5 + s;

		for (int v = 0; v < 37; v++) {
			worst = fmax(worst, fabs(fw_gen_logits(g)[v] - fa[(la - 1) * 37 + v]));
			worst = fmax(worst, fabs(fw_gen_logits(g)[37 + v] - fb[(lb - 1) * 37 + v]));
		}
		int32_t t[2] = { a[la], b[lb] };
		CHECK_EQ_INT(fw_gen_step(g, t, err, sizeof(err)), 0);
	}
	CHECK(worst < 1e-4);
	CHECK_EQ_INT(fw_gen_append(g, 1, b, 60, err, sizeof(err)), -1);
	CHECK(strstr(err, "do not fit") != NULL);
	CHECK_EQ_INT(fw_gen_append(g, 2, b, 1, err, sizeof(err)), -1);
	fw_gen_free(g);
	free(fa);
	free(fb);
	fw_model_free(m);
}

/* A server's batch: two prompts prefilled apart (fw_gen_score into empty
 * sequences), one copied into the front, the front two stepped together
 * while the third waits.  Each decodes as its own full forward does, to
 * the tolerance of the test above (the same sums grouped otherwise). */
TEST(the_front_of_a_batch_steps_alone_and_copies_carry_the_cache)
{
	struct fw_model *m = tiny("Qwen2ForCausalLM", 1, 0.3f);
	int32_t a[40], b[40];
	int na = 30, nb = 36, Pa = 20, Pb = 9;
	float *fa = malloc(sizeof(float) * 40 * 37), *fb = malloc(sizeof(float) * 40 * 37);
	double worst = 0;

	for (int i = 0; i < 40; i++) {
		a[i] = (i * 5 + 2) % 37;
		b[i] = (i * 17 + 4) % 37;
	}
	fw_model_forward(m, a, NULL, NULL, 1, na, 0, NULL, NULL, err, sizeof(err));
	memcpy(fa, fw_model_logits(m), sizeof(float) * na * 37);
	fw_model_forward(m, b, NULL, NULL, 1, nb, 0, NULL, NULL, err, sizeof(err));
	memcpy(fb, fw_model_logits(m), sizeof(float) * nb * 37);

	struct fw_gen *g = fw_gen_new(m, 3, 48, err, sizeof(err));
	CHECK_EQ_INT(fw_gen_score(g, 2, a, NULL, Pa, NULL, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_gen_score(g, 0, b, NULL, Pb, NULL, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_gen_copy(g, 2, 1, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_gen_len(g, 1), Pa);
	for (int s = 0; s < na - Pa; s++) {
		int la = Pa + s, lb = Pb + s;

		for (int v = 0; v < 37; v++) {
			worst = fmax(worst, fabs(fw_gen_logits(g)[v] - fb[(lb - 1) * 37 + v]));
			worst = fmax(worst, fabs(fw_gen_logits(g)[37 + v] - fa[(la - 1) * 37 + v]));
		}
		int32_t t[2] = { b[lb], a[la] };
		CHECK_EQ_INT(fw_gen_step_first(g, 2, t, err, sizeof(err)), 0);
	}
	CHECK(worst < 1e-4);
	CHECK_EQ_INT(fw_gen_len(g, 2), Pa);
	CHECK_EQ_INT(fw_gen_len(g, 0), Pb + na - Pa);
	/* the waiting sequence's logits are still its prompt's */
	worst = 0;
	for (int v = 0; v < 37; v++)
		worst = fmax(worst, fabs(fw_gen_logits(g)[2 * 37 + v] - fa[(Pa - 1) * 37 + v]));
	CHECK(worst < 1e-4);
	int32_t t3[3] = { 1, 2, 3 };
	CHECK_EQ_INT(fw_gen_step_first(g, 4, t3, err, sizeof(err)), -1);
	CHECK_EQ_INT(fw_gen_truncate(g, 1, 0, err, sizeof(err)), 0);
	CHECK_EQ_INT(fw_gen_step_first(g, 2, t3, err, sizeof(err)), -1);
	CHECK(strstr(err, "sequence 1 stepped before prefill") != NULL);
	CHECK_EQ_INT(fw_gen_copy(g, 0, 3, err, sizeof(err)), -1);
	fw_gen_free(g);
	free(fa);
	free(fb);
	fw_model_free(m);
}

TEST(sampling_greedy_topk_topp_and_seeds)
{
	float logits[5] = { 0.0f, 2.0f, 1.0f, -1.0f, 1.9f }, scr[10], lp;
	struct fw_sampler greedy = { 0, 1, 0 }, k1 = { 1, 1, 1 }, full = { 1, 1, 0 },
			  p = { 1, 0.5f, 0 };
	uint64_t r1 = 42, r2 = 42;
	int counts[5] = { 0 };
	double z = 0;

	for (int j = 0; j < 5; j++)
		z += exp(logits[j]);
	CHECK_EQ_INT(fw_sample(logits, 5, &greedy, &r1, scr, &lp), 1);
	CHECK_NEAR(lp, 2.0 - log(z), 1e-6);
	CHECK_EQ_INT(fw_sample(logits, 5, &k1, &r1, scr, NULL), 1);
	for (int i = 0; i < 20000; i++)
		counts[fw_sample(logits, 5, &full, &r1, scr, NULL)]++;
	for (int j = 0; j < 5; j++)
		CHECK_NEAR(counts[j] / 20000.0, exp(logits[j]) / z, 0.015);
	/* top-p 0.5: the two most likely tokens (0.37 + 0.33 of the mass). */
	memset(counts, 0, sizeof(counts));
	for (int i = 0; i < 2000; i++)
		counts[fw_sample(logits, 5, &p, &r1, scr, NULL)]++;
	CHECK(counts[0] == 0 && counts[2] == 0 && counts[3] == 0);
	CHECK(counts[1] > 0 && counts[4] > 0);
	/* A large vocabulary: draws stay inside the brute-force nucleus and
	 * top-k sets. */
	int V = 5000;
	float *lg = malloc(sizeof(float) * V), *sc = malloc(sizeof(float) * 2 * V);
	double *pr = malloc(sizeof(double) * V), tot = 0;
	uint64_t st = 99;
	for (int j = 0; j < V; j++) {
		st = st * 6364136223846793005ull + 1;
		lg[j] = (float)((st >> 40) % 1000) / 100.0f;
		tot += pr[j] = exp(lg[j]);
	}
	struct fw_sampler pk = { 1, 0.8f, 0 }, kk = { 1, 1, 7 };
	int outside = 0;
	for (int i = 0; i < 300; i++) {
		int32_t t = fw_sample(lg, V, &pk, &r1, sc, NULL);
		double above = 0; /* mass strictly more likely than t */
		for (int j = 0; j < V; j++)
			if (pr[j] > pr[t])
				above += pr[j];
		outside += above >= 0.8 * tot;
		t = fw_sample(lg, V, &kk, &r1, sc, NULL);
		int rank = 0;
		for (int j = 0; j < V; j++)
			rank += pr[j] > pr[t];
		outside += rank >= 7;
	}
	CHECK_EQ_INT(outside, 0);
	/* Three tokens in different blocks of the sum (256 each) with weights
	 * 1 : 2 : 3, the other 997 e^-20 each (3.4e-7 of the mass in all,
	 * so 0.008 of the 24000 draws expected among them): at
	 * temperature 1 and 0.5 (weights 1 : 4 : 9) the draws' shares are
	 * within 0.02 of them, over 4 standard deviations of a share of
	 * 12000 draws (at most sqrt(0.25 / 12000) = 0.0046). */
	static const int hot[3] = { 10, 300, 777 };
	struct fw_sampler t1 = { 1, 1, 0 }, th = { 0.5f, 1, 0 };
	lg = malloc(sizeof(float) * 1000);
	sc = malloc(sizeof(float) * 2000);
	for (int j = 0; j < 1000; j++)
		lg[j] = -20.0f;
	for (int h = 0; h < 3; h++)
		lg[hot[h]] = logf(h + 1.0f);
	for (int t = 0; t < 2; t++) {
		int got[3] = { 0 }, other = 0;
		double w = t ? 14 : 6;

		for (int i = 0; i < 12000; i++) {
			int32_t d = fw_sample(lg, 1000, t ? &th : &t1, &r1, sc, &lp);
			int h = d == hot[0] ? 0 : d == hot[1] ? 1 : d == hot[2] ? 2 : -1;

			if (h < 0)
				other++;
			else
				got[h]++;
			/* logp is the model's own, at temperature 1 */
			if (i == 0 && h >= 0)
				CHECK_NEAR(lp, log((h + 1.0) / 6), 1e-5);
		}
		CHECK(other == 0);
		for (int h = 0; h < 3; h++)
			CHECK_NEAR(got[h] / 12000.0, (t ? (h + 1.0) * (h + 1) : h + 1.0) / w, 0.02);
	}
	free(lg); free(sc); free(pr);
	r1 = 42;
	for (int i = 0; i < 50; i++)
		CHECK_EQ_INT(fw_sample(logits, 5, &full, &r1, scr, NULL),
			     fw_sample(logits, 5, &full, &r2, scr, NULL));
}

TEST(forward_rejects_bad_ids_and_long_sequences)
{
	struct fw_model *m = tiny("LlamaForCausalLM", 0, 0);
	int32_t t[2] = { 3, 37 };
	int32_t *big = calloc(129, sizeof(int32_t));

	CHECK_EQ_INT(fw_model_forward(m, t, NULL, NULL, 1, 2, 0, NULL, NULL, err, sizeof(err)), -1);
	CHECK(strstr(err, "token 37 at position 1") != NULL);
	CHECK_EQ_INT(fw_model_forward(m, big, NULL, NULL, 1, 129, 0, NULL, NULL, err, sizeof(err)), -1);
	CHECK(strstr(err, "max_position_embeddings") != NULL);
	CHECK_EQ_INT(fw_model_backward(m, err, sizeof(err)), -1);
	free(big);
	fw_model_free(m);
}

TEST(optimizer_state_saves_and_resumes_the_same_trajectory)
{
	struct fw_model *a = tiny("Qwen2ForCausalLM", 1, 0.3f), *b = tiny("Qwen2ForCausalLM", 1, 0.3f);
	struct fw_opt *oa = fw_opt_new(a), *ob = fw_opt_new(b);
	struct fw_adamw_cfg c = { 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f };
	int32_t tok[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, tgt[8] = { 2, 3, 4, 5, 6, 7, 8, 9 };
	char path[512];
	float loss;

	snprintf(path, sizeof(path), "%s/opt.safetensors", tmp());
	for (int s = 0; s < 3; s++) {
		fw_model_grads(a);
		fw_model_zero_grad(a);
		fw_model_forward(a, tok, tgt, NULL, 1, 8, 0, NULL, &loss, err, sizeof(err));
		fw_model_backward(a, err, sizeof(err));
		CHECK(fw_opt_step(oa, a, &c) > 0);
		if (s == 1) {
			/* b resumes from a's weights and optimizer after step 2 */
			memcpy(b->w, a->w, sizeof(float) * a->nw);
			CHECK_EQ_INT(fw_opt_save(oa, a, path, err, sizeof(err)), 0);
			CHECK_EQ_INT(fw_opt_load(ob, b, path, err, sizeof(err)), 0);
			CHECK_EQ_INT(ob->step, 2);
		}
	}
	fw_model_grads(b);
	fw_model_zero_grad(b);
	fw_model_forward(b, tok, tgt, NULL, 1, 8, 0, NULL, &loss, err, sizeof(err));
	fw_model_backward(b, err, sizeof(err));
	fw_opt_step(ob, b, &c);
	CHECK(memcmp(a->w, b->w, sizeof(float) * a->nw) == 0);
	/* the wrong model's state is refused by name */
	struct fw_model *l = tiny("LlamaForCausalLM", 0, 0);
	struct fw_opt *ol = fw_opt_new(l);
	CHECK_EQ_INT(fw_opt_load(ol, l, path, err, sizeof(err)), -1);
	CHECK(strstr(err, "tensor 'exp_avg.") != NULL);
	unlink(path);
	fw_opt_free(oa); fw_opt_free(ob); fw_opt_free(ol); fw_opt_free(NULL);
	fw_model_free(a); fw_model_free(b); fw_model_free(l);
}

TEST(a_few_adamw_steps_learn_a_repeating_sequence)
{
	struct fw_model *m = tiny("Qwen3ForCausalLM", 1, 0);
	struct fw_opt *o = fw_opt_new(m);
	struct fw_adamw_cfg c = { 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f };
	int32_t tok[64], tgt[64];
	float first = 0, loss = 0;

	for (int i = 0; i < 64; i++) {
		tok[i] = (i * 7) % 13;
		tgt[i] = ((i + 1) * 7) % 13;
	}
	fw_model_grads(m);
	for (int s = 0; s < 60; s++) {
		fw_model_zero_grad(m);
		CHECK_EQ_INT(fw_model_forward(m, tok, tgt, NULL, 2, 32, 0, NULL, &loss, err, sizeof(err)), 0);
		fw_model_backward(m, err, sizeof(err));
		fw_opt_step(o, m, &c);
		if (s == 0)
			first = loss;
	}
	/* from uniform over 37 ids (ln 37 = 3.6) to a nearly known sequence */
	CHECK(first > 3.4f && first < 3.8f);
	CHECK(loss < 0.2f);
	if (loss >= 0.2f)
		printf("# loss %g -> %g\n", first, loss);
	fw_opt_free(o);
	fw_model_free(m);
}

TEST(cleanup)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp());
	CHECK(system(cmd) == 0);
}

TEST_MAIN()
