/*
 * fw_redact.c — the redaction rules of fw_redact.h.
 *
 * Each rule is one PCRE2 pattern (byte mode, JIT when available), the
 * number of the capture group to replace (0: the whole match) and a check
 * on what matched.  Token formats only refuse placeholders (`ghp_xxxx...`,
 * AWS's documented EXAMPLE keys).  The keyword rule is where code and
 * secrets meet: `token = getToken();`, `_currToken = JsonToken.START;`,
 * `-v "$PWD":/src` and `password: changeme` must stay, `DB_PASSWORD=q8Z#...`
 * must go.  Its pattern only finds a key, an operator and a value that ends
 * where a literal ends (not before `(`, `[` or `<`); kv_value_is_secret()
 * then judges the value by its shape: the way gitleaks' generic rule and
 * detect-secrets' keyword plugin do (entropy, stop words, allow-lists), with
 * tests of our own for identifiers and paths.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_redact.h"

enum check {
	CK_NONE,  /* every match goes */
	CK_TOKEN, /* not a placeholder such as ghp_xxxx... */
	CK_PEM,   /* a key's body, not -----BEGIN PRIVATE KEY-----\nXXXX */
	CK_BEARER,
	CK_URL_PASSWORD,
	CK_KV,
};

struct rule {
	const char *name;
	const char *pattern;
	int group; /* capture group replaced; 0 for the whole match */
	enum check check;
};

/* The keys of kv-secret: a name holding one of these words. */
#define KV_WORDS "passw(?:or)?d|passphrase|pwd|secret|token|api[_-]?key|apikey" \
	"|access[_-]?key|private[_-]?key|credentials?"

/* Order matters: see fw_redact.h. */
static const struct rule rules[FW_RD_NRULES] = {
	[FW_RD_PRIVATE_KEY] = {"private-key",
		"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
		"(?:[A-Za-z0-9+/=\\s\\\\:,.-]*?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
		"|[A-Za-z0-9+/=\\s\\\\]*)", 0, CK_PEM},
	[FW_RD_ANTHROPIC] = {"anthropic",
		"\\bsk-ant-[a-z]{2,8}\\d{2}-[A-Za-z0-9_-]{20,}", 0, CK_TOKEN},
	[FW_RD_OPENAI] = {"openai",
		"\\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}", 0, CK_TOKEN},
	[FW_RD_GITHUB] = {"github",
		"\\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\\b", 0, CK_TOKEN},
	[FW_RD_GITLAB] = {"gitlab",
		"\\bgl(?:pat|dt|rt|ptt|soat|ft|imt|oas|cbt|agent)-[A-Za-z0-9_-]{20,}", 0, CK_TOKEN},
	[FW_RD_AWS] = {"aws",
		"\\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\\b", 0, CK_TOKEN},
	[FW_RD_SLACK] = {"slack",
		"\\bxox[abposre]-[0-9A-Za-z-]{10,}|\\bxapp-\\d-[A-Z0-9]+-\\d+-[a-z0-9]+"
		"|https://hooks\\.slack\\.com/(?:services|workflows)/[A-Za-z0-9/_+-]{20,}", 0, CK_TOKEN},
	[FW_RD_STRIPE] = {"stripe",
		"\\b(?:[sr]k_(?:live|test|prod)_[A-Za-z0-9]{10,99}|whsec_[A-Za-z0-9]{32,})\\b", 0,
		CK_TOKEN},
	[FW_RD_GOOGLE] = {"google",
		"\\bAIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])", 0, CK_TOKEN},
	[FW_RD_NPM] = {"npm",
		"\\bnpm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", 0, CK_TOKEN},
	[FW_RD_JWT] = {"jwt",
		"\\beyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{10,}", 0, CK_NONE},
	[FW_RD_BEARER] = {"bearer",
		"(?i)authorization[\"']?\\s*[:=]\\s*[\"']?bearer\\s+([A-Za-z0-9._~+/-]{8,}=*)", 1,
		CK_BEARER},
	[FW_RD_URL_PASSWORD] = {"url-password",
		"\\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\\s:/@\"'<>\\\\]*:([^\\s/@\"'<>\\\\]+)@", 1,
		CK_URL_PASSWORD},
	/*
	 * Group 1 the key (not inside a word, maybe a PHP `$name`), then its
	 * closing quote or bracket, an operator (not `==`, `!=`, `<=`, `::`),
	 * and either a quoted literal (group 3; its quote, maybe escaped
	 * inside JSON text, in group 2; an optional b/r/u string prefix) or a
	 * bare word (group 3; no `=` inside, base64 padding at its end; no
	 * `&` that starts a query's next `name=`) that a literal's end follows: end of text, space, a quote,
	 * `;`, `,`, a closing bracket, `\`, `&` or `|`.  A bare word that
	 * `(`, `[`, `<`, `{`, `>` or `=` follows is code: a call, a
	 * subscript, a generic, `a->b`, a keyword argument.
	 */
	[FW_RD_KV_SECRET] = {"kv-secret",
		"(?i)(?<![A-Za-z0-9_.$-])(\\$?[A-Za-z0-9_.-]{0,64}?(?:" KV_WORDS ")[A-Za-z0-9_.-]{0,64})"
		"(?:\\\\?[\"'])?\\]?[ \\t]*(?:=>|:=|\\?=|=(?![=~])|:(?![:=]))[ \\t]*"
		"(?|(?:[bru]|br|rb)?(\\\\?[\"'`])([^\\s\"'`\\\\]{8,256}+)\\2"
		"|()((?:[^\\s\"'`,;<>(){}\\[\\]\\\\=&]|&(?![\\w.-]*=)){8,256}+=*)"
		"(?![^\\s\"'`;,)}\\]\\\\&|]))", 3, CK_KV},
	[FW_RD_EMAIL] = {"email",
		"(?<![A-Za-z0-9._%+-])(?!git@)[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)*"
		"\\.[A-Za-z]{2,24}\\b", 0, CK_NONE},
};

