/*
 * fw_model.h — the decoder-only transformer (Llama / Qwen2 / Qwen3 family):
 * Hugging Face config.json and safetensors in and out, fresh random init,
 * batched forward with per-token log-probs and a weighted loss, backward
 * into gradients, and incremental decoding with a key-value cache.
 *
 * Architecture: token embedding; L blocks of x += o_proj(attn(rope(q), rope(k), v))
 * over RMSNorm(x), then x += down(silu(gate(h)) * up(h)) over RMSNorm(x);
 * a final RMSNorm and lm_head (or the embedding, when tied).  Qwen2 adds
 * q/k/v biases, Qwen3 an RMSNorm over each q and k head before RoPE.
 * Weights are held in f32 whatever the file's dtype.
 *
 * Memory: parameters and gradients are one flat buffer each; activations
 * are laid out for a batch shape (B, T) on the first forward of that shape
 * and reused while it stays; a new shape is laid out again in the same
 * allocation when it fits, so a caller that varies its shapes allocates
 * once for the largest.  Decoding state (struct
 * fw_gen) is allocated once per (sequences, max length).  Nothing is
 * allocated per token.
 *
 * Device: a model lives where fw_dev_select() (kernels_dev.h) said when
 * it was made: the CPU, or a CUDA GPU with weights, gradients,
 * activations, optimizer state and the decoding cache in device memory.
 * The same code runs on both; what crosses to the host is the ids in,
 * the log-probs and logits out, and the weights at save.
 *
 * Threading: one model is used by one thread at a time, except that
 * decoding states (struct fw_gen) of the same model may run in several
 * threads at once, one thread per state: decoding only reads the model
 * (weights, rope tables, config) and writes its own state.  Nothing may
 * change the model meanwhile.  The kernels use the pool of kernels.h
 * inside each call.
 */
#ifndef FW_MODEL_H
#define FW_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "fw_safetensors.h"

enum fw_arch { FW_ARCH_LLAMA, FW_ARCH_QWEN2, FW_ARCH_QWEN3 };
enum { FW_ROPE_DEFAULT, FW_ROPE_LINEAR, FW_ROPE_LLAMA3 };

/* What config.json says, in the units the model uses. */
struct fw_config {
	enum fw_arch arch;
	char arch_name[48];   /* "LlamaForCausalLM", ... */
	int vocab;            /* vocab_size */
	int C;                /* hidden_size */
	int I;                /* intermediate_size */
	int L;                /* num_hidden_layers */
	int nh;               /* num_attention_heads */
	int nkv;              /* num_key_value_heads (default nh) */
	int hd;               /* head_dim (default C / nh) */
	int max_pos;          /* max_position_embeddings */
	double rope_theta;    /* rope_theta (default 10000) */
	int rope_type;        /* rope_scaling: FW_ROPE_DEFAULT, _LINEAR, _LLAMA3 */
	double rope_factor;   /* rope_scaling.factor */
	double rope_low, rope_high; /* low_freq_factor, high_freq_factor (llama3) */
	int rope_orig_max;    /* original_max_position_embeddings (llama3) */
	float eps;            /* rms_norm_eps */
	int tied;             /* tie_word_embeddings */
	int qkv_bias;         /* q/k/v projections have biases (Qwen2, Llama attention_bias) */
	int o_bias;           /* o_proj has a bias (Llama attention_bias) */
	int qk_norm;          /* per-head RMSNorm of q and k (Qwen3) */
	float init_range;     /* initializer_range (default 0.02) */
	int bos, eos;         /* bos_token_id, eos_token_id, -1 when absent */
	char dtype[16];       /* torch_dtype as written ("float32" default) */
};

/* Reads a Hugging Face config.json.  Returns 0, or -1 with err ("PATH:
 * reason") naming what is missing, malformed or unsupported (architecture,
 * a rope_scaling other than "linear" or "llama3", sliding window, mlp_bias). */
int fw_config_load(struct fw_config *c, const char *path, char *err,
		   size_t errlen);

/* As fw_config_load, from a JSON text of len bytes; name is used in
 * errors. */
int fw_config_parse(struct fw_config *c, const char *json, size_t len,
		    const char *name, char *err, size_t errlen);

/* Writes c as a Hugging Face config.json at path (temp file, renamed).
 * dtype, when not NULL, replaces torch_dtype.  Returns 0, or -1 with err
 * filled. */
int fw_config_save(const struct fw_config *c, const char *path,
		   const char *dtype, char *err, size_t errlen);

