/* bits.c — bit twiddling without compiler builtins, portable C99. */
#include <stdlib.h>

#include "tally.h"

int tally_popcount(uint64_t x)
{
	int k = 0;
	while (x) {
		x &= x - 1;
		k++;
	}
	return k;
}

int tally_is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

static uint64_t smear_right(uint64_t x)
{
	x |= x >> 1;
	x |= x >> 2;
	x |= x >> 4;
	x |= x >> 8;
	x |= x >> 16;
	x |= x >> 32;
	return x;
}

uint64_t tally_next_pow2(uint64_t x)
{
	if (x <= 1)
		return 1;
	return smear_right(x - 1) + 1;
}

uint32_t tally_rotl32(uint32_t x, int r)
{
	r &= 31;
	return r ? (x << r) | (x >> (32 - r)) : x;
}

uint32_t tally_bswap32(uint32_t x)
{
	return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}

int tally_clz64(uint64_t x)
{
	if (x == 0)
		return 64;
	int n = 0;
	for (uint64_t bit = (uint64_t)1 << 63; !(x & bit); bit >>= 1)
		n++;
	return n;
}
