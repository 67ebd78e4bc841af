/*
 * test_pool.c — the ordered worker pool (fw_cli.h): results come back in
 * submission order whatever the workers' timing, a failing job's rc reaches
 * done() and the pool goes on, an abort hands every later job to drop(),
 * and one worker runs inline with the same results.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "test.h"
#include "fw_base.h"
#include "fw_cli.h"

enum { NJOBS = 300 };

struct job {
	int n, out;
	int seen; /* times done() or drop() saw it */
	unsigned delay_us;
};

struct ctx {
	int order[NJOBS], ndone, ndrop, abort_at, fail_every;
	int inits, finis;
	pthread_mutex_t mu;
	pthread_t caller;
	int wrong_thread;
};

static void *winit(void *arg)
{
	struct ctx *c = arg;
	pthread_mutex_lock(&c->mu);
	c->inits++;
	pthread_mutex_unlock(&c->mu);
	return c;
}

static void wfini(void *st, void *arg)
{
	struct ctx *c = arg;
	pthread_mutex_lock(&c->mu);
	c->finis += st == c;
	pthread_mutex_unlock(&c->mu);
}

static int work(void *st, void *jp, void *arg)
{
	struct job *j = jp;
	struct ctx *c = arg;
	(void)st;
	usleep(j->delay_us);
	j->out = j->n * j->n;
	return c->fail_every && j->n % c->fail_every == 0 ? 1 : 0;
}

static int done(void *jp, int rc, void *arg)
{
	struct job *j = jp;
	struct ctx *c = arg;
	if (!pthread_equal(pthread_self(), c->caller))
		c->wrong_thread = 1;
	j->seen++;
	CHECK_EQ_INT(j->out, j->n * j->n);
	CHECK_EQ_INT(rc, c->fail_every && j->n % c->fail_every == 0);
	c->order[c->ndone++] = j->n;
	return j->n == c->abort_at ? -1 : 0;
}

static void drop(void *jp, void *arg)
{
	struct job *j = jp;
	struct ctx *c = arg;
	j->seen++;
	c->ndrop++;
}

/* Runs NJOBS jobs with random delays through a pool of `workers`. */
static int run(struct ctx *c, struct job *jobs, int workers, size_t window, uint64_t seed)
{
	struct fw_pool_conf conf = {
		.workers = workers, .window = window, .worker_init = winit,
		.worker_fini = wfini, .work = work, .done = done, .drop = drop, .arg = c,
	};
	pthread_mutex_init(&c->mu, NULL);
	c->caller = pthread_self();
	struct fw_pool *p = fw_pool_new(&conf);
	CHECK(p != NULL);
	if (!p)
		return -2;
	int rc = 0;
	for (int i = 0; i < NJOBS; i++) {
		jobs[i] = (struct job){ .n = i, .out = -1, .delay_us = (unsigned)(fw_rand64(&seed) % 1000) };
		if (fw_pool_submit(p, &jobs[i]) < 0)
			rc = -1;
	}
	if (fw_pool_finish(p) < 0)
		rc = -1;
	CHECK_EQ_INT(fw_pool_finish(p), rc);
	fw_pool_free(p);
	return rc;
}

TEST(pool_keeps_input_order_under_random_delays)
{
	static struct job jobs[NJOBS];
	int widths[] = { 2, 4, 7 };
	for (int w = 0; w < 3; w++) {
		struct ctx c = { .abort_at = -1 };
		CHECK_EQ_INT(run(&c, jobs, widths[w], 0, 42 + (uint64_t)w), 0);
		CHECK_EQ_INT(c.ndone, NJOBS);
		CHECK_EQ_INT(c.ndrop, 0);
		for (int i = 0; i < NJOBS; i++) {
			CHECK_EQ_INT(c.order[i], i);
			CHECK_EQ_INT(jobs[i].seen, 1);
		}
		CHECK_EQ_INT(c.inits, widths[w]);
		CHECK_EQ_INT(c.finis, widths[w]);
		CHECK(!c.wrong_thread);
	}
}

