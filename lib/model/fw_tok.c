/*
 * fw_tok.c — byte-level BPE from tokenizer.json, and the byte tokenizer.
 *
 * A tokenizer is a table of ids (each with the bytes it decodes to), a map
 * from byte strings to vocabulary ids, a map from id pairs to merges, up to
 * four split regexes applied in turn, and the added tokens.  The byte
 * tokenizer is built as the tokenizer.json of a BPE with no merges and
 * loaded like any other, so what is saved is what is used.
 *
 * Encoding: added tokens are cut out first (leftmost, then longest); each
 * span between them is split by the regexes (bytes no regex matches, such
 * as invalid UTF-8, become pieces of their own); each piece is merged by
 * rank with a heap, lowest rank first and leftmost among equals, as the
 * Hugging Face tokenizers library does, and the result is cached.
 */
#include "fw_base.h"
#include "fw_tok.h"
#include "fw_tok_nfc.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_RE 4
#define CACHE_MAX_ENTRIES 65536
#define CACHE_MAX_PIECE 256

/* ---- small helpers ------------------------------------------------------ */

static uint32_t hash_bytes(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 16777619u;
	return h;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* ---- byte string -> int32 map (open addressing) -------------------------- */

struct sent {
	uint32_t off, len, hash;
	int32_t val;
};

struct smap {
	uint32_t *slot; /* 0: empty, else entry index + 1 */
	size_t mask;
	struct sent *e;
	size_t n, cap;
	char *pool;
	size_t pn, pcap;
};

static void smap_free(struct smap *m)
{
	free(m->slot);
	free(m->e);
	free(m->pool);
	memset(m, 0, sizeof *m);
}

static void smap_clear(struct smap *m)
{
	if (m->slot)
		memset(m->slot, 0, (m->mask + 1) * sizeof *m->slot);
	m->n = 0;
	m->pn = 0;
}

static struct sent *smap_get(const struct smap *m, const void *k, size_t n)
{
	if (!m->slot)
		return NULL;
	uint32_t h = hash_bytes(k, n);
	for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
		uint32_t s = m->slot[i];
		if (!s)
			return NULL;
		struct sent *e = &m->e[s - 1];
		if (e->hash == h && e->len == n && memcmp(m->pool + e->off, k, n) == 0)
			return e;
	}
}

static int smap_grow(struct smap *m)
{
	size_t cap = m->slot ? (m->mask + 1) * 2 : 64;
	uint32_t *slot = calloc(cap, sizeof *slot);

	if (!slot)
		return -1;
	for (size_t j = 0; j < m->n; j++) {
		size_t i = m->e[j].hash & (cap - 1);
		while (slot[i])
			i = (i + 1) & (cap - 1);
		slot[i] = (uint32_t)j + 1;
	}
	free(m->slot);
	m->slot = slot;
	m->mask = cap - 1;
	return 0;
}

/* Sets k -> val (replacing an existing value).  Returns 0 or -1 (ENOMEM). */
static int smap_put(struct smap *m, const void *k, size_t n, int32_t val)
{
	struct sent *e = smap_get(m, k, n);

	if (e) {
		e->val = val;
		return 0;
	}
	if (!m->slot || (m->n + 1) * 2 > m->mask + 1)
		if (smap_grow(m) < 0)
			return -1;
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		struct sent *ne = realloc(m->e, cap * sizeof *ne);
		if (!ne)
			return -1;
		m->e = ne;
		m->cap = cap;
	}
	if (m->pn + n > m->pcap) {
		size_t cap = m->pcap ? m->pcap : 1024;
		while (cap < m->pn + n)
			cap *= 2;
		char *np = realloc(m->pool, cap);
		if (!np)
			return -1;
		m->pool = np;
		m->pcap = cap;
	}
	if (m->pn + n > UINT32_MAX)
		return -1;
	memcpy(m->pool + m->pn, k, n);
	uint32_t h = hash_bytes(k, n);
	m->e[m->n] = (struct sent){ (uint32_t)m->pn, (uint32_t)n, h, val };
	m->pn += n;
	size_t i = h & m->mask;
	while (m->slot[i])
		i = (i + 1) & m->mask;
	m->slot[i] = (uint32_t)++m->n;
	return 0;
}

/* ---- id pair -> merge map ---------------------------------------------------- */

struct merge {
	uint64_t key; /* left << 32 | right; UINT64_MAX when empty */
	int32_t rank, id;
};

struct pmap {
	struct merge *m;
	size_t mask, n;
};

static const struct merge *pmap_get(const struct pmap *p, int32_t a, int32_t b)
{
	if (!p->n)
		return NULL;
	uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
	for (size_t i = mix64(k) & p->mask;; i = (i + 1) & p->mask) {
		if (p->m[i].key == k)
			return &p->m[i];
		if (p->m[i].key == UINT64_MAX)
			return NULL;
	}
}

/* Sizes the table for n merges.  Returns 0 or -1. */
static int pmap_init(struct pmap *p, size_t n)
{
	size_t cap = 16;

	while (cap < n * 2)
		cap *= 2;
	p->m = malloc(cap * sizeof *p->m);
	if (!p->m)
		return -1;
	memset(p->m, 0xff, cap * sizeof *p->m);
	p->mask = cap - 1;
	p->n = 0;
	return 0;
}

