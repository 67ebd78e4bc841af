/*
 * fw_policy.c — the builtin policy.  See fw_policy.h.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_mp.h"
#include "fw_policy.h"

struct fw_builtin *fw_builtin_load(const char *dir, char *err, size_t errlen)
{
	struct fw_builtin *b = calloc(1, sizeof *b);
	char p[PATH_MAX];

	if (!b) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (!(b->m = fw_model_load(dir, err, errlen)))
		goto fail;
	/* A policy only decodes (serve, rollout, teach's teacher), so its
	 * weights never change: decode from a packed copy.  The same
	 * kernel in every tool keeps serve's tokens and log-probs those of
	 * the builtin policy, bit for bit. */
	if (fw_model_pack(b->m, err, errlen))
		goto fail;
	snprintf(p, sizeof p, "%s/tokenizer.json", dir);
	if (!(b->t = fw_tok_load(p, err, errlen)))
		goto fail;
	if (fw_tok_vocab_size(b->t) > b->m->cfg.vocab) {
		snprintf(err, errlen, "%s: the tokenizer has %d ids, the model %d", p,
			 (int)fw_tok_vocab_size(b->t), b->m->cfg.vocab);
		goto fail;
	}
	int32_t c[4] = { fw_tok_eos(b->t), b->m->cfg.eos, fw_chat_end(b->t, FW_CHAT_CHATML),
			 fw_chat_end(b->t, FW_CHAT_LLAMA3) };
	for (int i = 0; i < 4; i++) {
		int dup = c[i] < 0;
		for (int j = 0; j < b->nstop; j++)
			dup |= b->stop[j] == c[i];
		if (!dup)
			b->stop[b->nstop++] = c[i];
	}
	return b;
fail:
	fw_builtin_free(b);
	return NULL;
}

void fw_builtin_free(struct fw_builtin *b)
{
	if (!b)
		return;
	fw_model_free(b->m);
	fw_tok_free(b->t);
	free(b);
}

void fw_completion_release(struct fw_completion *c)
{
	if (!c)
		return;
	free(c->tokens);
	free(c->logprobs);
	free(c->text);
	free(c->calls);
	memset(c, 0, sizeof *c);
}

static int is_stop(const struct fw_builtin *b, int32_t id)
{
	for (int i = 0; i < b->nstop; i++)
		if (b->stop[i] == id)
			return 1;
	return 0;
}

static int complete(struct fw_builtin *b, const char *prompt, size_t len, const int32_t *pre,
		    size_t npre, int K, const uint64_t *seeds, const struct fw_sampler *s,
		    int max_tokens, fw_cut_fn cut, void *ctx, struct fw_tok_ids *prompt_ids,
		    struct fw_completion *out, char *err, size_t errlen)
{
	struct fw_tok_ids ids = { 0 };
	struct fw_gen *g = NULL;
	struct fw_buf *txt = NULL;
	uint64_t *rng = NULL;
	int32_t *next = NULL;
	int *live = NULL;
	float *scratch = NULL;
	int V = b->m->cfg.vocab, maxpos = b->m->cfg.max_pos, rc = -1;
	int32_t bos = fw_tok_bos(b->t);

