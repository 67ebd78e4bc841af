/*
 * fw_select.c — keys seen, samples, split and sample hashes, created
 * dates and decontamination sources for choosing records.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_base.h"
#include "fw_cli.h"
#include "fw_decontam.h"
#include "fw_history.h"
#include "fw_json.h"
#include "fw_mp.h"
#include "fw_select.h"
#include "fw_stream.h"

/* ---- keys seen -------------------------------------------------------------- */

/* Second hash of a key, independent of FNV-1a. */
static uint64_t hash_b(const uint8_t *p, size_t n)
{
	uint64_t h = 0x6a09e667f3bcc909ULL ^ n;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = fw_mix64(h ^ w);
	}
	uint64_t w = 0;
	memcpy(&w, p + i, n - i);
	return fw_mix64(h ^ w ^ ((uint64_t)(n - i) << 56));
}

int fw_keyset_add(struct fw_keyset *s, const void *p, size_t n)
{
	uint64_t a = fw_hash64(p, n), b = hash_b(p, n);

	/* (0, 0) marks an empty slot */
	if (a == 0 && b == 0)
		a = 1;
	if ((s->used + 1) * 2 > s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 1024;
		uint64_t(*nk)[2] = calloc(ncap, sizeof *nk);
		if (!nk)
			return -1;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->k[i][0] && !s->k[i][1])
				continue;
			size_t j = s->k[i][0] & (ncap - 1);
			while (nk[j][0] || nk[j][1])
				j = (j + 1) & (ncap - 1);
			nk[j][0] = s->k[i][0];
			nk[j][1] = s->k[i][1];
		}
		free(s->k);
		s->k = nk;
		s->cap = ncap;
	}
	size_t j = a & (s->cap - 1);
	while (s->k[j][0] || s->k[j][1]) {
		if (s->k[j][0] == a && s->k[j][1] == b)
			return 0;
		j = (j + 1) & (s->cap - 1);
	}
	s->k[j][0] = a;
	s->k[j][1] = b;
	s->used++;
	return 1;
}

void fw_keyset_release(struct fw_keyset *s)
{
	if (!s)
		return;
	free(s->k);
	s->k = NULL;
	s->cap = s->used = 0;
}

/* ---- a sample of k ---------------------------------------------------------- */

static int kept_less(const struct fw_sample_rec *a, const struct fw_sample_rec *b)
{
	return a->key < b->key || (a->key == b->key && a->order < b->order);
}

