/*
 * test_teach_kv.c — re-scoring that shares the unchanged prefix through the
 * key-value cache (fw_gen_score, fw_gen_truncate, fw_kvscore, a builtin
 * teacher's credit), each number checked against a full training forward
 * pass (fw_model_forward, plain causal attention) over the same hinted
 * sequence, to 1e-4 on log-probs.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "fw_model.h"
#include "fw_mp.h"
#include "fw_teach.h"
#include "fw_tok.h"

static char err[512];

/* A random model of arch with max_pos positions; initializer range 0.3 so
 * that the log-probs differ from position to position. */
static struct fw_model *model(const char *arch, int max_pos)
{
	char j[1024];
	struct fw_config c;

	snprintf(j, sizeof j,
		 "{\"architectures\": [\"%s\"], \"vocab_size\": 264, "
		 "\"hidden_size\": 32, \"intermediate_size\": 48, "
		 "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
		 "\"num_key_value_heads\": 2, \"max_position_embeddings\": %d, "
		 "\"rms_norm_eps\": 1e-6, \"initializer_range\": 0.3, "
		 "\"tie_word_embeddings\": false}", arch, max_pos);
	if (fw_config_parse(&c, j, strlen(j), "cfg", err, sizeof err)) {
		printf("# %s\n", err);
		return NULL;
	}
	return fw_model_new(&c, 11, err, sizeof err);
}

/* The reference: lp[i] = log p(seq[i+1] | seq[0..i]) by one training
 * forward over all of seq, lp[N-1] = 0. */
static void full_logp(struct fw_model *m, const int32_t *seq, int N, float *lp)
{
	int32_t *tgt = malloc(sizeof(int32_t) * (size_t)N);

	for (int i = 0; i < N; i++)
		tgt[i] = i + 1 < N ? seq[i + 1] : -1;
	m->no_grad = 0;
	if (fw_model_forward(m, seq, tgt, NULL, 1, N, 0, lp, NULL, err, sizeof err))
		printf("# forward: %s\n", err);
	free(tgt);
}

/* Largest |a[i] - b[i]| over [from, to). */
static double worst(const float *a, const float *b, int from, int to)
{
	double w = 0;

	for (int i = from; i < to; i++)
		w = fmax(w, fabs((double)a[i] - b[i]));
	return w;
}

