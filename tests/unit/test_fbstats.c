/*
 * test_fbstats.c — fw_stats against values computed independently with
 * SciPy (tests/ref/fbstats.py prints them) and against the normal
 * approximation for the bootstrap.
 */
#include <math.h>

#include "test.h"
#include "fw_fbcat.h"
#include "fw_json.h"
#include "fw_stats.h"

TEST(wilson_matches_scipy)
{
	static const struct { uint64_t k, n; double lo, hi; } ref[] = {
		{0, 10, 0.000000000000, 0.277532799863},
		{3, 10, 0.107791267406, 0.603221852539},
		{10, 10, 0.722467200137, 1.000000000000},
		{81, 263, 0.255288519878, 0.366209576983},
		{1, 1000, 0.000176546371, 0.005642558598},
		{500, 1000, 0.469069600368, 0.530930399632},
	};
	for (size_t i = 0; i < sizeof ref / sizeof *ref; i++) {
		double lo, hi;
		CHECK_EQ_INT(fw_wilson(ref[i].k, ref[i].n, FW_Z95, &lo, &hi), 0);
		CHECK_NEAR(lo, ref[i].lo, 1e-10);
		CHECK_NEAR(hi, ref[i].hi, 1e-10);
	}
}

TEST(wilson_rejects_empty_and_impossible_counts)
{
	double lo = -1, hi = -1;
	CHECK_EQ_INT(fw_wilson(0, 0, FW_Z95, &lo, &hi), -1);
	CHECK(lo == 0 && hi == 1);
	CHECK_EQ_INT(fw_wilson(5, 4, FW_Z95, &lo, &hi), -1);
}

TEST(normal_quantiles_match_scipy)
{
	static const double ref[][2] = {
		{1e-10, -6.36134090240406}, {0.001, -3.09023230616781},
		{0.025, -1.95996398454005}, {0.2, -0.841621233572914},
		{0.5, 0},                   {0.8, 0.841621233572914},
		{0.975, 1.95996398454005},  {0.999999, 4.75342430881709},
	};
	for (size_t i = 0; i < sizeof ref / sizeof *ref; i++)
		CHECK_NEAR(fw_norm_ppf(ref[i][0]), ref[i][1], 1e-12);
	CHECK_NEAR(fw_norm_ppf(0.975), FW_Z95, 1e-14);
	CHECK(isinf(fw_norm_ppf(0)) && fw_norm_ppf(0) < 0);
	CHECK(isnan(fw_norm_ppf(1.5)));
	CHECK_NEAR(fw_norm_cdf(fw_norm_ppf(0.3)), 0.3, 1e-14);
}

TEST(binomial_cdf_matches_scipy)
{
	CHECK_NEAR(fw_binom_cdf(3, 10, 0.5), 0.171875, 1e-13);
	CHECK_NEAR(fw_binom_cdf(0, 20, 0.5), 9.5367431640625e-07, 1e-13);
	CHECK_NEAR(fw_binom_cdf(7, 30, 0.3), 0.281376708186881, 1e-12);
	CHECK_NEAR(fw_binom_cdf(480, 1000, 0.5), 0.10872414660207, 1e-11);
	CHECK_NEAR(fw_binom_cdf(15, 100, 0.1), 0.960109472888916, 1e-12);
	CHECK(fw_binom_cdf(10, 10, 0.3) == 1);
}

TEST(mcnemar_exact_matches_scipy)
{
	CHECK(fw_mcnemar_exact(0, 0) == 1);
	CHECK_NEAR(fw_mcnemar_exact(0, 5), 0.0625, 1e-14);
	CHECK_NEAR(fw_mcnemar_exact(3, 12), 0.03515625, 1e-14);
	CHECK_NEAR(fw_mcnemar_exact(12, 3), 0.03515625, 1e-14);
	CHECK(fw_mcnemar_exact(10, 10) == 1);
	CHECK_NEAR(fw_mcnemar_exact(25, 40), 0.08168153394154, 1e-11);
	CHECK_NEAR(fw_mcnemar_exact(1, 30) / 2.98023223876953e-08, 1, 1e-10);
}

TEST(n_needed_matches_the_textbook_formula)
{
	/* Fleiss, two-sided alpha 0.05, power 0.8, no continuity correction:
	 * 0.5 vs 0.6 needs 388 per group. */
	CHECK_EQ_INT(fw_n_needed(0.5, 0.6, 0.05, 0.8), 388);
	CHECK_EQ_INT(fw_n_needed(0.3, 0.35, 0.05, 0.8), 1377);
	CHECK_EQ_INT(fw_n_needed(0.9, 0.8, 0.05, 0.8), 199);
	CHECK_EQ_INT(fw_n_needed(0.1, 0.5, 0.05, 0.8), 20);
	CHECK_EQ_INT(fw_n_needed(0.4, 0.4, 0.05, 0.8), 0);
}

