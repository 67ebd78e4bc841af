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

#include "fw_judge.h"
#include "fw_mp.h"

struct fw_tok;

/*
 * Takes one example record (n bytes of msgpack at p).  Returns 0, or -1
 * with a message in err.
 */
typedef int (*fw_example_fn)(void *arg, const void *p, size_t n, char *err, size_t errlen);

/*
 * What a judge's pass needs; the caller fills the first block (it owns
 * what those point to) and zeroes the rest.
 */
struct fw_grade_judging {
	struct fw_judge *judge;
	const struct fw_rubric *rubric;
	const struct fw_mix *mix;  /* NULL: grade.reward stays the tests' */
	int hacks_warn;            /* 0: a record with hacks keeps reward 0 */
	int judge_only;            /* records never graded are judged too */
	/* distillation: the student's tokenizer and positions (NULL: none),
	 * and where each example goes */
	const struct fw_tok *stok;
	int smax_pos;
	fw_example_fn put;
	void *put_arg;
	uint64_t distilled;        /* examples given to put */

	/* scratch, owned; fw_grade_judging_release() frees it */
	struct fw_verdict *verdicts;
	struct fw_buf jbuf, gbuf, rbuf, dbuf, pbuf;
};

/*
 * Allocates jg's scratch for its rubric.  Returns 0, or -1 when memory
 * runs out.
 */
int fw_grade_judging_init(struct fw_grade_judging *jg);

/* Frees jg's scratch (not what the caller's block points to).  Safe on a
 * zeroed jg. */
void fw_grade_judging_release(struct fw_grade_judging *jg);

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
