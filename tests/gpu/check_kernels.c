/*
 * check_kernels.c — every CUDA kernel of kernels_cuda.h, forward and
 * backward, against the C oracle of kernels.h on random inputs (the plain
 * loops, fw_*_ref, where kernels.h also has a BLAS version), plus the
 * kernels only the GPU has: bf16 products, flash-style attention and the
 * per-sequence cache attention.  Whole models on the device are
 * check_model.c's: fw_model itself runs there.
 *
 * Output: one line per check, "ok" or "FAIL", its name and shape, the
 * largest difference found and the tolerance it had to meet, then a
 * summary line.  A check passes when every element satisfies
 * |gpu - cpu| <= atol + rtol * |cpu| (no NaN, no Inf where the CPU has
 * none).  Gradients are accumulated onto random values, so "+=" is
 * checked too.
 *
 * Exit status: 0 all checks pass, 1 a mismatch or a CUDA error, 77 no CUDA
 * device (skipped: nothing was checked), 2 usage.
 *
 * Build: make CUDA=1 build/gpu/check_kernels (needs nvcc, not a GPU), or
 * make gpu-emu (the kernels emulated on the CPU).  Run: tests/gpu/check.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_model.h"
#include "kernels.h"
#include "kernels_cuda.h"

static const char *prog = "check_kernels";
static int nfail, npass;

/* ---- random inputs -------------------------------------------------------- */

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static float frand(void) /* uniform in [-1, 1) */
{
	return (float)((next() >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(1);
	}
	return p;
}

static float *hrand(long n, float s)
{
	float *x = xmalloc(sizeof(float) * n);

	for (long i = 0; i < n; i++)
		x[i] = frand() * s;
	return x;
}

static float *hcopy(const float *x, long n)
{
	float *y = xmalloc(sizeof(float) * n);

	memcpy(y, x, sizeof(float) * n);
	return y;
}

static int32_t *hids(long n, int lo, int hi) /* uniform in [lo, hi) */
{
	int32_t *x = xmalloc(sizeof(int32_t) * n);

	for (long i = 0; i < n; i++)
		x[i] = lo + (int32_t)(next() % (uint64_t)(hi - lo));
	return x;
}

/* ---- device buffers ------------------------------------------------------------ */

/* Device buffers of the running check, freed together by dfree_all(). */
static void *dbufs[256];
static int ndbufs;

/* A CUDA call of the harness failed: the check cannot go on. */
static void die(const char *what)
{
	printf("FAIL %s: %s\n", what, fw_cuda_error());
	printf("%s: %d ok, %d failed, stopped at a CUDA error\n", prog, npass,
	       nfail + 1);
	exit(1);
}

static void *dalloc(size_t bytes)
{
	void *p = fw_cuda_malloc(bytes);

	if (!p)
		die("fw_cuda_malloc");
	if (ndbufs == (int)(sizeof(dbufs) / sizeof(dbufs[0])))
		abort();
	dbufs[ndbufs++] = p;
	return p;
}

/* A device copy of n bytes at h. */
static void *dput(const void *h, size_t bytes)
{
	void *d = dalloc(bytes);

	if (fw_cuda_memcpy_h2d(d, h, bytes))
		die("fw_cuda_memcpy_h2d");
	return d;
}

static float *dputf(const float *h, long n)
{
	return dput(h, sizeof(float) * n);
}

static int32_t *dputi(const int32_t *h, long n)
{
	return dput(h, sizeof(int32_t) * n);
}

static float *dzeros(long n)
{
	float *d = dalloc(sizeof(float) * n);

	if (fw_cuda_zero(d, sizeof(float) * n))
		die("fw_cuda_zero");
	return d;
}

/* A host copy of the n floats at device d (caller frees). */
static float *dget(const float *d, long n)
{
	float *h = xmalloc(sizeof(float) * n);

	if (fw_cuda_memcpy_d2h(h, d, sizeof(float) * n))
		die("fw_cuda_memcpy_d2h");
	return h;
}

static void dfree_all(void)
{
	while (ndbufs > 0)
		fw_cuda_free(dbufs[--ndbufs]);
}

/* Runs a kernel call; a failure is fatal for the whole run. */
#define K(call)                                                            \
	do {                                                               \
		if ((call) != 0)                                           \
			die(#call);                                        \
	} while (0)

/* ---- comparison -------------------------------------------------------------- */

/* The worst element of the running check, over every tensor compared. */
static struct {
	double ratio, maxabs;
	const char *what;
	long at;
	double got, want;
} cur;

static void cmp_begin(void)
{
	memset(&cur, 0, sizeof(cur));
}

/* Compares got with ref (n floats): ratio |got - ref| / (atol + rtol
 * |ref|), where 0 / 0 counts as 0 and a NaN or an Inf not in ref as
 * infinite. */
static void cmp(const char *what, const float *got, const float *ref, long n,
		double rtol, double atol)
{
	for (long i = 0; i < n; i++) {
		double d = fabs((double)got[i] - ref[i]), r;
		double lim = atol + rtol * fabs((double)ref[i]);

		if (got[i] == ref[i])
			r = 0, d = 0;
		else if (!isfinite(d))
			r = INFINITY;
		else
			r = lim > 0 ? d / lim : INFINITY;
		if (isfinite(d) && d > cur.maxabs)
			cur.maxabs = d;
		if (r > cur.ratio || (r == INFINITY && !cur.what)) {
			cur.ratio = r;
			cur.what = what;
			cur.at = i;
			cur.got = got[i];
			cur.want = ref[i];
		}
	}
}

/* Prints the verdict of the running check. */
static void verdict(const char *name, const char *shape, const char *tol)
{
	int ok = cur.ratio <= 1.0;

	printf("%-4s %-16s %-34s max|diff| %.1e  (tol %s)\n", ok ? "ok" : "FAIL",
	       name, shape, cur.maxabs, tol);
	if (!ok)
		printf("     worst: %s[%ld] = %.9g, cpu %.9g\n", cur.what, cur.at,
		       cur.got, cur.want);
	if (ok)
		npass++;
	else
		nfail++;
	dfree_all();
}

/* ---- the kernels, one check each ------------------------------------------- */

static void check_matmul(int M, int K, int N, int bias)
{
	char shape[64];
	float *x = hrand((long)M * K, 1), *w = hrand((long)N * K, 1);
	float *b = bias ? hrand(N, 1) : NULL, *dout = hrand((long)M * N, 1);
	float *dx0 = hrand((long)M * K, 1), *dw0 = hrand((long)N * K, 1);
	float *db0 = hrand(N, 1);
	float *out = xmalloc(sizeof(float) * M * N);
	float *dx = hcopy(dx0, (long)M * K), *dw = hcopy(dw0, (long)N * K);
	float *db = hcopy(db0, N);
	float *gx = dputf(x, (long)M * K), *gw = dputf(w, (long)N * K);
	float *gb = bias ? dputf(b, N) : NULL, *gout = dzeros((long)M * N);
	float *gdout = dputf(dout, (long)M * N);
	float *gdx = dputf(dx0, (long)M * K), *gdw = dputf(dw0, (long)N * K);
	float *gdb = dputf(db0, N), *h;

	snprintf(shape, sizeof(shape), "M=%d K=%d N=%d%s", M, K, N,
		 bias ? " bias" : "");
	fw_matmul_fwd_ref(out, x, w, b, M, K, N);
	K(fw_cuda_matmul_fwd(gout, gx, gw, gb, M, K, N));
	cmp_begin();
	h = dget(gout, (long)M * N);
	cmp("out", h, out, (long)M * N, 1e-4, 1e-5);
	free(h);
	verdict("matmul_fwd", shape, "1e-05 + 1e-04 rel");

	fw_matmul_bwd_ref(dx, dw, bias ? db : NULL, dout, x, w, M, K, N);
	/* Re-upload what verdict() freed. */
	gx = dputf(x, (long)M * K);
	gw = dputf(w, (long)N * K);
	gdout = dputf(dout, (long)M * N);
	gdx = dputf(dx0, (long)M * K);
	gdw = dputf(dw0, (long)N * K);
	gdb = dputf(db0, N);
	K(fw_cuda_matmul_bwd(gdx, gdw, bias ? gdb : NULL, gdout, gx, gw, M, K,
			     N));
	cmp_begin();
	h = dget(gdx, (long)M * K);
	cmp("dinp", h, dx, (long)M * K, 1e-4, 1e-5);
	free(h);
	h = dget(gdw, (long)N * K);
	cmp("dw", h, dw, (long)N * K, 1e-4, 1e-5);
	free(h);
	h = dget(gdb, N);
	cmp("dbias", h, db, N, 1e-4, 1e-5);
	free(h);
	verdict("matmul_bwd", shape, "1e-05 + 1e-04 rel");

	/* Each gradient alone, the others NULL. */
	memcpy(dx, dx0, sizeof(float) * M * K);
	fw_matmul_bwd_ref(dx, NULL, NULL, dout, x, w, M, K, N);
	gx = dputf(x, (long)M * K);
	gw = dputf(w, (long)N * K);
	gdout = dputf(dout, (long)M * N);
	gdx = dputf(dx0, (long)M * K);
	K(fw_cuda_matmul_bwd(gdx, NULL, NULL, gdout, gx, gw, M, K, N));
	cmp_begin();
	h = dget(gdx, (long)M * K);
	cmp("dinp", h, dx, (long)M * K, 1e-4, 1e-5);
	free(h);
	memcpy(dw, dw0, sizeof(float) * N * K);
	fw_matmul_bwd_ref(NULL, dw, NULL, dout, x, w, M, K, N);
	gdw = dputf(dw0, (long)N * K);
	K(fw_cuda_matmul_bwd(NULL, gdw, NULL, gdout, gx, gw, M, K, N));
	h = dget(gdw, (long)N * K);
	cmp("dw", h, dw, (long)N * K, 1e-4, 1e-5);
	free(h);
	verdict("matmul_bwd_part", shape, "1e-05 + 1e-04 rel");

	free(x), free(w), free(b), free(dout), free(dx0), free(dw0);
	free(db0), free(out), free(dx), free(dw), free(db);
}

static void check_embed(int N, int C, int V)
{
	char shape[64];
	int32_t *ids = hids(N, 0, V);
	float *wte = hrand((long)V * C, 1), *dout = hrand((long)N * C, 1);
	float *dwte0 = hrand((long)V * C, 1), *dwte = hcopy(dwte0, (long)V * C);
	float *out = xmalloc(sizeof(float) * N * C), *h;
	float *gout, *gw;
	int32_t *gids;

	/* Repeated ids, so the scatter of the backward adds up. */
	for (int i = 0; i < N; i += 3)
		ids[i] = ids[0];
	gout = dzeros((long)N * C);
	gw = dputf(wte, (long)V * C);
	gids = dputi(ids, N);
	snprintf(shape, sizeof(shape), "N=%d C=%d V=%d", N, C, V);
	fw_embed_fwd(out, ids, wte, N, C);
	K(fw_cuda_embed_fwd(gout, gids, gw, N, C));
	cmp_begin();
	h = dget(gout, (long)N * C);
	cmp("out", h, out, (long)N * C, 0, 0);
	free(h);
	verdict("embed_fwd", shape, "exact");

	float *gdout = dputf(dout, (long)N * C);
	float *gdw = dputf(dwte0, (long)V * C);

	gids = dputi(ids, N);
	fw_embed_bwd(dwte, dout, ids, N, C);
	K(fw_cuda_embed_bwd(gdw, gdout, gids, N, C));
	cmp_begin();
	h = dget(gdw, (long)V * C);
	cmp("dwte", h, dwte, (long)V * C, 0, 0);
	free(h);
	verdict("embed_bwd", shape, "exact: same order of sums");
	free(ids), free(wte), free(dout), free(dwte0), free(dwte), free(out);
}

static void check_rmsnorm(int N, int C)
{
	char shape[64];
	float *x = hrand((long)N * C, 2), *w = hrand(C, 1), *dout = hrand((long)N * C, 1);
	float *dx0 = hrand((long)N * C, 1), *dw0 = hrand(C, 1);
	float *out = xmalloc(sizeof(float) * N * C), *rs = xmalloc(sizeof(float) * N);
	float *dx = hcopy(dx0, (long)N * C), *dw = hcopy(dw0, C), *h;
	float eps = 1e-5f;

	snprintf(shape, sizeof(shape), "N=%d C=%d", N, C);
	fw_rmsnorm_fwd(out, rs, x, w, N, C, eps);

	float *gx = dputf(x, (long)N * C), *gw = dputf(w, C);
	float *gout = dzeros((long)N * C), *grs = dzeros(N);

	K(fw_cuda_rmsnorm_fwd(gout, grs, gx, gw, N, C, eps));
	cmp_begin();
	h = dget(gout, (long)N * C);
	cmp("out", h, out, (long)N * C, 1e-5, 1e-6);
	free(h);
	h = dget(grs, N);
	cmp("rstd", h, rs, N, 1e-5, 0);
	free(h);
	/* In place: out aliasing inp. */
	K(fw_cuda_rmsnorm_fwd(gx, grs, gx, gw, N, C, eps));
	h = dget(gx, (long)N * C);
	cmp("out(in place)", h, out, (long)N * C, 1e-5, 1e-6);
	free(h);
	verdict("rmsnorm_fwd", shape, "1e-06 + 1e-05 rel");

	fw_rmsnorm_bwd(dx, dw, dout, x, w, rs, N, C);
	gx = dputf(x, (long)N * C);
	gw = dputf(w, C);
	grs = dputf(rs, N);

	float *gdout = dputf(dout, (long)N * C), *gdx = dputf(dx0, (long)N * C);
	float *gdw = dputf(dw0, C);

	K(fw_cuda_rmsnorm_bwd(gdx, gdw, gdout, gx, gw, grs, N, C));
	cmp_begin();
	h = dget(gdx, (long)N * C);
	cmp("dinp", h, dx, (long)N * C, 1e-4, 1e-5);
	free(h);
	h = dget(gdw, C);
	cmp("dw", h, dw, C, 1e-4, 1e-5);
	free(h);
	verdict("rmsnorm_bwd", shape, "1e-05 + 1e-04 rel");
	free(x), free(w), free(dout), free(dx0), free(dw0), free(out), free(rs);
	free(dx), free(dw);
}

static void check_rope(int N, int nh, int hd, int maxT)
{
	char shape[64];
	int half = hd / 2;
	float *cs = xmalloc(sizeof(float) * maxT * half);
	float *sn = xmalloc(sizeof(float) * maxT * half);
	int32_t *pos = hids(N, 0, maxT);
	long n = (long)N * nh * hd;
	float *x = hrand(n, 1), *y = hcopy(x, n), *h;

	snprintf(shape, sizeof(shape), "N=%d nh=%d hd=%d", N, nh, hd);
	fw_rope_table(cs, sn, maxT, hd, 10000.0);

	float *gcs = dputf(cs, (long)maxT * half), *gsn = dputf(sn, (long)maxT * half);
	int32_t *gpos = dputi(pos, N);
	float *gx = dputf(x, n);

	fw_rope_fwd(y, pos, cs, sn, N, nh, hd);
	K(fw_cuda_rope_fwd(gx, gpos, gcs, gsn, N, nh, hd));
	cmp_begin();
	h = dget(gx, n);
	cmp("x", h, y, n, 1e-5, 1e-6);
	free(h);
	verdict("rope_fwd", shape, "1e-06 + 1e-05 rel");

	gcs = dputf(cs, (long)maxT * half);
	gsn = dputf(sn, (long)maxT * half);
	gpos = dputi(pos, N);
	gx = dputf(x, n);
	memcpy(y, x, sizeof(float) * n);
	fw_rope_bwd(y, pos, cs, sn, N, nh, hd);
	K(fw_cuda_rope_bwd(gx, gpos, gcs, gsn, N, nh, hd));
	cmp_begin();
	h = dget(gx, n);
	cmp("dx", h, y, n, 1e-5, 1e-6);
	free(h);
	verdict("rope_bwd", shape, "1e-06 + 1e-05 rel");
	free(cs), free(sn), free(pos), free(x), free(y);
}

static void check_attn(int B, int T, int nh, int nkv, int hd)
{
	char shape[64];
	long nq = (long)B * T * nh * hd, nk = (long)B * T * nkv * hd;
	long na = (long)B * nh * T * T;
	float *q = hrand(nq, 1), *k = hrand(nk, 1), *v = hrand(nk, 1);
	float *out = xmalloc(sizeof(float) * nq), *att = xmalloc(sizeof(float) * na);
	float *dout = hrand(nq, 1), *dq0 = hrand(nq, 1), *dk0 = hrand(nk, 1);
	float *dv0 = hrand(nk, 1), *scr = xmalloc(sizeof(float) * na);
	float *dq = hcopy(dq0, nq), *dk = hcopy(dk0, nk), *dv = hcopy(dv0, nk), *h;

	snprintf(shape, sizeof(shape), "B=%d T=%d nh=%d nkv=%d hd=%d", B, T, nh,
		 nkv, hd);
	fw_attn_fwd_ref(out, att, q, k, v, B, T, nh, nkv, hd);

	float *gq = dputf(q, nq), *gk = dputf(k, nk), *gv = dputf(v, nk);
	float *junk = hrand(na, 9);
	/* att starts as garbage: the kernel must write its upper triangle. */
	float *gout = dzeros(nq), *gatt = dputf(junk, na);

	free(junk);
	K(fw_cuda_attn_fwd(gout, gatt, gq, gk, gv, B, T, nh, nkv, hd));
	cmp_begin();
	h = dget(gout, nq);
	cmp("out", h, out, nq, 1e-4, 1e-6);
	free(h);
	h = dget(gatt, na);
	cmp("att", h, att, na, 1e-4, 1e-7);
	free(h);
	verdict("attn_fwd", shape, "1e-06 + 1e-04 rel");

	fw_attn_bwd_ref(dq, dk, dv, scr, dout, att, q, k, v, B, T, nh, nkv, hd);
	gq = dputf(q, nq);
	gk = dputf(k, nk);
	gv = dputf(v, nk);
	gatt = dputf(att, na);

	float *gdout = dputf(dout, nq), *gdq = dputf(dq0, nq);
	float *gdk = dputf(dk0, nk), *gdv = dputf(dv0, nk), *gscr = dzeros(na);

	K(fw_cuda_attn_bwd(gdq, gdk, gdv, gscr, gdout, gatt, gq, gk, gv, B, T,
			   nh, nkv, hd));
	cmp_begin();
	h = dget(gdq, nq);
	cmp("dq", h, dq, nq, 1e-4, 1e-5);
	free(h);
	h = dget(gdk, nk);
	cmp("dk", h, dk, nk, 1e-4, 1e-5);
	free(h);
	h = dget(gdv, nk);
	cmp("dv", h, dv, nk, 1e-4, 1e-5);
	free(h);
	verdict("attn_bwd", shape, "1e-05 + 1e-04 rel");
	free(q), free(k), free(v), free(out), free(att), free(dout);
	free(dq0), free(dk0), free(dv0), free(scr), free(dq), free(dk), free(dv);
}

static void check_attn_cached(int B, int Tq, int pos0, int maxT, int nh,
			      int nkv, int hd)
{
	char shape[64];
	long nq = (long)B * Tq * nh * hd, nc = (long)B * maxT * nkv * hd;
	long ns = (long)B * Tq * nh * (pos0 + Tq);
	float *q = hrand(nq, 1), *kc = hrand(nc, 1), *vc = hrand(nc, 1);
	float *out = xmalloc(sizeof(float) * nq), *scr = xmalloc(sizeof(float) * ns);
	float *h;

	snprintf(shape, sizeof(shape), "B=%d Tq=%d pos0=%d maxT=%d hd=%d", B,
		 Tq, pos0, maxT, hd);
	fw_attn_cached(out, scr, q, kc, vc, B, Tq, pos0, maxT, nh, nkv, hd);

	float *gq = dputf(q, nq), *gkc = dputf(kc, nc), *gvc = dputf(vc, nc);
	float *gout = dzeros(nq), *gscr = dzeros(ns);

	K(fw_cuda_attn_cached(gout, gscr, gq, gkc, gvc, B, Tq, pos0, maxT, nh,
			      nkv, hd));
	cmp_begin();
	h = dget(gout, nq);
	cmp("out", h, out, nq, 1e-4, 1e-6);
	free(h);
	verdict("attn_cached", shape, "1e-06 + 1e-04 rel");
	free(q), free(kc), free(vc), free(out), free(scr);
}

static void check_swiglu(long n)
{
	char shape[64];
	float *g = hrand(n, 8), *u = hrand(n, 2), *d = hrand(n, 1);
	float *dg0 = hrand(n, 1), *du0 = hrand(n, 1);
	float *out = xmalloc(sizeof(float) * n), *dg = hcopy(dg0, n);
	float *du = hcopy(du0, n), *h;

	snprintf(shape, sizeof(shape), "n=%ld", n);
	fw_swiglu_fwd(out, g, u, n);

	float *gg = dputf(g, n), *gu = dputf(u, n), *gout = dzeros(n);

	K(fw_cuda_swiglu_fwd(gout, gg, gu, n));
	cmp_begin();
	h = dget(gout, n);
	cmp("out", h, out, n, 1e-5, 1e-6);
	free(h);
	verdict("swiglu_fwd", shape, "1e-06 + 1e-05 rel");

	fw_swiglu_bwd(dg, du, d, g, u, n);
	gg = dputf(g, n);
	gu = dputf(u, n);

	float *gd = dputf(d, n), *gdg = dputf(dg0, n), *gdu = dputf(du0, n);

	K(fw_cuda_swiglu_bwd(gdg, gdu, gd, gg, gu, n));
	cmp_begin();
	h = dget(gdg, n);
	cmp("dgate", h, dg, n, 1e-5, 1e-6);
	free(h);
	h = dget(gdu, n);
	cmp("dup", h, du, n, 1e-5, 1e-6);
	free(h);
	verdict("swiglu_bwd", shape, "1e-06 + 1e-05 rel");
	free(g), free(u), free(d), free(dg0), free(du0), free(out), free(dg);
	free(du);
}

static void check_xent(int N, int V)
{
	char shape[64];
	long n = (long)N * V;
	float *x = hrand(n, 4), *dlogp = hrand(N, 1);
	int32_t *t = hids(N, 0, V);
	float *logp = xmalloc(sizeof(float) * N), *lse = xmalloc(sizeof(float) * N);
	float *dx = xmalloc(sizeof(float) * n), *h;

	/* Ignored positions, and rows where one logit dwarfs the rest (the
	 * target, then another one). */
	for (int i = 1; i < N; i += 4)
		t[i] = -1;
	x[0 * (long)V + t[0]] = 80.0f;
	if (N > 2)
		x[2 * (long)V + (t[2] + 1) % V] = -60.0f;
	if (N > 3)
		x[3 * (long)V + (t[3] + 1) % V] = 70.0f;
	snprintf(shape, sizeof(shape), "N=%d V=%d", N, V);
	fw_xent_fwd(logp, lse, x, t, N, V);

	float *gx = dputf(x, n), *glogp = dputf(dlogp, N), *glse = dzeros(N);
	int32_t *gt = dputi(t, N);

	K(fw_cuda_xent_fwd(glogp, glse, gx, gt, N, V));
	cmp_begin();
	h = dget(glogp, N);
	cmp("logp", h, logp, N, 1e-5, 1e-5);
	free(h);
	h = dget(glse, N);
	cmp("lse", h, lse, N, 1e-5, 1e-5);
	free(h);
	verdict("xent_fwd", shape, "1e-05 + 1e-05 rel");

	fw_xent_bwd(dx, x, lse, t, dlogp, N, V);
	gx = dputf(x, n);
	glse = dputf(lse, N);
	gt = dputi(t, N);

	/* dlogits starts as garbage: ignored rows must be written as 0. */
	float *gd = dputf(dlogp, N), *gdx = dputf(x, n);

	K(fw_cuda_xent_bwd(gdx, gx, glse, gt, gd, N, V));
	cmp_begin();
	h = dget(gdx, n);
	cmp("dlogits", h, dx, n, 1e-5, 1e-7);
	free(h);
	/* In place, as the model calls it. */
	K(fw_cuda_xent_bwd(gx, gx, glse, gt, gd, N, V));
	h = dget(gx, n);
	cmp("dlogits(in place)", h, dx, n, 1e-5, 1e-7);
	free(h);
	verdict("xent_bwd", shape, "1e-07 + 1e-05 rel");
	free(x), free(dlogp), free(t), free(logp), free(lse), free(dx);
}

/* Gather and scatter-add of the soft targets: exact (copies and one
 * addition per element, in the same order). */
static void check_gather_scatter(long n, long m)
{
	char shape[64];
	float *x = hrand(n, 2), *v = hrand(m, 1), *out = xmalloc(sizeof(float) * m), *h;
	int64_t *idx = xmalloc(sizeof(int64_t) * m);

	/* distinct indices spread over x: a stride prime to n */
	for (long i = 0; i < m; i++)
		idx[i] = (i * 7919 + 3) % n;
	snprintf(shape, sizeof(shape), "n=%ld m=%ld", n, m);
	fw_gather(out, x, idx, m);
	float *gx = dputf(x, n), *gout = dzeros(m), *gv = dputf(v, m);
	int64_t *gidx = dput(idx, sizeof(int64_t) * m);

	K(fw_cuda_gather(gout, gx, gidx, m));
	cmp_begin();
	h = dget(gout, m);
	cmp("gather", h, out, m, 0, 0);
	free(h);
	verdict("gather", shape, "exact");
	/* verdict frees the device arrays */
	gx = dputf(x, n);
	gv = dputf(v, m);
	gidx = dput(idx, sizeof(int64_t) * m);
	fw_scatter_add(x, idx, v, m);
	K(fw_cuda_scatter_add(gx, gidx, gv, m));
	cmp_begin();
	h = dget(gx, n);
	cmp("scatter_add", h, x, n, 0, 0);
	free(h);
	verdict("scatter_add", shape, "exact");
	free(x), free(v), free(out), free(idx);
}

static void check_adamw(long n)
{
	char shape[64];
	float *p = hrand(n, 1), *m = hrand(n, 0.1f), *v = xmalloc(sizeof(float) * n);
	float *h;

	for (long i = 0; i < n; i++)
		v[i] = 0.01f * (frand() + 1.0f);

	float *gp = dputf(p, n), *gm = dputf(m, n), *gv = dputf(v, n);

	snprintf(shape, sizeof(shape), "n=%ld steps 1..3", n);
	for (long step = 1; step <= 3; step++) {
		float *g = hrand(n, 1), *gg = dputf(g, n);

		fw_adamw(p, m, v, g, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
		K(fw_cuda_adamw(gp, gm, gv, gg, n, 1e-2f, 0.9f, 0.95f, 1e-8f,
				0.1f, step));
		free(g);
	}
	cmp_begin();
	h = dget(gp, n);
	cmp("p", h, p, n, 1e-5, 1e-6);
	free(h);
	h = dget(gm, n);
	cmp("m", h, m, n, 1e-5, 1e-7);
	free(h);
	h = dget(gv, n);
	cmp("v", h, v, n, 1e-5, 1e-9);
	free(h);
	verdict("adamw", shape, "1e-06 + 1e-05 rel");
	free(p), free(m), free(v);
}

static void check_vec(long n)
{
	char shape[64];
	float *x = hrand(n, 3), *y = hrand(n, 3), *z = xmalloc(sizeof(float) * n);
	float *gx = dputf(x, n), *gy = dputf(y, n), *h;
	double *gs = dalloc(sizeof(double)), s, ref = fw_sumsq(x, n);

	snprintf(shape, sizeof(shape), "n=%ld", n);
	K(fw_cuda_sumsq(gs, gx, n));
	if (fw_cuda_memcpy_d2h(&s, gs, sizeof(s)))
		die("fw_cuda_memcpy_d2h");
	cmp_begin();
	cur.maxabs = fabs(s - ref);
	cur.ratio = fabs(s - ref) / (1e-12 * fabs(ref));
	cur.what = "sum";
	cur.got = s;
	cur.want = ref;
	verdict("sumsq", shape, "1e-12 rel, in double");

	gx = dputf(x, n);
	gy = dputf(y, n);
	for (long i = 0; i < n; i++)
		z[i] = x[i] + y[i];
	K(fw_cuda_add(gx, gx, gy, n));
	cmp_begin();
	h = dget(gx, n);
	cmp("out", h, z, n, 0, 0);
	free(h);
	verdict("add", shape, "exact");

	gx = dputf(x, n);
	fw_scale(x, 0.37f, n);
	K(fw_cuda_scale(gx, 0.37f, n));
	cmp_begin();
	h = dget(gx, n);
	cmp("x", h, x, n, 0, 0);
	free(h);
	verdict("scale", shape, "exact");
	free(x), free(y), free(z);
}

/* ---- bf16 products, flash attention, per-sequence cache positions ------- */

/* Compares got with ref against a limit per element. */
static void cmp_lim(const char *what, const float *got, const float *ref,
		    const float *lim, long n)
{
	for (long i = 0; i < n; i++) {
		double d = fabs((double)got[i] - ref[i]);
		double r = got[i] == ref[i] ? 0 : !isfinite(d) ? INFINITY
			   : lim[i] > 0 ? d / lim[i] : INFINITY;

		if (isfinite(d) && d > cur.maxabs)
			cur.maxabs = d;
		if (r > cur.ratio || (r == INFINITY && !cur.what)) {
			cur.ratio = r;
			cur.what = what;
			cur.at = i;
			cur.got = got[i];
			cur.want = ref[i];
		}
	}
}

static float *habs(const float *x, long n)
{
	float *y = xmalloc(sizeof(float) * n);

	for (long i = 0; i < n; i++)
		y[i] = fabsf(x[i]);
	return y;
}

/*
 * The products in bf16 (fw_cuda_set_bf16(1)) against the f32 loops.  Each
 * operand rounds to bf16 with relative error <= 2^-9, so each term a b
 * moves by <= (2^-8 + 2^-18) |a b|; both sides sum K terms in f32, each
 * sum off by <= K 2^-24 sum |a b|.  So element i may differ by
 * (2^-8 + 2^-18 + 2 K 2^-24) S_i, S_i the same product over |a| and |b|
 * (computed here by the f32 loops on absolute values).
 */
static void check_matmul_bf16(int M, int K, int N)
{
	char shape[64];
	long nx = (long)M * K, nw = (long)N * K, no = (long)M * N;
	float *x = hrand(nx, 1), *w = hrand(nw, 1), *b = hrand(N, 1);
	float *dout = hrand(no, 1), *out = xmalloc(4 * no), *S = xmalloc(4 * no);
	float *ax = habs(x, nx), *aw = habs(w, nw), *ad = habs(dout, no);
	float *dx = calloc(nx, 4), *dw = calloc(nw, 4), *Sx = calloc(nx, 4);
	float *Sw = calloc(nw, 4), *h;
	double c = 1.0 / 256 + 1.0 / 262144 + 2.0 * K / 16777216;

	snprintf(shape, sizeof(shape), "M=%d K=%d N=%d bias", M, K, N);
	fw_matmul_fwd_ref(out, x, w, b, M, K, N);
	fw_matmul_fwd_ref(S, ax, aw, NULL, M, K, N);
	for (long i = 0; i < no; i++)
		S[i] = (float)(c * S[i]) + 1e-30f;
	fw_cuda_set_bf16(1);

	float *gx = dputf(x, nx), *gw = dputf(w, nw), *gb = dputf(b, N);
	float *gout = dzeros(no);

	K(fw_cuda_matmul_fwd(gout, gx, gw, gb, M, K, N));
	cmp_begin();
	h = dget(gout, no);
	cmp_lim("out", h, out, S, no);
	free(h);
	verdict("matmul_bf16_fwd", shape, "(2^-8 + 2^-18 + 2K 2^-24) S");

	fw_matmul_bwd_ref(dx, dw, NULL, dout, x, w, M, K, N);
	fw_matmul_bwd_ref(Sx, Sw, NULL, ad, ax, aw, M, K, N);
	for (long i = 0; i < nx; i++)
		Sx[i] = (float)((1.0 / 256 + 1.0 / 262144 + 2.0 * N / 16777216) * Sx[i]) + 1e-30f;
	for (long i = 0; i < nw; i++)
		Sw[i] = (float)((1.0 / 256 + 1.0 / 262144 + 2.0 * M / 16777216) * Sw[i]) + 1e-30f;
	gx = dputf(x, nx);
	gw = dputf(w, nw);

	float *gd = dputf(dout, no), *gdx = dzeros(nx), *gdw = dzeros(nw);

	K(fw_cuda_matmul_bwd(gdx, gdw, NULL, gd, gx, gw, M, K, N));
	cmp_begin();
	h = dget(gdx, nx);
	cmp_lim("dinp", h, dx, Sx, nx);
	free(h);
	h = dget(gdw, nw);
	cmp_lim("dw", h, dw, Sw, nw);
	free(h);
	verdict("matmul_bf16_bwd", shape, "(2^-8 + 2^-18 + 2K 2^-24) S");
	fw_cuda_set_bf16(0);
	free(x), free(w), free(b), free(dout), free(out), free(S), free(ax);
	free(aw), free(ad), free(dx), free(dw), free(Sx), free(Sw);
}

/* The flash-style kernels against the (T, T) loops: out, and the
 * log-sum-exp of each row (computed here in double from q and k), then
 * dq, dk, dv accumulated onto random values.  Only the order of the sums
 * differs (online softmax, tiles of 128 keys), hence the tolerances of
 * attn_fwd / attn_bwd. */
static void check_flash(int B, int T, int nh, int nkv, int hd)
{
	char shape[64];
	long nq = (long)B * T * nh * hd, nk = (long)B * T * nkv * hd;
	long na = (long)B * nh * T * T, nl = (long)B * nh * T;
	float *q = hrand(nq, 1), *k = hrand(nk, 1), *v = hrand(nk, 1);
	float *out = xmalloc(4 * nq), *att = xmalloc(4 * na), *lse = xmalloc(4 * nl);
	float *dout = hrand(nq, 1), *dq0 = hrand(nq, 1), *dk0 = hrand(nk, 1);
	float *dv0 = hrand(nk, 1), *scr = xmalloc(4 * na);
	float *dq = hcopy(dq0, nq), *dk = hcopy(dk0, nk), *dv = hcopy(dv0, nk), *h;

	snprintf(shape, sizeof(shape), "B=%d T=%d nh=%d nkv=%d hd=%d", B, T, nh,
		 nkv, hd);
	fw_attn_fwd_ref(out, att, q, k, v, B, T, nh, nkv, hd);
	for (int b = 0; b < B; b++)
		for (int hh = 0; hh < nh; hh++)
			for (int t = 0; t < T; t++) {
				int g = hh / (nh / nkv);
				const float *qr = q + (((long)b * T + t) * nh + hh) * hd;
				double mx = -INFINITY, z = 0, sc[4096];

				for (int j = 0; j <= t; j++) {
					const float *kr = k + (((long)b * T + j) * nkv + g) * hd;
					double s = 0;

					for (int d = 0; d < hd; d++)
						s += (double)qr[d] * kr[d];
					sc[j] = s / sqrt((double)hd);
					mx = sc[j] > mx ? sc[j] : mx;
				}
				for (int j = 0; j <= t; j++)
					z += exp(sc[j] - mx);
				lse[((long)b * nh + hh) * T + t] = (float)(mx + log(z));
			}

	float *gq = dputf(q, nq), *gk = dputf(k, nk), *gv = dputf(v, nk);
	float *gout = dzeros(nq), *glse = dzeros(nl);

	K(fw_cuda_attn_flash_fwd(gout, glse, gq, gk, gv, B, T, nh, nkv, hd));
	cmp_begin();
	h = dget(gout, nq);
	cmp("out", h, out, nq, 1e-4, 1e-6);
	free(h);
	h = dget(glse, nl);
	cmp("lse", h, lse, nl, 1e-5, 1e-6);
	free(h);
	verdict("flash_fwd", shape, "1e-06 + 1e-04 rel");

	fw_attn_bwd_ref(dq, dk, dv, scr, dout, att, q, k, v, B, T, nh, nkv, hd);
	gq = dputf(q, nq);
	gk = dputf(k, nk);
	gv = dputf(v, nk);
	glse = dputf(lse, nl);

	float *gdout = dputf(dout, nq), *gdq = dputf(dq0, nq), *gfo = dputf(out, nq);
	float *gdk = dputf(dk0, nk), *gdv = dputf(dv0, nk), *gscr = dzeros(nl);

	K(fw_cuda_attn_flash_bwd(gdq, gdk, gdv, gscr, gdout, gfo, glse, gq, gk,
				 gv, B, T, nh, nkv, hd));
	cmp_begin();
	h = dget(gdq, nq);
	cmp("dq", h, dq, nq, 1e-4, 1e-5);
	free(h);
	h = dget(gdk, nk);
	cmp("dk", h, dk, nk, 1e-4, 1e-5);
	free(h);
	h = dget(gdv, nk);
	cmp("dv", h, dv, nk, 1e-4, 1e-5);
	free(h);
	verdict("flash_bwd", shape, "1e-05 + 1e-04 rel");
	free(q), free(k), free(v), free(out), free(att), free(lse), free(dout);
	free(dq0), free(dk0), free(dv0), free(scr), free(dq), free(dk), free(dv);
}

static void check_attn_cached_pos(int B, int Tq, int maxT, int nh, int nkv,
				  int hd)
{
	char shape[64];
	long nq = (long)B * Tq * nh * hd, nc = (long)B * maxT * nkv * hd;
	long ns = (long)B * Tq * nh * maxT;
	float *q = hrand(nq, 1), *kc = hrand(nc, 1), *vc = hrand(nc, 1);
	float *out = xmalloc(4 * nq), *scr = xmalloc(4 * ns), *h;
	int32_t *pos0 = hids(B, 0, maxT - Tq + 1);

	snprintf(shape, sizeof(shape), "B=%d Tq=%d maxT=%d hd=%d", B, Tq, maxT, hd);
	fw_attn_cached_pos(out, scr, q, kc, vc, pos0, B, Tq, maxT, nh, nkv, hd);

	float *gq = dputf(q, nq), *gkc = dputf(kc, nc), *gvc = dputf(vc, nc);
	float *gout = dzeros(nq), *gscr = dzeros(ns);
	int32_t *gp = dputi(pos0, B);

	K(fw_cuda_attn_cached_pos(gout, gscr, gq, gkc, gvc, gp, B, Tq, maxT, nh,
				  nkv, hd));
	cmp_begin();
	h = dget(gout, nq);
	cmp("out", h, out, nq, 1e-4, 1e-6);
	free(h);
	verdict("attn_cached_pos", shape, "1e-06 + 1e-04 rel");
	free(q), free(kc), free(vc), free(out), free(scr), free(pos0);
}

/* ---- main ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f, "usage: %s [--quick]\n", prog);
}

int main(int argc, char **argv)
{
	char dev[256];
	int quick = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			quick = 1;
		} else if (!strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (fw_cuda_device_count() < 1) {
		printf("%s: no CUDA device: %s: skipped, nothing checked\n", prog,
		       fw_cuda_error());
		return 77;
	}
	if (fw_cuda_init(0, dev, sizeof(dev))) {
		printf("%s: cannot use CUDA device 0: %s\n", prog, fw_cuda_error());
		return 1;
	}
	printf("# device: %s\n", dev);
	fw_kernels_set_threads(1);

	check_matmul(37, 53, 29, 1);
	check_matmul(64, 300, 96, 0);
	check_matmul(1, 7, 1, 1);
	check_embed(50, 33, 20);
	check_rmsnorm(19, 7);
	check_rmsnorm(21, 1000);
	check_rope(23, 3, 16, 40);
	check_attn(2, 9, 4, 2, 8);
	check_attn(1, quick ? 40 : 200, 2, 1, 144);
	check_attn_cached(2, 3, 5, 12, 4, 2, 8);
	check_attn_cached(1, 1, quick ? 60 : 250, 300, 2, 2, 130);
	check_swiglu(10007);
	check_xent(9, 5);
	check_xent(13, 5003);
	check_gather_scatter(5003, 1);
	check_gather_scatter(13 * 5003, 4099);
	check_adamw(4099);
	check_vec(quick ? 5000 : 300001);
	check_matmul_bf16(37, 53, 29);
	check_matmul_bf16(64, 300, 96);
	check_flash(2, 9, 4, 2, 8);
	check_flash(1, quick ? 40 : 200, 2, 1, 144);
	check_attn_cached_pos(3, 4, 20, 4, 2, 8);
	check_attn_cached_pos(2, 1, quick ? 60 : 150, 2, 2, 130);

	printf("%s: %d ok, %d failed\n", prog, npass, nfail);
	fw_cuda_shutdown();
	return nfail ? 1 : 0;
}
