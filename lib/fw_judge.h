/*
 * fw_judge.h — model-graded evals: rubrics, judges that score a rollout
 * on each criterion of a rubric, rewards that mix test results with
 * judge scores, and the agreement of a judge with people.
 *
 * A rubric (a `rubric` record, flywheel-records(5)) names criteria; each is
 * a question with a scale — "yes/no" (labels yes, no; values 1, 0) or "1-5"
 * (labels 1 … 5; values 1 … 5) — an instruction for the judge, and optional
 * reference answers.
 *
 * A judge is one of:
 *   builtin:DIR         a flywheel checkpoint;
 *   http:URL[#MODEL]    an OpenAI-compatible server that scores given token
 *                       ids (serve(1), vLLM), tokenized with a local
 *                       tokenizer;
 *   exec:PROG           a program: one JSON request on its stdin, one JSON
 *                       answer on its stdout (see fw_judge_score()).
 * A model judge reads the judge prompt (fw_judge_prompt()) followed by each
 * label of the scale and scores the label's tokens; the probabilities of
 * the labels, renormalised over the scale, are the verdict's p (they sum
 * to 1), the verdict is the most probable label, and the score is the
 * expected value Σ p·value.  No free text is parsed.
 */
#ifndef FW_JUDGE_H
#define FW_JUDGE_H

#include <stddef.h>
#include <stdint.h>

#include "fw_mp.h"

#define FW_JUDGE_MAX_LABELS 5
#define FW_JUDGE_MAX_EXPECT 8

struct fw_criterion {
	char *name;        /* key in grade.judge: [A-Za-z0-9_.-]+ */
	char *question;
	char *instruction; /* may be NULL */
	char *reference;   /* reference answers joined by newlines, or NULL */
	int nlabels;
	const char *labels[FW_JUDGE_MAX_LABELS];
	double values[FW_JUDGE_MAX_LABELS];
	/* the task.expect values the criterion applies to (none: every
	 * record), e.g. "ask" for a criterion on clarifying questions */
	int nexpect;
	char *expect[FW_JUDGE_MAX_EXPECT];
};

/*
 * 1 when criterion c applies to record rec: it names no expect, or the
 * record's task.expect is one it names; else 0.
 */
int fw_criterion_applies(const struct fw_criterion *c, struct fw_mpv rec);

struct fw_rubric {
	char *id, *name;
	int n;
	struct fw_criterion *c;
};

/*
 * Parses the rubric record rec (a msgpack map with kind "rubric").
 * Returns a rubric the caller frees with fw_rubric_free(), or NULL with err
 * naming the fault ("criterion 2 ('tone'): scale '1-7' is not yes/no or
 * 1-5", a missing question, a duplicate name, out of memory).
 */
struct fw_rubric *fw_rubric_parse(struct fw_mpv rec, char *err, size_t errlen);

/*
 * Reads the first rubric record of a record stream file.  Returns the
 * rubric, or NULL with err filled (the file does not read, holds no
 * rubric record, or the rubric is bad).
 */
struct fw_rubric *fw_rubric_load(const char *path, char *err, size_t errlen);

/* Frees r.  NULL does nothing. */
void fw_rubric_free(struct fw_rubric *r);

/* Index of the criterion called name in r, or -1.  Cannot fail. */
int fw_rubric_find(const struct fw_rubric *r, const char *name);

/*
 * Appends to out the judge prompt for criterion c of r on the record rec
 * (a rollout or a traj): the instruction, the task's request, the
 * transcript (each turn's role, text, tool calls and results), the patch of
 * a rollout, the reference answers, the question and the labels, ending
 * in "Answer:".  The transcript is cut from its start to keep the prompt
 * within max_chars bytes (0: no limit), so the question is always there.
 * Returns 0, or -1 when memory runs out.
 */
int fw_judge_prompt(struct fw_buf *out, const struct fw_rubric *r, int c, struct fw_mpv rec,
		    size_t max_chars);

struct fw_tok;

/*
 * As fw_judge_prompt, with the transcript cut from its start so that the
 * prompt, tokenized by t with a BOS, and the longest of the criterion's
 * labels fit max_pos positions (0: no limit): the prompt a model judge of
 * that tokenizer and context reads, and the one a judge distilled for it
 * is trained on.  When the instruction and question alone do not fit, the
 * prompt is left without its transcript (the scorer then cuts it from the
 * start).  Returns 0, or -1 when memory runs out.
 */
int fw_judge_prompt_fit(struct fw_buf *out, const struct fw_rubric *r, int c, struct fw_mpv rec,
			const struct fw_tok *t, int max_pos);

/* One criterion's judgement. */
struct fw_verdict {
	double p[FW_JUDGE_MAX_LABELS]; /* over the criterion's labels; sums to 1 */
	int label;                     /* index of the verdict */
	double score;                  /* Σ p[i]·values[i] */
	char rationale[512];
	int skipped;                   /* the criterion does not apply */
};

struct fw_judge;

/*
 * Opens the judge spec names (see above).  tok_dir is a checkpoint
 * directory whose tokenizer.json an http judge uses (required for http:,
 * ignored otherwise).  timeout_s and retries as for a teacher (fw_teach.h).
 * Returns the judge (fw_judge_free), or NULL with err filled.
 */
struct fw_judge *fw_judge_open(const char *spec, const char *tok_dir, double timeout_s,
			       int retries, char *err, size_t errlen);

/* Frees j.  NULL does nothing. */
void fw_judge_free(struct fw_judge *j);

