/*
 * test_redact.c — the redaction rules of fw_redact.h: each rule catches its
 * kind of secret in text, JSON arguments and tool output, leaves ordinary
 * text alone, counts what it replaced, and keeps JSON text valid.
 */
#include <jansson.h>

#include "fw_redact.h"
#include "test.h"

static struct fw_redact *rd(void)
{
	static struct fw_redact *r;
	char err[256];

	if (!r) {
		r = fw_redact_new(err, sizeof err);
		if (!r)
			printf("# fw_redact_new: %s\n", err);
	}
	return r;
}

/* Redacts s; returns a static copy of the result and fills c. */
static const char *red(const char *s, struct fw_redact_counts *c)
{
	static char out[8192];
	struct fw_redact_counts tmp;
	size_t n;

	memset(&tmp, 0, sizeof tmp);
	char *p = fw_redact_str(rd(), s, strlen(s), &n, c ? c : &tmp);
	CHECK(p != NULL);
	if (!p)
		return "";
	CHECK_EQ_INT(strlen(p), n);
	snprintf(out, sizeof out, "%s", p);
	free(p);
	return out;
}

/* Checks that s redacts to want with exactly one replacement by rule. */
static void one(const char *s, const char *want, int rule)
{
	struct fw_redact_counts c;
	unsigned long total = 0;

	memset(&c, 0, sizeof c);
	CHECK_STR(red(s, &c), want);
	for (int i = 0; i < FW_RD_NRULES; i++)
		total += c.n[i];
	CHECK_EQ_INT(c.n[rule], 1);
	CHECK_EQ_INT(total, 1);
}

/* Checks that s comes back unchanged. */
static void keep(const char *s)
{
	CHECK_STR(red(s, NULL), s);
}

TEST(rule_names_are_stable)
{
	CHECK_STR(fw_redact_rule_name(FW_RD_AWS), "aws");
	CHECK_STR(fw_redact_rule_name(FW_RD_KV_SECRET), "kv-secret");
	CHECK_STR(fw_redact_rule_name(FW_RD_URL_PASSWORD), "url-password");
	CHECK_STR(fw_redact_rule_name(FW_RD_PRIVATE_KEY), "private-key");
	CHECK(fw_redact_rule_name(FW_RD_NRULES) == NULL);
	CHECK(fw_redact_rule_name(-1) == NULL);
}

TEST(aws_access_key_id)
{
	one("export AWS_ACCESS_KEY_ID=AKIAQ2TZ7LMNOPQR3WXY", "export AWS_ACCESS_KEY_ID=<REDACTED:aws>",
	    FW_RD_AWS);
	one("key ASIAABCDEFGHIJKLMNOP.", "key <REDACTED:aws>.", FW_RD_AWS);
	keep("AKIA is the prefix of long-term keys");
	keep("AKIAQ2TZ7LMNOPQR3WXYZZZ"); /* too long: not a key id */
}

TEST(github_tokens)
{
	one("GITHUB_TOKEN=ghp_0123456789abcdefghijABCDEFGHIJ012345 rest",
	    "GITHUB_TOKEN=<REDACTED:github> rest", FW_RD_GITHUB);
	one("token github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
	    "token <REDACTED:github>", FW_RD_GITHUB);
	/* a token used as a URL password is named after the token */
	one("https://x-access-token:ghs_0123456789abcdefghijABCDEFGHIJ012345@github.com/a/b.git",
	    "https://x-access-token:<REDACTED:github>@github.com/a/b.git", FW_RD_GITHUB);
	keep("the ghp_ prefix marks personal tokens");
}

TEST(openai_and_anthropic_keys)
{
	one("OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh3iJk6l",
	    "OPENAI_API_KEY=<REDACTED:openai>", FW_RD_OPENAI);
	one("sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AbCdEfGhIjKlMnOpQrStUvWxYz0123AA!",
	    "<REDACTED:anthropic>!", FW_RD_ANTHROPIC);
	keep("use sk-learn for the baseline");
	keep("a sk-short-key");
}

TEST(slack_tokens_and_webhooks)
{
	one("SLACK_BOT_TOKEN=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
	    "SLACK_BOT_TOKEN=<REDACTED:slack>", FW_RD_SLACK);
	one("post to https://hooks.slack.com/services/T0000000/B0000000/XXXXXXXXXXXXXXXXXXXXXXXX now",
	    "post to <REDACTED:slack> now", FW_RD_SLACK);
}

