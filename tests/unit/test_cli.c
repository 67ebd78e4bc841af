/*
 * Unit tests for the CLI conventions: the hash that places a record in a
 * shard, a writer's faults said, and the loop that turns JSON operands into records: every good
 * record before a fault written, the fault said with its line and column,
 * the exit status.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "test_rec.h"
#include "fw_base.h"
#include "fw_cli.h"
#include "fw_json.h"
#include "fw_stream.h"

TEST(shard_hash_is_the_id_strings_hash_else_the_whole_record)
{
	struct fw_buf b = { 0 };
	struct fw_mpv v = test_rec(&b, "{\"id\":\"abc\",\"x\":1}");
	CHECK(fw_shard_hash(v) == fw_hash64("abc", 3));
	for (uint64_t k = 0; k < 5; k++)
		CHECK_EQ_INT(fw_shard_keep(v, k, 5), fw_hash64("abc", 3) % 5 == k);
	v = test_rec(&b, "{\"id\":7}");
	CHECK(fw_shard_hash(v) == fw_hash64(b.p, b.n));
	fw_buf_release(&b);
}

/* Writes text to a new temporary file; returns its path (malloc'd). */
static char *tmp_text(const char *text)
{
	char *path = strdup("/tmp/test_cli.XXXXXX");
	int fd = mkstemp(path);
	size_t n = strlen(text);
	if (fd < 0 || write(fd, text, n) != (ssize_t)n)
		printf("# cannot write %s\n", path);
	close(fd);
	return path;
}

/* Standard error into a temporary file until said() gives back what was
 * written there. */
static char said_path[64];
static int said_saved = -1;

static void capture(void)
{
	snprintf(said_path, sizeof said_path, "/tmp/test_cli.err.XXXXXX");
	int fd = mkstemp(said_path);
	fflush(stderr);
	said_saved = dup(2);
	dup2(fd, 2);
	close(fd);
}

static void said(char *out, size_t n)
{
	size_t len = 0;
	fflush(stderr);
	dup2(said_saved, 2);
	close(said_saved);
	char *text = fw_read_file(said_path, 1 << 20, &len);
	snprintf(out, n, "%.*s", (int)len, text ? text : "");
	free(text);
	unlink(said_path);
}

TEST(out_says_why_a_writer_failed_and_keeps_the_status_otherwise)
{
	char err[512], path[] = "/tmp/test_cli.out.XXXXXX";
	fw_cli_init("test");
	capture();
	CHECK(fw_out_open("/nonexistent/dir/x.msgpack", 0) == NULL);
	said(err, sizeof err);
	static const char cannot[] = "test: /nonexistent/dir/x.msgpack: cannot create: ";
	CHECK(strncmp(err, cannot, sizeof cannot - 1) == 0);

	close(mkstemp(path));
	struct fw_writer *w = fw_out_open(path, 0);
	CHECK(w != NULL);
	CHECK_EQ_INT(fw_out_put(w, "\x81\xa1\x61\x01", 4), 0);
	CHECK_EQ_INT(fw_out_close(w, FW_EXIT_DATA), FW_EXIT_DATA);
	w = fw_out_open(path, 0);
	CHECK_EQ_INT(fw_out_close(w, FW_EXIT_OK), FW_EXIT_OK);
	unlink(path);

	/* a full device: a record too big to hold fails at once, then the close */
	static char big[1 << 20];
	capture();
	w = fw_out_open("/dev/full", 0);
	CHECK(w != NULL);
	CHECK_EQ_INT(fw_out_put(w, big, sizeof big), -1);
	CHECK_EQ_INT(fw_out_put(w, "\x80", 1), 0);
	CHECK_EQ_INT(fw_out_close(w, FW_EXIT_OK), FW_EXIT_DATA);
	said(err, sizeof err);
	CHECK_STR(err, "test: /dev/full: write error: No space left on device\n"
		       "test: /dev/full: write error: No space left on device\n");
}

/* What one run of fw_json_records() gave. */
struct json_run {
	int status;
	char err[1024];  /* what it said on stderr */
	char recs[1024]; /* the records written, as JSON Lines */
};

/* Runs fw_json_records() over the operands ops[0..n) (a name starting
 * with '{' or '[' is text put in a temporary file first) into a fresh
 * file, then reads back what it wrote. */
