/*
 * Unit tests for record streams: msgpack views (fw_mp), paths, record
 * editing, the reader (plain, zstd, mixed, bad input) and the writer.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "test.h"
#include "fw_mp.h"
#include "fw_stream.h"

/* Packs {"kind":"t","id":"<i>","n":i} into b. */
static void pack_rec(struct fw_buf *b, int i)
{
	msgpack_packer pk;
	char id[32];
	fw_buf_packer(&pk, b);
	snprintf(id, sizeof id, "%08x", i);
	msgpack_pack_map(&pk, 3);
	msgpack_pack_str_with_body(&pk, "kind", 4);
	msgpack_pack_str_with_body(&pk, "t", 1);
	msgpack_pack_str_with_body(&pk, "id", 2);
	msgpack_pack_str_with_body(&pk, id, strlen(id));
	msgpack_pack_str_with_body(&pk, "n", 1);
	msgpack_pack_int(&pk, i);
}

/* Reads all records of mem; returns count, -1 on error (msg in err). */
static int read_all(const void *p, size_t n, const struct fw_reader_opts *o, int64_t *sum,
		    char *err, size_t errlen, uint64_t *eidx)
{
	struct fw_reader *r = fw_reader_memopen(p, n, "mem", o);
	struct fw_rec rec;
	int count = 0, rc;
	*sum = 0;
	while ((rc = fw_reader_next(r, &rec)) == 1) {
		struct fw_mpv v;
		int64_t x;
		if (fw_mp_get(rec.v, "n", &v) == 1 && fw_mp_int(v, &x) == 0)
			*sum += x;
		count++;
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s", fw_reader_error(r));
		if (eidx)
			*eidx = fw_reader_index(r);
		count = -1 - count;
	}
	fw_reader_close(r);
	return count;
}

static struct fw_buf zcompress(const void *p, size_t n)
{
	struct fw_buf b = {0};
	fw_buf_reserve(&b, ZSTD_compressBound(n));
	b.n = ZSTD_compress(b.p, b.cap, p, n, 3);
	return b;
}

TEST(every_type_round_trips_through_views)
{
	struct fw_buf b = {0};
	msgpack_packer pk;
	fw_buf_packer(&pk, &b);
	msgpack_pack_array(&pk, 14);
	msgpack_pack_nil(&pk);
	msgpack_pack_true(&pk);
	msgpack_pack_false(&pk);
	msgpack_pack_uint64(&pk, UINT64_MAX);
	msgpack_pack_int64(&pk, INT64_MIN);
	msgpack_pack_int(&pk, -5);
	msgpack_pack_float(&pk, 1.5f);
	msgpack_pack_double(&pk, -2.25);
	msgpack_pack_str_with_body(&pk, "héllo", 6);
	msgpack_pack_bin_with_body(&pk, "\0\1\2", 3);
	msgpack_pack_ext_with_body(&pk, "abcd", 4, 7);
	msgpack_pack_map(&pk, 1);
	msgpack_pack_str_with_body(&pk, "k", 1);
	msgpack_pack_int(&pk, 300);
	msgpack_pack_array(&pk, 0);
	msgpack_pack_int(&pk, 70000);

	uint64_t need;
	const char *why;
	CHECK_EQ_INT(fw_mp_scan(b.p, b.n, 0, &need, &why), (ssize_t)b.n);
	struct fw_mpv v = {b.p, b.n}, x;
	struct fw_mp_iter it;
	CHECK_EQ_INT(fw_mp_iter_init(&it, v), 14);
	int flag;
	uint64_t u;
	int64_t i;
	double d;
	const char *s;
	const uint8_t *bp;
	size_t n;
	int8_t et;
	fw_mp_iter_next(&it, &x);
	CHECK(fw_mp_type(x) == FW_MP_NIL);
	fw_mp_iter_next(&it, &x);
	CHECK(fw_mp_bool(x, &flag) == 0 && flag == 1);
	fw_mp_iter_next(&it, &x);
	CHECK(fw_mp_bool(x, &flag) == 0 && flag == 0);
	fw_mp_iter_next(&it, &x);
	CHECK(fw_mp_uint(x, &u) == 0 && u == UINT64_MAX);
	CHECK(fw_mp_int(x, &i) == -1); /* does not fit */
	fw_mp_iter_next(&it, &x);
	CHECK(fw_mp_int(x, &i) == 0 && i == INT64_MIN);
	CHECK(fw_mp_uint(x, &u) == -1);
	fw_mp_iter_next(&it, &x);
	CHECK(fw_mp_int(x, &i) == 0 && i == -5);
	CHECK(fw_mp_type(x) == FW_MP_INT);
	fw_mp_iter_next(&it, &x);
	CHECK(fw_mp_double(x, &d) == 0 && d == 1.5);
	fw_mp_iter_next(&it, &x);
	CHECK(fw_mp_double(x, &d) == 0 && d == -2.25);
	fw_mp_iter_next(&it, &x);
	CHECK(fw_mp_str(x, &s, &n) == 0 && n == 6 && memcmp(s, "héllo", 6) == 0);
	fw_mp_iter_next(&it, &x);
	CHECK(fw_mp_bin(x, &bp, &n) == 0 && n == 3 && bp[2] == 2);
	CHECK(fw_mp_str(x, &s, &n) == -1);
	fw_mp_iter_next(&it, &x);
	CHECK(fw_mp_ext(x, &et, &bp, &n) == 0 && et == 7 && n == 4 && bp[0] == 'a');
	fw_mp_iter_next(&it, &x);
	CHECK(fw_mp_get(x, "k", &x) == 1 && fw_mp_int(x, &i) == 0 && i == 300);
	fw_mp_iter_next(&it, &x);
	CHECK(fw_mp_type(x) == FW_MP_ARRAY);
	fw_mp_iter_next(&it, &x);
	CHECK(fw_mp_uint(x, &u) == 0 && u == 70000);
	CHECK(fw_mp_iter_next(&it, &x) == 0);
	fw_buf_free(&b);
}

