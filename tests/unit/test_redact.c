/*
 * test_redact.c — the redaction rules of fw_redact.h: each rule catches its
 * kind of secret in text, JSON arguments and tool output, leaves ordinary
 * text alone, counts what it replaced, and keeps JSON text valid.  Code
 * stays as it is: the false positives seen on real agent logs, this
 * repository's own C sources and thinking signatures come back unchanged;
 * the generated secrets of tests/fixtures/secrets/corpus.tsv are found at
 * least as often as the floors below say.
 */
#include <glob.h>
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

TEST(code_seen_in_agent_logs_stays)
{
	/* the redactions of issue 17, in the lines they came from */
	keep("String token = tokenProvider.getToken();");
	keep("String token = request.getHeader(\"X-Token\");");
	keep("_currToken = JsonToken.START_OBJECT;");
	keep("_currToken = _parser.nextToken();");
	keep("JsonToken t = p.nextToken(); _currToken = t;");
	keep("Optional<Credential> credentials = Optional.empty();");
	keep("Optional<Credential> credentials = credentialStore.load(userId);");
	keep("docker run -v \"$PWD\":/workspace -w /workspace maven:3.9 mvn test");
	keep("docker run -v $PWD:/src img");
	/* members, calls, subscripts, generics, keyword arguments */
	keep("final String accessToken = authResponse.accessToken;");
	keep("this.secretKey = secretKey;");
	keep("private final TokenStore tokenStore = new InMemoryTokenStore();");
	keep("String token = UUID.randomUUID().toString();");
	keep("Credentials credentials = Credentials.basic(user, pass);");
	keep("credentials = service_account.Credentials.from_service_account_file(path)");
	keep("credentials = oauth2client.client.OAuth2Credentials");
	keep("private_key = self._private_key_pkcs8_pem");
	keep("token = tokens[i + 1]");
	keep("token_type_match_fallback: bool=False");
	keep("api_key=self.api_key,");
	keep("password=getpass.getpass(\"Password: \")");
	keep("char *token = strtok(line, \" \\t\");");
	keep("if (token == NULL) tok->secret_len = 32;");
	keep("password: str | None = None");
	keep("tokenizer = AutoTokenizer.from_pretrained(\"Qwen/Qwen2.5-7B-Instruct\")");
	keep("model_token: Qwen2.5-7B-Instruct");
	keep("s3_token = s3Client_v2");
	/* variables, templates, environment look-ups, placeholders */
	keep("password = os.environ[\"DB_PASSWORD\"]");
	keep("api_key = os.environ.get(\"API_KEY\")");
	keep("const token = process.env.NPM_TOKEN;");
	keep("token: ${{ secrets.GITHUB_TOKEN }}");
	keep("TOKEN = \"${GITHUB_TOKEN}\"");
	keep("jwt_secret: ${JWT_SECRET:-devsecret}");
	keep("export HF_TOKEN=$(cat ~/.hf_token)");
	keep("api_key: $API_KEY");
	keep("secret: <token>");
	keep("\"token\": \"<your-token>\"");
	keep("token = None");
	keep("password: changeme");
	keep("password = \"xxxxxxxxxxxx\"");
	keep("\"password\": \"string\",");
	keep("api_key = 'YOUR_API_KEY_HERE'");
	keep("token = \"abcde12345\"");
	keep("passwd = 'geheim$parole'");
	keep("ENV PASSWORD_FILE=/run/secrets/db_password");
	keep("TOKEN_LIMIT=4096");
	keep("secretName: my-app-credentials-v2");
	keep("private static final String TOKEN_HEADER = \"X-Auth-Token\";");
	keep("key=\"-----BEGIN PRIVATE KEY-----\\\\nXXXX\\\\nXXXX\\\\n-----END PRIVATE KEY-----\"");
	keep("ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx and AKIAIOSFODNN7EXAMPLE");
	keep("postgres://user:password@localhost/db and mysql://app:${DB_PASSWORD}@db/app");
	keep("curl -H \"Authorization: Bearer YOUR_TOKEN\" -H \"Authorization: Bearer <token>\"");
}

