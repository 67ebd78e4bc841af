/*
 * test_kernels.c — every CPU kernel against finite differences of its own
 * forward (in double), the OpenBLAS matmul against the plain loops, the
 * cached attention against the full one, AdamW against its formula, the
 * thread pool called from one thread and from several at once.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "test.h"

static uint64_t rng = 88172645463325252ull;

static float frand(void) /* uniform in [-1, 1) */
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static float *rnd(long n, float s)
{
	float *x = malloc(sizeof(float) * n);

	for (long i = 0; i < n; i++)
		x[i] = frand() * s;
	return x;
}

static float *zeros(long n)
{
	return calloc(n, sizeof(float));
}

static double wsum(const float *x, const float *r, long n)
{
	double s = 0;

	for (long i = 0; i < n; i++)
		s += (double)x[i] * r[i];
	return s;
}

/* Compares the analytic gradient g of L = loss(ctx) with respect to x (n)
 * to central differences; returns the number of mismatches. */
static int fdcheck(const char *what, float *x, const float *g, long n,
		   double (*loss)(void *), void *ctx, float h, double tol)
{
	int bad = 0;
	long step = n > 64 ? n / 61 : 1;

	for (long i = 0; i < n; i += step) {
		float x0 = x[i];
		x[i] = x0 + h;
		double lp = loss(ctx);
		x[i] = x0 - h;
		double lm = loss(ctx);
		x[i] = x0;
		double fd = (lp - lm) / (2.0 * h);
		double sc = fabs(fd) > 1 ? fabs(fd) : 1;

		if (fabs(fd - g[i]) > tol * sc) {
			if (bad < 5)
				printf("# %s[%ld]: analytic %.6g, numeric %.6g\n",
				       what, i, g[i], fd);
			bad++;
		}
	}
	return bad;
}

/* ---- matmul -------------------------------------------------------------- */

/* max |a - b| / max |b|: the error relative to the tensor's scale (an
 * element near zero has no meaningful relative error of its own).
 *
 * The bound the callers use, 1e-5, is for the same dot products summed in
 * another order (OpenBLAS's blocked FMA kernels, which differ per CPU,
 * against plain loops).  For n terms of random sign and size s a running
 * sum's rounding errors add up to about u s n / sqrt(2) (u = 2^-24), while
 * the largest of the results is about 4 s sqrt(n): relative to it,
 * u sqrt(n) / 5, 7.5e-7 for the longest sum here (n = 999).  1e-5 is 13
 * times that; measured: at most 8.6e-7 with the Haswell, SkylakeX, Zen,
 * Sandybridge, Prescott and Cooperlake kernels and 1 to 3 threads. */
static double maxrel(const char *what, const float *a, const float *b, long n)
{
	double d = 0, s = 0;

	for (long i = 0; i < n; i++) {
		d = fmax(d, fabs((double)a[i] - b[i]));
		s = fmax(s, fabs((double)b[i]));
	}
	if (d / fmax(s, 1e-30) > 1e-5)
		printf("# %s: relative error %g\n", what, d / fmax(s, 1e-30));
	return d / fmax(s, 1e-30);
}

static void blas_vs_plain(int M, int K, int N)
{
	float *x = rnd(M * K, 1), *w = rnd(N * K, 1), *b = rnd(N, 1);
	float *o1 = zeros(M * N), *o2 = zeros(M * N), *d = rnd(M * N, 1);
	float *dx1 = rnd(M * K, 1), *dx2 = malloc(sizeof(float) * M * K);
	float *dw1 = zeros(N * K), *dw2 = zeros(N * K);
	float *db1 = zeros(N), *db2 = zeros(N);
	int bad = 0;

	memcpy(dx2, dx1, sizeof(float) * M * K);
	fw_matmul_fwd(o1, x, w, b, M, K, N);
	fw_matmul_fwd_ref(o2, x, w, b, M, K, N);
	bad += maxrel("out", o1, o2, (long)M * N) > 1e-5;
	fw_matmul_bwd(dx1, dw1, db1, d, x, w, M, K, N);
	fw_matmul_bwd_ref(dx2, dw2, db2, d, x, w, M, K, N);
	bad += maxrel("dinp", dx1, dx2, (long)M * K) > 1e-5;
	bad += maxrel("dw", dw1, dw2, (long)N * K) > 1e-5;
	bad += maxrel("dbias", db1, db2, N) > 1e-5;
	fw_matmul_fwd(o1, x, w, NULL, M, K, N);
	fw_matmul_fwd_ref(o2, x, w, NULL, M, K, N);
	bad += maxrel("out without bias", o1, o2, (long)M * N) > 1e-5;
	CHECK_EQ_INT(bad, 0);
	free(x); free(w); free(b); free(o1); free(o2); free(d);
	free(dx1); free(dx2); free(dw1); free(dw2); free(db1); free(db2);
}

