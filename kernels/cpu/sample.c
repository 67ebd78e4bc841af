/*
 * sample.c — the sampler's passes over one row of logits: the largest
 * logit, the exponentials of the shifted (and tempered) logits, and their
 * sum in blocks, each with an AVX-512 version chosen at run time.
 *
 * A decoding step samples every sequence of the batch over the whole
 * vocabulary; with libm's exp and a running sum in one double these passes
 * took about 350 µs per token at V = 32000, more than the step's matrix
 * products gave each row.  The vector versions do the same float and
 * double operations in the same order as the plain C ones (fmaf is fused
 * in C as in the vector unit; each sum lane adds its own elements in
 * order), so the two give the same bits: a token drawn does not depend on
 * the CPU that drew it.  The *_ref functions are the plain C ones, the
 * oracle build/tests/test_kernels compares the others with.
 *
 * Build: part of libflywheel.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_VEC 1
#include <immintrin.h>
#endif

#define LANES 16

/* e^x for x in [-86, 0]: x = n ln2 + r, |r| <= ln2 / 2, e^r by Cephes's
 * degree-5 polynomial in the form 1 + r + r^2 P(r), times 2^n by adding n
 * to the exponent's bits (n >= -124 there, so the result is normal).
 * Below -86 (e^-86 < 5e-38 of the largest term) and for NaN: 0. */
#define EXP_MIN -86.0f
#define LOG2E 1.44269504088896341f
#define LN2_HI 0.693359375f
#define LN2_LO -2.12194440e-4f
#define P0 1.9875691500e-4f
#define P1 1.3981999507e-3f
#define P2 8.3334519073e-3f
#define P3 4.1665795894e-2f
#define P4 1.6666665459e-1f
#define P5 5.0000001201e-1f

static float exp_one(float x)
{
	float n, r, r2, p, y;
	uint32_t b;

	if (!(x >= EXP_MIN))
		return 0.0f;
	n = nearbyintf(x * LOG2E);
	r = fmaf(n, -LN2_HI, x);
	r = fmaf(n, -LN2_LO, r);
	r2 = r * r;
	p = fmaf(P0, r, P1);
	p = fmaf(p, r, P2);
	p = fmaf(p, r, P3);
	p = fmaf(p, r, P4);
	p = fmaf(p, r, P5);
	y = fmaf(p, r2, r) + 1.0f;
	memcpy(&b, &y, sizeof b);
	b += (uint32_t)(int32_t)n << 23;
	memcpy(&y, &b, sizeof y);
	return y;
}

int fw_logits_argmax_ref(const float *x, int n, float *mx)
{
	float m = -INFINITY;
	int best = 0;

	for (int j = 0; j < n; j++)
		if (x[j] > m) {
			m = x[j];
			best = j;
		}
	*mx = m;
	return best;
}

void fw_exp_shift_ref(float *out, const float *x, int n, float shift, float temp)
{
	for (int j = 0; j < n; j++)
		out[j] = exp_one(temp == 1.0f ? x[j] - shift : (x[j] - shift) / temp);
}

double fw_sum_block_ref(const float *e, int n)
{
	double acc[LANES] = { 0 }, s = 0;

	for (int j = 0; j < n; j++)
		acc[j % LANES] += (double)e[j];
	for (int l = 0; l < LANES; l++)
		s += acc[l];
	return s;
}

#ifdef HAVE_VEC
static int vec_ok(void)
{
	static int ok = -1;
	int v = __atomic_load_n(&ok, __ATOMIC_RELAXED);

	if (v < 0) {
		__builtin_cpu_init();
		v = __builtin_cpu_supports("avx512f") != 0;
		/* threads that race here all store the same value */
		__atomic_store_n(&ok, v, __ATOMIC_RELAXED);
	}
	return v;
}

static inline __mmask16 tail(int n)
{
	return n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
}

