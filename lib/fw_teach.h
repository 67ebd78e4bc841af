/*
 * fw_teach.h — hints for a rollout and the per-token credit they imply.
 *
 * A hint is a short text attached to one turn of a rollout record: the
 * turn whose tokens it speaks about.  Hints come from the environment
 * (grade's failing tests and hack findings, failed commands, denied network
 * requests), from a rules file, from a successful rollout of the same group
 * and from a teacher model asked to write one.  Credit re-scores the
 * policy's own tokens with the hint placed before the hinted turn:
 * adv[t] = clip(log p_teacher - log p_student).  A teacher (struct
 * fw_teacher) is a builtin checkpoint or an OpenAI-compatible server.
 */
#ifndef FW_TEACH_H
#define FW_TEACH_H
#include <stddef.h>
#include <stdint.h>
#include "fw_mp.h"
#include "fw_model.h"
#include "fw_tok.h"

struct fw_teach_hint {
	int turn;          /* index into the record's turns[] */
	char *text;        /* NUL-terminated, owned */
	const char *source; /* static: "env", "rules", "demo", "model" */
};

/* A list of hints.  Zero-initialise; fw_teach_hints_free() releases. */
struct fw_teach_hints {
	struct fw_teach_hint *h;
	size_t n, cap;
};

/* Frees the texts and the array; hs is empty and reusable.  NULL-safe. */
void fw_teach_hints_free(struct fw_teach_hints *hs);

/*
 * Collects the environment's hints for the rollout record rec into hs
 * (appended):
 *   - each failed test of grade.tests ("test ID: STATUS"), with grade.reason,
 *     on the last assistant turn;
 *   - each of grade.hacks ("hack NAME: DETAIL") on the last assistant turn;
 *   - each net-denied event of events[] on the last assistant turn;
 *   - each tool turn with a non-zero exit: its output (at most max_chars
 *     bytes of it, head kept) on the assistant turn that issued the command
 *     (the turn before it).
 * A record without an assistant turn, or without any failure, gets none.
 * max_chars bounds every hint's text (0: 400).
 * Returns the number of hints added (>= 0), or -1 with err filled (rec is
 * not a map, out of memory).
 */
int fw_teach_env_hints(struct fw_mpv rec, size_t max_chars, struct fw_teach_hints *hs,
		       char *err, size_t errlen);

/* ---- teachers ---------------------------------------------------------------- */
/*
 * A teacher: the model that re-scores a rollout's tokens and writes model
 * hints.  Either a builtin checkpoint (fw_policy.h), scored in process, or
 * an OpenAI-compatible server such as serve(1): sequences are scored by
 * POST URL/completions {"prompt": [ids], "echo": true, "max_tokens": 0,
 * "logprobs": 1} and read from choices[0].logprobs.token_logprobs (or from
 * vLLM's choices[0].prompt_logprobs); hints are completions of a text
 * prompt.  A teacher is used by one thread at a time.
 */
struct fw_teacher;

/*
 * Opens the teacher spec names: "builtin:DIR" (loads the checkpoint) or
 * "http:URL[#MODEL]" (URL the API base, e.g. http://127.0.0.1:8000/v1;
 * MODEL, when given, is sent as "model").  An http request may take
 * timeout_s seconds and is retried retries times when the server cannot
 * be reached or answers 429 or 5xx.  Returns the teacher (fw_teacher_free),
 * or NULL with err filled (a bad spec, a checkpoint that does not load).
 */
struct fw_teacher *fw_teacher_open(const char *spec, double timeout_s, int retries, char *err,
				   size_t errlen);

/* Frees T.  NULL does nothing. */
void fw_teacher_free(struct fw_teacher *T);

/* A builtin teacher's tokenizer (owned by T), or NULL for an http one.
 * Cannot fail. */
const struct fw_tok *fw_teacher_tok(const struct fw_teacher *T);

/* The positions a builtin teacher's model takes; 0 for an http one (the
 * server says when a sequence is too long).  Cannot fail. */
int fw_teacher_max_pos(const struct fw_teacher *T);

/*
 * Scores seq[0..N) (N >= 2): logp[i] = log p(seq[i+1] | seq[0..i]) for
 * i < N-1, logp[N-1] = 0; logp holds N floats.  Returns 0, or -1 with err
 * filled (the model failed, the server is down or its answer does not
 * score these ids, out of memory).
 */
int fw_teacher_score(struct fw_teacher *T, const int32_t *seq, long N, float *logp, char *err,
		     size_t errlen);

