/*
 * test_recstats.c — fw_recstats: the table of a few records worked out by
 * hand (sizes, kinds in the order seen, fields sorted, int and uint as one
 * type, numbers' min/mean/max), and an empty stream.
 */
#include <string.h>

#include "test.h"
#include "fw_json.h"
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

TEST_MAIN()