/* A later duplicate replaces an earlier one, as in the reference library. */
static void pmap_put(struct pmap *p, int32_t a, int32_t b, int32_t rank, int32_t id)
{
	uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
	size_t i = mix64(k) & p->mask;

	while (p->m[i].key != UINT64_MAX && p->m[i].key != k)
		i = (i + 1) & p->mask;
	if (p->m[i].key == UINT64_MAX)
		p->n++;
	p->m[i] = (struct merge){ k, rank, id };
}

/* ---- the tokenizer ------------------------------------------------------------ */

struct tokinfo {
	uint32_t off, len; /* decoded bytes in pool */
	uint8_t present, added, special;
};

struct added {
	int32_t id;
	uint32_t off, len; /* content bytes in pool */
	uint8_t special;
	uint8_t c0; /* first byte of the content */
};

struct fw_tok {
	int32_t nvocab;
	struct tokinfo *info;
	char *pool;
	size_t pn, pcap;
	struct smap vocab; /* decoded bytes -> id (byte-level vocabulary entries) */
	struct smap names; /* spelling -> id (vocabulary and added tokens)      */
	int32_t byte_id[256];
	struct pmap merges;
	int ignore_merges;
	pcre2_code *re[MAX_RE];
	int nre;
	struct added *added; /* sorted by first byte, then longer first */
	size_t nadded;
	uint32_t first[257]; /* added[first[c]..first[c+1]) start with byte c */
	int32_t bos, eos;
	int nfc; /* the normalizer is NFC */
	char *json; /* the tokenizer.json text, for fw_tok_save */
	size_t json_len;
	pthread_mutex_t lock; /* guards the cache */
	struct smap cache;    /* piece -> offset into cids */
	int32_t *cids;        /* count, then ids, per cached piece */
	size_t cn, ccap;
};

void fw_tok_ids_release(struct fw_tok_ids *b)
{
	if (!b)
		return;
	free(b->ids);
	free(b->mask);
	memset(b, 0, sizeof *b);
}

static int ids_reserve(struct fw_tok_ids *b, size_t extra)
{
	if (b->n + extra <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->n + extra)
		cap *= 2;
	int32_t *ids = realloc(b->ids, cap * sizeof *ids);
	if (!ids)
		return -1;
	b->ids = ids;
	uint8_t *mask = realloc(b->mask, cap);
	if (!mask)
		return -1;
	b->mask = mask;
	b->cap = cap;
	return 0;
}

int fw_tok_ids_push(struct fw_tok_ids *b, int32_t id, int mask)
{
	if (ids_reserve(b, 1) < 0)
		return -1;
	b->ids[b->n] = id;
	b->mask[b->n++] = mask ? 1 : 0;
	return 0;
}

/* GPT-2's byte <-> unicode alphabet: printable Latin-1 bytes stand for
 * themselves, the rest map to U+0100 onwards in byte order. */
static int byte_to_cp[256];
static int cp_to_byte[324];
static pthread_once_t alphabet_once = PTHREAD_ONCE_INIT;

static void alphabet_init(void)
{
	int n = 0;

	for (int c = 0; c < 324; c++)
		cp_to_byte[c] = -1;
	for (int b = 0; b < 256; b++) {
		int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
		byte_to_cp[b] = printable ? b : 256 + n++;
		cp_to_byte[byte_to_cp[b]] = b;
	}
}

/* Decodes one UTF-8 code point at s (n bytes left) into *cp; returns its
 * length, or 0 when the bytes are not valid UTF-8. */