/*
 * As fw_teacher_score, for a sequence whose first P tokens (0 <= P < N)
 * are the unchanged prefix of a rollout (the tokens before the first
 * hint): logp[i] is computed for P <= i < N-1 only, and is 0 below P.  A
 * builtin teacher keeps the key-value cache of the last prefix it saw
 * (fw_kvscore below), so the records of a group that share a prompt run it
 * once, and each runs only the hint and what follows through the model; an
 * http teacher scores the whole sequence.  Returns as fw_teacher_score.
 */
int fw_teacher_score_from(struct fw_teacher *T, const int32_t *seq, long N, long P,
			  float *logp, char *err, size_t errlen);

/*
 * As fw_teacher_score_from, and for each i in P..N-2 also the K tokens
 * the teacher finds most likely after seq[0..i] (fw_gen_score_topk):
 * tk_ids[i*K + j] and their log-probs tk_lp[i*K + j], most likely first;
 * both hold N * K entries, those of other rows not written.  Only a
 * builtin teacher can (an http one: -1, "top-k credit needs a builtin
 * teacher").  Returns as fw_teacher_score_from.
 */
int fw_teacher_score_topk(struct fw_teacher *T, const int32_t *seq, long N, long P,
			  float *logp, int K, int32_t *tk_ids, float *tk_lp, char *err,
			  size_t errlen);

/*
 * Prefix-shared scoring on a model, with its incremental decoding state
 * (fw_gen_score, fw_gen_truncate of fw_model.h): the key-value cache of
 * the last prefix scored is kept; a sequence that starts with the same
 * tokens branches from it, and only its remaining tokens run, through
 * lm_head only where a log-prob is wanted.  The prefix runs in passes of
 * 256 positions aligned at multiples of 256 and the rest in passes from P,
 * and a cached prefix is reused only down to what the same passes give,
 * so the numbers for a sequence are the same bits whatever was scored
 * before it (teach -j N writes the bytes -j 1 does).  They equal a full
 * forward pass (fw_model_forward) within float rounding.  Used by one
 * thread at a time.
 */
struct fw_kvscore;

/* A scorer for model m, which must outlive it.  The cache is allocated on
 * the first fw_kvscore_run and grown for longer sequences, up to
 * max_position_embeddings.  Returns it (fw_kvscore_free), or NULL with err
 * filled (out of memory). */
struct fw_kvscore *fw_kvscore_new(struct fw_model *m, char *err, size_t errlen);

/* Frees s.  NULL does nothing. */
void fw_kvscore_free(struct fw_kvscore *s);

/*
 * Scores seq[0..N) (2 <= N <= max_position_embeddings) whose first P
 * tokens (0 <= P < N) are the prefix to share: logp (N floats) gets
 * logp[i] = log p(seq[i+1] | seq[0..i]) for P <= i < N-1, 0 elsewhere.
 * Returns 0, or -1 with err filled (bad sizes, an id outside the
 * vocabulary, out of memory).
 */
int fw_kvscore_run(struct fw_kvscore *s, const int32_t *seq, long N, long P, float *logp,
		   char *err, size_t errlen);

/* As fw_kvscore_run, with the top K tokens of rows P..N-2 as
 * fw_teacher_score_topk gives them (K = 0: none). */
int fw_kvscore_run_topk(struct fw_kvscore *s, const int32_t *seq, long N, long P, float *logp,
			int K, int32_t *tk_ids, float *tk_lp, char *err, size_t errlen);

/*
 * Records scored whole by a fw_kvscore, what `ckpt score` writes: the ids
 * a record names (fw_score_ids of fw_train.h: its tokens, else its text
 * encoded with t) and the record with their log-probs (fw_score_record).
 *
 * fw_recscore_new() makes a scorer for m (set to no_grad), with t (NULL:
 * none; records then need tokens), both outliving it.  Returns it
 * (fw_recscore_free, which takes NULL), or NULL with err filled.  Scorers
 * of one model and tokenizer may run in several threads at once, one
 * thread per scorer (fw_model.h, fw_tok.h); make them before the threads
 * start, since this sets m.
 *
 * fw_recscore_run() writes rec with its log-probs into out (reset first)
 * and returns 1; returns 0 with *why saying why when rec cannot be scored
 * (no tokens or text, an id outside the vocabulary, too long), valid until
 * the next call; -1 when memory runs out.
 */
struct fw_recscore;
struct fw_recscore *fw_recscore_new(struct fw_model *m, const struct fw_tok *t, char *err,
				    size_t errlen);
void fw_recscore_free(struct fw_recscore *s);
int fw_recscore_run(struct fw_recscore *s, struct fw_mpv rec, struct fw_buf *out,
		    const char **why);