TEST(scan_never_trusts_declared_lengths)
{
	uint64_t need = 0;
	const char *why = NULL;
	/* array32 claiming 100 million elements, 5 bytes in all */
	const uint8_t a[] = {0xdd, 0x05, 0xf5, 0xe1, 0x00};
	CHECK_EQ_INT(fw_mp_scan(a, sizeof a, 0, &need, &why), 0);
	CHECK(need >= 100000000u);
	/* str32 of 4 GiB - 1 */
	const uint8_t s[] = {0xdb, 0xff, 0xff, 0xff, 0xff, 'x'};
	CHECK_EQ_INT(fw_mp_scan(s, sizeof s, 0, &need, &why), 0);
	CHECK(need >= 0xffffffffu);
	const uint8_t bad[] = {0x81, 0xc1, 0x00};
	CHECK_EQ_INT(fw_mp_scan(bad, sizeof bad, 0, &need, &why), -1);
	CHECK(why && strstr(why, "0xc1"));
}

TEST(scan_limits_depth_with_its_own_message)
{
	uint8_t deep[200];
	memset(deep, 0x91, sizeof deep); /* [[[[...]]]] */
	deep[199] = 0x01;
	uint64_t need;
	const char *why = NULL;
	CHECK_EQ_INT(fw_mp_scan(deep, sizeof deep, 0, &need, &why), -1);
	CHECK(why && strstr(why, "deep"));
	CHECK_EQ_INT(fw_mp_scan(deep + 150, 50, 0, &need, &why), 50);
}

