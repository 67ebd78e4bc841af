/*
 * fw_select.h — choosing records from a stream, as traj-filter(1) does:
 * a set of keys seen (--dedup), a uniform sample of k records kept to the
 * end (--sample N), the hashes that place a record in a sample or a split
 * independently of --shard, the created date of a task or a rollout
 * (--created-after/--created-before), and the eval items that
 * decontamination drops records for (--decontam FILE).
 */
#ifndef FW_SELECT_H
#define FW_SELECT_H

#include <stddef.h>
#include <stdint.h>
#include "fw_decontam.h"
#include "fw_mp.h"

/* ---- keys seen -------------------------------------------------------------- */

/* A set of 128-bit keys (two independent 64-bit hashes of the bytes, so
 * that a collision needs both).  Zero-initialise; fw_keyset_release()
 * frees. */
struct fw_keyset {
	uint64_t (*k)[2];
	size_t cap, used;
};

/* Adds the key of the n bytes at p.  Returns 1 when it was new, 0 when it
 * was there, -1 when memory ran out. */
int fw_keyset_add(struct fw_keyset *s, const void *p, size_t n);

/* Frees the keys; s is empty and reusable.  NULL does nothing. */
void fw_keyset_release(struct fw_keyset *s);

/* ---- a sample of k ---------------------------------------------------------- */

/* A record the sample keeps: its key, its place in the input, a copy. */
struct fw_sample_rec {
	uint64_t key, order;
	uint8_t *p;
	size_t n;
};

/* The k records with the smallest keys among those offered (on a tie the
 * earlier one), so that with random keys every k-subset is as likely.
 * Fill with fw_sample_init(). */
struct fw_sample {
	struct fw_sample_rec *r; /* a max-heap on key until fw_sample_sort() */
	uint64_t k, n, order;
};

/* Makes room for k records.  Returns 0, or -1 (ENOMEM). */
int fw_sample_init(struct fw_sample *S, uint64_t k);

/* Offers the record v under key; it is copied when kept.  Returns 0, or
 * -1 when memory ran out. */
int fw_sample_offer(struct fw_sample *S, uint64_t key, struct fw_mpv v);

/* Puts the kept records S->r[0..S->n) in input order; offer no more after.
 * Cannot fail. */
void fw_sample_sort(struct fw_sample *S);

/* Frees the copies and the room.  NULL does nothing. */
void fw_sample_release(struct fw_sample *S);

/* ---- hashes and dates --------------------------------------------------------- */

/* The record's key in a sample of seed: its id hash (fw_shard_hash(), the
 * hash --shard uses) mixed with the seed.  Cannot fail. */
uint64_t fw_select_key(struct fw_mpv rec, uint64_t seed);

/* The top 53 bits of h as a number in [0, 1): independent of the low bits
 * that --shard uses.  Cannot fail. */
double fw_select_unit(uint64_t h);

/* The split the record falls in: the first i with unit(id hash) < upto[i],
 * upto[0..n) (n >= 1) the rising cumulative fractions; n - 1 past them.
 * Cannot fail. */
int fw_select_split(struct fw_mpv rec, const double *upto, int n);

/* The record's created date, its own or its task's (task.created): ISO
 * 8601 text or seconds since the epoch, into *t.  Returns 0, or -1 when it
 * has none that reads. */
int fw_select_created(struct fw_mpv rec, int64_t *t);

/* Bounds on the created date, each exclusive (seconds since the epoch). */
struct fw_select_dates {
	int has_after, has_before;
	int64_t after, before;
};

/* Whether the record was created between the bounds of d: 1 yes (or no
 * bound is set), 0 outside them, -1 without a created date.  Cannot fail. */
int fw_select_dated(const struct fw_select_dates *d, struct fw_mpv rec);

/*
 * Parses --split's "NAME=FRAC,..." in place (spec is cut at ',' and '='):
 * names[i] points into spec, upto[i] the cumulative fraction, the last
 * exactly 1.  A name is not empty, has no '/' or ' ' and is given once;
 * each fraction is in (0, 1] and they add up to 1 (within 1e-6).  Returns
 * the number of splits (1 to max), or -1 when spec is not such a list.
 */
int fw_select_parse_splits(char *spec, char **names, double *upto, int max);

/* ---- decontamination sources ---------------------------------------------- */

/* What one source added. */
struct fw_select_eval {
	uint64_t texts;  /* items read */
	uint64_t grams;  /* n-grams in them */
	uint64_t shorts; /* items too short to have an n-gram */
	uint64_t added;  /* n-grams new to dc */
};

/*
 * Adds the eval items of the file at path to dc: a record stream (msgpack,
 * zstd), JSON Lines of objects, or plain text (one item).  Record r of
 * source f is remembered as f << 40 | (r + 1), plain text as f << 40, so
 * that a hit names its item.  Returns 0 with *out filled, or -1 with err
 * filled ("PATH: REASON", "PATH: line N: REASON", a record's position,
 * "out of memory").
 */
int fw_select_eval_load(struct fw_decontam *dc, int f, const char *path,
			struct fw_select_eval *out, char *err, size_t errlen);

/* Appends why the record rec was dropped for hit, NUL-terminated, to out:
 * "id ID: dropped: shares \"WORDS\" with FILE record N" (without the
 * record for a plain text source), files[f] the name of source f.
 * Returns 0, or -1 when memory ran out (out may hold a part). */
int fw_select_hit_text(struct fw_buf *out, struct fw_mpv rec,
		       const struct fw_decontam_hit *hit, const char *const *files);

#endif
