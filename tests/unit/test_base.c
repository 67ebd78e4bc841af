/*
 * test_base.c — the base layer (fw_base.h) and fw_mp's string packers:
 * splitmix64 against the reference generator's published outputs, UTF-8
 * against hand-worked encodings, files and trees on a scratch directory,
 * and the NULL-safe frees.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "fw_base.h"
#include "fw_cli.h"
#include "fw_decontam.h"
#include "fw_expr.h"
#include "fw_fbcat.h"
#include "fw_ingest.h"
#include "fw_json.h"
#include "fw_redact.h"
#include "fw_stream.h"
#include "fw_judge.h"
#include "fw_mp.h"
#include "fw_mutate.h"
#include "fw_report.h"

TEST(seterr_cuts_keeps_errno_and_takes_no_buffer)
{
	char err[8];
	errno = ENOENT;
	fw_seterr(err, sizeof err, "%s %d", "abcdef", 42);
	CHECK_STR(err, "abcdef ");
	CHECK_EQ_INT(errno, ENOENT);
	fw_seterr(NULL, 0, "%s", "nowhere");
	fw_seterr(err, 0, "%s", "nowhere");
	CHECK_STR(err, "abcdef ");
}

TEST(splitmix64_gives_the_reference_outputs)
{
	/* the first outputs of splitmix64 (Vigna's splitmix64.c) from state
	 * 1234567, computed with Python integers */
	static const uint64_t want[] = { 6457827717110365317ULL, 3203168211198807973ULL, 9817491932198370423ULL, 4593380528125082431ULL, 16408922859458223821ULL };
	uint64_t s = 1234567;
	for (int i = 0; i < 5; i++)
		CHECK(fw_rand64(&s) == want[i]);
	/* fw_mix64(z) is the output of state z without advancing it */
	s = 1234567;
	uint64_t first = fw_rand64(&s);
	CHECK(fw_mix64(1234567) == first);
	CHECK(s == 1234567 + 0x9e3779b97f4a7c15ULL);
	/* FNV-1a 64 of "a" (published test vector) */
	CHECK(fw_hash64("a", 1) == 0xaf63dc4c8601ec8cULL);
}

TEST(strlist_copies_and_frees_null_safely)
{
	struct fw_strlist l = { 0 };
	char s[] = "one";
	CHECK_EQ_INT(fw_strlist_add(&l, s), 0);
	s[0] = 'x';
	for (int i = 0; i < 40; i++)
		CHECK_EQ_INT(fw_strlist_add(&l, "more"), 0);
	CHECK(l.n == 41);
	CHECK_STR(l.v[0], "one");
	fw_strlist_release(&l);
	CHECK(l.n == 0 && l.v == NULL);
	fw_strlist_release(&l);
	fw_strlist_release(NULL);
	/* the other frees, releases and resets of the library take NULL too */
	fw_symbols_release(NULL);
	fw_report_reset(NULL);
	fw_report_free(NULL);
	fw_mix_release(NULL);
	fw_intern_release(NULL);
	fw_buf_free(NULL);
	fw_buf_release(NULL);
	/* and those of the base layer and the ingest area */
	fw_pool_free(NULL);
	fw_expr_free(NULL);
	fw_path_free(NULL);
	fw_json_reader_close(NULL);
	fw_reader_close(NULL);
	CHECK_EQ_INT(fw_writer_close(NULL, NULL, 0), 0);
	fw_decontam_free(NULL);
	fw_fbcat_free(NULL);
	fw_feedback_free(NULL);
	fw_redact_free(NULL);
	/* a released buffer is empty and takes appends again */
	struct fw_buf b = { 0 };
	CHECK_EQ_INT(fw_buf_puts(&b, "abc"), 0);
	fw_buf_release(&b);
	CHECK(b.p == NULL && b.n == 0 && b.cap == 0);
	CHECK_EQ_INT(fw_buf_puts(&b, "de"), 0);
	CHECK(b.n == 2 && !memcmp(b.p, "de", 2));
	fw_buf_release(&b);
}

