/*
 * Unit tests for the JSON bridge: exact integers, floats, strings, the
 * reserved forms for bin/ext/NaN/non-string keys, and parse errors with
 * their offsets; the streaming reader: values and positions, each error
 * with its line and column, and the same values whatever bytes each read()
 * returns.
 */
#include <fcntl.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "fw_json.h"

/* JSON text -> msgpack -> JSON text; returns a static copy of the result. */
static const char *rt(const char *json)
{
	static char out[4096];
	struct fw_buf mp = {0}, js = {0};
	struct fw_json_err e;
	size_t used;
	char err[128];
	out[0] = 0;
	if (fw_json_to_mp(&mp, json, strlen(json), 1, &used, &e) != 1) {
		snprintf(out, sizeof out, "ERR %zu %s", e.at, e.msg);
	} else if (fw_json_from_mp(&js, (struct fw_mpv){mp.p, mp.n}, err, sizeof err) < 0) {
		snprintf(out, sizeof out, "ERR %s", err);
	} else {
		snprintf(out, sizeof out, "%.*s", (int)js.n, (const char *)js.p);
	}
	fw_buf_free(&mp);
	fw_buf_free(&js);
	return out;
}

TEST(integers_keep_all_64_bits)
{
	CHECK_STR(rt("18446744073709551615"), "18446744073709551615");
	CHECK_STR(rt("-9223372036854775808"), "-9223372036854775808");
	CHECK_STR(rt("9007199254740993"), "9007199254740993");
	CHECK_STR(rt("0"), "0");
	CHECK_STR(rt("-0"), "0");
	/* beyond 64 bits becomes a double */
	CHECK_STR(rt("18446744073709551616"), "1.8446744073709552e+19");
}

TEST(floats_print_shortest_and_stay_floats)
{
	CHECK_STR(rt("0.1"), "0.1");
	CHECK_STR(rt("1.0"), "1.0");
	CHECK_STR(rt("-2.5e-300"), "-2.5e-300");
	CHECK_STR(rt("1e2"), "100.0");
	CHECK_STR(rt("{\"$float\":\"nan\"}"), "{\"$float\":\"nan\"}");
	CHECK_STR(rt("{\"$float\":\"-inf\"}"), "{\"$float\":\"-inf\"}");
}

TEST(strings_are_byte_exact)
{
	CHECK_STR(rt("\"a\\nb\\t\\\"q\\\" \\\\ \\u00e9 \\ud83d\\ude00 \\/\""),
		  "\"a\\nb\\t\\\"q\\\" \\\\ é 😀 /\"");
	CHECK_STR(rt("\"\\u0001\""), "\"\\u0001\"");
	CHECK_STR(rt("\"\""), "\"\"");
}

TEST(binary_ext_and_odd_maps_take_reserved_forms)
{
	CHECK_STR(rt("{\"$bin\":\"AAEC/w==\"}"), "{\"$bin\":\"AAEC/w==\"}");
	CHECK_STR(rt("{\"$ext\":[5,\"YWJj\"]}"), "{\"$ext\":[5,\"YWJj\"]}");
	CHECK_STR(rt("{\"$map\":[[1,\"one\"],[\"k\",2]]}"), "{\"$map\":[[1,\"one\"],[\"k\",2]]}");
	/* a user object whose only key is reserved survives as $map */
	CHECK_STR(rt("{\"$map\":[[\"$bin\",\"x\"]]}"), "{\"$map\":[[\"$bin\",\"x\"]]}");
	/* two keys: not special */
	CHECK_STR(rt("{\"$bin\":1,\"a\":2}"), "{\"$bin\":1,\"a\":2}");
	CHECK(strncmp(rt("{\"$bin\":\"@@\"}"), "ERR", 3) == 0);
}

