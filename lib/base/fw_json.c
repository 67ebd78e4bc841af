/*
 * fw_json.c — JSON <-> msgpack.  See fw_json.h.
 *
 * Both directions are single passes without a DOM: JSON text is written
 * straight from msgpack bytes, and the parser writes msgpack as it reads,
 * patching container headers when a container closes.
 */
#include "fw_json.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

/* ---- UTF-8 and base64 ------------------------------------------------- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int fw_base64_encode(struct fw_buf *out, const uint8_t *p, size_t n)
{
	if (n == 0)
		return 0;
	if (fw_buf_reserve(out, (n + 2) / 3 * 4) < 0)
		return -1;
	char *o = (char *)out->p + out->n;
	size_t i = 0;
	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*o++ = b64[v >> 18];
		*o++ = b64[(v >> 12) & 63];
		*o++ = b64[(v >> 6) & 63];
		*o++ = b64[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
		*o++ = b64[v >> 18];
		*o++ = b64[(v >> 12) & 63];
		*o++ = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		*o++ = '=';
	}
	out->n = (size_t)((uint8_t *)o - out->p);
	return 0;
}

static int b64val(char c)
{
	if (c >= 'A' && c <= 'Z') return c - 'A';
	if (c >= 'a' && c <= 'z') return c - 'a' + 26;
	if (c >= '0' && c <= '9') return c - '0' + 52;
	if (c == '+') return 62;
	if (c == '/') return 63;
	return -1;
}

int fw_base64_decode(struct fw_buf *out, const char *s, size_t n)
{
	while (n > 0 && s[n - 1] == '=')
		n--;
	if (n % 4 == 1)
		return -1;
	size_t start = out->n;
	if (fw_buf_reserve(out, n / 4 * 3 + 3) < 0)
		return -1;
	uint32_t acc = 0;
	int bits = 0;
	for (size_t i = 0; i < n; i++) {
		int v = b64val(s[i]);
		if (v < 0) {
			out->n = start;
			return -1;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out->p[out->n++] = (uint8_t)(acc >> bits);
		}
	}
	return 0;
}

/* ---- msgpack -> JSON --------------------------------------------------- */

struct enc {
	struct fw_buf *out;
	char *err;
	size_t errlen;
};

static int put_str(struct enc *e, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	if (!fw_utf8_valid((const uint8_t *)s, n)) {
		snprintf(e->err, e->errlen, "string is not valid UTF-8");
		return -1;
	}
	/* Worst case every byte becomes \u00XX. */
	if (fw_buf_reserve(e->out, n * 6 + 2) < 0)
		goto oom;
	uint8_t *o = e->out->p + e->out->n;
	*o++ = '"';
	for (size_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)s[i];
		if (c >= 0x20 && c != '"' && c != '\\') {
			*o++ = c;
			continue;
		}
		*o++ = '\\';
		switch (c) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '\n': *o++ = 'n'; break;
		case '\t': *o++ = 't'; break;
		case '\r': *o++ = 'r'; break;
		case '\b': *o++ = 'b'; break;
		case '\f': *o++ = 'f'; break;
		default:
			*o++ = 'u';
			*o++ = '0';
			*o++ = '0';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		}
	}
	*o++ = '"';
	e->out->n = (size_t)(o - e->out->p);
	return 0;
oom:
	snprintf(e->err, e->errlen, "out of memory");
	return -1;
}

/* Shortest "%.Ng" that reads back to d, with a ".0" when it would read as an
 * integer. */
static int put_double(struct enc *e, double d)
{
	char tmp[40];
	if (isnan(d) || isinf(d))
		return fw_buf_puts(e->out, isnan(d) ? "{\"$float\":\"nan\"}"
					 : d > 0  ? "{\"$float\":\"inf\"}"
						  : "{\"$float\":\"-inf\"}");
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(tmp, sizeof tmp, "%.*g", prec, d);
		if (prec == 17 || strtod(tmp, NULL) == d)
			break;
	}
	if (!strpbrk(tmp, ".eEn"))
		strcat(tmp, ".0");
	return fw_buf_puts(e->out, tmp);
}

