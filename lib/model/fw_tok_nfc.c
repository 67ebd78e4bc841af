/*
 * fw_tok_nfc.c — Unicode NFC (canonical decomposition, canonical ordering,
 * canonical composition) for tokenizers whose tokenizer.json asks for it.
 *
 * The tables come from tests/ref/tok-nfc-tables (Unicode 14.0, the version
 * of PCRE2 10.42's property tables); Hangul syllables are computed.  Bytes
 * that are not valid UTF-8 are kept as they are and act as starters that
 * compose with nothing.
 */
#include "fw_tok_nfc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fw_base.h"
#include "fw_tok_nfc_tables.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define RAW 0x80000000u /* a byte that is not valid UTF-8, in the low 8 bits */

enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7,
       LCOUNT = 19, VCOUNT = 21, TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT,
       SCOUNT = LCOUNT * NCOUNT };

static unsigned ccc(uint32_t cp)
{
	size_t lo = 0, hi = NELEM(nfc_ccc);

	if (cp < 0x300 || (cp & RAW))
		return 0;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cp < nfc_ccc[mid][0])
			hi = mid;
		else if (cp > nfc_ccc[mid][1])
			lo = mid + 1;
		else
			return nfc_ccc[mid][2];
	}
	return 0;
}

static const uint32_t *decomp(uint32_t cp)
{
	size_t lo = 0, hi = NELEM(nfc_dec);

	if (cp < 0xC0 || (cp & RAW))
		return NULL;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cp < nfc_dec[mid][0])
			hi = mid;
		else if (cp > nfc_dec[mid][0])
			lo = mid + 1;
		else
			return nfc_dec[mid];
	}
	return NULL;
}

/* The primary composite of a and b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
	if (((a | b) & RAW) || b < 0x300) /* nothing below U+0300 composes with a starter */
		return 0;
	if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
		return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
	if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE &&
	    b < TBASE + TCOUNT)
		return a + (b - TBASE);
	size_t lo = 0, hi = NELEM(nfc_comp);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (a < nfc_comp[mid][0] || (a == nfc_comp[mid][0] && b < nfc_comp[mid][1]))
			hi = mid;
		else if (a > nfc_comp[mid][0] || b > nfc_comp[mid][1])
			lo = mid + 1;
		else
			return nfc_comp[mid][2];
	}
	return 0;
}

/* Decodes one code point at s (n > 0 bytes left); returns its length, or
 * 1 with *cp = RAW | byte when the bytes are not valid UTF-8. */
static size_t next_cp(const unsigned char *s, size_t n, uint32_t *cp)
{
	unsigned c = s[0];
	size_t len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
	uint32_t v;

	if (len == 1) {
		*cp = c;
		return 1;
	}
	if (!len || c > 0xf4 || len > n)
		goto raw;
	v = c & (0x7f >> len);
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			goto raw;
		v = v << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10ffff)) ||
	    (v >= 0xd800 && v <= 0xdfff))
		goto raw;
	*cp = v;
	return len;
raw:
	*cp = RAW | c;
	return 1;
}

static size_t put_utf8(char *o, uint32_t cp)
{
	if (cp & RAW) {
		o[0] = (char)(cp & 0xff);
		return 1;
	}
	return fw_utf8_put((uint8_t *)o, cp);
}

int fw_tok_nfc_needed(const void *text, size_t n)
{
	const unsigned char *s = text;

	/* Every code point below U+0300 is stable under NFC, and none of them
	 * composes with what follows unless that is U+0300 or above, whose
	 * UTF-8 starts with 0xcc or more. */
	for (size_t i = 0; i < n; i++)
		if (s[i] >= 0xcc)
			return 1;
	return 0;
}

char *fw_tok_nfc(const void *text, size_t n, size_t *outlen)
{
	const unsigned char *s = text;
	uint32_t *d = malloc((4 * n + 1) * sizeof *d);
	char *out = NULL;
	size_t k = 0;

	if (!d)
		return NULL;
	/* decompose, and order each run of non-starters by combining class */
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		i += next_cp(s + i, n - i, &cp);
		const uint32_t *e;
		if (cp >= SBASE && cp < SBASE + SCOUNT && !(cp & RAW)) {
			uint32_t si = cp - SBASE;
			d[k++] = LBASE + si / NCOUNT;
			d[k++] = VBASE + si % NCOUNT / TCOUNT;
			if (si % TCOUNT)
				d[k++] = TBASE + si % TCOUNT;
		} else if ((e = decomp(cp))) {
			for (uint32_t j = 0; j < e[2]; j++)
				d[k++] = nfc_dec_pool[e[1] + j];
		} else {
			d[k++] = cp;
		}
	}
	for (size_t i = 1; i < k; i++) {
		unsigned c = ccc(d[i]);
		if (!c)
			continue;
		for (size_t j = i; j > 0 && ccc(d[j - 1]) > c; j--) {
			uint32_t x = d[j];
			d[j] = d[j - 1];
			d[j - 1] = x;
		}
	}
	/* compose: a mark joins the last starter unless a mark of the same or
	 * a higher class, or a starter, stands between them */
	if (k) {
		size_t starter = 0, w = 1;
		unsigned last = ccc(d[0]) ? 256 : 0;
		for (size_t i = 1; i < k; i++) {
			uint32_t c = d[i], comp;
			unsigned cc = ccc(c);
			if ((last < cc || last == 0) && (comp = compose(d[starter], c))) {
				d[starter] = comp;
				continue;
			}
			if (cc == 0)
				starter = w;
			last = cc;
			d[w++] = c;
		}
		k = w;
	}
	out = malloc(4 * k + 1);
	if (out) {
		size_t o = 0;
		for (size_t i = 0; i < k; i++)
			o += put_utf8(out + o, d[i]);
		out[o] = 0;
		*outlen = o;
	}
	free(d);
	return out;
}