TEST(containers_of_every_size_class)
{
	/* 20 keys (map16 header) and 70000 elements (array32) */
	char big[600000];
	size_t n = 0;
	n += (size_t)sprintf(big + n, "[");
	for (int i = 0; i < 70000; i++)
		n += (size_t)sprintf(big + n, "%s%d", i ? "," : "", i % 10);
	sprintf(big + n, "]");
	const char *r = rt(big);
	CHECK(strncmp(r, "ERR", 3) != 0);
	CHECK_STR(rt("{\"a\":{\"b\":[1,[2,{}],[]]},\"c\":null,\"d\":true,\"e\":false}"),
		  "{\"a\":{\"b\":[1,[2,{}],[]]},\"c\":null,\"d\":true,\"e\":false}");
}

TEST(errors_name_offsets)
{
	CHECK_STR(rt("{\"a\":1,}"), "ERR 7 expected a string key");
	CHECK_STR(rt("[1 2]"), "ERR 3 expected ',' or ']'");
	CHECK_STR(rt("{\"a\" 1}"), "ERR 5 expected ':'");
	CHECK_STR(rt("tru"), "ERR 3 unexpected end of input");
	CHECK_STR(rt("01"), "ERR 0 leading zero in number");
	CHECK_STR(rt("\"a\\x\""), "ERR 2 bad escape '\\x'");
	CHECK_STR(rt("\"ab\xff\""), "ERR 3 invalid UTF-8 in string");
	CHECK_STR(rt("\"\xc0\xaf\""), "ERR 1 invalid UTF-8 in string");
	CHECK_STR(rt("\"\\ud800\""), "ERR 1 unpaired surrogate in \\u escape");
	CHECK_STR(rt("\"a\nb\""), "ERR 2 control character in string");
	char deep[400];
	memset(deep, '[', sizeof deep);
	deep[399] = 0;
	CHECK(strstr(rt(deep), "nesting deeper") != NULL);
	/* 100 closed levels parse, but exceed what a record may hold */
	memset(deep, ']', sizeof deep);
	memset(deep, '[', 100);
	deep[200] = 0;
	CHECK_STR(rt(deep), "ERR 0 nesting deeper than 64 levels");
}

TEST(incomplete_input_asks_for_more)
{
	struct fw_buf mp = {0};
	struct fw_json_err e;
	size_t used;
	CHECK_EQ_INT(fw_json_to_mp(&mp, "{\"a\":[1,2", 9, 0, &used, &e), 2);
	CHECK_EQ_INT(mp.n, 0);
	CHECK_EQ_INT(fw_json_to_mp(&mp, "123", 3, 0, &used, &e), 2);
	CHECK_EQ_INT(fw_json_to_mp(&mp, "123", 3, 1, &used, &e), 1);
	CHECK_EQ_INT(used, 3);
	CHECK_EQ_INT(fw_json_to_mp(&mp, "  \n ", 4, 0, &used, &e), 0);
	/* two values back to back: one at a time */
	fw_buf_reset(&mp);
	CHECK_EQ_INT(fw_json_to_mp(&mp, " {} {\"x\":1}", 11, 1, &used, &e), 1);
	CHECK_EQ_INT(used, 3);
	fw_buf_free(&mp);
}

TEST(invalid_utf8_in_msgpack_string_is_an_error)
{
	struct fw_buf js = {0};
	char err[128];
	const uint8_t mp[] = {0xa2, 0xc3, 0x28};
	CHECK(fw_json_from_mp(&js, (struct fw_mpv){mp, 3}, err, sizeof err) == -1);
	CHECK(strstr(err, "UTF-8") != NULL);
	CHECK_EQ_INT(js.n, 0);
	fw_buf_free(&js);
}

/* Found by fuzzing: maps with integer keys nest three JSON levels per
 * msgpack level; 40 of them must still print and read back. */
TEST(deep_maps_with_integer_keys_round_trip)
{
	struct fw_buf mp = {0}, js = {0}, back = {0};
	msgpack_packer pk;
	fw_buf_packer(&pk, &mp);
	for (int i = 0; i < 40; i++) {
		msgpack_pack_map(&pk, 1);
		msgpack_pack_int(&pk, -1);
	}
	msgpack_pack_nil(&pk);
	char err[128];
	struct fw_json_err e;
	size_t used;
	CHECK(fw_json_from_mp(&js, (struct fw_mpv){mp.p, mp.n}, err, sizeof err) == 0);
	CHECK_EQ_INT(fw_json_to_mp(&back, (char *)js.p, js.n, 1, &used, &e), 1);
	CHECK(back.n == mp.n && memcmp(back.p, mp.p, mp.n) == 0);
	fw_buf_free(&mp);
	fw_buf_free(&js);
	fw_buf_free(&back);
}