/* A key/value secret must look random: at least this many bits per byte
 * (8 distinct characters give 3 bits). */
#define KV_MIN_ENTROPY 3.0
/* ...and, unless it holds a symbol, not read like an identifier: one that
 * changes character class (letter/digit, lower/upper, a separator) in less
 * than this share of its characters *and* whose words have this many
 * letters or more on average is code.  Generated base62 strings change
 * class at about 0.5 of their characters, hex at 0.25-0.55 with words of
 * one or two letters; s3Client, oauth2client.Credentials, x86_64-linux-gnu
 * or Qwen2.5-7B-Instruct at 0.1-0.25 with words of 3-8 letters. */
#define KV_MIN_BOUNDARIES 0.3
#define KV_WORD_LENGTH 3.0
/* Without a symbol a value needs this many characters: generated keys
 * have 16 or more, short identifiers with digits are common in code. */
#define KV_MIN_PLAIN 12
/* A token (ghp_...) with fewer bits per byte is a placeholder (ghp_xxxx...). */
#define TOKEN_MIN_ENTROPY 2.5

/* Values that are placeholders, not secrets: if a value holds one of these
 * (any case) it was written for a reader. */
static const char *const stop_words[] = {
	"example", "sample", "dummy", "placeholder", "changeme", "change_me", "change-me",
	"redacted", "your_", "your-", "yourpass", "xxxx", "****", "....", "----", "____",
	"qwerty", "password", "passwd", "secret", "token", "apikey", "api_key",
	"api-key", "12345", "abcde", "fake", "test", "mock", "lorem", "foobar", "hunter2", "letmein",
	"undefined", "required", "optional", "string",
};

/* Key endings that name something about a secret, not the secret:
 * max_tokens, token_type, password_file, secret_name, tokenizer... */
static const char *const key_stop_suffixes[] = {
	"tokens", "tokenizer", "_count", "_len", "_length", "_size", "_type", "_types",
	"_url", "_uri", "_endpoint", "_file", "_path", "_dir", "_name", "_id", "_field",
	"_header", "_prefix", "_env", "_var", "_policy", "_mode", "_format", "_ttl",
	"_timeout", "_expiry", "_expires", "_limit", "_hash", "_method", "_kind",
	"_label", "_key_id", "_ref", "_version",
};

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

