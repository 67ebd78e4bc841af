/*
 * fw_decontam.c — n-gram sets for decontamination.
 *
 * Each word is hashed (FNV-1a of its lowercased bytes); an n-gram's hash
 * mixes its words' hashes in order.  The set is open addressing over
 * 64-bit keys with linear probing, kept at most half full.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fw_decontam.h"

struct slot {
	uint64_t key; /* 0: empty */
	uint64_t src;
};

struct fw_decontam {
	unsigned n;
	struct slot *t;
	size_t cap, used;
	/* Ring of the last n words: hash and byte span. */
	uint64_t *wh;
	size_t *ws, *we;
};

struct fw_decontam *fw_decontam_new(unsigned n)
{
	if (n == 0)
		return NULL;
	struct fw_decontam *d = calloc(1, sizeof *d);
	if (!d)
		return NULL;
	d->n = n;
	d->cap = 1024;
	d->t = calloc(d->cap, sizeof *d->t);
	d->wh = calloc(n, sizeof *d->wh);
	d->ws = calloc(n, sizeof *d->ws);
	d->we = calloc(n, sizeof *d->we);
	if (!d->t || !d->wh || !d->ws || !d->we) {
		fw_decontam_free(d);
		return NULL;
	}
	return d;
}

void fw_decontam_free(struct fw_decontam *d)
{
	if (!d)
		return;
	free(d->t);
	free(d->wh);
	free(d->ws);
	free(d->we);
	free(d);
}

size_t fw_decontam_size(const struct fw_decontam *d)
{
	return d->used;
}

static int word_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c >= 0x80;
}

static unsigned char lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Hash of the n-gram ending at ring position last (the newest word). */
static uint64_t gram_hash(const struct fw_decontam *d, size_t last)
{
	uint64_t h = 0x243f6a8885a308d3ULL;
	for (unsigned k = 0; k < d->n; k++) {
		size_t j = (last + 1 + k) % d->n;
		h = mix(h ^ d->wh[j]);
	}
	return h ? h : 1;
}

static struct slot *find(const struct fw_decontam *d, uint64_t key)
{
	size_t i = (size_t)key & (d->cap - 1);
	while (d->t[i].key && d->t[i].key != key)
		i = (i + 1) & (d->cap - 1);
	return &d->t[i];
}

static int grow(struct fw_decontam *d)
{
	size_t ncap = d->cap * 2;
	struct slot *nt = calloc(ncap, sizeof *nt), *old = d->t;
	if (!nt)
		return -1;
	size_t ocap = d->cap;
	d->t = nt;
	d->cap = ncap;
	for (size_t i = 0; i < ocap; i++)
		if (old[i].key)
			*find(d, old[i].key) = old[i];
	free(old);
	return 0;
}

/*
 * Walks the words of s and calls fn(d, gram hash, start, end, arg) for each
 * complete n-gram (start and end span its bytes).  Stops when fn returns
 * non-zero and returns that value; returns 0 at the end.
 */
typedef int (*gram_fn)(struct fw_decontam *d, uint64_t h, size_t start, size_t end, void *arg);

static int walk(struct fw_decontam *d, const char *s, size_t len, gram_fn fn, void *arg)
{
	size_t i = 0, nwords = 0, pos = 0;
	while (i < len) {
		while (i < len && !word_byte((unsigned char)s[i]))
			i++;
		if (i == len)
			break;
		size_t st = i;
		uint64_t h = 0xcbf29ce484222325ULL;
		while (i < len && word_byte((unsigned char)s[i])) {
			h ^= lower((unsigned char)s[i]);
			h *= 0x100000001b3ULL;
			i++;
		}
		pos = nwords % d->n;
		d->wh[pos] = h;
		d->ws[pos] = st;
		d->we[pos] = i;
		nwords++;
		if (nwords >= d->n) {
			size_t first = (pos + 1) % d->n;
			int r = fn(d, gram_hash(d, pos), d->ws[first], i, arg);
			if (r)
				return r;
		}
	}
	return 0;
}

struct add_arg {
	uint64_t src;
	int64_t count;
};

static int add_one(struct fw_decontam *d, uint64_t h, size_t start, size_t end, void *arg)
{
	struct add_arg *a = arg;
	if ((d->used + 1) * 2 > d->cap && grow(d) < 0)
		return -1;
	struct slot *s = find(d, h);
	if (!s->key) {
		s->key = h;
		s->src = a->src;
		d->used++;
	}
	a->count++;
	return 0;
}

int64_t fw_decontam_add(struct fw_decontam *d, const char *s, size_t len, uint64_t src)
{
	struct add_arg a = {src, 0};
	if (walk(d, s, len, add_one, &a) < 0) {
		errno = ENOMEM;
		return -1;
	}
	return a.count;
}

