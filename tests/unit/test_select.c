/*
 * test_select.c — fw_select: the dedup key set, the bottom-k sample
 * against a sort of all keys, split and sample hashes, created dates,
 * --split lists and decontamination sources of each format.
 */
#include <stdint.h>
#include <unistd.h>

#include "test.h"
#include "test_rec.h"
#include "fw_base.h"
#include "fw_cli.h"
#include "fw_decontam.h"
#include "fw_json.h"
#include "fw_select.h"

TEST(keyset_says_new_once_per_key_across_growth)
{
	struct fw_keyset s = { 0 };
	char k[32];
	int fresh = 0, again = 0;
	for (int i = 0; i < 5000; i++) {
		snprintf(k, sizeof k, "key-%d", i);
		fresh += fw_keyset_add(&s, k, strlen(k)) == 1;
	}
	for (int i = 0; i < 5000; i += 7) {
		snprintf(k, sizeof k, "key-%d", i);
		again += fw_keyset_add(&s, k, strlen(k)) == 0;
	}
	CHECK_EQ_INT(fresh, 5000);
	CHECK_EQ_INT(again, (5000 + 6) / 7);
	CHECK_EQ_INT(s.used, 5000);
	/* the empty key is a key like any other */
	CHECK_EQ_INT(fw_keyset_add(&s, "", 0), 1);
	CHECK_EQ_INT(fw_keyset_add(&s, "", 0), 0);
	fw_keyset_release(&s);
	CHECK(s.k == NULL && s.used == 0);
	fw_keyset_release(NULL);
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

TEST(sample_keeps_the_k_smallest_keys_in_input_order)
{
	enum { N = 1000, K = 37 };
	struct fw_sample S;
	uint64_t keys[N], sorted[N], st = 42;
	CHECK_EQ_INT(fw_sample_init(&S, K), 0);
	for (int i = 0; i < N; i++) {
		uint8_t rec[2] = { 0x81, (uint8_t)(i & 0x7f) };
		keys[i] = fw_rand64(&st);
		CHECK_EQ_INT(fw_sample_offer(&S, keys[i], (struct fw_mpv){ rec, 2 }), 0);
	}
	memcpy(sorted, keys, sizeof keys);
	qsort(sorted, N, sizeof *sorted, cmp_u64);
	fw_sample_sort(&S);
	CHECK_EQ_INT(S.n, K);
	for (uint64_t i = 0; i < S.n; i++) {
		CHECK(S.r[i].key <= sorted[K - 1]);
		CHECK(S.r[i].key == keys[S.r[i].order]);
		CHECK(S.r[i].p[1] == (uint8_t)(S.r[i].order & 0x7f));
		if (i)
			CHECK(S.r[i - 1].order < S.r[i].order);
	}
	fw_sample_release(&S);
	fw_sample_release(NULL);
}

TEST(sample_of_more_than_offered_keeps_everything)
{
	struct fw_sample S;
	uint8_t rec[1] = { 0x80 };
	CHECK_EQ_INT(fw_sample_init(&S, 10), 0);
	for (int i = 0; i < 3; i++)
		fw_sample_offer(&S, (uint64_t)(3 - i), (struct fw_mpv){ rec, 1 });
	fw_sample_sort(&S);
	CHECK_EQ_INT(S.n, 3);
	CHECK_EQ_INT(S.r[0].order, 0);
	CHECK_EQ_INT(S.r[2].order, 2);
	fw_sample_release(&S);
}

TEST(id_hash_is_the_id_strings_hash_else_the_whole_record)
{
	struct fw_buf b = { 0 };
	struct fw_mpv v = test_rec(&b, "{\"id\":\"abc\",\"x\":1}");
	CHECK(fw_shard_hash(v) == fw_hash64("abc", 3));
	v = test_rec(&b, "{\"id\":7}");
	CHECK(fw_shard_hash(v) == fw_hash64(b.p, b.n));
	CHECK(fw_select_key(v, 1) != fw_select_key(v, 2));
	CHECK(fw_select_unit(0) == 0);
	CHECK(fw_select_unit(UINT64_MAX) < 1);
	fw_buf_release(&b);
}

TEST(split_falls_where_the_unit_hash_is)
{
	struct fw_buf b = { 0 };
	double upto[3] = { 0.25, 0.5, 1.0 };
	int count[3] = { 0 };
	uint64_t st = 7;
	char js[64];
	for (int i = 0; i < 4000; i++) {
		snprintf(js, sizeof js, "{\"id\":\"%016llx\"}", (unsigned long long)fw_rand64(&st));
		struct fw_mpv v = test_rec(&b, js);
		int k = fw_select_split(v, upto, 3);
		double u = fw_select_unit(fw_shard_hash(v));
		int in = k >= 0 && k < 3;
		double lo = in && k > 0 ? upto[in ? k - 1 : 0] : 0, hi = in ? upto[in ? k : 0] : 0;
		CHECK(in && u >= lo && u < hi);
		count[in ? k : 0]++;
	}
	/* 1000, 1000, 2000 expected; 6 standard deviations apart at most */
	CHECK(abs(count[0] - 1000) < 165 && abs(count[1] - 1000) < 165);
	CHECK(abs(count[2] - 2000) < 190);
	fw_buf_release(&b);
}

TEST(dates_read_text_seconds_and_the_tasks_own)
{
	struct fw_buf b = { 0 };
	struct fw_select_dates d = { 0 };
	int64_t t;
	CHECK_EQ_INT(fw_select_created(test_rec(&b, "{\"created\":86400}"), &t), 0);
	CHECK_EQ_INT(t, 86400);
	CHECK_EQ_INT(fw_select_created(test_rec(&b, "{\"created\":\"1970-01-02\"}"), &t), 0);
	CHECK_EQ_INT(t, 86400);
	CHECK_EQ_INT(fw_select_created(test_rec(&b, "{\"task\":{\"created\":60}}"), &t), 0);
	CHECK_EQ_INT(t, 60);
	CHECK_EQ_INT(fw_select_created(test_rec(&b, "{\"id\":\"x\"}"), &t), -1);
	/* no bound: every record, dated or not */
	CHECK_EQ_INT(fw_select_dated(&d, test_rec(&b, "{}")), 1);
	d.has_after = 1;
	d.after = 100;
	CHECK_EQ_INT(fw_select_dated(&d, test_rec(&b, "{}")), -1);
	CHECK_EQ_INT(fw_select_dated(&d, test_rec(&b, "{\"created\":100}")), 0);
	CHECK_EQ_INT(fw_select_dated(&d, test_rec(&b, "{\"created\":101}")), 1);
	d.has_before = 1;
	d.before = 200;
	CHECK_EQ_INT(fw_select_dated(&d, test_rec(&b, "{\"created\":200}")), 0);
	CHECK_EQ_INT(fw_select_dated(&d, test_rec(&b, "{\"created\":199}")), 1);
	fw_buf_release(&b);
}

TEST(split_lists_add_up_to_one_with_distinct_names)
{
	char *names[4];
	double upto[4];
	char ok[] = "train=0.7,eval=0.2,test=0.1";
	CHECK_EQ_INT(fw_select_parse_splits(ok, names, upto, 4), 3);
	CHECK_STR(names[0], "train");
	CHECK_STR(names[2], "test");
	CHECK_NEAR(upto[0], 0.7, 1e-12);
	CHECK_NEAR(upto[1], 0.9, 1e-12);
	CHECK(upto[2] == 1.0);
	const char *bad[] = { "a=0.5", "a=0.5,a=0.5", "=1", "a/b=1", "a=0", "a=1.5", "a", "",
			      "a=0.2,b=0.2,c=0.2,d=0.2,e=0.2" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char s[64];
		snprintf(s, sizeof s, "%s", bad[i]);
		CHECK_EQ_INT(fw_select_parse_splits(s, names, upto, 4), -1);
	}
}

/* Writes text to a new file under /tmp; its name in path. */
static void tmpfile_with(char *path, size_t n, const void *text, size_t len)
{
	snprintf(path, n, "/tmp/test_select.XXXXXX");
	int fd = mkstemp(path);
	CHECK(fd >= 0 && write(fd, text, len) == (ssize_t)len);
	close(fd);
}

static const char ITEM[] = "the quick brown fox jumps over the lazy dog while the cat sleeps "
			   "on a warm mat near the door";

TEST(eval_sources_load_as_text_jsonl_and_records)
{
	struct fw_decontam *dc = fw_decontam_new(FW_DECONTAM_N);
	struct fw_select_eval ev;
	struct fw_buf b = { 0 }, msg = { 0 };
	struct fw_decontam_hit hit;
	char path[64], err[256], js[512];
	const char *files[3] = { "plain", "lines", "recs" };

	tmpfile_with(path, sizeof path, ITEM, strlen(ITEM));
	CHECK_EQ_INT(fw_select_eval_load(dc, 0, path, &ev, err, sizeof err), 0);
	CHECK_EQ_INT(ev.texts, 1);
	CHECK_EQ_INT(ev.shorts, 0);
	CHECK(ev.grams > 0 && ev.added == ev.grams);
	unlink(path);

	snprintf(js, sizeof js, "{\"q\":\"%s\"}\n{\"q\":\"too short\"}\n", ITEM);
	tmpfile_with(path, sizeof path, js, strlen(js));
	CHECK_EQ_INT(fw_select_eval_load(dc, 1, path, &ev, err, sizeof err), 0);
	CHECK_EQ_INT(ev.texts, 2);
	CHECK_EQ_INT(ev.shorts, 1);
	CHECK_EQ_INT(ev.added, 0); /* the same n-grams as the plain text */
	unlink(path);

	struct fw_mpv v = test_rec(&b, "{\"id\":\"t1\",\"text\":\"say: the quick brown fox jumps over "
				    "the lazy dog while the cat sleeps on a warm mat\"}");
	CHECK_EQ_INT(fw_decontam_check_record(dc, v, &hit), 1);
	CHECK_EQ_INT(fw_select_hit_text(&msg, v, &hit, files), 0);
	CHECK(!strncmp((const char *)msg.p, "id t1: dropped: shares \"", 24));
	CHECK(strstr((const char *)msg.p, "\" with plain") != NULL);

	snprintf(js, sizeof js, "{\"q\":\"oops}\n");
	tmpfile_with(path, sizeof path, js, strlen(js));
	CHECK_EQ_INT(fw_select_eval_load(dc, 2, path, &ev, err, sizeof err), -1);
	/* the string runs past the newline to the end */
	CHECK(strstr(err, ": line 2: unexpected end of input") != NULL);
	unlink(path);
	CHECK_EQ_INT(fw_select_eval_load(dc, 2, "/nonexistent/x", &ev, err, sizeof err), -1);
	CHECK_STR(err, "/nonexistent/x: No such file or directory");

	fw_buf_release(&b);
	fw_buf_release(&msg);
	fw_decontam_free(dc);
}

TEST_MAIN()
