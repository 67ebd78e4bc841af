/*
 * fw_recstats.h — what a stream of records holds, as `rec stats` shows
 * it: the count and sizes of the records, the count of each `kind`, and
 * per field (top-level keys and the keys of maps one level down, as
 * ".a" and ".a.b") how often it is present, with which types, and the
 * minimum, mean and maximum of its numbers.
 */
#ifndef FW_RECSTATS_H
#define FW_RECSTATS_H

#include "fw_mp.h"

/* Fields followed; those beyond are counted as dropped and the table says
 * so. */
#define FW_RECSTATS_MAX_FIELDS 4096

struct fw_recstats;

/* An empty tally, or NULL when memory runs out.  Free with
 * fw_recstats_free(). */
struct fw_recstats *fw_recstats_new(void);

/* Counts one record (a map).  A field or kind that memory cannot be had
 * for is left out.  Cannot fail. */
void fw_recstats_add(struct fw_recstats *s, struct fw_mpv rec);

/* Appends the table to out: "records N", the bytes line when there were
 * records, the kinds in the order first seen, the fields sorted by path.
 * Returns 0, or -1 when memory runs out. */
int fw_recstats_table(struct fw_recstats *s, struct fw_buf *out);

/* Frees s.  NULL does nothing. */
void fw_recstats_free(struct fw_recstats *s);

#endif