/* ---- the pool from several threads at once ---------------------------------- */

enum { CALLERS = 6, CALLS = 40 };

struct caller {
	pthread_barrier_t *start;
	int id, threads;       /* threads: what fw_kernels_threads() said */
	long *out;             /* the current call's n entries */
	long tag;              /* what the current call writes */
	int bad;               /* a chunk outside [0, n), a wrong entry */
	int n;
};

/* Adds tag + i to each entry of the chunk; each entry must see one add. */
static void add_tagged(void *p, int i0, int i1)
{
	struct caller *c = p;

	if (i0 < 0 || i1 > c->n || i0 > i1) {
		__atomic_store_n(&c->bad, 1, __ATOMIC_RELAXED);
		return;
	}
	for (int i = i0; i < i1; i++)
		c->out[i] += c->tag + i;
}

static void *call_pool(void *p)
{
	struct caller *c = p;

	pthread_barrier_wait(c->start);
	/* every thread asks at once, the first ask being the lazy default */
	c->threads = fw_kernels_threads();
	for (int k = 0; k < CALLS; k++) {
		c->n = 1 + (c->id * 131 + k * 17) % 3000;
		c->tag = (long)c->id * 100000 + k * 1000;
		memset(c->out, 0, sizeof(long) * 3000);
		fw_parallel_for(c->n, add_tagged, c);
		for (int i = 0; i < c->n; i++)
			if (c->out[i] != c->tag + i)
				c->bad = 1;
	}
	return NULL;
}

/* First in this file, so that these threads are the first of the process
 * to ask for the thread count and run kernels: $FW_THREADS (the online
 * CPUs when unset), set by whichever comes first, the same for all. */
TEST(thread_pool_serves_callers_of_several_threads_at_once)
{
	pthread_barrier_t start;
	pthread_t t[CALLERS];
	struct caller c[CALLERS];
	const char *e = getenv("FW_THREADS");
	int want = e ? atoi(e) : 0;

	pthread_barrier_init(&start, NULL, CALLERS);
	for (int i = 0; i < CALLERS; i++) {
		c[i] = (struct caller){ .start = &start, .id = i,
					.out = malloc(sizeof(long) * 3000) };
		CHECK(pthread_create(&t[i], NULL, call_pool, &c[i]) == 0);
	}
	for (int i = 0; i < CALLERS; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ_INT(c[i].bad, 0);
		CHECK_EQ_INT(c[i].threads, c[0].threads);
		free(c[i].out);
	}
	pthread_barrier_destroy(&start);
	CHECK(c[0].threads >= 1);
	if (want > 0 && want <= 128)
		CHECK_EQ_INT(c[0].threads, want);
	CHECK_EQ_INT(fw_kernels_threads(), c[0].threads);
}

TEST(matmul_blas_matches_plain_loops)
{
	blas_vs_plain(37, 53, 29);   /* one thread */
	blas_vs_plain(70, 96, 211);  /* split over the pool, ragged slices */
	blas_vs_plain(1, 300, 999);  /* one row, as in decoding */
}

/*
 * The packed few-row kernel against the plain loops.  Each of its outputs
 * is a running float32 sum of K products (FMA, one rounding a term) plus
 * the bias (one more rounding), so the standard bound holds element by
 * element: |out - exact| <= (K + 1) u (sum_k |x_k w_k| + |b|), u = 2^-24,
 * and the oracle (a double sum rounded to float) is within u |exact| of
 * the exact value: the check is (K + 2) u times that sum of magnitudes.
 * On the scale of the whole tensor the running sum is the same estimate
 * as above, so maxrel's 1e-5 holds as well.  The kernel's claim that a
 * row's bits do not depend on the other rows of the call or on the
 * threads is checked by bits: every row again alone, and the whole call
 * again with 3 threads.
 */
