/*
 * test_recstats.c — fw_recstats: the table of a few records worked out by
 * hand (sizes, kinds in the order seen, fields sorted, int and uint as one
 * type, numbers' min/mean/max), and an empty stream; fw_recsample: k of n
 * records in input order, the same for the same seed, all of a short
 * stream, none for k = 0.
 */
#include <string.h>

#include "test.h"
#include "fw_json.h"
#include "fw_recsample.h"
#include "fw_recstats.h"

static void add_json(struct fw_recstats *s, const char *js)
{
	struct fw_buf b = { 0 };
	struct fw_json_err e;
	size_t used;
	CHECK_EQ_INT(fw_json_to_mp(&b, js, strlen(js), 1, &used, &e), 1);
	fw_recstats_add(s, (struct fw_mpv){ b.p, b.n });
	fw_buf_release(&b);
}

TEST(table_of_three_records)
{
	struct fw_recstats *s = fw_recstats_new();
	struct fw_buf out = { 0 };
	CHECK(s != NULL);
	add_json(s, "{\"kind\":\"task\",\"n\":1,\"m\":{\"x\":\"ab\"}}");
	add_json(s, "{\"kind\":\"traj\",\"n\":-3}");
	add_json(s, "{\"n\":2.5,\"m\":{\"x\":null}}");
	CHECK_EQ_INT(fw_recstats_table(s, &out), 0);
	CHECK(fw_buf_append(&out, "", 1) == 0);
	/* sizes: 22, 14 and 18 bytes of msgpack (1 and -3 take one byte,
	 * 2.5 nine); 1 (uint) and -3 (int) count as one type */
	CHECK_STR((const char *)out.p,
		  "records 3\n"
		  "bytes   54 (min 14, mean 18, max 22 per record)\n"
		  "\nkind\tcount\ntask\t1\ntraj\t1\n(none)\t1\n"
		  "\nfield\tpresent\ttypes\tmin\tmean\tmax\n"
		  ".kind\t2\tstr:2\n"
		  ".m\t2\tmap:2\n"
		  ".m.x\t2\tnil:1,str:1\n"
		  ".n\t3\tint:2,float:1\t-3\t0.166667\t2.5\n");
	fw_buf_release(&out);
	fw_recstats_free(s);
	fw_recstats_free(NULL);
}

TEST(table_of_no_records)
{
	struct fw_recstats *s = fw_recstats_new();
	struct fw_buf out = { 0 };
	CHECK_EQ_INT(fw_recstats_table(s, &out), 0);
	CHECK(fw_buf_append(&out, "", 1) == 0);
	CHECK_STR((const char *)out.p,
		  "records 0\n\nkind\tcount\n\nfield\tpresent\ttypes\tmin\tmean\tmax\n");
	fw_buf_release(&out);
	fw_recstats_free(s);
}

/* Offers records 0..n-1 (each one msgpack uint) to a sample of k drawn
 * with seed; the kept numbers go into got.  Returns how many. */
static uint64_t sample(uint64_t k, uint64_t n, uint64_t seed, uint8_t *got)
{
	struct fw_recsample *s = fw_recsample_new(k, seed);
	CHECK(s != NULL);
	for (uint64_t i = 0; i < n; i++) {
		uint8_t b = (uint8_t)i;
		CHECK_EQ_INT(fw_recsample_add(s, (struct fw_mpv){ &b, 1 }), 0);
	}
	uint64_t kept = fw_recsample_finish(s);
	for (uint64_t i = 0; i < kept; i++) {
		struct fw_mpv v = fw_recsample_get(s, i);
		CHECK(v.n == 1);
		got[i] = v.p[0];
	}
	fw_recsample_free(s);
	return kept;
}

TEST(sample_keeps_k_in_input_order_the_same_for_a_seed)
{
	uint8_t a[100], b[100];
	CHECK(sample(10, 100, 7, a) == 10);
	CHECK(sample(10, 100, 7, b) == 10);
	CHECK(memcmp(a, b, 10) == 0);
	for (int i = 1; i < 10; i++)
		CHECK(a[i - 1] < a[i]);
	CHECK(a[9] >= 10); /* not the first ten: later records were drawn */
	CHECK(sample(10, 4, 7, a) == 4);
	CHECK(a[0] == 0 && a[1] == 1 && a[2] == 2 && a[3] == 3);
	CHECK(sample(0, 50, 7, a) == 0);
	fw_recsample_free(NULL);
}

TEST_MAIN()