static void heap_down(struct fw_sample_rec *h, uint64_t n, uint64_t i)
{
	for (;;) {
		uint64_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && kept_less(&h[m], &h[l]))
			m = l;
		if (r < n && kept_less(&h[m], &h[r]))
			m = r;
		if (m == i)
			return;
		struct fw_sample_rec t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static void heap_up(struct fw_sample_rec *h, uint64_t i)
{
	while (i > 0) {
		uint64_t pa = (i - 1) / 2;
		if (!kept_less(&h[pa], &h[i]))
			return;
		struct fw_sample_rec t = h[i];
		h[i] = h[pa];
		h[pa] = t;
		i = pa;
	}
}

int fw_sample_init(struct fw_sample *S, uint64_t k)
{
	memset(S, 0, sizeof *S);
	S->k = k;
	if (!(S->r = calloc(k ? k : 1, sizeof *S->r))) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

int fw_sample_offer(struct fw_sample *S, uint64_t key, struct fw_mpv v)
{
	struct fw_sample_rec k = {key, S->order++, NULL, v.n};
	if (S->n == S->k && !kept_less(&k, &S->r[0]))
		return 0;
	if (!(k.p = malloc(v.n ? v.n : 1)))
		return -1;
	memcpy(k.p, v.p, v.n);
	if (S->n < S->k) {
		S->r[S->n] = k;
		heap_up(S->r, S->n++);
	} else {
		free(S->r[0].p);
		S->r[0] = k;
		heap_down(S->r, S->n, 0);
	}
	return 0;
}

static int by_order(const void *x, const void *y)
{
	const struct fw_sample_rec *a = x, *b = y;
	return a->order < b->order ? -1 : a->order > b->order;
}

void fw_sample_sort(struct fw_sample *S)
{
	if (S->n)
		qsort(S->r, S->n, sizeof *S->r, by_order);
}

void fw_sample_release(struct fw_sample *S)
{
	if (!S)
		return;
	for (uint64_t i = 0; i < S->n; i++)
		free(S->r[i].p);
	free(S->r);
	memset(S, 0, sizeof *S);
}

/* ---- hashes and dates --------------------------------------------------------- */

uint64_t fw_select_key(struct fw_mpv rec, uint64_t seed)
{
	return fw_mix64(fw_shard_hash(rec) ^ fw_mix64(seed));
}

double fw_select_unit(uint64_t h)
{
	return (double)(h >> 11) / 9007199254740992.0;
}

int fw_select_split(struct fw_mpv rec, const double *upto, int n)
{
	double u = fw_select_unit(fw_shard_hash(rec));
	int i = 0;
	while (i < n - 1 && u >= upto[i])
		i++;
	return i;
}

int fw_select_created(struct fw_mpv v, int64_t *t)
{
	struct fw_mpv c, task;
	const char *s;
	size_t n;
	if (fw_mp_get(v, "created", &c) != 1 &&
	    (fw_mp_get(v, "task", &task) != 1 || fw_mp_get(task, "created", &c) != 1))
		return -1;
	if (fw_mp_str(c, &s, &n) == 0)
		return fw_time_parse(s, n, t);
	return fw_mp_int(c, t);
}

int fw_select_dated(const struct fw_select_dates *d, struct fw_mpv rec)
{
	int64_t t;
	if (!d->has_after && !d->has_before)
		return 1;
	if (fw_select_created(rec, &t) < 0)
		return -1;
	return !((d->has_after && t <= d->after) || (d->has_before && t >= d->before));
}

int fw_select_parse_splits(char *spec, char **names, double *upto, int max)
{
	double total = 0;
	char *save = NULL;
	int n = 0;
	for (char *tok = strtok_r(spec, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		double f;
		if (!eq || eq == tok || fw_parse_double(eq + 1, &f) < 0 || !(f > 0) || f > 1)
			return -1;
		*eq = 0;
		for (const char *c = tok; *c; c++)
			if (*c == '/' || *c == ' ')
				return -1;
		for (int i = 0; i < n; i++)
			if (!strcmp(names[i], tok))
				return -1;
		if (n == max)
			return -1;
		total += f;
		names[n] = tok;
		upto[n] = total;
		n++;
	}
	if (n == 0 || total < 0.999999 || total > 1.000001)
		return -1;
	upto[n - 1] = 1.0;
	return n;
}

/* ---- decontamination sources ---------------------------------------------- */

/* Counts one item's n-grams g (< 0: out of memory) into out.  0 or -1. */
static int count_item(struct fw_select_eval *out, int64_t g, char *err, size_t errlen)
{
	if (g < 0) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	out->texts++;
	out->shorts += g == 0;
	out->grams += (uint64_t)g;
	return 0;
}

/* The items of a record stream. */
static int load_records(struct fw_decontam *dc, uint64_t base, const uint8_t *p, size_t n,
			const char *path, struct fw_select_eval *out, char *err, size_t errlen)
{
	struct fw_reader *r = fw_reader_memopen(p, n, path, NULL);
	struct fw_rec rec;
	int k, rc = 0;

	if (!r) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	while ((k = fw_reader_next(r, &rec)) == 1)
		if (count_item(out, fw_decontam_add_record(dc, rec.v, base | (rec.index + 1)), err,
			       errlen) < 0) {
			rc = -1;
			break;
		}
	if (!rc && k < 0) {
		fw_reader_fault(r, err, errlen);
		rc = -1;
	}
	fw_reader_close(r);
	return rc;
}

/* The items of JSON Lines of objects. */
static int load_jsonl(struct fw_decontam *dc, uint64_t base, const uint8_t *p, size_t n,
		      const char *path, struct fw_select_eval *out, char *err, size_t errlen)
{
	struct fw_buf mp = {0};
	uint64_t line = 1;
	size_t pos = 0;
	int rc = 0;

	for (;;) {
		size_t used;
		struct fw_json_err e;
		fw_buf_reset(&mp);
		int k = fw_json_to_mp(&mp, (const char *)p + pos, n - pos, 1, &used, &e);
		if (k == 0)
			break;
		if (k != 1) {
			for (size_t j = pos; j < pos + e.at && j < n; j++)
				line += p[j] == '\n';
			fw_seterr(err, errlen, "%s: line %llu: %s", path, (unsigned long long)line,
				  e.msg);
			rc = -1;
			break;
		}
		for (size_t j = pos; j < pos + used; j++)
			line += p[j] == '\n';
		pos += used;
		if (count_item(out, fw_decontam_add_record(dc, (struct fw_mpv){mp.p, mp.n},
							   base | (out->texts + 1)),
			       err, errlen) < 0) {
			rc = -1;
			break;
		}
	}
	fw_buf_release(&mp);
	return rc;
}

int fw_select_eval_load(struct fw_decontam *dc, int f, const char *path,
			struct fw_select_eval *out, char *err, size_t errlen)
{
	size_t n, i = 0, before = fw_decontam_size(dc);
	uint8_t *p = (uint8_t *)fw_read_file(path, 0, &n);
	uint64_t base = (uint64_t)f << 40;
	int rc;

	memset(out, 0, sizeof *out);
	if (!p) {
		fw_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	int is_mp = n >= 4 && ((p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd) ||
			       (p[0] & 0xf0) == 0x80 || p[0] == 0xde || p[0] == 0xdf);
	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
		i++;
	if (is_mp) {
		rc = load_records(dc, base, p, n, path, out, err, errlen);
	} else if (i < n && p[i] == '{') {
		rc = load_jsonl(dc, base, p, n, path, out, err, errlen);
	} else {
		rc = count_item(out, fw_decontam_add(dc, (const char *)p, n, base), err, errlen);
	}
	out->added = fw_decontam_size(dc) - before;
	free(p);
	return rc;
}

int fw_select_hit_text(struct fw_buf *out, struct fw_mpv rec,
		       const struct fw_decontam_hit *hit, const char *const *files)
{
	struct fw_buf words = {0};
	struct fw_mpv idv;
	const char *s;
	size_t n;
	int rc;

	rc = fw_decontam_words(&words, hit->text + hit->start, hit->end - hit->start);
	rc |= fw_buf_append(&words, "", 1);
	if (fw_mp_get(rec, "id", &idv) != 1 || fw_mp_str(idv, &s, &n) < 0)
		s = "?", n = 1;
	const char *df = files[hit->src >> 40];
	unsigned long long di = hit->src & ((1ULL << 40) - 1);
	const char *w = words.p ? (const char *)words.p : "";
	if (di)
		rc |= fw_buf_printf(out, "id %.*s: dropped: shares \"%s\" with %s record %llu",
				    (int)n, s, w, df, di);
	else
		rc |= fw_buf_printf(out, "id %.*s: dropped: shares \"%s\" with %s", (int)n, s, w,
				    df);
	rc |= fw_buf_append(out, "", 1);
	fw_buf_release(&words);
	return rc ? -1 : 0;
}