TEST(pem_private_keys_with_real_and_escaped_newlines)
{
	one("key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7Mhgw\n"
	    "abcdefghijklmnop+/==\n-----END RSA PRIVATE KEY-----\ndone",
	    "key:\n<REDACTED:private-key>\ndone", FW_RD_PRIVATE_KEY);
	/* inside JSON text the newlines are \n escapes */
	one("{\"key\": \"-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAAA\\n"
	    "-----END OPENSSH PRIVATE KEY-----\\n\"}",
	    "{\"key\": \"<REDACTED:private-key>\\n\"}", FW_RD_PRIVATE_KEY);
	/* cut off by an output cap: redacted to the end of the base64 */
	one("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n[output truncated]",
	    "<REDACTED:private-key>[output truncated]", FW_RD_PRIVATE_KEY);
	keep("-----BEGIN PUBLIC KEY-----\nMFwwDQYJKoZIhvcNAQEBBQADSwAwSAJBAK\n-----END PUBLIC KEY-----");
}

TEST(jwt_and_bearer)
{
	one("cookie: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
	    "cookie: <REDACTED:jwt>", FW_RD_JWT);
	one("curl -H \"Authorization: Bearer 9f8e7d6c5b4a39281706qPzXwVbNmLtR\" https://x",
	    "curl -H \"Authorization: Bearer <REDACTED:bearer>\" https://x", FW_RD_BEARER);
}

TEST(bearer_keeps_the_header_name)
{
	/* only the token goes, the header stays readable */
	one("Authorization: Bearer abc.def-ghi_jkl~mno", "Authorization: Bearer <REDACTED:bearer>",
	    FW_RD_BEARER);
	one("{\"authorization\": \"bearer 7c1e90b4d2a8f356\"}",
	    "{\"authorization\": \"bearer <REDACTED:bearer>\"}", FW_RD_BEARER);
	keep("-H \"Authorization: Bearer $TOKEN\"");
	keep("Bearer authentication is described in RFC 6750");
}

TEST(url_passwords)
{
	one("DATABASE_URL=postgres://app:Zq8xW2vB7nM4kL1p@db.internal:5432/ledger",
	    "DATABASE_URL=postgres://app:<REDACTED:url-password>@db.internal:5432/ledger",
	    FW_RD_URL_PASSWORD);
	keep("see https://example.com/a:b@c");
	keep("ssh git@github.com:acme/repo.git");
}