static int64_t add_str(struct fw_decontam *d, struct fw_mpv v, uint64_t src, int *found)
{
	const char *s;
	size_t n;
	if (fw_mp_str(v, &s, &n) < 0)
		return 0;
	*found = 1;
	return fw_decontam_add(d, s, n, src);
}

static int64_t add_all(struct fw_decontam *d, struct fw_mpv v, uint64_t src)
{
	int found;
	enum fw_mp_type t = fw_mp_type(v);
	if (t == FW_MP_STR)
		return add_str(d, v, src, &found);
	if (t != FW_MP_ARRAY && t != FW_MP_MAP)
		return 0;
	struct fw_mp_iter it;
	struct fw_mpv x;
	int64_t total = 0;
	fw_mp_iter_init(&it, v);
	while (fw_mp_iter_next(&it, &x) == 1) {
		if (t == FW_MP_MAP && fw_mp_iter_next(&it, &x) != 1)
			break;
		int64_t k = add_all(d, x, src);
		if (k < 0)
			return -1;
		total += k;
	}
	return total;
}

int64_t fw_decontam_add_record(struct fw_decontam *d, struct fw_mpv rec, uint64_t src)
{
	static const char *fields[] = {"prompt", "text", "question", "problem_statement"};
	int found = 0;
	int64_t total = 0, k;
	struct fw_mpv v, task, turns, t;
	for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
		if (fw_mp_get(rec, fields[i], &v) == 1) {
			if ((k = add_str(d, v, src, &found)) < 0)
				return -1;
			total += k;
		}
	}
	if (fw_mp_get(rec, "task", &task) == 1 && fw_mp_get(task, "prompt", &v) == 1) {
		if ((k = add_str(d, v, src, &found)) < 0)
			return -1;
		total += k;
	}
	if (fw_mp_get(rec, "turns", &turns) == 1 && fw_mp_type(turns) == FW_MP_ARRAY) {
		struct fw_mp_iter it;
		struct fw_mpv role;
		fw_mp_iter_init(&it, turns);
		found = 1;
		while (fw_mp_iter_next(&it, &t) == 1) {
			if (fw_mp_get(t, "role", &role) != 1 || !fw_mp_str_eq(role, "user", 4))
				continue;
			if (fw_mp_get(t, "text", &v) == 1) {
				if ((k = add_str(d, v, src, &found)) < 0)
					return -1;
				total += k;
			}
		}
	}
	if (!found)
		return add_all(d, rec, src);
	return total;
}

struct check_arg {
	struct fw_decontam_hit *hit;
	const char *s;
};

static int check_one(struct fw_decontam *d, uint64_t h, size_t start, size_t end, void *arg)
{
	struct check_arg *a = arg;
	struct slot *s = find(d, h);
	if (!s->key)
		return 0;
	if (a->hit) {
		a->hit->src = s->src;
		a->hit->text = a->s;
		a->hit->start = start;
		a->hit->end = end;
	}
	return 1;
}

int fw_decontam_check(const struct fw_decontam *d, const char *s, size_t len,
		      struct fw_decontam_hit *hit)
{
	struct check_arg a = {hit, s};
	/* walk() only writes the word ring, which is scratch space: the set
	 * itself is not modified by a check. */
	return walk((struct fw_decontam *)d, s, len, check_one, &a) == 1;
}

int fw_decontam_check_record(const struct fw_decontam *d, struct fw_mpv v,
			     struct fw_decontam_hit *hit)
{
	enum fw_mp_type t = fw_mp_type(v);
	if (t == FW_MP_STR) {
		const char *s;
		size_t n;
		fw_mp_str(v, &s, &n);
		return fw_decontam_check(d, s, n, hit);
	}
	if (t != FW_MP_ARRAY && t != FW_MP_MAP)
		return 0;
	struct fw_mp_iter it;
	struct fw_mpv x;
	fw_mp_iter_init(&it, v);
	while (fw_mp_iter_next(&it, &x) == 1) {
		if (t == FW_MP_MAP && fw_mp_iter_next(&it, &x) != 1)
			break;
		if (fw_decontam_check_record(d, x, hit))
			return 1;
	}
	return 0;
}

int fw_decontam_words(struct fw_buf *out, const char *s, size_t len)
{
	size_t i = 0;
	int first = 1;
	while (i < len) {
		while (i < len && !word_byte((unsigned char)s[i]))
			i++;
		if (i == len)
			break;
		if (!first && fw_buf_append(out, " ", 1) < 0)
			return -1;
		first = 0;
		while (i < len && word_byte((unsigned char)s[i])) {
			unsigned char c = lower((unsigned char)s[i++]);
			if (fw_buf_append(out, &c, 1) < 0)
				return -1;
		}
	}
	return 0;
}