static int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	if (!n)
		return 0;
	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	int len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
	if (!len || (size_t)len > n || s[0] > 0xf4)
		return 0;
	uint32_t c = s[0] & (0x7f >> len);
	for (int i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	static const uint32_t min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
	if (c < min[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* Maps a vocabulary spelling in the byte-level alphabet to the bytes it
 * stands for (out holds at least n bytes).  Returns the byte count, or -1
 * when the spelling has a character outside the alphabet. */
static long spelling_to_bytes(const char *s, size_t n, char *out)
{
	size_t i = 0, o = 0;
	uint32_t cp;

	while (i < n) {
		int l = utf8_decode((const unsigned char *)s + i, n - i, &cp);
		if (!l || cp >= 324 || cp_to_byte[cp] < 0)
			return -1;
		out[o++] = (char)cp_to_byte[cp];
		i += (size_t)l;
	}
	return (long)o;
}

static int pool_add(struct fw_tok *t, const void *p, size_t n, uint32_t *off)
{
	if (t->pn + n > t->pcap) {
		size_t cap = t->pcap ? t->pcap : 4096;
		while (cap < t->pn + n)
			cap *= 2;
		char *np = realloc(t->pool, cap);
		if (!np)
			return -1;
		t->pool = np;
		t->pcap = cap;
	}
	if (t->pn + n > UINT32_MAX)
		return -1;
	memcpy(t->pool + t->pn, p, n);
	*off = (uint32_t)t->pn;
	t->pn += n;
	return 0;
}

void fw_tok_free(struct fw_tok *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->nre; i++)
		pcre2_code_free(t->re[i]);
	smap_free(&t->vocab);
	smap_free(&t->names);
	smap_free(&t->cache);
	free(t->merges.m);
	free(t->info);
	free(t->pool);
	free(t->added);
	free(t->json);
	free(t->cids);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* ---- loading tokenizer.json ---------------------------------------------------- */

struct loader {
	struct fw_tok *t;
	const char *name;
	char *err;
	size_t errlen;
};

#define FAIL(L, ...)                                                      \
	do {                                                              \
		char m_[512];                                             \
		snprintf(m_, sizeof m_, __VA_ARGS__);                     \
		fw_seterr((L)->err, (L)->errlen, "%s: %s", (L)->name, m_);   \
		return -1;                                                \
	} while (0)

static const char *type_of(json_t *o)
{
	json_t *ty = json_object_get(o, "type");
	return json_is_string(ty) ? json_string_value(ty) : NULL;
}

static int is_false_or_absent(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return !v || json_is_false(v) || json_is_null(v);
}

static int add_regex(struct loader *L, const char *pat, size_t n, int literal)
{
	int errcode;
	PCRE2_SIZE erroff;
	uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;

	if (L->t->nre == MAX_RE)
		FAIL(L, "pre_tokenizer: more than %d split patterns", MAX_RE);
	if (literal) /* UCP is meaningless for a literal, and refused with it */
		opts = (opts & ~PCRE2_UCP) | PCRE2_LITERAL;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, n, opts, &errcode, &erroff, NULL);
	if (!re) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(errcode, msg, sizeof msg);
		FAIL(L, "pre_tokenizer: cannot compile split pattern at offset %zu: %s",
		     (size_t)erroff, (char *)msg);
	}
	pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter remains if JIT fails */
	L->t->re[L->t->nre++] = re;
	return 0;
}

static const char gpt2_pattern[] =
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int load_pretok(struct loader *L, json_t *p, int depth, int *bytelevel)
{
	const char *ty = type_of(p);

	if (!ty)
		FAIL(L, "pre_tokenizer: missing type");
	if (strcmp(ty, "Sequence") == 0 && depth == 0) {
		json_t *seq = json_object_get(p, "pretokenizers");
		size_t i;
		json_t *v;
		if (!json_is_array(seq))
			FAIL(L, "pre_tokenizer: Sequence without pretokenizers");
		json_array_foreach(seq, i, v) {
			if (!json_is_object(v))
				FAIL(L, "pre_tokenizer: Sequence item %zu is not an object", i);
			if (*bytelevel)
				FAIL(L, "pre_tokenizer: %s after ByteLevel is not supported",
				     type_of(v) ? type_of(v) : "an item");
			if (load_pretok(L, v, depth + 1, bytelevel) < 0)
				return -1;
		}
		return 0;
	}
	if (strcmp(ty, "ByteLevel") == 0) {
		if (!is_false_or_absent(p, "add_prefix_space"))
			FAIL(L, "pre_tokenizer: ByteLevel add_prefix_space is not supported");
		json_t *ur = json_object_get(p, "use_regex");
		if (!ur || json_is_true(ur))
			if (add_regex(L, gpt2_pattern, sizeof gpt2_pattern - 1, 0) < 0)
				return -1;
		*bytelevel = 1;
		return 0;
	}
	if (strcmp(ty, "Split") == 0) {
		json_t *pat = json_object_get(p, "pattern");
		json_t *beh = json_object_get(p, "behavior");
		json_t *re = json_object_get(pat, "Regex"), *lit = json_object_get(pat, "String");
		if (!json_is_string(beh) || strcmp(json_string_value(beh), "Isolated") != 0)
			FAIL(L, "pre_tokenizer: Split behavior '%s' is not supported",
			     json_is_string(beh) ? json_string_value(beh) : "?");
		if (!is_false_or_absent(p, "invert"))
			FAIL(L, "pre_tokenizer: Split invert is not supported");
		json_t *s = json_is_string(re) ? re : lit;
		if (!json_is_string(s))
			FAIL(L, "pre_tokenizer: Split without a Regex or String pattern");
		return add_regex(L, json_string_value(s), json_string_length(s), s == lit);
	}
	if (strcmp(ty, "Digits") == 0) { /* numbers apart, one by one or in runs */
		if (json_is_true(json_object_get(p, "individual_digits")))
			return add_regex(L, "\\p{N}", 5, 0);
		return add_regex(L, "\\p{N}+", 6, 0);
	}
	FAIL(L, "pre_tokenizer type '%s' is not supported", ty);
}

static int cmp_added(const void *a, const void *b)
{
	const struct added *x = a, *y = b;
	if (x->c0 != y->c0)
		return x->c0 < y->c0 ? -1 : 1;
	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int set_info(struct loader *L, int32_t id, const void *bytes, size_t n, int added,
		    int special)
{
	struct tokinfo *ti = &L->t->info[id];

	if (pool_add(L->t, bytes, n, &ti->off) < 0)
		FAIL(L, "out of memory");
	ti->len = (uint32_t)n;
	ti->present = 1;
	ti->added = (uint8_t)added;
	ti->special = (uint8_t)special;
	return 0;
}

static int load_model(struct loader *L, json_t *model, json_t *added)
{
	struct fw_tok *t = L->t;
	json_t *vocab = json_object_get(model, "vocab");
	json_t *merges = json_object_get(model, "merges");
	const char *ty = type_of(model);
	const char *k;
	json_t *v;
	size_t i;
	int64_t maxid = -1;

	if (ty && strcmp(ty, "BPE") != 0)
		FAIL(L, "model type '%s' is not supported (only BPE)", ty);
	if (!json_is_object(vocab))
		FAIL(L, "model: vocab is not an object");
	if (merges && !json_is_array(merges))
		FAIL(L, "model: merges is not an array");
	json_t *d = json_object_get(model, "dropout");
	if (d && !json_is_null(d) && !(json_is_number(d) && json_number_value(d) == 0))
		FAIL(L, "model: BPE dropout is not supported");
	if (!is_false_or_absent(model, "byte_fallback"))
		FAIL(L, "model: byte_fallback is not supported (not a byte-level BPE)");
	const char *affix[] = { "continuing_subword_prefix", "end_of_word_suffix" };
	for (int a = 0; a < 2; a++) {
		json_t *s = json_object_get(model, affix[a]);
		if (s && !json_is_null(s) && !(json_is_string(s) && !json_string_length(s)))
			FAIL(L, "model: %s is not supported", affix[a]);
	}
	t->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));

	json_object_foreach(vocab, k, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) >= (1 << 21))
			FAIL(L, "model: vocab entry '%s' has no valid id", k);
		if (json_integer_value(v) > maxid)
			maxid = json_integer_value(v);
	}
	if (!json_is_array(added) && added && !json_is_null(added))
		FAIL(L, "added_tokens is not an array");
	json_array_foreach(added, i, v) {
		json_t *id = json_object_get(v, "id");
		if (!json_is_integer(id) || json_integer_value(id) < 0 ||
		    json_integer_value(id) >= (1 << 21))
			FAIL(L, "added_tokens[%zu]: no valid id", i);
		if (json_integer_value(id) > maxid)
			maxid = json_integer_value(id);
	}
	t->nvocab = (int32_t)(maxid + 1);
	t->info = calloc((size_t)t->nvocab + 1, sizeof *t->info);
	if (!t->info)
		FAIL(L, "out of memory");

	json_object_foreach(vocab, k, v) {
		size_t n = strlen(k);
		int32_t id = (int32_t)json_integer_value(v);
		char buf[1024], *b = n <= sizeof buf ? buf : malloc(n);
		if (!b)
			FAIL(L, "out of memory");
		long bn = spelling_to_bytes(k, n, b);
		int rc = 0;
		if (bn >= 0)
			rc = smap_put(&t->vocab, b, (size_t)bn, id) | set_info(L, id, b, (size_t)bn, 0, 0);
		else /* outside the alphabet: decodes to its own UTF-8, as the reference does */
			rc = set_info(L, id, k, n, 0, 0);
		if (b != buf)
			free(b);
		if (rc < 0 || smap_put(&t->names, k, n, id) < 0)
			FAIL(L, "out of memory");
	}
	for (int c = 0; c < 256; c++) {
		char b = (char)c;
		struct sent *e = smap_get(&t->vocab, &b, 1);
		if (!e)
			FAIL(L, "model: vocab has no token for byte 0x%02x (not a byte-level BPE)", c);
		t->byte_id[c] = e->val;
	}

	size_t nm = merges ? json_array_size(merges) : 0;
	if (nm >= (1u << 31))
		FAIL(L, "model: too many merges");
	if (pmap_init(&t->merges, nm) < 0)
		FAIL(L, "out of memory");
	char *cat = NULL;
	size_t catcap = 0;
	json_array_foreach(merges, i, v) {
		const char *a, *b;
		size_t an, bn;
		const char *sp;
		if (json_is_string(v)) {
			a = json_string_value(v);
			sp = strchr(a, ' ');
			if (!sp || strchr(sp + 1, ' ')) {
				free(cat);
				FAIL(L, "model: merges[%zu] '%s' is not two tokens", i, a);
			}
			an = (size_t)(sp - a);
			b = sp + 1;
			bn = strlen(b);
		} else if (json_is_array(v) && json_array_size(v) == 2 &&
			   json_is_string(json_array_get(v, 0)) &&
			   json_is_string(json_array_get(v, 1))) {
			a = json_string_value(json_array_get(v, 0));
			an = json_string_length(json_array_get(v, 0));
			b = json_string_value(json_array_get(v, 1));
			bn = json_string_length(json_array_get(v, 1));
		} else {
			free(cat);
			FAIL(L, "model: merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", i);
		}
		if (an + bn > catcap) {
			catcap = (an + bn) * 2;
			char *nc = realloc(cat, catcap);
			if (!nc) {
				free(cat);
				FAIL(L, "out of memory");
			}
			cat = nc;
		}
		memcpy(cat, a, an);
		memcpy(cat + an, b, bn);
		struct sent *ea = smap_get(&t->names, a, an), *eb = smap_get(&t->names, b, bn);
		struct sent *ec = smap_get(&t->names, cat, an + bn);
		if (!ea || !eb || !ec) {
			int which = !ea ? 0 : !eb ? 1 : 2;
			int wn = (int)(which == 0 ? an : which == 1 ? bn : an + bn);
			const char *ws = which == 0 ? a : which == 1 ? b : cat;
			char msg[160];
			snprintf(msg, sizeof msg, "%.*s", wn, ws);
			free(cat);
			FAIL(L, "model: merges[%zu]: '%s' is not in the vocab", i, msg);
		}
		pmap_put(&t->merges, ea->val, eb->val, (int32_t)i, ec->val);
	}
	free(cat);

	json_array_foreach(added, i, v) {
		json_t *c = json_object_get(v, "content");
		int32_t id = (int32_t)json_integer_value(json_object_get(v, "id"));
		if (!json_is_string(c) || !json_string_length(c))
			FAIL(L, "added_tokens[%zu]: no content", i);
		const char *opt[] = { "single_word", "lstrip", "rstrip" };
		for (int o = 0; o < 3; o++)
			if (!is_false_or_absent(v, opt[o]))
				FAIL(L, "added token '%s': %s is not supported",
				     json_string_value(c), opt[o]);
		int special = json_is_true(json_object_get(v, "special"));
		size_t n = json_string_length(c);
		if (set_info(L, id, json_string_value(c), n, 1, special) < 0)
			return -1;
		if (smap_put(&t->names, json_string_value(c), n, id) < 0)
			FAIL(L, "out of memory");
		struct added *na = realloc(t->added, (t->nadded + 1) * sizeof *na);
		if (!na)
			FAIL(L, "out of memory");
		t->added = na;
		t->added[t->nadded++] = (struct added){ id, t->info[id].off, (uint32_t)n,
							(uint8_t)special,
							(uint8_t)json_string_value(c)[0] };
	}
	if (t->nadded)
		qsort(t->added, t->nadded, sizeof *t->added, cmp_added);
	size_t j = 0;
	for (int c = 0; c <= 256; c++) {
		while (j < t->nadded && t->added[j].c0 < c)
			j++;
		t->first[c] = (uint32_t)j;
	}
	return 0;
}