TEST(gen_score_from_a_prefix_and_after_truncating_matches_full_forwards)
{
	const char *archs[3] = { "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM" };
	enum { N = 300, P = 150, B = 40 };

	for (int a = 0; a < 3; a++) {
		struct fw_model *m = model(archs[a], N);
		int32_t s[N], b[N], tgt[N];
		float ref[N], lp[N], plog[264];
		struct fw_gen *g;

		for (int i = 0; i < N; i++) {
			s[i] = (i * 7 + 3) % 264;
			b[i] = i < B ? s[i] : (i * 13 + 5) % 264;
		}
		full_logp(m, s, N, ref);
		memcpy(plog, fw_model_logits(m) + (size_t)(P - 1) * 264, sizeof plog);
		/* 96 rows a pass: passes that are not a multiple of the 64
		 * rows attention takes at a time */
		g = fw_gen_new_rows(m, 1, N, 96, err, sizeof err);
		CHECK(g != NULL);
		if (!g)
			continue;
		CHECK_EQ_INT(fw_gen_len(g, 0), 0);
		/* the prefix alone: cache only, next logits those of P-1 */
		CHECK_EQ_INT(fw_gen_score(g, 0, s, NULL, P, NULL, err, sizeof err), 0);
		CHECK_EQ_INT(fw_gen_len(g, 0), P);
		CHECK(worst(fw_gen_logits(g), plog, 0, 264) < 1e-4);
		/* the rest, to max_position_embeddings, scored */
		for (int i = P; i < N; i++)
			tgt[i] = i + 1 < N ? s[i + 1] : -1;
		lp[N - 1] = 99;
		CHECK_EQ_INT(fw_gen_score(g, 0, s + P, tgt + P, N - P, lp + P, err, sizeof err), 0);
		CHECK(worst(lp, ref, P, N) < 1e-4);
		CHECK(lp[N - 1] == 0);
		CHECK_EQ_INT(fw_gen_score(g, 0, s, NULL, 1, NULL, err, sizeof err), -1);
		CHECK(strstr(err, "do not fit") != NULL);
		/* a branch at B: back to it, another continuation */
		full_logp(m, b, N, ref);
		CHECK_EQ_INT(fw_gen_truncate(g, 0, B, err, sizeof err), 0);
		for (int i = B; i < N; i++)
			tgt[i] = i + 1 < N ? b[i + 1] : -1;
		CHECK_EQ_INT(fw_gen_score(g, 0, b + B, tgt + B, N - B, lp + B, err, sizeof err), 0);
		CHECK(worst(lp, ref, B, N) < 1e-4);
		/* and from nothing: every position scored */
		CHECK_EQ_INT(fw_gen_truncate(g, 0, 0, err, sizeof err), 0);
		for (int i = 0; i < N; i++)
			tgt[i] = i + 1 < N ? b[i + 1] : -1;
		CHECK_EQ_INT(fw_gen_score(g, 0, b, tgt, N, lp, err, sizeof err), 0);
		CHECK(worst(lp, ref, 0, N) < 1e-4);
		if (worst(lp, ref, 0, N) >= 1e-4)
			printf("# %s: worst log-prob difference %g\n", archs[a], worst(lp, ref, 0, N));
		/* bad calls */
		CHECK_EQ_INT(fw_gen_truncate(g, 0, N + 1, err, sizeof err), -1);
		CHECK_EQ_INT(fw_gen_truncate(g, 1, 0, err, sizeof err), -1);
		CHECK_EQ_INT(fw_gen_truncate(g, 0, 10, err, sizeof err), 0);
		tgt[0] = 264;
		CHECK_EQ_INT(fw_gen_score(g, 0, b, tgt, 4, lp, err, sizeof err), -1);
		CHECK(strstr(err, "target 264") != NULL);
		CHECK_EQ_INT(fw_gen_score(g, 0, b, tgt, 4, NULL, err, sizeof err), -1);
		CHECK_EQ_INT(fw_gen_len(g, 0), 10);
		fw_gen_free(g);
		CHECK(fw_gen_new_rows(m, 1, N, 0, err, sizeof err) == NULL);
		CHECK(fw_gen_new_rows(m, 1, N + 1, 64, err, sizeof err) == NULL);
		fw_model_free(m);
	}
}

/* A rollout of 5 turns (lengths below) with hints inserted before some of
 * them, as the credit functions build it. */
static const int turn_len[5] = { 40, 250, 30, 120, 70 };
enum { ROLL = 510, HINT_A = 25, HINT_B = 17, MAXP = ROLL + HINT_A + HINT_B };

/* The hinted sequence: hint A (a_len tokens, kind ka) before turn ta, hint
 * B before turn tb (tb < 0: none).  *P gets where the first hint starts.
 * Returns the length. */
static int hinted(int32_t *out, int ta, int a_len, int ka, int tb, int *P)
{
	int n = 0, at = 0;

	*P = -1;
	for (int t = 0; t < 5; t++) {
		if (t == ta || t == tb) {
			int len = t == ta ? a_len : HINT_B;

			if (*P < 0)
				*P = n;
			for (int i = 0; i < len; i++)
				out[n++] = 200 + (i * (t == ta ? ka : 5) + t) % 60;
		}
		for (int i = 0; i < turn_len[t]; i++, at++)
			out[n++] = (at * 11 + at / 7) % 190;
	}
	return n;
}

