/*
 * fw_train_ckpt.c — the checkpoints ckpt makes and shows: a fresh model
 * from a config, a copy in another dtype, and what a checkpoint holds
 * (fw_train.h).
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fw_base.h"
#include "fw_mp.h"
#include "fw_safetensors.h"
#include "fw_tok.h"
#include "fw_train.h"

int fw_ckpt_init(const char *config, const char *tokenizer, uint64_t seed,
		 enum fw_dtype dtype, const char *out, char *err, size_t errlen)
{
	struct fw_config c;
	struct fw_model *m;
	struct fw_tok *t;
	int rc;

	if (fw_config_load(&c, config, err, errlen))
		return -1;
	if (!tokenizer || !strcmp(tokenizer, "byte")) {
		if (!(t = fw_tok_new_byte())) {
			fw_seterr(err, errlen, "out of memory");
			return -1;
		}
	} else if (!(t = fw_tok_load(tokenizer, err, errlen)))
		return -1;
	/* a tokenizer id the embeddings cannot hold would be found only
	 * when a text first uses it */
	if (fw_tok_vocab_size(t) > c.vocab) {
		fw_seterr(err, errlen, "%s: vocab_size %d is smaller than the tokenizer's %d ids",
			  config, c.vocab, (int)fw_tok_vocab_size(t));
		fw_tok_free(t);
		return -1;
	}
	if (!(m = fw_model_new(&c, seed, err, errlen))) {
		fw_tok_free(t);
		return -1;
	}
	rc = fw_ckpt_create(out, m, t, NULL, dtype, err, errlen);
	fw_model_free(m);
	fw_tok_free(t);
	return rc;
}

int fw_ckpt_convert(const char *dir, const char *out, enum fw_dtype dtype, char *err,
		    size_t errlen)
{
	struct fw_model *m = fw_model_load(dir, err, errlen);
	char tok[PATH_MAX + 32];
	int rc;

	if (!m)
		return -1;
	snprintf(tok, sizeof(tok), "%s/tokenizer.json", dir);
	rc = fw_ckpt_create(out, m, NULL, tok, dtype, err, errlen);
	fw_model_free(m);
	return rc;
}

int fw_ckpt_describe(const char *dir, struct fw_buf *out, char *err, size_t errlen)
{
	struct fw_train_state ts;
	struct fw_model *m;
	const struct fw_config *c;
	struct fw_st *st;
	char p[PATH_MAX + 32], link[PATH_MAX];
	ssize_t ln;
	int rc = 0;

	if (fw_train_state_load(&ts, dir, err, errlen) || !(m = fw_model_load(dir, err, errlen)))
		return -1;
	c = &m->cfg;
	snprintf(p, sizeof(p), "%s/model.safetensors", dir);
	st = fw_st_open(p, NULL, 0);
	if ((ln = readlink(dir, link, sizeof(link) - 1)) > 0) {
		link[ln] = '\0';
		rc |= fw_buf_printf(out, "checkpoint: %s -> %s\n", dir, link);
	} else
		rc |= fw_buf_printf(out, "checkpoint: %s\n", dir);
	rc |= fw_buf_printf(out,
			    "step: %ld\n"
			    "parent: %s\n"
			    "architecture: %s\n"
			    "parameters: %ld\n"
			    "dtype: %s\n"
			    "vocab_size: %d\n"
			    "hidden_size: %d\n"
			    "intermediate_size: %d\n"
			    "layers: %d\n"
			    "heads: %d\n"
			    "kv_heads: %d\n"
			    "head_dim: %d\n"
			    "max_position_embeddings: %d\n"
			    "rope_theta: %g\n"
			    "rms_norm_eps: %g\n"
			    "tied_embeddings: %s\n"
			    "qkv_bias: %s\n"
			    "qk_norm: %s\n",
			    ts.step, ts.parent[0] ? ts.parent : "none", c->arch_name, m->nw,
			    st && st->n ? st->t[0].dtype_name : c->dtype, c->vocab, c->C, c->I,
			    c->L, c->nh, c->nkv, c->hd, c->max_pos, c->rope_theta, c->eps,
			    c->tied ? "yes" : "no", c->qkv_bias ? "yes" : "no",
			    c->qk_norm ? "yes" : "no");
	fw_st_free(st);
	fw_model_free(m);
	if (rc)
		fw_seterr(err, errlen, "out of memory");
	return rc ? -1 : 0;
}
