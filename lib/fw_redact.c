/*
 * fw_redact.c — the redaction rules of fw_redact.h.
 *
 * Each rule is one PCRE2 pattern (byte mode, JIT when available) and the
 * number of the capture group to replace (0: the whole match).  A rule may
 * add a check on the match: the key/value rule replaces only values that
 * look random (entropy and character classes), so `password: changeme` in a
 * tutorial stays readable while `DB_PASSWORD=q8Z#...` goes.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_redact.h"

struct rule {
	const char *name;
	const char *pattern;
	int group; /* capture group replaced; 0 for the whole match */
};

/* Order matters: see fw_redact.h. */
static const struct rule rules[FW_RD_NRULES] = {
	[FW_RD_PRIVATE_KEY] = {"private-key",
		"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
		"(?:[A-Za-z0-9+/=\\s\\\\:,.-]*?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
		"|[A-Za-z0-9+/=\\s\\\\]*)", 0},
	[FW_RD_ANTHROPIC] = {"anthropic",
		"\\bsk-ant-[a-z]{2,8}\\d{2}-[A-Za-z0-9_-]{20,}", 0},
	[FW_RD_OPENAI] = {"openai",
		"\\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}", 0},
	[FW_RD_GITHUB] = {"github",
		"\\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\\b", 0},
	[FW_RD_AWS] = {"aws",
		"\\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\\b", 0},
	[FW_RD_SLACK] = {"slack",
		"\\bxox[abposr]-[0-9A-Za-z-]{10,}|\\bxapp-\\d-[A-Z0-9]+-\\d+-[a-z0-9]+"
		"|https://hooks\\.slack\\.com/(?:services|workflows)/[A-Za-z0-9/_+-]{20,}", 0},
	[FW_RD_JWT] = {"jwt",
		"\\beyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{10,}", 0},
	[FW_RD_BEARER] = {"bearer",
		"(?i)authorization[\"']?\\s*[:=]\\s*[\"']?bearer\\s+([A-Za-z0-9._~+/-]{8,}=*)", 1},
	[FW_RD_URL_PASSWORD] = {"url-password",
		"\\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\\s:/@\"'<>\\\\]+:([^\\s/@\"'<>\\\\]+)@", 1},
	[FW_RD_KV_SECRET] = {"kv-secret",
		"(?i)(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]{0,64}?(?:passw(?:or)?d|pwd|secret|token|api[_-]?key"
		"|apikey|access[_-]?key|private[_-]?key|credentials?)[A-Za-z0-9_.-]{0,64}"
		"[\"']?[ \\t]*(?::|=|:=|=>)[ \\t]*[\"']?([^\\s\"'`,;<>(){}\\[\\]\\\\]{8,})", 1},
	[FW_RD_EMAIL] = {"email",
		"(?<![A-Za-z0-9._%+-])(?!git@)[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)*"
		"\\.[A-Za-z]{2,24}\\b", 0},
};

/* A key/value secret must look random: at least this many bits per byte. */
#define KV_MIN_ENTROPY 3.0

struct fw_redact {
	pcre2_code *re[FW_RD_NRULES];
	pcre2_match_data *md;
};

const char *fw_redact_rule_name(int rule)
{
	if (rule < 0 || rule >= FW_RD_NRULES)
		return NULL;
	return rules[rule].name;
}

double fw_redact_entropy(const char *s, size_t n)
{
	size_t freq[256] = {0};
	double h = 0;

	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		freq[(unsigned char)s[i]]++;
	for (int i = 0; i < 256; i++) {
		if (freq[i]) {
			double p = (double)freq[i] / n;
			h -= p * log2(p);
		}
	}
	return h;
}

/* Whether v looks like a generated secret rather than a word, a number or
 * a placeholder: entropy high enough and more than one character class. */