/* Whether s[0..n) holds word (ASCII, any case). */
static int has_word(const char *s, size_t n, const char *word)
{
	size_t w = strlen(word);

	for (size_t i = 0; i + w <= n; i++) {
		size_t j = 0;
		while (j < w && tolower((unsigned char)s[i + j]) == word[j])
			j++;
		if (j == w)
			return 1;
	}
	return 0;
}

static int starts(const char *s, size_t n, const char *prefix)
{
	size_t p = strlen(prefix);
	return n >= p && !memcmp(s, prefix, p);
}

/* Separators inside identifiers, versions and paths. */
static int is_sep(int ch)
{
	return ch == '_' || ch == '-' || ch == '.' || ch == '/' || ch == ':' || ch == '@';
}

/* A value written for a reader or filled in later: a variable ($X, %X), a
 * template (${X}, {{x}}, %s, <x>), code with brackets, a path, a URL, or
 * one holding a stop word.  Shared by the keyword, bearer and URL password rules. */
static int is_placeholder(const char *v, size_t n)
{
	static const char *const templ[] = {"${", "{{", "}}", "%s", "%(", "#{", "<%"};
	static const char brackets[] = "()[]{}<>";
	size_t slashes = 0;
	int digit = 0;

	if (n == 0 || strchr("$%{<*", v[0]))
		return 1;
	for (size_t i = 0; i < sizeof templ / sizeof *templ; i++)
		if (has_word(v, n, templ[i]))
			return 1;
	if (has_word(v, n, "://") || starts(v, n, "http") || starts(v, n, "www."))
		return 1;
	for (size_t i = 0; i < n; i++) {
		if (memchr(brackets, v[i], sizeof brackets - 1))
			return 1; /* code or a pattern: list[V1Ref], ([a-z]+) */
		slashes += v[i] == '/';
		digit |= isdigit((unsigned char)v[i]) != 0;
	}
	/* /workspace, ./build, ~/x; but a base64 secret may start with '/' */
	if ((v[0] == '/' || starts(v, n, "~/") || starts(v, n, "./") || starts(v, n, "../")) &&
	    (slashes >= 2 || !digit))
		return 1;
	for (size_t i = 0; i < sizeof stop_words / sizeof *stop_words; i++)
		if (has_word(v, n, stop_words[i]))
			return 1;
	return 0;
}

/* Share of characters at a class boundary: a digit after a letter or the
 * reverse, an upper-case letter after a lower-case one, a lower-case one
 * after two upper-case ones (the end of an acronym, or random case), a
 * separator after a non-separator. */
static double boundaries(const char *v, size_t n)
{
	size_t b = 0;

	for (size_t i = 1; i < n; i++) {
		int p = (unsigned char)v[i - 1], c = (unsigned char)v[i];
		if (is_sep(c))
			b += !is_sep(p);
		else if (is_sep(p))
			continue;
		else if ((isdigit(c) != 0) != (isdigit(p) != 0))
			b++;
		else if (isupper(c) && islower(p))
			b++;
		else if (islower(c) && isupper(p) && i >= 2 && isupper((unsigned char)v[i - 2]))
			b++;
	}
	return n ? (double)b / n : 0;
}

/* Mean length of the words of v: runs of letters, split before an
 * upper-case letter that follows a lower-case one (camelCase).  The words
 * of identifiers are words (3 letters or more on average); those of hex or
 * base62 strings are one or two letters. */
static double word_length(const char *v, size_t n)
{
	size_t letters = 0, words = 0;

	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)v[i];
		if (!isalpha(c))
			continue;
		letters++;
		if (i == 0 || !isalpha((unsigned char)v[i - 1]) ||
		    (isupper(c) && islower((unsigned char)v[i - 1])))
			words++;
	}
	return words ? (double)letters / words : 0;
}

/* Counts the classes of v: lower, upper, digit, and "strong" symbols (not
 * the separators of is_sep(), which identifiers, paths and versions use). */
static void classes(const char *v, size_t n, int *lower, int *upper, int *digit, int *sym)
{
	*lower = *upper = *digit = *sym = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = v[i];
		if (islower(ch))
			*lower = 1;
		else if (isupper(ch))
			*upper = 1;
		else if (isdigit(ch))
			*digit = 1;
		else if (!is_sep(ch))
			*sym = 1;
	}
}

