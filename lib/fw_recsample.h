/*
 * fw_recsample.h — k records of a stream chosen uniformly at random, in
 * one pass and memory bounded by the k kept (a reservoir), given back in
 * the order they came in: `rec sample`.  The same seed and stream choose
 * the same records.
 */
#ifndef FW_RECSAMPLE_H
#define FW_RECSAMPLE_H

#include <stdint.h>

#include "fw_mp.h"

struct fw_recsample;

/* A sample of k records (k may be 0) drawn with seed, or NULL when memory
 * runs out.  Free with fw_recsample_free(). */
struct fw_recsample *fw_recsample_new(uint64_t k, uint64_t seed);

/* Offers the next record of the stream; a record kept is copied.  Returns
 * 0, or -1 when memory runs out. */
int fw_recsample_add(struct fw_recsample *s, struct fw_mpv rec);

/* Puts the kept records in the order they came in and returns how many
 * there are (k, or fewer when the stream was shorter); fw_recsample_get()
 * then gives them.  No record may be added afterwards.  Cannot fail. */
uint64_t fw_recsample_finish(struct fw_recsample *s);

/* Kept record i (< fw_recsample_finish()'s count), valid until
 * fw_recsample_free(). */
struct fw_mpv fw_recsample_get(const struct fw_recsample *s, uint64_t i);

/* Frees s and the records it kept.  NULL does nothing. */
void fw_recsample_free(struct fw_recsample *s);

#endif
