/*
 * fw_teach_run.h — teaching one rollout record, as teach(1) does for each
 * record it reads: its hints (environment, rules, the group's demo, a
 * model), the teacher's credit on its tokens with the hints in context,
 * the credit split against the group's correct solution, and the record
 * with its `teach` field; then the tallies of a run (how many hinted
 * records got credit, and why not).
 *
 * A worker (struct fw_teach_worker) holds the teachers and the tokenizer a
 * thread has opened; one worker is used by one thread at a time, and
 * records taught on different workers give the same bytes.
 */
#ifndef FW_TEACH_RUN_H
#define FW_TEACH_RUN_H

#include <stddef.h>
#include <stdint.h>
#include "fw_mp.h"
#include "fw_teach.h"

/* What every record is taught with. */
struct fw_teach_conf {
	int use_env;               /* environment hints */
	int no_teacher;            /* --teacher none: hints only */
	struct fw_teach_rules *rules; /* rule hints, or NULL */
	const char *teacher;       /* builtin:DIR or http:URL; NULL: policy.ckpt */
	const char *hint_spec;     /* model hints: builtin:DIR, http:URL, policy; or NULL */
	const char *tokenizer;     /* an http teacher's tokenizer.json, or NULL */
	double clip, timeout_s;    /* bound of each advantage; of an http request */
	size_t max_chars;          /* bytes of an environment hint */
	size_t demo_chars;         /* bytes of a demo hint */
	int topk;                  /* the teacher's top tokens kept per credited
				    * token (teach.topk), 0: none */
	struct fw_teach_hint_opts ho;
};

/* "builtin:DIR" or "http:URL" (not empty after the colon): 0, else -1. */
int fw_teach_spec_ok(const char *spec);

/*
 * Parses the --hints list ("env,rules,demo,model:SPEC", SPEC policy or as
 * fw_teach_spec_ok() wants) in place, cut at each ',': sets C->use_env
 * and C->hint_spec (pointing into list, which must outlive C), *rules and
 * *demo, each 0 when not named.  Returns NULL, or the first source that is
 * none of these (in list).
 */
const char *fw_teach_parse_hints(char *list, struct fw_teach_conf *C, int *rules, int *demo);

struct fw_teach_worker;

/* A worker with nothing open.  NULL when out of memory.  Caller frees with
 * fw_teach_worker_free(). */
struct fw_teach_worker *fw_teach_worker_new(void);

/* Frees W and what it opened.  NULL does nothing. */
void fw_teach_worker_free(struct fw_teach_worker *W);

/* What teaching one record gave.  Zero-initialise; fw_teach_one() resets
 * it; fw_teach_result_release() frees. */
struct fw_teach_result {
	struct fw_buf out;     /* the record to write (n 0: none) */
	struct fw_buf diag;    /* diagnostics, one a line, without position */
	int bad;               /* the record is counted as an error */
	int hinted, credited;  /* the record has hints; they gave it credit */
	char omitted[160];     /* why not, digits as N ("" when credited) */
	/* credit on the policy tokens that differ from the group's correct
	 * solution, and on the rest: sums and counts (split 0: no such
	 * comparison for this record) */
	int split;
	double sum_diff, sum_rest;
	long n_diff, n_rest;
};

/* Frees the buffers of r.  NULL does nothing. */
void fw_teach_result_release(struct fw_teach_result *r);

/*
 * Teaches the rollout record rec on worker W: hints as C asks (demo, when
 * demo.n, is the resolved record of rec's group), credit from the teacher
 * (C->teacher, else the record's policy.ckpt; none with C->no_teacher),
 * and into res->out rec with its `teach` field: hints, adv or adv_omitted,
 * the teacher when it is not the rollout's own, hint_error, adv_split.  A
 * teacher that cannot be had or cannot score leaves adv_omitted saying why;
 * an unreadable record, a failed diff with the demo or no memory sets
 * res->bad with a line in res->diag (and res->out empty when no record
 * could be made).  Cannot fail otherwise.
 */
void fw_teach_one(const struct fw_teach_conf *C, struct fw_teach_worker *W, struct fw_mpv rec,
		  struct fw_mpv demo, struct fw_teach_result *res);

/* A record to teach and what teaching it gave, for a worker pool. */
struct fw_teach_job {
	struct fw_buf rec, demo;    /* copies; demo.n 0: none */
	const char *file;           /* where rec was read (not copied) */
	uint64_t index, offset;     /* and at which record and byte */
	struct fw_teach_result res; /* fw_teach_one()'s */
};

/* A job with copies of rec and demo (demo.n 0: none).  NULL when out of
 * memory.  Caller frees with fw_teach_job_free(). */
struct fw_teach_job *fw_teach_job_new(const char *file, uint64_t index, uint64_t offset,
				      struct fw_mpv rec, struct fw_mpv demo);

/* Frees J with its copies and result.  NULL does nothing. */
void fw_teach_job_free(struct fw_teach_job *J);

/* ---- tallies ----------------------------------------------------------------- */

enum { FW_TEACH_NOMIT = 8 };

/* The tallies of a run.  Zero-initialise. */
struct fw_teach_tally {
	uint64_t hinted, credited;
	double sum_diff, sum_rest;
	long n_diff, n_rest, n_split;
	/* why hinted records got no credit: past FW_TEACH_NOMIT distinct
	 * reasons the last holds "other reasons" */
	struct { char why[160]; uint64_t n; } omit[FW_TEACH_NOMIT];
	int nomit;
};

/* Counts one result.  Cannot fail. */
void fw_teach_tally_add(struct fw_teach_tally *t, const struct fw_teach_result *r);

/* Appends the summary lines of t to out, each starting "PROG: " (nothing
 * when no record was hinted or compared).  Returns 0, or -1 (ENOMEM). */
int fw_teach_tally_text(const struct fw_teach_tally *t, const char *prog, struct fw_buf *out);

/* ---- groups -------------------------------------------------------------------- */

/* Consecutive records of one group (fw_teach_group_key()), copied, so that
 * each is taught with the group's first resolved record as its demo.
 * Zero-initialise; fw_teach_group_release() frees. */
struct fw_teach_group {
	struct fw_buf data;
	struct { size_t off, n; uint64_t index, offset; } *r;
	size_t n, cap;
	int has;      /* the records have a group key */
	uint64_t key;
};

/* 1 when a record of key (has: it has one) cannot join G's records: G has
 * some and they or it have no key, or another key.  Cannot fail. */
int fw_teach_group_ends(const struct fw_teach_group *G, int has, uint64_t key);

/* Appends a copy of the record rec (read at index, offset).  0, or -1
 * (ENOMEM). */
int fw_teach_group_add(struct fw_teach_group *G, struct fw_mpv rec, uint64_t index,
		       uint64_t offset, int has, uint64_t key);

/* Record i of G (i < G->n).  Cannot fail. */
struct fw_mpv fw_teach_group_rec(const struct fw_teach_group *G, size_t i);

/* The demo of G's records: its first resolved record when the records have
 * a key; else demo.n is 0.  Cannot fail. */
struct fw_mpv fw_teach_group_demo(const struct fw_teach_group *G);

/* Empties G, keeping its memory.  Cannot fail. */
void fw_teach_group_reset(struct fw_teach_group *G);

/* Frees G's memory; G is empty.  NULL does nothing. */
void fw_teach_group_release(struct fw_teach_group *G);

#endif