static int packed_vs_plain(int M, int K, int N)
{
	float *x = rnd((long)M * K, 1), *w = rnd((long)N * K, 1), *b = rnd(N, 1);
	float *wp = malloc(sizeof(float) * fw_matmul_pack_len(K, N));
	float *o1 = zeros((long)M * N), *o2 = zeros((long)M * N);
	float *o3 = zeros((long)M * N), *one = zeros(N);
	int bad = 0, threads = fw_kernels_threads();

	fw_matmul_pack(wp, w, K, N);
	for (int pass = 0; pass < 2; pass++) {
		const float *bias = pass ? NULL : b;

		fw_matmul_fwd_packed(o1, x, w, wp, bias, M, K, N);
		fw_matmul_fwd_ref(o2, x, w, bias, M, K, N);
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++) {
				double mag = bias ? fabs(bias[j]) : 0;

				for (int k = 0; k < K; k++)
					mag += fabs((double)x[(long)i * K + k] *
						    w[(long)j * K + k]);
				if (fabs((double)o1[(long)i * N + j] - o2[(long)i * N + j]) >
				    (K + 2) * 0x1p-24 * mag) {
					if (bad < 5)
						printf("# M %d K %d N %d: out[%d][%d] %.9g, plain %.9g\n",
						       M, K, N, i, j, o1[(long)i * N + j],
						       o2[(long)i * N + j]);
					bad++;
				}
			}
		bad += maxrel("packed out", o1, o2, (long)M * N) > 1e-5;
		for (int i = 0; i < M; i++) {
			fw_matmul_fwd_packed(one, x + (long)i * K, w, wp, bias, 1, K, N);
			bad += memcmp(one, o1 + (long)i * N, sizeof(float) * N) != 0;
		}
		fw_kernels_set_threads(threads == 3 ? 1 : 3);
		fw_matmul_fwd_packed(o3, x, w, wp, bias, M, K, N);
		fw_kernels_set_threads(threads);
		bad += memcmp(o3, o1, sizeof(float) * M * N) != 0;
	}
	free(x); free(w); free(b); free(wp); free(o1); free(o2); free(o3);
	free(one);
	return bad;
}

TEST(matmul_packed_matches_plain_loops)
{
	static const int Ms[] = { 1, 2, 3, 5, 8, 9, 13, 16, 17, 31, 64, 100 };
	static const int Ks[] = { 1, 7, 53, 301 };
	static const int Ns[] = { 1, 15, 47, 49, 97, 211, 1000 };

	if (!fw_matmul_pack_ok()) {
		printf("# no packed kernel here (no AVX-512F, or FW_MATMUL_PACK=0)\n");
		return;
	}
	for (size_t m = 0; m < sizeof(Ms) / sizeof(Ms[0]); m++)
		for (size_t k = 0; k < sizeof(Ks) / sizeof(Ks[0]); k++)
			for (size_t n = 0; n < sizeof(Ns) / sizeof(Ns[0]); n++)
				CHECK_EQ_INT(packed_vs_plain(Ms[m], Ks[k], Ns[n]), 0);
}

/* Without a packing, or beyond the packed kernel's rows, the same product
 * by sgemm. */
TEST(matmul_packed_falls_back_to_sgemm)
{
	int M = 300, K = 33, N = 50;
	float *x = rnd((long)M * K, 1), *w = rnd((long)N * K, 1), *b = rnd(N, 1);
	float *wp = malloc(sizeof(float) * fw_matmul_pack_len(K, N));
	float *o1 = zeros((long)M * N), *o2 = zeros((long)M * N);

	fw_matmul_pack(wp, w, K, N);
	fw_matmul_fwd_packed(o1, x, w, wp, b, M, K, N);
	fw_matmul_fwd(o2, x, w, b, M, K, N);
	CHECK(memcmp(o1, o2, sizeof(float) * M * N) == 0);
	fw_matmul_fwd_packed(o1, x, w, NULL, b, 5, K, N);
	fw_matmul_fwd(o2, x, w, b, 5, K, N);
	CHECK(memcmp(o1, o2, sizeof(float) * 5 * N) == 0);
	free(x); free(w); free(b); free(wp); free(o1); free(o2);
}

struct mm { float *x, *w, *b, *o, *r; int M, K, N; };

static double mm_loss(void *p)
{
	struct mm *c = p;

	fw_matmul_fwd(c->o, c->x, c->w, c->b, c->M, c->K, c->N);
	return wsum(c->o, c->r, (long)c->M * c->N);
}

TEST(matmul_gradients_match_finite_differences)
{
	struct mm c = { .M = 6, .K = 10, .N = 7 };
	c.x = rnd(60, 1); c.w = rnd(70, 1); c.b = rnd(7, 1);
	c.o = zeros(42); c.r = rnd(42, 1);
	float *dx = zeros(60), *dw = zeros(70), *db = zeros(7);

	fw_matmul_bwd(dx, dw, db, c.r, c.x, c.w, c.M, c.K, c.N);
	CHECK_EQ_INT(fdcheck("dx", c.x, dx, 60, mm_loss, &c, 1e-2f, 1e-3), 0);
	CHECK_EQ_INT(fdcheck("dw", c.w, dw, 70, mm_loss, &c, 1e-2f, 1e-3), 0);
	CHECK_EQ_INT(fdcheck("db", c.b, db, 7, mm_loss, &c, 1e-2f, 1e-3), 0);
	/* Backward accumulates: a second call doubles the gradient. */
	float before = dw[3];
	fw_matmul_bwd(NULL, dw, NULL, c.r, c.x, c.w, c.M, c.K, c.N);
	CHECK_NEAR(dw[3], 2 * before, 1e-5);
	free(c.x); free(c.w); free(c.b); free(c.o); free(c.r);
	free(dx); free(dw); free(db);
}

