/*
 * fw_redact.h — secret redaction for logs that leave the product.
 *
 * A fixed, ordered set of rules (PCRE2 patterns, some with a check on the
 * match) finds credentials and personal data in free text, tool arguments
 * (JSON text) and tool outputs, and replaces each by `<REDACTED:rule>`.  The
 * replacement holds no quote or backslash, so JSON text stays valid JSON
 * when a secret sat inside one of its strings.  Rules run in the order of
 * enum fw_redact_rule: specific token formats first, so that a GitHub token
 * inside a URL is named `github`, not `url-password`.
 *
 * A token format (ghp_..., AKIA...) is redacted wherever it appears.  A
 * keyword rule (kv-secret: `password = VALUE`) redacts only a value that
 * looks generated: a quoted literal or a bare word that is not code (an
 * identifier, a member access, a call, a subscript, a path, a URL, a
 * template or variable, a placeholder such as `changeme` or `xxxx`), that
 * holds a digit or a symbol, and whose characters are random enough.
 * Code read by an agent is left as it is; see tests/bench/redact for the
 * rate of misses and of redactions in real code.  The man page fb-ingest(1)
 * lists the rules with examples.
 */
#ifndef FW_REDACT_H
#define FW_REDACT_H

#include <stddef.h>

enum fw_redact_rule {
	FW_RD_PRIVATE_KEY, /* PEM "-----BEGIN ... PRIVATE KEY-----" blocks */
	FW_RD_ANTHROPIC,   /* sk-ant-api03-... */
	FW_RD_OPENAI,      /* sk-proj-..., sk-... */
	FW_RD_GITHUB,      /* ghp_ gho_ ghu_ ghs_ ghr_ github_pat_ */
	FW_RD_GITLAB,      /* glpat- gldt- glrt- glptt- ... */
	FW_RD_AWS,         /* AKIA/ASIA/... access key ids */
	FW_RD_SLACK,       /* xoxb-/xoxp-/... tokens, hooks.slack.com URLs */
	FW_RD_STRIPE,      /* sk_live_ rk_live_ sk_test_ ... whsec_ */
	FW_RD_GOOGLE,      /* AIza... API keys */
	FW_RD_NPM,         /* npm_... access tokens */
	FW_RD_JWT,         /* three base64url parts, header and payload JSON */
	FW_RD_BEARER,      /* the token of "Authorization: Bearer TOKEN" */
	FW_RD_URL_PASSWORD, /* the password of scheme://user:PASSWORD@host */
	FW_RD_KV_SECRET,   /* generated-looking value of a key like password, secret, token */
	FW_RD_EMAIL,       /* e-mail addresses */
	FW_RD_NRULES
};

/* Counts of replacements, one per rule. */
struct fw_redact_counts {
	unsigned long n[FW_RD_NRULES];
};

struct fw_redact;

/* Compiles the rules.  Returns a rule set the caller frees with
 * fw_redact_free(), or NULL with a message in err (out of memory, or a
 * pattern PCRE2 refused).  A rule set is not thread-safe: use one per
 * thread. */
struct fw_redact *fw_redact_new(char *err, size_t errlen);

/* Frees r; fw_redact_free(NULL) does nothing. */
void fw_redact_free(struct fw_redact *r);

/* Name of a rule as written in `<REDACTED:name>`, e.g. "aws", "kv-secret";
 * NULL for a value out of range. */
const char *fw_redact_rule_name(int rule);

/*
 * Redacts s[0..n) (bytes; need not be NUL-terminated nor valid UTF-8).
 * Returns a new NUL-terminated string the caller frees with free(), its
 * length in *outn (outn may be NULL), and adds the number of replacements
 * per rule to *c (c may be NULL).  Returns NULL when memory runs out.
 */
char *fw_redact_str(struct fw_redact *r, const char *s, size_t n, size_t *outn,
		    struct fw_redact_counts *c);

/* Shannon entropy of s[0..n) in bits per byte (0 for n == 0).  Cannot fail. */
double fw_redact_entropy(const char *s, size_t n);

#endif