/* n users voting once in each arm (arm A up with pa, arm B with pb). */
static size_t one_vote_users(struct fw_cluster *c, size_t n, double pa, double pb)
{
	for (size_t i = 0; i < n; i++) {
		c[i] = (struct fw_cluster){{0, 0}, {0, 0}};
		int arm = i % 2;
		size_t k = i / 2;
		double p = arm ? pb : pa;
		c[i].n[arm] = 1;
		c[i].up[arm] = (double)k < p * (double)(n / 2);
	}
	return n;
}

static double work[4000];
static struct fw_cluster cl[4000];

TEST(bootstrap_with_independent_votes_agrees_with_the_normal_interval)
{
	/* 1000 votes per arm, 50% vs 60%: the normal interval of the
	 * difference is 0.1 +- 1.96 sqrt(.25/1000 + .24/1000) = 0.1 +- 0.0434. */
	size_t n = one_vote_users(cl, 2000, 0.5, 0.6);
	double lo, hi;
	CHECK_EQ_INT(fw_boot_diff(cl, n, 7, 4000, 0.95, work, &lo, &hi), 0);
	double half = FW_Z95 * sqrt(0.25 / 1000 + 0.24 / 1000);
	CHECK(fabs(lo - (0.1 - half)) < 0.006);
	CHECK(fabs(hi - (0.1 + half)) < 0.006);
}

TEST(bootstrap_widens_when_a_users_votes_are_correlated)
{
	/* Same rates, but each of 200 users casts 10 identical votes: the
	 * effective sample is 10 times smaller, so the interval is about
	 * sqrt(10) times wider than the naive one over 2000 votes. */
	size_t n = one_vote_users(cl, 200, 0.5, 0.6);
	for (size_t i = 0; i < n; i++)
		for (int a = 0; a < 2; a++)
			cl[i].n[a] *= 10, cl[i].up[a] *= 10;
	double lo, hi;
	CHECK_EQ_INT(fw_boot_diff(cl, n, 7, 4000, 0.95, work, &lo, &hi), 0);
	double naive = 2 * FW_Z95 * sqrt(0.25 / 1000 + 0.24 / 1000);
	double ratio = (hi - lo) / naive;
	CHECK(ratio > 2.6 && ratio < 3.8);
	CHECK(lo < 0); /* 100 users per arm cannot tell 50% from 60% */
}

TEST(bootstrap_is_reproducible_for_a_seed)
{
	size_t n = one_vote_users(cl, 300, 0.4, 0.7);
	double lo1, hi1, lo2, hi2, lo3, hi3;
	CHECK_EQ_INT(fw_boot_diff(cl, n, 42, 1000, 0.95, work, &lo1, &hi1), 0);
	CHECK_EQ_INT(fw_boot_diff(cl, n, 42, 1000, 0.95, work, &lo2, &hi2), 0);
	CHECK_EQ_INT(fw_boot_diff(cl, n, 43, 1000, 0.95, work, &lo3, &hi3), 0);
	CHECK(lo1 == lo2 && hi1 == hi2);
	CHECK(lo1 != lo3 || hi1 != hi3);
	CHECK(lo1 > 0.1 && hi1 < 0.5);
}

TEST(bootstrap_needs_votes_in_both_arms)
{
	double lo, hi;
	struct fw_cluster only_a[2] = {{{1, 0}, {1, 0}}, {{0, 0}, {1, 0}}};
	CHECK_EQ_INT(fw_boot_diff(only_a, 2, 1, 100, 0.95, work, &lo, &hi), -1);
	CHECK_EQ_INT(fw_boot_diff(only_a, 0, 1, 100, 0.95, work, &lo, &hi), -1);
}

/* ---- failure categories ------------------------------------------------------ */

/* The rule bits of a trajectory given as a JSON array of turns. */
static unsigned cats(const char *turns_json)
{
	static struct fw_fbcat *c;
	char err[128], json[8192];
	struct fw_buf b = {0};
	struct fw_json_err e;
	size_t used;
	if (!c && !(c = fw_fbcat_new(err, sizeof err)))
		return 1u << 31;
	snprintf(json, sizeof json, "{\"kind\":\"traj\",\"turns\":%s}", turns_json);
	if (fw_json_to_mp(&b, json, strlen(json), 1, &used, &e) != 1) {
		printf("# bad test JSON: %s\n", e.msg);
		return 1u << 30;
	}
	unsigned r = fw_fbcat_classify(c, (struct fw_mpv){b.p, b.n});
	fw_buf_free(&b);
	return r;
}