static const char *reserved[] = {"$bin", "$ext", "$float", "$map"};

static int is_reserved(struct fw_mpv k)
{
	for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
		if (fw_mp_str_eq(k, reserved[i], strlen(reserved[i])))
			return 1;
	return 0;
}

static int enc_value(struct enc *e, struct fw_mpv v);

static int enc_map(struct enc *e, struct fw_mpv v)
{
	struct fw_mp_iter it;
	struct fw_mpv k, x;
	int64_t pairs = fw_mp_iter_init(&it, v);
	int plain = 1;
	while (fw_mp_iter_next(&it, &k) == 1 && fw_mp_iter_next(&it, &x) == 1)
		if (fw_mp_type(k) != FW_MP_STR || (pairs == 1 && is_reserved(k)))
			plain = 0;
	fw_mp_iter_init(&it, v);
	if (plain) {
		if (fw_buf_append(e->out, "{", 1) < 0)
			return -1;
		for (int64_t i = 0; i < pairs; i++) {
			const char *s;
			size_t n;
			if (fw_mp_iter_next(&it, &k) != 1 || fw_mp_iter_next(&it, &x) != 1)
				goto bad;
			if (i && fw_buf_append(e->out, ",", 1) < 0)
				return -1;
			fw_mp_str(k, &s, &n);
			if (put_str(e, s, n) < 0 || fw_buf_append(e->out, ":", 1) < 0 ||
			    enc_value(e, x) < 0)
				return -1;
		}
		return fw_buf_append(e->out, "}", 1);
	}
	if (fw_buf_puts(e->out, "{\"$map\":[") < 0)
		return -1;
	for (int64_t i = 0; i < pairs; i++) {
		if (fw_mp_iter_next(&it, &k) != 1 || fw_mp_iter_next(&it, &x) != 1)
			goto bad;
		if (fw_buf_puts(e->out, i ? ",[" : "[") < 0 || enc_value(e, k) < 0 ||
		    fw_buf_append(e->out, ",", 1) < 0 || enc_value(e, x) < 0 ||
		    fw_buf_append(e->out, "]", 1) < 0)
			return -1;
	}
	return fw_buf_puts(e->out, "]}");
bad:
	snprintf(e->err, e->errlen, "malformed msgpack map");
	return -1;
}

static int enc_value(struct enc *e, struct fw_mpv v)
{
	const char *s;
	const uint8_t *b;
	size_t n;
	int64_t i;
	uint64_t u;
	double d;
	int flag;
	int8_t et;
	switch (fw_mp_type(v)) {
	case FW_MP_NIL:
		return fw_buf_append(e->out, "null", 4);
	case FW_MP_BOOL:
		fw_mp_bool(v, &flag);
		return flag ? fw_buf_append(e->out, "true", 4) : fw_buf_append(e->out, "false", 5);
	case FW_MP_UINT:
		fw_mp_uint(v, &u);
		return fw_buf_printf(e->out, "%llu", (unsigned long long)u);
	case FW_MP_INT:
		fw_mp_int(v, &i);
		return fw_buf_printf(e->out, "%lld", (long long)i);
	case FW_MP_FLOAT:
		fw_mp_double(v, &d);
		return put_double(e, d);
	case FW_MP_STR:
		fw_mp_str(v, &s, &n);
		return put_str(e, s, n);
	case FW_MP_BIN:
		fw_mp_bin(v, &b, &n);
		if (fw_buf_puts(e->out, "{\"$bin\":\"") < 0 || fw_base64_encode(e->out, b, n) < 0)
			return -1;
		return fw_buf_puts(e->out, "\"}");
	case FW_MP_EXT:
		fw_mp_ext(v, &et, &b, &n);
		if (fw_buf_printf(e->out, "{\"$ext\":[%d,\"", et) < 0 ||
		    fw_base64_encode(e->out, b, n) < 0)
			return -1;
		return fw_buf_puts(e->out, "\"]}");
	case FW_MP_ARRAY: {
		struct fw_mp_iter it;
		struct fw_mpv x;
		int64_t cnt = fw_mp_iter_init(&it, v);
		if (fw_buf_append(e->out, "[", 1) < 0)
			return -1;
		for (int64_t k = 0; k < cnt; k++) {
			if (fw_mp_iter_next(&it, &x) != 1) {
				snprintf(e->err, e->errlen, "malformed msgpack array");
				return -1;
			}
			if (k && fw_buf_append(e->out, ",", 1) < 0)
				return -1;
			if (enc_value(e, x) < 0)
				return -1;
		}
		return fw_buf_append(e->out, "]", 1);
	}
	case FW_MP_MAP:
		return enc_map(e, v);
	default:
		snprintf(e->err, e->errlen, "malformed msgpack value");
		return -1;
	}
}

