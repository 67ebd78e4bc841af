/*
 * fw_mp.c — msgpack views, validation, paths and record editing.
 * See fw_mp.h for the contracts.
 */
#include "fw_mp.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- byte buffer ------------------------------------------------------ */

int fw_buf_reserve(struct fw_buf *b, size_t extra)
{
	if (b->failed) {
		errno = ENOMEM;
		return -1;
	}
	if (b->cap - b->n >= extra)
		return 0;
	size_t want = b->n + extra;
	if (want < b->n) {
		b->failed = 1;
		errno = ENOMEM;
		return -1;
	}
	size_t cap = b->cap ? b->cap : 256;
	while (cap < want)
		cap = cap > SIZE_MAX / 2 ? want : cap * 2;
	uint8_t *p = realloc(b->p, cap);
	if (!p) {
		b->failed = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

int fw_buf_append(struct fw_buf *b, const void *p, size_t n)
{
	if (fw_buf_reserve(b, n) < 0)
		return -1;
	if (n)
		memcpy(b->p + b->n, p, n);
	b->n += n;
	return 0;
}

int fw_buf_puts(struct fw_buf *b, const char *s)
{
	return fw_buf_append(b, s, strlen(s));
}

int fw_buf_printf(struct fw_buf *b, const char *fmt, ...)
{
	va_list ap;
	char tmp[256];
	va_start(ap, fmt);
	int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (k < 0)
		return -1;
	if ((size_t)k < sizeof tmp)
		return fw_buf_append(b, tmp, (size_t)k);
	if (fw_buf_reserve(b, (size_t)k + 1) < 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf((char *)b->p + b->n, (size_t)k + 1, fmt, ap);
	va_end(ap);
	b->n += (size_t)k;
	return 0;
}

void fw_buf_reset(struct fw_buf *b)
{
	assert(b);
	b->n = 0;
	b->failed = 0;
}

int fw_buf_packed(struct fw_buf *b, size_t start)
{
	assert(b && start <= b->n);
	if (!b->failed)
		return 0;
	b->n = start;
	b->failed = 0;
	errno = ENOMEM;
	return -1;
}

void fw_buf_release(struct fw_buf *b)
{
	if (!b)
		return;
	free(b->p);
	b->p = NULL;
	b->n = b->cap = 0;
	b->failed = 0;
}

static int buf_write_cb(void *data, const char *buf, size_t len)
{
	return fw_buf_append(data, buf, len);
}

void fw_buf_packer(msgpack_packer *pk, struct fw_buf *b)
{
	msgpack_packer_init(pk, b, buf_write_cb);
}

/* ---- decoding helpers ------------------------------------------------ */

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t be64(const uint8_t *p) { return (uint64_t)be32(p) << 32 | be32(p + 4); }

/*
 * Header of the value at p: how many header bytes it needs (hdr), how many
 * payload bytes follow (len), and how many child values follow (kids).
 * Returns 0, or -1 for the never-used byte 0xc1.  Reads at most 1 byte
 * beyond what hdr says; callers check hdr against what is available first
 * via the two-step call (first byte, then full header).
 */
struct hdr {
	unsigned hdr;  /* header bytes including the type byte */
	unsigned lenb; /* bytes of the length field inside the header (0: len fixed) */
	uint64_t len;  /* payload bytes */
	uint64_t kids; /* child values (map pairs count twice) */
};

/* Fills h from the first byte; h->len/kids may depend on the length field
 * which read_len() fills later.  Returns -1 for 0xc1. */
static int hdr_first(uint8_t c, struct hdr *h)
{
	h->lenb = 0;
	h->len = 0;
	h->kids = 0;
	h->hdr = 1;
	if (c <= 0x7f || c >= 0xe0)
		return 0;
	if (c >= 0x80 && c <= 0x8f) {
		h->kids = 2u * (c & 0x0f);
		return 0;
	}
	if (c >= 0x90 && c <= 0x9f) {
		h->kids = c & 0x0f;
		return 0;
	}
	if (c >= 0xa0 && c <= 0xbf) {
		h->len = c & 0x1f;
		return 0;
	}
	switch (c) {
	case 0xc0: case 0xc2: case 0xc3: return 0;
	case 0xc1: return -1;
	case 0xc4: h->hdr = 2; h->lenb = 1; return 0;             /* bin8 */
	case 0xc5: h->hdr = 3; h->lenb = 2; return 0;             /* bin16 */
	case 0xc6: h->hdr = 5; h->lenb = 4; return 0;             /* bin32 */
	case 0xc7: h->hdr = 3; h->lenb = 1; return 0;             /* ext8 (+type) */
	case 0xc8: h->hdr = 4; h->lenb = 2; return 0;             /* ext16 */
	case 0xc9: h->hdr = 6; h->lenb = 4; return 0;             /* ext32 */
	case 0xca: h->hdr = 1; h->len = 4; return 0;              /* float32 */
	case 0xcb: h->hdr = 1; h->len = 8; return 0;              /* float64 */
	case 0xcc: case 0xd0: h->len = 1; return 0;
	case 0xcd: case 0xd1: h->len = 2; return 0;
	case 0xce: case 0xd2: h->len = 4; return 0;
	case 0xcf: case 0xd3: h->len = 8; return 0;
	case 0xd4: h->hdr = 2; h->len = 1; return 0;              /* fixext1 (+type) */
	case 0xd5: h->hdr = 2; h->len = 2; return 0;
	case 0xd6: h->hdr = 2; h->len = 4; return 0;
	case 0xd7: h->hdr = 2; h->len = 8; return 0;
	case 0xd8: h->hdr = 2; h->len = 16; return 0;
	case 0xd9: h->hdr = 2; h->lenb = 1; return 0;             /* str8 */
	case 0xda: h->hdr = 3; h->lenb = 2; return 0;
	case 0xdb: h->hdr = 5; h->lenb = 4; return 0;
	case 0xdc: h->hdr = 3; h->lenb = 2; return 0;             /* array16 */
	case 0xdd: h->hdr = 5; h->lenb = 4; return 0;
	case 0xde: h->hdr = 3; h->lenb = 2; return 0;             /* map16 */
	case 0xdf: h->hdr = 5; h->lenb = 4; return 0;
	}
	return -1;
}

/* Reads the length field (p points at the type byte, h->hdr bytes
 * available). */
static void hdr_len(const uint8_t *p, struct hdr *h)
{
	if (!h->lenb)
		return;
	uint64_t v = h->lenb == 1 ? p[1] : h->lenb == 2 ? be16(p + 1) : be32(p + 1);
	switch (p[0]) {
	case 0xdc: case 0xdd: h->kids = v; break;
	case 0xde: case 0xdf: h->kids = 2 * v; break;
	default: h->len = v; break;
	}
}

ssize_t fw_mp_scan(const uint8_t *p, size_t avail, int max_depth, uint64_t *need,
		   const char **why)
{
	/* stack[d] = values still to read at depth d; depth 0 is the top. */
	uint64_t stack[FW_MP_MAX_DEPTH + 2];
	int d = 0;
	size_t pos = 0;
	/* Values still to read at every depth: one byte each is a lower bound
	 * of what the rest needs. */
	uint64_t pending = 1;
	if (max_depth <= 0 || max_depth > FW_MP_MAX_DEPTH)
		max_depth = FW_MP_MAX_DEPTH;
	stack[0] = 1;
	*need = 0;
	while (d >= 0) {
		if (stack[d] == 0) {
			d--;
			continue;
		}
		stack[d]--;
		pending--;
		if (pos >= avail) {
			*need = pos + 1 + pending;
			return 0;
		}
		struct hdr h;
		if (hdr_first(p[pos], &h) < 0) {
			*why = "invalid msgpack byte 0xc1";
			return -1;
		}
		if (avail - pos < h.hdr) {
			*need = pos + h.hdr + pending;
			return 0;
		}
		hdr_len(p + pos, &h);
		uint64_t body = h.len;
		if (avail - pos - h.hdr < body) {
			*need = pos + h.hdr + body + pending;
			return 0;
		}
		pos += h.hdr + (size_t)body;
		if (h.kids) {
			if (d + 1 > max_depth) {
				*why = "nesting too deep";
				return -1;
			}
			/* Each child is at least one byte: a count larger than the
			 * bytes left is reported as a need, never trusted. */
			if (h.kids > avail - pos) {
				*need = pos + h.kids + pending;
				return 0;
			}
			stack[++d] = h.kids;
			pending += h.kids;
		}
	}
	return (ssize_t)pos;
}

size_t fw_mp_skip(const uint8_t *p, const uint8_t *end)
{
	uint64_t need;
	const char *why;
	if (p >= end)
		return 0;
	ssize_t n = fw_mp_scan(p, (size_t)(end - p), FW_MP_MAX_DEPTH, &need, &why);
	return n > 0 ? (size_t)n : 0;
}

struct fw_mpv fw_mp_view(const uint8_t *p, const uint8_t *end)
{
	struct fw_mpv v = {NULL, 0};
	size_t n = fw_mp_skip(p, end);
	if (n) {
		v.p = p;
		v.n = n;
	}
	return v;
}

enum fw_mp_type fw_mp_type(struct fw_mpv v)
{
	if (!v.p || v.n == 0)
		return FW_MP_INVALID;
	uint8_t c = v.p[0];
	if (c <= 0x7f)
		return FW_MP_UINT;
	if (c >= 0xe0)
		return FW_MP_INT;
	if (c <= 0x8f)
		return FW_MP_MAP;
	if (c <= 0x9f)
		return FW_MP_ARRAY;
	if (c <= 0xbf)
		return FW_MP_STR;
	switch (c) {
	case 0xc0: return FW_MP_NIL;
	case 0xc2: case 0xc3: return FW_MP_BOOL;
	case 0xc4: case 0xc5: case 0xc6: return FW_MP_BIN;
	case 0xc7: case 0xc8: case 0xc9:
	case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: return FW_MP_EXT;
	case 0xca: case 0xcb: return FW_MP_FLOAT;
	case 0xcc: case 0xcd: case 0xce: case 0xcf: return FW_MP_UINT;
	case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
		int64_t x;
		return fw_mp_int(v, &x) == 0 && x >= 0 ? FW_MP_UINT : FW_MP_INT;
	}
	case 0xd9: case 0xda: case 0xdb: return FW_MP_STR;
	case 0xdc: case 0xdd: return FW_MP_ARRAY;
	case 0xde: case 0xdf: return FW_MP_MAP;
	}
	return FW_MP_INVALID;
}

const char *fw_mp_type_name(enum fw_mp_type t)
{
	static const char *names[] = {"invalid", "nil", "bool", "int", "int", "float",
				      "str", "bin", "array", "map", "ext"};
	return (unsigned)t < sizeof names / sizeof *names ? names[t] : "invalid";
}

int fw_mp_bool(struct fw_mpv v, int *out)
{
	if (v.n < 1 || (v.p[0] != 0xc2 && v.p[0] != 0xc3))
		return -1;
	*out = v.p[0] == 0xc3;
	return 0;
}

/* Signed/unsigned integer decode: *neg set when the value is negative. */
static int get_integer(struct fw_mpv v, uint64_t *mag, int64_t *sval, int *neg)
{
	if (v.n < 1)
		return -1;
	uint8_t c = v.p[0];
	const uint8_t *q = v.p + 1;
	*neg = 0;
	if (c <= 0x7f) {
		*mag = c;
		*sval = c;
		return 0;
	}
	if (c >= 0xe0) {
		*sval = (int8_t)c;
		*neg = 1;
		return 0;
	}
	switch (c) {
	case 0xcc: if (v.n < 2) return -1; *mag = q[0]; break;
	case 0xcd: if (v.n < 3) return -1; *mag = be16(q); break;
	case 0xce: if (v.n < 5) return -1; *mag = be32(q); break;
	case 0xcf: if (v.n < 9) return -1; *mag = be64(q); break;
	case 0xd0: if (v.n < 2) return -1; *sval = (int8_t)q[0]; goto sgn;
	case 0xd1: if (v.n < 3) return -1; *sval = (int16_t)be16(q); goto sgn;
	case 0xd2: if (v.n < 5) return -1; *sval = (int32_t)be32(q); goto sgn;
	case 0xd3: if (v.n < 9) return -1; *sval = (int64_t)be64(q); goto sgn;
	default: return -1;
	}
	*sval = (int64_t)*mag;
	return 0;
sgn:
	if (*sval < 0)
		*neg = 1;
	else
		*mag = (uint64_t)*sval;
	return 0;
}

int fw_mp_int(struct fw_mpv v, int64_t *out)
{
	uint64_t mag = 0;
	int64_t s = 0;
	int neg;
	if (get_integer(v, &mag, &s, &neg) < 0)
		return -1;
	if (!neg && mag > INT64_MAX)
		return -1;
	*out = neg ? s : (int64_t)mag;
	return 0;
}

int fw_mp_uint(struct fw_mpv v, uint64_t *out)
{
	uint64_t mag = 0;
	int64_t s = 0;
	int neg;
	if (get_integer(v, &mag, &s, &neg) < 0 || neg)
		return -1;
	*out = mag;
	return 0;
}

int fw_mp_double(struct fw_mpv v, double *out)
{
	if (v.n >= 5 && v.p[0] == 0xca) {
		uint32_t u = be32(v.p + 1);
		float f;
		memcpy(&f, &u, 4);
		*out = f;
		return 0;
	}
	if (v.n >= 9 && v.p[0] == 0xcb) {
		uint64_t u = be64(v.p + 1);
		memcpy(out, &u, 8);
		return 0;
	}
	uint64_t mag = 0;
	int64_t s = 0;
	int neg;
	if (get_integer(v, &mag, &s, &neg) < 0)
		return -1;
	*out = neg ? (double)s : (double)mag;
	return 0;
}

/* Payload of a str/bin/ext value: start and length; -1 if not that kind. */
static int payload(struct fw_mpv v, const uint8_t **s, size_t *n)
{
	struct hdr h;
	if (v.n < 1 || hdr_first(v.p[0], &h) < 0 || v.n < h.hdr)
		return -1;
	hdr_len(v.p, &h);
	if (v.n - h.hdr < h.len)
		return -1;
	*s = v.p + h.hdr;
	*n = (size_t)h.len;
	return 0;
}

int fw_mp_str(struct fw_mpv v, const char **s, size_t *n)
{
	if (fw_mp_type(v) != FW_MP_STR)
		return -1;
	return payload(v, (const uint8_t **)s, n);
}

int fw_mp_bin(struct fw_mpv v, const uint8_t **s, size_t *n)
{
	if (fw_mp_type(v) != FW_MP_BIN)
		return -1;
	return payload(v, s, n);
}

int fw_mp_ext(struct fw_mpv v, int8_t *type, const uint8_t **s, size_t *n)
{
	if (fw_mp_type(v) != FW_MP_EXT || payload(v, s, n) < 0)
		return -1;
	*type = (int8_t)(*s)[-1];
	return 0;
}

int64_t fw_mp_iter_init(struct fw_mp_iter *it, struct fw_mpv v)
{
	struct hdr h;
	enum fw_mp_type t = fw_mp_type(v);
	if (t != FW_MP_ARRAY && t != FW_MP_MAP)
		return -1;
	hdr_first(v.p[0], &h);
	if (v.n < h.hdr)
		return -1;
	hdr_len(v.p, &h);
	it->p = v.p + h.hdr;
	it->end = v.p + v.n;
	it->left = h.kids;
	return (int64_t)(t == FW_MP_MAP ? h.kids / 2 : h.kids);
}

int fw_mp_iter_next(struct fw_mp_iter *it, struct fw_mpv *out)
{
	if (it->left == 0)
		return 0;
	size_t n = fw_mp_skip(it->p, it->end);
	if (!n)
		return -1;
	out->p = it->p;
	out->n = n;
	it->p += n;
	it->left--;
	return 1;
}

int fw_mp_str_eq(struct fw_mpv v, const char *s, size_t n)
{
	const char *k = NULL;
	size_t kn = 0;
	/* fixstr fast path: the common case for record keys. */
	if (v.n >= 1 && (v.p[0] & 0xe0) == 0xa0)
		return (size_t)(v.p[0] & 0x1f) == n && v.n >= n + 1 && memcmp(v.p + 1, s, n) == 0;
	if (fw_mp_str(v, &k, &kn) < 0 || kn != n)
		return 0;
	return n == 0 || (k && memcmp(k, s, n) == 0);
}

int fw_mp_kind_is(struct fw_mpv rec, const char *kind)
{
	struct fw_mpv k;
	return fw_mp_get(rec, "kind", &k) == 1 && fw_mp_str_eq(k, kind, strlen(kind));
}

int fw_mp_map_get(struct fw_mpv m, const char *key, size_t keylen, struct fw_mpv *val)
{
	struct fw_mp_iter it;
	struct fw_mpv k, v;
	if (fw_mp_type(m) != FW_MP_MAP || fw_mp_iter_init(&it, m) < 0)
		return -1;
	while (fw_mp_iter_next(&it, &k) == 1) {
		if (fw_mp_iter_next(&it, &v) != 1)
			return 0;
		if (fw_mp_str_eq(k, key, keylen)) {
			*val = v;
			return 1;
		}
	}
	return 0;
}

int fw_mp_get(struct fw_mpv m, const char *key, struct fw_mpv *val)
{
	return fw_mp_map_get(m, key, strlen(key), val);
}

/* ---- paths --------------------------------------------------------------- */

struct step {
	char *key;     /* NULL for an index step */
	size_t keylen;
	int64_t index;
};

struct fw_path {
	char *src;
	size_t n;
	struct step *steps;
};

void fw_path_free(struct fw_path *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		free(p->steps[i].key);
	free(p->steps);
	free(p->src);
	free(p);
}

const char *fw_path_str(const struct fw_path *p)
{
	return p->src;
}

static int add_step(struct fw_path *p, const char *key, size_t keylen, int64_t index)
{
	struct step *s = realloc(p->steps, (p->n + 1) * sizeof *s);
	if (!s)
		return -1;
	p->steps = s;
	s = &p->steps[p->n];
	s->key = NULL;
	s->keylen = keylen;
	s->index = index;
	if (key) {
		s->key = malloc(keylen + 1);
		if (!s->key)
			return -1;
		memcpy(s->key, key, keylen);
		s->key[keylen] = 0;
	}
	p->n++;
	return 0;
}

/* Parses a double-quoted key at s[*i] (at the quote); supports \" and \\.
 * Appends the unescaped key to b.  Returns 0 or -1. */
static int quoted_key(const char *s, size_t *i, struct fw_buf *b)
{
	size_t j = *i + 1;
	fw_buf_reset(b);
	while (s[j] && s[j] != '"') {
		if (s[j] == '\\' && (s[j + 1] == '"' || s[j + 1] == '\\'))
			j++;
		if (fw_buf_append(b, &s[j], 1) < 0)
			return -1;
		j++;
	}
	if (s[j] != '"')
		return -1;
	*i = j + 1;
	return 0;
}

#define PATH_ERR(col, ...)                                                       \
	do {                                                                     \
		int k_ = snprintf(err, errlen, "path '%s': column %zu: ", s, (col) + 1); \
		if (k_ >= 0 && (size_t)k_ < errlen)                              \
			snprintf(err + k_, errlen - (size_t)k_, __VA_ARGS__);    \
		goto fail;                                                       \
	} while (0)

struct fw_path *fw_path_parse(const char *s, char *err, size_t errlen)
{
	struct fw_path *p = calloc(1, sizeof *p);
	struct fw_buf key = {0};
	if (!p || !(p->src = strdup(s))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	size_t i = 0;
	if (s[0] == 0)
		PATH_ERR((size_t)0, "empty path");
	if (s[0] != '.' && s[0] != '[') {
		/* Allow a path without its leading dot: "a.b". */
		goto ident;
	}
	while (s[i]) {
		if (s[i] == '.') {
			i++;
			if (s[i] == 0 || s[i] == '[')
				continue;
			if (s[i] == '"') {
				if (quoted_key(s, &i, &key) < 0)
					PATH_ERR(i, "unterminated quoted key");
				if (add_step(p, (char *)key.p ? (char *)key.p : "", key.n, 0) < 0)
					PATH_ERR(i, "out of memory");
				continue;
			}
ident:;
			size_t st = i;
			while (s[i] && s[i] != '.' && s[i] != '[') {
				if (s[i] == ']' || s[i] == '"' || s[i] == ' ')
					PATH_ERR(i, "unexpected '%c'", s[i]);
				i++;
			}
			if (i == st)
				PATH_ERR(i, "expected a key");
			if (add_step(p, s + st, i - st, 0) < 0)
				PATH_ERR(i, "out of memory");
		} else if (s[i] == '[') {
			i++;
			if (s[i] == '"') {
				if (quoted_key(s, &i, &key) < 0)
					PATH_ERR(i, "unterminated quoted key");
				if (s[i] != ']')
					PATH_ERR(i, "expected ']'");
				i++;
				if (add_step(p, (char *)key.p ? (char *)key.p : "", key.n, 0) < 0)
					PATH_ERR(i, "out of memory");
				continue;
			}
			char *end;
			errno = 0;
			long long v = strtoll(s + i, &end, 10);
			if (end == s + i || errno)
				PATH_ERR(i, "expected an index");
			i = (size_t)(end - s);
			if (s[i] != ']')
				PATH_ERR(i, "expected ']'");
			i++;
			if (add_step(p, NULL, 0, v) < 0)
				PATH_ERR(i, "out of memory");
		} else {
			PATH_ERR(i, "unexpected '%c'", s[i]);
		}
	}
	fw_buf_release(&key);
	return p;
fail:
	fw_buf_release(&key);
	fw_path_free(p);
	return NULL;
}

int fw_path_get(const struct fw_path *p, struct fw_mpv v, struct fw_mpv *out)
{
	for (size_t i = 0; i < p->n; i++) {
		const struct step *s = &p->steps[i];
		if (s->key) {
			if (fw_mp_map_get(v, s->key, s->keylen, &v) != 1)
				return 0;
			continue;
		}
		struct fw_mp_iter it;
		if (fw_mp_type(v) != FW_MP_ARRAY)
			return 0;
		int64_t n = fw_mp_iter_init(&it, v);
		int64_t idx = s->index < 0 ? n + s->index : s->index;
		if (idx < 0 || idx >= n)
			return 0;
		for (int64_t k = 0; k <= idx; k++)
			if (fw_mp_iter_next(&it, &v) != 1)
				return 0;
	}
	*out = v;
	return 1;
}

static int wrong_type(const struct fw_path *p, struct fw_mpv v, const char *want, char *err,
		      size_t errlen)
{
	snprintf(err, errlen, "'%s' is %s, not %s", p->src, fw_mp_type_name(fw_mp_type(v)), want);
	return -1;
}

int fw_path_str_get(const struct fw_path *p, struct fw_mpv v, const char **s, size_t *n,
		    char *err, size_t errlen)
{
	struct fw_mpv x;
	if (!fw_path_get(p, v, &x))
		return 0;
	if (fw_mp_str(x, s, n) < 0)
		return wrong_type(p, x, "str", err, errlen);
	return 1;
}

int fw_path_int_get(const struct fw_path *p, struct fw_mpv v, int64_t *out, char *err,
		    size_t errlen)
{
	struct fw_mpv x;
	if (!fw_path_get(p, v, &x))
		return 0;
	if (fw_mp_int(x, out) < 0)
		return wrong_type(p, x, "int", err, errlen);
	return 1;
}

int fw_path_double_get(const struct fw_path *p, struct fw_mpv v, double *out, char *err,
		       size_t errlen)
{
	struct fw_mpv x;
	if (!fw_path_get(p, v, &x))
		return 0;
	if (fw_mp_double(x, out) < 0)
		return wrong_type(p, x, "number", err, errlen);
	return 1;
}

/* ---- editing --------------------------------------------------------------- */

static int put_map_header(struct fw_buf *out, uint64_t n)
{
	uint8_t h[5];
	if (n < 16) {
		h[0] = (uint8_t)(0x80 | n);
		return fw_buf_append(out, h, 1);
	}
	if (n < 65536) {
		h[0] = 0xde;
		h[1] = (uint8_t)(n >> 8);
		h[2] = (uint8_t)n;
		return fw_buf_append(out, h, 3);
	}
	h[0] = 0xdf;
	h[1] = (uint8_t)(n >> 24);
	h[2] = (uint8_t)(n >> 16);
	h[3] = (uint8_t)(n >> 8);
	h[4] = (uint8_t)n;
	return fw_buf_append(out, h, 5);
}

int fw_rec_set(struct fw_buf *out, struct fw_mpv rec, const struct fw_field *f, size_t nf)
{
	struct fw_mp_iter it;
	struct fw_mpv k, v;
	int64_t pairs = fw_mp_type(rec) == FW_MP_MAP ? fw_mp_iter_init(&it, rec) : -1;
	if (pairs < 0) {
		errno = EINVAL;
		return -1;
	}
	/* found[i]: field i replaces an existing key.  Small stack array for
	 * the usual handful of fields. */
	unsigned char found_small[32];
	unsigned char *found = nf <= sizeof found_small ? found_small : calloc(nf, 1);
	if (!found)
		return -1;
	memset(found, 0, nf <= sizeof found_small ? sizeof found_small : 0);
	uint64_t count = (uint64_t)pairs;
	while (fw_mp_iter_next(&it, &k) == 1 && fw_mp_iter_next(&it, &v) == 1) {
		for (size_t i = 0; i < nf; i++) {
			if (!found[i] && fw_mp_str_eq(k, f[i].key, f[i].keylen)) {
				found[i] = 1;
				if (!f[i].val.p)
					count--;
				break;
			}
		}
	}
	for (size_t i = 0; i < nf; i++)
		if (!found[i] && f[i].val.p)
			count++;

	size_t start = out->n;
	int rc = put_map_header(out, count);
	fw_mp_iter_init(&it, rec);
	while (rc == 0 && fw_mp_iter_next(&it, &k) == 1 && fw_mp_iter_next(&it, &v) == 1) {
		size_t i;
		for (i = 0; i < nf; i++)
			if (found[i] && fw_mp_str_eq(k, f[i].key, f[i].keylen))
				break;
		if (i == nf) {
			/* Key and value are adjacent: copy them in one go. */
			rc = fw_buf_append(out, k.p, (size_t)(v.p + v.n - k.p));
		} else if (f[i].val.p) {
			rc = fw_buf_append(out, k.p, k.n);
			if (rc == 0)
				rc = fw_buf_append(out, f[i].val.p, f[i].val.n);
		}
	}
	for (size_t i = 0; rc == 0 && i < nf; i++) {
		if (found[i] || !f[i].val.p)
			continue;
		msgpack_packer pk;
		fw_buf_packer(&pk, out);
		rc = msgpack_pack_str_with_body(&pk, f[i].key, f[i].keylen);
		if (rc == 0)
			rc = fw_buf_append(out, f[i].val.p, f[i].val.n);
	}
	if (found != found_small)
		free(found);
	if (rc != 0) {
		out->n = start;
		return -1;
	}
	return 0;
}

long fw_mp_doubles(struct fw_mpv v, double **out)
{
	struct fw_mp_iter it;
	struct fw_mpv e;
	int64_t n = fw_mp_iter_init(&it, v);
	long k = 0;

	*out = NULL;
	if (n < 0 || fw_mp_type(v) != FW_MP_ARRAY)
		return -1;
	if (!(*out = malloc(sizeof(double) * (size_t)(n ? n : 1))))
		return -1;
	while (fw_mp_iter_next(&it, &e) > 0) {
		if (fw_mp_double(e, &(*out)[k])) {
			free(*out);
			*out = NULL;
			return -1;
		}
		k++;
	}
	return k;
}

int fw_pack_str(msgpack_packer *pk, const char *s, size_t n)
{
	return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, s, n);
}

int fw_pack_cstr(msgpack_packer *pk, const char *s)
{
	return fw_pack_str(pk, s, strlen(s));
}

int fw_pack_text(msgpack_packer *pk, const char *s, size_t n)
{
	const uint8_t *u = (const uint8_t *)s;
	/* sized first, so that valid text is packed without a copy */
	size_t out = fw_utf8_fix_len(s, n);

	if (msgpack_pack_str(pk, out))
		return -1;
	if (out == n)
		return msgpack_pack_str_body(pk, s, n);
	for (size_t i = 0; i < n;) {
		size_t k = fw_utf8_seq(u + i, n - i);
		if (msgpack_pack_str_body(pk, k ? s + i : "\xef\xbf\xbd", k ? k : 3))
			return -1;
		i += k ? k : 1;
	}
	return 0;
}

int fw_pack_strlist(msgpack_packer *pk, const struct fw_strlist *l)
{
	assert(l && (l->v || !l->n));
	int e = msgpack_pack_array(pk, l->n);

	for (size_t i = 0; i < l->n && !e; i++)
		e = fw_pack_cstr(pk, l->v[i]);
	return e;
}
