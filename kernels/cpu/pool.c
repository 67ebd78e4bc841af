/*
 * pool.c — the thread pool behind fw_parallel_for, and the thread count
 * the CPU kernels and OpenBLAS share.
 *
 * Workers are started once and wait on a condition variable between
 * calls, so a kernel call costs a wake-up, not a thread creation (decoding
 * calls a few hundred kernels per token).  Build: part of libflywheel.
 * Test: build/tests/test_kernels.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#include <cblas.h>

#include "kernels.h"

#define MAX_THREADS 128

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t call_mu = PTHREAD_MUTEX_INITIALIZER;
/* Threads in use, caller included; 0 = unset.  Atomic, so that the kernel
 * calls of several threads read it without a lock; it is a count only,
 * publishing nothing else, so relaxed order serves. */
static atomic_int nthreads;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int nworkers;       /* worker threads started */
static unsigned long gen;  /* bumped once per parallel call */
static int pending;        /* workers still running the current call */
static void (*job_fn)(void *, int, int);
static void *job_ctx;
static int job_n, job_parts;
static __thread int in_pool;

static void chunk(int part, int parts, int n, int *i0, int *i1)
{
	*i0 = (int)((long)n * part / parts);
	*i1 = (int)((long)n * (part + 1) / parts);
}

static void *worker(void *arg)
{
	int id = (int)(long)arg;
	unsigned long seen = 0;

	in_pool = 1;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (gen == seen)
			pthread_cond_wait(&go, &mu);
		seen = gen;
		if (id < job_parts) {
			void (*fn)(void *, int, int) = job_fn;
			void *ctx = job_ctx;
			int i0, i1;

			chunk(id, job_parts, job_n, &i0, &i1);
			pthread_mutex_unlock(&mu);
			if (i1 > i0)
				fn(ctx, i0, i1);
			pthread_mutex_lock(&mu);
			if (--pending == 0)
				pthread_cond_signal(&done);
		}
	}
	return NULL;
}

/* $FW_THREADS, else the online CPUs; 1 to MAX_THREADS. */
static int default_threads(void)
{
	const char *e = getenv("FW_THREADS");
	int n = e ? atoi(e) : 0;

	if (n <= 0)
		n = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (n <= 0)
		n = 1;
	return n > MAX_THREADS ? MAX_THREADS : n;
}

/* Once per process, from whichever thread comes first: OpenBLAS set to one
 * thread (each sgemm runs on one pool thread, see matmul.c), and the
 * default count where none was set yet.  An explicit count set before or
 * after is kept: the default only replaces 0. */
static void init_once(void)
{
	int unset = 0;

	openblas_set_num_threads(1);
	atomic_compare_exchange_strong_explicit(&nthreads, &unset, default_threads(),
						memory_order_relaxed, memory_order_relaxed);
}

void fw_kernels_set_threads(int n)
{
	if (n <= 0)
		n = default_threads();
	if (n > MAX_THREADS)
		n = MAX_THREADS;
	atomic_store_explicit(&nthreads, n, memory_order_relaxed);
	pthread_once(&once, init_once);
}

int fw_kernels_threads(void)
{
	int n = atomic_load_explicit(&nthreads, memory_order_relaxed);

	if (n)
		return n;
	pthread_once(&once, init_once);
	return atomic_load_explicit(&nthreads, memory_order_relaxed);
}

void fw_parallel_for(int n, void (*fn)(void *ctx, int i0, int i1), void *ctx)
{
	int parts = fw_kernels_threads();

	if (parts > n)
		parts = n;
	if (parts <= 1 || in_pool) {
		if (n > 0)
			fn(ctx, 0, n);
		return;
	}
	/* One parallel call at a time: callers from several threads queue. */
	pthread_mutex_lock(&call_mu);
	pthread_mutex_lock(&mu);
	while (nworkers < parts) {
		pthread_t t;
		pthread_attr_t a;

		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &a, worker, (void *)(long)(nworkers + 1)))
			break;
		pthread_attr_destroy(&a);
		nworkers++;
	}
	if (parts > nworkers + 1)
		parts = nworkers + 1;
	job_fn = fn;
	job_ctx = ctx;
	job_n = n;
	job_parts = parts;
	pending = parts - 1;
	gen++;
	pthread_cond_broadcast(&go);
	pthread_mutex_unlock(&mu);

	in_pool = 1;
	{
		int i0, i1;

		chunk(0, parts, n, &i0, &i1);
		if (i1 > i0)
			fn(ctx, i0, i1);
	}
	in_pool = 0;

	pthread_mutex_lock(&mu);
	while (pending > 0)
		pthread_cond_wait(&done, &mu);
	pthread_mutex_unlock(&mu);
	pthread_mutex_unlock(&call_mu);
}
