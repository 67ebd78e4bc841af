/*
 * fw_model.c — the Llama / Qwen2 / Qwen3 decoder: config, weights, forward,
 * backward, incremental decoding, sampling.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>

#include "fw_base.h"
#include "fw_model.h"
#include "kernels.h"
#include "kernels_dev.h"

/* ---- config.json ------------------------------------------------------------ */

static int get_int(json_t *o, const char *k, int def, int *out)
{
	json_t *v = json_object_get(o, k);

	if (!v || json_is_null(v)) {
		*out = def;
		return def == INT32_MIN ? -1 : 0;
	}
	if (json_is_array(v) && json_array_size(v) > 0)
		v = json_array_get(v, 0); /* eos_token_id may be a list */
	if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN + 1 ||
	    json_integer_value(v) > INT32_MAX)
		return -1;
	*out = (int)json_integer_value(v);
	return 0;
}

static int get_bool(json_t *o, const char *k, int def)
{
	json_t *v = json_object_get(o, k);

	return v && json_is_boolean(v) ? json_is_true(v) : def;
}

static double get_num(json_t *o, const char *k, double def)
{
	json_t *v = json_object_get(o, k);

	return v && json_is_number(v) ? json_number_value(v) : def;
}

int fw_config_parse(struct fw_config *c, const char *json, size_t len,
		    const char *name, char *err, size_t errlen)
{
	json_error_t je;
	json_t *o = json_loadb(json, len, 0, &je), *v;
	const char *arch = NULL, *mt = NULL;
	static const char *req[] = { "vocab_size", "hidden_size",
				     "intermediate_size", "num_hidden_layers",
				     "num_attention_heads" };
	int *reqp[] = { &c->vocab, &c->C, &c->I, &c->L, &c->nh };

	memset(c, 0, sizeof(*c));
	if (!o || !json_is_object(o)) {
		fw_seterr(err, errlen, "%s: not a JSON object: %s", name,
		       o ? "wrong type" : je.text);
		json_decref(o);
		return -1;
	}
	v = json_object_get(o, "architectures");
	if (json_is_array(v) && json_is_string(json_array_get(v, 0)))
		arch = json_string_value(json_array_get(v, 0));
	if (json_is_string(json_object_get(o, "model_type")))
		mt = json_string_value(json_object_get(o, "model_type"));
	if ((arch && !strcmp(arch, "LlamaForCausalLM")) || (!arch && mt && !strcmp(mt, "llama")))
		c->arch = FW_ARCH_LLAMA;
	else if ((arch && !strcmp(arch, "Qwen2ForCausalLM")) || (!arch && mt && !strcmp(mt, "qwen2")))
		c->arch = FW_ARCH_QWEN2;
	else if ((arch && !strcmp(arch, "Qwen3ForCausalLM")) || (!arch && mt && !strcmp(mt, "qwen3")))
		c->arch = FW_ARCH_QWEN3;
	else {
		fw_seterr(err, errlen, "%s: unsupported architecture '%s' "
		       "(LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM are)",
		       name, arch ? arch : mt ? mt : "(none)");
		goto fail;
	}
	snprintf(c->arch_name, sizeof(c->arch_name), "%s",
		 c->arch == FW_ARCH_LLAMA ? "LlamaForCausalLM" :
		 c->arch == FW_ARCH_QWEN2 ? "Qwen2ForCausalLM" : "Qwen3ForCausalLM");
	for (int i = 0; i < 5; i++)
		if (get_int(o, req[i], INT32_MIN, reqp[i]) || *reqp[i] <= 0) {
			fw_seterr(err, errlen, "%s: '%s' missing or not a positive "
			       "integer", name, req[i]);
			goto fail;
		}
	if (get_int(o, "num_key_value_heads", c->nh, &c->nkv) || c->nkv <= 0 ||
	    c->nh % c->nkv) {
		fw_seterr(err, errlen, "%s: num_key_value_heads must divide "
		       "num_attention_heads", name);
		goto fail;
	}
	if (get_int(o, "head_dim", c->C / c->nh, &c->hd) || c->hd <= 0 || c->hd % 2) {
		fw_seterr(err, errlen, "%s: head_dim must be a positive even number", name);
		goto fail;
	}
	if (get_int(o, "max_position_embeddings", 4096, &c->max_pos) || c->max_pos <= 0) {
		fw_seterr(err, errlen, "%s: bad max_position_embeddings", name);
		goto fail;
	}
	get_int(o, "bos_token_id", -1, &c->bos);
	get_int(o, "eos_token_id", -1, &c->eos);
	c->rope_theta = get_num(o, "rope_theta", 10000.0);
	c->eps = (float)get_num(o, "rms_norm_eps", 1e-6);
	c->init_range = (float)get_num(o, "initializer_range", 0.02);
	c->tied = get_bool(o, "tie_word_embeddings", 0);
	c->qkv_bias = c->arch == FW_ARCH_QWEN2 || get_bool(o, "attention_bias", 0);
	c->o_bias = c->arch != FW_ARCH_QWEN2 && get_bool(o, "attention_bias", 0);
	c->qk_norm = c->arch == FW_ARCH_QWEN3;
	v = json_object_get(o, "torch_dtype");
	snprintf(c->dtype, sizeof(c->dtype), "%s",
		 json_is_string(v) ? json_string_value(v) : "float32");
	v = json_object_get(o, "rope_scaling");
	if (v && !json_is_null(v)) {
		json_t *t = json_object_get(v, "rope_type");
		const char *ty;

		if (!t)
			t = json_object_get(v, "type");
		ty = json_is_string(t) ? json_string_value(t) : "?";
		c->rope_factor = get_num(v, "factor", 0);
		if (!strcmp(ty, "default"))
			c->rope_factor = 1.0;
		else if (!strcmp(ty, "linear"))
			c->rope_type = FW_ROPE_LINEAR;
		else if (!strcmp(ty, "llama3")) {
			c->rope_type = FW_ROPE_LLAMA3;
			c->rope_low = get_num(v, "low_freq_factor", 1.0);
			c->rope_high = get_num(v, "high_freq_factor", 4.0);
			get_int(v, "original_max_position_embeddings", 8192, &c->rope_orig_max);
			if (!(c->rope_high > c->rope_low) || c->rope_orig_max <= 0) {
				fw_seterr(err, errlen, "%s: bad llama3 rope_scaling", name);
				goto fail;
			}
		} else {
			fw_seterr(err, errlen, "%s: rope_scaling type '%s' is not "
			       "supported (default, linear, llama3 are)", name, ty);
			goto fail;
		}
		if (!(c->rope_factor > 0)) {
			fw_seterr(err, errlen, "%s: rope_scaling needs a positive factor", name);
			goto fail;
		}
	}
	if (get_bool(o, "use_sliding_window", 0)) {
		fw_seterr(err, errlen, "%s: use_sliding_window is not supported", name);
		goto fail;
	}
	if (get_bool(o, "mlp_bias", 0)) {
		fw_seterr(err, errlen, "%s: mlp_bias is not supported", name);
		goto fail;
	}
	v = json_object_get(o, "hidden_act");
	if (v && (!json_is_string(v) || strcmp(json_string_value(v), "silu"))) {
		fw_seterr(err, errlen, "%s: hidden_act '%s' is not supported (silu is)",
		       name, json_is_string(v) ? json_string_value(v) : "?");
		goto fail;
	}
	if (c->rope_theta <= 0 || !(c->eps > 0)) {
		fw_seterr(err, errlen, "%s: rope_theta and rms_norm_eps must be positive", name);
		goto fail;
	}
	json_decref(o);
	return 0;
fail:
	json_decref(o);
	return -1;
}

static char *slurp(const char *path, size_t *len, char *err, size_t errlen)
{
	char *s = fw_read_file(path, 0, len);

	if (!s)
		fw_seterr(err, errlen, "%s: %s", path, strerror(errno));
	return s;
}

int fw_config_load(struct fw_config *c, const char *path, char *err,
		   size_t errlen)
{
	size_t n;
	char *s = slurp(path, &n, err, errlen);
	int rc;

	if (!s)
		return -1;
	rc = fw_config_parse(c, s, n, path, err, errlen);
	free(s);
	return rc;
}

/* Writes o to path durably (a temporary file, synced, renamed over it),
 * reals with prec significant digits, and drops o.  A NULL o is an
 * allocation that failed. */
