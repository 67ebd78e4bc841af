/*
 * test_history.c — the dates of history tasks (ISO 8601 both ways) and
 * context bundles: context.json, lookup by commit prefix, and the bad
 * bundles that are refused.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "fw_history.h"

static int64_t when(const char *s)
{
	int64_t t = -1;
	if (fw_time_parse(s, strlen(s), &t) < 0)
		return -1;
	return t;
}

TEST(dates_parse_as_utc_with_offsets)
{
	CHECK_EQ_INT(when("1970-01-01"), 0);
	CHECK_EQ_INT(when("2024-03-12"), 1710201600);
	CHECK_EQ_INT(when("2024-03-12T10:31:00Z"), 1710239460);
	CHECK_EQ_INT(when("2024-03-12 10:31"), 1710239460);
	CHECK_EQ_INT(when("2024-03-12T12:31:00+02:00"), 1710239460);
	CHECK_EQ_INT(when("2024-03-12T05:31:00-0500"), 1710239460);
	CHECK_EQ_INT(when("2024-03-12T10:31:00.250Z"), 1710239460);
	CHECK_EQ_INT(when("2024-02-29"), 1709164800);
}

TEST(what_is_no_date_is_refused)
{
	const char *bad[] = { "", "yesterday", "2024-3-12", "2024-02-30", "2023-02-29",
			      "2024-13-01", "2024-03-12T25:00", "2024-03-12T10", "2024-03-12Z",
			      "2024-03-12T10:31:00Zjunk", "2024-03-12T10:31:00.Z", NULL };
	for (int i = 0; bad[i]; i++) {
		int64_t t;
		if (fw_time_parse(bad[i], strlen(bad[i]), &t) == 0) {
			printf("# accepted '%s'\n", bad[i]);
			CHECK(0);
		}
	}
}

TEST(dates_format_back_to_iso_8601_utc)
{
	char b[FW_TIME_LEN];
	fw_time_format(1710239460, b);
	CHECK_STR(b, "2024-03-12T10:31:00Z");
	fw_time_format(0, b);
	CHECK_STR(b, "1970-01-01T00:00:00Z");
	CHECK_EQ_INT(when(b), 0);
}

static char dir[] = "/tmp/fw-test-history-XXXXXX";

static void put(const char *name, const char *text)
{
	char p[256];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

TEST(context_json_maps_commit_prefixes_to_files)
{
	char err[512] = "";
	put("app.log", "ERROR boom\n");
	put("thread.txt", "it broke\n");
	put("context.json", "{\"57E604D97\": [{\"kind\": \"log\", \"name\": \"prod.log\", "
			    "\"path\": \"app.log\"}, {\"kind\": \"chat\", \"name\": \"thread.txt\"}],"
			    " \"0123456789abcdef0123456789abcdef01234567\": []}");
	struct fw_context_map *m = fw_context_load(dir, err, sizeof err);
	CHECK(m != NULL);
	size_t n = 9;
	const struct fw_context_file *f =
		fw_context_find(m, "57e604d974824c39bdbd3b0097330eed2ba1d69a", &n);
	CHECK_EQ_INT(n, 2);
	if (f && n == 2) {
		CHECK_STR(f[0].kind, "log");
		CHECK_STR(f[0].name, "prod.log");
		CHECK(strstr(f[0].path, "/app.log") != NULL);
		CHECK_STR(f[1].name, "thread.txt");
	}
	CHECK(fw_context_find(m, "57e604e974824c39bdbd3b0097330eed2ba1d69a", &n) == NULL);
	CHECK_EQ_INT(n, 0);
	fw_context_find(NULL, "57e604d974824c39bdbd3b0097330eed2ba1d69a", &n);
	CHECK_EQ_INT(n, 0);
	fw_context_free(m);
	fw_context_free(NULL);
}

TEST(bad_bundles_are_refused_with_a_reason)
{
	static const struct { const char *json, *why; } bad[] = {
		{ "[1]", "not an object of commits" },
		{ "{\"57e6\": []}", "is no commit id" },
		{ "{\"57e604dz\": []}", "is no commit id" },
		{ "{\"57e604d\": {}}", "not an array of files" },
		{ "{\"57e604d\": [{\"kind\": \"Log\", \"name\": \"a\"}]}", "want a kind" },
		{ "{\"57e604d\": [{\"kind\": \"log\", \"name\": \"../a\"}]}", "no '/'" },
		{ "{\"57e604d\": [{\"kind\": \"log\", \"name\": \"gone.log\"}]}", "cannot read" },
		{ "{\"57e604d\": [{\"kind\": \"log\", \"name\": \"app.log\"},"
		  " {\"kind\": \"doc\", \"name\": \"app.log\"}]}", "twice" },
		{ "{\"57e604d\": [", "line 1" },
	};
	put("app.log", "x\n");
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char err[512] = "";
		put("context.json", bad[i].json);
		struct fw_context_map *m = fw_context_load(dir, err, sizeof err);
		CHECK(m == NULL);
		if (!strstr(err, bad[i].why)) {
			printf("# %s: '%s' lacks '%s'\n", bad[i].json, err, bad[i].why);
			CHECK(0);
		}
		fw_context_free(m);
	}
}

__attribute__((constructor(200))) static void make_dir(void)
{
	if (!mkdtemp(dir))
		perror(dir);
}

__attribute__((destructor)) static void remove_dir(void)
{
	const char *names[] = { "app.log", "thread.txt", "context.json", NULL };
	for (int i = 0; names[i]; i++) {
		char p[256];
		snprintf(p, sizeof p, "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
}

TEST_MAIN()