TEST(kvscore_hints_at_different_turns_equal_a_full_rescore_in_any_order)
{
	/* in this order: the cache is reused exactly, down to 256 (its
	 * passes), or not at all; a prefix of length 0; several hints in one
	 * sequence; a sequence of max_position_embeddings */
	static const struct { int ta, a_len, ka, tb; } v[] = {
		{ 2, HINT_A, 3, -1 }, { 0, HINT_A, 3, -1 }, { 1, HINT_A, 3, 3 },
		{ 4, HINT_A, 3, -1 }, { 3, HINT_A, 3, -1 }, { 3, HINT_A, 7, -1 },
		{ 3, HINT_A, 3, 4 },  { 2, 9, 3, -1 },      { 0, HINT_A, 7, 2 },
	};
	const char *archs[2] = { "Qwen2ForCausalLM", "Qwen3ForCausalLM" };

	for (int a = 0; a < 2; a++) {
		struct fw_model *m = model(archs[a], MAXP);
		struct fw_kvscore *ks = fw_kvscore_new(m, err, sizeof err);
		int32_t seq[MAXP];
		float ref[MAXP], lp[MAXP], lp1[MAXP];
		int reached = 0;

		CHECK(ks != NULL);
		for (size_t k = 0; ks && k < sizeof v / sizeof v[0]; k++) {
			int P, N = hinted(seq, v[k].ta, v[k].a_len, v[k].ka, v[k].tb, &P);
			struct fw_kvscore *fresh = fw_kvscore_new(m, err, sizeof err);

			reached |= N == MAXP;
			full_logp(m, seq, N, ref);
			CHECK_EQ_INT(fw_kvscore_run(ks, seq, N, P, lp, err, sizeof err), 0);
			CHECK(worst(lp, ref, P, N) < 1e-4);
			if (worst(lp, ref, P, N) >= 1e-4)
				printf("# %s, case %zu: worst log-prob difference %g\n", archs[a], k,
				       worst(lp, ref, P, N));
			for (int i = 0; i < P; i++)
				CHECK(lp[i] == 0);
			/* the same bits as a scorer that saw nothing before */
			CHECK_EQ_INT(fw_kvscore_run(fresh, seq, N, P, lp1, err, sizeof err), 0);
			CHECK(memcmp(lp, lp1, sizeof(float) * (size_t)N) == 0);
			fw_kvscore_free(fresh);
		}
		CHECK(reached);
		fw_kvscore_free(ks);
		fw_model_free(m);
	}
}

TEST(kvscore_refuses_bad_sizes_and_ids_and_goes_on)
{
	struct fw_model *m = model("LlamaForCausalLM", 64);
	struct fw_kvscore *ks = fw_kvscore_new(m, err, sizeof err);
	int32_t s[65];
	float lp[65], ref[65];

	for (int i = 0; i < 65; i++)
		s[i] = (i * 5 + 2) % 264;
	CHECK_EQ_INT(fw_kvscore_run(ks, s, 65, 0, lp, err, sizeof err), -1);
	CHECK(strstr(err, "the model takes 64") != NULL);
	CHECK_EQ_INT(fw_kvscore_run(ks, s, 1, 0, lp, err, sizeof err), -1);
	CHECK_EQ_INT(fw_kvscore_run(ks, s, 10, 10, lp, err, sizeof err), -1);
	CHECK_EQ_INT(fw_kvscore_run(ks, s, 10, -1, lp, err, sizeof err), -1);
	s[20] = 264;
	CHECK_EQ_INT(fw_kvscore_run(ks, s, 40, 10, lp, err, sizeof err), -1);
	CHECK(strstr(err, "outside the vocabulary") != NULL);
	s[3] = -1;
	CHECK_EQ_INT(fw_kvscore_run(ks, s, 40, 10, lp, err, sizeof err), -1);
	s[3] = 5;
	s[20] = 7;
	full_logp(m, s, 64, ref);
	CHECK_EQ_INT(fw_kvscore_run(ks, s, 64, 10, lp, err, sizeof err), 0);
	CHECK(worst(lp, ref, 10, 64) < 1e-4);
	fw_kvscore_free(ks);
	fw_kvscore_free(NULL);
	fw_model_free(m);
}

TEST(kvscore_bits_do_not_depend_on_the_cache_size_a_longer_record_left)
{
	struct fw_model *m = model("Qwen3ForCausalLM", 2100);
	struct fw_kvscore *a = fw_kvscore_new(m, err, sizeof err), *b = fw_kvscore_new(m, err, sizeof err);
	int32_t *s = malloc(sizeof(int32_t) * 2100);
	float *lp = malloc(sizeof(float) * 2100), la[300], lb[300], ref[300];

	for (int i = 0; i < 2100; i++)
		s[i] = (i * 17 + i / 5) % 264;
	/* a: a record of 1500 tokens first (a cache of 2048 positions), then
	 * one of 300 sharing 280 of them; b: only the second (1024) */
	CHECK_EQ_INT(fw_kvscore_run(a, s, 1500, 700, lp, err, sizeof err), 0);
	s[280] = 3;
	CHECK_EQ_INT(fw_kvscore_run(a, s, 300, 280, la, err, sizeof err), 0);
	CHECK_EQ_INT(fw_kvscore_run(b, s, 300, 280, lb, err, sizeof err), 0);
	CHECK(memcmp(la, lb, sizeof la) == 0);
	full_logp(m, s, 300, ref);
	CHECK(worst(la, ref, 280, 300) < 1e-4);
	free(s);
	free(lp);
	fw_kvscore_free(a);
	fw_kvscore_free(b);
	fw_model_free(m);
}