/* ---- embedding ----------------------------------------------------------- */

struct em { float *wte, *o, *r; int32_t *ids; int N, C; };

static double em_loss(void *p)
{
	struct em *c = p;

	fw_embed_fwd(c->o, c->ids, c->wte, c->N, c->C);
	return wsum(c->o, c->r, (long)c->N * c->C);
}

TEST(embedding_gradient_scatters_repeated_ids)
{
	int32_t ids[6] = { 3, 0, 3, 4, 1, 3 };
	struct em c = { .ids = ids, .N = 6, .C = 5 };
	c.wte = rnd(25, 1); c.o = zeros(30); c.r = rnd(30, 1);
	float *dw = zeros(25);

	em_loss(&c);
	CHECK(c.o[2 * 5 + 1] == c.wte[3 * 5 + 1]);
	fw_embed_bwd(dw, c.r, ids, c.N, c.C);
	CHECK_EQ_INT(fdcheck("dwte", c.wte, dw, 25, em_loss, &c, 1e-2f, 1e-4), 0);
	CHECK(dw[2 * 5] == 0);
	free(c.wte); free(c.o); free(c.r); free(dw);
}

/* ---- RMSNorm ------------------------------------------------------------- */

struct rn { float *x, *w, *o, *rs, *r; int N, C; };

static double rn_loss(void *p)
{
	struct rn *c = p;

	fw_rmsnorm_fwd(c->o, c->rs, c->x, c->w, c->N, c->C, 1e-6f);
	return wsum(c->o, c->r, (long)c->N * c->C);
}

TEST(rmsnorm_normalises_rows_and_gradients_match)
{
	struct rn c = { .N = 5, .C = 12 };
	c.x = rnd(60, 2); c.w = rnd(12, 1); c.o = zeros(60); c.rs = zeros(5);
	c.r = rnd(60, 1);
	float *one = malloc(sizeof(float) * 12), *dx = zeros(60), *dw = zeros(12);
	double ms = 0;

	for (int i = 0; i < 12; i++)
		one[i] = 1;
	fw_rmsnorm_fwd(c.o, c.rs, c.x, one, 5, 12, 1e-6f);
	for (int i = 12; i < 24; i++)
		ms += (double)c.o[i] * c.o[i];
	CHECK_NEAR(ms / 12, 1.0, 1e-5);
	rn_loss(&c);
	fw_rmsnorm_bwd(dx, dw, c.r, c.x, c.w, c.rs, c.N, c.C);
	CHECK_EQ_INT(fdcheck("dx", c.x, dx, 60, rn_loss, &c, 1e-3f, 1e-2), 0);
	CHECK_EQ_INT(fdcheck("dw", c.w, dw, 12, rn_loss, &c, 1e-3f, 1e-2), 0);
	free(c.x); free(c.w); free(c.o); free(c.rs); free(c.r);
	free(one); free(dx); free(dw);
}

/* ---- RoPE ------------------------------------------------------------------- */

struct rp { float *x, *y, *r, *cs, *sn; int32_t *pos; int N, nh, hd; };

static double rp_loss(void *p)
{
	struct rp *c = p;
	long n = (long)c->N * c->nh * c->hd;

	memcpy(c->y, c->x, sizeof(float) * n);
	fw_rope_fwd(c->y, c->pos, c->cs, c->sn, c->N, c->nh, c->hd);
	return wsum(c->y, c->r, n);
}

TEST(rope_is_a_rotation_and_its_gradient_matches)
{
	int32_t pos[4] = { 0, 1, 7, 3 };
	struct rp c = { .pos = pos, .N = 4, .nh = 3, .hd = 8 };
	long n = 4 * 3 * 8;
	c.x = rnd(n, 1); c.y = zeros(n); c.r = rnd(n, 1);
	c.cs = zeros(8 * 4); c.sn = zeros(8 * 4);
	fw_rope_table(c.cs, c.sn, 8, 8, 10000.0);
	CHECK_NEAR(c.cs[1 * 4 + 0], cos(1.0), 1e-6);
	CHECK_NEAR(c.sn[7 * 4 + 1], sin(7 * pow(10000.0, -2.0 / 8)), 1e-6);
	rp_loss(&c);
	/* Position 0 is the identity; every pair keeps its length. */
	CHECK(memcmp(c.y, c.x, sizeof(float) * 24) == 0);
	double a = (double)c.x[24 + 1] * c.x[24 + 1] + (double)c.x[24 + 5] * c.x[24 + 5];
	double b = (double)c.y[24 + 1] * c.y[24 + 1] + (double)c.y[24 + 5] * c.y[24 + 5];
	CHECK_NEAR(a, b, 1e-5);
	float *dx = malloc(sizeof(float) * n);
	memcpy(dx, c.r, sizeof(float) * n);
	fw_rope_bwd(dx, pos, c.cs, c.sn, c.N, c.nh, c.hd);
	CHECK_EQ_INT(fdcheck("dx", c.x, dx, n, rp_loss, &c, 1e-2f, 1e-3), 0);
	free(c.x); free(c.y); free(c.r); free(c.cs); free(c.sn); free(dx);
}

