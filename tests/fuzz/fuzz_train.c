/*
 * libFuzzer target for the records train-step reads.  The input is a JSON
 * record; it goes into a batch with the byte tokenizer (vocabulary 300,
 * at most 256 tokens: refused, then truncated).  A record taken must add one sequence of ids in the
 * vocabulary with at least one trained token and none at position 0, and
 * finite teacher advantages and log-probs; one refused must leave the batch as it was.
 * GRPO advantages over the batch must be finite.  Built by `make fuzz`.
 */
#include <math.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

#include "fw_json.h"
#include "fw_tok.h"
#include "fw_train.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fw_tok *tok;
	struct fw_buf rec = { 0 };
	struct fw_json_err je;
	struct fw_batch *b;
	struct fw_group_stats gs;
	size_t used;
	char err[256];

	if (!tok && !(tok = fw_tok_new_byte()))
		return 0;
	if (fw_json_to_mp(&rec, (const char *)data, size, 1, &used, &je) != 1 ||
	    !(b = fw_batch_new())) {
		fw_buf_free(&rec);
		return 0;
	}
	for (int k = 0; k < 2; k++) {
		int nseq = b->nseq;
		size_t ntok = b->ntok;
		int rc = fw_batch_add_record(b, (struct fw_mpv){ rec.p, rec.n }, tok, 300, 256,
					     k, err, sizeof(err));

		if (rc != 0) {
			if (b->nseq != nseq || b->ntok != ntok)
				__builtin_trap();
			continue;
		}
		const struct fw_seq *s = &b->seq[b->nseq - 1];
		int nt = 0;

		if (b->nseq != nseq + 1 || s->n > 256 || s->ntrain < 1 || b->mask[s->off])
			__builtin_trap();
		for (int i = 0; i < s->n; i++) {
			if (b->tok[s->off + i] < 0 || b->tok[s->off + i] >= 300)
				__builtin_trap();
			nt += b->mask[s->off + i];
			if (isinf(b->tadv[s->off + i]) || isinf(b->old[s->off + i]))
				__builtin_trap();
		}
		if (nt != s->ntrain)
			__builtin_trap();
	}
	fw_batch_advantages(b, 0, &gs);
	for (int i = 0; i < b->nseq; i++)
		if (!isfinite(b->seq[i].adv))
			__builtin_trap();
	fw_batch_free(b);
	fw_buf_free(&rec);
	return 0;
}