/* ---- a builtin teacher's credit ------------------------------------------------ */

static void ps(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str(pk, strlen(s));
	msgpack_pack_str_body(pk, s, strlen(s));
}

/* One turn as a map: role, text, and for an assistant turn its tokens (the
 * text's bytes) and their recorded log-probs (-1 - i/10). */
static void turn(msgpack_packer *pk, const char *role, const char *text, int with_tokens)
{
	size_t n = strlen(text);

	msgpack_pack_map(pk, with_tokens ? 4 : 2);
	ps(pk, "role"), ps(pk, role), ps(pk, "text"), ps(pk, text);
	if (!with_tokens)
		return;
	ps(pk, "tokens");
	msgpack_pack_array(pk, n);
	for (size_t i = 0; i < n; i++)
		msgpack_pack_int(pk, (unsigned char)text[i]);
	ps(pk, "logprobs");
	msgpack_pack_array(pk, n);
	for (size_t i = 0; i < n; i++)
		msgpack_pack_double(pk, -1 - (double)i / 10);
}

static const char *const roles[7] = { "system", "user", "assistant", "tool", "assistant", "tool",
				      "assistant" };
static const char *const texts[7] = {
	"You fix bugs in small Python repositories.",
	"The test test_sum fails: sum([1, 2]) returns 4.  Fix it.",
	"ls && cat sum.py",
	"sum.py\ndef sum(xs):\n    return 2 * len(xs) + 0",
	"sed -i 's/2 \\* len(xs) + 0/len(xs)/' sum.py && pytest -q",
	"F test_sum: assert 2 == 3",
	"I give up.",
};

/* The turns, with a user turn "Hint: TEXT[\nTEXT...]" before each hinted
 * one when hs is not NULL. */
static void pack_turns(msgpack_packer *pk, const struct fw_teach_hints *hs)
{
	int extra = 0;

	for (int i = 0; hs && i < 7; i++)
		for (size_t j = 0; j < hs->n; j++)
			if (hs->h[j].turn == i) {
				extra++;
				break;
			}
	msgpack_pack_array(pk, 7 + extra);
	for (int i = 0; i < 7; i++) {
		char h[512] = "";

		for (size_t j = 0; hs && j < hs->n; j++)
			if (hs->h[j].turn == i)
				snprintf(h + strlen(h), sizeof h - strlen(h), "%s%s", h[0] ? "\n" : "Hint: ",
					 hs->h[j].text);
		if (h[0])
			turn(pk, "user", h, 0);
		turn(pk, roles[i], texts[i], !strcmp(roles[i], "assistant"));
	}
}

static void add_hint(struct fw_teach_hints *hs, int t, const char *text)
{
	if (hs->n == hs->cap) {
		hs->cap = hs->cap ? 2 * hs->cap : 4;
		hs->h = realloc(hs->h, hs->cap * sizeof *hs->h);
	}
	hs->h[hs->n++] = (struct fw_teach_hint){ t, strdup(text), "rules" };
}

/* The credit the spec gives, from a full forward over the hinted rendering:
 * per assistant token, clip(log p - recorded) from the first hinted
 * assistant turn on, 0 before. */