static int write_json(json_t *o, const char *path, int prec, char *err, size_t errlen)
{
	char *tmp = NULL;
	int rc = -1;

	if (!o || asprintf(&tmp, "%s.tmp", path) < 0) {
		tmp = NULL;
		fw_seterr(err, errlen, "%s: out of memory", path);
		goto out;
	}
	if (json_dump_file(o, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(prec)) ||
	    fw_durable_sync(tmp) || rename(tmp, path)) {
		fw_seterr(err, errlen, "%s: cannot write: %s", path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	rc = 0;
out:
	free(tmp);
	json_decref(o);
	return rc;
}

int fw_config_save(const struct fw_config *c, const char *path,
		   const char *dtype, char *err, size_t errlen)
{
	json_t *o = json_object();
	const char *mt = c->arch == FW_ARCH_LLAMA ? "llama" :
			 c->arch == FW_ARCH_QWEN2 ? "qwen2" : "qwen3";

	json_object_set_new(o, "architectures", json_pack("[s]", c->arch_name));
	json_object_set_new(o, "model_type", json_string(mt));
	json_object_set_new(o, "vocab_size", json_integer(c->vocab));
	json_object_set_new(o, "hidden_size", json_integer(c->C));
	json_object_set_new(o, "intermediate_size", json_integer(c->I));
	json_object_set_new(o, "num_hidden_layers", json_integer(c->L));
	json_object_set_new(o, "num_attention_heads", json_integer(c->nh));
	json_object_set_new(o, "num_key_value_heads", json_integer(c->nkv));
	json_object_set_new(o, "head_dim", json_integer(c->hd));
	json_object_set_new(o, "max_position_embeddings", json_integer(c->max_pos));
	json_object_set_new(o, "rope_theta", json_real(c->rope_theta));
	json_object_set_new(o, "rms_norm_eps", json_real(c->eps));
	json_object_set_new(o, "hidden_act", json_string("silu"));
	json_object_set_new(o, "initializer_range", json_real(c->init_range));
	json_object_set_new(o, "tie_word_embeddings", json_boolean(c->tied));
	if (c->arch != FW_ARCH_QWEN2)
		json_object_set_new(o, "attention_bias", json_boolean(c->qkv_bias));
	if (c->rope_type == FW_ROPE_LINEAR)
		json_object_set_new(o, "rope_scaling", json_pack("{s:s, s:f}",
				    "rope_type", "linear", "factor", c->rope_factor));
	else if (c->rope_type == FW_ROPE_LLAMA3)
		json_object_set_new(o, "rope_scaling", json_pack(
				    "{s:s, s:f, s:f, s:f, s:i}", "rope_type", "llama3",
				    "factor", c->rope_factor, "low_freq_factor", c->rope_low,
				    "high_freq_factor", c->rope_high,
				    "original_max_position_embeddings", c->rope_orig_max));
	else
		json_object_set_new(o, "rope_scaling", json_null());
	if (c->bos >= 0)
		json_object_set_new(o, "bos_token_id", json_integer(c->bos));
	if (c->eos >= 0)
		json_object_set_new(o, "eos_token_id", json_integer(c->eos));
	json_object_set_new(o, "torch_dtype", json_string(dtype ? dtype : c->dtype));
	json_object_set_new(o, "use_cache", json_true());
	return write_json(o, path, 9, err, errlen);
}

void fw_config_rope_freqs(const struct fw_config *c, float *inv_freq)
{
	for (int i = 0; i < c->hd / 2; i++) {
		double f = 1.0 / pow(c->rope_theta, (double)(2 * i) / c->hd);

		if (c->rope_type == FW_ROPE_LINEAR)
			f /= c->rope_factor;
		else if (c->rope_type == FW_ROPE_LLAMA3) {
			/* Long wavelengths slowed by factor, short ones kept,
			 * a smooth blend between (Llama 3.1). */
			double wl = 2 * M_PI / f, old = c->rope_orig_max;

			if (wl > old / c->rope_low)
				f /= c->rope_factor;
			else if (wl >= old / c->rope_high) {
				double sm = (old / wl - c->rope_low) /
					    (c->rope_high - c->rope_low);

				f = (1 - sm) * f / c->rope_factor + sm * f;
			}
		}
		inv_freq[i] = (float)f;
	}
}

/* ---- parameters --------------------------------------------------------------- */

static int add_param(struct fw_model *m, int cap, const char *name, int d0,
		     int d1)
{
	struct fw_param *p;

	if (m->np >= cap)
		return -1;
	p = &m->params[m->np++];
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->ndim = d1 ? 2 : 1;
	p->shape[0] = d0;
	p->shape[1] = d1;
	p->off = m->nw;
	p->n = (long)d0 * (d1 ? d1 : 1);
	m->nw += p->n;
	return 0;
}

/* Lays the parameters out (HF names, file order) and points the per-layer
 * views at them.  Allocates w (uninitialised). */
static struct fw_model *model_alloc(const struct fw_config *c, char *err,
				    size_t errlen)
{
	struct fw_model *m = calloc(1, sizeof(*m));
	int cap = 3 + 17 * c->L, C = c->C, qd = c->nh * c->hd, kd = c->nkv * c->hd;
	char nm[96];

	if (!m)
		goto oom;
	m->cfg = *c;
	m->params = calloc(cap, sizeof(*m->params));
	m->lw = calloc(c->L, sizeof(*m->lw));
	m->lg = calloc(c->L, sizeof(*m->lg));
	if (!m->params || !m->lw || !m->lg)
		goto oom;
	add_param(m, cap, "model.embed_tokens.weight", c->vocab, C);
	for (int l = 0; l < c->L; l++) {
#define P(suffix, d0, d1) \
	(snprintf(nm, sizeof(nm), "model.layers.%d.%s", l, suffix), \
	 add_param(m, cap, nm, d0, d1))
		P("input_layernorm.weight", C, 0);
		P("self_attn.q_proj.weight", qd, C);
		if (c->qkv_bias)
			P("self_attn.q_proj.bias", qd, 0);
		P("self_attn.k_proj.weight", kd, C);
		if (c->qkv_bias)
			P("self_attn.k_proj.bias", kd, 0);
		P("self_attn.v_proj.weight", kd, C);
		if (c->qkv_bias)
			P("self_attn.v_proj.bias", kd, 0);
		P("self_attn.o_proj.weight", C, qd);
		if (c->o_bias)
			P("self_attn.o_proj.bias", C, 0);
		if (c->qk_norm) {
			P("self_attn.q_norm.weight", c->hd, 0);
			P("self_attn.k_norm.weight", c->hd, 0);
		}
		P("post_attention_layernorm.weight", C, 0);
		P("mlp.gate_proj.weight", c->I, C);
		P("mlp.up_proj.weight", c->I, C);
		P("mlp.down_proj.weight", C, c->I);
#undef P
	}
	add_param(m, cap, "model.norm.weight", C, 0);
	if (!c->tied)
		add_param(m, cap, "lm_head.weight", c->vocab, C);
	m->w = malloc(sizeof(float) * m->nw);
	m->rope_cos = malloc(sizeof(float) * (size_t)c->max_pos * (c->hd / 2));
	m->rope_sin = malloc(sizeof(float) * (size_t)c->max_pos * (c->hd / 2));
	if (!m->w || !m->rope_cos || !m->rope_sin)
		goto oom;
	{
		float *inv = malloc(sizeof(float) * (c->hd / 2));

		if (!inv)
			goto oom;
		fw_config_rope_freqs(c, inv);
		fw_rope_table_inv(m->rope_cos, m->rope_sin, c->max_pos, c->hd, inv);
		free(inv);
	}
	return m;
oom:
	fw_seterr(err, errlen, "out of memory for the model");
	fw_model_free(m);
	return NULL;
}

/* Points the named views (embed, per layer, ...) into buffer base, which is
 * laid out as m->params says. */
static void bind(struct fw_model *m, float *base, struct fw_layer_w *lw,
		 float **embed, float **norm, float **lm)
{
	for (int i = 0; i < m->np; i++) {
		const char *n = m->params[i].name;
		float *p = base + m->params[i].off;
		int l;
		char rest[96];

		if (!strcmp(n, "model.embed_tokens.weight"))
			*embed = p;
		else if (!strcmp(n, "model.norm.weight"))
			*norm = p;
		else if (!strcmp(n, "lm_head.weight"))
			*lm = p;
		else if (sscanf(n, "model.layers.%d.%95s", &l, rest) == 2) {
			struct fw_layer_w *w = &lw[l];
			static const struct { const char *s; size_t o; } tab[] = {
#define F(s, f) { s, offsetof(struct fw_layer_w, f) }
				F("input_layernorm.weight", ln1),
				F("self_attn.q_proj.weight", wq), F("self_attn.q_proj.bias", bq),
				F("self_attn.k_proj.weight", wk), F("self_attn.k_proj.bias", bk),
				F("self_attn.v_proj.weight", wv), F("self_attn.v_proj.bias", bv),
				F("self_attn.o_proj.weight", wo), F("self_attn.o_proj.bias", bo),
				F("self_attn.q_norm.weight", qn), F("self_attn.k_norm.weight", kn),
				F("post_attention_layernorm.weight", ln2),
				F("mlp.gate_proj.weight", wg), F("mlp.up_proj.weight", wu),
				F("mlp.down_proj.weight", wd),
#undef F
			};
			for (size_t k = 0; k < sizeof(tab) / sizeof(tab[0]); k++)
				if (!strcmp(rest, tab[k].s))
					*(float **)((char *)w + tab[k].o) = p;
		}
	}
	if (m->cfg.tied)
		*lm = *embed;
}

/* Puts a model made on the host onto the device fw_dev_current() names:
 * w and the rope tables copied into device memory, the host w kept as hw,
 * the views bound again.  Nothing to do for the CPU.  Returns 0, or -1
 * with err filled. */
static int to_device(struct fw_model *m, char *err, size_t errlen)
{
	int dev = fw_dev_current();
	size_t nr = sizeof(float) * (size_t)m->cfg.max_pos * (m->cfg.hd / 2);
	float *dw, *dc, *ds;

	if (dev == FW_DEV_CPU)
		return 0;
	dw = fw_dev_alloc(dev, sizeof(float) * (size_t)m->nw);
	dc = fw_dev_alloc(dev, nr);
	ds = fw_dev_alloc(dev, nr);
	if (!dw || !dc || !ds) {
		fw_dev_free(dev, dw);
		fw_dev_free(dev, dc);
		fw_dev_free(dev, ds);
		fw_seterr(err, errlen, "out of device memory for the model (%zu MB)",
		       (sizeof(float) * (size_t)m->nw) >> 20);
		return -1;
	}
	fw_dev_h2d(dev, dw, m->w, sizeof(float) * (size_t)m->nw);
	fw_dev_h2d(dev, dc, m->rope_cos, nr);
	fw_dev_h2d(dev, ds, m->rope_sin, nr);
	free(m->rope_cos);
	free(m->rope_sin);
	m->hw = m->w;
	m->w = dw;
	m->rope_cos = dc;
	m->rope_sin = ds;
	m->dev = dev;
	bind(m, m->w, m->lw, &m->embed, &m->norm, &m->lm_head);
	return fw_dev_check(dev, err, errlen);
}

const float *fw_model_host_w(const struct fw_model *m, char *err,
			     size_t errlen)
{
	if (m->dev == FW_DEV_CPU)
		return m->w;
	fw_dev_d2h(m->dev, m->hw, m->w, sizeof(float) * (size_t)m->nw);
	return fw_dev_check(m->dev, err, errlen) ? NULL : m->hw;
}

double fw_model_grad_sumsq(const struct fw_model *m)
{
	double s = 0;

	if (!m->g)
		return 0;
	if (m->dev != FW_DEV_CPU)
		return fw_dev_sumsq(m->dev, m->g, m->nw);
	for (long i = 0; i < m->nw; i++)
		s += (double)m->g[i] * m->g[i];
	return s;
}

int fw_model_weights_finite(const struct fw_model *m)
{
	if (m->dev != FW_DEV_CPU)
		/* A sum of squares of floats in double overflows only past
		 * 1e308: it is finite exactly when every weight is. */
		return isfinite(fw_dev_sumsq(m->dev, m->w, m->nw));
	for (long i = 0; i < m->nw; i++)
		if (!isfinite(m->w[i]))
			return 0;
	return 1;
}

struct fw_acts {
	void *block;              /* the one allocation all slices below live in */
	size_t bytes, cap;        /* bytes the layout uses; bytes allocated */
	int B, T, keep;           /* keep: 1 = one set per layer (training) */
	int32_t *pos, *tokens, *targets;
	float *wts;
	float *x, *xm, *ln1, *ln2, *rs1, *rs2, *qr, *kr, *rsq, *rsk;
	float *q, *k, *v, *att, *y, *gate, *up, *h;
	float *xf, *rsf, *logits, *logp, *lse, *tmp;
	float *dres, *dln, *dy, *dq, *dk, *dv, *dqr, *dkr, *dh, *dgate, *dup,
	      *dscr, *dlogp;
	/* Host views of pos, tokens, targets, wts, logp, dlogp: the same
	 * slices on the CPU, a host block of their own on a GPU. */
	void *hblock;
	int32_t *hpos, *htok, *htgt;
	float *hwts, *hlogp, *hdlogp;
	float *hlogits;           /* GPU: host copy for fw_model_logits, or NULL */
	size_t hlogits_n;
	float norm;
	int ready;                /* a forward with targets ran; backward may follow */
};

/* The soft targets of the last forward (fw_model_forward_soft), kept for
 * backward: the triples, and the host and device arrays the gather and
 * the scatter use.  Grown, never shrunk. */
struct fw_soft_buf {
	long n, cap, dcap, lcap;
	int32_t *row, *tok;
	float *w;
	int64_t *hidx;     /* 2 cap: gather, then scatter indices */
	float *hval, *hlse; /* 2 cap values; lcap rows' lse */
	int64_t (*pair)[2]; /* 2 cap (index, order) pairs, backward's sort */
	float *pval;       /* 2 cap values in order made */
	int64_t *didx;     /* device: dcap */
	float *dval;
};

static void soft_free(struct fw_model *m)
{
	struct fw_soft_buf *b = m->soft;

	if (!b)
		return;
	free(b->row);
	free(b->tok);
	free(b->w);
	free(b->hidx);
	free(b->hval);
	free(b->hlse);
	free(b->pair);
	free(b->pval);
	fw_dev_free(m->dev, b->didx);
	fw_dev_free(m->dev, b->dval);
	free(b);
	m->soft = NULL;
}

/* Room for n triples (2n gather/scatter entries) and lse of N rows.
 * 0, or -1 out of memory. */
static int soft_grow(struct fw_model *m, long n, long N)
{
	struct fw_soft_buf *b = m->soft;

	if (!b && !(b = m->soft = calloc(1, sizeof(*b))))
		return -1;
	if (b->cap < n) {
		long c = n > 2 * b->cap ? n : 2 * b->cap;
		int32_t *r = realloc(b->row, sizeof(int32_t) * c);

		if (r)
			b->row = r;
		int32_t *t = r ? realloc(b->tok, sizeof(int32_t) * c) : NULL;

		if (t)
			b->tok = t;
		float *w = t ? realloc(b->w, sizeof(float) * c) : NULL;

		if (w)
			b->w = w;
		int64_t *x = w ? realloc(b->hidx, sizeof(int64_t) * 2 * c) : NULL;

		if (x)
			b->hidx = x;
		float *v = x ? realloc(b->hval, sizeof(float) * 2 * c) : NULL;

		if (v)
			b->hval = v;
		int64_t (*pr)[2] = v ? realloc(b->pair, sizeof(*pr) * 2 * c) : NULL;

		if (pr)
			b->pair = pr;
		float *pv = pr ? realloc(b->pval, sizeof(float) * 2 * c) : NULL;

		if (!pv)
			return -1;
		b->pval = pv;
		b->cap = c;
	}
	if (b->lcap < N) {
		float *l = realloc(b->hlse, sizeof(float) * N);

		if (!l)
			return -1;
		b->hlse = l;
		b->lcap = N;
	}
	if (b->dcap < 2 * n) {
		fw_dev_free(m->dev, b->didx);
		fw_dev_free(m->dev, b->dval);
		b->dcap = 0;
		b->didx = fw_dev_alloc(m->dev, sizeof(int64_t) * 2 * b->cap);
		b->dval = fw_dev_alloc(m->dev, sizeof(float) * 2 * b->cap);
		if (!b->didx || !b->dval)
			return -1;
		b->dcap = 2 * b->cap;
	}
	return 0;
}

static double unif(uint64_t *s) /* in (0, 1) */
{
	return ((fw_rand64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

struct fw_model *fw_model_new(const struct fw_config *c, uint64_t seed,
			      char *err, size_t errlen)
{
	struct fw_model *m = model_alloc(c, err, errlen);
	uint64_t s = seed;

	if (!m)
		return NULL;
	bind(m, m->w, m->lw, &m->embed, &m->norm, &m->lm_head);
	for (int i = 0; i < m->np; i++) {
		struct fw_param *p = &m->params[i];
		float *x = m->w + p->off;

		if (p->ndim == 1) {
			float v = strstr(p->name, "norm") ? 1.0f : 0.0f;

			for (long j = 0; j < p->n; j++)
				x[j] = v;
			continue;
		}
		for (long j = 0; j < p->n; j += 2) {
			double r = sqrt(-2.0 * log(unif(&s))), a = 2 * M_PI * unif(&s);

			x[j] = (float)(c->init_range * r * cos(a));
			if (j + 1 < p->n)
				x[j + 1] = (float)(c->init_range * r * sin(a));
		}
	}
	if (to_device(m, err, errlen)) {
		fw_model_free(m);
		return NULL;
	}
	return m;
}

int fw_model_pack(struct fw_model *m, char *err, size_t errlen)
{
	const struct fw_config *c = &m->cfg;
	int C = c->C, I = c->I, qd = c->nh * c->hd, kd = c->nkv * c->hd;
	/* each layer's matrices as (K, N) of out = inp @ w^T */
	const int kn[7][2] = { { C, qd }, { C, kd }, { C, kd }, { qd, C },
			       { C, I }, { C, I }, { I, C } };
	long per = 0, off = 0;

	if (m->pk || m->dev != FW_DEV_CPU || !fw_matmul_pack_ok())
		return 0;
	for (int i = 0; i < 7; i++)
		per += fw_matmul_pack_len(kn[i][0], kn[i][1]);
	if (!(m->pk_lw = calloc(c->L, sizeof(*m->pk_lw))) ||
	    !(m->pk = aligned_alloc(64, sizeof(float) * (per * c->L +
			fw_matmul_pack_len(C, c->vocab))))) {
		free(m->pk_lw);
		m->pk_lw = NULL;
		fw_seterr(err, errlen, "out of memory for the packed weights");
		return -1;
	}
	for (int l = 0; l < c->L; l++) {
		const struct fw_layer_w *w = &m->lw[l];
		struct fw_layer_w *p = &m->pk_lw[l];
		float **dst[7] = { &p->wq, &p->wk, &p->wv, &p->wo, &p->wg,
				   &p->wu, &p->wd };
		const float *src[7] = { w->wq, w->wk, w->wv, w->wo, w->wg,
					w->wu, w->wd };

		for (int i = 0; i < 7; i++) {
			*dst[i] = m->pk + off;
			fw_matmul_pack(*dst[i], src[i], kn[i][0], kn[i][1]);
			off += fw_matmul_pack_len(kn[i][0], kn[i][1]);
		}
	}
	m->pk_lm_head = m->pk + off;
	fw_matmul_pack(m->pk_lm_head, m->lm_head, C, c->vocab);
	return 0;
}

void fw_model_unpack(struct fw_model *m)
{
	free(m->pk);
	free(m->pk_lw);
	m->pk = NULL;
	m->pk_lw = NULL;
	m->pk_lm_head = NULL;
}

void fw_model_free(struct fw_model *m)
{
	if (!m)
		return;
	fw_model_unpack(m);
	if (m->acts) {
		fw_dev_free(m->dev, m->acts->block);
		free(m->acts->hblock);
		free(m->acts->hlogits);
	}
	free(m->acts);
	soft_free(m);
	free(m->params);
	free(m->lw);
	free(m->lg);
	fw_dev_free(m->dev, m->w);
	fw_dev_free(m->dev, m->g);
	free(m->hw);
	fw_dev_free(m->dev, m->rope_cos);
	fw_dev_free(m->dev, m->rope_sin);
	free(m->cfg_json);
	free(m);
}

const struct fw_param *fw_model_param(const struct fw_model *m,
				      const char *name)
{
	for (int i = 0; i < m->np; i++)
		if (!strcmp(m->params[i].name, name))
			return &m->params[i];
	return NULL;
}

int fw_model_grads(struct fw_model *m)
{
	if (m->g)
		return 0;
	if (m->dev == FW_DEV_CPU)
		m->g = calloc((size_t)m->nw, sizeof(float));
	else if ((m->g = fw_dev_alloc(m->dev, sizeof(float) * (size_t)m->nw))) {
		fw_dev_zero(m->dev, m->g, sizeof(float) * (size_t)m->nw);
		if (fw_dev_check(m->dev, NULL, 0)) {
			fw_dev_free(m->dev, m->g);
			m->g = NULL;
		}
	}
	if (!m->g)
		return -1;
	bind(m, m->g, m->lg, &m->gembed, &m->gnorm, &m->glm_head);
	return 0;
}

void fw_model_zero_grad(struct fw_model *m)
{
	if (m->g)
		fw_dev_zero(m->dev, m->g, sizeof(float) * (size_t)m->nw);
}

/* ---- load / save --------------------------------------------------------------- */

struct shards {
	int n;
	struct fw_st *st[64];
};

static int open_shards(struct shards *sh, const char *dir, char *err,
		       size_t errlen)
{
	char path[4096];
	struct stat sb;

	sh->n = 0;
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	if (stat(path, &sb) == 0) {
		if (!(sh->st[0] = fw_st_open(path, err, errlen)))
			return -1;
		sh->n = 1;
		return 0;
	}
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	json_error_t je;
	json_t *o = json_load_file(path, 0, &je), *wm, *v;
	const char *k;

	if (!o) {
		fw_seterr(err, errlen, "%s/model.safetensors: %s", dir, strerror(ENOENT));
		return -1;
	}
	wm = json_object_get(o, "weight_map");
	if (!json_is_object(wm)) {
		fw_seterr(err, errlen, "%s: no weight_map", path);
		json_decref(o);
		return -1;
	}
	json_object_foreach(wm, k, v) {
		int seen = 0;
		char sp[4096];

		if (!json_is_string(v) || strchr(json_string_value(v), '/')) {
			fw_seterr(err, errlen, "%s: bad file for '%s'", path, k);
			json_decref(o);
			return -1;
		}
		snprintf(sp, sizeof(sp), "%s/%s", dir, json_string_value(v));
		for (int i = 0; i < sh->n; i++)
			seen |= !strcmp(sh->st[i]->path, sp);
		if (seen)
			continue;
		if (sh->n == 64 || !(sh->st[sh->n] = fw_st_open(sp, err, errlen))) {
			if (sh->n == 64)
				fw_seterr(err, errlen, "%s: too many shards", path);
			json_decref(o);
			return -1;
		}
		sh->n++;
	}
	json_decref(o);
	return 0;
}

struct fw_model *fw_model_load(const char *dir, char *err, size_t errlen)
{
	char path[4096];
	struct fw_config c;
	struct fw_model *m;
	struct shards sh = { 0 };

	size_t cl;
	char *cj;

	snprintf(path, sizeof(path), "%s/config.json", dir);
	if (!(cj = slurp(path, &cl, err, errlen)))
		return NULL;
	if (fw_config_parse(&c, cj, cl, path, err, errlen) ||
	    !(m = model_alloc(&c, err, errlen))) {
		free(cj);
		return NULL;
	}
	m->cfg_json = cj;
	m->cfg_json_len = cl;
	bind(m, m->w, m->lw, &m->embed, &m->norm, &m->lm_head);
	if (open_shards(&sh, dir, err, errlen))
		goto fail;
	for (int i = 0; i < m->np; i++) {
		struct fw_param *p = &m->params[i];
		const struct fw_st_tensor *t = NULL;
		struct fw_st *in = NULL;

		for (int s = 0; s < sh.n && !t; s++)
			if ((t = fw_st_find(sh.st[s], p->name)))
				in = sh.st[s];
		if (!t) {
			fw_seterr(err, errlen, "%s: tensor '%s' is missing",
			       sh.st[0]->path, p->name);
			goto fail;
		}
		if (t->ndim != p->ndim || t->shape[0] != p->shape[0] ||
		    (p->ndim == 2 && t->shape[1] != p->shape[1])) {
			char got[64] = "", want[32];
			size_t o = 0;

			for (int d = 0; d < t->ndim && o < sizeof(got) - 16; d++)
				o += snprintf(got + o, sizeof(got) - o, "%s%lld",
					      d ? ", " : "", (long long)t->shape[d]);
			if (p->ndim == 2)
				snprintf(want, sizeof(want), "%d, %d", p->shape[0], p->shape[1]);
			else
				snprintf(want, sizeof(want), "%d", p->shape[0]);
			fw_seterr(err, errlen, "%s: tensor '%s': shape [%s], config.json "
			       "implies [%s]", in->path, p->name, got, want);
			goto fail;
		}
		if (fw_st_read_f32(in, t, m->w + p->off, err, errlen))
			goto fail;
		fw_st_drop(in, t);
	}
	for (int s = 0; s < sh.n; s++)
		fw_st_free(sh.st[s]);
	sh.n = 0;
	if (to_device(m, err, errlen))
		goto fail;
	return m;
fail:
	for (int s = 0; s < sh.n; s++)
		fw_st_free(sh.st[s]);
	fw_model_free(m);
	return NULL;
}

/* Writes the config.json the model was loaded from, every field as it was
 * and in its order, with torch_dtype set to dtype. */
static int save_orig_config(const struct fw_model *m, const char *path,
			    const char *dtype, char *err, size_t errlen)
{
	json_t *o = json_loadb(m->cfg_json, m->cfg_json_len, 0, NULL);

	if (!o) {
		fw_seterr(err, errlen, "%s: out of memory", path);
		return -1;
	}
	json_object_set_new(o, "torch_dtype", json_string(dtype));
	return write_json(o, path, 17, err, errlen);
}

int fw_model_save(const struct fw_model *m, const char *dir,
		  enum fw_dtype dtype, char *err, size_t errlen)
{
	char path[4096];
	struct fw_st_out *t;
	int rc;
	const char *tn = dtype == FW_F32 ? "float32" : dtype == FW_BF16 ? "bfloat16" : "float16";
	const float *hw = fw_model_host_w(m, err, errlen);

	if (!hw)
		return -1;
	if (!(t = calloc(m->np, sizeof(*t)))) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < m->np; i++) {
		t[i].name = m->params[i].name;
		t[i].ndim = m->params[i].ndim;
		t[i].shape[0] = m->params[i].shape[0];
		t[i].shape[1] = m->params[i].shape[1];
		t[i].data = hw + m->params[i].off;
	}
	snprintf(path, sizeof(path), "%s/config.json", dir);
	rc = m->cfg_json ? save_orig_config(m, path, tn, err, errlen)
			 : fw_config_save(&m->cfg, path, tn, err, errlen);
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	if (!rc)
		rc = fw_st_write(path, t, m->np, dtype, err, errlen);
	free(t);
	return rc;
}

/* ---- activations -------------------------------------------------------------- */



#define NG_ROWS 64 /* rows per chunk of a no_grad forward */

/* Carves n floats from the block (or counts them when base is NULL),
 * each slice 64-byte aligned. */
static float *carve(char *base, size_t *off, size_t n)
{
	float *p = base ? (float *)(base + *off) : NULL;

	*off += (n * sizeof(float) + 63) & ~(size_t)63;
	return p;
}

static int plan(struct fw_model *m, int B, int T, char *err, size_t errlen)
{
	const struct fw_config *c = &m->cfg;
	struct fw_acts *a = m->acts;
	size_t N = (size_t)B * T, C = c->C, I = c->I, V = c->vocab;
	size_t qd = (size_t)c->nh * c->hd, kd = (size_t)c->nkv * c->hd;
	size_t Lk = m->no_grad ? 1 : c->L, off;
	char *base = NULL;

	void *keep_block = NULL;
	size_t keep_cap = 0;
	int dev = m->dev;

	if (a && a->B == B && a->T == T && a->keep == !m->no_grad)
		return 0;
	if (a) {
		/* A new shape: lay it out again, in the old block when it
		 * fits, so alternating shapes allocate once for the largest. */
		keep_block = a->block;
		keep_cap = a->cap;
		free(a->hblock);
		free(a->hlogits);
		memset(a, 0, sizeof(*a));
	} else if (!(a = m->acts = calloc(1, sizeof(*a)))) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	for (int pass = 0; pass < 2; pass++) {
		off = 0;
		a->pos = (int32_t *)carve(base, &off, N);
		a->tokens = (int32_t *)carve(base, &off, N);
		a->targets = (int32_t *)carve(base, &off, N);
		a->wts = carve(base, &off, N);
		a->x = carve(base, &off, (m->no_grad ? 1 : Lk + 1) * N * C);
		a->xm = carve(base, &off, Lk * N * C);
		a->ln1 = carve(base, &off, Lk * N * C);
		a->ln2 = carve(base, &off, Lk * N * C);
		a->rs1 = carve(base, &off, Lk * N);
		a->rs2 = carve(base, &off, Lk * N);
		if (c->qk_norm) {
			a->qr = carve(base, &off, Lk * N * qd);
			a->kr = carve(base, &off, Lk * N * kd);
			a->rsq = carve(base, &off, Lk * N * c->nh);
			a->rsk = carve(base, &off, Lk * N * c->nkv);
		}
		a->q = carve(base, &off, Lk * N * qd);
		a->k = carve(base, &off, Lk * N * kd);
		a->v = carve(base, &off, Lk * N * kd);
		/* Without gradients attention and logits go by chunks of
		 * NG_ROWS rows, so neither is ever (T, T) or (N, V) big. */
		a->att = carve(base, &off, m->no_grad ? (size_t)(T < NG_ROWS ? T : NG_ROWS) * c->nh * T
					       : Lk * fw_dev_attn_floats(dev, B, T, c->nh));
		a->y = carve(base, &off, Lk * N * qd);
		a->gate = carve(base, &off, Lk * N * I);
		a->up = carve(base, &off, Lk * N * I);
		a->h = carve(base, &off, Lk * N * I);
		a->xf = carve(base, &off, N * C);
		a->rsf = carve(base, &off, N);
		a->logits = carve(base, &off, (m->no_grad && N > NG_ROWS ? NG_ROWS : N) * V);
		a->logp = carve(base, &off, N);
		a->lse = carve(base, &off, N);
		a->dlogp = carve(base, &off, N);
		a->tmp = carve(base, &off, N * C);
		if (m->no_grad)
			goto carved; /* no backward: no gradient scratch */
		a->dres = carve(base, &off, N * C);
		a->dln = carve(base, &off, N * C);
		a->dy = carve(base, &off, N * qd);
		a->dq = carve(base, &off, N * qd);
		a->dk = carve(base, &off, N * kd);
		a->dv = carve(base, &off, N * kd);
		a->dh = carve(base, &off, N * I);
		a->dgate = carve(base, &off, N * I);
		a->dup = carve(base, &off, N * I);
		a->dscr = carve(base, &off, fw_dev_attn_floats(dev, B, T, c->nh));
		if (c->qk_norm) {
			a->dqr = carve(base, &off, N * qd);
			a->dkr = carve(base, &off, N * kd);
		}
carved:
		if (!pass && off <= keep_cap) {
			base = keep_block;
			keep_block = NULL;
		} else if (!pass) {
			fw_dev_free(dev, keep_block);
			keep_block = NULL;
			keep_cap = off;
			if (!(base = fw_dev_alloc(dev, off))) {
				fw_seterr(err, errlen, "out of %smemory for activations "
				       "(%zu MB)", dev ? "device " : "", off >> 20);
				return -1;
			}
		}
	}
	a->block = base;
	if (dev == FW_DEV_CPU) {
		a->hpos = a->pos;
		a->htok = a->tokens;
		a->htgt = a->targets;
		a->hwts = a->wts;
		a->hlogp = a->logp;
		a->hdlogp = a->dlogp;
	} else {
		size_t ho = 0;
		char *hb = NULL;

		for (int pass = 0; pass < 2; pass++) {
			ho = 0;
			a->hpos = (int32_t *)carve(hb, &ho, N);
			a->htok = (int32_t *)carve(hb, &ho, N);
			a->htgt = (int32_t *)carve(hb, &ho, N);
			a->hwts = carve(hb, &ho, N);
			a->hlogp = carve(hb, &ho, N);
			a->hdlogp = carve(hb, &ho, N);
			if (!pass && !(hb = aligned_alloc(64, ho))) {
				fw_seterr(err, errlen, "out of memory");
				fw_dev_free(dev, base);
				memset(a, 0, sizeof(*a));
				return -1;
			}
		}
		a->hblock = hb;
	}
	a->cap = keep_cap;
	a->bytes = off;
	a->B = B;
	a->T = T;
	a->keep = !m->no_grad;
	return 0;
}

size_t fw_model_act_bytes(const struct fw_model *m)
{
	return m->acts ? m->acts->bytes : 0;
}

int fw_model_forward(struct fw_model *m, const int32_t *tokens,
		     const int32_t *targets, const float *weights, int B,
		     int T, float norm_in, float *logp, float *loss,
		     char *err, size_t errlen)
{
	return fw_model_forward_soft(m, tokens, targets, weights, B, T, norm_in, logp, loss, NULL,
				     err, errlen);
}

/* Checks the soft targets against the batch and copies them to m->soft;
 * none leaves m->soft with n = 0.  0, or -1 with err filled. */
static int soft_take(struct fw_model *m, const struct fw_soft *sf, const int32_t *targets,
		     int N, char *err, size_t errlen)
{
	long n = sf ? sf->n : 0;

	if (m->soft)
		m->soft->n = 0;
	if (n <= 0)
		return 0;
	if (m->no_grad || !targets) {
		fw_seterr(err, errlen, "soft targets need a forward with targets on a model "
			  "with gradients");
		return -1;
	}
	for (long i = 0; i < n; i++)
		if (sf->row[i] < 0 || sf->row[i] >= N || targets[sf->row[i]] < 0 ||
		    sf->tok[i] < 0 || sf->tok[i] >= m->cfg.vocab || !isfinite(sf->w[i])) {
			fw_seterr(err, errlen, "soft target %ld (position %d, token %d) is outside "
				  "the batch's scored positions or the vocabulary (%d), or its "
				  "weight is not finite", i, sf->row[i], sf->tok[i], m->cfg.vocab);
			return -1;
		}
	if (soft_grow(m, n, N)) {
		fw_seterr(err, errlen, "out of memory for %ld soft targets", n);
		return -1;
	}
	memcpy(m->soft->row, sf->row, sizeof(int32_t) * n);
	memcpy(m->soft->tok, sf->tok, sizeof(int32_t) * n);
	memcpy(m->soft->w, sf->w, sizeof(float) * n);
	m->soft->n = n;
	return 0;
}

/* The soft targets' log-probs (into b->hval) from the logits and lse on
 * the device.  Returns 0 or -1 with err (a device fault). */
static int soft_logp(struct fw_model *m, const float *logits, const float *lse, int N,
		     char *err, size_t errlen)
{
	struct fw_soft_buf *b = m->soft;
	long V = m->cfg.vocab;

	for (long i = 0; i < b->n; i++)
		b->hidx[i] = (int64_t)b->row[i] * V + b->tok[i];
	fw_dev_h2d(m->dev, b->didx, b->hidx, sizeof(int64_t) * b->n);
	fw_dev_gather(m->dev, b->dval, logits, b->didx, b->n);
	fw_dev_d2h(m->dev, b->hval, b->dval, sizeof(float) * b->n);
	fw_dev_d2h(m->dev, b->hlse, lse, sizeof(float) * N);
	if (fw_dev_check(m->dev, err, errlen))
		return -1;
	for (long i = 0; i < b->n; i++)
		b->hval[i] -= b->hlse[b->row[i]];
	return 0;
}

int fw_model_forward_soft(struct fw_model *m, const int32_t *tokens,
			  const int32_t *targets, const float *weights, int B,
			  int T, float norm_in, float *logp, float *loss,
			  const struct fw_soft *soft, char *err, size_t errlen)
{
	const struct fw_config *c = &m->cfg;
	int N = B * T, C = c->C, I = c->I, V = c->vocab, nh = c->nh,
	    nkv = c->nkv, hd = c->hd, qd = nh * hd, kd = nkv * hd;
	struct fw_acts *a;
	int dev = m->dev;

	if (B <= 0 || T <= 0) {
		fw_seterr(err, errlen, "empty batch");
		return -1;
	}
	if (T > c->max_pos) {
		fw_seterr(err, errlen, "sequence of %d tokens exceeds "
		       "max_position_embeddings %d", T, c->max_pos);
		return -1;
	}
	for (int i = 0; i < N; i++)
		if (tokens[i] < 0 || tokens[i] >= V ||
		    (targets && targets[i] >= V)) {
			fw_seterr(err, errlen, "token %d at position %d is outside "
			       "the vocabulary (%d)", tokens[i] < 0 || tokens[i] >= V ?
			       tokens[i] : targets[i], i, V);
			return -1;
		}
	if (soft_take(m, soft, targets, N, err, errlen) || plan(m, B, T, err, errlen))
		return -1;
	a = m->acts;
	a->ready = 0;
	memcpy(a->htok, tokens, sizeof(int32_t) * N);
	for (int i = 0; i < N; i++) {
		a->hpos[i] = i % T;
		a->htgt[i] = targets ? targets[i] : -1;
		a->hwts[i] = weights ? weights[i] : 1.0f;
	}
	fw_dev_h2d(dev, a->tokens, a->htok, sizeof(int32_t) * N);
	fw_dev_h2d(dev, a->pos, a->hpos, sizeof(int32_t) * N);
	fw_dev_h2d(dev, a->targets, a->htgt, sizeof(int32_t) * N);
	fw_dev_embed_fwd(dev, a->x, a->tokens, m->embed, N, C);
	for (int ll = 0; ll < c->L; ll++) {
		/* Without gradients every layer reuses slot 0 and the residual
		 * stream is updated in place. */
		struct fw_layer_w *w = &m->lw[ll];
		size_t nc = (size_t)N * C;
		int l = a->keep ? ll : 0;
		float *x = a->x + l * nc, *xm = a->keep ? a->xm + l * nc : x;
		float *xn = a->keep ? x + nc : x;
		float *ln1 = a->ln1 + l * nc, *ln2 = a->ln2 + l * nc;
		float *q = a->q + (size_t)l * N * qd, *k = a->k + (size_t)l * N * kd;
		float *v = a->v + (size_t)l * N * kd, *y = a->y + (size_t)l * N * qd;
		float *qr = c->qk_norm ? a->qr + (size_t)l * N * qd : q;
		float *kr = c->qk_norm ? a->kr + (size_t)l * N * kd : k;
		float *gate = a->gate + (size_t)l * N * I, *up = a->up + (size_t)l * N * I;
		float *h = a->h + (size_t)l * N * I;

		fw_dev_rmsnorm_fwd(dev, ln1, a->rs1 + (size_t)l * N, x, w->ln1, N, C, c->eps);
		fw_dev_matmul_fwd(dev, qr, ln1, w->wq, w->bq, N, C, qd);
		fw_dev_matmul_fwd(dev, kr, ln1, w->wk, w->bk, N, C, kd);
		fw_dev_matmul_fwd(dev, v, ln1, w->wv, w->bv, N, C, kd);
		if (c->qk_norm) {
			fw_dev_rmsnorm_fwd(dev, q, a->rsq + (size_t)l * N * nh, qr, w->qn, N * nh, hd, c->eps);
			fw_dev_rmsnorm_fwd(dev, k, a->rsk + (size_t)l * N * nkv, kr, w->kn, N * nkv, hd, c->eps);
		}
		fw_dev_rope_fwd(dev, q, a->pos, m->rope_cos, m->rope_sin, N, nh, hd);
		fw_dev_rope_fwd(dev, k, a->pos, m->rope_cos, m->rope_sin, N, nkv, hd);
		if (a->keep)
			fw_dev_attn_fwd(dev, y, a->att + (size_t)l * fw_dev_attn_floats(dev, B, T, nh), q, k, v, B, T, nh, nkv, hd);
		else
			for (int b = 0; b < B; b++)
				for (int t0 = 0; t0 < T; t0 += NG_ROWS) {
					size_t r = (size_t)b * T + t0;

					/* Sequence b as a cache of length T. */
					fw_dev_attn_cached(dev, y + r * qd, a->att, q + r * qd,
						       k + (size_t)b * T * kd, v + (size_t)b * T * kd,
						       1, T - t0 < NG_ROWS ? T - t0 : NG_ROWS, t0,
						       T, nh, nkv, hd);
				}
		fw_dev_matmul_fwd(dev, a->tmp, y, w->wo, w->bo, N, qd, C);
		fw_dev_add(dev, xm, x, a->tmp, (long)nc);
		fw_dev_rmsnorm_fwd(dev, ln2, a->rs2 + (size_t)l * N, xm, w->ln2, N, C, c->eps);
		fw_dev_matmul_fwd(dev, gate, ln2, w->wg, NULL, N, C, I);
		fw_dev_matmul_fwd(dev, up, ln2, w->wu, NULL, N, C, I);
		fw_dev_swiglu_fwd(dev, h, gate, up, (long)N * I);
		fw_dev_matmul_fwd(dev, a->tmp, h, w->wd, NULL, N, I, C);
		fw_dev_add(dev, xn, xm, a->tmp, (long)nc);
	}
	fw_dev_rmsnorm_fwd(dev, a->xf, a->rsf, a->x + (a->keep ? (size_t)c->L * N * C : 0),
		       m->norm, N, C, c->eps);
	if (!a->keep) {
		for (int r = 0; r < N && targets; r += NG_ROWS) {
			int n = N - r < NG_ROWS ? N - r : NG_ROWS;

			fw_dev_matmul_fwd(dev, a->logits, a->xf + (size_t)r * C, m->lm_head, NULL, n, C, V);
			fw_dev_xent_fwd(dev, a->logp + r, a->lse + r, a->logits, a->targets + r, n, V);
		}
	} else
		fw_dev_matmul_fwd(dev, a->logits, a->xf, m->lm_head, NULL, N, C, V);
	if (!targets)
		return fw_dev_check(dev, err, errlen);
	if (a->keep)
		fw_dev_xent_fwd(dev, a->logp, a->lse, a->logits, a->targets, N, V);
	fw_dev_d2h(dev, a->hlogp, a->logp, sizeof(float) * N);
	if (fw_dev_check(dev, err, errlen))
		return -1;
	double s = 0, wsum = 0;
	for (int i = 0; i < N; i++)
		if (a->htgt[i] >= 0) {
			s += (double)a->hwts[i] * a->hlogp[i];
			wsum += a->hwts[i];
		}
	if (m->soft && m->soft->n) {
		struct fw_soft_buf *b = m->soft;

		if (soft_logp(m, a->logits, a->lse, N, err, errlen))
			return -1;
		for (long i = 0; i < b->n; i++) {
			s += (double)b->w[i] * b->hval[i];
			wsum += b->w[i];
		}
		if (soft->logp)
			memcpy(soft->logp, b->hval, sizeof(float) * b->n);
	}
	a->norm = norm_in > 0 ? norm_in : wsum != 0 ? (float)wsum : 1.0f;
	if (logp)
		memcpy(logp, a->hlogp, sizeof(float) * N);
	if (loss)
		*loss = (float)(-s / a->norm);
	a->ready = a->keep;
	return 0;
}

const float *fw_model_logits(const struct fw_model *m)
{
	struct fw_acts *a = m->acts;
	size_t n;

	if (!a || !a->keep)
		return NULL;
	if (m->dev == FW_DEV_CPU)
		return a->logits;
	n = (size_t)a->B * a->T * m->cfg.vocab;
	if (a->hlogits_n < n) {
		free(a->hlogits);
		a->hlogits_n = 0;
		if (!(a->hlogits = malloc(sizeof(float) * n)))
			return NULL;
		a->hlogits_n = n;
	}
	fw_dev_d2h(m->dev, a->hlogits, a->logits, sizeof(float) * n);
	return fw_dev_check(m->dev, NULL, 0) ? NULL : a->hlogits;
}

static int by_index(const void *x, const void *y)
{
	const int64_t *a = x, *b = y;

	return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1];
}

/*
 * After xent_bwd ran with each soft row's dlogp raised by its soft terms
 * d_i = -w_i / norm (so the softmax part is whole), what is left is
 * onehot: +d_i at (row, tok_i) and -d_i at (row, target).  The 2n entries
 * are sorted by index (ties in the order made) and summed per index, so
 * the scatter sees distinct indices and the sums one fixed order.
 */
static void soft_bwd(struct fw_model *m, float *dlogits, const int32_t *tgt, float norm)
{
	struct fw_soft_buf *b = m->soft;
	long V = m->cfg.vocab, n = 2 * b->n, k = 0;
	int64_t (*p)[2] = b->pair;

	for (long i = 0; i < b->n; i++) {
		float d = -b->w[i] / norm;

		p[2 * i][0] = (int64_t)b->row[i] * V + b->tok[i];
		p[2 * i][1] = 2 * i;
		p[2 * i + 1][0] = (int64_t)b->row[i] * V + tgt[b->row[i]];
		p[2 * i + 1][1] = 2 * i + 1;
		b->pval[2 * i] = d;
		b->pval[2 * i + 1] = -d;
	}
	qsort(p, (size_t)n, sizeof(*p), by_index);
	for (long i = 0; i < n;) {
		int64_t ix = p[i][0];
		float s = 0;

		for (; i < n && p[i][0] == ix; i++)
			s += b->pval[p[i][1]];
		b->hidx[k] = ix;
		b->hval[k++] = s;
	}
	fw_dev_h2d(m->dev, b->didx, b->hidx, sizeof(int64_t) * k);
	fw_dev_h2d(m->dev, b->dval, b->hval, sizeof(float) * k);
	fw_dev_scatter_add(m->dev, dlogits, b->didx, b->dval, k);
}

int fw_model_backward(struct fw_model *m, char *err, size_t errlen)
{
	const struct fw_config *c = &m->cfg;
	struct fw_acts *a = m->acts;
	int B, T, N, C = c->C, I = c->I, V = c->vocab, nh = c->nh,
	    nkv = c->nkv, hd = c->hd, qd = nh * hd, kd = nkv * hd;
	int dev = m->dev;

	if (!a || !a->ready) {
		fw_seterr(err, errlen, m->no_grad ? "backward of a model with no_grad set"
		       : "backward without a forward with targets");
		return -1;
	}
	if (fw_model_grads(m)) {
		fw_seterr(err, errlen, "out of memory for gradients");
		return -1;
	}
	a->ready = 0;
	B = a->B;
	T = a->T;
	N = B * T;
	for (int i = 0; i < N; i++)
		a->hdlogp[i] = a->htgt[i] >= 0 ? -a->hwts[i] / a->norm : 0.0f;
	for (long i = 0; m->soft && i < m->soft->n; i++)
		a->hdlogp[m->soft->row[i]] -= m->soft->w[i] / a->norm;
	fw_dev_h2d(dev, a->dlogp, a->hdlogp, sizeof(float) * N);
	fw_dev_xent_bwd(dev, a->logits, a->logits, a->lse, a->targets, a->dlogp, N, V);
	if (m->soft && m->soft->n)
		soft_bwd(m, a->logits, a->htgt, a->norm);
	fw_dev_zero(dev, a->dln, sizeof(float) * N * C);
	fw_dev_matmul_bwd(dev, a->dln, m->glm_head, NULL, a->logits, a->xf, m->lm_head, N, C, V);
	fw_dev_zero(dev, a->dres, sizeof(float) * N * C);
	fw_dev_rmsnorm_bwd(dev, a->dres, m->gnorm, a->dln, a->x + (size_t)c->L * N * C,
		       m->norm, a->rsf, N, C);
	for (int l = c->L - 1; l >= 0; l--) {
		struct fw_layer_w *w = &m->lw[l], *g = &m->lg[l];
		size_t nc = (size_t)N * C;
		float *x = a->x + l * nc, *xm = a->xm + l * nc;
		float *ln1 = a->ln1 + l * nc, *ln2 = a->ln2 + l * nc;
		float *q = a->q + (size_t)l * N * qd, *k = a->k + (size_t)l * N * kd;
		float *v = a->v + (size_t)l * N * kd, *y = a->y + (size_t)l * N * qd;
		float *gate = a->gate + (size_t)l * N * I, *up = a->up + (size_t)l * N * I;
		float *h = a->h + (size_t)l * N * I;
		float *dq = a->dq, *dk = a->dk;

		fw_dev_zero(dev, a->dh, sizeof(float) * N * I);
		fw_dev_matmul_bwd(dev, a->dh, g->wd, NULL, a->dres, h, w->wd, N, I, C);
		fw_dev_zero(dev, a->dgate, sizeof(float) * N * I);
		fw_dev_zero(dev, a->dup, sizeof(float) * N * I);
		fw_dev_swiglu_bwd(dev, a->dgate, a->dup, a->dh, gate, up, (long)N * I);
		fw_dev_zero(dev, a->dln, sizeof(float) * nc);
		fw_dev_matmul_bwd(dev, a->dln, g->wg, NULL, a->dgate, ln2, w->wg, N, C, I);
		fw_dev_matmul_bwd(dev, a->dln, g->wu, NULL, a->dup, ln2, w->wu, N, C, I);
		fw_dev_rmsnorm_bwd(dev, a->dres, g->ln2, a->dln, xm, w->ln2, a->rs2 + (size_t)l * N, N, C);

		fw_dev_zero(dev, a->dy, sizeof(float) * N * qd);
		fw_dev_matmul_bwd(dev, a->dy, g->wo, g->bo, a->dres, y, w->wo, N, qd, C);
		fw_dev_zero(dev, a->dq, sizeof(float) * N * qd);
		fw_dev_zero(dev, a->dk, sizeof(float) * N * kd);
		fw_dev_zero(dev, a->dv, sizeof(float) * N * kd);
		fw_dev_attn_bwd(dev, a->dq, a->dk, a->dv, a->dscr, a->dy, y,
				a->att + (size_t)l * fw_dev_attn_floats(dev, B, T, nh),
				q, k, v, B, T, nh, nkv, hd);
		fw_dev_rope_bwd(dev, a->dq, a->pos, m->rope_cos, m->rope_sin, N, nh, hd);
		fw_dev_rope_bwd(dev, a->dk, a->pos, m->rope_cos, m->rope_sin, N, nkv, hd);
		if (c->qk_norm) {
			fw_dev_zero(dev, a->dqr, sizeof(float) * N * qd);
			fw_dev_zero(dev, a->dkr, sizeof(float) * N * kd);
			fw_dev_rmsnorm_bwd(dev, a->dqr, g->qn, a->dq, a->qr + (size_t)l * N * qd,
				       w->qn, a->rsq + (size_t)l * N * nh, N * nh, hd);
			fw_dev_rmsnorm_bwd(dev, a->dkr, g->kn, a->dk, a->kr + (size_t)l * N * kd,
				       w->kn, a->rsk + (size_t)l * N * nkv, N * nkv, hd);
			dq = a->dqr;
			dk = a->dkr;
		}
		fw_dev_zero(dev, a->dln, sizeof(float) * nc);
		fw_dev_matmul_bwd(dev, a->dln, g->wq, g->bq, dq, ln1, w->wq, N, C, qd);
		fw_dev_matmul_bwd(dev, a->dln, g->wk, g->bk, dk, ln1, w->wk, N, C, kd);
		fw_dev_matmul_bwd(dev, a->dln, g->wv, g->bv, a->dv, ln1, w->wv, N, C, kd);
		fw_dev_rmsnorm_bwd(dev, a->dres, g->ln1, a->dln, x, w->ln1, a->rs1 + (size_t)l * N, N, C);
	}
	fw_dev_embed_bwd(dev, m->gembed, a->dres, a->tokens, N, C);
	return fw_dev_check(dev, err, errlen);
}

/* ---- optimizer ------------------------------------------------------------------ */

struct fw_opt *fw_opt_new(const struct fw_model *m)
{
	struct fw_opt *o = calloc(1, sizeof(*o));

	size_t nb = sizeof(float) * (size_t)m->nw;

	if (!o)
		return NULL;
	o->nw = m->nw;
	o->dev = m->dev;
	if (o->dev == FW_DEV_CPU) {
		o->mom = calloc((size_t)m->nw, sizeof(float));
		o->var = calloc((size_t)m->nw, sizeof(float));
	} else {
		o->mom = fw_dev_alloc(o->dev, nb);
		o->var = fw_dev_alloc(o->dev, nb);
		if (o->mom && o->var) {
			fw_dev_zero(o->dev, o->mom, nb);
			fw_dev_zero(o->dev, o->var, nb);
		}
	}
	if (!o->mom || !o->var || fw_dev_check(o->dev, NULL, 0)) {
		fw_opt_free(o);
		return NULL;
	}
	return o;
}

void fw_opt_free(struct fw_opt *o)
{
	if (!o)
		return;
	fw_dev_free(o->dev, o->mom);
	fw_dev_free(o->dev, o->var);
	free(o);
}

double fw_opt_step(struct fw_opt *o, struct fw_model *m,
		   const struct fw_adamw_cfg *c)
{
	double norm = sqrt(fw_dev_sumsq(m->dev, m->g, m->nw));

	/* the weights change: a packed copy would be stale */
	fw_model_unpack(m);

	/* As clip_grad_norm_: scale by clip / (norm + 1e-6) when above. */
	if (c->clip > 0 && norm > c->clip)
		fw_dev_scale(m->dev, m->g, (float)(c->clip / (norm + 1e-6)), m->nw);
	o->step++;
	for (int i = 0; i < m->np; i++) {
		const struct fw_param *p = &m->params[i];

		fw_dev_adamw(m->dev, m->w + p->off, o->mom + p->off, o->var + p->off,
			 m->g + p->off, p->n, c->lr, c->b1, c->b2, c->eps,
			 p->ndim == 2 ? c->wd : 0.0f, o->step);
	}
	return norm;
}

int fw_opt_save(const struct fw_opt *o, const struct fw_model *m,
		const char *path, char *err, size_t errlen)
{
	struct fw_st_out *t = calloc(2 * m->np + 1, sizeof(*t));
	char **names = calloc(2 * m->np, sizeof(char *));
	float step = (float)o->step;
	int rc = -1, k = 0;
	const float *mom = o->mom, *var = o->var;
	float *hbuf = NULL;

	if (!t || !names)
		goto oom;
	if (o->dev != FW_DEV_CPU) {
		/* Both moments to the host, for the file. */
		if (!(hbuf = malloc(2 * sizeof(float) * (size_t)o->nw)))
			goto oom;
		fw_dev_d2h(o->dev, hbuf, o->mom, sizeof(float) * (size_t)o->nw);
		fw_dev_d2h(o->dev, hbuf + o->nw, o->var, sizeof(float) * (size_t)o->nw);
		if (fw_dev_check(o->dev, err, errlen))
			goto out;
		mom = hbuf;
		var = hbuf + o->nw;
	}
	for (int i = 0; i < 2 * m->np; i++) {
		const struct fw_param *p = &m->params[i % m->np];

		if (asprintf(&names[i], "%s.%s", i < m->np ? "exp_avg" : "exp_avg_sq",
			     p->name) < 0) {
			names[i] = NULL;
			goto oom;
		}
		t[k++] = (struct fw_st_out){ names[i], p->ndim, { p->shape[0], p->shape[1] },
					     (i < m->np ? mom : var) + p->off };
	}
	t[k++] = (struct fw_st_out){ "step", 1, { 1 }, &step };
	rc = fw_st_write(path, t, k, FW_F32, err, errlen);
	goto out;
oom:
	fw_seterr(err, errlen, "%s: out of memory", path);
out:
	if (names)
		for (int i = 0; i < 2 * m->np; i++)
			free(names[i]);
	free(names);
	free(t);
	free(hbuf);
	return rc;
}

int fw_opt_load(struct fw_opt *o, const struct fw_model *m, const char *path,
		char *err, size_t errlen)
{
	struct fw_st *st = fw_st_open(path, err, errlen);
	const struct fw_st_tensor *t;
	char name[128];
	float step;
	int rc = -1;
	float *mom = o->mom, *var = o->var, *hbuf = NULL;

	if (!st)
		return -1;
	if (o->dev != FW_DEV_CPU) {
		if (!(hbuf = malloc(2 * sizeof(float) * (size_t)o->nw))) {
			fw_seterr(err, errlen, "%s: out of memory", path);
			goto out;
		}
		mom = hbuf;
		var = hbuf + o->nw;
	}
	for (int i = 0; i < 2 * m->np; i++) {
		const struct fw_param *p = &m->params[i % m->np];

		snprintf(name, sizeof(name), "%s.%s", i < m->np ? "exp_avg" : "exp_avg_sq", p->name);
		if (!(t = fw_st_find(st, name)) || t->numel != p->n) {
			fw_seterr(err, errlen, "%s: tensor '%s' is %s", path, name,
			       t ? "misshapen" : "missing");
			goto out;
		}
		if (fw_st_read_f32(st, t, (i < m->np ? mom : var) + p->off, err, errlen))
			goto out;
	}
	if (!(t = fw_st_find(st, "step")) || t->numel != 1 ||
	    fw_st_read_f32(st, t, &step, err, errlen)) {
		fw_seterr(err, errlen, "%s: tensor 'step' is missing or misshapen", path);
		goto out;
	}
	o->step = (long)step;
	rc = 0;
	if (hbuf) {
		fw_dev_h2d(o->dev, o->mom, mom, sizeof(float) * (size_t)o->nw);
		fw_dev_h2d(o->dev, o->var, var, sizeof(float) * (size_t)o->nw);
		rc = fw_dev_check(o->dev, err, errlen);
	}
out:
	free(hbuf);
	fw_st_free(st);
	return rc;
}

/* ---- incremental decoding -------------------------------------------------------- */

#define CHUNK 64 /* prompt rows per prefill pass */

struct fw_gen {
	struct fw_model *m;
	int nseq, maxT, R;         /* R: rows of the row buffers */
	int rows;                  /* rows per fw_gen_score pass */
	float *kc, *vc;            /* (L, nseq, maxT, nkv, hd) */
	float *x, *ln, *q, *k, *v, *y, *tmp, *gate, *up, *h, *rs, *rsq, *rsk;
	float *scr, *last, *logits;
	int32_t *pos;              /* (R) position of each row being run */
	int32_t *idx;              /* (R) rows to gather (last rows, scored rows) */
	int32_t *pos0;             /* (R0) start positions for attention */
	void *block;               /* device memory for all of the above */
	/* Host side: the same slices as pos, idx, logits on the CPU (hblock
	 * then holds only len), copies of their own on a GPU. */
	int32_t *hpos, *hidx;
	float *hlogits;            /* (nseq, V): what fw_gen_logits returns */
	int32_t *len;              /* (nseq) positions each sequence holds */
	void *hblock;
	/* fw_gen_score's scratch, allocated on its first scoring call:
	 * logits (CHUNK, V), log-probs, log-sum-exps and targets (rows),
	 * with host views of slp and stgt */
	float *slog, *slp, *slse;
	int32_t *stgt;
	float *hslp;
	float *hslog, *hslse;      /* GPU: host copies for top-k, or NULL */
	int tk;                    /* top-k wanted by the running fw_gen_score_topk */
	int32_t *tk_ids;           /* its outputs, at the pass's first row */
	float *tk_lp;
	int32_t *hstgt;
	void *sblock, *shblock;
};

void fw_gen_free(struct fw_gen *g)
{
	if (!g)
		return;
	fw_dev_free(g->m->dev, g->block);
	fw_dev_free(g->m->dev, g->sblock);
	free(g->hblock);
	free(g->shblock);
	free(g->hslog);
	free(g->hslse);
	free(g);
}

struct fw_gen *fw_gen_new(struct fw_model *m, int nseq, int maxT, char *err,
			  size_t errlen)
{
	return fw_gen_new_rows(m, nseq, maxT, CHUNK, err, errlen);
}

struct fw_gen *fw_gen_new_rows(struct fw_model *m, int nseq, int maxT,
			       int rows, char *err, size_t errlen)
{
	const struct fw_config *c = &m->cfg;
	struct fw_gen *g;
	size_t R, R0, C = c->C, I = c->I, qd = (size_t)c->nh * c->hd,
	       kd = (size_t)c->nkv * c->hd, off = 0;
	char *base = NULL;

	if (nseq <= 0 || maxT <= 0 || maxT > c->max_pos || rows < 1 ||
	    rows > 4096) {
		fw_seterr(err, errlen, "bad decoding shape: %d sequences of %d "
		       "positions (max_position_embeddings %d), %d rows a pass",
		       nseq, maxT, c->max_pos, rows);
		return NULL;
	}
	if (!(g = calloc(1, sizeof(*g)))) {
		fw_seterr(err, errlen, "out of memory");
		return NULL;
	}
	g->m = m;
	g->nseq = nseq;
	g->maxT = maxT;
	/* the row buffers hold a step of every sequence, a prefill chunk
	 * and a scoring pass; attention runs at most R0 rows at a time */
	R0 = nseq > CHUNK ? nseq : CHUNK;
	g->R = (int)(R = R0 > (size_t)rows ? R0 : (size_t)rows);
	g->rows = rows;
	for (int pass = 0; pass < 2; pass++) {
		off = 0;
		g->kc = carve(base, &off, (size_t)c->L * nseq * maxT * kd);
		g->vc = carve(base, &off, (size_t)c->L * nseq * maxT * kd);
		g->x = carve(base, &off, R * C);
		g->ln = carve(base, &off, R * C);
		g->tmp = carve(base, &off, R * C);
		g->q = carve(base, &off, R * qd);
		g->y = carve(base, &off, R * qd);
		g->k = carve(base, &off, R * kd);
		g->v = carve(base, &off, R * kd);
		g->gate = carve(base, &off, R * I);
		g->up = carve(base, &off, R * I);
		g->h = carve(base, &off, R * I);
		g->rs = carve(base, &off, R);
		g->rsq = carve(base, &off, R * c->nh);
		g->rsk = carve(base, &off, R * c->nkv);
		g->scr = carve(base, &off, R0 * c->nh * (size_t)maxT);
		g->last = carve(base, &off, (size_t)nseq * C);
		g->logits = carve(base, &off, (size_t)nseq * c->vocab);
		g->pos = (int32_t *)carve(base, &off, R);
		g->len = (int32_t *)carve(base, &off, nseq);
		g->idx = (int32_t *)carve(base, &off, R);
		g->pos0 = (int32_t *)carve(base, &off, R0);
		if (!pass && !(base = fw_dev_alloc(m->dev, off))) {
			fw_seterr(err, errlen, "out of %smemory for the decoding state "
			       "(%zu MB)", m->dev ? "device " : "", off >> 20);
			free(g);
			return NULL;
		}
	}
	g->block = base;
	{
		size_t ho = 0;
		char *hb = NULL;
		int gpu = m->dev != FW_DEV_CPU;

		for (int pass = 0; pass < 2; pass++) {
			ho = 0;
			g->len = (int32_t *)carve(hb, &ho, nseq);
			if (gpu) {
				g->hpos = (int32_t *)carve(hb, &ho, R);
				g->hidx = (int32_t *)carve(hb, &ho, R);
				g->hlogits = carve(hb, &ho, (size_t)nseq * c->vocab);
			}
			if (!pass && !(hb = aligned_alloc(64, ho))) {
				fw_seterr(err, errlen, "out of memory for the decoding state");
				fw_dev_free(m->dev, base);
				free(g);
				return NULL;
			}
		}
		g->hblock = hb;
		if (!gpu) {
			g->hpos = g->pos;
			g->hidx = g->idx;
			g->hlogits = g->logits;
		}
	}
	memset(g->len, 0, sizeof(int32_t) * nseq);
	return g;
}

/* A decoding product out (M, N) = inp (M, K) @ w^T + bias: from the
 * packed copy wp where the model has one (the CPU, fw_model_pack), else
 * the device's fw_matmul_fwd. */
static void gen_mm(const struct fw_model *m, float *out, const float *inp,
		   const float *w, const float *wp, const float *bias, int M,
		   int K, int N)
{
	if (wp)
		fw_matmul_fwd_packed(out, inp, w, wp, bias, M, K, N);
	else
		fw_dev_matmul_fwd(m->dev, out, inp, w, bias, M, K, N);
}

/* Runs Tq new tokens (B, Tq) of sequences s0 .. s0+B-1, each b at
 * positions g->len[s0+b].., through the model's layers against the cache,
 * writing their keys and values into it; the last layer's output of each
 * row is left in g->x (B*Tq, C).  Lengths are not advanced here. */
static void gen_layers(struct fw_gen *g, const int32_t *tok, int s0, int B,
		       int Tq)
{
	struct fw_model *m = g->m;
	const struct fw_config *c = &m->cfg;
	int N = B * Tq, C = c->C, I = c->I, nh = c->nh, nkv = c->nkv,
	    hd = c->hd, qd = nh * hd, kd = nkv * hd, T = g->maxT;
	const int32_t *pos0 = g->len + s0;
	int dev = m->dev;

	for (int i = 0; i < N; i++)
		g->hpos[i] = pos0[i / Tq] + i % Tq;
	fw_dev_h2d(dev, g->pos, g->hpos, sizeof(int32_t) * N);
	/* the ids through idx, which is free until gen_head */
	fw_dev_h2d(dev, g->idx, tok, sizeof(int32_t) * N);
	fw_dev_embed_fwd(dev, g->x, g->idx, m->embed, N, C);
	for (int l = 0; l < c->L; l++) {
		struct fw_layer_w *w = &m->lw[l];
		const struct fw_layer_w *pw = m->pk_lw ? &m->pk_lw[l] : NULL;
		float *kc = g->kc + ((size_t)l * g->nseq + s0) * T * kd;
		float *vc = g->vc + ((size_t)l * g->nseq + s0) * T * kd;

		fw_dev_rmsnorm_fwd(dev, g->ln, g->rs, g->x, w->ln1, N, C, c->eps);
		gen_mm(m, g->q, g->ln, w->wq, pw ? pw->wq : NULL, w->bq, N, C, qd);
		gen_mm(m, g->k, g->ln, w->wk, pw ? pw->wk : NULL, w->bk, N, C, kd);
		gen_mm(m, g->v, g->ln, w->wv, pw ? pw->wv : NULL, w->bv, N, C, kd);
		if (c->qk_norm) {
			fw_dev_rmsnorm_fwd(dev, g->q, g->rsq, g->q, w->qn, N * nh, hd, c->eps);
			fw_dev_rmsnorm_fwd(dev, g->k, g->rsk, g->k, w->kn, N * nkv, hd, c->eps);
		}
		fw_dev_rope_fwd(dev, g->q, g->pos, m->rope_cos, m->rope_sin, N, nh, hd);
		fw_dev_rope_fwd(dev, g->k, g->pos, m->rope_cos, m->rope_sin, N, nkv, hd);
		for (int b = 0; b < B; b++) {
			size_t at = ((size_t)b * T + pos0[b]) * kd;

			fw_dev_d2d(dev, kc + at, g->k + (size_t)b * Tq * kd, sizeof(float) * Tq * kd);
			fw_dev_d2d(dev, vc + at, g->v + (size_t)b * Tq * kd, sizeof(float) * Tq * kd);
		}
		if (B > 1 || Tq <= CHUNK) {
			fw_dev_attn_cached_pos(dev, g->y, g->scr, g->q, kc, vc, pos0,
					       g->pos0, B, Tq, T, nh, nkv, hd);
		} else {
			/* one sequence's scoring pass: by CHUNK query rows, so
			 * the scratch stays (CHUNK, nh, maxT) */
			for (int t0 = 0; t0 < Tq; t0 += CHUNK) {
				int32_t p = pos0[0] + t0;

				fw_dev_attn_cached_pos(dev, g->y + (size_t)t0 * qd, g->scr,
						       g->q + (size_t)t0 * qd, kc, vc, &p,
						       g->pos0, 1,
						       Tq - t0 < CHUNK ? Tq - t0 : CHUNK, T,
						       nh, nkv, hd);
			}
		}
		gen_mm(m, g->tmp, g->y, w->wo, pw ? pw->wo : NULL, w->bo, N, qd, C);
		fw_dev_add(dev, g->x, g->x, g->tmp, (long)N * C);
		fw_dev_rmsnorm_fwd(dev, g->ln, g->rs, g->x, w->ln2, N, C, c->eps);
		gen_mm(m, g->gate, g->ln, w->wg, pw ? pw->wg : NULL, NULL, N, C, I);
		gen_mm(m, g->up, g->ln, w->wu, pw ? pw->wu : NULL, NULL, N, C, I);
		fw_dev_swiglu_fwd(dev, g->h, g->gate, g->up, (long)N * I);
		gen_mm(m, g->tmp, g->h, w->wd, pw ? pw->wd : NULL, NULL, N, I, C);
		fw_dev_add(dev, g->x, g->x, g->tmp, (long)N * C);
	}
}

/* After gen_layers: the logits of each sequence's last new row into its
 * row of g->logits. */
static void gen_head(struct fw_gen *g, int s0, int B, int Tq)
{
	struct fw_model *m = g->m;
	const struct fw_config *c = &m->cfg;
	int C = c->C, dev = m->dev;

	/* the last row of each sequence, gathered as an embedding lookup */
	for (int b = 0; b < B; b++)
		g->hidx[b] = b * Tq + Tq - 1;
	fw_dev_h2d(dev, g->idx, g->hidx, sizeof(int32_t) * B);
	fw_dev_embed_fwd(dev, g->last, g->idx, g->x, B, C);
	fw_dev_rmsnorm_fwd(dev, g->last, g->rs, g->last, m->norm, B, C, c->eps);
	gen_mm(m, g->logits + (size_t)s0 * c->vocab, g->last, m->lm_head,
	       m->pk_lm_head, NULL, B, C, c->vocab);
	fw_dev_d2h(dev, g->hlogits + (size_t)s0 * c->vocab,
		   g->logits + (size_t)s0 * c->vocab, sizeof(float) * B * c->vocab);
}

/* gen_layers, then the logits of each sequence's last new token into its
 * row of g->logits. */
static void gen_run(struct fw_gen *g, const int32_t *tok, int s0, int B,
		    int Tq)
{
	gen_layers(g, tok, s0, B, Tq);
	gen_head(g, s0, B, Tq);
}

static int check_ids(const struct fw_model *m, const int32_t *t, int n,
		     char *err, size_t errlen)
{
	for (int i = 0; i < n; i++)
		if (t[i] < 0 || t[i] >= m->cfg.vocab) {
			fw_seterr(err, errlen, "token %d is outside the vocabulary (%d)",
			       t[i], m->cfg.vocab);
			return -1;
		}
	return 0;
}

/* Appends n tokens to sequence s in chunks of the row buffers. */
static void gen_extend(struct fw_gen *g, int s, const int32_t *t, int n)
{
	for (int p = 0; p < n; p += CHUNK) {
		int k = n - p < CHUNK ? n - p : CHUNK;

		gen_run(g, t + p, s, 1, k);
		g->len[s] += k;
	}
}

int fw_gen_prefill(struct fw_gen *g, const int32_t *prompt, int n, char *err,
		   size_t errlen)
{
	const struct fw_config *c = &g->m->cfg;
	size_t kd = (size_t)c->nkv * c->hd, T = g->maxT;

	if (n <= 0 || n > g->maxT) {
		fw_seterr(err, errlen, "prompt of %d tokens (1 to %d fit)", n, g->maxT);
		return -1;
	}
	if (check_ids(g->m, prompt, n, err, errlen))
		return -1;
	g->len[0] = 0;
	gen_extend(g, 0, prompt, n);
	/* Every other sequence starts from the same prefix. */
	for (int l = 0; l < c->L; l++)
		for (int b = 1; b < g->nseq; b++) {
			size_t l0 = (size_t)l * g->nseq * T * kd, at = l0 + (size_t)b * T * kd;

			fw_dev_d2d(g->m->dev, g->kc + at, g->kc + l0, sizeof(float) * n * kd);
			fw_dev_d2d(g->m->dev, g->vc + at, g->vc + l0, sizeof(float) * n * kd);
		}
	for (int b = 1; b < g->nseq; b++) {
		memcpy(g->hlogits + (size_t)b * c->vocab, g->hlogits,
		       sizeof(float) * c->vocab);
		g->len[b] = n;
	}
	return fw_dev_check(g->m->dev, err, errlen);
}

int fw_gen_append(struct fw_gen *g, int seq, const int32_t *tok, int n,
		  char *err, size_t errlen)
{
	if (seq < 0 || seq >= g->nseq || n <= 0) {
		fw_seterr(err, errlen, "bad append: sequence %d of %d, %d tokens",
		       seq, g->nseq, n);
		return -1;
	}
	if (g->len[seq] <= 0 || g->len[seq] + n > g->maxT) {
		fw_seterr(err, errlen, g->len[seq] ? "%d more tokens do not fit the "
		       "cache (%d positions)" : "append of %d tokens before prefill "
		       "(%d positions)", n, g->maxT);
		return -1;
	}
	if (check_ids(g->m, tok, n, err, errlen))
		return -1;
	gen_extend(g, seq, tok, n);
	return fw_dev_check(g->m->dev, err, errlen);
}

int fw_gen_step(struct fw_gen *g, const int32_t *tok, char *err,
		size_t errlen)
{
	for (int b = 0; b < g->nseq; b++)
		if (g->len[b] <= 0 || g->len[b] >= g->maxT) {
			fw_seterr(err, errlen, g->len[b] ? "the cache is full (%d positions)"
			       : "step before prefill (%d)", g->maxT);
			return -1;
		}
	if (check_ids(g->m, tok, g->nseq, err, errlen))
		return -1;
	gen_run(g, tok, 0, g->nseq, 1);
	for (int b = 0; b < g->nseq; b++)
		g->len[b]++;
	return fw_dev_check(g->m->dev, err, errlen);
}

/* The K largest of x (V), largest first, ties to the lower id: ids, and
 * x - lse into lp. */
static void top_k(const float *x, int V, float lse, int K, int32_t *ids, float *lp)
{
	int n = 0;

	for (int j = 0; j < V; j++) {
		if (n == K && x[j] <= lp[K - 1])
			continue;
		int at = n < K ? n++ : K - 1;

		while (at > 0 && lp[at - 1] < x[j]) {
			lp[at] = lp[at - 1];
			ids[at] = ids[at - 1];
			at--;
		}
		lp[at] = x[j];
		ids[at] = j;
	}
	for (int i = 0; i < n; i++)
		lp[i] -= lse;
	for (int i = n; i < K; i++) {
		ids[i] = -1;
		lp[i] = -INFINITY;
	}
}

/* The top-k of scored rows r0..r0+k2 of the pass (the chunk in g->slog):
 * into the rows of g->tk_ids / g->tk_lp that g->hidx names. */
static void top_rows(struct fw_gen *g, int r0, int k2)
{
	int V = g->m->cfg.vocab, K = g->tk, dev = g->m->dev;
	const float *x = g->slog, *lse = g->slse + r0;

	if (dev != FW_DEV_CPU) {
		fw_dev_d2h(dev, g->hslog, g->slog, sizeof(float) * (size_t)k2 * V);
		fw_dev_d2h(dev, g->hslse, g->slse + r0, sizeof(float) * k2);
		if (fw_dev_check(dev, NULL, 0))
			return; /* fw_gen_score's own check reports it */
		x = g->hslog;
		lse = g->hslse;
	}
	for (int i = 0; i < k2; i++) {
		size_t row = (size_t)g->hidx[r0 + i] * K;

		top_k(x + (size_t)i * V, V, lse[i], K, g->tk_ids + row, g->tk_lp + row);
	}
}

/* After gen_layers over k rows of one sequence: logp[i] = log p(tgt[i])
 * under row i's logits where tgt[i] >= 0, else 0.  Only the scored rows go
 * through the final norm and lm_head. */
static void gen_score_rows(struct fw_gen *g, const int32_t *tgt, int k,
			   float *logp)
{
	struct fw_model *m = g->m;
	const struct fw_config *c = &m->cfg;
	int C = c->C, V = c->vocab, n = 0, dev = m->dev;

	for (int i = 0; i < k; i++) {
		logp[i] = 0;
		if (tgt[i] < 0)
			continue;
		g->hidx[n] = i;
		g->hstgt[n++] = tgt[i];
	}
	if (!n)
		return;
	/* the scored rows gathered as an embedding lookup of g->x */
	fw_dev_h2d(dev, g->idx, g->hidx, sizeof(int32_t) * n);
	fw_dev_h2d(dev, g->stgt, g->hstgt, sizeof(int32_t) * n);
	fw_dev_embed_fwd(dev, g->ln, g->idx, g->x, n, C);
	fw_dev_rmsnorm_fwd(dev, g->ln, g->rs, g->ln, m->norm, n, C, c->eps);
	/* CHUNK rows of logits at a time, as a no_grad forward goes */
	for (int r = 0; r < n; r += CHUNK) {
		int k2 = n - r < CHUNK ? n - r : CHUNK;

		gen_mm(m, g->slog, g->ln + (size_t)r * C, m->lm_head,
		       m->pk_lm_head, NULL, k2, C, V);
		fw_dev_xent_fwd(dev, g->slp + r, g->slse + r, g->slog, g->stgt + r, k2, V);
		if (g->tk > 0)
			top_rows(g, r, k2);
	}
	fw_dev_d2h(dev, g->hslp, g->slp, sizeof(float) * n);
	n = 0;
	for (int i = 0; i < k; i++)
		if (tgt[i] >= 0)
			logp[i] = g->hslp[n++];
}

int fw_gen_score(struct fw_gen *g, int seq, const int32_t *tok,
		 const int32_t *tgt, int n, float *logp, char *err,
		 size_t errlen)
{
	return fw_gen_score_topk(g, seq, tok, tgt, n, logp, 0, NULL, NULL, err, errlen);
}

int fw_gen_score_topk(struct fw_gen *g, int seq, const int32_t *tok, const int32_t *tgt,
		      int n, float *logp, int K, int32_t *tk_ids, float *tk_lp, char *err,
		      size_t errlen)
{
	int V = g->m->cfg.vocab;

	if (seq < 0 || seq >= g->nseq || n <= 0 || !tgt != !logp) {
		fw_seterr(err, errlen, "bad score: sequence %d of %d, %d tokens%s",
		       seq, g->nseq, n, !tgt != !logp ? ", targets without "
		       "log-probs or log-probs without targets" : "");
		return -1;
	}
	if (g->len[seq] + n > g->maxT) {
		fw_seterr(err, errlen, "%d more tokens do not fit the cache (%d of "
		       "%d positions held)", n, g->len[seq], g->maxT);
		return -1;
	}
	if (check_ids(g->m, tok, n, err, errlen))
		return -1;
	for (int i = 0; tgt && i < n; i++)
		if (tgt[i] >= V) {
			fw_seterr(err, errlen, "target %d at %d is outside the "
			       "vocabulary (%d)", tgt[i], i, V);
			return -1;
		}
	if (tgt && !g->sblock) {
		size_t off = 0;
		char *base = NULL;

		for (int pass = 0; pass < 2; pass++) {
			off = 0;
			g->slog = carve(base, &off, (size_t)CHUNK * V);
			g->slp = carve(base, &off, g->rows);
			g->slse = carve(base, &off, g->rows);
			g->stgt = (int32_t *)carve(base, &off, g->rows);
			if (!pass && !(base = fw_dev_alloc(g->m->dev, off))) {
				fw_seterr(err, errlen, "out of memory for the scoring "
				       "scratch (%zu MB)", off >> 20);
				return -1;
			}
		}
		g->sblock = base;
		if (g->m->dev == FW_DEV_CPU) {
			g->hslp = g->slp;
			g->hstgt = g->stgt;
		} else {
			char *hb = malloc((sizeof(float) + sizeof(int32_t)) * g->rows);

			if (!hb) {
				fw_seterr(err, errlen, "out of memory for the scoring scratch");
				return -1;
			}
			g->shblock = hb;
			g->hslp = (float *)hb;
			g->hstgt = (int32_t *)(hb + sizeof(float) * g->rows);
		}
	}
	if (K > 0 && tgt) {
		if (K > V || !tk_ids || !tk_lp) {
			fw_seterr(err, errlen, "top-%d of a vocabulary of %d", K, V);
			return -1;
		}
		if (g->m->dev != FW_DEV_CPU && !g->hslog &&
		    (!(g->hslog = malloc(sizeof(float) * (size_t)CHUNK * V)) ||
		     !(g->hslse = malloc(sizeof(float) * CHUNK)))) {
			fw_seterr(err, errlen, "out of memory for the top-k scratch");
			return -1;
		}
	}
	g->tk = tgt && K > 0 ? K : 0;
	for (int p = 0; p < n; p += g->rows) {
		int k = n - p < g->rows ? n - p : g->rows;

		gen_layers(g, tok + p, seq, 1, k);
		g->tk_ids = g->tk ? tk_ids + (size_t)p * K : NULL;
		g->tk_lp = g->tk ? tk_lp + (size_t)p * K : NULL;
		if (tgt)
			gen_score_rows(g, tgt + p, k, logp + p);
		if (p + k == n)
			gen_head(g, seq, 1, k);
		g->len[seq] += k;
	}
	return fw_dev_check(g->m->dev, err, errlen);
}

int fw_gen_truncate(struct fw_gen *g, int seq, int n, char *err,
		    size_t errlen)
{
	if (seq < 0 || seq >= g->nseq || n < 0 || n > g->len[seq]) {
		fw_seterr(err, errlen, "bad truncate: sequence %d of %d to %d "
		       "positions", seq, g->nseq, n);
		return -1;
	}
	g->len[seq] = n;
	return 0;
}

const float *fw_gen_logits(const struct fw_gen *g)
{
	return g->hlogits;
}

int fw_gen_len(const struct fw_gen *g, int seq)
{
	return seq >= 0 && seq < g->nseq ? g->len[seq] : -1;
}

int fw_gen_step_first(struct fw_gen *g, int B, const int32_t *tok, char *err,
		      size_t errlen)
{
	if (B < 1 || B > g->nseq) {
		fw_seterr(err, errlen, "bad step: %d of %d sequences", B, g->nseq);
		return -1;
	}
	for (int b = 0; b < B; b++)
		if (g->len[b] <= 0 || g->len[b] >= g->maxT) {
			fw_seterr(err, errlen, g->len[b] ? "the cache of sequence %d is full "
			       "(%d positions)" : "sequence %d stepped before prefill (%d)",
			       b, g->maxT);
			return -1;
		}
	if (check_ids(g->m, tok, B, err, errlen))
		return -1;
	gen_run(g, tok, 0, B, 1);
	for (int b = 0; b < B; b++)
		g->len[b]++;
	return fw_dev_check(g->m->dev, err, errlen);
}

int fw_gen_copy(struct fw_gen *g, int from, int to, char *err, size_t errlen)
{
	const struct fw_config *c = &g->m->cfg;
	size_t kd = (size_t)c->nkv * c->hd, T = g->maxT;
	int dev = g->m->dev;

	if (from < 0 || from >= g->nseq || to < 0 || to >= g->nseq) {
		fw_seterr(err, errlen, "bad copy: sequence %d to %d of %d", from, to, g->nseq);
		return -1;
	}
	if (from == to)
		return 0;
	/* the cache and logits are device memory on a GPU; the host copy
	 * of the logits (fw_gen_logits) is a buffer of its own there */
	for (int l = 0; l < c->L; l++) {
		size_t l0 = (size_t)l * g->nseq * T * kd;

		fw_dev_d2d(dev, g->kc + l0 + (size_t)to * T * kd,
			   g->kc + l0 + (size_t)from * T * kd, sizeof(float) * g->len[from] * kd);
		fw_dev_d2d(dev, g->vc + l0 + (size_t)to * T * kd,
			   g->vc + l0 + (size_t)from * T * kd, sizeof(float) * g->len[from] * kd);
	}
	fw_dev_d2d(dev, g->logits + (size_t)to * c->vocab, g->logits + (size_t)from * c->vocab,
		   sizeof(float) * c->vocab);
	if (g->hlogits != g->logits)
		memcpy(g->hlogits + (size_t)to * c->vocab, g->hlogits + (size_t)from * c->vocab,
		       sizeof(float) * c->vocab);
	g->len[to] = g->len[from];
	return fw_dev_check(dev, err, errlen);
}