TEST(interner_gives_dense_indices_in_first_seen_order)
{
	struct fw_intern t = { 0 };
	char name[32];
	CHECK_EQ_INT(fw_intern_find(&t, "a", 1), -1);
	/* enough names to grow the table several times */
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof name, "name-%d", i);
		CHECK_EQ_INT(fw_intern_add(&t, name, strlen(name)), i);
	}
	for (int i = 999; i >= 0; i--) {
		snprintf(name, sizeof name, "name-%d", i);
		CHECK_EQ_INT(fw_intern_add(&t, name, strlen(name)), i);
		CHECK_EQ_INT(fw_intern_find(&t, name, strlen(name)), i);
	}
	CHECK(t.n == 1000);
	CHECK_STR(t.v[7], "name-7");
	/* only n bytes count: "name-12" is not "name-1" */
	CHECK_EQ_INT(fw_intern_find(&t, "name-12", 6), 1);
	CHECK_EQ_INT(fw_intern_find(&t, "name-1000", 9), -1);
	fw_intern_release(&t);
	CHECK(t.n == 0 && t.nslot == 0);
}

TEST(files_read_copy_and_remove)
{
	char dir[] = "/tmp/test_base.XXXXXX", p[256], q[256];
	CHECK(mkdtemp(dir) != NULL);
	snprintf(p, sizeof p, "%s/a", dir);
	FILE *f = fopen(p, "wb");
	/* 200000 bytes: more than one read */
	for (int i = 0; i < 200000; i++)
		fputc('a' + i % 26, f);
	fclose(f);
	size_t n;
	char *s = fw_read_file(p, 0, &n);
	CHECK(s && n == 200000 && s[n] == '\0' && s[26] == 'a' && s[199999] == 'a' + 199999 % 26);
	free(s);
	s = fw_read_file(p, 1000, &n);
	CHECK(s && n == 1000 && s[1000] == '\0');
	free(s);
	snprintf(q, sizeof q, "%s/sub/deeper", dir);
	snprintf(q, sizeof q, "%s/sub", dir);
	CHECK_EQ_INT(mkdir(q, 0777), 0);
	snprintf(q, sizeof q, "%s/sub/deeper", dir);
	CHECK_EQ_INT(mkdir(q, 0777), 0);
	snprintf(q, sizeof q, "%s/sub/deeper/b", dir);
	CHECK_EQ_INT(fw_copy_file(p, q), 0);
	s = fw_read_file(q, 0, &n);
	CHECK(s && n == 200000);
	free(s);
	/* empty file: a buffer of one NUL */
	snprintf(q, sizeof q, "%s/empty", dir);
	fclose(fopen(q, "wb"));
	s = fw_read_file(q, 0, &n);
	CHECK(s && n == 0 && s[0] == '\0');
	free(s);
	snprintf(q, sizeof q, "%s/missing", dir);
	errno = 0;
	CHECK(fw_read_file(q, 0, &n) == NULL && errno == ENOENT);
	CHECK_EQ_INT(fw_copy_file(q, p), -1);
	CHECK_EQ_INT(errno, ENOENT);
	/* a link into the tree is removed, not followed */
	snprintf(q, sizeof q, "%s/sub/link", dir);
	CHECK_EQ_INT(symlink(p, q), 0);
	snprintf(q, sizeof q, "%s/sub", dir);
	CHECK_EQ_INT(fw_rmtree(q), 0);
	CHECK(access(q, F_OK) != 0 && access(p, F_OK) == 0);
	CHECK_EQ_INT(fw_rmtree(q), 0); /* missing is success */
	CHECK_EQ_INT(fw_rmtree(dir), 0);
	CHECK(access(dir, F_OK) != 0);
}