static long ref_credit(struct fw_model *m, const struct fw_tok *t, const struct fw_teach_hints *hs,
		       double clip, float *adv)
{
	struct fw_buf b = { 0 };
	struct fw_tok_ids ids = { 0 };
	msgpack_packer pk;
	int first = 7;
	long k = 0;

	for (size_t j = 0; j < hs->n; j++)
		if (!strcmp(roles[hs->h[j].turn], "assistant") && hs->h[j].turn < first)
			first = hs->h[j].turn;
	fw_buf_packer(&pk, &b);
	pack_turns(&pk, hs);
	struct fw_mpv tv = { b.p, b.n };

	CHECK_EQ_INT(fw_chat_render_mp(t, FW_CHAT_CHATML, &tv, 0, &ids, err, sizeof err), 0);
	float *lp = malloc(sizeof(float) * ids.n);

	full_logp(m, ids.ids, (int)ids.n, lp);
	/* the assistant turns' tokens are their text's bytes: find each in
	 * the rendering, in order */
	size_t at = 0;

	for (int i = 0; i < 7; i++) {
		size_t n = strlen(texts[i]);

		if (strcmp(roles[i], "assistant"))
			continue;
		while (at + n <= ids.n) {
			size_t j = 0;

			while (j < n && ids.ids[at + j] == (unsigned char)texts[i][j])
				j++;
			if (j == n)
				break;
			at++;
		}
		for (size_t j = 0; j < n; j++) {
			double a = i < first ? 0 : lp[at + j - 1] - (-1 - (double)j / 10);

			adv[k++] = (float)(a > clip ? clip : a < -clip ? -clip : a);
		}
		at += n;
	}
	free(lp);
	fw_buf_free(&b);
	fw_tok_ids_release(&ids);
	return k;
}

TEST(builtin_teacher_credit_with_hints_at_several_turns_equals_the_full_rescore)
{
	char dir[] = "/tmp/test_teach_kv.XXXXXX", path[600], spec[600];
	struct fw_tok *bt = fw_tok_new_byte();
	struct fw_model *m = mkdtemp(dir) ? model("Qwen2ForCausalLM", 1024) : NULL;
	struct fw_teacher *T = NULL;

	CHECK(m != NULL && bt != NULL);
	if (!m || !bt)
		return;
	snprintf(path, sizeof path, "%s/tokenizer.json", dir);
	CHECK_EQ_INT(fw_model_save(m, dir, FW_F32, err, sizeof err), 0);
	CHECK_EQ_INT(fw_tok_save(bt, path, err, sizeof err), 0);
	snprintf(spec, sizeof spec, "builtin:%s", dir);
	T = fw_teacher_open(spec, 10, 0, err, sizeof err);
	CHECK(T != NULL);
	if (!T)
		goto out;
	/* hint sets, scored one after another by the same teacher: turn 0
	 * (nothing before the first hint), turns 0, 2 and 4, turns 4 and 6,
	 * turn 6 alone, turn 2 alone */
	static const int sets[5][3] = { { 0, -1, -1 }, { 0, 2, 4 }, { 4, 6, -1 }, { 6, -1, -1 },
					{ 2, -1, -1 } };
	struct fw_buf rb = { 0 };
	msgpack_packer pk;

	fw_buf_packer(&pk, &rb);
	msgpack_pack_map(&pk, 1);
	ps(&pk, "turns");
	pack_turns(&pk, NULL);
	struct fw_mpv rec = { rb.p, rb.n };

	for (int s = 0; s < 5; s++) {
		struct fw_teach_hints hs = { 0 };
		float *adv = NULL, want[256];
		long nadv = 0, nw;

		for (int j = 0; j < 3 && sets[s][j] >= 0; j++)
			add_hint(&hs, sets[s][j], j ? "look at the test's assertion first" : "read sum.py");
		if (sets[s][0] == 4)
			add_hint(&hs, 4, "and run the test after the edit");
		CHECK_EQ_INT(fw_teach_credit_agent(T, fw_teacher_tok(T), rec, &hs, 100, &adv, &nadv, NULL, err,
						   sizeof err), 0);
		nw = ref_credit(m, bt, &hs, 100, want);
		CHECK_EQ_INT(nadv, nw);
		double w = adv ? worst(adv, want, 0, (int)(nadv < nw ? nadv : nw)) : 1;
		CHECK(w < 1e-4);
		if (w >= 1e-4)
			printf("# hint set %d: worst advantage difference %g\n", s, w);
		free(adv);
		fw_teach_hints_free(&hs);
	}
	fw_buf_free(&rb);
out:
	fw_teacher_free(T);
	unlink(path);
	snprintf(path, sizeof path, "%s/model.safetensors", dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/config.json", dir);
	unlink(path);
	rmdir(dir);
	fw_tok_free(bt);
	fw_model_free(m);
}

TEST_MAIN()