/* Fills inv_freq (hd/2) with the RoPE frequencies c implies:
 * theta^(-2i/hd), then rescaled as its rope_scaling says.  Cannot fail. */
void fw_config_rope_freqs(const struct fw_config *c, float *inv_freq);

/* One named parameter tensor, a view into the flat buffer. */
struct fw_param {
	char name[96];        /* Hugging Face name, "model.layers.0.mlp.up_proj.weight" */
	int ndim;             /* 1 or 2 */
	int shape[2];
	long off;             /* offset in floats into w (and g) */
	long n;               /* number of floats */
};

struct fw_layer_w {
	float *ln1, *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo, *qn, *kn;
	float *ln2, *wg, *wu, *wd;
};

struct fw_acts;
struct fw_soft_buf;

struct fw_model {
	struct fw_config cfg;
	int dev;                   /* FW_DEV_CPU or FW_DEV_CUDA (kernels_dev.h):
				    * where w, g, the views, the rope tables,
				    * the activations and the optimizer state
				    * live; set at load or creation from
				    * fw_dev_current() */
	int np;                    /* number of parameter tensors */
	struct fw_param *params;   /* np entries, in file order */
	long nw;                   /* floats in w */
	float *w;                  /* all parameters (device memory of dev) */
	float *g;                  /* their gradients, NULL until fw_model_grads() */
	float *hw;                 /* on a GPU: host copy of w as of the last
				    * fw_model_host_w(); NULL on the CPU */
	struct fw_layer_w *lw, *lg;/* per-layer views into w and g (L each) */
	float *embed, *norm, *lm_head;     /* lm_head == embed when tied */
	float *gembed, *gnorm, *glm_head;
	float *rope_cos, *rope_sin;        /* (max_pos, hd/2) */
	struct fw_acts *acts;              /* planned activations, or NULL */
	struct fw_soft_buf *soft;          /* the last forward's soft targets, or NULL */
	char *cfg_json;            /* config.json as loaded (NULL for fw_model_new) */
	size_t cfg_json_len;
	float *pk;                 /* fw_model_pack's copy of the matrices,
				    * or NULL; pk_lw (L) and pk_lm_head are
				    * views into it (only the matrices of
				    * pk_lw are set) */
	struct fw_layer_w *pk_lw;
	float *pk_lm_head;
	int no_grad;               /* set by the caller for scoring: forward
				    * keeps one layer's activations, goes
				    * through attention and logits in chunks
				    * of rows (memory linear in T), keeps no
				    * logits; backward is refused */
};

/* A fresh model for config c with weights drawn as Hugging Face initialises
 * them (normal(0, initializer_range) for matrices, ones for norms, zero
 * biases) from seed.  The same (c, seed) gives the same weights.  Returns
 * a model (fw_model_free), or NULL with err filled. */
struct fw_model *fw_model_new(const struct fw_config *c, uint64_t seed,
			      char *err, size_t errlen);

/* Loads DIR/config.json and DIR/model.safetensors (or every
 * model-*.safetensors shard of DIR/model.safetensors.index.json).  Every
 * expected tensor must be present with the shape the config implies, in
 * F32, BF16 or F16.  Returns a model (fw_model_free), or NULL with err
 * naming the file and tensor at fault. */
struct fw_model *fw_model_load(const char *dir, char *err, size_t errlen);

/* Writes config.json and model.safetensors (dtype F32, BF16 or F16) into
 * the existing directory dir, each via a temp file synced and renamed.  A loaded
 * model writes back its own config.json with every field kept and only
 * torch_dtype changed; a fresh one writes the fields fw_config knows.  Tied
 * models do not write lm_head.weight.  Returns 0, or -1 with err filled. */
int fw_model_save(const struct fw_model *m, const char *dir,
		  enum fw_dtype dtype, char *err, size_t errlen);

/* Frees the model and everything it owns.  fw_model_free(NULL) does
 * nothing. */
void fw_model_free(struct fw_model *m);

/* Host pointer to the model's current weights (nw floats, laid out as
 * w): w itself on the CPU; on a GPU w copied into hw.  Valid until the
 * next call that changes the weights.  Returns NULL when the copy fails
 * (err filled). */
const float *fw_model_host_w(const struct fw_model *m, char *err,
			     size_t errlen);