TEST(paths_reach_nested_fields_and_negative_indexes)
{
	struct fw_buf b = {0};
	msgpack_packer pk;
	fw_buf_packer(&pk, &b);
	msgpack_pack_map(&pk, 2);
	msgpack_pack_str_with_body(&pk, "turns", 5);
	msgpack_pack_array(&pk, 3);
	for (int i = 0; i < 3; i++) {
		msgpack_pack_map(&pk, 1);
		msgpack_pack_str_with_body(&pk, "text", 4);
		char t[8];
		snprintf(t, sizeof t, "t%d", i);
		msgpack_pack_str_with_body(&pk, t, 2);
	}
	msgpack_pack_str_with_body(&pk, "a b", 3);
	msgpack_pack_int(&pk, 7);
	struct fw_mpv rec = {b.p, b.n}, out;
	char err[128];
	const char *s;
	size_t n;
	int64_t i;

	struct fw_path *p = fw_path_parse(".turns[1].text", err, sizeof err);
	CHECK(p && fw_path_str_get(p, rec, &s, &n, err, sizeof err) == 1 && n == 2 && s[1] == '1');
	fw_path_free(p);
	p = fw_path_parse(".turns[-1].text", err, sizeof err);
	CHECK(p && fw_path_str_get(p, rec, &s, &n, err, sizeof err) == 1 && s[1] == '2');
	fw_path_free(p);
	p = fw_path_parse(".turns[3].text", err, sizeof err);
	CHECK(p && fw_path_get(p, rec, &out) == 0);
	fw_path_free(p);
	p = fw_path_parse(".\"a b\"", err, sizeof err);
	CHECK(p && fw_path_int_get(p, rec, &i, err, sizeof err) == 1 && i == 7);
	fw_path_free(p);
	p = fw_path_parse(".[\"a b\"]", err, sizeof err);
	CHECK(p && fw_path_get(p, rec, &out) == 1);
	fw_path_free(p);
	/* a wrong type is reported with the path */
	p = fw_path_parse(".turns", err, sizeof err);
	CHECK(p && fw_path_str_get(p, rec, &s, &n, err, sizeof err) == -1);
	CHECK(strstr(err, "'.turns' is array, not str") != NULL);
	fw_path_free(p);
	p = fw_path_parse(".", err, sizeof err);
	CHECK(p && fw_path_get(p, rec, &out) == 1 && out.n == rec.n);
	fw_path_free(p);
	/* syntax errors name the column */
	CHECK(fw_path_parse(".a[x]", err, sizeof err) == NULL);
	CHECK(strstr(err, "column 4") != NULL);
	CHECK(fw_path_parse(".a[1", err, sizeof err) == NULL);
	CHECK(fw_path_parse("", err, sizeof err) == NULL);
	fw_buf_free(&b);
}

TEST(rec_set_replaces_in_place_appends_and_deletes)
{
	struct fw_buf in = {0}, val = {0}, out = {0};
	msgpack_packer pk;
	fw_buf_packer(&pk, &in);
	msgpack_pack_map(&pk, 3);
	msgpack_pack_str_with_body(&pk, "a", 1);
	msgpack_pack_int(&pk, 1);
	msgpack_pack_str_with_body(&pk, "b", 1);
	msgpack_pack_int(&pk, 2);
	msgpack_pack_str_with_body(&pk, "c", 1);
	msgpack_pack_int(&pk, 3);
	fw_buf_packer(&pk, &val);
	msgpack_pack_int(&pk, 20);
	size_t v20 = val.n;
	msgpack_pack_str_with_body(&pk, "new", 3);
	struct fw_field f[] = {
		{"b", 1, {val.p, v20}},
		{"c", 1, {NULL, 0}},
		{"d", 1, {val.p + v20, val.n - v20}},
	};
	CHECK(fw_rec_set(&out, (struct fw_mpv){in.p, in.n}, f, 3) == 0);
	struct fw_mpv r = {out.p, out.n}, x, k;
	struct fw_mp_iter it;
	int64_t i;
	CHECK_EQ_INT(fw_mp_iter_init(&it, r), 3);
	fw_mp_iter_next(&it, &k);
	CHECK(fw_mp_str_eq(k, "a", 1));
	fw_mp_iter_next(&it, &x);
	fw_mp_iter_next(&it, &k);
	CHECK(fw_mp_str_eq(k, "b", 1));
	fw_mp_iter_next(&it, &x);
	CHECK(fw_mp_int(x, &i) == 0 && i == 20);
	fw_mp_iter_next(&it, &k);
	CHECK(fw_mp_str_eq(k, "d", 1));
	CHECK(fw_mp_get(r, "c", &x) == 0);
	/* not a map */
	CHECK(fw_rec_set(&out, (struct fw_mpv){val.p, v20}, f, 1) == -1);
	fw_buf_free(&in);
	fw_buf_free(&val);
	fw_buf_free(&out);
}

