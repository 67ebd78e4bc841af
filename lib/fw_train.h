/*
 * fw_train.h — training steps over record streams: sequences with a mask
 * of trained tokens, the objectives (supervised fine-tuning, GRPO policy
 * gradient, self-distillation from per-token teacher advantages and
 * toward the teacher's top-k distribution), the
 * learning-rate schedule, micro-batching with gradient accumulation, and
 * checkpoint directories with their trainer_state.json.
 *
 * A batch (struct fw_batch) holds sequences back to back: ids, a mask of
 * trained (policy) tokens, and per token the log-prob the policy had when
 * it sampled the token and a teacher advantage, both NaN where unknown.
 * Per sequence a group key and a reward (GRPO).
 *
 * Conventions: position i of a sequence holds token i; "token i is
 * trained" means the model is scored on predicting it from tokens
 * 0..i-1, so token 0 is never trained.
 *
 * Every loss is written as a function of the per-token log-probs logp_t of
 * trained tokens, so a step runs the model forward, computes each token's
 * gradient coefficient dL/dlogp_t, and runs it forward again with those as
 * token weights before the backward pass.  Losses are token-level means
 * over the whole batch (all micro-batches, all data-parallel ranks), or
 * per sequence then over sequences (norm seq).
 */
#ifndef FW_TRAIN_H
#define FW_TRAIN_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "fw_model.h"
#include "fw_mp.h"

struct fw_tok;

/* ---- batches ------------------------------------------------------------------ */

struct fw_seq {
	size_t off;        /* first token in the batch arrays */
	int n;             /* tokens */
	int ntrain;        /* tokens with mask 1 */
	uint64_t group;    /* group key (hash); rollouts of one task share it */
	double reward;     /* NaN when the record has none */
	float adv;         /* GRPO advantage, set by fw_batch_advantages() */
	int skip;          /* 1: in a group that gives no signal (pg only) */
	int k;             /* teacher's top-k per token (teach.topk), 0: none */
	size_t koff;       /* its first entry in the batch's kid/klp: token i's
			    * k entries at koff + i*k, ids -1 where none */
};

struct fw_batch {
	int nseq, capseq;
	struct fw_seq *seq;
	size_t ntok, captok;
	int32_t *tok;      /* ntok ids */
	uint8_t *mask;     /* 1 where the token is trained */
	float *old;        /* log-prob under the sampling policy, NaN if unknown */
	float *tadv;       /* teacher advantage (teach.adv), NaN if none */
	size_t nk, capk;   /* top-k entries of the sequences that have them */
	int32_t *kid;      /* the teacher's top tokens */
	float *klp;        /* and their log-probs */
};

/* A new empty batch (fw_batch_free).  Returns NULL when out of memory. */
struct fw_batch *fw_batch_new(void);

/* Frees b.  fw_batch_free(NULL) does nothing. */
void fw_batch_free(struct fw_batch *b);

/*
 * Appends one sequence of n ids.  mask (n, may be NULL: every token but the
 * first is trained), old (n, may be NULL: unknown), tadv (n, may be NULL:
 * none), group key, reward (NaN for none).  Returns 0, or -1 when out of
 * memory.
 */
int fw_batch_add(struct fw_batch *b, const int32_t *tok, const uint8_t *mask,
		 const float *old, const float *tadv, int n, uint64_t group,
		 double reward);

/*
 * Appends the sequence of one record (flywheel-records(5)):
 *  - "tokens" (ids) with optional "mask" (0/1 per token) and "logprobs"
 *    (one per token, or one per token after the first as `ckpt score`
 *    writes them); or
 *  - "turns" of a traj or rollout record, rendered with tok's chat
 *    template; assistant turns are trained, and their "logprobs" (one per
 *    entry of the turn's "tokens") become the sampling log-probs.
 * "teach.adv" holds one advantage per trained token, or one per entry of
 * the assistant turns' "tokens" (in order).  "teach.topk" ({k, from, ids,
 * logprobs}, flywheel-records(5)) gives the teacher's k top tokens for the
 * entries from .. of teach.adv, each id within vocab.  The reward is "grade.reward";
 * the group key is "group" when present, else "task.id", else "task"
 * (a string), else the record's "id".
 * vocab bounds the ids; a sequence longer than max_len tokens is an error,
 * or with truncate keeps its first max_len tokens.  Returns 0; 1 when the
 * record is not trainable (no trained token), with err saying why; -1 when
 * malformed (err says what), or out of memory.
 */