static __attribute__((target("avx512f")))
int argmax_vec(const float *x, int n, float *mx)
{
	__m512 m = _mm512_set1_ps(-INFINITY);
	float v;

	for (int j = 0; j < n; j += 16) {
		__m512 a = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail(n - j), x + j);

		/* max_ps gives its second operand when either is NaN: a NaN
		 * logit is passed over, as the plain loop's > passes it */
		m = _mm512_max_ps(a, m);
	}
	v = _mm512_reduce_max_ps(m);
	*mx = v;
	if (v == -INFINITY)
		return 0;
	for (int j = 0; j < n; j += 16) {
		__mmask16 mk = tail(n - j);
		__mmask16 eq = _mm512_mask_cmp_ps_mask(mk, _mm512_maskz_loadu_ps(mk, x + j),
						       _mm512_set1_ps(v), _CMP_EQ_OQ);

		if (eq)
			return j + __builtin_ctz(eq);
	}
	return 0;
}

static __attribute__((target("avx512f")))
void exp_vec(float *out, const float *x, int n, float shift, float temp)
{
	const __m512 sh = _mm512_set1_ps(shift), t = _mm512_set1_ps(temp);
	int div = temp != 1.0f;

	for (int j = 0; j < n; j += 16) {
		__mmask16 mk = tail(n - j);
		__m512 a = _mm512_sub_ps(_mm512_maskz_loadu_ps(mk, x + j), sh), nn, r, r2, p, y;
		__mmask16 live;

		if (div)
			a = _mm512_div_ps(a, t);
		live = _mm512_cmp_ps_mask(a, _mm512_set1_ps(EXP_MIN), _CMP_GE_OQ);
		nn = _mm512_roundscale_ps(_mm512_mul_ps(a, _mm512_set1_ps(LOG2E)),
					  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		r = _mm512_fmadd_ps(nn, _mm512_set1_ps(-LN2_HI), a);
		r = _mm512_fmadd_ps(nn, _mm512_set1_ps(-LN2_LO), r);
		r2 = _mm512_mul_ps(r, r);
		p = _mm512_fmadd_ps(_mm512_set1_ps(P0), r, _mm512_set1_ps(P1));
		p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P2));
		p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P3));
		p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P4));
		p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P5));
		y = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), _mm512_set1_ps(1.0f));
		y = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(y),
							 _mm512_slli_epi32(_mm512_cvtps_epi32(nn), 23)));
		_mm512_mask_storeu_ps(out + j, mk, _mm512_maskz_mov_ps(live, y));
	}
}

static __attribute__((target("avx512f")))
double sum_vec(const float *e, int n)
{
	__m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
	double acc[LANES], s = 0;

	/* lanes 0-7 in lo, 8-15 in hi; a lane past n adds +0, which leaves
	 * its sum as it was */
	for (int j = 0; j < n; j += 16) {
		__m512 a = _mm512_maskz_loadu_ps(tail(n - j), e + j);

		lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(a)));
		hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(
					       _mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))));
	}
	_mm512_storeu_pd(acc, lo);
	_mm512_storeu_pd(acc + 8, hi);
	for (int l = 0; l < LANES; l++)
		s += acc[l];
	return s;
}
#endif

int fw_logits_argmax(const float *x, int n, float *mx)
{
#ifdef HAVE_VEC
	if (vec_ok())
		return argmax_vec(x, n, mx);
#endif
	return fw_logits_argmax_ref(x, n, mx);
}

void fw_exp_shift(float *out, const float *x, int n, float shift, float temp)
{
#ifdef HAVE_VEC
	if (vec_ok()) {
		exp_vec(out, x, n, shift, temp);
		return;
	}
#endif
	fw_exp_shift_ref(out, x, n, shift, temp);
}

double fw_sum_block(const float *e, int n)
{
#ifdef HAVE_VEC
	if (vec_ok())
		return sum_vec(e, n);
#endif
	return fw_sum_block_ref(e, n);
}

double fw_sum_blocks(const float *e, int n)
{
	double s = 0;

	for (int b = 0; b < n; b += FW_SUM_BLOCK)
		s += fw_sum_block(e + b, n - b < FW_SUM_BLOCK ? n - b : FW_SUM_BLOCK);
	return s;
}