TEST(reader_reads_plain_zstd_multiframe_and_mixed)
{
	struct fw_buf plain = {0};
	int64_t want = 0;
	for (int i = 0; i < 5000; i++) {
		pack_rec(&plain, i);
		want += i;
	}
	struct fw_buf z = zcompress(plain.p, plain.n);
	struct fw_buf mix = {0};
	/* zstd, zstd, plain, zstd: four streams back to back */
	fw_buf_append(&mix, z.p, z.n);
	fw_buf_append(&mix, z.p, z.n);
	fw_buf_append(&mix, plain.p, plain.n);
	fw_buf_append(&mix, z.p, z.n);
	char err[256] = "";
	int64_t sum;
	CHECK_EQ_INT(read_all(plain.p, plain.n, NULL, &sum, err, sizeof err, NULL), 5000);
	CHECK_EQ_INT(sum, want);
	CHECK_EQ_INT(read_all(z.p, z.n, NULL, &sum, err, sizeof err, NULL), 5000);
	CHECK_EQ_INT(read_all(mix.p, mix.n, NULL, &sum, err, sizeof err, NULL), 20000);
	CHECK_EQ_INT(sum, 4 * want);
	/* a record split across two zstd frames still reads */
	size_t half = plain.n / 2 + 3;
	struct fw_buf a = zcompress(plain.p, half), b = zcompress(plain.p + half, plain.n - half);
	struct fw_buf ab = {0};
	fw_buf_append(&ab, a.p, a.n);
	fw_buf_append(&ab, b.p, b.n);
	CHECK_EQ_INT(read_all(ab.p, ab.n, NULL, &sum, err, sizeof err, NULL), 5000);
	CHECK_EQ_INT(sum, want);
	fw_buf_free(&plain);
	fw_buf_free(&z);
	fw_buf_free(&mix);
	fw_buf_free(&a);
	fw_buf_free(&b);
	fw_buf_free(&ab);
}

TEST(reader_reports_positions_of_bad_input_after_good_records)
{
	struct fw_buf b = {0};
	char err[256];
	int64_t sum;
	uint64_t idx = 0;
	for (int i = 0; i < 3; i++)
		pack_rec(&b, i);
	size_t good = b.n;

	/* truncated: 3 good records, then an error at record index 3 */
	pack_rec(&b, 3);
	CHECK_EQ_INT(read_all(b.p, b.n - 2, NULL, &sum, err, sizeof err, &idx), -1 - 3);
	CHECK(strstr(err, "truncated") != NULL);
	CHECK_EQ_INT(idx, 3);
	CHECK_EQ_INT(sum, 0 + 1 + 2);

	/* garbage byte */
	b.n = good;
	fw_buf_append(&b, "\xc1\x00", 2);
	CHECK_EQ_INT(read_all(b.p, b.n, NULL, &sum, err, sizeof err, &idx), -4);
	CHECK(strstr(err, "not msgpack") != NULL);

	/* a top-level value that is not a map */
	b.n = good;
	fw_buf_append(&b, "\x92\x01\x02", 3);
	CHECK_EQ_INT(read_all(b.p, b.n, NULL, &sum, err, sizeof err, &idx), -4);
	CHECK(strstr(err, "record is array, not a map") != NULL);
	CHECK_EQ_INT(idx, 3);

	/* a length field of 4 GiB: limit error, no allocation */
	b.n = good;
	fw_buf_append(&b, "\x81\xa1k\xdb\xff\xff\xff\xff", 8);
	CHECK_EQ_INT(read_all(b.p, b.n, NULL, &sum, err, sizeof err, &idx), -4);
	CHECK(strstr(err, "exceeds the limit") != NULL);

	/* the limit is settable */
	struct fw_reader_opts o = {.max_record = 16};
	b.n = good;
	CHECK_EQ_INT(read_all(b.p, b.n, &o, &sum, err, sizeof err, &idx), -1);
	CHECK(strstr(err, "exceeds the limit of 16") != NULL);

	/* nesting beyond the limit */
	b.n = good;
	fw_buf_append(&b, "\x81\xa1k", 3);
	for (int i = 0; i < 100; i++)
		fw_buf_append(&b, "\x91", 1);
	fw_buf_append(&b, "\x01", 1);
	CHECK_EQ_INT(read_all(b.p, b.n, NULL, &sum, err, sizeof err, &idx), -4);
	CHECK(strstr(err, "nesting deeper") != NULL);

	/* empty input: zero records, no error */
	CHECK_EQ_INT(read_all("", 0, NULL, &sum, err, sizeof err, &idx), 0);
	fw_buf_free(&b);
}