TEST(secrets_in_code_go)
{
	one("String token = \"e3b0c44298fc1c149afbf4c8996fb924\";",
	    "String token = \"<REDACTED:kv-secret>\";", FW_RD_KV_SECRET);
	one("private static final String API_KEY = \"Zq8xW2vB7nM4kL1pR5tY\";",
	    "private static final String API_KEY = \"<REDACTED:kv-secret>\";", FW_RD_KV_SECRET);
	one("apiKey := \"0674bec92fcb093f050644e883006264\"", "apiKey := \"<REDACTED:kv-secret>\"",
	    FW_RD_KV_SECRET);
	one("$db_password = 'Pq7#zL2mXv9kR4tw';", "$db_password = '<REDACTED:kv-secret>';",
	    FW_RD_KV_SECRET);
	one("config[\"api_key\"] = \"c8b545f137c51f4084ecdf4bbb404d3c\"",
	    "config[\"api_key\"] = \"<REDACTED:kv-secret>\"", FW_RD_KV_SECRET);
	one("password=b'Xk29fLq0Zm3nVb7w'", "password=b'<REDACTED:kv-secret>'", FW_RD_KV_SECRET);
	one("database:\n  password: 'kykDOMzyKrvCULqSlRkueo7rStm'\n",
	    "database:\n  password: '<REDACTED:kv-secret>'\n", FW_RD_KV_SECRET);
	/* a '&' inside a bare value is part of it, unless a query goes on */
	one("db_password: Tr0ub4dor&3xqZ", "db_password: <REDACTED:kv-secret>", FW_RD_KV_SECRET);
	one("secret=Xk29fLq0Zm3nVb7w&next=1", "secret=<REDACTED:kv-secret>&next=1", FW_RD_KV_SECRET);
	one("mysql -u root --password=Tq8z2Lm9Vx4k shop", "mysql -u root --password=<REDACTED:kv-secret> shop",
	    FW_RD_KV_SECRET);
	/* JSON text inside JSON text: escaped quotes */
	one("{\\\"api_key\\\": \\\"aB3dE6gH9jK2mN5pQ\\\"}", "{\\\"api_key\\\": \\\"<REDACTED:kv-secret>\\\"}",
	    FW_RD_KV_SECRET);
	one("redis://:Qm7vX2pL9z@cache:6379", "redis://:<REDACTED:url-password>@cache:6379",
	    FW_RD_URL_PASSWORD);
}

TEST(gitlab_stripe_google_npm)
{
	one("token: glpat-AbC1dEf2GhI3jKl4MnO5", "token: <REDACTED:gitlab>", FW_RD_GITLAB);
	one("x sk_live_4eC39HqLyjWDarjtT1zdp7dc y", "x <REDACTED:stripe> y", FW_RD_STRIPE);
	one("maps/api/geocode/json?key=AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
	    "maps/api/geocode/json?key=<REDACTED:google>", FW_RD_GOOGLE);
	one("//registry.npmjs.org/:_authToken=npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
	    "//registry.npmjs.org/:_authToken=<REDACTED:npm>", FW_RD_NPM);
	keep("sk_live_ is Stripe's prefix; AIza starts Google keys; npm_ tokens");
	CHECK_STR(fw_redact_rule_name(FW_RD_GITLAB), "gitlab");
	CHECK_STR(fw_redact_rule_name(FW_RD_NPM), "npm");
}

/* Decodes the \n, \t and \\ escapes of the corpus in place; returns the length. */
static size_t unescape(char *s)
{
	size_t j = 0;

	for (size_t i = 0; s[i]; i++) {
		if (s[i] == '\\' && (s[i + 1] == 'n' || s[i + 1] == 't' || s[i + 1] == '\\')) {
			i++;
			s[j++] = s[i] == 'n' ? '\n' : s[i] == 't' ? '\t' : '\\';
		} else {
			s[j++] = s[i];
		}
	}
	s[j] = 0;
	return j;
}

TEST(secret_corpus_recall_per_rule)
{
	/*
	 * A secret counts as found when it is gone and its own rule counted a
	 * replacement.  Token formats are exact, so every one must be found.
	 * kv-secret misses, by design, a generated value made of letters only
	 * (it reads like an identifier: about 1 in 20 of 16 base62
	 * characters); bearer the same.  The floors leave room for that.
	 */
	static const struct { int rule; double floor; } floors[] = {
		{FW_RD_PRIVATE_KEY, 1}, {FW_RD_ANTHROPIC, 1}, {FW_RD_OPENAI, 1}, {FW_RD_GITHUB, 1},
		{FW_RD_GITLAB, 1}, {FW_RD_AWS, 1}, {FW_RD_SLACK, 1}, {FW_RD_STRIPE, 1},
		{FW_RD_GOOGLE, 1}, {FW_RD_NPM, 1}, {FW_RD_JWT, 1}, {FW_RD_BEARER, 0.9},
		{FW_RD_URL_PASSWORD, 0.95}, {FW_RD_KV_SECRET, 0.95}, {FW_RD_EMAIL, 1},
	};
	unsigned long total[FW_RD_NRULES] = {0}, found[FW_RD_NRULES] = {0}, all = 0;
	char line[8192];
	FILE *f = fopen("tests/fixtures/secrets/corpus.tsv", "r");

	CHECK(f != NULL);
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		if (line[0] == '#')
			continue;
		line[strcspn(line, "\n")] = 0;
		char *secret = strchr(line, '\t'), *text = secret ? strchr(secret + 1, '\t') : NULL;
		CHECK(text != NULL);
		if (!text)
			continue;
		*secret++ = 0;
		*text++ = 0;
		unescape(secret);
		size_t n = unescape(text);
		int rule = -1;
		for (int i = 0; i < FW_RD_NRULES; i++)
			if (!strcmp(fw_redact_rule_name(i), line))
				rule = i;
		CHECK(rule >= 0);
		if (rule < 0)
			continue;
		struct fw_redact_counts c;
		memset(&c, 0, sizeof c);
		char *p = fw_redact_str(rd(), text, n, NULL, &c);
		CHECK(p != NULL);
		total[rule]++;
		all++;
		if (p && !strstr(p, secret) && c.n[rule] > 0)
			found[rule]++;
		else
			printf("# missed (%s): %s\n", line, text);
		free(p);
	}
	fclose(f);
	CHECK(all >= 200);
	for (size_t i = 0; i < sizeof floors / sizeof *floors; i++) {
		int r = floors[i].rule;
		CHECK(total[r] >= 10);
		if (total[r] && (double)found[r] / total[r] < floors[i].floor) {
			printf("# %s: recall %lu/%lu under %.2f\n", fw_redact_rule_name(r), found[r],
			       total[r], floors[i].floor);
			CHECK(0);
		}
	}
}

