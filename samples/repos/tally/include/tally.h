/* tally.h — small numeric and text helpers: statistics, strings, bits. */
#ifndef TALLY_H
#define TALLY_H

#include <stddef.h>
#include <stdint.h>

/* stats.c — every array is n doubles; n == 0 returns 0 unless noted. */
double tally_sum(const double *x, size_t n);
double tally_mean(const double *x, size_t n);
double tally_variance(const double *x, size_t n);   /* sample variance, n-1 */
double tally_median(double *x, size_t n);           /* sorts x in place */
double tally_min(const double *x, size_t n);
double tally_max(const double *x, size_t n);
size_t tally_argmax(const double *x, size_t n);
double tally_dot(const double *a, const double *b, size_t n);
void   tally_cumsum(double *out, const double *x, size_t n);
double tally_lerp(double a, double b, double t);
long   tally_gcd(long a, long b);
long   tally_lcm(long a, long b);
int    tally_is_prime(long n);

/* text.c — strings are NUL-terminated; functions writing to buf never
 * write more than cap bytes and always terminate when cap > 0. */
size_t tally_strlcpy(char *buf, const char *src, size_t cap);
void   tally_reverse(char *s);
char  *tally_trim(char *s);                          /* in place, returns s+k */
size_t tally_count_char(const char *s, char c);
int    tally_starts_with(const char *s, const char *prefix);
int    tally_ends_with(const char *s, const char *suffix);
void   tally_to_upper(char *s);
int    tally_parse_int(const char *s, long *out);    /* 0 ok, -1 bad */
size_t tally_split_count(const char *s, char sep);
uint32_t tally_fnv1a(const char *s);

/* bits.c */
int      tally_popcount(uint64_t x);
int      tally_is_pow2(uint64_t x);
uint64_t tally_next_pow2(uint64_t x);
uint32_t tally_rotl32(uint32_t x, int r);
uint32_t tally_bswap32(uint32_t x);
int      tally_clz64(uint64_t x);                   /* 64 for x == 0 */

#endif