/*
 * Judges criterion c of rubric r on record rec into *v; a criterion that
 * does not apply to rec (fw_criterion_applies) is not judged and v is
 * marked skipped.  A model judge
 * scores the prompt (cut from its start to fit the model's positions)
 * followed by " LABEL" for each label.  An exec judge gets on stdin
 * {"rubric": ID, "criterion": {name, question, instruction, reference,
 * labels}, "prompt": TEXT, "record": REC} and answers {"verdict": LABEL,
 * "p": {LABEL: PROB, …} (optional: one-hot on the verdict when absent),
 * "rationale": TEXT (optional)}; p is renormalised over the labels.
 * Returns 0, or -1 with err filled (the model or server failed, the
 * program failed or answered a label not on the scale, or a negative or
 * non-finite probability).  Used by one thread at a time.
 */
int fw_judge_score(struct fw_judge *j, const struct fw_rubric *r, int c, struct fw_mpv rec,
		   struct fw_verdict *v, char *err, size_t errlen);

/*
 * Packs the map {CRITERION: {score, verdict, p: {LABEL: PROB}, rationale}}
 * for the criteria of r with verdicts v[0..n) that are not skipped into pk.  Cannot fail
 * beyond the packer's own errors (returns the sum of their return codes).
 */
int fw_judge_pack(msgpack_packer *pk, const struct fw_rubric *r, const struct fw_verdict *v);

/* ---- rewards that mix tests and judges ---------------------------------- */

/*
 * A mixed reward: w_test·T + Σ w_k·s_k over the listed criteria, divided by
 * the sum of the weights, where T is the test reward (resolved, f2p or
 * shaped, as grade --reward) and s_k is criterion k's score scaled to [0, 1]
 * ((score − min value) / (max value − min value)).
 */
struct fw_mix {
	int test;      /* an enum fw_reward value (fw_grade.h) */
	double w_test;
	int n;
	char *crit[16];
	double w[16];
};

/*
 * Parses "mix:TEST=W,CRITERION=W,…" (TEST one of resolved, f2p, shaped,
 * at most once; weights finite and >= 0, not all 0).  Returns 0, or -1 with
 * err filled.  Free the names with fw_mix_release().
 */
int fw_mix_parse(struct fw_mix *m, const char *s, char *err, size_t errlen);

/* Frees m's names and zeroes it.  NULL does nothing. */
void fw_mix_release(struct fw_mix *m);

/*
 * The mixed reward for test reward T in [0, 1] and verdicts v of rubric r;
 * a skipped verdict weighs nothing, and with no weight left it is T.
 * Returns it in [0, 1], or -1 with err filled when a criterion of m is not
 * in r.
 */
double fw_mix_reward(const struct fw_mix *m, double T, const struct fw_rubric *r,
		     const struct fw_verdict *v, char *err, size_t errlen);

/* ---- agreement with people ------------------------------------------------ */

/*
 * Agreement of a judge with human labels on one criterion of k labels:
 * pairs (human[i], judge[i]) of label indices in [0, k), i < n.
 */
struct fw_agree {
	long n;
	double accuracy;   /* observed agreement p_o */
	double kappa;      /* Cohen's (p_o − p_e) / (1 − p_e); 0 when p_e = 1 */
	double lo, hi;     /* bootstrap 95% percentile interval of kappa */
	long confusion[FW_JUDGE_MAX_LABELS][FW_JUDGE_MAX_LABELS]; /* [human][judge] */
	int chance;        /* 1 when lo <= 0: no better than chance */
};

/*
 * Fills *a for the n pairs, with `resamples` bootstrap resamples of the
 * pairs drawn from seed (same seed, same interval).  k is 2..5.  Returns
 * 0, or -1 when n is 0, a label is out of range or memory runs out.
 */
int fw_agree_compute(struct fw_agree *a, const int *human, const int *judge, long n, int k,
		     unsigned resamples, uint64_t seed);

/* Cohen's kappa of n pairs over k labels.  Cannot fail (0 when n is 0). */
double fw_kappa(const int *human, const int *judge, long n, int k);

/*
 * A set of judge verdicts and human labels, joined on (record id,
 * criterion) into an agreement table per criterion (fb-report --judge).
 */
struct fw_agree_set;

/* A new empty set (fw_agree_set_free), or NULL when out of memory. */
struct fw_agree_set *fw_agree_set_new(void);

/* Frees s.  NULL does nothing. */
void fw_agree_set_free(struct fw_agree_set *s);

/*
 * Adds the verdicts of rec's grade.judge under rec's id.  A record without
 * grade.judge adds nothing.  Returns the number of verdicts added, or -1
 * with err filled (no id, a verdict that is not a string, out of memory).
 */
int fw_agree_set_judged(struct fw_agree_set *s, struct fw_mpv rec, char *err, size_t errlen);

/*
 * Adds the human labels of a text file: lines "ID<TAB>CRITERION<TAB>LABEL"
 * (blank lines and lines starting with '#' skipped).  Returns the number of
 * labels read, or -1 with err naming the file and line of a fault.
 */
long fw_agree_set_labels(struct fw_agree_set *s, const char *path, char *err, size_t errlen);

/*
 * Appends to out the agreement per criterion that has both verdicts and
 * labels, in criterion order: a line "CRITERION n N accuracy A kappa K
 * [LO, HI]" followed by "no better than chance" when LO <= 0, and the
 * confusion table (rows human, columns judge).  Labels are ordered as
 * their scale (yes, no; 1..5), else as first seen.  *flagged counts the
 * criteria no better than chance.  Returns the number of criteria
 * reported, or -1 with err filled (a criterion with more than
 * FW_JUDGE_MAX_LABELS labels, out of memory).
 */
int fw_agree_set_report(struct fw_agree_set *s, unsigned resamples, uint64_t seed,
			struct fw_buf *out, int *flagged, char *err, size_t errlen);

#endif