TEST(base64_round_trips_every_length)
{
	uint8_t src[64];
	for (int i = 0; i < 64; i++)
		src[i] = (uint8_t)(i * 37 + 11);
	for (size_t n = 0; n <= 64; n++) {
		struct fw_buf e = {0}, d = {0};
		fw_base64_encode(&e, src, n);
		CHECK(fw_base64_decode(&d, (char *)e.p, e.n) == 0);
		CHECK(d.n == n && (n == 0 || memcmp(d.p, src, n) == 0));
		fw_buf_free(&e);
		fw_buf_free(&d);
	}
}

TEST(a_line_is_the_json_of_the_value_at_a_path_strings_raw_null_when_missing)
{
	struct fw_buf mp = { 0 }, out = { 0 };
	struct fw_json_err e;
	size_t used;
	char err[128];
	static const char rec[] = "{\"a\":\"x\\ny\",\"b\":[1,{\"c\":2}]}";
	CHECK_EQ_INT(fw_json_to_mp(&mp, rec, strlen(rec), 1, &used, &e), 1);
	struct fw_mpv v = { mp.p, mp.n };
	static const struct {
		const char *path, *line;
	} cases[] = {
		{ NULL, "{\"a\":\"x\\ny\",\"b\":[1,{\"c\":2}]}\n" },
		{ ".", "{\"a\":\"x\\ny\",\"b\":[1,{\"c\":2}]}\n" },
		{ ".a", "x\ny\n" },
		{ ".b[-1]", "{\"c\":2}\n" },
		{ ".b[0]", "1\n" },
		{ ".z", "null\n" },
		{ ".b[5].c", "null\n" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const char *ps = cases[i].path;
		struct fw_path *p = ps ? fw_path_parse(ps, err, sizeof err) : NULL;
		fw_buf_reset(&out);
		CHECK_EQ_INT(fw_json_line(&out, v, p, err, sizeof err), 0);
		CHECK(out.n == strlen(cases[i].line) && memcmp(out.p, cases[i].line, out.n) == 0);
		fw_path_free(p);
	}
	/* a string that is not UTF-8 has no JSON text: an error, out as it was */
	static const uint8_t bad[] = { 0x81, 0xa1, 'a', 0xa1, 0xff };
	fw_buf_reset(&out);
	CHECK_EQ_INT(fw_buf_append(&out, "kept\n", 5), 0);
	v = (struct fw_mpv){ bad, sizeof bad };
	CHECK_EQ_INT(fw_json_line(&out, v, NULL, err, sizeof err), -1);
	CHECK(err[0] != 0);
	CHECK(out.n == 5 && memcmp(out.p, "kept\n", 5) == 0);
	fw_buf_release(&mp);
	fw_buf_release(&out);
}

/* Writes text to a temporary file; returns its path (static). */
static const char *tmp_json(const char *text, size_t n)
{
	static char path[64];
	snprintf(path, sizeof path, "/tmp/test_json.XXXXXX");
	int fd = mkstemp(path);
	if (fd < 0 || write(fd, text, n) != (ssize_t)n)
		return NULL;
	close(fd);
	return path;
}

TEST(reader_streams_values_with_their_positions)
{
	/* a value split over lines, two on one line, a non-object, blank lines */
	static const char text[] = "{\"a\":1}\n\n  {\"b\":\n [2,\n 3]} {\"c\":\"x\"}\n\"s\"\n\n";
	const char *path = tmp_json(text, sizeof text - 1);
	char err[128];
	struct fw_json_reader *r = fw_json_reader_open(path, 0, err, sizeof err);
	struct fw_mpv v;
	uint64_t line, col;
	static const uint64_t want[][3] = { { 1, 1, 0 }, { 3, 3, 11 }, { 5, 6, 27 }, { 6, 1, 37 } };
	CHECK(r != NULL);
	CHECK_STR(fw_json_reader_name(r), path);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ_INT(fw_json_reader_next(r, &v), 1);
		fw_json_reader_pos(r, &line, &col);
		CHECK(line == want[i][0] && col == want[i][1]);
		CHECK(fw_json_reader_offset(r) == want[i][2]);
		CHECK_EQ_INT(fw_mp_type(v), i < 3 ? FW_MP_MAP : FW_MP_STR);
	}
	CHECK_EQ_INT(fw_json_reader_next(r, &v), 0);
	CHECK_STR(fw_json_reader_error(r), "");
	fw_json_reader_close(r);
	unlink(path);
	fw_json_reader_close(NULL);
}