int fw_batch_add_record(struct fw_batch *b, struct fw_mpv rec,
			const struct fw_tok *tok, int vocab, int max_len, int truncate,
			char *err, size_t errlen);

/* Group statistics of fw_batch_advantages(). */
struct fw_group_stats {
	int groups;          /* groups seen */
	int skipped;         /* groups of one, or with all rewards equal */
	int no_reward;       /* sequences without a finite reward (skipped) */
	double reward_mean, reward_std;  /* over sequences with a reward */
	double adv_mean, adv_std, adv_min, adv_max; /* over sequences used */
};

/*
 * GRPO advantages: sequences with the same group key form a group; each
 * gets adv = reward - group mean, divided by (the group's sample standard
 * deviation + 1e-4) unless no_std.  Groups of one and groups whose rewards
 * are all equal are marked skip, as are sequences without a finite reward.
 * Fills *st.  Cannot fail.
 */
void fw_batch_advantages(struct fw_batch *b, int no_std,
			 struct fw_group_stats *st);

/* ---- the step ------------------------------------------------------------------ */

enum fw_sched { FW_SCHED_COSINE, FW_SCHED_CONSTANT };

struct fw_train_cfg {
	double w_sft, w_pg, w_distill;   /* objective weights (0: off) */
	double w_topk;        /* soft-target distillation toward teach.topk */
	int topk_first_miss;  /* 1: topk on a sequence's tokens only up to the
			       * first one the teacher would not have chosen */
	struct fw_adamw_cfg adamw;       /* lr here is the peak learning rate */
	enum fw_sched sched;
	long warmup;          /* steps of linear warmup from lr/warmup to lr */
	long decay_steps;     /* cosine reaches min_lr at this step (0: never decays) */
	double min_lr;        /* floor of the cosine, as a fraction of lr */
	long batch_tokens;    /* micro-batch budget: rows * padded length */
	double clip_low, clip_high;  /* PPO ratio clip: [1 - low, 1 + high] */
	int norm_seq;         /* 1: mean per sequence, then over sequences */
	double kl_coef;       /* k3 KL to the reference model (needs ref) */
	double is_clip;       /* distill: importance weight clipped to this */
	int route;            /* 1: a sequence with non-zero teacher credit
			       * is trained by distill only, not by pg (the
			       * failed rollouts go to the teacher, the rest
			       * to the reward, as SRPO routes them) */
	/* Data parallel: sums n floats in place across ranks; NULL when
	 * alone.  Returns 0 or -1. */
	int (*allreduce)(double *x, long n, void *ctx);
	int (*allreduce_f)(float *x, long n, void *ctx);
	/* As allreduce_f on DEVICE memory (NCCL), used for the gradients of
	 * a model on a GPU; NULL: they go through the host and allreduce_f. */
	int (*allreduce_dev)(float *x, long n, void *ctx);
	void *ctx;
};

/* Sets c to the defaults: sft weight 1, lr 1e-5, betas 0.9/0.95, eps 1e-8,
 * weight decay 0.1, clip 1, cosine, warmup 0, no decay horizon, min_lr 0.1,
 * batch_tokens 8192, clips 0.2/0.28, token norm, no KL, is_clip 2. */
void fw_train_defaults(struct fw_train_cfg *c);

/* Learning rate of optimizer step `step` (counting from 1) under c.
 * Cannot fail. */
double fw_train_lr(const struct fw_train_cfg *c, long step);

/* What one step measured. */
struct fw_step_stats {
	double loss, loss_sft, loss_pg, loss_distill, kl;
	double loss_topk;     /* mean KL(teacher's top-k || policy) over its tokens */
	double grad_norm, lr;
	long tokens;          /* trained tokens over all ranks */
	long seqs;            /* sequences over all ranks */
	double clip_frac;     /* fraction of pg tokens whose ratio was clipped */
	double is_clip_frac;  /* fraction of distill tokens clipped */
	double seconds;
};

/*
 * One optimizer step over sequences idx[0..n) of b (this rank's share):
 * micro-batches of at most c->batch_tokens (rows * padded length; a longer
 * sequence goes alone), gradients accumulated, summed across ranks by
 * c->allreduce_f, clipped, AdamW with the scheduled lr for step o->step+1.
 * ref is the reference model for the KL term (NULL when kl_coef is 0).
 * A non-finite loss or gradient norm is an error and leaves m->w as it
 * was.  Fills *st.  Returns 0, or -1 with err filled.
 */