TEST(utf8_sequences_encodings_and_repair)
{
	/* é is C3 A9, € E2 82 AC, U+1F600 F0 9F 98 80 */
	const uint8_t ok[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
	CHECK(fw_utf8_seq(ok, 10) == 1 && fw_utf8_seq(ok + 1, 9) == 2 && fw_utf8_seq(ok + 3, 7) == 3 &&
	      fw_utf8_seq(ok + 6, 4) == 4);
	CHECK(fw_utf8_valid(ok, 10) && fw_utf8_check(ok, 10) == 10);
	/* overlong, surrogate, above U+10FFFF, cut short, lone continuation */
	CHECK(fw_utf8_seq((const uint8_t *)"\xc0\xaf", 2) == 0);
	CHECK(fw_utf8_seq((const uint8_t *)"\xed\xa0\x80", 3) == 0);
	CHECK(fw_utf8_seq((const uint8_t *)"\xf4\x90\x80\x80", 4) == 0);
	CHECK(fw_utf8_seq((const uint8_t *)"\xe2\x82", 2) == 0);
	CHECK(fw_utf8_seq((const uint8_t *)"\x80", 1) == 0);
	CHECK(fw_utf8_check((const uint8_t *)"abcdefghij\xff", 11) == 10);
	uint8_t o[4];
	CHECK(fw_utf8_put(o, 0xe9) == 2 && memcmp(o, "\xc3\xa9", 2) == 0);
	CHECK(fw_utf8_put(o, 0x20ac) == 3 && memcmp(o, "\xe2\x82\xac", 3) == 0);
	CHECK(fw_utf8_put(o, 0x1f600) == 4 && memcmp(o, "\xf0\x9f\x98\x80", 4) == 0);
	CHECK(fw_utf8_count((const char *)ok, 10) == 4);
	size_t n;
	char *f = fw_utf8_fix("a\xff" "b\xe2\x82", 5, &n);
	CHECK(f && n == 11 && memcmp(f, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd", 11) == 0);
	CHECK(fw_utf8_fix_len("a\xff" "b\xe2\x82", 5) == 11);
	free(f);
}

TEST(packers_write_str_text_and_lists)
{
	struct fw_buf b = { 0 };
	msgpack_packer pk;
	struct fw_strlist l = { 0 };
	fw_buf_packer(&pk, &b);
	CHECK_EQ_INT(fw_pack_cstr(&pk, "ab"), 0);
	CHECK_EQ_INT(fw_pack_text(&pk, "a\xff", 2), 0);
	fw_strlist_add(&l, "x");
	fw_strlist_add(&l, "yz");
	CHECK_EQ_INT(fw_pack_strlist(&pk, &l), 0);
	/* fixstr 2 "ab"; fixstr 4 "a" U+FFFD; fixarray 2 of fixstr 1, fixstr 2 */
	static const char want[] = "\xa2" "ab" "\xa4" "a\xef\xbf\xbd" "\x92\xa1x\xa2yz";
	CHECK(b.n == sizeof want - 1 && memcmp(b.p, want, b.n) == 0);
	fw_strlist_release(&l);
	fw_buf_free(&b);
}

TEST_MAIN()

/* A buffer that ran out of memory refuses every later append, so a record
 * packed field by field has no hole; fw_buf_packed() cuts it back. */
TEST(buf_failure_is_sticky_until_packed)
{
	struct fw_buf b = { 0 };
	msgpack_packer pk;

	fw_buf_packer(&pk, &b);
	CHECK(msgpack_pack_map(&pk, 1) == 0);
	CHECK(fw_pack_cstr(&pk, "a") == 0);
	size_t start = b.n;
	CHECK(fw_buf_packed(&b, start) == 0);
	CHECK(msgpack_pack_array(&pk, 2) == 0);
	/* more than any allocation can give: the size overflows */
	CHECK(fw_buf_reserve(&b, SIZE_MAX) < 0 && b.failed);
	size_t at = b.n;
	CHECK(msgpack_pack_int(&pk, 1) != 0); /* refused, though it would fit */
	CHECK(fw_buf_append(&b, "x", 1) < 0);
	CHECK(b.n == at);
	errno = 0;
	CHECK(fw_buf_packed(&b, start) < 0 && errno == ENOMEM);
	CHECK(b.n == start && !b.failed);
	CHECK(msgpack_pack_int(&pk, 7) == 0 && b.n == start + 1);
	struct fw_mpv v = fw_mp_view(b.p, b.p + b.n), x;
	int64_t i;
	CHECK(fw_mp_get(v, "a", &x) == 1 && fw_mp_int(x, &i) == 0 && i == 7);
	CHECK(fw_buf_reserve(&b, SIZE_MAX) < 0);
	fw_buf_reset(&b);
	CHECK(!b.failed && b.n == 0 && fw_buf_append(&b, "x", 1) == 0);
	fw_buf_release(&b);
	CHECK(!b.failed && !b.p);
}
