/* test_tally.c — the tally test suite; `make test` prints TAP. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "tally.h"

T(sum_is_compensated)
{
	double x[10];
	for (int i = 0; i < 10; i++)
		x[i] = 0.1;
	/* plain left-to-right summation gives 0.9999999999999999 */
	EXPECT(tally_sum(x, 10) == 1.0);
	EXPECT(tally_sum(x, 0) == 0);
}

T(mean_of_small_array)
{
	double x[] = {1, 2, 3, 4};
	EXPECT(NEAR(tally_mean(x, 4), 2.5));
	EXPECT(tally_mean(x, 0) == 0);
}

T(variance_is_sample_variance)
{
	double x[] = {2, 4, 4, 4, 5, 5, 7, 9};
	EXPECT(NEAR(tally_variance(x, 8), 32.0 / 7.0));
	EXPECT(tally_variance(x, 1) == 0);
}

T(median_odd_and_even)
{
	double a[] = {5, 1, 3};
	double b[] = {4, 1, 3, 2};
	EXPECT(NEAR(tally_median(a, 3), 3));
	EXPECT(NEAR(tally_median(b, 4), 2.5));
}

T(min_and_max)
{
	double x[] = {3, -7, 12, 0};
	EXPECT(tally_min(x, 4) == -7);
	EXPECT(tally_max(x, 4) == 12);
}

T(argmax_first_of_ties)
{
	double x[] = {1, 9, 3, 9};
	EXPECT(tally_argmax(x, 4) == 1);
}

T(dot_product)
{
	double a[] = {1, 2, 3}, b[] = {4, -5, 6};
	EXPECT(NEAR(tally_dot(a, b, 3), 12));
}

T(cumulative_sum)
{
	double x[] = {1, 2, 3, 4}, out[4];
	tally_cumsum(out, x, 4);
	EXPECT(out[0] == 1 && out[1] == 3 && out[2] == 6 && out[3] == 10);
}

T(lerp_endpoints_and_middle)
{
	EXPECT(tally_lerp(2, 10, 0) == 2);
	EXPECT(tally_lerp(2, 10, 1) == 10);
	EXPECT(NEAR(tally_lerp(2, 10, 0.25), 4));
}

T(gcd_handles_signs)
{
	EXPECT(tally_gcd(84, 36) == 12);
	EXPECT(tally_gcd(-84, 36) == 12);
	EXPECT(tally_gcd(0, 5) == 5);
}

T(lcm_of_pairs)
{
	EXPECT(tally_lcm(4, 6) == 12);
	EXPECT(tally_lcm(0, 6) == 0);
	EXPECT(tally_lcm(-3, 5) == 15);
}

T(primes_below_thirty)
{
	int want[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29};
	int k = 0;
	for (long n = -3; n < 30; n++)
		if (tally_is_prime(n))
			EXPECT(k < 10 && want[k++] == n);
	EXPECT(k == 10);
}

T(strlcpy_truncates)
{
	char buf[6];
	EXPECT(tally_strlcpy(buf, "flywheel", sizeof buf) == 8);
	EXPECT(strcmp(buf, "flywh") == 0);
	EXPECT(tally_strlcpy(buf, "ok", sizeof buf) == 2 && strcmp(buf, "ok") == 0);
}

T(reverse_in_place)
{
	char s[] = "stressed";
	tally_reverse(s);
	EXPECT(strcmp(s, "desserts") == 0);
}

T(trim_both_ends)
{
	char s[] = " \t hello world \n";
	EXPECT(strcmp(tally_trim(s), "hello world") == 0);
}

T(count_char)
{
	EXPECT(tally_count_char("mississippi", 's') == 4);
	EXPECT(tally_count_char("", 's') == 0);
}

T(starts_with_prefix)
{
	EXPECT(tally_starts_with("flywheel", "fly"));
	EXPECT(!tally_starts_with("fly", "flywheel"));
}

T(ends_with_suffix)
{
	EXPECT(tally_ends_with("report.xml", ".xml"));
	EXPECT(!tally_ends_with("xml", "report.xml"));
}

T(to_upper_ascii)
{
	char s[] = "MixEd 42";
	tally_to_upper(s);
	EXPECT(strcmp(s, "MIXED 42") == 0);
}

T(parse_int_accepts_numbers)
{
	long v = 0;
	EXPECT(tally_parse_int("-1234", &v) == 0 && v == -1234);
}

T(parse_int_rejects_garbage)
{
	long v = 7;
	EXPECT(tally_parse_int("12ab", &v) == -1);
	EXPECT(tally_parse_int("", &v) == -1);
	EXPECT(tally_parse_int("99999999999999999999999", &v) == -1);
	EXPECT(v == 7);
}

T(split_count_fields)
{
	EXPECT(tally_split_count("a,b,,c", ',') == 4);
	EXPECT(tally_split_count("", ',') == 0);
}

T(fnv1a_known_values)
{
	EXPECT(tally_fnv1a("") == 2166136261u);
	EXPECT(tally_fnv1a("a") == 0xe40c292cu);
	EXPECT(tally_fnv1a("foobar") == 0xbf9cf968u);
}

T(popcount_of_words)
{
	EXPECT(tally_popcount(0) == 0);
	EXPECT(tally_popcount(0xffu) == 8);
	EXPECT(tally_popcount(UINT64_MAX) == 64);
}

T(is_pow2_edge_cases)
{
	EXPECT(!tally_is_pow2(0));
	EXPECT(tally_is_pow2(1));
	EXPECT(tally_is_pow2((uint64_t)1 << 40));
	EXPECT(!tally_is_pow2(12));
}

T(next_pow2_rounds_up)
{
	EXPECT(tally_next_pow2(0) == 1);
	EXPECT(tally_next_pow2(5) == 8);
	EXPECT(tally_next_pow2(64) == 64);
	EXPECT(tally_next_pow2(1000) == 1024);
}

T(rotl32_wraps)
{
	EXPECT(tally_rotl32(0x80000001u, 1) == 0x00000003u);
	EXPECT(tally_rotl32(0x12345678u, 0) == 0x12345678u);
	EXPECT(tally_rotl32(0x12345678u, 36) == 0x23456781u);
}

T(bswap32_reverses_bytes)
{
	EXPECT(tally_bswap32(0x11223344u) == 0x44332211u);
}

T(clz64_counts_leading_zeros)
{
	EXPECT(tally_clz64(0) == 64);
	EXPECT(tally_clz64(1) == 63);
	EXPECT(tally_clz64((uint64_t)1 << 63) == 0);
}

T(stats_pipeline_mean_of_cumsum)
{
	double x[] = {1, 1, 1, 1}, c[4];
	tally_cumsum(c, x, 4);
	EXPECT(NEAR(tally_mean(c, 4), 2.5));
	EXPECT(tally_argmax(c, 4) == 3);
}

T(text_pipeline_trim_then_parse)
{
	char s[] = "  42 \n";
	long v = 0;
	EXPECT(tally_parse_int(tally_trim(s), &v) == 0 && v == 42);
}

T(hash_of_upper_differs)
{
	char s[] = "key";
	uint32_t h = tally_fnv1a(s);
	tally_to_upper(s);
	EXPECT(tally_fnv1a(s) != h);
}

RUN_ALL()