static int load_rest(struct loader *L, json_t *root)
{
	json_t *norm = json_object_get(root, "normalizer");
	json_t *pre = json_object_get(root, "pre_tokenizer");
	json_t *dec = json_object_get(root, "decoder");
	json_t *post = json_object_get(root, "post_processor");
	int bytelevel = 0;

	if (norm && !json_is_null(norm)) {
		const char *ty = type_of(norm);
		json_t *seq = json_object_get(norm, "normalizers");
		/* NFC applies with FW_TOK_NORMALIZE: see the head of fw_tok.h. */
		if (!ty || !(strcmp(ty, "NFC") == 0 ||
			     (strcmp(ty, "Sequence") == 0 && json_array_size(seq) == 0)))
			FAIL(L, "normalizer type '%s' is not supported", ty ? ty : "?");
		L->t->nfc = strcmp(ty, "NFC") == 0;
	}
	if (!json_is_object(pre))
		FAIL(L, "pre_tokenizer: missing (not a byte-level BPE)");
	if (load_pretok(L, pre, 0, &bytelevel) < 0)
		return -1;
	if (!bytelevel)
		FAIL(L, "pre_tokenizer: no ByteLevel step (not a byte-level BPE)");
	if (dec && !json_is_null(dec) && (!type_of(dec) || strcmp(type_of(dec), "ByteLevel") != 0))
		FAIL(L, "decoder type '%s' is not supported (only ByteLevel)",
		     type_of(dec) ? type_of(dec) : "?");

	L->t->bos = -1;
	if (json_is_object(post)) {
		json_t *procs = json_object_get(post, "processors");
		size_t n = json_is_array(procs) ? json_array_size(procs) : 1;
		for (size_t i = 0; i < n; i++) {
			json_t *p = json_is_array(procs) ? json_array_get(procs, i) : post;
			const char *ty = type_of(p);
			if (!ty || strcmp(ty, "TemplateProcessing") != 0)
				continue;
			json_t *st = json_object_get(json_array_get(json_object_get(p, "single"), 0),
						     "SpecialToken");
			json_t *sid = json_object_get(st, "id");
			if (json_is_string(sid)) {
				L->t->bos = fw_tok_id(L->t, json_string_value(sid));
				if (L->t->bos < 0)
					FAIL(L, "post_processor: unknown token '%s'",
					     json_string_value(sid));
			}
		}
	}
	const char *eos[] = { "<|endoftext|>", "<|end_of_text|>" };
	L->t->eos = -1;
	for (int i = 0; i < 2 && L->t->eos < 0; i++)
		L->t->eos = fw_tok_id(L->t, eos[i]);
	return 0;
}