/* What a scoring run (fw_recscore_files) is asked for: ckpt score's options. */
struct fw_recscore_opts {
	int workers;               /* threads that score, >= 1 (1: the caller's own) */
	const char *out;           /* fw_writer_open()'s path (NULL: standard output) */
	int level;                 /* and its level */
	int progress;              /* fw_each's meter: fw_progress_start()'s force */
	uint64_t shard_k, shard_n; /* fw_each's shard (shard_n 0: every record) */
};

/*
 * ckpt score: the records of the operands argv[first..argc) (fw_each_record()
 * of fw_cli.h, going on past a damaged record) scored with m and t, both
 * outliving the call, by o->workers threads of the shared ordered pool, each
 * with a scorer of its own (fw_recscore_new), and written to o->out in input
 * order: since a record's numbers depend on its ids only, the bytes are
 * those of one worker.  A record that cannot be scored is left out and
 * reported, in input order, as "FILE: record N (byte B): WHY" (fw_warn_rec).
 * Prints its diagnostics on stderr, as fw_each_record() does.  Returns
 * FW_EXIT_OK; FW_EXIT_DATA when a record was bad or refused (the rest is
 * written), or when a scorer, the output or a worker could not be had,
 * memory ran out or a write failed (what was written stays unfinished: a
 * file o->out names is not put in place).
 */
int fw_recscore_files(struct fw_model *m, const struct fw_tok *t,
		      const struct fw_recscore_opts *o, int argc, char **argv, int first);

/*
 * Reads the prompt log-probs of a completions answer (body, len bytes) to
 * the scoring request for seq[0..N): choices[0].logprobs.token_logprobs (N
 * values, the first null; choices[0].token_ids, when present, must be seq)
 * or choices[0].prompt_logprobs (N entries, the first null, entry i an
 * object whose key "seq[i]" holds {"logprob": X}).  Fills logp as
 * fw_teacher_score().  Returns 0, or -1 with err saying what is wrong with
 * the answer.
 */
int fw_teacher_parse_scores(const char *body, size_t len, const int32_t *seq, long N,
			    float *logp, char *err, size_t errlen);

/*
 * A completion of prompt (len bytes, BOS first where the tokenizer has one)
 * of at most max_tokens tokens, drawn under temperature temp (0: greedy;
 * no top-p or top-k) from seed (nonzero): the builtin decodes it, an http
 * teacher sends seed and takes choice 0 (serve(1) then draws the same
 * tokens).  The hint is the text from its first non-blank byte to the end
 * of that line, trimmed, cut to max_bytes on a UTF-8 boundary and made
 * valid UTF-8.  *hint receives it (malloc'd, caller frees).  Returns 0, or
 * -1 with err filled (the model failed, the server is down or answered no
 * completion, the hint is empty).
 */
int fw_teacher_hint(struct fw_teacher *T, const char *prompt, size_t len, uint64_t seed,
		    float temp, int max_tokens, size_t max_bytes, char **hint, char *err,
		    size_t errlen);

/* ---- model hints ------------------------------------------------------------ */
/*
 * The weak turn of rec: the earliest turn that hs or the environment's
 * hints (fw_teach_env_hints()) point at; without any, the last assistant
 * turn of a rollout graded not resolved; else -1 (no model hint is due).
 * Cannot fail.
 */
int fw_teach_weak_turn(struct fw_mpv rec, const struct fw_teach_hints *hs);

/*
 * Appends to out the prompt that asks a teacher for a hint on turn `turn`
 * of rec, at most budget bytes (budget >= 256):
 *
 *     Task:\nTASK\n\nOutcome: OUTCOME\n\nEarlier turns:\nTURNS\n\n
 *     Turn N (ROLE):\nTEXT\n\nIts result:\nRESULT\n\n
 *     One short hint for turn N, what to do differently:\nHint:
 *
 * TASK is task.prompt, else the first user turn's text; OUTCOME says
 * resolved or not with grade.reason, the tests that did not pass, the hack
 * findings and the record's stop; TURNS are the turns between the task and
 * turn N but system turns, one a line as "[ROLE] TEXT" ("[tool, exit E]
 * TEXT"), the latest kept when they do not all fit, after a line "[K
 * earlier turns left out]", or "(none)"; TEXT is turn N's text; RESULT, only
 * when the turn after N is a tool turn, is that turn as a line.  What does
 * not fit is cut in the middle ("\n[...]\n"): the task to a quarter of the
 * room, the outcome to a sixth, turn N to a quarter, its result to a sixth,
 * each earlier turn to 300 bytes; the earlier turns take what is left.
 * Returns 0, or -1 with err filled (no such turn, budget too small, out of
 * memory).
 */