int fw_train_step(struct fw_model *m, struct fw_opt *o, struct fw_model *ref,
		  const struct fw_train_cfg *c, const struct fw_batch *b,
		  const int *idx, int n, struct fw_step_stats *st, char *err,
		  size_t errlen);

/* ---- data parallel ------------------------------------------------------------------ */

/*
 * The processes of one data-parallel run.  When started by Open MPI's
 * mpirun (or srun with PMIx), fw_dp_init() loads the MPI library at run
 * time (libmpi.so.40, or $FW_MPI_LIB) so that one binary runs alone or
 * data-parallel and building needs no MPI; FW_MPI=0 in the environment
 * makes every process run alone.  The handles are Open MPI's (its ABI).
 */
struct fw_dp;

/* Joins the run (MPI_Init) or, when not started by an MPI launcher, makes
 * a run of one.  Returns it (fw_dp_free), or NULL with err filled when
 * launched under MPI and the library cannot be loaded or initialised. */
struct fw_dp *fw_dp_init(int *argc, char ***argv, char *err, size_t errlen);

/* This process's rank and the number of processes.  Cannot fail. */
int fw_dp_rank(const struct fw_dp *dp);
int fw_dp_size(const struct fw_dp *dp);

/* Sums x (n values) in place across all processes (MPI_Allreduce); dp is a
 * struct fw_dp *, as struct fw_train_cfg's callbacks take it.  Returns 0,
 * or -1 when the library reports an error. */
int fw_dp_sum_f(float *x, long n, void *dp);
int fw_dp_sum_d(double *x, long n, void *dp);

/* Gives every process rank 0's n bytes of buf (through fw_dp_sum_d); dp
 * is a struct fw_dp *.  Returns 0, or -1. */
int fw_dp_bcast_bytes(unsigned char *buf, int n, void *dp);

/* Leaves the run (MPI_Finalize) and frees dp.  NULL does nothing. */
void fw_dp_free(struct fw_dp *dp);

/* ---- checkpoints ----------------------------------------------------------------- */

/* trainer_state.json: what a checkpoint needs besides weights and
 * optimizer moments to continue as if never stopped. */
struct fw_train_state {
	long step;            /* optimizer steps taken */
	long data_pos;        /* next sequence of the (cycled) input */
	char data_id[17];     /* hash of that input: other input starts at 0 */
	uint64_t seed;        /* --seed that drew the data order */
	int have_seed;        /* 0: input order */
	long tokens_seen;
	char id[17];          /* this checkpoint's id (hex) */
	char parent[17];      /* the checkpoint it was trained from, "" for none */
	/* the schedule, so later invocations continue it */
	double lr, min_lr;
	long warmup, decay_steps;
	enum fw_sched sched;
	int have_sched;       /* 0 when read from a checkpoint without one */
};

/* Reads DIR/trainer_state.json into s; a missing file gives a zeroed
 * state (a fresh checkpoint).  Returns 0, or -1 with err filled. */
int fw_train_state_load(struct fw_train_state *s, const char *dir, char *err,
			size_t errlen);

/* Writes s as DIR/trainer_state.json (temp file, renamed).  Returns 0, or
 * -1 with err filled. */
int fw_train_state_save(const struct fw_train_state *s, const char *dir,
			char *err, size_t errlen);

/* The checkpoint directory DIR names: DIR itself when it holds
 * config.json, else DIR/latest when that holds one.  Writes the path into
 * out (outlen bytes).  Returns 0, or -1 with err filled. */
int fw_ckpt_resolve(const char *dir, char *out, size_t outlen, char *err,
		    size_t errlen);

/* Content id of a model's weights: 16 hex digits of a 64-bit hash of
 * their bytes (same weights, same id), into id (17 bytes).  Cannot fail. */
void fw_ckpt_id(const struct fw_model *m, char id[17]);

/*
 * Writes a checkpoint under root (created if absent) as root/step-NNNNNNNN:
 * config.json and model.safetensors (dtype), optimizer.safetensors,
 * trainer_state.json, and tokenizer.json copied from tok_from (when not
 * NULL and present).  Everything goes to a temporary directory under root
 * first, synced, then renamed into place, and root/latest (a symbolic
 * link) is switched by rename, so a reader sees the old checkpoint or the
 * new one whole.  Then removes step-* directories beyond the keep newest
 * (keep <= 0 keeps all) and temporary directories of writers that died.
 * The final path goes to out.  Returns 0, or -1 with err filled (nothing
 * of the old checkpoints is changed then).
 */