/* Packs every layer's projection matrices and lm_head once, for the
 * few-row CPU kernel (fw_matmul_fwd_packed, AVX-512) that the decoding
 * state's products (fw_gen_*) then run on instead of OpenBLAS: a second
 * copy of those weights in m->pk, about as large as them.  The copy is
 * only valid while m->w does not change: fw_opt_step and fw_model_free
 * drop it (fw_model_unpack), so a model trained after packing decodes
 * from its current weights, the sgemm way; any other code that writes
 * m->w must call fw_model_unpack first.  fw_builtin_load packs the
 * policies it loads (serve, rollout and teach only decode).  Does nothing on a GPU model, where
 * fw_matmul_pack_ok() says no (no AVX-512F, or FW_MATMUL_PACK=0), or when
 * already packed.  Returns 0, or -1 when out of memory (err filled; the
 * model decodes unpacked).  fw_model_unpack frees the copy; a model not
 * packed is left alone. */
int fw_model_pack(struct fw_model *m, char *err, size_t errlen);
void fw_model_unpack(struct fw_model *m);

/* Sum of squares of the gradients (double), and 1 when every weight is
 * finite (0 when one is not, or the device failed), wherever they live. */
double fw_model_grad_sumsq(const struct fw_model *m);
int fw_model_weights_finite(const struct fw_model *m);

/* Returns the parameter called name, or NULL. */
const struct fw_param *fw_model_param(const struct fw_model *m,
				      const char *name);

/* Allocates the gradient buffer g (zeroed) if it is not yet there.
 * Returns 0, or -1 when out of memory. */
int fw_model_grads(struct fw_model *m);

/* Sets every gradient to zero (backward accumulates).  Needs g. */
void fw_model_zero_grad(struct fw_model *m);

/*
 * Forward over a batch.  tokens (B, T) are input ids; targets (B, T) the
 * ids to score at each position (usually tokens shifted by one), < 0 to
 * ignore a position, or NULL for no scoring; weights (B, T) per-token loss
 * weights or NULL for 1.  Writes, when not NULL: logp (B, T) the log-prob
 * of each target (0 where ignored), and *loss = -sum(w * logp) / norm with
 * norm = sum of w over scored positions when norm_in <= 0 (a weighted
 * mean), else norm_in.  Activations are kept for fw_model_backward().
 * Returns 0, or -1 with err filled (an id out of range, T beyond
 * max_position_embeddings, out of memory).
 */
int fw_model_forward(struct fw_model *m, const int32_t *tokens,
		     const int32_t *targets, const float *weights, int B,
		     int T, float norm_in, float *logp, float *loss,
		     char *err, size_t errlen);

/*
 * Soft targets: n more scored (position, token, weight) triples on top of
 * a forward's targets, for a loss against a distribution rather than one
 * token (a teacher's top tokens at a position).  row[i] indexes the (B, T)
 * positions and must be one with a target >= 0; tok[i] is any id; w[i]
 * its weight.  The loss becomes -(sum w logp + sum w[i] logp[i]) / norm,
 * with logp[i] = log p(tok[i] at row[i]) written to logp (n) when it is not
 * NULL, norm counting the soft weights too when norm_in <= 0; backward
 * takes its gradient: at row r, sum_i w[i] (softmax(r) - onehot(tok[i])) /
 * norm added to the targets' own.  The triples are copied.
 */
struct fw_soft {
	long n;
	const int32_t *row, *tok;
	const float *w;
	float *logp;
};

/*
 * As fw_model_forward, with soft targets (NULL or n = 0: none).  Soft
 * targets need a model with gradients (not no_grad).  Returns 0, or -1 with
 * err filled (as fw_model_forward; a soft target at a position without a
 * target, or outside the batch or the vocabulary; no_grad set).
 */
int fw_model_forward_soft(struct fw_model *m, const int32_t *tokens,
			  const int32_t *targets, const float *weights, int B,
			  int T, float norm_in, float *logp, float *loss,
			  const struct fw_soft *soft, char *err, size_t errlen);

/* Logits (B*T, V) of the last fw_model_forward, or NULL (none yet, or a
 * no_grad forward, or a failed copy from the GPU), in host memory.  Valid
 * until the next forward or backward (backward overwrites them). */
const float *fw_model_logits(const struct fw_model *m);

/* Backward of the last fw_model_forward (which had targets): ADDS the
 * gradient of its loss to m->g (allocated by fw_model_grads() if needed).
 * Returns 0, or -1 with err filled. */
int fw_model_backward(struct fw_model *m, char *err, size_t errlen);

/* Bytes the current activation layout uses (0 before the first forward;
 * the allocation may be larger, from an earlier larger shape). */
size_t fw_model_act_bytes(const struct fw_model *m);

/* ---- optimizer ----------------------------------------------------------------- */