/* ---- attention ---------------------------------------------------------- */

struct at { float *q, *k, *v, *o, *att, *r; int B, T, nh, nkv, hd; };

static double at_loss(void *p)
{
	struct at *c = p;

	fw_attn_fwd(c->o, c->att, c->q, c->k, c->v, c->B, c->T, c->nh, c->nkv,
		    c->hd);
	return wsum(c->o, c->r, (long)c->B * c->T * c->nh * c->hd);
}

/* The sampler's exp: the vector version gives the plain C one's bits, and
 * both are within 2 float ulps of exp (measured over every float in
 * [-86, 0]: 1.01 ulps at most; here every 97th, about 11.5 million).  The
 * ulp of a float t is 2^(ilogb(t) - 23). */
TEST(sampler_exp_is_exact_to_its_reference_and_within_two_ulps)
{
	enum { B = 1 << 16 };
	float *x = malloc(sizeof(float) * B), *a = malloc(sizeof(float) * B),
	      *b = malloc(sizeof(float) * B), m86 = -86.0f;
	uint32_t hi;
	long differ = 0, over = 0;
	double worst = 0;

	memcpy(&hi, &m86, sizeof hi);
	for (uint64_t u = 0x80000000u; u <= hi;) {
		int k = 0;

		for (; k < B && u <= hi; k++, u += 97) {
			uint32_t v = (uint32_t)u;

			memcpy(&x[k], &v, sizeof v);
		}
		fw_exp_shift(a, x, k, 0.0f, 1.0f);
		fw_exp_shift_ref(b, x, k, 0.0f, 1.0f);
		for (int j = 0; j < k; j++) {
			double t = exp((double)x[j]), e = fabs(a[j] - t) / ldexp(1.0, ilogb(t) - 23);

			differ += memcmp(&a[j], &b[j], sizeof(float)) != 0;
			over += e > 2.0;
			if (e > worst)
				worst = e;
		}
	}
	printf("# exp: worst %.3f ulps\n", worst);
	CHECK(differ == 0);
	CHECK(over == 0);
	/* shifted and tempered, every tail length; below -86, -inf and NaN
	 * give 0; the shift itself gives exactly 1 */
	for (int n = 1; n <= 40; n++) {
		float *y = rnd(n, 30.0f);
		static const float temps[] = { 1.0f, 0.7f, 1.3f, 0.05f };

		y[n / 2] = -INFINITY;
		if (n > 3)
			y[1] = NAN;
		for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++) {
			memset(a, 0xff, sizeof(float) * (n + 16));
			memset(b, 0xff, sizeof(float) * (n + 16));
			fw_exp_shift(a, y, n, 30.0f, temps[t]);
			fw_exp_shift_ref(b, y, n, 30.0f, temps[t]);
			CHECK(memcmp(a, b, sizeof(float) * (n + 16)) == 0);
			CHECK(a[n / 2] == 0.0f);
			if (n > 3)
				CHECK(a[1] == 0.0f);
		}
		free(y);
	}
	x[0] = 3.5f;
	x[1] = 3.5f - 86.5f;
	fw_exp_shift(a, x, 2, 3.5f, 1.0f);
	CHECK(a[0] == 1.0f && a[1] == 0.0f);
	free(x); free(a); free(b);
}

TEST(sampler_argmax_and_block_sums_match_their_references)
{
	for (int n = 1; n <= 1100; n += n < 40 ? 1 : 97) {
		float *y = rnd(n, 4.0f), m1, m2;

		/* a NaN, a tie with a later element, and a row of one value */
		y[n - 1] = NAN;
		if (n > 5)
			y[n - 2] = y[n / 3] = 9.0f;
		CHECK_EQ_INT(fw_logits_argmax(y, n, &m1), fw_logits_argmax_ref(y, n, &m2));
		CHECK(m1 == m2);
		if (n > 5)
			CHECK_EQ_INT(fw_logits_argmax(y, n, &m1), n / 3);
		y[n - 1] = 1.0f;
		for (int j = 0; j < n; j++)
			y[j] = fabsf(y[j]) * (j % 7 ? 1.0f : 1e-9f);
		if (n <= FW_SUM_BLOCK) {
			double s1 = fw_sum_block(y, n), s2 = fw_sum_block_ref(y, n);

			CHECK(memcmp(&s1, &s2, sizeof s1) == 0);
		}
		double s = 0;
		for (int j = 0; j < n; j++)
			s += y[j];
		/* n <= 1100 terms of at most 4, each rounding at most 2^-53 of
		 * a partial sum below 4400 */
		CHECK_NEAR(fw_sum_blocks(y, n), s, 1100 * 4400 * 0x1p-52);
		for (int j = 0; j < n; j++)
			y[j] = NAN;
		CHECK_EQ_INT(fw_logits_argmax(y, n, &m1), 0);
		CHECK(m1 == -INFINITY);
		free(y);
	}
}

