/*
 * check_kernels.c — every CUDA kernel of kernels_cuda.h, forward and
 * backward, against the C oracle of kernels.h on random inputs (the plain
 * loops, fw_*_ref, where kernels.h also has a BLAS version); then the
 * forward and backward of whole models (Llama, Qwen2, Qwen3 variants) run
 * with the CUDA kernels against fw_model_forward / fw_model_backward on
 * the CPU, and AdamW over every parameter; and incremental decoding with a
 * key-value cache against fw_gen_prefill / fw_gen_step.
 *
 * fw_model has no GPU path of its own, so the model check drives the CUDA
 * kernels in the order fw_model.c calls the C ones, on fw_model's own
 * weights, and compares logits, log-probs, loss and every parameter
 * gradient with what fw_model computed.
 *
 * Output: one line per check, "ok" or "FAIL", its name and shape, the
 * largest difference found and the tolerance it had to meet, then a
 * summary line.  A check passes when every element satisfies
 * |gpu - cpu| <= atol + rtol * |cpu| (no NaN, no Inf where the CPU has
 * none); model checks set atol = tol * max|cpu| of each tensor.
 * Gradients are accumulated onto random values, so "+=" is checked too.
 * A second run of each model step must give the same bits as the first.
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

static double maxabs(const float *x, long n)
{
	double m = 0;

	for (long i = 0; i < n; i++)
		if (fabs((double)x[i]) > m)
			m = fabs((double)x[i]);
	return m;
}

/* Compares with atol = tol * max|ref| and rtol = tol. */
static void cmp_scaled(const char *what, const float *got, const float *ref,
		       long n, double tol)
{
	double s = maxabs(ref, n);

	cmp(what, got, ref, n, tol, tol * (s > 0 ? s : 1));
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

/* ---- whole models ------------------------------------------------------------- */

/* The model's weights and gradients on the device: one flat buffer each,
 * at the same offsets as m->w and m->g. */
struct dmodel {
	const struct fw_model *m;
	float *w, *g, *cos_t, *sin_t;
};

static float *DW(const struct dmodel *d, const float *p)
{
	return p ? d->w + (p - d->m->w) : NULL;
}

static float *DG(const struct dmodel *d, const float *p)
{
	return p ? d->g + (p - d->m->g) : NULL;
}

/* Forward and backward of m on the device in the order of
 * fw_model_forward / fw_model_backward; logits, logp, lse come back. */
static void gpu_step(struct dmodel *d, const int32_t *tokens,
		     const int32_t *targets, const float *weights, int B,
		     int T, float **logits_out, float **logp_out, float *loss)
{
	const struct fw_model *m = d->m;
	const struct fw_config *c = &m->cfg;
	int N = B * T, C = c->C, I = c->I, V = c->vocab, nh = c->nh,
	    nkv = c->nkv, hd = c->hd, qd = nh * hd, kd = nkv * hd, L = c->L;
	long nc = (long)N * C;
	int32_t *pos = xmalloc(sizeof(int32_t) * N);
	float *dlogp = xmalloc(sizeof(float) * N);
	double s = 0, wsum = 0;

	for (int i = 0; i < N; i++)
		pos[i] = i % T;

	int32_t *gtok = dputi(tokens, N), *gtgt = dputi(targets, N);
	int32_t *gpos = dputi(pos, N);
	float *X = dzeros((L + 1) * nc), *XM = dzeros(L * nc);
	float *LN1 = dzeros(L * nc), *LN2 = dzeros(L * nc);
	float *RS1 = dzeros((long)L * N), *RS2 = dzeros((long)L * N);
	float *QR = c->qk_norm ? dzeros((long)L * N * qd) : NULL;
	float *KR = c->qk_norm ? dzeros((long)L * N * kd) : NULL;
	float *RSQ = c->qk_norm ? dzeros((long)L * N * nh) : NULL;
	float *RSK = c->qk_norm ? dzeros((long)L * N * nkv) : NULL;
	float *Q = dzeros((long)L * N * qd), *Kb = dzeros((long)L * N * kd);
	float *Vb = dzeros((long)L * N * kd), *ATT = dzeros((long)L * N * nh * T);
	float *Y = dzeros((long)L * N * qd), *GATE = dzeros((long)L * N * I);
	float *UP = dzeros((long)L * N * I), *H = dzeros((long)L * N * I);
	float *XF = dzeros(nc), *RSF = dzeros(N), *LOGITS = dzeros((long)N * V);
	float *LOGP = dzeros(N), *LSE = dzeros(N), *TMP = dzeros(nc);
	float *DRES = dzeros(nc), *DLN = dzeros(nc), *DY = dzeros((long)N * qd);
	float *DQ = dzeros((long)N * qd), *DK = dzeros((long)N * kd);
	float *DV = dzeros((long)N * kd), *DH = dzeros((long)N * I);
	float *DGATE = dzeros((long)N * I), *DUP = dzeros((long)N * I);
	float *DSCR = dzeros((long)N * nh * T);
	float *DQR = c->qk_norm ? dzeros((long)N * qd) : NULL;
	float *DKR = c->qk_norm ? dzeros((long)N * kd) : NULL;

	K(fw_cuda_embed_fwd(X, gtok, DW(d, m->embed), N, C));
	for (int l = 0; l < L; l++) {
		const struct fw_layer_w *w = &m->lw[l];
		float *x = X + l * nc, *xm = XM + l * nc, *xn = x + nc;
		float *ln1 = LN1 + l * nc, *ln2 = LN2 + l * nc;
		float *q = Q + (long)l * N * qd, *k = Kb + (long)l * N * kd;
		float *v = Vb + (long)l * N * kd, *y = Y + (long)l * N * qd;
		float *qr = c->qk_norm ? QR + (long)l * N * qd : q;
		float *kr = c->qk_norm ? KR + (long)l * N * kd : k;
		float *gate = GATE + (long)l * N * I, *up = UP + (long)l * N * I;
		float *h = H + (long)l * N * I;

		K(fw_cuda_rmsnorm_fwd(ln1, RS1 + (long)l * N, x, DW(d, w->ln1), N, C, c->eps));
		K(fw_cuda_matmul_fwd(qr, ln1, DW(d, w->wq), DW(d, w->bq), N, C, qd));
		K(fw_cuda_matmul_fwd(kr, ln1, DW(d, w->wk), DW(d, w->bk), N, C, kd));
		K(fw_cuda_matmul_fwd(v, ln1, DW(d, w->wv), DW(d, w->bv), N, C, kd));
		if (c->qk_norm) {
			K(fw_cuda_rmsnorm_fwd(q, RSQ + (long)l * N * nh, qr, DW(d, w->qn), N * nh, hd, c->eps));
			K(fw_cuda_rmsnorm_fwd(k, RSK + (long)l * N * nkv, kr, DW(d, w->kn), N * nkv, hd, c->eps));
		}
		K(fw_cuda_rope_fwd(q, gpos, d->cos_t, d->sin_t, N, nh, hd));
		K(fw_cuda_rope_fwd(k, gpos, d->cos_t, d->sin_t, N, nkv, hd));
		K(fw_cuda_attn_fwd(y, ATT + (long)l * N * nh * T, q, k, v, B, T, nh, nkv, hd));
		K(fw_cuda_matmul_fwd(TMP, y, DW(d, w->wo), DW(d, w->bo), N, qd, C));
		K(fw_cuda_add(xm, x, TMP, nc));
		K(fw_cuda_rmsnorm_fwd(ln2, RS2 + (long)l * N, xm, DW(d, w->ln2), N, C, c->eps));
		K(fw_cuda_matmul_fwd(gate, ln2, DW(d, w->wg), NULL, N, C, I));
		K(fw_cuda_matmul_fwd(up, ln2, DW(d, w->wu), NULL, N, C, I));
		K(fw_cuda_swiglu_fwd(h, gate, up, (long)N * I));
		K(fw_cuda_matmul_fwd(TMP, h, DW(d, w->wd), NULL, N, I, C));
		K(fw_cuda_add(xn, xm, TMP, nc));
	}
	K(fw_cuda_rmsnorm_fwd(XF, RSF, X + L * nc, DW(d, m->norm), N, C, c->eps));
	K(fw_cuda_matmul_fwd(LOGITS, XF, DW(d, m->lm_head), NULL, N, C, V));
	K(fw_cuda_xent_fwd(LOGP, LSE, LOGITS, gtgt, N, V));
	*logits_out = dget(LOGITS, (long)N * V);
	*logp_out = dget(LOGP, N);
	for (int i = 0; i < N; i++)
		if (targets[i] >= 0) {
			s += (double)weights[i] * (*logp_out)[i];
			wsum += weights[i];
		}
	float norm = wsum != 0 ? (float)wsum : 1.0f;

	*loss = (float)(-s / norm);

	/* Backward. */
	for (int i = 0; i < N; i++)
		dlogp[i] = targets[i] >= 0 ? -weights[i] / norm : 0.0f;
	float *DLOGP = dputf(dlogp, N);

	K(fw_cuda_xent_bwd(LOGITS, LOGITS, LSE, gtgt, DLOGP, N, V));
	K(fw_cuda_zero(DLN, sizeof(float) * nc));
	K(fw_cuda_matmul_bwd(DLN, DG(d, m->glm_head), NULL, LOGITS, XF, DW(d, m->lm_head), N, C, V));
	K(fw_cuda_zero(DRES, sizeof(float) * nc));
	K(fw_cuda_rmsnorm_bwd(DRES, DG(d, m->gnorm), DLN, X + L * nc, DW(d, m->norm), RSF, N, C));
	for (int l = L - 1; l >= 0; l--) {
		const struct fw_layer_w *w = &m->lw[l], *g = &m->lg[l];
		float *x = X + l * nc, *xm = XM + l * nc;
		float *ln1 = LN1 + l * nc, *ln2 = LN2 + l * nc;
		float *q = Q + (long)l * N * qd, *k = Kb + (long)l * N * kd;
		float *v = Vb + (long)l * N * kd, *y = Y + (long)l * N * qd;
		float *gate = GATE + (long)l * N * I, *up = UP + (long)l * N * I;
		float *h = H + (long)l * N * I;
		float *dq = DQ, *dk = DK;

		K(fw_cuda_zero(DH, sizeof(float) * N * I));
		K(fw_cuda_matmul_bwd(DH, DG(d, g->wd), NULL, DRES, h, DW(d, w->wd), N, I, C));
		K(fw_cuda_zero(DGATE, sizeof(float) * N * I));
		K(fw_cuda_zero(DUP, sizeof(float) * N * I));
		K(fw_cuda_swiglu_bwd(DGATE, DUP, DH, gate, up, (long)N * I));
		K(fw_cuda_zero(DLN, sizeof(float) * nc));
		K(fw_cuda_matmul_bwd(DLN, DG(d, g->wg), NULL, DGATE, ln2, DW(d, w->wg), N, C, I));
		K(fw_cuda_matmul_bwd(DLN, DG(d, g->wu), NULL, DUP, ln2, DW(d, w->wu), N, C, I));
		K(fw_cuda_rmsnorm_bwd(DRES, DG(d, g->ln2), DLN, xm, DW(d, w->ln2), RS2 + (long)l * N, N, C));

		K(fw_cuda_zero(DY, sizeof(float) * N * qd));
		K(fw_cuda_matmul_bwd(DY, DG(d, g->wo), DG(d, g->bo), DRES, y, DW(d, w->wo), N, qd, C));
		K(fw_cuda_zero(DQ, sizeof(float) * N * qd));
		K(fw_cuda_zero(DK, sizeof(float) * N * kd));
		K(fw_cuda_zero(DV, sizeof(float) * N * kd));
		K(fw_cuda_attn_bwd(DQ, DK, DV, DSCR, DY, ATT + (long)l * N * nh * T, q, k, v, B, T, nh, nkv, hd));
		K(fw_cuda_rope_bwd(DQ, gpos, d->cos_t, d->sin_t, N, nh, hd));
		K(fw_cuda_rope_bwd(DK, gpos, d->cos_t, d->sin_t, N, nkv, hd));
		if (c->qk_norm) {
			K(fw_cuda_zero(DQR, sizeof(float) * N * qd));
			K(fw_cuda_zero(DKR, sizeof(float) * N * kd));
			K(fw_cuda_rmsnorm_bwd(DQR, DG(d, g->qn), DQ, QR + (long)l * N * qd,
					      DW(d, w->qn), RSQ + (long)l * N * nh, N * nh, hd));
			K(fw_cuda_rmsnorm_bwd(DKR, DG(d, g->kn), DK, KR + (long)l * N * kd,
					      DW(d, w->kn), RSK + (long)l * N * nkv, N * nkv, hd));
			dq = DQR;
			dk = DKR;
		}
		K(fw_cuda_zero(DLN, sizeof(float) * nc));
		K(fw_cuda_matmul_bwd(DLN, DG(d, g->wq), DG(d, g->bq), dq, ln1, DW(d, w->wq), N, C, qd));
		K(fw_cuda_matmul_bwd(DLN, DG(d, g->wk), DG(d, g->bk), dk, ln1, DW(d, w->wk), N, C, kd));
		K(fw_cuda_matmul_bwd(DLN, DG(d, g->wv), DG(d, g->bv), DV, ln1, DW(d, w->wv), N, C, kd));
		K(fw_cuda_rmsnorm_bwd(DRES, DG(d, g->ln1), DLN, x, DW(d, w->ln1), RS1 + (long)l * N, N, C));
	}
	K(fw_cuda_embed_bwd(DG(d, m->gembed), DRES, gtok, N, C));
	K(fw_cuda_sync());
	free(pos);
	free(dlogp);
}

/* Decoding state on the device, as struct fw_gen holds it. */
struct dgen {
	int nseq, maxT;
	float *kc, *vc, *x, *ln, *q, *k, *v, *y, *tmp, *gate, *up, *h;
	float *rs, *rsq, *rsk, *scr, *last, *logits;
	int32_t *pos, *tok;
};

static void dgen_init(struct dgen *g, const struct fw_model *m, int nseq,
		      int maxT, int rows)
{
	const struct fw_config *c = &m->cfg;
	long kd = (long)c->nkv * c->hd, qd = (long)c->nh * c->hd;

	g->nseq = nseq;
	g->maxT = maxT;
	g->kc = dzeros((long)c->L * nseq * maxT * kd);
	g->vc = dzeros((long)c->L * nseq * maxT * kd);
	g->x = dzeros((long)rows * c->C);
	g->ln = dzeros((long)rows * c->C);
	g->q = dzeros(rows * qd);
	g->k = dzeros(rows * kd);
	g->v = dzeros(rows * kd);
	g->y = dzeros(rows * qd);
	g->tmp = dzeros((long)rows * c->C);
	g->gate = dzeros((long)rows * c->I);
	g->up = dzeros((long)rows * c->I);
	g->h = dzeros((long)rows * c->I);
	g->rs = dzeros(rows);
	g->rsq = dzeros((long)rows * c->nh);
	g->rsk = dzeros((long)rows * c->nkv);
	g->scr = dzeros((long)rows * c->nh * maxT);
	g->last = dzeros((long)nseq * c->C);
	g->logits = dzeros((long)nseq * c->vocab);
	g->pos = dalloc(sizeof(int32_t) * rows);
	g->tok = dalloc(sizeof(int32_t) * rows);
}

/* Tq new tokens (B sequences, host ids) at positions pos0..: the CUDA
 * kernels in the order of gen_run in fw_model.c. */
static void dgen_run(struct dgen *g, const struct dmodel *d,
		     const int32_t *tok, int B, int Tq, int pos0)
{
	const struct fw_model *m = d->m;
	const struct fw_config *c = &m->cfg;
	int N = B * Tq, C = c->C, I = c->I, nh = c->nh, nkv = c->nkv,
	    hd = c->hd, qd = nh * hd, kd = nkv * hd, T = g->maxT;
	int32_t *pos = xmalloc(sizeof(int32_t) * N);

	for (int i = 0; i < N; i++)
		pos[i] = pos0 + i % Tq;
	if (fw_cuda_memcpy_h2d(g->pos, pos, sizeof(int32_t) * N) ||
	    fw_cuda_memcpy_h2d(g->tok, tok, sizeof(int32_t) * N))
		die("fw_cuda_memcpy_h2d");
	free(pos);
	K(fw_cuda_embed_fwd(g->x, g->tok, DW(d, m->embed), N, C));
	for (int l = 0; l < c->L; l++) {
		const struct fw_layer_w *w = &m->lw[l];
		float *kc = g->kc + (long)l * g->nseq * T * kd;
		float *vc = g->vc + (long)l * g->nseq * T * kd;

		K(fw_cuda_rmsnorm_fwd(g->ln, g->rs, g->x, DW(d, w->ln1), N, C, c->eps));
		K(fw_cuda_matmul_fwd(g->q, g->ln, DW(d, w->wq), DW(d, w->bq), N, C, qd));
		K(fw_cuda_matmul_fwd(g->k, g->ln, DW(d, w->wk), DW(d, w->bk), N, C, kd));
		K(fw_cuda_matmul_fwd(g->v, g->ln, DW(d, w->wv), DW(d, w->bv), N, C, kd));
		if (c->qk_norm) {
			K(fw_cuda_rmsnorm_fwd(g->q, g->rsq, g->q, DW(d, w->qn), N * nh, hd, c->eps));
			K(fw_cuda_rmsnorm_fwd(g->k, g->rsk, g->k, DW(d, w->kn), N * nkv, hd, c->eps));
		}
		K(fw_cuda_rope_fwd(g->q, g->pos, d->cos_t, d->sin_t, N, nh, hd));
		K(fw_cuda_rope_fwd(g->k, g->pos, d->cos_t, d->sin_t, N, nkv, hd));
		for (int b = 0; b < B; b++) {
			long at = ((long)b * T + pos0) * kd;

			K(fw_cuda_memcpy_d2d(kc + at, g->k + (long)b * Tq * kd, sizeof(float) * Tq * kd));
			K(fw_cuda_memcpy_d2d(vc + at, g->v + (long)b * Tq * kd, sizeof(float) * Tq * kd));
		}
		K(fw_cuda_attn_cached(g->y, g->scr, g->q, kc, vc, B, Tq, pos0, T, nh, nkv, hd));
		K(fw_cuda_matmul_fwd(g->tmp, g->y, DW(d, w->wo), DW(d, w->bo), N, qd, C));
		K(fw_cuda_add(g->x, g->x, g->tmp, (long)N * C));
		K(fw_cuda_rmsnorm_fwd(g->ln, g->rs, g->x, DW(d, w->ln2), N, C, c->eps));
		K(fw_cuda_matmul_fwd(g->gate, g->ln, DW(d, w->wg), NULL, N, C, I));
		K(fw_cuda_matmul_fwd(g->up, g->ln, DW(d, w->wu), NULL, N, C, I));
		K(fw_cuda_swiglu_fwd(g->h, g->gate, g->up, (long)N * I));
		K(fw_cuda_matmul_fwd(g->tmp, g->h, DW(d, w->wd), NULL, N, I, C));
		K(fw_cuda_add(g->x, g->x, g->tmp, (long)N * C));
	}
	for (int b = 0; b < B; b++)
		K(fw_cuda_memcpy_d2d(g->last + (long)b * C, g->x + ((long)b * Tq + Tq - 1) * C,
				     sizeof(float) * C));
	K(fw_cuda_rmsnorm_fwd(g->last, g->rs, g->last, DW(d, m->norm), B, C, c->eps));
	K(fw_cuda_matmul_fwd(g->logits, g->last, DW(d, m->lm_head), NULL, B, C, c->vocab));
}

/* Incremental decoding: a prompt prefilled, then steps of nseq sequences,
 * the logits of each against fw_gen_prefill / fw_gen_step. */
static void check_decode(const char *arch, int nseq, int n, int steps)
{
	char json[1024], err[256], shape[64];
	struct fw_config c;
	struct fw_model *m;
	struct fw_gen *gen;
	struct dmodel d;
	struct dgen g;
	int maxT = n + steps, L, V;
	long kd;

	snprintf(json, sizeof(json),
		 "{\"architectures\": [\"%s\"], \"vocab_size\": 101, "
		 "\"hidden_size\": 40, \"intermediate_size\": 72, "
		 "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
		 "\"num_key_value_heads\": 2, \"head_dim\": 12, "
		 "\"max_position_embeddings\": 64, \"rope_theta\": 500000.0, "
		 "\"rms_norm_eps\": 1e-5, \"initializer_range\": 0.2}", arch);
	snprintf(shape, sizeof(shape), "%s nseq=%d prompt=%d steps=%d", arch,
		 nseq, n, steps);
	if (fw_config_parse(&c, json, strlen(json), "config", err, sizeof(err)) ||
	    !(m = fw_model_new(&c, 5, err, sizeof(err))) ||
	    !(gen = fw_gen_new(m, nseq, maxT, err, sizeof(err)))) {
		printf("FAIL decode          %s: %s\n", shape, err);
		nfail++;
		return;
	}
	for (long i = 0; i < m->nw; i++)
		m->w[i] += 0.1f * frand();
	L = c.L;
	V = c.vocab;
	kd = (long)c.nkv * c.hd;
	d.m = m;
	d.w = dputf(m->w, m->nw);
	d.g = NULL;
	d.cos_t = dputf(m->rope_cos, (long)c.max_pos * (c.hd / 2));
	d.sin_t = dputf(m->rope_sin, (long)c.max_pos * (c.hd / 2));
	dgen_init(&g, m, nseq, maxT, n > nseq ? n : nseq);

	int32_t *prompt = hids(n, 0, V), *tok = hids(nseq, 0, V);
	float *h;

	cmp_begin();
	if (fw_gen_prefill(gen, prompt, n, err, sizeof(err))) {
		printf("FAIL decode          %s: %s\n", shape, err);
		nfail++;
		return;
	}
	dgen_run(&g, &d, prompt, 1, n, 0);
	/* Every sequence starts from the prompt's cache. */
	for (int l = 0; l < L; l++)
		for (int b = 1; b < nseq; b++) {
			long l0 = (long)l * nseq * maxT * kd, at = l0 + (long)b * maxT * kd;

			K(fw_cuda_memcpy_d2d(g.kc + at, g.kc + l0, sizeof(float) * n * kd));
			K(fw_cuda_memcpy_d2d(g.vc + at, g.vc + l0, sizeof(float) * n * kd));
		}
	h = dget(g.logits, V);
	cmp_scaled("prefill logits", h, fw_gen_logits(gen), V, 1e-4);
	free(h);
	for (int s = 0; s < steps; s++) {
		for (int b = 0; b < nseq; b++)
			tok[b] = (int32_t)(next() % (uint64_t)V);
		if (fw_gen_step(gen, tok, err, sizeof(err))) {
			printf("FAIL decode          %s: %s\n", shape, err);
			nfail++;
			return;
		}
		dgen_run(&g, &d, tok, nseq, 1, n + s);
		h = dget(g.logits, (long)nseq * V);
		cmp_scaled("step logits", h, fw_gen_logits(gen), (long)nseq * V, 1e-4);
		free(h);
	}
	verdict("decode", shape, "1e-04 of max|cpu|");
	free(prompt), free(tok);
	fw_gen_free(gen);
	fw_model_free(m);
}

static void check_model(const char *arch, int tied, int bias, int B, int T)
{
	char json[1024], err[256], shape[64];
	struct fw_config c;
	struct fw_model *m;
	struct dmodel d;
	int N = B * T;
	float loss, gloss, *glogits, *glogp;

	snprintf(json, sizeof(json),
		 "{\"architectures\": [\"%s\"], \"vocab_size\": 97, "
		 "\"hidden_size\": 48, \"intermediate_size\": 80, "
		 "\"num_hidden_layers\": 2, \"num_attention_heads\": 6, "
		 "\"num_key_value_heads\": 2, \"head_dim\": 10, "
		 "\"max_position_embeddings\": 64, \"rope_theta\": 10000.0, "
		 "\"rms_norm_eps\": 1e-6, \"initializer_range\": 0.2, "
		 "\"attention_bias\": %s, \"tie_word_embeddings\": %s}",
		 arch, bias ? "true" : "false", tied ? "true" : "false");
	snprintf(shape, sizeof(shape), "%s%s%s B=%d T=%d", arch,
		 tied ? " tied" : "", bias ? " bias" : "", B, T);
	if (fw_config_parse(&c, json, strlen(json), "config", err, sizeof(err)) ||
	    !(m = fw_model_new(&c, 11, err, sizeof(err))) || fw_model_grads(m)) {
		printf("FAIL model           %s: %s\n", shape, err);
		nfail++;
		return;
	}
	/* Norm weights away from 1 and biases away from 0, so every weight
	 * matters. */
	for (long i = 0; i < m->nw; i++)
		m->w[i] += 0.1f * frand();

	int32_t *tok = hids(N, 0, c.vocab), *tgt = hids(N, 0, c.vocab);
	float *wts = xmalloc(sizeof(float) * N), *logp = xmalloc(sizeof(float) * N);

	for (int i = 0; i < N; i++)
		wts[i] = 1.0f + frand();
	for (int i = 2; i < N; i += 5)
		tgt[i] = -1;
	if (fw_model_forward(m, tok, tgt, wts, B, T, 0, logp, &loss, err,
			     sizeof(err))) {
		printf("FAIL model           %s: %s\n", shape, err);
		nfail++;
		return;
	}
	float *logits = hcopy(fw_model_logits(m), (long)N * c.vocab);

	fw_model_zero_grad(m);
	if (fw_model_backward(m, err, sizeof(err))) {
		printf("FAIL model           %s: %s\n", shape, err);
		nfail++;
		return;
	}

	/* The same on the device: weights as they are, gradients from 0. */
	d.m = m;
	d.w = dputf(m->w, m->nw);
	d.g = dzeros(m->nw);
	d.cos_t = dputf(m->rope_cos, (long)c.max_pos * (c.hd / 2));
	d.sin_t = dputf(m->rope_sin, (long)c.max_pos * (c.hd / 2));
	gpu_step(&d, tok, tgt, wts, B, T, &glogits, &glogp, &gloss);
	cmp_begin();
	cmp_scaled("logits", glogits, logits, (long)N * c.vocab, 1e-4);
	cmp_scaled("logp", glogp, logp, N, 1e-4);
	cmp_scaled("loss", &gloss, &loss, 1, 1e-5);
	/* verdict() frees the device buffers: keep the gradients first. */
	float *gg = dget(d.g, m->nw);

	verdict("model_fwd", shape, "1e-04 of max|cpu|");

	/* Twice the same step gives the same bits: no kernel depends on
	 * the order in which blocks run (a race between blocks, which only
	 * hardware shows, would). */
	{
		float *l2, *p2, loss2, *g2;

		d.w = dputf(m->w, m->nw);
		d.g = dzeros(m->nw);
		d.cos_t = dputf(m->rope_cos, (long)c.max_pos * (c.hd / 2));
		d.sin_t = dputf(m->rope_sin, (long)c.max_pos * (c.hd / 2));
		gpu_step(&d, tok, tgt, wts, B, T, &l2, &p2, &loss2);
		g2 = dget(d.g, m->nw);
		cmp_begin();
		cmp("logits", l2, glogits, (long)N * c.vocab, 0, 0);
		cmp("grads", g2, gg, m->nw, 0, 0);
		verdict("model_repeat", shape, "bitwise");
		free(l2), free(p2), free(g2);
	}

	cmp_begin();
	for (int i = 0; i < m->np; i++) {
		const struct fw_param *p = &m->params[i];

		cmp_scaled(p->name, gg + p->off, m->g + p->off, p->n, 1e-4);
	}
	verdict("model_bwd", shape, "1e-04 of max|cpu|, each tensor");

	/* An optimizer step over every parameter, from the CPU's gradients,
	 * after clipping by the global norm. */
	{
		float *mm = calloc(m->nw, sizeof(float)), *vv = calloc(m->nw, sizeof(float));
		float *gp = dputf(m->w, m->nw), *gm = dzeros(m->nw);
		float *gv = dzeros(m->nw), *ggr = dputf(m->g, m->nw);
		double *gs = dalloc(sizeof(double)), s;
		double ref = fw_sumsq(m->g, m->nw);
		float clip = (float)(0.5 / sqrt(ref));

		K(fw_cuda_sumsq(gs, ggr, m->nw));
		if (fw_cuda_memcpy_d2h(&s, gs, sizeof(s)))
			die("fw_cuda_memcpy_d2h");
		fw_scale(m->g, clip, m->nw);
		K(fw_cuda_scale(ggr, clip, m->nw));
		fw_adamw(m->w, mm, vv, m->g, m->nw, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1);
		K(fw_cuda_adamw(gp, gm, gv, ggr, m->nw, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1));
		cmp_begin();
		float sf = (float)s, rf = (float)ref;

		cmp("grad sumsq", &sf, &rf, 1, 1e-6, 0);
		float *h = dget(gp, m->nw);

		cmp("params", h, m->w, m->nw, 1e-5, 1e-7);
		free(h);
		verdict("model_adamw", shape, "1e-07 + 1e-05 rel");
		free(mm);
		free(vv);
	}
	free(gg), free(tok), free(tgt), free(wts), free(logp);
	free(logits), free(glogits), free(glogp);
	fw_model_free(m);
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
	check_adamw(4099);
	check_vec(quick ? 5000 : 300001);
	check_model("LlamaForCausalLM", 0, 1, 2, 7);
	check_model("Qwen2ForCausalLM", 1, 0, 2, 9);
	check_model("Qwen3ForCausalLM", 0, 0, 3, 6);
	check_decode("Qwen3ForCausalLM", 3, 11, 5);
	check_decode("LlamaForCausalLM", 2, 6, 4);

	printf("%s: %d ok, %d failed\n", prog, npass, nfail);
	fw_cuda_shutdown();
	return nfail ? 1 : 0;
}