TEST(pool_passes_a_failing_jobs_rc_and_goes_on)
{
	static struct job jobs[NJOBS];
	struct ctx c = { .abort_at = -1, .fail_every = 7 };
	CHECK_EQ_INT(run(&c, jobs, 3, 5, 9), 0);
	CHECK_EQ_INT(c.ndone, NJOBS);
	for (int i = 0; i < NJOBS; i++)
		CHECK_EQ_INT(c.order[i], i);
}

TEST(pool_abort_delivers_nothing_after_the_fault_and_drops_the_rest)
{
	static struct job jobs[NJOBS];
	for (int w = 1; w <= 4; w += 3) {
		struct ctx c = { .abort_at = 100 };
		CHECK_EQ_INT(run(&c, jobs, w, 0, 7), -1);
		CHECK_EQ_INT(c.ndone, 101);
		CHECK_EQ_INT(c.ndrop, NJOBS - 101);
		for (int i = 0; i <= 100; i++)
			CHECK_EQ_INT(c.order[i], i);
		/* every job reaches exactly one of done() and drop() */
		int seen = 0;
		for (int i = 0; i < NJOBS; i++) {
			CHECK_EQ_INT(jobs[i].seen, 1);
			seen += jobs[i].seen;
		}
		CHECK_EQ_INT(seen, NJOBS);
	}
}

TEST(pool_with_one_worker_runs_inline_in_order)
{
	static struct job jobs[NJOBS];
	struct ctx c = { .abort_at = -1, .fail_every = 5 };
	CHECK_EQ_INT(run(&c, jobs, 1, 0, 3), 0);
	CHECK_EQ_INT(c.ndone, NJOBS);
	CHECK_EQ_INT(c.inits, 1);
	CHECK_EQ_INT(c.finis, 1);
	CHECK(!c.wrong_thread);
	for (int i = 0; i < NJOBS; i++)
		CHECK_EQ_INT(c.order[i], i);
}

TEST(pool_drain_delivers_every_job_so_far_and_takes_more)
{
	static struct job jobs[NJOBS];
	for (int w = 1; w <= 4; w += 3) {
		struct ctx c = { .abort_at = -1 };
		struct fw_pool_conf conf = { .workers = w, .work = work, .done = done,
					     .drop = drop, .arg = &c };
		c.caller = pthread_self();
		struct fw_pool *p = fw_pool_new(&conf);
		CHECK(p != NULL);
		if (!p)
			return;
		uint64_t seed = 5;
		for (int i = 0; i < NJOBS; i++) {
			jobs[i] = (struct job){ .n = i, .out = -1,
						.delay_us = (unsigned)(fw_rand64(&seed) % 300) };
			CHECK_EQ_INT(fw_pool_submit(p, &jobs[i]), 0);
			if (i % 50 == 49) {
				CHECK_EQ_INT(fw_pool_drain(p), 0);
				CHECK_EQ_INT(c.ndone, i + 1);
			}
		}
		CHECK_EQ_INT(fw_pool_finish(p), 0);
		fw_pool_free(p);
		CHECK_EQ_INT(c.ndone, NJOBS);
		for (int i = 0; i < NJOBS; i++)
			CHECK_EQ_INT(c.order[i], i);
	}
}

TEST(pool_drain_after_an_abort_says_so)
{
	static struct job jobs[NJOBS];
	struct ctx c = { .abort_at = 10 };
	struct fw_pool_conf conf = { .workers = 3, .work = work, .done = done, .drop = drop,
				     .arg = &c };
	c.caller = pthread_self();
	struct fw_pool *p = fw_pool_new(&conf);
	CHECK(p != NULL);
	if (!p)
		return;
	for (int i = 0; i < 20; i++) {
		jobs[i] = (struct job){ .n = i, .out = -1 };
		fw_pool_submit(p, &jobs[i]);
	}
	CHECK_EQ_INT(fw_pool_drain(p), -1);
	CHECK_EQ_INT(c.ndone, 11);
	CHECK_EQ_INT(c.ndone + c.ndrop, 20);
	CHECK_EQ_INT(fw_pool_finish(p), -1);
	fw_pool_free(p);
}

TEST_MAIN()