	memset(out, 0, sizeof(*out) * (size_t)K);
	if (K < 1 || max_tokens < 1) {
		snprintf(err, errlen, "nothing to decode (%d samples of %d tokens)", K, max_tokens);
		return -1;
	}
	if (max_tokens > maxpos / 2)
		max_tokens = maxpos / 2;
	if (pre) {
		for (size_t i = 0; i < npre; i++)
			if (fw_tok_ids_push(&ids, pre[i], 0)) {
				snprintf(err, errlen, "out of memory");
				goto out;
			}
		bos = -1;
	} else if (fw_tok_encode(b->t, prompt, len, 0, 0, &ids)) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* keep the end of the prompt: what is next to the completion */
	int room = maxpos - max_tokens - (bos >= 0);
	size_t skip = ids.n > (size_t)room ? ids.n - (size_t)room : 0;
	struct fw_tok_ids p = { 0 };
	if ((bos >= 0 || ids.n == 0) &&
	    fw_tok_ids_push(&p, bos >= 0 ? bos : b->stop[0] >= 0 ? b->stop[0] : 0, 0))
		goto oom_p;
	for (size_t i = skip; i < ids.n; i++)
		if (fw_tok_ids_push(&p, ids.ids[i], 0))
			goto oom_p;
	fw_tok_ids_release(&ids);
	ids = p;
	if (!(g = fw_gen_new(b->m, K, (int)ids.n + max_tokens, err, errlen)) ||
	    fw_gen_prefill(g, ids.ids, (int)ids.n, err, errlen))
		goto out;
	txt = calloc((size_t)K, sizeof *txt);
	rng = calloc((size_t)K, sizeof *rng);
	next = calloc((size_t)K, sizeof *next);
	live = calloc((size_t)K, sizeof *live);
	scratch = malloc(sizeof(float) * 2 * (size_t)V);
	if (!txt || !rng || !next || !live || !scratch)
		goto oom;
	for (int k = 0; k < K; k++) {
		rng[k] = seeds[k] ? seeds[k] : 1;
		live[k] = 1;
		out[k].keep = -1;
		out[k].tokens = malloc(sizeof(int32_t) * (size_t)max_tokens);
		out[k].logprobs = malloc(sizeof(float) * (size_t)max_tokens);
		if (!out[k].tokens || !out[k].logprobs)
			goto oom;
	}
	for (int step = 0; step < max_tokens; step++) {
		int nlive = 0;

		for (int k = 0; k < K; k++) {
			struct fw_completion *c = &out[k];
			float lp;

			if (!live[k])
				continue;
			next[k] = fw_sample(fw_gen_logits(g) + (size_t)k * V, V, s, &rng[k],
					    scratch, &lp);
			c->tokens[c->n] = next[k];
			c->logprobs[c->n++] = lp;
			if (is_stop(b, next[k])) {
				c->stop = "eos";
				live[k] = 0;
				continue;
			}
			if (!fw_tok_is_special(b->t, next[k])) {
				size_t pn;
				const char *pc = fw_tok_piece(b->t, next[k], &pn);
				if (pc && fw_buf_append(&txt[k], pc, pn))
					goto oom;
			}
			if (cut && txt[k].n &&
			    (c->keep = cut(ctx, (const char *)txt[k].p, txt[k].n)) >= 0) {
				c->stop = "stop";
				live[k] = 0;
				continue;
			}
			if (c->n == max_tokens) {
				c->stop = "max-tokens";
				live[k] = 0;
				continue;
			}
			nlive++;
		}
		if (!nlive)
			break;
		if (fw_gen_step(g, next, err, errlen))
			goto out;
	}
	for (int k = 0; k < K; k++) {
		if (!out[k].stop)
			out[k].stop = "max-tokens";
		if (fw_buf_append(&txt[k], "", 1))
			goto oom;
		out[k].text = (char *)txt[k].p;
		out[k].len = txt[k].n - 1;
		txt[k].p = NULL;
	}
	if (prompt_ids) {
		*prompt_ids = ids;
		memset(&ids, 0, sizeof ids);
	}
	rc = 0;
	goto out;
oom_p:
	fw_tok_ids_release(&p);
oom:
	snprintf(err, errlen, "out of memory");
out:
	if (rc)
		for (int k = 0; k < K; k++)
			fw_completion_release(&out[k]);
	if (txt)
		for (int k = 0; k < K; k++)
			fw_buf_free(&txt[k]);
	free(txt);
	free(rng);
	free(next);
	free(live);
	free(scratch);
	fw_gen_free(g);
	fw_tok_ids_release(&ids);
	return rc;
}

int fw_builtin_complete(struct fw_builtin *b, const char *prompt, size_t len, int K,
			const uint64_t *seeds, const struct fw_sampler *s, int max_tokens,
			fw_cut_fn cut, void *ctx, struct fw_tok_ids *prompt_ids,
			struct fw_completion *out, char *err, size_t errlen)
{
	return complete(b, prompt, len, NULL, 0, K, seeds, s, max_tokens, cut, ctx, prompt_ids,
			out, err, errlen);
}

int fw_builtin_complete_ids(struct fw_builtin *b, const int32_t *ids, size_t n, int K,
			    const uint64_t *seeds, const struct fw_sampler *s, int max_tokens,
			    struct fw_tok_ids *prompt_ids, struct fw_completion *out, char *err,
			    size_t errlen)
{
	if (n == 0) {
		snprintf(err, errlen, "empty prompt");
		return -1;
	}
	return complete(b, NULL, 0, ids, n, K, seeds, s, max_tokens, NULL, NULL, prompt_ids, out,
			err, errlen);
}