/* Redacts s[0..n) and adds the counts to c; frees the result. */
static void count(const char *s, size_t n, struct fw_redact_counts *c)
{
	char *p = fw_redact_str(rd(), s, n, NULL, c);
	CHECK(p != NULL);
	free(p);
}

TEST(real_code_gets_no_secret_redaction)
{
	/*
	 * Real code, read by an agent: as a tool result (raw text) and as JSON
	 * text (a write_file call's arguments).  It holds no secret, so no
	 * rule but email may fire.  This repository's C, and the modules of
	 * the Python standard library where the previous keyword rule fired
	 * (`token = _token_type(...)`-like lines; skipped where no Python 3
	 * is installed).  tests/bench/redact measures the same on megabytes.
	 */
	static const char *const pats[] = {
		"lib/*/*.c", "lib/*.h", "tools/*.c", "kernels/cpu/*.c", "tests/fixtures/secrets/gen.py",
		"/usr/lib/python3.*/urllib/request.py", "/usr/lib/python3.*/xml/dom/expatbuilder.py",
		"/usr/lib/python3.*/email/_header_value_parser.py", "/usr/lib/python3.*/tokenize.py",
		"/usr/lib/python3.*/lib2to3/pgen2/tokenize.py", "/usr/lib/python3.*/inspect.py",
		"/usr/lib/python3.*/smtplib.py", "/usr/lib/python3.*/imaplib.py",
		"/usr/lib/python3.*/netrc.py", "/usr/lib/python3.*/http/cookiejar.py",
	};
	struct fw_redact_counts c;
	size_t bytes = 0;
	glob_t g;

	memset(&c, 0, sizeof c);
	for (size_t k = 0; k < sizeof pats / sizeof *pats; k++) {
		if (glob(pats[k], 0, NULL, &g))
			continue;
		for (size_t i = 0; i < g.gl_pathc; i++) {
			FILE *f = fopen(g.gl_pathv[i], "rb");
			if (!f)
				continue;
			static char buf[1 << 21];
			size_t n = fread(buf, 1, sizeof buf, f);
			fclose(f);
			struct fw_redact_counts one_file;
			memset(&one_file, 0, sizeof one_file);
			count(buf, n, &one_file);
			json_t *js = json_stringn_nocheck(buf, n);
			char *text = json_dumps(js, JSON_ENCODE_ANY);
			if (text)
				count(text, strlen(text), &one_file);
			free(text);
			json_decref(js);
			for (int r = 0; r < FW_RD_NRULES; r++) {
				if (r != FW_RD_EMAIL && one_file.n[r])
					printf("# %s: %lu %s\n", g.gl_pathv[i], one_file.n[r],
					       fw_redact_rule_name(r));
				c.n[r] += one_file.n[r];
			}
			bytes += n;
		}
		globfree(&g);
	}
	CHECK(bytes > 500000);
	for (int r = 0; r < FW_RD_NRULES; r++)
		if (r != FW_RD_EMAIL)
			CHECK_EQ_INT(c.n[r], 0);
}

TEST(thinking_signatures_are_never_touched)
{
	/* A thinking block's signature is base64 of random bytes; redacting any
	 * part of it breaks the replay of the conversation.  Random ones of
	 * the usual lengths, bare and as the JSON of a content block. */
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned long long x = 88172645463325252ULL;
	char sig[2048], block[4096];

	for (int k = 0; k < 500; k++) {
		size_t n = 200 + (size_t)(k * 37 % 1600);
		for (size_t i = 0; i < n; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			sig[i] = b64[x % 64];
		}
		memcpy(sig, "Eq", 2); /* how the signatures seen start */
		sig[n] = 0;
		if (k % 3 == 0)
			strcpy(sig + n - 2, "==");
		snprintf(block, sizeof block,
			 "{\"type\": \"thinking\", \"thinking\": \"Read the parser first.\", "
			 "\"signature\": \"%s\"}", sig);
		struct fw_redact_counts c;
		memset(&c, 0, sizeof c);
		char *p = fw_redact_str(rd(), block, strlen(block), NULL, &c);
		CHECK(p && !strcmp(p, block));
		if (p && strcmp(p, block))
			printf("# signature %d changed: %s\n", k, p);
		free(p);
	}
}

TEST_MAIN()