/* AdamW settings (torch.optim.AdamW's meaning). */
struct fw_adamw_cfg {
	float lr, b1, b2, eps;
	float wd;     /* weight decay, applied to matrices and embeddings only,
		       * not to norm weights or biases */
	float clip;   /* clip the global gradient norm to this; <= 0: no clip */
};

/* AdamW state for a model: first and second moments (one float each per
 * parameter) and the step count. */
struct fw_opt {
	int dev;      /* where mom and var live: the model's device */
	float *mom, *var;
	long nw;
	long step;
};

/* New zeroed optimizer state for m.  Returns it (fw_opt_free), or NULL
 * when out of memory. */
struct fw_opt *fw_opt_new(const struct fw_model *m);

/* Frees o.  fw_opt_free(NULL) does nothing. */
void fw_opt_free(struct fw_opt *o);

/* One optimizer step from the gradients in m->g: scales them so their
 * global L2 norm is at most c->clip (torch.nn.utils.clip_grad_norm_), then
 * updates m->w with AdamW, per parameter tensor.  Gradients are left
 * scaled, not zeroed.  Returns the global gradient norm before clipping;
 * cannot fail (m->g must exist). */
double fw_opt_step(struct fw_opt *o, struct fw_model *m,
		   const struct fw_adamw_cfg *c);

/* Writes o to path as safetensors: "exp_avg.NAME" and "exp_avg_sq.NAME"
 * (f32, shaped as each parameter of m) and "step" (one f32).  Temp file,
 * renamed.  Returns 0, or -1 with err filled. */
int fw_opt_save(const struct fw_opt *o, const struct fw_model *m,
		const char *path, char *err, size_t errlen);

/* Reads what fw_opt_save wrote into o, for model m.  Returns 0, or -1
 * with err naming the file and the tensor missing or misshapen. */
int fw_opt_load(struct fw_opt *o, const struct fw_model *m, const char *path,
		char *err, size_t errlen);

/* ---- incremental decoding ------------------------------------------------- */

struct fw_gen;

/* Decoding state for nseq sequences of up to maxT positions (maxT <=
 * max_position_embeddings): key-value cache and every buffer a step needs.
 * Every sequence starts empty.  The model must outlive it.  Returns a state (fw_gen_free), or NULL with
 * err filled. */
struct fw_gen *fw_gen_new(struct fw_model *m, int nseq, int maxT, char *err,
			  size_t errlen);

/* As fw_gen_new, with fw_gen_score running rows positions a pass (1 to
 * 4096; fw_gen_new: 64): more rows, fewer and larger kernel calls, row
 * buffers of rows * (3 hidden + 2 query + 2 key + 3 intermediate) floats.
 * Attention still goes 64 query rows at a time, so the scratch does not
 * grow with rows.  Prefill, append and step run as under fw_gen_new. */
struct fw_gen *fw_gen_new_rows(struct fw_model *m, int nseq, int maxT,
			       int rows, char *err, size_t errlen);

/* Frees g.  fw_gen_free(NULL) does nothing. */
void fw_gen_free(struct fw_gen *g);

/* Runs the prompt (n ids) once and gives every sequence that prefix:
 * positions 0 .. n-1 of the cache, and the logits of the prompt's last
 * position (fw_gen_logits) for each sequence.  Resets earlier state.
 * Returns 0, or -1 with err filled (empty prompt, n > maxT, bad id). */
int fw_gen_prefill(struct fw_gen *g, const int32_t *prompt, int n,
		   char *err, size_t errlen);

/* Appends one token to each sequence (tok has nseq ids; the sequences may
 * have different lengths) and computes each one's next logits.  Returns 0,
 * or -1 with err filled (a cache full, bad id). */
int fw_gen_step(struct fw_gen *g, const int32_t *tok, char *err,
		size_t errlen);

/* Appends n tokens to sequence seq alone (a tool's output in an agent
 * turn, say) and computes its next logits (its row of fw_gen_logits); the
 * other sequences are untouched.  Returns 0, or -1 with err filled (before
 * prefill, not enough room, bad id). */
int fw_gen_append(struct fw_gen *g, int seq, const int32_t *tok, int n,
		  char *err, size_t errlen);

