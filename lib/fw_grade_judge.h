/*
 * fw_grade_judge.h — a judge's pass over graded rollouts (grade --judge):
 * grade.judge added from every criterion of a rubric, grade.reward mixed
 * from the tests' reward and the judge's scores, and, for a student judge,
 * one SFT example per criterion judged (grade --distil).
 *
 * Above both fw_grade (the grade sub-map) and fw_judge (rubrics, judges,
 * mixes): neither uses this module.
 */
#ifndef FW_GRADE_JUDGE_H
#define FW_GRADE_JUDGE_H

#include <stddef.h>
#include <stdint.h>

#include "fw_grade.h"
#include "fw_judge.h"
#include "fw_mp.h"

struct fw_tok;
struct fw_writer;

/*
 * Takes one example record (n bytes of msgpack at p).  Returns 0, or -1
 * with a message in err.
 */
typedef int (*fw_example_fn)(void *arg, const void *p, size_t n, char *err, size_t errlen);

/*
 * What a judge's pass needs.  The caller sets mix, hacks_warn, judge_only,
 * and put and put_arg or distil and distil_level, zeroes the rest and
 * opens it with fw_grade_judging_open().
 */
struct fw_grade_judging {
	const struct fw_mix *mix;  /* NULL: grade.reward stays the tests' */
	int hacks_warn;            /* 0: a record with hacks keeps reward 0 */
	int judge_only;            /* records never graded are judged too */
	fw_example_fn put;         /* where each distillation example goes */
	void *put_arg;
	const char *distil;        /* or a stream made there (put set by open;
				    * a write error says "--distil: REASON") */
	int distil_level;          /* and its compression (fw_writer_open()) */
	uint64_t distilled;        /* examples given to put */

	/* owned; fw_grade_judging_release() frees them */
	struct fw_judge *judge;
	struct fw_rubric *rubric;
	struct fw_tok *stok;       /* the student's tokenizer, or NULL */
	int smax_pos;              /* and its positions */
	struct fw_verdict *verdicts;
	struct fw_buf jbuf, gbuf, rbuf, dbuf, pbuf;
	struct fw_writer *dw;      /* the stream at distil */
};

/*
 * Parses grade's --reward value s: a reward's name (fw_reward_parse()),
 * *have_mix 0; or "mix:..." into mix (fw_mix_parse(); the caller clears
 * mix first), *have_mix 1, with the mix's test reward.  *reward is the
 * tests' reward either way.  Returns 0, or -1 with the usage message in
 * err.
 */
int fw_grade_reward_opt(const char *s, enum fw_reward *reward, struct fw_mix *mix,
			int *have_mix, char *err, size_t errlen);

/*
 * Opens jg's judge (fw_judge_open() of spec with tokenizer dir tok, NULL
 * for the model's own, and timeout_s) and rubric (the file at rubric);
 * checks that every criterion jg->mix names is in the rubric; with student
 * (a checkpoint directory, may be NULL) loads its tokenizer and positions
 * for distillation examples, and with jg->distil makes their stream.
 * Returns 0, or with a message in err: -1 the judge or the rubric failed,
 * -2 the mix names a criterion not in the rubric, -3 the student or the
 * stream failed.  jg is to be released either way.
 */
int fw_grade_judging_open(struct fw_grade_judging *jg, const char *spec, const char *tok,
			  double timeout_s, const char *rubric, const char *student, char *err,
			  size_t errlen);

/* Frees what jg owns, and removes a distillation output not closed.
 * Safe on a zeroed jg. */
void fw_grade_judging_release(struct fw_grade_judging *jg);

/* Closes the stream at jg->distil (none: 0).  Returns 0, or -1 with a
 * message in err. */
int fw_grade_judging_distil_close(struct fw_grade_judging *jg, char *err, size_t errlen);

/*
 * Judges the graded record in rec (a rollout with a grade sub-map, or with
 * judge_only any record) on every criterion of the rubric and puts the new
 * record in rec: grade.judge added; with a mix, grade.reward the mix (0
 * when the tests named a hack, unless hacks_warn) and grade.reward_tests
 * the tests' own.  With a student, the examples {kind: sft, prompt,
 * completion: " LABEL", rubric, criterion, id, p} go to put first.  Returns
 * 0, or -1 with a message in err (rec unchanged).
 */
int fw_grade_judge_record(struct fw_grade_judging *jg, struct fw_buf *rec, char *err,
			  size_t errlen);

#endif
