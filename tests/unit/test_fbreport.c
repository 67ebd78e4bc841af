/*
 * test_fbreport.c — fw_fbreport on a handful of traj records whose counts
 * are worked out by hand: votes per arm, thumbs-down by origin, tags as
 * categories, records refused for their types, and the A/B pair that has
 * too few users for a verdict; the same figures as records.
 */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "test.h"
#include "fw_fbreport.h"
#include "fw_json.h"
#include "fw_mp.h"
#include "fw_stream.h"

static const char *RECS[] = {
	"{\"id\":\"a1\",\"model\":\"A\",\"feedback\":[{\"rating\":1,\"user\":\"u1\"}]}",
	"{\"id\":\"a2\",\"model\":\"A\",\"feedback\":[{\"rating\":-1,\"user\":\"u2\","
	"\"origin\":\"internal\"}],\"tags\":[\"slow\"]}",
	"{\"id\":\"b1\",\"model\":\"B\",\"feedback\":[{\"rating\":-1}],\"tags\":[\"slow\"]}",
	"{\"id\":\"c1\",\"feedback\":[{\"rating\":0,\"user\":\"u3\"}]}",
};

static struct fw_fbreport *report_of(const char *const *recs, size_t n, int *bad)
{
	struct fw_fbreport_conf c = { .by_src = ".model", .seed = 1, .resamples = 200 };
	char err[256];
	struct fw_buf b = { 0 };

	c.by = fw_path_parse(".model", err, sizeof err);
	struct fw_fbreport *R = fw_fbreport_new(&c, err, sizeof err);
	for (size_t i = 0; R && i < n; i++) {
		struct fw_json_err e;
		size_t used;
		fw_buf_reset(&b);
		if (fw_json_to_mp(&b, recs[i], strlen(recs[i]), 1, &used, &e) != 1)
			continue;
		*bad += fw_fbreport_add(R, (struct fw_mpv){ b.p, b.n }, err, sizeof err) < 0;
	}
	fw_buf_release(&b);
	return R;
}

TEST(table_counts_votes_downs_and_tags_per_arm)
{
	int bad = 0;
	char err[256];
	struct fw_buf t = { 0 };
	struct fw_fbreport *R = report_of(RECS, 4, &bad);

	CHECK(R != NULL);
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(fw_fbreport_finish(R, err, sizeof err), 0);
	CHECK_EQ_INT(fw_fbreport_table(R, &t), 0);
	CHECK_EQ_INT(fw_buf_append(&t, "", 1), 0);
	const char *s = (const char *)t.p;
	/* a rating of 0 is no vote; c1 is an arm with none */
	static const char head[] = "4 trajectories, 3 votes, 2 thumbs-down trajectories "
				   "(external 1, internal 1)\n";
	CHECK(!strncmp(s, head, sizeof head - 1));
	CHECK(strstr(s, "\nslow                    2  100.0%  1 (100.0%)      1 (100.0%)      a2 b1\n"));
	CHECK(strstr(s, "\nA                     1      2   50.0%  "));
	CHECK(strstr(s, "\nB                     0      1    0.0%  "));
	/* c1's user gave no vote: no user of its arm */
	CHECK(strstr(s, "\n(none)                0      0       -  -                      0\n"));
	/* three arms, three pairs: each at 0.05 / 3 */
	CHECK(strstr(s, "bootstrap 98.33% over users (95% for the 3 pairs together), 200 "
			"resamples, seed 1\n"));
	CHECK(strstr(s, "\nA vs B: -50.0% ["));
	CHECK(strstr(s, ": no verdict (fewer than 10 users)\n"));
	fw_buf_release(&t);
	fw_fbreport_free(R);
	fw_fbreport_free(NULL);
}

TEST(records_of_the_wrong_type_are_refused_and_count_for_nothing)
{
	static const char *recs[] = {
		"{\"id\":\"x\",\"feedback\":\"no\"}",
		"{\"id\":\"y\",\"feedback\":[3]}",
		"{\"id\":\"z\",\"feedback\":[{\"rating\":\"up\"}]}",
	};
	char err[256];
	struct fw_buf b = { 0 }, t = { 0 };
	int bad = 0;
	struct fw_fbreport *R = report_of(recs, 0, &bad);
	const char *want[] = {
		"field 'feedback' is str, not array",
		"field 'feedback[0]' is int, not map",
		"field 'feedback[0].rating' is str, not a number",
	};

	for (int i = 0; i < 3; i++) {
		struct fw_json_err e;
		size_t used;
		fw_buf_reset(&b);
		CHECK_EQ_INT(fw_json_to_mp(&b, recs[i], strlen(recs[i]), 1, &used, &e), 1);
		errno = 0;
		CHECK_EQ_INT(fw_fbreport_add(R, (struct fw_mpv){ b.p, b.n }, err, sizeof err), -1);
		CHECK_EQ_INT(errno, EINVAL);
		CHECK_STR(err, want[i]);
	}
	CHECK_EQ_INT(fw_fbreport_finish(R, err, sizeof err), 0);
	CHECK_EQ_INT(fw_fbreport_table(R, &t), 0);
	CHECK(t.n > 3 && !strncmp((const char *)t.p, "0 trajectories, 0 votes", 23));
	fw_buf_release(&b);
	fw_buf_release(&t);
	fw_fbreport_free(R);
}

TEST(records_carry_the_same_figures)
{
	int bad = 0;
	char err[256], path[] = "/tmp/test_fbreport.XXXXXX";
	struct fw_fbreport *R = report_of(RECS, 4, &bad);
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	close(fd);
	CHECK_EQ_INT(fw_fbreport_finish(R, err, sizeof err), 0);
	struct fw_writer *w = fw_writer_open(path, -1, err, sizeof err);
	CHECK(w != NULL);
	CHECK_EQ_INT(fw_fbreport_pack(R, w, err, sizeof err), 0);
	CHECK_EQ_INT(fw_writer_close(w, err, sizeof err), 0);

	struct fw_reader *r = fw_reader_open(path, NULL, err, sizeof err);
	struct fw_rec rec;
	int n = 0, pairs = 0, arms = 0;
	while (r && fw_reader_next(r, &rec) == 1) {
		struct fw_mpv v;
		const char *s;
		size_t len;
		uint64_t u;
		CHECK(fw_mp_get(rec.v, "report", &v) == 1 && fw_mp_str(v, &s, &len) == 0);
		if (n++ == 0) {
			CHECK(len == 7 && !memcmp(s, "summary", 7));
			CHECK(fw_mp_get(rec.v, "trajectories", &v) == 1 && fw_mp_uint(v, &u) == 0 &&
			      u == 4);
			CHECK(fw_mp_get(rec.v, "down_internal", &v) == 1 && fw_mp_uint(v, &u) == 0 &&
			      u == 1);
		}
		arms += len == 3 && !memcmp(s, "arm", 3);
		if (len == 4 && !memcmp(s, "pair", 4)) {
			pairs++;
			CHECK(fw_mp_get(rec.v, "verdict", &v) == 1 && fw_mp_str(v, &s, &len) == 0 &&
			      len == 4 && !memcmp(s, "none", 4));
		}
	}
	CHECK_EQ_INT(n, 1 + 1 + 3 + 3);
	CHECK_EQ_INT(arms, 3);
	CHECK_EQ_INT(pairs, 3);
	fw_reader_close(r);
	unlink(path);
	fw_fbreport_free(R);
}

TEST_MAIN()