TEST(reader_fault_names_the_stream_record_and_byte)
{
	struct fw_buf b = {0};
	for (int i = 0; i < 2; i++)
		pack_rec(&b, i);
	size_t good = b.n;
	fw_buf_append(&b, "\xc1", 1);
	struct fw_reader *r = fw_reader_memopen(b.p, b.n, "in.msgpack", NULL);
	struct fw_rec rec;
	int k;
	while ((k = fw_reader_next(r, &rec)) == 1)
		;
	CHECK_EQ_INT(k, -1);
	char want[256], got[256], small[12];
	snprintf(want, sizeof want, "in.msgpack: record 3 (byte %zu): %s", good,
		 fw_reader_error(r));
	fw_reader_fault(r, got, sizeof got);
	CHECK_STR(got, want);
	/* cut to the buffer, still terminated */
	fw_reader_fault(r, small, sizeof small);
	CHECK_STR(small, "in.msgpack:");
	fw_reader_close(r);
	fw_buf_free(&b);
}

TEST(reader_reports_corrupt_and_truncated_zstd)
{
	struct fw_buf plain = {0};
	for (int i = 0; i < 1000; i++)
		pack_rec(&plain, i);
	struct fw_buf z = zcompress(plain.p, plain.n);
	char err[256];
	int64_t sum;
	uint64_t idx;
	int n = read_all(z.p, z.n - 10, NULL, &sum, err, sizeof err, &idx);
	CHECK(n < 0);
	CHECK(strstr(err, "truncated") != NULL);
	struct fw_buf bad = {0};
	fw_buf_append(&bad, z.p, z.n);
	for (size_t i = 20; i < 60; i++)
		bad.p[i] ^= 0x5a;
	n = read_all(bad.p, bad.n, NULL, &sum, err, sizeof err, &idx);
	CHECK(n < 0);
	CHECK(strstr(err, "zstd") != NULL);
	fw_buf_free(&plain);
	fw_buf_free(&z);
	fw_buf_free(&bad);
}

TEST(reader_reads_pipes_in_small_pieces)
{
	int fds[2];
	CHECK(pipe(fds) == 0);
	struct fw_buf plain = {0};
	for (int i = 0; i < 200; i++)
		pack_rec(&plain, i);
	struct fw_buf z = zcompress(plain.p, plain.n);
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		/* dribble the compressed bytes 7 at a time */
		for (size_t i = 0; i < z.n; i += 7) {
			size_t k = z.n - i < 7 ? z.n - i : 7;
			if (write(fds[1], z.p + i, k) < 0)
				_exit(1);
		}
		_exit(0);
	}
	close(fds[1]);
	struct fw_reader *r = fw_reader_fdopen(fds[0], "pipe", NULL);
	struct fw_rec rec;
	int count = 0;
	while (fw_reader_next(r, &rec) == 1) {
		CHECK_EQ_INT(rec.index, (uint64_t)count);
		count++;
	}
	CHECK_EQ_INT(count, 200);
	CHECK(fw_reader_error(r)[0] == 0);
	fw_reader_close(r);
	close(fds[0]);
	fw_buf_free(&plain);
	fw_buf_free(&z);
}