TEST(reader_names_the_line_and_column_of_bad_json_and_stops)
{
	static const char text[] = "{\"a\":1}\n{\"b\": tru}\n{\"c\":3}\n";
	const char *path = tmp_json(text, sizeof text - 1);
	char err[128];
	struct fw_json_reader *r = fw_json_reader_open(path, 0, err, sizeof err);
	struct fw_mpv v;
	CHECK_EQ_INT(fw_json_reader_next(r, &v), 1);
	CHECK_EQ_INT(fw_json_reader_next(r, &v), -1);
	CHECK(strncmp(fw_json_reader_error(r), "line 2, column 7: ", 18) == 0);
	CHECK_EQ_INT(fw_json_reader_next(r, &v), -1);
	fw_json_reader_close(r);
	unlink(path);
	CHECK(fw_json_reader_open("/nonexistent/x.jsonl", 0, err, sizeof err) == NULL);
	CHECK(strstr(err, "/nonexistent/x.jsonl: ") == err);
}

TEST(reader_bounds_the_text_of_one_value)
{
	/* an unterminated string of 10000 bytes with a 1000-byte limit: more
	 * than 2 * 1000 + 4096 bytes without a value */
	static char text[10010];
	text[0] = '"';
	memset(text + 1, 'x', sizeof text - 1);
	const char *path = tmp_json(text, sizeof text);
	char err[128];
	struct fw_json_reader *r = fw_json_reader_open(path, 1000, err, sizeof err);
	struct fw_mpv v;
	CHECK_EQ_INT(fw_json_reader_next(r, &v), -1);
	CHECK_STR(fw_json_reader_error(r), "line 1: value exceeds the record limit of 1000 bytes");
	fw_json_reader_close(r);
	unlink(path);
}

/* The reader on text: the error it stops with ("" when none), and the
 * values it returned, as msgpack bytes each followed by its line, column
 * and offset, into vals. */
static const char *read_all(const char *path, struct fw_buf *vals)
{
	static char out[256];
	char err[128];
	struct fw_json_reader *r = fw_json_reader_open(path, 0, err, sizeof err);
	struct fw_mpv v;
	uint64_t pos[3];
	int rc;
	if (!r)
		return "cannot open";
	while ((rc = fw_json_reader_next(r, &v)) == 1) {
		fw_json_reader_pos(r, &pos[0], &pos[1]);
		pos[2] = fw_json_reader_offset(r);
		if (fw_buf_append(vals, v.p, v.n) < 0 || fw_buf_append(vals, pos, sizeof pos) < 0)
			break;
	}
	snprintf(out, sizeof out, "%s", fw_json_reader_error(r));
	fw_json_reader_close(r);
	return out;
}