struct fw_tok *fw_tok_load_mem(const char *json, size_t len, const char *name, char *err,
			       size_t errlen)
{
	struct fw_tok *t = calloc(1, sizeof *t);
	struct loader L = { t, name ? name : "tokenizer.json", err, errlen };
	json_error_t je;
	json_t *root = NULL;

	pthread_once(&alphabet_once, alphabet_init);
	if (!t) {
		fw_seterr(err, errlen, "%s: out of memory", L.name);
		return NULL;
	}
	pthread_mutex_init(&t->lock, NULL);
	t->bos = t->eos = -1;
	t->json = malloc(len ? len : 1);
	if (!t->json) {
		fw_seterr(err, errlen, "%s: out of memory", L.name);
		goto fail;
	}
	memcpy(t->json, json, len);
	t->json_len = len;
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		fw_seterr(err, errlen, "%s: line %d column %d: %s", L.name, je.line, je.column,
		       je.text);
		goto fail;
	}
	if (!json_is_object(root)) {
		fw_seterr(err, errlen, "%s: not a JSON object", L.name);
		goto fail;
	}
	json_t *model = json_object_get(root, "model");
	if (!json_is_object(model)) {
		fw_seterr(err, errlen, "%s: no model object", L.name);
		goto fail;
	}
	if (load_model(&L, model, json_object_get(root, "added_tokens")) < 0 ||
	    load_rest(&L, root) < 0)
		goto fail;
	json_decref(root);
	return t;
fail:
	json_decref(root);
	fw_tok_free(t);
	return NULL;
}

struct fw_tok *fw_tok_load(const char *path, char *err, size_t errlen)
{
	size_t n;
	char *buf = fw_read_file(path, 0, &n);