#define BIT(r) (1u << FW_FBCAT_##r)
#define U(t) "{\"role\":\"user\",\"text\":\"" t "\"}"
#define A(t) "{\"role\":\"assistant\",\"text\":\"" t "\"}"
#define AC(t, name, args) "{\"role\":\"assistant\",\"text\":\"" t "\",\"calls\":[{\"name\":\"" name "\",\"args\":\"" args "\"}]}"
#define R(t) "{\"role\":\"tool\",\"text\":\"" t "\"}"
#define RE(t) "{\"role\":\"tool\",\"text\":\"" t "\",\"is_error\":true}"

TEST(each_rule_fires_on_its_case)
{
	CHECK_EQ_INT(cats("[" U("fix") "," AC("", "read", "a.py") "," RE("nope") "," A("done") "]"),
		     BIT(TOOL_ERROR));
	CHECK_EQ_INT(cats("[" U("fix") "," AC("", "bash", "x") "," R("bash: pytets: command not found") "]"),
		     BIT(TOOL_ERROR));
	CHECK_EQ_INT(cats("[" U("fix") "," AC("", "bash", "pytest") "," R("== 2 failed, 3 passed in 1s ==") "," A("ok") "]"),
		     BIT(FAILING));
	CHECK_EQ_INT(cats("[" U("fix") "," A("I'm sorry, but I can't help with that.") "]"), BIT(REFUSAL));
	CHECK_EQ_INT(cats("[" U("fix") "," AC("", "bash", "make") "," R("Command timed out after 60 s") "]"),
		     BIT(TIMEOUT));
	CHECK_EQ_INT(cats("[" U("fix") "," AC("again", "bash", "make") "," R("x") "," AC("again", "bash", "make") ","
			  R("x") "," AC("and again", "bash", "make") "," R("x") "]"),
		     BIT(LOOP));
	CHECK_EQ_INT(cats("[" U("fix") "," A("Done.") "," U("No, that is wrong.") "," A("Fixed.") "]"),
		     BIT(CORRECTION));
}

TEST(look_alikes_do_not_fire)
{
	/* tests failed, then passed: the last run counts */
	CHECK_EQ_INT(cats("[" U("fix") "," AC("", "bash", "pytest") "," R("1 failed, 2 passed") "," AC("", "bash", "pytest") ","
			  R("3 passed in 0.1s") "," A("All green.") "]"),
		     0);
	/* a follow-up question is not a correction; a correction before any answer is not either */
	CHECK_EQ_INT(cats("[" U("fix") "," A("Done.") "," U("Thanks! Can you add a test too?") "]"), 0);
	CHECK_EQ_INT(cats("[" U("No, wrong, undo everything") "," A("Done.") "]"), 0);
	/* an apology that is not the final answer */
	CHECK_EQ_INT(cats("[" U("fix") "," A("I'm sorry, I misread.") "," A("Fixed it now.") "]"), 0);
	/* twice is not a loop */
	CHECK_EQ_INT(cats("[" U("fix") "," AC("", "bash", "make") "," R("x") "," AC("", "bash", "make") "," R("x") "]"), 0);
	CHECK_EQ_INT(cats("[]"), 0);
	CHECK_EQ_INT(cats("\"not turns\""), 0);
}

TEST(very_long_by_total_text_or_final_answer)
{
	static char big[FW_FBCAT_LONG_ANSWER + 200], turns[sizeof big + 100];
	memset(big, 'x', FW_FBCAT_LONG_ANSWER + 1);
	big[FW_FBCAT_LONG_ANSWER + 1] = 0;
	snprintf(turns, sizeof turns, "[" U("fix") ",{\"role\":\"assistant\",\"text\":\"%s\"}]", big);
	CHECK_EQ_INT(cats(turns), BIT(LONG));
	big[FW_FBCAT_LONG_ANSWER - 1] = 0;
	snprintf(turns, sizeof turns, "[" U("fix") ",{\"role\":\"assistant\",\"text\":\"%s\"}]", big);
	CHECK_EQ_INT(cats(turns), 0);
	CHECK_STR(fw_fbcat_name(FW_FBCAT_LOOP), "loop/repetition");
	CHECK(fw_fbcat_name(FW_FBCAT_NRULES) == NULL);
}

/* n users, each with one vote in arm 0 (up when a_up) and one in arm 1. */
static size_t ab_votes(struct fw_ab_vote *v, uint32_t n, int a_up, int b_up)
{
	size_t k = 0;
	for (uint32_t u = 0; u < n; u++) {
		v[k++] = (struct fw_ab_vote){ u, 1, b_up };
		v[k++] = (struct fw_ab_vote){ u, 0, a_up };
	}
	return k;
}

