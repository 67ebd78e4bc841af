/*
 * fw_teach.h — hints for a rollout and the per-token credit they imply.
 *
 * A hint is a short text attached to one turn of a rollout record: the
 * turn whose tokens it speaks about.  Hints come from the environment
 * (grade's failing tests and hack findings, failed commands, denied network
 * requests).  Credit re-scores the policy's own tokens with the hint placed
 * before the hinted turn: adv[t] = clip(log p_teacher - log p_student).
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
	const char *source; /* static: "env", "rules", "demo" */
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

/*
 * Credit for a fill rollout: rec has top-level tokens (N ids) and mask (N
 * 0/1 values, 1 on the policy's tokens) and turns[] whose first assistant
 * turn holds logprobs, one per policy token.  The teacher m scores the
 * sequence with the hints' texts (those of hs on that assistant turn,
 * joined, encoded with t) inserted before the first policy token.
 * On success *adv receives malloc'd values, one per policy token, and
 * *nadv their number: clip(log p_teacher - log p_student, +-clip), 0 when
 * there is no hint on the turn.
 * Returns 0; 1 when credit cannot be given for this record, with the
 * reason in err (no tokens, no log-probs, counts that disagree, too long for
 * the model); -1 on failure of the model or memory, err filled.
 */
int fw_teach_credit_fill(struct fw_model *m, const struct fw_tok *t, struct fw_mpv rec,
			 const struct fw_teach_hints *hs, double clip, float **adv,
			 long *nadv, char *err, size_t errlen);

/*
 * Credit for an agent rollout: rec has turns[] whose assistant turns hold
 * tokens and logprobs (one per token).  The turns are rendered with t's
 * chat template as train-step renders them, once with a user turn
 * "Hint: TEXT" before each hinted assistant turn, and scored by m.
 * *adv receives one value per assistant token, turns in order (what
 * train-step matches to the assistant turns' own tokens): 0 for the turns
 * before the first hinted one, clip(log p_teacher - log p_student) from it
 * on.  Returns 0; 1 with the reason in err when credit cannot be given (no
 * assistant tokens or log-probs, no chat template, too long); -1 on failure
 * of the model or memory.
 */
int fw_teach_credit_agent(struct fw_model *m, const struct fw_tok *t, struct fw_mpv rec,
			  const struct fw_teach_hints *hs, double clip, float **adv,
			  long *nadv, char *err, size_t errlen);

/*
 * Appends to out the value of the record's `teach` sub-map:
 * {hints: [{turn, text, source}...], adv: [...]} with adv only when
 * adv != NULL, else adv_reason (when not NULL) as `adv_omitted`; and
 * `teacher: TEACHER` when teacher is not NULL (a teacher other than the
 * checkpoint that sampled the rollout).
 * Returns 0, or -1 when out of memory.
 */
int fw_teach_pack(struct fw_buf *out, const struct fw_teach_hints *hs, const float *adv,
		  long nadv, const char *adv_reason, const char *teacher);
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
#endif