TEST(high_entropy_values_of_secret_keys)
{
	one("DB_PASSWORD=q8Z#x2Lm!vR7tY0p", "DB_PASSWORD=<REDACTED:kv-secret>", FW_RD_KV_SECRET);
	one("{\"client_secret\": \"Xk29fLq0Zm3nVb7w\"}", "{\"client_secret\": \"<REDACTED:kv-secret>\"}",
	    FW_RD_KV_SECRET);
	one("api_key: 'aB3dE6gH9jK2mN5p'", "api_key: '<REDACTED:kv-secret>'", FW_RD_KV_SECRET);
	one("auth_token => 7fA9c2E1b0D4e8F3", "auth_token => <REDACTED:kv-secret>", FW_RD_KV_SECRET);
	one("aws_secret_access_key = hQKfWiA5zOhj5X0cA677H/YM1Wv8Pm0lAR9wTFBL",
	    "aws_secret_access_key = <REDACTED:kv-secret>", FW_RD_KV_SECRET);
	/* the example key of AWS's documentation is not anyone's secret */
	keep("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
	one("export GH_TOKEN=\"Zq8xW2vB7nM4kL1p\"", "export GH_TOKEN=\"<REDACTED:kv-secret>\"",
	    FW_RD_KV_SECRET);
	/* low entropy, placeholders, numbers and variables stay */
	keep("password: changeme");
	keep("password=aaaaaaaaaaaa");
	keep("max_tokens: 4096");
	keep("token_count=12345678");
	keep("api_key = os.environ");
	keep("SECRET_KEY=${SECRET_KEY}");
	keep("password_reset_url: https://example.com/reset?x=1");
	keep("the token is invalid, the password expired");
}

TEST(email_addresses)
{
	one("Author: Dana Moreau <dana.moreau@acme-corp.com>", "Author: Dana Moreau <<REDACTED:email>>",
	    FW_RD_EMAIL);
	one("mail li+ci@mail.example.net.", "mail <REDACTED:email>.", FW_RD_EMAIL);
	keep("decorator @property and user@localhost");
	keep("git@github.com:acme/repo.git");
}

TEST(counts_every_replacement_by_rule)
{
	struct fw_redact_counts c;

	memset(&c, 0, sizeof c);
	const char *out = red("a@b.io c@d.io AKIAABCDEFGHIJKLMNOP and e@f.io", &c);
	CHECK_STR(out, "<REDACTED:email> <REDACTED:email> <REDACTED:aws> and <REDACTED:email>");
	CHECK_EQ_INT(c.n[FW_RD_EMAIL], 3);
	CHECK_EQ_INT(c.n[FW_RD_AWS], 1);
	CHECK_EQ_INT(c.n[FW_RD_JWT], 0);
	/* counts add up across calls */
	red("x@y.org", &c);
	CHECK_EQ_INT(c.n[FW_RD_EMAIL], 4);
}

TEST(redacting_twice_changes_nothing_more)
{
	const char *s = "DB_PASSWORD=q8Z#x2Lm!vR7tY0p https://u:Zq8xW2vB7nM4@h/ x@y.org "
			"Authorization: Bearer abcdefgh12345678 ghp_0123456789abcdefghijABCDEFGHIJ012345";
	char once[1024];
	struct fw_redact_counts c;

	snprintf(once, sizeof once, "%s", red(s, NULL));
	memset(&c, 0, sizeof c);
	CHECK_STR(red(once, &c), once);
	for (int i = 0; i < FW_RD_NRULES; i++)
		CHECK_EQ_INT(c.n[i], 0);
}

TEST(json_arguments_stay_valid_json)
{
	const char *args =
		"{\"command\": \"curl -H 'Authorization: Bearer 7c1e90b4d2a8f356XYZ' "
		"https://u:pa55w0rdZZ@h.example/x?to=a.b@c.io\", \"env\": {\"API_KEY\": \"Ab3dE6gH9jK2mN5pQ\", "
		"\"PEM\": \"-----BEGIN EC PRIVATE KEY-----\\nMHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5\\n\"}}";
	struct fw_redact_counts c;
	json_error_t e;

	memset(&c, 0, sizeof c);
	const char *out = red(args, &c);
	json_t *j = json_loads(out, 0, &e);
	CHECK(j != NULL);
	if (!j)
		printf("# %s: %s\n", out, e.text);
	json_decref(j);
	CHECK_EQ_INT(c.n[FW_RD_BEARER], 1);
	CHECK_EQ_INT(c.n[FW_RD_URL_PASSWORD], 1);
	CHECK_EQ_INT(c.n[FW_RD_EMAIL], 1);
	CHECK_EQ_INT(c.n[FW_RD_KV_SECRET], 1);
	CHECK_EQ_INT(c.n[FW_RD_PRIVATE_KEY], 1);
	CHECK(strstr(out, "pa55w0rd") == NULL);
	CHECK(strstr(out, "MHcCAQ") == NULL);
}

TEST(binary_and_long_input)
{
	/* embedded NULs and invalid UTF-8 pass through untouched */
	const char s[] = "a\0b\xff\xfe x@y.org";
	size_t n;
	struct fw_redact_counts c;

	memset(&c, 0, sizeof c);
	char *p = fw_redact_str(rd(), s, sizeof s - 1, &n, &c);
	CHECK(p && n == 5 + 1 + strlen("<REDACTED:email>"));
	CHECK(p && memcmp(p, s, 6) == 0);
	CHECK_EQ_INT(c.n[FW_RD_EMAIL], 1);
	free(p);

	/* a long run of word characters does not make the key rule slow */
	size_t big = 1 << 20;
	char *w = malloc(big + 32);
	memset(w, 'a', big);
	strcpy(w + big, " token=Zq8xW2vB7nM4kL1p");
	p = fw_redact_str(rd(), w, strlen(w), &n, NULL);
	CHECK(p && strstr(p, "token=<REDACTED:kv-secret>"));
	free(p);
	free(w);
}

TEST(entropy)
{
	CHECK_NEAR(fw_redact_entropy("", 0), 0, 1e-12);
	CHECK_NEAR(fw_redact_entropy("aaaa", 4), 0, 1e-12);
	CHECK_NEAR(fw_redact_entropy("abcd", 4), 2, 1e-12);
	CHECK_NEAR(fw_redact_entropy("aabb", 4), 1, 1e-12);
}

TEST_MAIN()