	if (!buf) {
		fw_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	struct fw_tok *t = fw_tok_load_mem(buf, n, path, err, errlen);
	free(buf);
	return t;
}

static const char *const byte_specials[] = {
	"<|endoftext|>",	"<|im_start|>",	   "<|im_end|>", "<|begin_of_text|>",
	"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|pad|>",
};

struct fw_tok *fw_tok_new_byte(void)
{
	json_t *root = json_object(), *vocab = json_object(), *added = json_array();
	char *text = NULL;
	struct fw_tok *t = NULL;

	pthread_once(&alphabet_once, alphabet_init);
	if (!root || !vocab || !added)
		goto out;
	for (int b = 0; b < 256; b++) {
		char s[3];
		int cp = byte_to_cp[b];
		size_t n = 0;
		if (cp < 0x80) {
			s[n++] = (char)cp;
		} else {
			s[n++] = (char)(0xc0 | cp >> 6);
			s[n++] = (char)(0x80 | (cp & 0x3f));
		}
		s[n] = 0;
		json_object_set_new(vocab, s, json_integer(b));
	}
	for (int i = 0; i < FW_TOK_BYTE_VOCAB - 256; i++)
		json_array_append_new(added,
				      json_pack("{s:i,s:s,s:b,s:b,s:b,s:b,s:b}", "id", 256 + i,
						"content", byte_specials[i], "single_word", 0,
						"lstrip", 0, "rstrip", 0, "normalized", 0,
						"special", 1));
	json_t *bl = json_pack("{s:s,s:b,s:b,s:b}", "type", "ByteLevel", "add_prefix_space", 0,
			       "trim_offsets", 1, "use_regex", 0);
	json_object_set_new(root, "version", json_string("1.0"));
	json_object_set_new(root, "truncation", json_null());
	json_object_set_new(root, "padding", json_null());
	json_object_set(root, "added_tokens", added);
	json_object_set_new(root, "normalizer", json_null());
	json_object_set(root, "pre_tokenizer", bl);
	json_object_set_new(root, "post_processor", json_null());
	json_object_set_new(root, "decoder", bl);
	json_object_set_new(root, "model",
			    json_pack("{s:s,s:n,s:n,s:n,s:n,s:b,s:b,s:b,s:O,s:[]}", "type", "BPE",
				      "dropout", "unk_token", "continuing_subword_prefix",
				      "end_of_word_suffix", "fuse_unk", 0, "byte_fallback", 0,
				      "ignore_merges", 0, "vocab", vocab, "merges"));
	text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (text)
		t = fw_tok_load_mem(text, strlen(text), "byte tokenizer", NULL, 0);
out:
	free(text);
	json_decref(root);
	json_decref(vocab);
	json_decref(added);
	return t;
}

int fw_tok_save(const struct fw_tok *t, const char *path, char *err, size_t errlen)
{
	size_t n = strlen(path);
	char *tmp = malloc(n + 8);

	if (!tmp) {
		fw_seterr(err, errlen, "%s: out of memory", path);
		return -1;
	}
	memcpy(tmp, path, n);
	memcpy(tmp + n, ".XXXXXX", 8);
	int fd = mkstemp(tmp);
	if (fd < 0)
		goto fail;
	size_t off = 0;
	while (off < t->json_len) {
		ssize_t w = write(fd, t->json + off, t->json_len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			goto fail_fd;
		off += (size_t)w;
	}
	if (fchmod(fd, 0644) < 0 || fsync(fd) < 0)
		goto fail_fd;
	if (close(fd) < 0) {
		fd = -1;
		goto fail_unlink;
	}
	if (rename(tmp, path) < 0)
		goto fail_unlink;
	free(tmp);
	return 0;
fail_fd:;
	int e = errno;
	close(fd);
	errno = e;
fail_unlink:
	e = errno;
	unlink(tmp);
	errno = e;
fail:
	e = errno;
	fw_seterr(err, errlen, "%s: %s", path, strerror(e));
	free(tmp);
	errno = e;
	return -1;
}

/* ---- queries --------------------------------------------------------------------- */

int32_t fw_tok_vocab_size(const struct fw_tok *t)
{
	return t->nvocab;
}

int32_t fw_tok_id(const struct fw_tok *t, const char *s)
{
	struct sent *e = smap_get(&t->names, s, strlen(s));
	return e ? e->val : -1;
}

int32_t fw_tok_bos(const struct fw_tok *t)
{
	return t->bos;
}

int32_t fw_tok_eos(const struct fw_tok *t)
{
	return t->eos;
}

int fw_tok_is_special(const struct fw_tok *t, int32_t id)
{
	return id >= 0 && id < t->nvocab && t->info[id].special;
}

const char *fw_tok_piece(const struct fw_tok *t, int32_t id, size_t *len)
{
	if (id < 0 || id >= t->nvocab || !t->info[id].present)
		return NULL;
	*len = t->info[id].len;
	return t->pool + t->info[id].off;
}

char *fw_tok_decode(const struct fw_tok *t, const int32_t *ids, size_t n, unsigned flags,
		    size_t *outlen, char *err, size_t errlen)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++) {
		if (ids[i] < 0 || ids[i] >= t->nvocab || !t->info[ids[i]].present) {
			fw_seterr(err, errlen, "token %zu: no token has id %ld", i, (long)ids[i]);
			return NULL;
		}
		if (!(flags & FW_TOK_SKIP_SPECIAL) || !t->info[ids[i]].special)
			total += t->info[ids[i]].len;
	}
	char *out = malloc(total + 1);
	if (!out) {
		fw_seterr(err, errlen, "out of memory");
		return NULL;
	}
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		const struct tokinfo *ti = &t->info[ids[i]];
		if ((flags & FW_TOK_SKIP_SPECIAL) && ti->special)
			continue;
		memcpy(out + o, t->pool + ti->off, ti->len);
		o += ti->len;
	}
	out[o] = 0;
	if (outlen)
		*outlen = o;
	return out;
}