TEST(reader_names_each_error_with_its_line_and_column)
{
	static char deep[420];
	memset(deep, '[', 201);
	/* 65 maps in maps: within JSON's bound, beyond msgpack's */
	static char mpdeep[400];
	for (int i = 0; i < 65; i++) {
		memcpy(mpdeep + 5 * i, "{\"a\":", 5);
		mpdeep[5 * 65 + 1 + i] = '}';
	}
	mpdeep[5 * 65] = '1';
	static char longnum[500];
	memset(longnum, '1', 1);
	memset(longnum + 1, '0', 420);
	memcpy(longnum + 421, ".5", 2);
	static const struct {
		const char *line2, *err;
	} cases[] = {
		{ "{\"a\":\"x\x01\"}", "line 2, column 8: control character in string" },
		{ "{\"a\":\"\xff\"}", "line 2, column 7: invalid UTF-8 in string" },
		{ "{\"a\":\"\\u12g4\"}", "line 2, column 7: bad \\u escape" },
		{ "{\"a\":\"\\ud800x\"}", "line 2, column 7: unpaired surrogate in \\u escape" },
		{ "{\"a\":\"\\ude00\"}", "line 2, column 7: unpaired surrogate in \\u escape" },
		{ "{\"a\":\"\\q\"}", "line 2, column 7: bad escape '\\q'" },
		{ "{\"a\":-}", "line 2, column 7: invalid number" },
		{ "{\"a\":01}", "line 2, column 6: leading zero in number" },
		{ "{\"a\":1.}", "line 2, column 8: invalid number" },
		{ "{\"a\":1e}", "line 2, column 8: invalid number" },
		{ longnum, "line 2, column 1: number too long" },
		{ "{\"a\":@}", "line 2, column 6: unexpected '@'" },
		{ "{\"a\":\x01}", "line 2, column 6: unexpected byte 0x01" },
		{ "{\"$bin\":3}", "line 2, column 1: malformed $bin form" },
		{ deep, "line 2, column 201: nesting deeper than 200 levels" },
		{ mpdeep, "line 2, column 1: nesting deeper than 64 levels" },
		{ "{1:2}", "line 2, column 2: expected a string key" },
		{ "{\"a\" 1}", "line 2, column 6: expected ':'" },
		{ "[1 2]", "line 2, column 4: expected ',' or ']'" },
		{ "{\"a\":1", "line 2, column 7: unexpected end of input" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char text[1024];
		int n = snprintf(text, sizeof text, "{\"ok\":1}\n%s", cases[i].line2);
		const char *path = tmp_json(text, (size_t)n);
		struct fw_buf vals = { 0 };
		const char *got = read_all(path, &vals);
		CHECK_STR(got, cases[i].err);
		CHECK(vals.n == 5 + 3 * sizeof(uint64_t)); /* the good first line */
		fw_buf_release(&vals);
		unlink(path);
	}
}

TEST(reader_gives_the_same_values_whatever_each_read_returns)
{
	/* values over lines, strings with escapes and multi-byte UTF-8, big
	 * numbers, whitespace runs, an error at the end: every split of the
	 * text into two reads gives what one file gives */
	static const char text[] =
		"{\"a\":1}\n  {\"b\":\n [2.5e3,\n -0, 18446744073709551615]} {\"c\":\"x\\n\\u00e9\xc3\xa9"
		"\\ud83d\\ude00\"}\r\n\t\"s\"\n[true,false,null,{\"$bin\":\"AAE=\"}]\n\n{\"d\": tru}\n";
	size_t n = sizeof text - 1;
	const char *path = tmp_json(text, n);
	struct fw_buf want = { 0 };
	char want_err[256];
	snprintf(want_err, sizeof want_err, "%s", read_all(path, &want));
	unlink(path);
	CHECK_STR(want_err, "line 8, column 7: unexpected 't'");
	CHECK(want.n > 0);
	for (size_t k = 0; k <= n; k++) {
		/* a pipe in packet mode: each write() is one read() */
		int fds[2];
		CHECK(pipe2(fds, O_DIRECT) == 0);
		CHECK(k == 0 || write(fds[1], text, k) == (ssize_t)k);
		CHECK(k == n || write(fds[1], text + k, n - k) == (ssize_t)(n - k));
		close(fds[1]);
		char fdpath[64];
		snprintf(fdpath, sizeof fdpath, "/dev/fd/%d", fds[0]);
		struct fw_buf got = { 0 };
		const char *err = read_all(fdpath, &got);
		close(fds[0]);
		CHECK_STR(err, want_err);
		CHECK(got.n == want.n && memcmp(got.p, want.p, want.n) == 0);
		fw_buf_release(&got);
	}
	fw_buf_release(&want);
}

TEST_MAIN()