int fw_ckpt_write(const char *root, const struct fw_model *m,
		  const struct fw_opt *o, const struct fw_train_state *s,
		  const char *tok_from, enum fw_dtype dtype, int keep,
		  char *out, size_t outlen, char *err, size_t errlen);

/* ---- a training run -------------------------------------------------------------- */

/* What train-step asks of a run. */
struct fw_run_opts {
	const char *ckpt;       /* a checkpoint, or a run's directory (its latest) */
	const char *out;        /* the run directory the new checkpoint goes to */
	const char *ref;        /* the KL reference checkpoint, or NULL */
	struct fw_train_cfg cfg;
	/* set by the user; what is not set continues the checkpoint's schedule */
	int have_lr, have_warmup, have_decay, have_min_lr, have_sched;
	uint64_t steps;         /* optimizer steps (>= 1) */
	uint64_t batch_size;    /* sequences a step (0: all) */
	uint64_t seed;          /* the order's shuffle, when have_seed */
	int have_seed;          /* else the checkpoint's seed, else input order */
	int no_std, truncate, keep;
	enum fw_dtype dtype;    /* of the saved weights */
};

/* Sets o to the defaults: fw_train_defaults(), one step, f32. */
void fw_run_opts_defaults(struct fw_run_opts *o);

/* A run in progress.  Made by fw_run_open(), freed by fw_run_free(). */
struct fw_run {
	const struct fw_run_opts *o;
	struct fw_train_cfg cfg;      /* o->cfg with the checkpoint's schedule */
	char dir[PATH_MAX];           /* the checkpoint resumed */
	struct fw_model *m, *ref;
	struct fw_opt *opt;
	struct fw_tok *tok;           /* NULL when the checkpoint has none */
	struct fw_train_state state;  /* where training stands */
	struct fw_batch *b;           /* the records added */
	struct fw_group_stats gs;     /* pg: the groups' statistics */
	int *order, *idx;
	struct fw_step_stats *sts;    /* nsteps entries once stepped */
	long nsteps;
	long failed_step;             /* the step that failed, 0 if none */
	char parent[17];              /* the id of the checkpoint resumed */
	char newdir[PATH_MAX];        /* the checkpoint written */
	double t_load, t_save;        /* seconds */
	/* Called after each step fw_run_steps takes, with the steps done;
	 * NULL for none.  Set by the caller after fw_run_open. */
	void (*on_step)(void *ctx, long done);
	void *on_step_ctx;
};

/*
 * Resumes o->ckpt (fw_ckpt_resolve): the model, the optimizer moments and
 * trainer_state.json (their steps must agree), the schedule continued
 * where o does not set it, the reference model of o->ref (same
 * vocabulary) and the tokenizer.  o must outlive the run.  Returns the run
 * (fw_run_free), or NULL with err filled.
 */
struct fw_run *fw_run_open(const struct fw_run_opts *o, char *err, size_t errlen);

/* Frees r.  NULL does nothing. */
void fw_run_free(struct fw_run *r);

/* Adds one training record rec (fw_batch_add_record with the run's
 * tokenizer and the model's sizes).  Returns 0, or -1 with err filled
 * (the record is left out). */
int fw_run_add(struct fw_run *r, struct fw_mpv rec, char *err, size_t errlen);

/*
 * Readies the records added for the steps: pg advantages (r->gs; its
 * no_reward counts the records without a reward), the order of the seed
 * (the options', else the checkpoint's, else input order), the data
 * position the checkpoint reached when the input is the same (else 0).
 * Returns 0, or -1 with err filled (no trainable records, out of memory).
 */
int fw_run_prepare(struct fw_run *r, char *err, size_t errlen);

/*
 * Takes o->steps optimizer steps after fw_run_prepare(), o->batch_size
 * sequences each (all when 0), cycling through the order from the data
 * position; rank of size takes every size-th sequence of a step's batch.
 * Returns 0, or -1 with err filled and r->failed_step the step that failed.
 */
int fw_run_steps(struct fw_run *r, int rank, int size, char *err, size_t errlen);

/* Writes the new checkpoint under o->out (fw_ckpt_write) with the state
 * the steps reached; its path goes to r->newdir.  Returns 0, or -1 with
 * err filled. */
int fw_run_save(struct fw_run *r, char *err, size_t errlen);

/* Packs the metrics record of step i (0 <= i < r->nsteps) of a saved run
 * into b (reset first); skipped is the count of records left out.
 * Returns 0, or -1 when out of memory. */