int fw_teach_hint_prompt(struct fw_mpv rec, int turn, size_t budget, struct fw_buf *out,
			 char *err, size_t errlen);

/* How a model hint is asked for. */
struct fw_teach_hint_opts {
	size_t prompt_bytes; /* bound of the prompt (0: 1536); a builtin teacher's
			      * prompt is cut further to fit its positions */
	int max_tokens;      /* tokens of the hint at most (0: 48) */
	size_t max_chars;    /* bytes of the hint at most (0: 400) */
	float temp;          /* 0: greedy */
	uint64_t seed;       /* base seed; the record's id is mixed in */
};

/*
 * Asks teacher T for one hint on the weak turn of rec (fw_teach_weak_turn()
 * with the hints already in hs) with the prompt of fw_teach_hint_prompt(),
 * and appends it to hs with source "model".  The draw's seed is
 * fw_rollout_seed(o->seed, id) of the record's id, so a record gets the same
 * hint whatever else is in the stream.  Returns 1 when a hint was added, 0
 * when none is due, -1 with err filled when the teacher failed (the record
 * then says why).
 */
int fw_teach_model_hint(struct fw_teacher *T, struct fw_mpv rec,
			const struct fw_teach_hint_opts *o, struct fw_teach_hints *hs, char *err,
			size_t errlen);

/* ---- credit ----------------------------------------------------------------- */
/*
 * The teacher's distribution on the credited tokens, what a soft-target
 * (top-k) distillation trains toward: for policy tokens from .. from+n-1
 * (in the order of teach.adv), the k tokens the hinted teacher found most
 * likely at that position and their log-probs, most likely first:
 * ids[i*k + j], logp[i*k + j] for the (from + i)th policy token.  The
 * caller sets k (0: none wanted); the credit functions fill the rest
 * (malloc'd; fw_teach_topk_release() frees, keeping k).
 */
struct fw_teach_topk {
	int k;
	long from, n;
	int32_t *ids;
	float *logp;
};

void fw_teach_topk_release(struct fw_teach_topk *tk);

/*
 * Credit for a fill rollout: rec has top-level tokens (N ids) and mask (N
 * 0/1 values, 1 on the policy's tokens) and turns[] whose first assistant
 * turn holds logprobs, one per policy token.  The teacher T scores the
 * sequence with the hints' texts (those of hs on that assistant turn,
 * joined, encoded with t, the tokenizer of the rollout's tokens) inserted
 * before the first policy token.
 * On success *adv receives malloc'd values, one per policy token, and
 * *nadv their number: clip(log p_teacher - log p_student, +-clip), 0 when
 * there is no hint on the turn.
 * When prompt, hint and completion are more than T's positions, the prompt
 * is cut from its far end (a leading BOS of t stays, and the tokens nearest
 * the completion), then, if still needed, the hint to its first whole lines
 * (to its first tokens when not even one line fits); what a shortened hint
 * leaves goes back to the prompt.  The completion is never cut.
 * With tk (not NULL, tk->k > 0; a builtin teacher) every policy token also
 * gets the teacher's top tk->k there (tk->from 0, tk->n = *nadv) when the
 * turn is hinted; none (tk->n 0) when it is not.
 * Returns 0; 1 when credit cannot be given for this record, with the
 * reason in err (no tokens, no log-probs, counts that disagree, a
 * completion alone as long as the model's positions); -1 on failure of the
 * teacher or memory, err filled.
 */
int fw_teach_credit_fill(struct fw_teacher *T, const struct fw_tok *t, struct fw_mpv rec,
			 const struct fw_teach_hints *hs, double clip, float **adv,
			 long *nadv, struct fw_teach_topk *tk, char *err, size_t errlen);

/*
 * Credit for an agent rollout: rec has turns[] whose assistant turns hold
 * tokens and logprobs (one per token).  The turns are rendered with t's
 * chat template as train-step renders them, once with a user turn
 * "Hint: TEXT" before each hinted assistant turn, and scored by T.
 * *adv receives one value per assistant token, turns in order (what
 * train-step matches to the assistant turns' own tokens): 0 for the turns
 * before the first hinted one, clip(log p_teacher - log p_student) from it
 * on; with tk, the teacher's top tk->k for the tokens from it on (tk->from
 * the tokens before).  Returns 0; 1 with the reason in err when credit cannot be given (no
 * assistant tokens or log-probs, no chat template, too long); -1 on failure
 * of the teacher or memory.
 */
int fw_teach_credit_agent(struct fw_teacher *T, const struct fw_tok *t, struct fw_mpv rec,
			  const struct fw_teach_hints *hs, double clip, float **adv,
			  long *nadv, struct fw_teach_topk *tk, char *err, size_t errlen);