TEST(attention_is_causal_with_gqa_and_gradients_match)
{
	struct at c = { .B = 2, .T = 6, .nh = 4, .nkv = 2, .hd = 8 };
	long nq = 2 * 6 * 4 * 8, nk = 2 * 6 * 2 * 8;
	c.q = rnd(nq, 1); c.k = rnd(nk, 1); c.v = rnd(nk, 1); c.o = zeros(nq);
	c.att = zeros(2 * 4 * 36); c.r = rnd(nq, 1);
	float *dq = zeros(nq), *dk = zeros(nk), *dv = zeros(nk);
	float *scr = zeros(2 * 4 * 36);

	at_loss(&c);
	/* First position attends only to itself: output = its value row. */
	CHECK_NEAR(c.o[0 * 8 + 3], c.v[3], 1e-6);         /* b0 t0 h0 <- g0 */
	CHECK_NEAR(c.o[3 * 8 + 3], c.v[1 * 8 + 3], 1e-6); /* b0 t0 h3 <- g1 */
	double rowsum = 0;
	for (int j = 0; j < 6; j++)
		rowsum += c.att[(1 * 6 + 4) * 6 + j];
	CHECK_NEAR(rowsum, 1.0, 1e-6);
	CHECK(c.att[(1 * 6 + 4) * 6 + 5] == 0);
	/* Changing the last key leaves every earlier output as it was. */
	float *o0 = malloc(sizeof(float) * nq);
	memcpy(o0, c.o, sizeof(float) * nq);
	c.k[(5 * 2 + 1) * 8 + 2] += 1.0f;
	at_loss(&c);
	CHECK(memcmp(o0, c.o, sizeof(float) * 5 * 4 * 8) == 0);
	CHECK(memcmp(o0 + 5 * 32, c.o + 5 * 32, sizeof(float) * 32) != 0);
	c.k[(5 * 2 + 1) * 8 + 2] -= 1.0f;

	at_loss(&c);
	fw_attn_bwd(dq, dk, dv, scr, c.r, c.att, c.q, c.k, c.v, c.B, c.T, c.nh,
		    c.nkv, c.hd);
	CHECK_EQ_INT(fdcheck("dq", c.q, dq, nq, at_loss, &c, 1e-2f, 5e-3), 0);
	CHECK_EQ_INT(fdcheck("dk", c.k, dk, nk, at_loss, &c, 1e-2f, 5e-3), 0);
	CHECK_EQ_INT(fdcheck("dv", c.v, dv, nk, at_loss, &c, 1e-2f, 5e-3), 0);
	free(c.q); free(c.k); free(c.v); free(c.o); free(c.att); free(c.r);
	free(dq); free(dk); free(dv); free(scr); free(o0);
}

TEST(attention_sgemm_matches_plain_loops)
{
	int B = 2, T = 37, nh = 6, nkv = 2, hd = 16;
	long nq = (long)B * T * nh * hd, nk = (long)B * T * nkv * hd, na = (long)B * nh * T * T;
	float *q = rnd(nq, 1), *k = rnd(nk, 1), *v = rnd(nk, 1), *d = rnd(nq, 1);
	float *o1 = zeros(nq), *o2 = zeros(nq), *a1 = zeros(na), *a2 = zeros(na);
	float *s1 = zeros(na), *s2 = zeros(na);
	float *dq1 = rnd(nq, 1), *dk1 = rnd(nk, 1), *dv1 = rnd(nk, 1);
	float *dq2 = malloc(sizeof(float) * nq), *dk2 = malloc(sizeof(float) * nk),
	      *dv2 = malloc(sizeof(float) * nk);

	memcpy(dq2, dq1, sizeof(float) * nq);
	memcpy(dk2, dk1, sizeof(float) * nk);
	memcpy(dv2, dv1, sizeof(float) * nk);
	fw_attn_fwd(o1, a1, q, k, v, B, T, nh, nkv, hd);
	fw_attn_fwd_ref(o2, a2, q, k, v, B, T, nh, nkv, hd);
	CHECK(maxrel("out", o1, o2, nq) < 1e-5);
	CHECK(maxrel("att", a1, a2, na) < 1e-5);
	fw_attn_bwd(dq1, dk1, dv1, s1, d, a1, q, k, v, B, T, nh, nkv, hd);
	fw_attn_bwd_ref(dq2, dk2, dv2, s2, d, a2, q, k, v, B, T, nh, nkv, hd);
	CHECK(maxrel("dq", dq1, dq2, nq) < 1e-5);
	CHECK(maxrel("dk", dk1, dk2, nk) < 1e-5);
	CHECK(maxrel("dv", dv1, dv2, nk) < 1e-5);
	free(q); free(k); free(v); free(d); free(o1); free(o2); free(a1); free(a2);
	free(s1); free(s2); free(dq1); free(dk1); free(dv1); free(dq2); free(dk2); free(dv2);
}