static void json_run(struct json_run *r, const char *const *ops, int n, size_t max, int skip_bad)
{
	char *argv[8], out[] = "/tmp/test_cli.out.XXXXXX", err[256];
	int tmp[8] = { 0 };
	for (int i = 0; i < n; i++) {
		tmp[i] = ops[i][0] == '{' || ops[i][0] == '[';
		argv[i] = tmp[i] ? tmp_text(ops[i]) : (char *)ops[i];
	}
	close(mkstemp(out));
	struct fw_writer *w = fw_writer_open(out, 0, err, sizeof err);
	CHECK(w != NULL);

	capture();
	r->status = fw_json_records(w, n, argv, 0, max, skip_bad, -1);
	said(r->err, sizeof r->err);
	CHECK_EQ_INT(fw_writer_close(w, err, sizeof err), 0);

	struct fw_reader *rd = fw_reader_open(out, NULL, err, sizeof err);
	struct fw_buf js = { 0 };
	struct fw_rec rec;
	while (rd && fw_reader_next(rd, &rec) == 1) {
		CHECK_EQ_INT(fw_json_from_mp(&js, rec.v, err, sizeof err), 0);
		fw_buf_append(&js, "\n", 1);
	}
	snprintf(r->recs, sizeof r->recs, "%.*s", (int)js.n, js.p ? (const char *)js.p : "");
	fw_buf_release(&js);
	fw_reader_close(rd);
	unlink(out);
	for (int i = 0; i < n; i++) {
		if (tmp[i]) {
			unlink(argv[i]);
			free(argv[i]);
		}
	}
}

TEST(json_records_write_every_good_record_before_bad_json)
{
	struct json_run r;
	const char *ops[] = { "{\"a\":1}\n{\"b\": [2, 3]}\n{\"c\": tru}\n{\"d\":4}\n" };
	fw_cli_init("test");
	json_run(&r, ops, 1, 0, 0);
	CHECK_EQ_INT(r.status, FW_EXIT_DATA);
	CHECK_STR(r.recs, "{\"a\":1}\n{\"b\":[2,3]}\n");
	CHECK(strstr(r.err, ": line 3, column 7: unexpected 't'\n") != NULL);
	CHECK(strncmp(r.err, "test: /tmp/test_cli.", 20) == 0);
	/* only the one line */
	CHECK(strchr(r.err, '\n') == r.err + strlen(r.err) - 1);
}

TEST(json_records_go_on_with_the_next_file_after_a_fault)
{
	struct json_run r;
	const char *ops[] = {
		"/nonexistent/x.jsonl", "{\"a\":1}\n{\"b\":\n", "{\"c\":3} {\"d\":4}",
	};
	fw_cli_init("test");
	json_run(&r, ops, 3, 0, 0);
	CHECK_EQ_INT(r.status, FW_EXIT_DATA);
	CHECK_STR(r.recs, "{\"a\":1}\n{\"c\":3}\n{\"d\":4}\n");
	CHECK(strncmp(r.err, "test: /nonexistent/x.jsonl: ", 28) == 0);
	CHECK(strstr(r.err, ": line 3, column 1: unexpected end of input\n") != NULL);

	const char *good[] = { "{\"a\":1}\n\n  {\"b\":\"x\"}\n" };
	json_run(&r, good, 1, 0, 0);
	CHECK_EQ_INT(r.status, FW_EXIT_OK);
	CHECK_STR(r.recs, "{\"a\":1}\n{\"b\":\"x\"}\n");
	CHECK_STR(r.err, "");
}

TEST(json_records_refuse_values_that_are_not_objects_unless_skip_bad)
{
	struct json_run r;
	const char *ops[] = { "{\"a\":1}\n[1,2]\n{\"b\":2}\n" };
	fw_cli_init("test");
	json_run(&r, ops, 1, 0, 0);
	CHECK_EQ_INT(r.status, FW_EXIT_DATA);
	CHECK_STR(r.recs, "{\"a\":1}\n");
	CHECK(strstr(r.err, ": line 2, column 1: value is array, not an object\n") != NULL);
	/* --skip-bad: said, passed over, not a fault */
	json_run(&r, ops, 1, 0, 1);
	CHECK_EQ_INT(r.status, FW_EXIT_OK);
	CHECK_STR(r.recs, "{\"a\":1}\n{\"b\":2}\n");
	CHECK(strstr(r.err, ": line 2, column 1: value is array, not an object\n") != NULL);
}

TEST(json_records_refuse_a_record_over_the_limit)
{
	struct json_run r;
	const char *ops[] = { "{\"a\":1}\n{\"text\":\"0123456789abcdefghij\"}\n{\"b\":2}\n" };
	fw_cli_init("test");
	json_run(&r, ops, 1, 20, 0);
	CHECK_EQ_INT(r.status, FW_EXIT_DATA);
	CHECK_STR(r.recs, "{\"a\":1}\n");
	CHECK(strstr(r.err, ": line 2: record of 27 bytes exceeds the limit of 20 bytes\n"));
}

TEST_MAIN()