/*
 * Appends n tokens tok to sequence seq alone and scores them: logp[i] =
 * log p(tgt[i] | the sequence through tok[i]) for each i with tgt[i] >= 0,
 * 0 where tgt[i] < 0; tgt and logp are (n).  Only the scored rows and the
 * last one go through lm_head.  tgt and logp may both be NULL: the tokens
 * only fill the cache (a prefix to branch from).  Unlike fw_gen_append, seq may be empty (fresh from fw_gen_new, or
 * truncated to 0): its tokens then start at position 0.  The tokens run
 * in passes of the state's rows (fw_gen_new_rows) counted from the
 * sequence's length at the call, so the same call on the same cache gives
 * the same bits.  Afterwards seq's row of fw_gen_logits holds its next
 * logits, as after fw_gen_append.  The first call with tgt allocates a
 * (64, V) scratch kept in g.  Returns 0, or -1
 * with err filled (no such seq, n <= 0, not enough room, bad id or target,
 * out of memory).
 */
int fw_gen_score(struct fw_gen *g, int seq, const int32_t *tok,
		 const int32_t *tgt, int n, float *logp, char *err,
		 size_t errlen);

/*
 * As fw_gen_score, and for each scored row i (tgt[i] >= 0) also the K
 * most likely next tokens under its logits, most likely first (ties: the
 * lower id): tk_ids[i*K + j] and their log-probs tk_lp[i*K + j], both
 * (n * K); rows not scored are left as they were.  K = 0: none (as
 * fw_gen_score).  On a GPU each pass's logits come to the host for it.
 * Returns as fw_gen_score (also -1 for K beyond the vocabulary).
 */
int fw_gen_score_topk(struct fw_gen *g, int seq, const int32_t *tok, const int32_t *tgt,
		      int n, float *logp, int K, int32_t *tk_ids, float *tk_lp, char *err,
		      size_t errlen);

/* Sets sequence seq back to its first n positions (0 <= n <= its length),
 * a branch point: the next fw_gen_score or fw_gen_append continues from
 * position n and overwrites what the cache held beyond it.  seq's row of
 * fw_gen_logits is stale until then.  Returns 0, or -1 with err filled (no
 * such seq, n out of range). */
int fw_gen_truncate(struct fw_gen *g, int seq, int n, char *err,
		    size_t errlen);

/* Logits (nseq, V) for the next position of each sequence. */
const float *fw_gen_logits(const struct fw_gen *g);

/* Number of positions sequence seq holds so far (-1 for no such seq). */
int fw_gen_len(const struct fw_gen *g, int seq);

/* As fw_gen_step, over the first B sequences only (1 <= B <= nseq; tok has
 * B ids): a batch whose live sequences are kept at the front, as a server
 * that decodes requests together keeps them.  Sequences B.. are untouched.
 * Returns 0, or -1 with err filled (a cache full, a sequence empty, bad
 * id, a device error). */
int fw_gen_step_first(struct fw_gen *g, int B, const int32_t *tok, char *err,
		      size_t errlen);

/* Makes sequence to a copy of sequence from: its cached positions, length
 * and row of fw_gen_logits (a prompt prefilled once for several samples,
 * or a live sequence moved to the front of the batch), on the model's
 * device.  Returns 0, or -1 with err filled (no such sequence, a device
 * error). */
int fw_gen_copy(struct fw_gen *g, int from, int to, char *err, size_t errlen);

/* Sampling settings: temp 0 means greedy; top_k 0 and top_p >= 1 mean no
 * truncation. */
struct fw_sampler {
	float temp;
	float top_p;
	int top_k;
};

/* Draws a token from logits (V) under s, using and advancing *rng (any
 * nonzero seed; same seed, same draws).  scratch holds 2*V floats.  When
 * logp is not NULL it receives the log-prob of the drawn token under the
 * model itself (temperature 1, no truncation), the number training
 * recomputes.  Returns the token id; cannot fail. */
int32_t fw_sample(const float *logits, int V, const struct fw_sampler *s,
		  uint64_t *rng, float *scratch, float *logp);

/* The uniform in [0, 1) fw_sample draws with, from and advancing *rng
 * (xorshift64*: 53 bits of a multiple of 2^-53). */
double fw_sample_u01(uint64_t *rng);

/*
 * Draws count continuations of prompt (n >= 1 ids) under s, on one state
 * of count sequences: each token of each continuation from one stream of
 * draws seeded by seed (the same seed, the same continuations), a
 * continuation ending at the id eos (not kept; eos < 0: none) or after len
 * tokens.  Continuation b's ids go to out + b * len, their number to
 * outn[b].  n + len must fit max_position_embeddings.  Returns 0, or -1
 * with err filled.
 */
int fw_sample_seqs(struct fw_model *m, const int32_t *prompt, int n, int len, int count,
		   const struct fw_sampler *s, uint64_t seed, int32_t eos, int32_t *out,
		   int *outn, char *err, size_t errlen);

#endif
