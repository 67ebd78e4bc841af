/*
 * fw_recsample.c — reservoir sampling of records.  See fw_recsample.h.
 *
 * Record i (from 0) takes slot i while the reservoir fills, then a slot
 * drawn from [0, i] and kept only when it is one of the k: each record
 * ends up kept with probability k / n.  The order a record came in goes
 * with it, so the sample is put back in input order at the end.
 */
#include "fw_recsample.h"

#include <stdlib.h>
#include <string.h>

#include "fw_base.h"

struct kept {
	uint64_t order;
	uint8_t *p;
	size_t n;
};

struct fw_recsample {
	struct kept *slots;
	uint64_t k, seen, rng;
};

struct fw_recsample *fw_recsample_new(uint64_t k, uint64_t seed)
{
	struct fw_recsample *s = calloc(1, sizeof *s);
	if (!s || !(s->slots = calloc(k ? k : 1, sizeof(struct kept)))) {
		free(s);
		return NULL;
	}
	s->k = k;
	s->rng = seed;
	return s;
}

int fw_recsample_add(struct fw_recsample *s, struct fw_mpv rec)
{
	uint64_t j = s->seen < s->k ? s->seen : fw_rand64(&s->rng) % (s->seen + 1);
	uint64_t order = s->seen++;
	if (j >= s->k)
		return 0;
	/* kept records are copied out of the reader's buffer */
	uint8_t *p = malloc(rec.n ? rec.n : 1);
	if (!p)
		return -1;
	memcpy(p, rec.p, rec.n);
	free(s->slots[j].p);
	s->slots[j] = (struct kept){ order, p, rec.n };
	return 0;
}

static int by_order(const void *x, const void *y)
{
	const struct kept *a = x, *b = y;
	return a->order < b->order ? -1 : a->order > b->order;
}

uint64_t fw_recsample_finish(struct fw_recsample *s)
{
	uint64_t kept = s->seen < s->k ? s->seen : s->k;
	qsort(s->slots, kept, sizeof *s->slots, by_order);
	return kept;
}

struct fw_mpv fw_recsample_get(const struct fw_recsample *s, uint64_t i)
{
	return (struct fw_mpv){ s->slots[i].p, s->slots[i].n };
}

void fw_recsample_free(struct fw_recsample *s)
{
	if (!s)
		return;
	uint64_t kept = s->seen < s->k ? s->seen : s->k;
	for (uint64_t i = 0; i < kept; i++)
		free(s->slots[i].p);
	free(s->slots);
	free(s);
}