TEST(writer_is_atomic_and_compresses)
{
	char dir[] = "/tmp/fwtestXXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[256], err[256];
	snprintf(path, sizeof path, "%s/out.msgpack.zst", dir);
	struct fw_writer *w = fw_writer_open(path, -1, err, sizeof err);
	CHECK(w != NULL);
	struct fw_buf b = {0};
	for (int i = 0; i < 1000; i++)
		pack_rec(&b, i);
	CHECK(fw_writer_put(w, b.p, b.n) == 0);
	CHECK(access(path, F_OK) != 0); /* not there until closed */
	CHECK(fw_writer_close(w, err, sizeof err) == 0);
	struct fw_reader *r = fw_reader_open(path, NULL, err, sizeof err);
	CHECK(r != NULL);
	struct fw_rec rec;
	int n = 0;
	while (fw_reader_next(r, &rec) == 1)
		n++;
	CHECK_EQ_INT(n, 1000);
	CHECK(fw_reader_bytes_in(r) < b.n / 2);
	fw_reader_close(r);
	/* abort leaves nothing behind */
	snprintf(path, sizeof path, "%s/gone.msgpack", dir);
	w = fw_writer_open(path, 0, err, sizeof err);
	fw_writer_put(w, b.p, b.n);
	fw_writer_abort(w);
	CHECK(access(path, F_OK) != 0);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	fw_buf_free(&b);
}

TEST(text_out_goes_out_after_a_pause_when_held_full_and_when_forced)
{
	char path[] = "/tmp/fwtesttextXXXXXX";
	int fd = mkstemp(path), saved = dup(1);
	fflush(stdout);
	dup2(fd, 1);
	struct fw_textout t = { 0 };
	off_t at[4];
	/* the first line comes after a pause (nothing came before): out at once */
	fw_buf_append(&t.buf, "a\n", 2);
	int rc = fw_textout_flush(&t, 0);
	at[0] = lseek(fd, 0, SEEK_END);
	usleep(80000);
	fw_buf_append(&t.buf, "b\n", 2);
	rc |= fw_textout_flush(&t, 0);
	at[1] = lseek(fd, 0, SEEK_END);
	/* more than FW_TEXTOUT_HOLD is written whatever the clock says */
	static char big[FW_TEXTOUT_HOLD + 10];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\n';
	fw_buf_append(&t.buf, big, sizeof big);
	rc |= fw_textout_flush(&t, 0);
	at[2] = lseek(fd, 0, SEEK_END);
	fw_buf_append(&t.buf, "c\n", 2);
	rc |= fw_textout_flush(&t, 1);
	at[3] = lseek(fd, 0, SEEK_END);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	CHECK_EQ_INT(rc, 0);
	CHECK_EQ_INT(at[0], 2);
	CHECK_EQ_INT(at[1], 4);
	CHECK_EQ_INT(at[2], 4 + (off_t)sizeof big);
	CHECK_EQ_INT(at[3], 6 + (off_t)sizeof big);
	CHECK_EQ_INT(t.buf.n, 0);
	char head[5] = { 0 };
	CHECK(pread(fd, head, 4, 0) == 4 && strcmp(head, "a\nb\n") == 0);
	close(fd);
	unlink(path);
	fw_textout_release(&t);
	CHECK(t.buf.p == NULL);
	fw_textout_release(NULL);
}

TEST(hash_is_stable)
{
	/* FNV-1a 64 test vectors: sharding depends on these exact values */
	CHECK(fw_hash64("", 0) == 0xcbf29ce484222325ULL);
	CHECK(fw_hash64("a", 1) == 0xaf63dc4c8601ec8cULL);
	CHECK(fw_hash64("foobar", 6) == 0x85944171f73967e8ULL);
}

TEST(kind_is_the_records_kind_string_only)
{
	struct fw_buf b = { 0 };
	pack_rec(&b, 1);
	struct fw_mpv v = { b.p, b.n };
	CHECK(fw_mp_kind_is(v, "t"));
	CHECK(!fw_mp_kind_is(v, "task"));
	CHECK(!fw_mp_kind_is(v, ""));
	/* a record without a kind, and a kind that is not a string */
	fw_buf_reset(&b);
	msgpack_packer pk;
	fw_buf_packer(&pk, &b);
	msgpack_pack_map(&pk, 1);
	msgpack_pack_str_with_body(&pk, "kind", 4);
	msgpack_pack_int(&pk, 7);
	CHECK(!fw_mp_kind_is((struct fw_mpv){ b.p, b.n }, "7"));
	fw_buf_reset(&b);
	fw_buf_packer(&pk, &b);
	msgpack_pack_map(&pk, 0);
	CHECK(!fw_mp_kind_is((struct fw_mpv){ b.p, b.n }, "t"));
	fw_buf_free(&b);
}

TEST_MAIN()
