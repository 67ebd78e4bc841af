/*
 * fw_fbreport.h — what users tell us, gathered from traj records: the
 * failure categories of thumbs-down trajectories (fw_fbcat's rules, the
 * records' own tags, else "other") and the A/B verdicts between the arms
 * the votes fall into (fw_stats: Wilson intervals per arm, a bootstrap over
 * users per pair, McNemar's test when paired by item).  fb-report(1) is
 * its tool: one fw_fbreport_add() per record, fw_fbreport_finish(), then
 * the records or the text table.
 */
#ifndef FW_FBREPORT_H
#define FW_FBREPORT_H

#include <stddef.h>
#include <stdint.h>
#include "fw_mp.h"
#include "fw_stream.h"

struct fw_fbreport;

/* How votes are grouped and compared. */
struct fw_fbreport_conf {
	struct fw_path *by;        /* the arm of a record (required) */
	struct fw_path *paired_by; /* the item of a record, or NULL: unpaired */
	const char *by_src;        /* the paths as given (".model"), for output */
	const char *paired_src;    /* NULL when unpaired */
	uint64_t seed;             /* of the bootstrap */
	unsigned resamples;        /* 0: enough that each tail holds 10 */
};

/*
 * A report with nothing counted yet; the paths of conf become the report's
 * (freed by fw_fbreport_free(), even when this fails); the strings are kept
 * by pointer.  Returns the report, or NULL with err filled (out of memory).
 */
struct fw_fbreport *fw_fbreport_new(const struct fw_fbreport_conf *conf, char *err,
				    size_t errlen);

/* Frees R.  NULL does nothing. */
void fw_fbreport_free(struct fw_fbreport *R);

/*
 * Counts the traj record rec: its votes (feedback[].rating, each user a
 * cluster, a vote without a user its own) into its arm, and when it has a
 * thumbs-down its categories.  A record whose feedback or ratings have the
 * wrong type counts for nothing.  Returns 0, or -1 with err filled and
 * errno EINVAL (that record: err names the field) or ENOMEM.
 */
int fw_fbreport_add(struct fw_fbreport *R, struct fw_mpv rec, char *err, size_t errlen);

/*
 * Sorts the categories (by count, then name) and the arms (by name) and
 * compares every pair of arms, 0.05 over the number of pairs each.  Call
 * once, after the last fw_fbreport_add().  Returns 0, or -1 (ENOMEM) with
 * err filled.
 */
int fw_fbreport_finish(struct fw_fbreport *R, char *err, size_t errlen);

/*
 * Writes the finished report as records to w: {kind: "metrics", v: 1, id,
 * report: "summary" | "category" | "arm" | "pair", ...}, the id a hash of
 * the figures.  Returns 0, or -1 with err filled (out of memory, the
 * writer's error; errno EPIPE when the reader went away).
 */
int fw_fbreport_pack(const struct fw_fbreport *R, struct fw_writer *w, char *err,
		     size_t errlen);

/* Appends the finished report as the text table of fb-report(1) to out.
 * Returns 0, or -1 (ENOMEM). */
int fw_fbreport_table(const struct fw_fbreport *R, struct fw_buf *out);

#endif