/* Whether key k[0..n) names a property of a secret rather than one. */
static int key_is_about_secret(const char *k, size_t n)
{
	while (n && (k[n - 1] == '"' || k[n - 1] == '\'' || k[n - 1] == '\\'))
		n--;
	for (size_t i = 0; i < sizeof key_stop_suffixes / sizeof *key_stop_suffixes; i++) {
		size_t w = strlen(key_stop_suffixes[i]);
		if (n >= w && has_word(k + n - w, w, key_stop_suffixes[i]))
			return 1;
	}
	return has_word(k, n, "tokeniz");
}

/* Whether v, the value of a secret-named key, looks generated rather than
 * like code, a word, a number or a placeholder. */
static int kv_value_is_secret(const char *v, size_t n)
{
	int lower, upper, digit, sym;

	if (n < 8 || is_placeholder(v, n))
		return 0;
	classes(v, n, &lower, &upper, &digit, &sym);
	if (!digit && !(lower && upper && sym))
		return 0; /* words, identifiers, kebab-case, geheim$parole */
	if (!lower && !upper && !sym)
		return 0; /* numbers, dates, versions */
	if (!sym && n < KV_MIN_PLAIN)
		return 0; /* s3Client_v2, utf8Token */
	if (!sym && boundaries(v, n) < KV_MIN_BOUNDARIES && word_length(v, n) >= KV_WORD_LENGTH)
		return 0; /* oauth2client.Credentials, x86_64-linux-gnu */
	return fw_redact_entropy(v, n) >= KV_MIN_ENTROPY;
}

/* The password of scheme://user:PASSWORD@host: any but a placeholder,
 * since people do type short plain passwords there. */
static int url_password_is_secret(const char *v, size_t n)
{
	static const char *const words[] = {"pass", "pwd", "pw", "p", "x"};

	for (size_t i = 0; i < sizeof words / sizeof *words; i++)
		if (n == strlen(words[i]) && has_word(v, n, words[i]))
			return 0;
	return !is_placeholder(v, n) && fw_redact_entropy(v, n) > 0;
}

/* The token of a Bearer header: not a placeholder or a variable name. */
static int bearer_is_secret(const char *v, size_t n)
{
	int lower, upper, digit, sym;

	if (is_placeholder(v, n))
		return 0;
	classes(v, n, &lower, &upper, &digit, &sym);
	return digit || sym;
}

/* Whether the PEM block m[0..n) holds a key: at least 16 base64
 * characters after its BEGIN line (escaped newlines skipped), with the
 * entropy of random bytes rather than of XXXX. */
static int pem_has_body(const char *m, size_t n)
{
	char body[4096];
	size_t i = 10, k = 0; /* past "-----BEGIN" */

	while (i + 5 <= n && memcmp(m + i, "-----", 5))
		i++;
	for (i += 5; i < n && k < sizeof body; i++) {
		if (m[i] == '-')
			break; /* the END line */
		if (m[i] == '\\') {
			i++; /* \n inside JSON text */
			continue;
		}
		if (isalnum((unsigned char)m[i]) || m[i] == '+' || m[i] == '/')
			body[k++] = m[i];
	}
	return k >= 16 && fw_redact_entropy(body, k) >= 3.0;
}

/* Whether a match of rule i in s is replaced: g[0..gn) is the part that
 * would go, ov the match's ovector with rc pairs. */
static int accept(int i, const char *s, const PCRE2_SIZE *ov, int rc, const char *g, size_t gn)
{
	switch (rules[i].check) {
	case CK_NONE:
		return 1;
	case CK_PEM:
		return pem_has_body(g, gn);
	case CK_TOKEN:
		return fw_redact_entropy(g, gn) >= TOKEN_MIN_ENTROPY && !memmem(g, gn, "EXAMPLE", 7);
	case CK_BEARER:
		return bearer_is_secret(g, gn);
	case CK_URL_PASSWORD:
		return url_password_is_secret(g, gn);
	case CK_KV:
		if (rc > 1 && ov[2] != PCRE2_UNSET && key_is_about_secret(s + ov[2], ov[3] - ov[2]))
			return 0;
		return kv_value_is_secret(g, gn);
	}
	return 1;
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
		if (!accept(i, s, ov, rc, s + gs, ge - gs)) {
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