/* ---- encoding ------------------------------------------------------------------ */

struct hent {
	int32_t rank, pos;
};

/* Per-call state: symbol lists and heap for merging, regex match data. */
struct scratch {
	int32_t *id, *prev, *next;
	struct hent *heap;
	size_t cap, nheap;
	pcre2_match_data *md[MAX_RE];
	pcre2_match_context *mctx;
	pcre2_jit_stack *js;
	struct fw_tok_ids *out;
	int mask;
};

static void scratch_free(struct scratch *sc)
{
	free(sc->id);
	free(sc->prev);
	free(sc->next);
	free(sc->heap);
	for (int i = 0; i < MAX_RE; i++)
		pcre2_match_data_free(sc->md[i]);
	pcre2_match_context_free(sc->mctx);
	pcre2_jit_stack_free(sc->js);
}

static int scratch_reserve(struct scratch *sc, size_t n)
{
	if (n <= sc->cap)
		return 0;
	size_t cap = sc->cap ? sc->cap : 64;
	while (cap < n)
		cap *= 2;
	int32_t *id = realloc(sc->id, cap * sizeof *id);
	if (id)
		sc->id = id;
	int32_t *prev = realloc(sc->prev, cap * sizeof *prev);
	if (prev)
		sc->prev = prev;
	int32_t *next = realloc(sc->next, cap * sizeof *next);
	if (next)
		sc->next = next;
	struct hent *heap = realloc(sc->heap, 3 * cap * sizeof *heap);
	if (heap)
		sc->heap = heap;
	if (!id || !prev || !next || !heap)
		return -1;
	sc->cap = cap;
	return 0;
}

static int hless(struct hent a, struct hent b)
{
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void heap_push(struct scratch *sc, int32_t rank, int32_t pos)
{
	size_t i = sc->nheap++;
	struct hent e = { rank, pos };

	while (i > 0 && hless(e, sc->heap[(i - 1) / 2])) {
		sc->heap[i] = sc->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	sc->heap[i] = e;
}

static struct hent heap_pop(struct scratch *sc)
{
	struct hent top = sc->heap[0], e = sc->heap[--sc->nheap];
	size_t i = 0, n = sc->nheap;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && hless(sc->heap[c + 1], sc->heap[c]))
			c++;
		if (!hless(sc->heap[c], e))
			break;
		sc->heap[i] = sc->heap[c];
		i = c;
	}
	if (n)
		sc->heap[i] = e;
	return top;
}

static int emit(struct scratch *sc, const int32_t *ids, size_t n)
{
	if (ids_reserve(sc->out, n) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		sc->out->ids[sc->out->n] = ids[i];
		sc->out->mask[sc->out->n++] = (uint8_t)sc->mask;
	}
	return 0;
}

static void cache_store(struct fw_tok *t, const char *p, size_t n, const int32_t *ids,
			size_t k)
{
	pthread_mutex_lock(&t->lock);
	if (t->cache.n >= CACHE_MAX_ENTRIES) {
		smap_clear(&t->cache);
		t->cn = 0;
	}
	if (t->cn + k + 1 > t->ccap) {
		size_t cap = t->ccap ? t->ccap * 2 : 4096;
		while (cap < t->cn + k + 1)
			cap *= 2;
		int32_t *nc = realloc(t->cids, cap * sizeof *nc);
		if (!nc)
			goto out; /* caching is an optimisation: skip it */
		t->cids = nc;
		t->ccap = cap;
	}
	t->cids[t->cn] = (int32_t)k;
	memcpy(t->cids + t->cn + 1, ids, k * sizeof *ids);
	if (smap_put(&t->cache, p, n, (int32_t)t->cn) == 0)
		t->cn += k + 1;
out:
	pthread_mutex_unlock(&t->lock);
}