/*
 * Appends to out the value of the record's `teach` sub-map:
 * {hints: [{turn, text, source}...], adv: [...]} with adv only when
 * adv != NULL, else adv_reason (when not NULL) as `adv_omitted`;
 * `topk: {k, from, ids, logprobs}` when adv and tk (n > 0) are given;
 * `teacher: TEACHER` when teacher is not NULL (a teacher other than the
 * checkpoint that sampled the rollout); `hint_error: HINT_ERROR` when
 * hint_error is not NULL (why the model hint source gave none).
 * Returns 0, or -1 when out of memory.
 */
int fw_teach_pack(struct fw_buf *out, const struct fw_teach_hints *hs, const float *adv,
		  long nadv, const struct fw_teach_topk *tk, const char *adv_reason,
		  const char *teacher, const char *hint_error);
/* ---- rules ------------------------------------------------------------------ */
/*
 * A rules file maps trajectory patterns to hints, one rule a line:
 *
 *     KIND [ARG]: HINT TEXT
 *
 * Blank lines and lines starting with '#' are ignored.  KIND is one of
 *   match REGEX     an assistant turn whose text matches REGEX (PCRE2):
 *                   hint on that turn
 *   never REGEX     no assistant turn matches REGEX (a tool available but
 *                   never used): hint on the last assistant turn
 *   edited REGEX    the patch changes a file whose path matches REGEX (a
 *                   test file edited): hint on the last assistant turn
 *   repeated N      the same failing command text N or more times: hint on
 *                   the Nth occurrence
 *   stop WORD       the record's stop is WORD (no-action, submit: giving up
 *                   early): hint on the last assistant turn
 *   longer N        an assistant turn of more than N tokens (N bytes of text
 *                   when it has no tokens): hint on that turn
 * REGEX runs to the first ": " (so it cannot contain one).
 */
struct fw_teach_rules;

/* Reads the rules file at path.  Returns the rules (fw_teach_rules_free),
 * or NULL with err "PATH:LINE: reason". */
struct fw_teach_rules *fw_teach_rules_load(const char *path, char *err, size_t errlen);

/* Same from a text of len bytes; name is used in messages. */
struct fw_teach_rules *fw_teach_rules_parse(const char *text, size_t len, const char *name,
					    char *err, size_t errlen);

/* Frees r.  NULL does nothing. */
void fw_teach_rules_free(struct fw_teach_rules *r);

/* Appends to hs the hints (source "rules") the rules give record rec, at
 * most one per rule and turn.  Returns the number added, or -1 with err
 * filled (out of memory). */
int fw_teach_rule_hints(const struct fw_teach_rules *r, struct fw_mpv rec,
			struct fw_teach_hints *hs, char *err, size_t errlen);
/* ---- demo ------------------------------------------------------------------- */
/* The group of a rollout record, as train-step groups them: its `group`
 * value, else task.id, else task (a string).  Returns 1 and fills *key (a
 * hash) when the record names one, 0 otherwise.  Cannot fail. */
int fw_teach_group_key(struct fw_mpv rec, uint64_t *key);

/* 1 when rec is a successful rollout (grade.resolved true), 0 otherwise. */
int fw_teach_resolved(struct fw_mpv rec);

/*
 * A demo hint for rec from demo, a successful rollout of the same group:
 * "a correct solution looked like this:" and demo's patch (its last
 * assistant turn's text when the patch is empty), at most max_chars bytes,
 * on rec's last assistant turn with source "demo".  Nothing when rec is
 * itself resolved, has no assistant turn, or demo offers no text.
 * Returns the number of hints added (0 or 1), or -1 with err filled.
 */
int fw_teach_demo_hint(struct fw_mpv rec, struct fw_mpv demo, size_t max_chars,
		       struct fw_teach_hints *hs, char *err, size_t errlen);

/*
 * Which of rec's policy tokens differ from demo, a correct solution of the
 * same task: the policy tokens (tokens where mask is 1) of both fill
 * rollouts are aligned by a longest common subsequence, and (*differ)[i]
 * is 1 for rec's policy token i outside it, 0 for one in it.  *differ
 * (malloc'd, caller frees) holds *n values, one per policy token of rec,
 * in the order of rec's teach.adv.  Returns 0; 1 with the reason in err
 * when either record has no tokens and mask or the two are too long to
 * align (more than 4M cells); -1 when out of memory.
 */
int fw_teach_diff_mask(struct fw_mpv rec, struct fw_mpv demo, unsigned char **differ,
		       long *n, char *err, size_t errlen);
#endif
