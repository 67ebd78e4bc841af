/*
 * fw_model_sample.c — continuations of a prompt drawn token by token from
 * the model's cache (fw_model.h): what `ckpt sample` prints.
 */
#include <stdlib.h>

#include "fw_base.h"
#include "fw_model.h"

int fw_sample_seqs(struct fw_model *m, const int32_t *prompt, int n, int len, int count,
		   const struct fw_sampler *s, uint64_t seed, int32_t eos, int32_t *out,
		   int *outn, char *err, size_t errlen)
{
	int V = m->cfg.vocab, rc = -1;
	struct fw_gen *g = NULL;
	int32_t *next = calloc(count, sizeof(*next));
	int *done = calloc(count, sizeof(*done));
	float *scratch = malloc(sizeof(float) * 2 * V);
	uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;

	if (!next || !done || !scratch) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	if (!(g = fw_gen_new(m, count, n + len, err, errlen)) ||
	    fw_gen_prefill(g, prompt, n, err, errlen))
		goto out;
	for (int b = 0; b < count; b++)
		outn[b] = 0;
	for (int step = 0; step < len; step++) {
		int live = 0;

		/* every sequence draws, ended or not, so that each one's
		 * tokens do not depend on when the others end */
		for (int b = 0; b < count; b++) {
			next[b] = fw_sample(fw_gen_logits(g) + (size_t)b * V, V, s, &rng,
					    scratch, NULL);
			if (done[b])
				continue;
			if (next[b] == eos)
				done[b] = 1;
			else
				out[(size_t)b * len + outn[b]++] = next[b];
			live += !done[b];
		}
		if (!live || step + 1 == len)
			break;
		if (fw_gen_step(g, next, err, errlen))
			goto out;
	}
	rc = 0;
out:
	fw_gen_free(g);
	free(next);
	free(done);
	free(scratch);
	return rc;
}