/* Merges one piece of n bytes at p and appends its ids. */
static int bpe_piece(struct fw_tok *t, struct scratch *sc, const char *p, size_t n)
{
	const unsigned char *u = (const unsigned char *)p;

	if (!n)
		return 0;
	if (n == 1 || !t->merges.n) {
		if (ids_reserve(sc->out, n) < 0)
			return -1;
		for (size_t i = 0; i < n; i++) {
			sc->out->ids[sc->out->n] = t->byte_id[u[i]];
			sc->out->mask[sc->out->n++] = (uint8_t)sc->mask;
		}
		return 0;
	}
	if (t->ignore_merges) {
		struct sent *e = smap_get(&t->vocab, p, n);
		if (e)
			return emit(sc, &e->val, 1);
	}
	if (n <= CACHE_MAX_PIECE) {
		int hit = 0, rc = 0;
		pthread_mutex_lock(&t->lock);
		struct sent *e = smap_get(&t->cache, p, n);
		if (e) {
			hit = 1;
			rc = emit(sc, t->cids + e->val + 1, (size_t)t->cids[e->val]);
		}
		pthread_mutex_unlock(&t->lock);
		if (hit)
			return rc;
	}
	if (n > INT32_MAX / 4 || scratch_reserve(sc, n) < 0)
		return -1;
	int32_t *id = sc->id, *prev = sc->prev, *next = sc->next;
	int32_t N = (int32_t)n;
	sc->nheap = 0;
	for (int32_t i = 0; i < N; i++) {
		id[i] = t->byte_id[u[i]];
		prev[i] = i - 1;
		next[i] = i + 1;
	}
	for (int32_t i = 0; i + 1 < N; i++) {
		const struct merge *m = pmap_get(&t->merges, id[i], id[i + 1]);
		if (m)
			heap_push(sc, m->rank, i);
	}
	while (sc->nheap) {
		struct hent h = heap_pop(sc);
		int32_t pos = h.pos, nx = next[pos];
		if (id[pos] < 0 || nx >= N)
			continue;
		const struct merge *m = pmap_get(&t->merges, id[pos], id[nx]);
		if (!m || m->rank != h.rank) /* stale: a neighbour merged first */
			continue;
		id[pos] = m->id;
		id[nx] = -1;
		next[pos] = next[nx];
		if (next[pos] < N)
			prev[next[pos]] = pos;
		if (prev[pos] >= 0 && (m = pmap_get(&t->merges, id[prev[pos]], id[pos])))
			heap_push(sc, m->rank, prev[pos]);
		if (next[pos] < N && (m = pmap_get(&t->merges, id[pos], id[next[pos]])))
			heap_push(sc, m->rank, pos);
	}
	size_t k = 0;
	for (int32_t i = 0; i < N; i = next[i])
		id[k++] = id[i];
	if (n <= CACHE_MAX_PIECE)
		cache_store(t, p, n, id, k);
	return emit(sc, id, k);
}

static int split(struct fw_tok *t, struct scratch *sc, int level, const char *s, size_t n);

/* The text between added tokens: NFC first when asked and needed. */
static int span(struct fw_tok *t, struct scratch *sc, unsigned flags, const char *s, size_t n)
{
	if (!(flags & FW_TOK_NORMALIZE) || !t->nfc || !fw_tok_nfc_needed(s, n))
		return split(t, sc, 0, s, n);
	size_t nn;
	char *norm = fw_tok_nfc(s, n, &nn);
	if (!norm)
		return -1;
	int rc = split(t, sc, 0, norm, nn);
	free(norm);
	return rc;
}

/* Splits n bytes at s with regex number level and hands each piece, and
 * each run of bytes no match covers, to the next level. */
static int split(struct fw_tok *t, struct scratch *sc, int level, const char *s, size_t n)
{
	if (level == t->nre)
		return bpe_piece(t, sc, s, n);
	if (!sc->md[level] && !(sc->md[level] = pcre2_match_data_create(1, NULL)))
		return -1;
	pcre2_match_data *md = sc->md[level];
	size_t off = 0, gap = 0;
	while (off < n) {
		int rc = pcre2_match(t->re[level], (PCRE2_SPTR)s, n, off, 0, md, sc->mctx);
		if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !sc->js) {
			sc->mctx = pcre2_match_context_create(NULL);
			sc->js = pcre2_jit_stack_create(32 << 10, 64 << 20, NULL);
			if (!sc->mctx || !sc->js)
				return -1;
			pcre2_jit_stack_assign(sc->mctx, NULL, sc->js);
			continue;
		}
		if (rc < 0) /* no match, or a match limit: the rest is one run */
			break;
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
		size_t ms = ov[0], me = ov[1];
		if (me == ms) { /* an empty match: step over one character */
			off = ms + 1;
			while (off < n && ((unsigned char)s[off] & 0xc0) == 0x80)
				off++;
			continue;
		}
		if (ms > gap && split(t, sc, level + 1, s + gap, ms - gap) < 0)
			return -1;
		if (split(t, sc, level + 1, s + ms, me - ms) < 0)
			return -1;
		off = gap = me;
	}
	if (n > gap)
		return split(t, sc, level + 1, s + gap, n - gap);
	return 0;
}

int fw_tok_encode(const struct fw_tok *ct, const void *text, size_t len, unsigned flags,
		  int mask, struct fw_tok_ids *out)
{
	/* Only the cache changes, under the lock. */
	struct fw_tok *t = (struct fw_tok *)ct;
	const char *s = text;
	struct scratch sc = { .out = out, .mask = mask ? 1 : 0 };
	size_t pos = 0, i = 0;
	int rc = 0;

	if ((flags & FW_TOK_ADD_BOS) && t->bos >= 0 && fw_tok_ids_push(out, t->bos, sc.mask) < 0)
		return -1;
	if (!len)
		return 0;
	while (i < len && t->nadded) {
		unsigned char c = (unsigned char)s[i];
		const struct added *hit = NULL;
		for (uint32_t j = t->first[c]; j < t->first[c + 1]; j++) {
			const struct added *a = &t->added[j];
			if (a->special && !(flags & FW_TOK_SPECIAL))
				continue;
			if (a->len <= len - i && memcmp(t->pool + a->off, s + i, a->len) == 0) {
				hit = a;
				break;
			}
		}
		if (!hit) {
			i++;
			continue;
		}
		if ((rc = span(t, &sc, flags, s + pos, i - pos)) < 0 ||
		    (rc = emit(&sc, &hit->id, 1)) < 0)
			goto out;
		i += hit->len;
		pos = i;
	}
	rc = span(t, &sc, flags, s + pos, len - pos);
out:
	scratch_free(&sc);
	return rc;
}