static void cached_vs_full(int T, int pos0)
{
	int B = 3, nh = 6, nkv = 2, hd = 16, maxT = T + 3;
	long nq = (long)B * T * nh * hd;
	float *q = rnd(nq, 1), *k = rnd((long)B * T * nkv * hd, 1);
	float *v = rnd((long)B * T * nkv * hd, 1), *o = zeros(nq);
	float *att = zeros((long)B * nh * T * T);
	float *kc = zeros((long)B * maxT * nkv * hd), *vc = zeros((long)B * maxT * nkv * hd);
	int Tq = T - pos0;
	float *qn = zeros((long)B * Tq * nh * hd), *on = zeros((long)B * Tq * nh * hd);
	float *scr = zeros((long)B * Tq * nh * maxT);
	int32_t p0[3] = { pos0, pos0, pos0 };
	double err = 0;

	fw_attn_fwd(o, att, q, k, v, B, T, nh, nkv, hd);
	for (int b = 0; b < B; b++) {
		memcpy(kc + (long)b * maxT * nkv * hd, k + (long)b * T * nkv * hd,
		       sizeof(float) * T * nkv * hd);
		memcpy(vc + (long)b * maxT * nkv * hd, v + (long)b * T * nkv * hd,
		       sizeof(float) * T * nkv * hd);
		memcpy(qn + (long)b * Tq * nh * hd, q + ((long)b * T + pos0) * nh * hd,
		       sizeof(float) * Tq * nh * hd);
	}
	fw_attn_cached(on, scr, qn, kc, vc, B, Tq, pos0, maxT, nh, nkv, hd);
	for (int b = 0; b < B; b++)
		for (long i = 0; i < (long)Tq * nh * hd; i++) {
			double d = fabs(on[(long)b * Tq * nh * hd + i] -
					o[((long)b * T + pos0) * nh * hd + i]);
			if (d > err)
				err = d;
		}
	CHECK(err < 1e-6);
	/* Sequences of different lengths, one new row each: row b at
	 * position p0[b] matches the full forward there. */
	p0[0] = pos0;
	p0[1] = pos0 - 3;
	p0[2] = T - 1;
	for (int b = 0; b < B; b++)
		memcpy(qn + (long)b * nh * hd, q + ((long)b * T + p0[b]) * nh * hd,
		       sizeof(float) * nh * hd);
	fw_attn_cached_pos(on, scr, qn, kc, vc, p0, B, 1, maxT, nh, nkv, hd);
	err = 0;
	for (int b = 0; b < B; b++)
		for (long i = 0; i < (long)nh * hd; i++)
			err = fmax(err, fabs(on[(long)b * nh * hd + i] -
					     o[((long)b * T + p0[b]) * nh * hd + i]));
	CHECK(err < 1e-6);
	free(q); free(k); free(v); free(o); free(att); free(kc); free(vc);
	free(qn); free(on); free(scr);
}

TEST(cached_attention_equals_full_attention)
{
	cached_vs_full(9, 5);   /* 4 new rows: per-row loops */
	cached_vs_full(40, 7);  /* 33 new rows: per-head sgemm */
}

/* ---- SwiGLU ----------------------------------------------------------------- */

struct sg { float *g, *u, *o, *r; long n; };

static double sg_loss(void *p)
{
	struct sg *c = p;

	fw_swiglu_fwd(c->o, c->g, c->u, c->n);
	return wsum(c->o, c->r, c->n);
}

TEST(swiglu_value_and_gradients)
{
	struct sg c = { .n = 50 };
	c.g = rnd(50, 3); c.u = rnd(50, 1); c.o = zeros(50); c.r = rnd(50, 1);
	float *dg = zeros(50), *du = zeros(50);

	sg_loss(&c);
	CHECK_NEAR(c.o[7], c.g[7] / (1 + exp(-c.g[7])) * c.u[7], 1e-6);
	fw_swiglu_bwd(dg, du, c.r, c.g, c.u, c.n);
	CHECK_EQ_INT(fdcheck("dgate", c.g, dg, 50, sg_loss, &c, 1e-2f, 1e-3), 0);
	CHECK_EQ_INT(fdcheck("dup", c.u, du, 50, sg_loss, &c, 1e-2f, 1e-3), 0);
	/* The threaded path gives the same numbers as the serial one. */
	long n = 100003;
	float *g = rnd(n, 3), *u = rnd(n, 1), *o = zeros(n);
	fw_swiglu_fwd(o, g, u, n);
	CHECK_NEAR(o[n - 1], g[n - 1] / (1 + exp(-g[n - 1])) * u[n - 1], 1e-6);
	CHECK_NEAR(o[n / 2], g[n / 2] / (1 + exp(-g[n / 2])) * u[n / 2], 1e-6);
	free(c.g); free(c.u); free(c.o); free(c.r); free(dg); free(du);
	free(g); free(u); free(o);
}

