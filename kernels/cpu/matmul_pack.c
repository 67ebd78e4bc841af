/*
 * matmul_pack.c — the forward linear layer for a few rows (decoding steps),
 * over weights packed once into column panels, with an AVX-512 kernel.
 *
 * sgemm packs (copies) its weight slice on every call; for a decoding step
 * of 16 rows that copy costs about as much as the arithmetic.  Here the
 * copy is made once, by the caller, and every step reads the panels as
 * they lie.  The kernel is compiled for AVX-512F alone (function
 * attributes, so the rest of the build is unchanged) and chosen at run
 * time; where the CPU lacks it, or FW_MATMUL_PACK=0 is set, the callers
 * keep the row-major weights and fw_matmul_fwd.
 *
 * Build: part of libflywheel.  Test: build/tests/test_kernels compares it
 * with fw_matmul_fwd_ref over odd shapes; tests/bench/matmul-pack times it
 * against sgemm.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_PACK 1
#include <immintrin.h>
#endif

/* Panel width (columns) and the rows one tile computes: a tile keeps
 * MR x 3 accumulators, 24 of the 32 zmm registers. */
#define NR 48
#define MR 8
/* the most rows fw_matmul_fwd_packed runs packed */
#define PACK_ROWS 256

long fw_matmul_pack_len(int K, int N)
{
	return (long)(N + NR - 1) / NR * NR * K;
}

/* Panel p holds, for k = 0 .. K-1, the NR floats w[p*NR + j][k],
 * j = 0 .. NR-1, contiguous (zero past N). */
void fw_matmul_pack(float *wp, const float *w, int K, int N)
{
	int np = (N + NR - 1) / NR;

	for (int p = 0; p < np; p++) {
		float *d = wp + (long)p * NR * K;

		for (int j = 0; j < NR; j++) {
			int n = p * NR + j;

			for (int k = 0; k < K; k++)
				d[(long)k * NR + j] = n < N ? w[(long)n * K + k] : 0.0f;
		}
	}
}

int fw_matmul_pack_ok(void)
{
	static int ok = -1;
	int v = __atomic_load_n(&ok, __ATOMIC_RELAXED);

	if (v < 0) {
		const char *e = getenv("FW_MATMUL_PACK");

		v = 0;
#ifdef HAVE_PACK
		__builtin_cpu_init();
		v = __builtin_cpu_supports("avx512f") != 0;
#endif
		v = v && !(e && !strcmp(e, "0"));
		/* threads that race here all store the same value */
		__atomic_store_n(&ok, v, __ATOMIC_RELAXED);
	}
	return v;
}

#ifdef HAVE_PACK
/*
 * out[r][0:nc] += sum over k of x[r][k] * panel[k][0:nc], r < mr, for one
 * panel.  The sum runs over k in order from zero, then adds to out: the
 * bits do not depend on the thread split or on the other rows.
 */
static inline __attribute__((always_inline, target("avx512f")))
void tile(float *out, long ldo, const float *x, long ldx, const float *p,
	  int K, int mr, int nc)
{
	__m512 acc[MR][3];

	/* Unrolled whole (mr is a constant here) so the accumulators live in
	 * registers, not in the array. */
#pragma GCC unroll 8
	for (int r = 0; r < mr; r++)
#pragma GCC unroll 3
		for (int v = 0; v < 3; v++)
			acc[r][v] = _mm512_setzero_ps();
	for (int k = 0; k < K; k++) {
		__m512 b0 = _mm512_loadu_ps(p + (long)k * NR);
		__m512 b1 = _mm512_loadu_ps(p + (long)k * NR + 16);
		__m512 b2 = _mm512_loadu_ps(p + (long)k * NR + 32);

#pragma GCC unroll 8
		for (int r = 0; r < mr; r++) {
			__m512 a = _mm512_set1_ps(x[r * ldx + k]);

			acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
			acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
			acc[r][2] = _mm512_fmadd_ps(a, b2, acc[r][2]);
		}
	}
#pragma GCC unroll 3
	for (int v = 0; v < 3; v++) {
		int n = nc - 16 * v;
		__mmask16 mk = n >= 16 ? 0xffff : n <= 0 ? 0 :
			       (__mmask16)((1u << n) - 1);

#pragma GCC unroll 8
		for (int r = 0; r < mr; r++) {
			float *o = out + r * ldo + 16 * v;
			__m512 s = _mm512_maskz_loadu_ps(mk, o);

			_mm512_mask_storeu_ps(o, mk, _mm512_add_ps(s, acc[r][v]));
		}
	}
}

static __attribute__((target("avx512f")))
void tile_rows(float *out, long ldo, const float *x, long ldx, const float *p,
	       int K, int mr, int nc)
{
	switch (mr) {
	case 8: tile(out, ldo, x, ldx, p, K, 8, nc); break;
	case 7: tile(out, ldo, x, ldx, p, K, 7, nc); break;
	case 6: tile(out, ldo, x, ldx, p, K, 6, nc); break;
	case 5: tile(out, ldo, x, ldx, p, K, 5, nc); break;
	case 4: tile(out, ldo, x, ldx, p, K, 4, nc); break;
	case 3: tile(out, ldo, x, ldx, p, K, 3, nc); break;
	case 2: tile(out, ldo, x, ldx, p, K, 2, nc); break;
	case 1: tile(out, ldo, x, ldx, p, K, 1, nc); break;
	}
}
#endif

struct pk {
	float *out;
	const float *x, *wp;
	int M, K, N;
};

/* Panels p0 .. p1-1, every row: rows in blocks of at most MR, sizes
 * balanced, the panel's block loop innermost so the panel stays in cache
 * while each row block reads it. */
static void pk_part(void *ctx, int p0, int p1)
{
#ifdef HAVE_PACK
	struct pk *c = ctx;
	int nb = (c->M + MR - 1) / MR;

	for (int p = p0; p < p1; p++) {
		const float *panel = c->wp + (long)p * NR * c->K;
		int nc = c->N - p * NR < NR ? c->N - p * NR : NR;

		for (int b = 0, r0 = 0; b < nb; b++) {
			int r1 = (int)((long)c->M * (b + 1) / nb);

			tile_rows(c->out + (long)r0 * c->N + p * NR, c->N,
				  c->x + (long)r0 * c->K, c->K, panel, c->K,
				  r1 - r0, nc);
			r0 = r1;
		}
	}
#endif
}

void fw_matmul_fwd_packed(float *out, const float *inp, const float *w,
			  const float *wp, const float *bias, int M, int K,
			  int N)
{
	struct pk c = { out, inp, wp, M, K, N };
	int np = (N + NR - 1) / NR, parts = fw_kernels_threads();

	/* Beyond PACK_ROWS sgemm's packing is paid over enough rows, and the
	 * inputs of every row block would no longer stay in cache. */
	if (!wp || M > PACK_ROWS || !fw_matmul_pack_ok()) {
		fw_matmul_fwd(out, inp, w, bias, M, K, N);
		return;
	}
	for (int i = 0; i < M; i++)
		if (bias)
			memcpy(out + (long)i * N, bias, sizeof(float) * N);
		else
			memset(out + (long)i * N, 0, sizeof(float) * N);
	if ((long)M * N * K < (1L << 16) || np < 2)
		parts = 1;
	if (parts == 1)
		pk_part(&c, 0, np);
	else
		fw_parallel_for(np, pk_part, &c);
}