static int kv_value_is_secret(const char *v, size_t n)
{
	int lower = 0, upper = 0, digit = 0, other = 0;

	if (fw_redact_entropy(v, n) < KV_MIN_ENTROPY)
		return 0;
	if (v[0] == '$' || v[0] == '%' || (n >= 4 && !strncmp(v, "http", 4)))
		return 0; /* a variable, a template, a URL */
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = v[i];
		if (ch >= 'a' && ch <= 'z')
			lower = 1;
		else if (ch >= 'A' && ch <= 'Z')
			upper = 1;
		else if (ch >= '0' && ch <= '9')
			digit = 1;
		else if (ch != '_' && ch != '-' && ch != '.')
			other = 1;
	}
	if (!lower && !upper && !other)
		return 0; /* all digits: a count, a port, an id */
	return lower + upper + digit + other >= 2;
}

struct fw_redact *fw_redact_new(char *err, size_t errlen)
{
	struct fw_redact *r = calloc(1, sizeof *r);

	if (!r) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	for (int i = 0; i < FW_RD_NRULES; i++) {
		int ec;
		PCRE2_SIZE off;
		r->re[i] = pcre2_compile((PCRE2_SPTR)rules[i].pattern, PCRE2_ZERO_TERMINATED, 0,
					 &ec, &off, NULL);
		if (!r->re[i]) {
			PCRE2_UCHAR msg[160];
			pcre2_get_error_message(ec, msg, sizeof msg);
			snprintf(err, errlen, "rule '%s': column %zu: %s", rules[i].name,
				 (size_t)off, (char *)msg);
			fw_redact_free(r);
			return NULL;
		}
		/* JIT is an optimisation: a platform without it still matches. */
		pcre2_jit_compile(r->re[i], PCRE2_JIT_COMPLETE);
	}
	r->md = pcre2_match_data_create(8, NULL);
	if (!r->md) {
		snprintf(err, errlen, "out of memory");
		fw_redact_free(r);
		return NULL;
	}
	return r;
}

void fw_redact_free(struct fw_redact *r)
{
	if (!r)
		return;
	for (int i = 0; i < FW_RD_NRULES; i++)
		pcre2_code_free(r->re[i]);
	pcre2_match_data_free(r->md);
	free(r);
}

struct sbuf {
	char *p;
	size_t n, cap;
};

static int sbuf_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return -1;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
	return 0;
}

/* Applies rule i to s[0..n), appending the result to out.  Returns the
 * number of replacements, or -1 when memory runs out. */
static long apply_rule(struct fw_redact *r, int i, const char *s, size_t n, struct sbuf *out)
{
	char tag[48];
	size_t taglen = (size_t)snprintf(tag, sizeof tag, "<REDACTED:%s>", rules[i].name);
	size_t pos = 0, done = 0;
	long count = 0;

	while (pos <= n) {
		int rc = pcre2_match(r->re[i], (PCRE2_SPTR)s, n, pos, 0, r->md, NULL);
		if (rc <= 0)
			break; /* no match, or a match limit hit: keep the rest as is */
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(r->md);
		size_t ms = ov[0], me = ov[1];
		int g = rules[i].group;
		size_t gs = ms, ge = me;
		if (g > 0 && g < rc && ov[2 * g] != PCRE2_UNSET) {
			gs = ov[2 * g];
			ge = ov[2 * g + 1];
		}
		if (i == FW_RD_KV_SECRET && !kv_value_is_secret(s + gs, ge - gs)) {
			pos = me > ms ? me : ms + 1;
			continue;
		}
		if (sbuf_add(out, s + done, gs - done) || sbuf_add(out, tag, taglen))
			return -1;
		done = ge;
		count++;
		pos = me > ms ? me : ms + 1;
	}
	if (sbuf_add(out, s + done, n - done))
		return -1;
	return count;
}

char *fw_redact_str(struct fw_redact *r, const char *s, size_t n, size_t *outn,
		    struct fw_redact_counts *c)
{
	struct sbuf cur = {0}, next = {0};

	if (sbuf_add(&cur, s, n))
		return NULL;
	for (int i = 0; i < FW_RD_NRULES; i++) {
		next.n = 0;
		long k = apply_rule(r, i, cur.p, cur.n, &next);
		if (k < 0) {
			free(cur.p);
			free(next.p);
			errno = ENOMEM;
			return NULL;
		}
		if (k == 0)
			continue;
		if (c)
			c->n[i] += (unsigned long)k;
		struct sbuf t = cur;
		cur = next;
		next = t;
	}
	free(next.p);
	if (outn)
		*outn = cur.n;
	return cur.p;
}
