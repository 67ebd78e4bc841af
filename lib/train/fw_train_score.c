/*
 * fw_train_score.c — records to score: the ids a record names, and the
 * record with its log-probs (fw_train.h).
 */
#include <assert.h>
#include <string.h>

#include "fw_mp.h"
#include "fw_tok.h"
#include "fw_train.h"

int fw_score_ids(struct fw_mpv rec, const struct fw_tok *t, int vocab, int max, int32_t *ids,
		 struct fw_tok_ids *scratch, int *encoded, const char **why)
{
	struct fw_mpv v;
	const char *s;
	size_t sl;
	int n = 0;

	*encoded = 0;
	if (fw_mp_get(rec, "tokens", &v) == 1) {
		struct fw_mp_iter it;
		struct fw_mpv e;
		int64_t x, cnt = fw_mp_iter_init(&it, v);

		if (cnt < 0 || fw_mp_type(v) != FW_MP_ARRAY)
			*why = "'tokens' is not an array";
		else if (cnt > max)
			*why = "'tokens' exceeds max_position_embeddings";
		else
			*why = NULL;
		while (!*why && fw_mp_iter_next(&it, &e) > 0) {
			if (fw_mp_int(e, &x) || x < 0 || x >= vocab)
				*why = "'tokens' holds an id outside the vocabulary";
			else
				ids[n++] = (int32_t)x;
		}
		return *why ? -1 : n;
	}
	if (fw_mp_get(rec, "text", &v) != 1 || fw_mp_str(v, &s, &sl) != 0) {
		*why = "record has neither 'tokens' nor 'text'";
		return -1;
	}
	if (!t) {
		*why = "'text' needs DIR/tokenizer.json";
		return -1;
	}
	scratch->n = 0;
	if (fw_tok_encode(t, s, sl, FW_TOK_ADD_BOS, 0, scratch)) {
		*why = "out of memory";
		return -1;
	}
	if ((int)scratch->n > max) {
		*why = "'text' exceeds max_position_embeddings";
		return -1;
	}
	memcpy(ids, scratch->ids, sizeof(int32_t) * scratch->n);
	*encoded = 1;
	return (int)scratch->n;
}

int fw_score_record(struct fw_buf *out, struct fw_mpv rec, const int32_t *ids, int n,
		    const float *lp, int with_tokens, struct fw_buf *lb, struct fw_buf *tb)
{
	msgpack_packer pk;
	struct fw_field fl[2];
	int nf = 0, e;

	assert(n >= 0);
	lb->n = tb->n = out->n = 0;
	fw_buf_packer(&pk, lb);
	e = msgpack_pack_array(&pk, n > 1 ? n - 1 : 0);
	for (int i = 0; !e && i + 1 < n; i++)
		e = msgpack_pack_float(&pk, lp[i]);
	if (with_tokens) {
		fw_buf_packer(&pk, tb);
		e = e || msgpack_pack_array(&pk, n);
		for (int i = 0; !e && i < n; i++)
			e = msgpack_pack_int32(&pk, ids[i]);
		fl[nf++] = (struct fw_field){ "tokens", 6, { tb->p, tb->n } };
	}
	fl[nf++] = (struct fw_field){ "logprobs", 8, { lb->p, lb->n } };
	return e || fw_rec_set(out, rec, fl, nf) ? -1 : 0;
}