int fw_json_from_mp(struct fw_buf *out, struct fw_mpv v, char *err, size_t errlen)
{
	struct enc e = {out, err, errlen};
	size_t start = out->n;
	err[0] = 0;
	if (enc_value(&e, v) < 0) {
		if (!err[0])
			snprintf(err, errlen, "out of memory");
		out->n = start;
		return -1;
	}
	return 0;
}

int fw_json_line(struct fw_buf *out, struct fw_mpv rec, const struct fw_path *path, char *err,
		 size_t errlen)
{
	size_t start = out->n;
	struct fw_mpv v = rec;
	const char *s;
	size_t n;
	int rc;

	if (path && !fw_path_get(path, rec, &v))
		rc = fw_buf_append(out, "null", 4);
	else if (path && fw_mp_str(v, &s, &n) == 0)
		rc = fw_buf_append(out, s, n);
	else if (fw_json_from_mp(out, v, err, errlen) < 0)
		return -1;
	else
		rc = 0;
	if (rc < 0 || fw_buf_append(out, "\n", 1) < 0) {
		out->n = start;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* ---- JSON -> msgpack --------------------------------------------------- */

struct dec {
	const char *s;
	size_t n, i;
	int at_eof;
	int cut; /* ran into the end of s */
	struct fw_buf *out;
	struct fw_json_err *e;
};

#define DFAIL(d, pos, ...)                                                 \
	do {                                                               \
		(d)->e->at = (pos);                                        \
		snprintf((d)->e->msg, sizeof (d)->e->msg, __VA_ARGS__);    \
		return -1;                                                 \
	} while (0)

/* End of input inside a value: incomplete, or an error at EOF. */
static int cut(struct dec *d)
{
	if (!d->at_eof) {
		d->cut = 1;
		return -1;
	}
	DFAIL(d, d->n, "unexpected end of input");
}

static void skip_ws(struct dec *d)
{
	while (d->i < d->n) {
		char c = d->s[d->i];
		if (c != ' ' && c != '\n' && c != '\t' && c != '\r')
			break;
		d->i++;
	}
}

static int oom(struct dec *d)
{
	DFAIL(d, d->i, "out of memory");
}

static int hex4(const char *p, uint32_t *out)
{
	uint32_t v = 0;
	for (int k = 0; k < 4; k++) {
		char c = p[k];
		v <<= 4;
		if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
		else return -1;
	}
	*out = v;
	return 0;
}

static void put_utf8(uint8_t **o, uint32_t cp)
{
	*o += fw_utf8_put(*o, cp);
}

/* Writes a str header for n bytes at out->p + at, where 5 bytes were
 * reserved; moves the body left when a shorter header suffices. */
static void fix_header(struct fw_buf *out, size_t at, size_t body, uint64_t n, int kind)
{
	uint8_t h[5];
	size_t hl;
	if (kind == 's') {
		if (n < 32) { h[0] = (uint8_t)(0xa0 | n); hl = 1; }
		else if (n < 256) { h[0] = 0xd9; h[1] = (uint8_t)n; hl = 2; }
		else if (n < 65536) { h[0] = 0xda; h[1] = (uint8_t)(n >> 8); h[2] = (uint8_t)n; hl = 3; }
		else { h[0] = 0xdb; hl = 5; }
	} else {
		uint8_t fix = kind == 'a' ? 0x90 : 0x80, b16 = kind == 'a' ? 0xdc : 0xde;
		if (n < 16) { h[0] = (uint8_t)(fix | n); hl = 1; }
		else if (n < 65536) { h[0] = b16; h[1] = (uint8_t)(n >> 8); h[2] = (uint8_t)n; hl = 3; }
		else { h[0] = (uint8_t)(b16 + 1); hl = 5; }
	}
	if (hl == 5) {
		h[1] = (uint8_t)(n >> 24);
		h[2] = (uint8_t)(n >> 16);
		h[3] = (uint8_t)(n >> 8);
		h[4] = (uint8_t)n;
	}
	if (hl < 5) {
		memmove(out->p + at + hl, out->p + at + 5, body);
		out->n -= 5 - hl;
	}
	memcpy(out->p + at, h, hl);
}

static int parse_string(struct dec *d)
{
	/* d->s[d->i] == '"' */
	size_t q = d->i + 1;
	/* Find the closing quote first, so the output can be sized once. */
	size_t j = q;
	while (j < d->n) {
		const char *p = memchr(d->s + j, '"', d->n - j);
		if (!p) {
			j = d->n;
			break;
		}
		j = (size_t)(p - d->s);
		size_t bs = 0;
		while (j - bs > q && d->s[j - bs - 1] == '\\')
			bs++;
		if (bs % 2 == 0)
			break;
		j++;
	}
	if (j >= d->n)
		return cut(d);
	size_t len = j - q;
	size_t at = d->out->n;
	if (fw_buf_reserve(d->out, len + 5) < 0)
		return oom(d);
	uint8_t *o = d->out->p + at + 5;
	const uint8_t *s = (const uint8_t *)d->s;
	size_t i = q;
	size_t run = q; /* start of the current verbatim run */
	while (i < j) {
		uint8_t c = s[i];
		if (c >= 0x20 && c != '\\') {
			i++;
			continue;
		}
		if (c < 0x20)
			DFAIL(d, i, "control character in string");
		size_t bad = fw_utf8_check(s + run, i - run);
		if (bad != i - run)
			DFAIL(d, run + bad, "invalid UTF-8 in string");
		memcpy(o, s + run, i - run);
		o += i - run;
		char x = (char)s[i + 1];
		i += 2;
		switch (x) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			uint32_t cp, lo;
			if (i + 4 > j || hex4(d->s + i, &cp) < 0)
				DFAIL(d, i - 2, "bad \\u escape");
			i += 4;
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (i + 6 > j || s[i] != '\\' || s[i + 1] != 'u' ||
				    hex4(d->s + i + 2, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
					DFAIL(d, i - 6, "unpaired surrogate in \\u escape");
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				i += 6;
			} else if (cp >= 0xdc00 && cp <= 0xdfff) {
				DFAIL(d, i - 6, "unpaired surrogate in \\u escape");
			}
			put_utf8(&o, cp);
			break;
		}
		default:
			DFAIL(d, i - 2, "bad escape '\\%c'", x);
		}
		run = i;
	}
	size_t bad = fw_utf8_check(s + run, j - run);
	if (bad != j - run)
		DFAIL(d, run + bad, "invalid UTF-8 in string");
	memcpy(o, s + run, j - run);
	o += j - run;
	size_t body = (size_t)(o - (d->out->p + at + 5));
	d->out->n = at + 5 + body;
	fix_header(d->out, at, body, body, 's');
	d->i = j + 1;
	return 0;
}

/* The end of the run of decimal digits from i. */
static size_t digits(const struct dec *d, size_t i)
{
	while (i < d->n && d->s[i] >= '0' && d->s[i] <= '9')
		i++;
	return i;
}

static int parse_number(struct dec *d)
{
	size_t st = d->i, i = d->i;
	int neg = 0, isfloat = 0;
	if (i < d->n && d->s[i] == '-') {
		neg = 1;
		i++;
	}
	size_t ds = i;
	i = digits(d, i);
	if (i == ds) {
		if (i == d->n)
			return cut(d);
		DFAIL(d, i, "invalid number");
	}
	if (d->s[ds] == '0' && i - ds > 1)
		DFAIL(d, ds, "leading zero in number");
	if (i < d->n && d->s[i] == '.') {
		isfloat = 1;
		size_t f = ++i;
		i = digits(d, i);
		if (i == f) {
			if (i == d->n)
				return cut(d);
			DFAIL(d, i, "invalid number");
		}
	}
	if (i < d->n && (d->s[i] == 'e' || d->s[i] == 'E')) {
		isfloat = 1;
		i++;
		if (i < d->n && (d->s[i] == '+' || d->s[i] == '-'))
			i++;
		size_t f = i;
		i = digits(d, i);
		if (i == f) {
			if (i == d->n)
				return cut(d);
			DFAIL(d, i, "invalid number");
		}
	}
	if (i == d->n && !d->at_eof)
		return cut(d); /* more digits may follow */
	msgpack_packer pk;
	fw_buf_packer(&pk, d->out);
	char tmp[400];
	size_t len = i - st;
	int rc;
	if (!isfloat) {
		/* Exact 64-bit integers: accumulate with overflow checks. */
		uint64_t v = 0;
		int over = 0;
		for (size_t k = ds; k < i; k++) {
			unsigned dg = (unsigned)(d->s[k] - '0');
			if (v > (UINT64_MAX - dg) / 10)
				over = 1;
			v = v * 10 + dg;
		}
		if (!over && !neg) {
			rc = msgpack_pack_uint64(&pk, v);
			goto done;
		}
		if (!over && neg && v <= (uint64_t)INT64_MAX + 1) {
			rc = msgpack_pack_int64(&pk, v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v);
			goto done;
		}
	}
	if (len >= sizeof tmp)
		DFAIL(d, st, "number too long");
	memcpy(tmp, d->s + st, len);
	tmp[len] = 0;
	rc = msgpack_pack_double(&pk, strtod(tmp, NULL));
done:
	if (rc != 0)
		return oom(d);
	d->i = i;
	return 0;
}

static int literal(struct dec *d, const char *word)
{
	size_t l = strlen(word);
	size_t have = d->n - d->i < l ? d->n - d->i : l;
	if (memcmp(d->s + d->i, word, have) != 0)
		DFAIL(d, d->i, "unexpected '%c'", d->s[d->i]);
	if (have < l)
		return cut(d);
	d->i += l;
	return 0;
}

static int parse_value(struct dec *d, int depth);

/* After an object with one reserved key is parsed at out->p[at..]: turns
 * {"$bin": "..."} and friends into the msgpack type they stand for.
 * Returns 0 (done or not special), -1 on a malformed special form. */
static int special(struct dec *d, size_t at, size_t pos)
{
	struct fw_mpv m = {d->out->p + at, d->out->n - at}, k, v;
	struct fw_mp_iter it;
	if (fw_mp_iter_init(&it, m) != 1 || fw_mp_iter_next(&it, &k) != 1 ||
	    fw_mp_iter_next(&it, &v) != 1 || !is_reserved(k))
		return 0;
	struct fw_buf tmp = {0};
	msgpack_packer pk;
	fw_buf_packer(&pk, &tmp);
	const char *s;
	size_t n;
	int ok = 0;
	if (fw_mp_str_eq(k, "$bin", 4) && fw_mp_str(v, &s, &n) == 0) {
		struct fw_buf raw = {0};
		if (fw_base64_decode(&raw, s, n) == 0) {
			ok = msgpack_pack_bin_with_body(&pk, raw.p, raw.n) == 0;
		}
		fw_buf_release(&raw);
	} else if (fw_mp_str_eq(k, "$ext", 4) && fw_mp_type(v) == FW_MP_ARRAY) {
		struct fw_mp_iter ai;
		struct fw_mpv t, b;
		int64_t et;
		if (fw_mp_iter_init(&ai, v) == 2 && fw_mp_iter_next(&ai, &t) == 1 &&
		    fw_mp_iter_next(&ai, &b) == 1 && fw_mp_int(t, &et) == 0 && et >= -128 &&
		    et <= 127 && fw_mp_str(b, &s, &n) == 0) {
			struct fw_buf raw = {0};
			if (fw_base64_decode(&raw, s, n) == 0)
				ok = msgpack_pack_ext_with_body(&pk, raw.p, raw.n, (int8_t)et) == 0;
			fw_buf_release(&raw);
		}
	} else if (fw_mp_str_eq(k, "$float", 6) && fw_mp_str(v, &s, &n) == 0) {
		double x = n == 3 && !memcmp(s, "nan", 3) ? NAN
			   : n == 3 && !memcmp(s, "inf", 3) ? INFINITY
			   : n == 4 && !memcmp(s, "-inf", 4) ? -INFINITY : 0;
		if (x != 0)
			ok = msgpack_pack_double(&pk, x) == 0;
	} else if (fw_mp_str_eq(k, "$map", 4) && fw_mp_type(v) == FW_MP_ARRAY) {
		struct fw_mp_iter ai, pi;
		struct fw_mpv pair, kk, vv;
		int64_t cnt = fw_mp_iter_init(&ai, v);
		ok = msgpack_pack_map(&pk, (size_t)cnt) == 0;
		while (ok && fw_mp_iter_next(&ai, &pair) == 1) {
			if (fw_mp_type(pair) != FW_MP_ARRAY || fw_mp_iter_init(&pi, pair) != 2 ||
			    fw_mp_iter_next(&pi, &kk) != 1 || fw_mp_iter_next(&pi, &vv) != 1) {
				ok = 0;
				break;
			}
			ok = fw_buf_append(&tmp, kk.p, kk.n) == 0 && fw_buf_append(&tmp, vv.p, vv.n) == 0;
		}
	}
	if (!ok) {
		fw_buf_release(&tmp);
		DFAIL(d, pos, "malformed %.*s form", (int)(k.n - 1), (const char *)k.p + 1);
	}
	d->out->n = at;
	int rc = fw_buf_append(d->out, tmp.p, tmp.n);
	fw_buf_release(&tmp);
	return rc < 0 ? oom(d) : 0;
}

static int parse_container(struct dec *d, int depth, char close)
{
	size_t pos = d->i;
	if (depth >= FW_JSON_MAX_DEPTH)
		DFAIL(d, d->i, "nesting deeper than %d levels", FW_JSON_MAX_DEPTH);
	d->i++;
	size_t at = d->out->n;
	if (fw_buf_reserve(d->out, 5) < 0)
		return oom(d);
	d->out->n += 5;
	uint64_t count = 0;
	skip_ws(d);
	if (d->i >= d->n)
		return cut(d);
	if (d->s[d->i] == close) {
		d->i++;
	} else {
		for (;;) {
			skip_ws(d);
			if (d->i >= d->n)
				return cut(d);
			if (close == '}') {
				if (d->s[d->i] != '"')
					DFAIL(d, d->i, "expected a string key");
				if (parse_string(d) < 0)
					return -1;
				skip_ws(d);
				if (d->i >= d->n)
					return cut(d);
				if (d->s[d->i] != ':')
					DFAIL(d, d->i, "expected ':'");
				d->i++;
			}
			if (parse_value(d, depth + 1) < 0)
				return -1;
			count++;
			skip_ws(d);
			if (d->i >= d->n)
				return cut(d);
			if (d->s[d->i] == ',') {
				d->i++;
				continue;
			}
			if (d->s[d->i] == close) {
				d->i++;
				break;
			}
			DFAIL(d, d->i, "expected ',' or '%c'", close);
		}
	}
	fix_header(d->out, at, d->out->n - at - 5, count, close == '}' ? 'm' : 'a');
	if (close == '}' && count == 1)
		return special(d, at, pos);
	return 0;
}

static int parse_value(struct dec *d, int depth)
{
	skip_ws(d);
	if (d->i >= d->n)
		return cut(d);
	char c = d->s[d->i];
	switch (c) {
	case '{': return parse_container(d, depth, '}');
	case '[': return parse_container(d, depth, ']');
	case '"': return parse_string(d);
	case 't':
		if (literal(d, "true") < 0)
			return -1;
		return fw_buf_append(d->out, "\xc3", 1) < 0 ? oom(d) : 0;
	case 'f':
		if (literal(d, "false") < 0)
			return -1;
		return fw_buf_append(d->out, "\xc2", 1) < 0 ? oom(d) : 0;
	case 'n':
		if (literal(d, "null") < 0)
			return -1;
		return fw_buf_append(d->out, "\xc0", 1) < 0 ? oom(d) : 0;
	default:
		if (c == '-' || (c >= '0' && c <= '9'))
			return parse_number(d);
		if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
			DFAIL(d, d->i, "unexpected '%c'", c);
		DFAIL(d, d->i, "unexpected byte 0x%02x", (unsigned char)c);
	}
}

int fw_json_to_mp(struct fw_buf *out, const char *s, size_t n, int at_eof, size_t *used,
		  struct fw_json_err *e)
{
	struct dec d = {s, n, 0, at_eof, 0, out, e};
	size_t start = out->n;
	skip_ws(&d);
	if (d.i >= n) {
		*used = n;
		return 0;
	}
	size_t vstart = d.i;
	if (parse_value(&d, 0) < 0) {
		out->n = start;
		return d.cut ? 2 : -1;
	}
	uint64_t need;
	const char *why;
	if (fw_mp_scan(out->p + start, out->n - start, FW_MP_MAX_DEPTH, &need, &why) < 0) {
		out->n = start;
		e->at = vstart;
		snprintf(e->msg, sizeof e->msg, "nesting deeper than %d levels", FW_MP_MAX_DEPTH);
		return -1;
	}
	*used = d.i;
	return 1;
}

/* ---- streaming reader ------------------------------------------------------ */

struct fw_json_reader {
	int fd;
	char *name;
	char *buf;
	size_t cap, len, pos;
	uint64_t base;          /* file offset of buf[0] */
	uint64_t line, lstart;  /* line of buf[pos], file offset where it starts */
	uint64_t vline, vcol, voff; /* position of the last value */
	size_t max;
	int eof, failed;
	struct fw_buf out;
	char err[256];
};

struct fw_json_reader *fw_json_reader_open(const char *path, size_t max_value, char *err,
					   size_t errlen)
{
	int stdin_ = !path || strcmp(path, "-") == 0;
	struct fw_json_reader *r = calloc(1, sizeof *r);

	if (!r || !(r->name = strdup(stdin_ ? "<stdin>" : path)) || !(r->buf = malloc(r->cap = 1u << 20))) {
		fw_seterr(err, errlen, "%s: out of memory", stdin_ ? "<stdin>" : path);
		fw_json_reader_close(r);
		return NULL;
	}
	r->line = 1;
	r->max = max_value ? max_value : FW_MAX_RECORD_DEFAULT;
	if (!stdin_ && (r->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		fw_seterr(err, errlen, "%s: %s", path, strerror(errno));
		r->fd = 0;
		fw_json_reader_close(r);
		return NULL;
	}
	return r;
}

/* Counts the lines of buf[from..to), keeping r->line and r->lstart or the
 * given copies of them. */
static void advance_lines(const struct fw_json_reader *r, size_t from, size_t to, uint64_t *line,
			  uint64_t *lstart)
{
	const char *p = r->buf + from, *end = r->buf + to;

	while ((p = memchr(p, '\n', (size_t)(end - p)))) {
		(*line)++;
		p++;
		*lstart = r->base + (uint64_t)(p - r->buf);
	}
}

static int reader_fail(struct fw_json_reader *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int reader_fail(struct fw_json_reader *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fw_vseterr(r->err, sizeof r->err, fmt, ap);
	va_end(ap);
	r->failed = 1;
	return -1;
}

int fw_json_reader_next(struct fw_json_reader *r, struct fw_mpv *v)
{
	if (r->failed)
		return -1;
	for (;;) {
		assert(r->pos <= r->len && r->len <= r->cap);
		size_t used;
		struct fw_json_err e;

		fw_buf_reset(&r->out);
		int rc = fw_json_to_mp(&r->out, r->buf + r->pos, r->len - r->pos, r->eof, &used, &e);
		if (rc == 1) {
			/* the position of the value itself, for messages */
			uint64_t vline = r->line, vlstart = r->lstart;
			size_t vstart = r->pos;
			while (vstart < r->len && strchr(" \t\r\n", r->buf[vstart]))
				vstart++;
			advance_lines(r, r->pos, vstart, &vline, &vlstart);
			r->vline = vline;
			r->vcol = r->base + vstart - vlstart + 1;
			r->voff = r->base + vstart;
			advance_lines(r, r->pos, r->pos + used, &r->line, &r->lstart);
			r->pos += used;
			*v = (struct fw_mpv){ r->out.p, r->out.n };
			return 1;
		}
		if (rc == 0 && r->eof)
			return 0;
		if (rc == -1) {
			uint64_t el = r->line, els = r->lstart;
			advance_lines(r, r->pos, r->pos + e.at, &el, &els);
			return reader_fail(r, "line %llu, column %llu: %s", (unsigned long long)el,
					   (unsigned long long)(r->base + r->pos + e.at - els + 1), e.msg);
		}
		/* rc == 2 (value cut by the buffer end) or only whitespace: read more. */
		if (r->len - r->pos > r->max * 2 + 4096)
			return reader_fail(r, "line %llu: value exceeds the record limit of %zu bytes",
					   (unsigned long long)r->line, r->max);
		if (r->pos > 0) {
			memmove(r->buf, r->buf + r->pos, r->len - r->pos);
			r->len -= r->pos;
			r->base += r->pos;
			r->pos = 0;
		}
		if (r->len == r->cap) {
			char *nb = realloc(r->buf, r->cap * 2);
			if (!nb)
				return reader_fail(r, "out of memory");
			r->buf = nb;
			r->cap *= 2;
		}
		ssize_t k = read(r->fd, r->buf + r->len, r->cap - r->len);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return reader_fail(r, "read error: %s", strerror(errno));
		}
		if (k == 0)
			r->eof = 1;
		r->len += (size_t)k;
	}
}

void fw_json_reader_pos(const struct fw_json_reader *r, uint64_t *line, uint64_t *col)
{
	*line = r->vline;
	*col = r->vcol;
}

uint64_t fw_json_reader_offset(const struct fw_json_reader *r)
{
	return r->voff;
}

const char *fw_json_reader_name(const struct fw_json_reader *r)
{
	return r->name;
}

const char *fw_json_reader_error(const struct fw_json_reader *r)
{
	return r->err;
}

void fw_json_reader_close(struct fw_json_reader *r)
{
	if (!r)
		return;
	if (r->fd > 0)
		close(r->fd);
	free(r->name);
	free(r->buf);
	fw_buf_release(&r->out);
	free(r);
}