int fw_run_pack_metrics(const struct fw_run *r, long i, long skipped, struct fw_buf *b);

/* Writes the metrics records of a saved run's steps, in order, to path
 * (fw_writer_open() with level: NULL is standard output); skipped as
 * fw_run_pack_metrics() has it.  Returns 0, or -1 with err filled (the
 * file is not left half-written). */
int fw_run_write_metrics(const struct fw_run *r, const char *path, int level, long skipped,
			 char *err, size_t errlen);

/* Parses an --objective list, "sft", "pg:0.5,distill": each objective
 * named gets its weight (1, or the finite W > 0 after ':'), the others 0.
 * Returns 0, or -1 when s is not such a list or its weights sum to 0. */
int fw_train_parse_objective(const char *s, struct fw_train_cfg *c);

/*
 * The private split is never trained on.  A training record belongs to a
 * private task when its task (the map or id string under "task", else the
 * record itself) has split "private" or an id of the private set.
 *
 * fw_private_load() adds the ids of the task records in file to ids (each
 * record must have a string "id").  Returns 0, or -1 with err filled.
 *
 * fw_private_task() is 1 when rec is a private task's, with *id its task's
 * id (NULL when it has none, *idn its length), else 0.  Cannot fail.
 */
struct fw_intern;
int fw_private_load(const char *file, struct fw_intern *ids, char *err, size_t errlen);
int fw_private_task(struct fw_mpv rec, const struct fw_intern *ids, const char **id,
		    size_t *idn);

/* ---- records to score ------------------------------------------------------------ */

struct fw_tok;
struct fw_tok_ids;

/*
 * The ids the record rec names, into ids (max entries): its `tokens`
 * (integers in [0, vocab)), else its `text` encoded with t (BOS first where
 * t has one; scratch holds the encoding), *encoded then 1.  Returns the
 * number of ids, or -1 with *why a static message (no such field, not an
 * array, an id outside the vocabulary, more than max ids, text without a
 * tokenizer, out of memory).
 */
int fw_score_ids(struct fw_mpv rec, const struct fw_tok *t, int vocab, int max, int32_t *ids,
		 struct fw_tok_ids *scratch, int *encoded, const char **why);

/*
 * Writes rec into out (reset first) with `logprobs` set to lp[0..n-1) (n
 * ids were scored; none when n < 2) and, when with_tokens, `tokens` to
 * ids[0..n); every other field as it was.  lb and tb are scratch buffers.
 * Returns 0, or -1 when rec is not a map or memory runs out.
 */
int fw_score_record(struct fw_buf *out, struct fw_mpv rec, const int32_t *ids, int n,
		    const float *lp, int with_tokens, struct fw_buf *lb, struct fw_buf *tb);

/* ---- checkpoints made, converted and described ------------------------------------ */

/*
 * Writes a checkpoint directory out (absent, or an empty directory):
 * config.json and model.safetensors of m in dtype, and tokenizer.json, t
 * saved or else (t NULL) copied from tok_from when that exists; through a
 * temporary directory beside out published by fw_durable_publish() (fw_base.h).
 * Returns 0, or -1 with err filled (nothing is left beside out).
 */
int fw_ckpt_create(const char *out, const struct fw_model *m, const struct fw_tok *t,
		   const char *tok_from, enum fw_dtype dtype, char *err, size_t errlen);

/*
 * ckpt init: a fresh model of the config file config with weights drawn
 * from seed (fw_model_new), and tokenizer ("byte" or NULL: the byte
 * tokenizer, else a tokenizer.json to copy, whose ids the vocabulary must
 * hold), written as the checkpoint out in dtype (fw_ckpt_create).
 * Returns 0, or -1 with err filled.
 */
int fw_ckpt_init(const char *config, const char *tokenizer, uint64_t seed,
		 enum fw_dtype dtype, const char *out, char *err, size_t errlen);

/* ckpt convert: the checkpoint dir written as out with its weights in
 * dtype and its tokenizer.json copied.  Returns 0, or -1 with err filled. */
int fw_ckpt_convert(const char *dir, const char *out, enum fw_dtype dtype, char *err,
		    size_t errlen);

/* ckpt info: appends to out what the checkpoint dir is, one "key: value"
 * line each: where a link points, step and parent, architecture,
 * parameters, dtype and the config's sizes.  Returns 0, or -1 with err
 * filled. */
int fw_ckpt_describe(const char *dir, struct fw_buf *out, char *err, size_t errlen);

#endif