static int ab_verdict(uint32_t users, int a_up, int b_up, struct fw_ab_pair *p)
{
	struct fw_ab_vote v[64];
	struct fw_ab_arm as[2];
	struct fw_cluster clu[32];
	static double wk[2000];
	size_t nv = ab_votes(v, users, a_up, b_up);

	fw_ab_sort(v, nv, NULL, 0);
	fw_ab_arms(as, 2, v, nv);
	*p = (struct fw_ab_pair){ .a = 0, .b = 1 };
	fw_ab_compare(p, v, nv, as, NULL, 0, 7, 2000, 0.05, clu, wk);
	return p->verdict;
}

TEST(ab_verdict_needs_the_interval_clear_of_zero_and_ten_users)
{
	struct fw_ab_pair p;
	/* every user prefers b: each resample's difference is exactly 1 */
	CHECK_EQ_INT(ab_verdict(12, 0, 1, &p), 1);
	CHECK(p.ok && p.lo == 1 && p.hi == 1 && p.users == 12 && !p.paired);
	CHECK_EQ_INT(ab_verdict(12, 1, 0, &p), -1);
	/* the same votes from nine users are no basis for a verdict */
	CHECK_EQ_INT(ab_verdict(FW_AB_MIN_USERS - 1, 0, 1, &p), 0);
	CHECK(p.ok && p.lo == 1);
	/* no difference: every resample's difference is 0 */
	CHECK_EQ_INT(ab_verdict(12, 1, 1, &p), 0);
	CHECK(p.lo == 0 && p.hi == 0 && p.need == 0);
}

TEST(ab_arms_count_each_user_once_per_arm)
{
	struct fw_ab_vote v[] = { { 2, 0, 1 }, { 1, 0, 0 }, { 1, 0, 1 }, { 1, 1, 1 }, { 3, 1, 0 } };
	struct fw_ab_arm as[2];
	fw_ab_sort(v, 5, NULL, 0);
	CHECK(v[0].user == 1 && v[0].arm == 0 && v[2].arm == 1 && v[4].user == 3);
	fw_ab_arms(as, 2, v, 5);
	CHECK(as[0].votes == 3 && as[0].up == 2 && as[0].users == 2);
	CHECK(as[1].votes == 2 && as[1].up == 1 && as[1].users == 2);
	double lo, hi;
	fw_wilson(2, 3, FW_Z95, &lo, &hi);
	CHECK(as[0].lo == lo && as[0].hi == hi);
}

TEST(ab_paired_items_take_the_majority_and_mcnemar)
{
	/* items 0-2: a's votes mostly up, b's down; item 3: both up; item 4:
	 * a tie in a, so no outcome; item 5 answered by b only */
	struct fw_ab_item it[] = {
		{ 0, 0, 2, 1 }, { 0, 1, 0, 1 }, { 1, 0, 1, 0 }, { 1, 1, 0, 2 }, { 2, 1, 1, 3 },
		{ 2, 0, 1, 0 }, { 3, 0, 1, 0 }, { 3, 1, 1, 0 }, { 4, 0, 1, 1 }, { 4, 1, 1, 0 },
		{ 5, 1, 1, 0 },
	};
	struct fw_ab_vote v[24];
	struct fw_ab_arm as[2];
	struct fw_cluster clu[12];
	static double wk[2000];
	size_t nv = ab_votes(v, 12, 1, 0);
	fw_ab_sort(v, nv, it, sizeof it / sizeof *it);
	CHECK(it[0].key == 0 && it[0].arm == 0 && it[4].key == 2 && it[4].arm == 0);
	fw_ab_arms(as, 2, v, nv);
	struct fw_ab_pair p = { .a = 0, .b = 1 };
	fw_ab_compare(&p, v, nv, as, it, sizeof it / sizeof *it, 7, 2000, 0.05, clu, wk);
	CHECK(p.paired && p.npairs == 4 && p.a_only == 3 && p.b_only == 0);
	/* two-sided exact binomial: 2 * (1/2)^3 */
	CHECK_NEAR(p.p_mcnemar, 0.25, 1e-12);
	CHECK_EQ_INT(p.verdict, -1);
}

TEST(ab_family_level_and_resamples)
{
	CHECK_NEAR(fw_ab_alpha(0), 0.05, 0);
	CHECK_NEAR(fw_ab_alpha(4), 0.0125, 1e-15);
	CHECK_EQ_INT(fw_ab_resamples(0.05), 2000);
	/* 20 / (0.05 / 10) = 4000, each tail holding 10 resamples */
	unsigned r = fw_ab_resamples(fw_ab_alpha(10));
	CHECK(r >= 4000 && r <= 4001);
}

TEST_MAIN()