/* ---- cross-entropy ------------------------------------------------------ */

struct xe { float *x, *lp, *lse, *w; int32_t *t; int N, V; };

static double xe_loss(void *p)
{
	struct xe *c = p;

	fw_xent_fwd(c->lp, c->lse, c->x, c->t, c->N, c->V);
	return wsum(c->lp, c->w, c->N);
}

TEST(xent_logprobs_weights_and_ignored_rows)
{
	int32_t t[5] = { 2, -1, 0, 6, 6 };
	struct xe c = { .t = t, .N = 5, .V = 7 };
	c.x = rnd(35, 4); c.lp = zeros(5); c.lse = zeros(5); c.w = rnd(5, 1);
	float *dx = zeros(35);
	double s = 0;

	xe_loss(&c);
	for (int j = 0; j < 7; j++)
		s += exp(c.x[j]);
	CHECK_NEAR(c.lp[0], c.x[2] - log(s), 1e-6);
	CHECK(c.lp[1] == 0);
	fw_xent_bwd(dx, c.x, c.lse, t, c.w, c.N, c.V);
	CHECK_EQ_INT(fdcheck("dlogits", c.x, dx, 35, xe_loss, &c, 1e-2f, 1e-3), 0);
	for (int j = 0; j < 7; j++)
		CHECK(dx[7 + j] == 0);
	/* In place: dlogits may overwrite logits. */
	float *y = malloc(sizeof(float) * 35);
	xe_loss(&c);
	memset(dx, 0, sizeof(float) * 35);
	fw_xent_bwd(dx, c.x, c.lse, t, c.w, c.N, c.V);
	memcpy(y, c.x, sizeof(float) * 35);
	fw_xent_bwd(y, y, c.lse, t, c.w, c.N, c.V);
	CHECK(memcmp(y, dx, sizeof(float) * 35) == 0);
	free(c.x); free(c.lp); free(c.lse); free(c.w); free(dx); free(y);
}

/* ---- AdamW ------------------------------------------------------------------ */

TEST(adamw_follows_the_pytorch_update)
{
	float p[3] = { 0.5f, -1.0f, 2.0f }, m[3] = { 0 }, v[3] = { 0 };
	double P[3] = { 0.5, -1.0, 2.0 }, Mm[3] = { 0 }, Vv[3] = { 0 };
	float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;

	for (int step = 1; step <= 3; step++) {
		float g[3] = { 0.1f * step, -0.3f, 0.02f / step };

		fw_adamw(p, m, v, g, 3, lr, b1, b2, eps, wd, step);
		for (int i = 0; i < 3; i++) {
			P[i] *= 1 - (double)lr * wd;
			Mm[i] = b1 * Mm[i] + (1 - b1) * (double)g[i];
			Vv[i] = b2 * Vv[i] + (1 - b2) * (double)g[i] * g[i];
			double mh = Mm[i] / (1 - pow(b1, step));
			double vh = Vv[i] / (1 - pow(b2, step));
			P[i] -= lr * mh / (sqrt(vh) + eps);
		}
	}
	for (int i = 0; i < 3; i++)
		CHECK_NEAR(p[i], P[i], 1e-6);
	CHECK_NEAR(fw_sumsq(p, 3), P[0] * P[0] + P[1] * P[1] + P[2] * P[2], 1e-6);
}

static void count_hits(void *p, int i0, int i1)
{
	int *h = *(int **)p;

	for (int i = i0; i < i1; i++)
		__atomic_fetch_add(&h[i], 1, __ATOMIC_RELAXED);
}

TEST(thread_pool_covers_every_index_once)
{
	static int hits[1000];
	struct { int *h; } ctx = { hits };

	memset(hits, 0, sizeof(hits));
	fw_kernels_set_threads(3);
	fw_parallel_for(1000, count_hits, &ctx);
	fw_parallel_for(1000, count_hits, &ctx);
	int ok = 1;
	for (int i = 0; i < 1000; i++)
		ok &= hits[i] == 2;
	CHECK(ok);
	CHECK_EQ_INT(fw_kernels_threads(), 3);
	fw_kernels_set_threads(0);
}

TEST_MAIN()
