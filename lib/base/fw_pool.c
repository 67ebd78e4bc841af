/*
 * fw_pool.c — the ordered worker pool behind every -j.  See fw_cli.h.
 *
 * The jobs in flight sit in a ring of `window` slots indexed by their
 * submission number: next_out <= next_take <= next_seq, and the slots from
 * next_out to next_seq are in use.  Workers take slots in order and mark
 * them done; the caller's thread delivers the done prefix.  One mutex
 * guards the counters and the slots' states.
 */
#include "fw_cli.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { SLOT_PENDING, SLOT_RUNNING, SLOT_DONE };

struct slot {
	void *job;
	int state, rc;
};

struct fw_pool {
	struct fw_pool_conf c;
	pthread_mutex_t mu;
	pthread_cond_t cv_work, cv_done;
	struct slot *slots;
	pthread_t *threads;
	int nthreads;
	uint64_t next_seq, next_take, next_out;
	int running;  /* jobs a worker is inside work() for */
	int closing;  /* no more submissions: workers leave when idle */
	int stop;     /* aborted: workers take nothing more */
	int aborted;
	void *inline_state; /* workers == 1: the one worker's state */
};

static void *worker(void *arg)
{
	struct fw_pool *p = arg;
	void *st = p->c.worker_init ? p->c.worker_init(p->c.arg) : NULL;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->stop && p->next_take == p->next_seq && !p->closing)
			pthread_cond_wait(&p->cv_work, &p->mu);
		if (p->stop || p->next_take == p->next_seq)
			break;
		struct slot *s = &p->slots[p->next_take++ % p->c.window];
		assert(s->state == SLOT_PENDING);
		s->state = SLOT_RUNNING;
		p->running++;
		pthread_mutex_unlock(&p->mu);
		int rc = p->c.work(st, s->job, p->c.arg);
		pthread_mutex_lock(&p->mu);
		s->rc = rc;
		s->state = SLOT_DONE;
		p->running--;
		pthread_cond_broadcast(&p->cv_done);
	}
	pthread_mutex_unlock(&p->mu);
	if (p->c.worker_fini)
		p->c.worker_fini(st, p->c.arg);
	return NULL;
}

struct fw_pool *fw_pool_new(const struct fw_pool_conf *conf)
{
	assert(conf && conf->work && conf->done && conf->workers >= 1);
	struct fw_pool *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->c = *conf;
	if (!p->c.window)
		p->c.window = p->c.workers * 4 < 8 ? 8 : (size_t)p->c.workers * 4;
	if (p->c.workers == 1) {
		p->inline_state = p->c.worker_init ? p->c.worker_init(p->c.arg) : NULL;
		return p;
	}
	p->slots = calloc(p->c.window, sizeof *p->slots);
	p->threads = calloc((size_t)p->c.workers, sizeof *p->threads);
	if (!p->slots || !p->threads) {
		free(p->slots);
		free(p->threads);
		free(p);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv_work, NULL);
	pthread_cond_init(&p->cv_done, NULL);
	for (; p->nthreads < p->c.workers; p->nthreads++) {
		int e = pthread_create(&p->threads[p->nthreads], NULL, worker, p);
		if (e) {
			fw_pool_free(p);
			errno = e;
			return NULL;
		}
	}
	return p;
}

/* Called with the lock held after a done() asked to stop: waits for the
 * jobs inside work() and gives every undelivered job to drop(). */
static void abort_locked(struct fw_pool *p)
{
	p->stop = p->aborted = 1;
	pthread_cond_broadcast(&p->cv_work);
	while (p->running)
		pthread_cond_wait(&p->cv_done, &p->mu);
	for (; p->next_out < p->next_seq; p->next_out++)
		if (p->c.drop)
			p->c.drop(p->slots[p->next_out % p->c.window].job, p->c.arg);
	p->next_take = p->next_seq;
}

/* Delivers the done prefix; waits until next_out >= until. */
static void deliver(struct fw_pool *p, uint64_t until)
{
	pthread_mutex_lock(&p->mu);
	while (!p->aborted && p->next_out < p->next_seq) {
		struct slot *s = &p->slots[p->next_out % p->c.window];
		if (s->state != SLOT_DONE) {
			if (p->next_out >= until)
				break;
			pthread_cond_wait(&p->cv_done, &p->mu);
			continue;
		}
		pthread_mutex_unlock(&p->mu);
		int r = p->c.done(s->job, s->rc, p->c.arg);
		pthread_mutex_lock(&p->mu);
		p->next_out++;
		if (r < 0)
			abort_locked(p);
	}
	pthread_mutex_unlock(&p->mu);
}

int fw_pool_submit(struct fw_pool *p, void *job)
{
	assert(p && !p->closing);
	if (p->aborted) {
		if (p->c.drop)
			p->c.drop(job, p->c.arg);
		return -1;
	}
	if (p->c.workers == 1) {
		int rc = p->c.work(p->inline_state, job, p->c.arg);
		if (p->c.done(job, rc, p->c.arg) < 0)
			p->aborted = 1;
		return p->aborted ? -1 : 0;
	}
	/* a slot is free once job next_seq - window is delivered */
	if (p->next_seq >= p->c.window)
		deliver(p, p->next_seq - p->c.window + 1);
	if (p->aborted) {
		if (p->c.drop)
			p->c.drop(job, p->c.arg);
		return -1;
	}
	pthread_mutex_lock(&p->mu);
	assert(p->next_seq - p->next_out < p->c.window);
	struct slot *s = &p->slots[p->next_seq % p->c.window];
	s->job = job;
	s->state = SLOT_PENDING;
	p->next_seq++;
	pthread_cond_signal(&p->cv_work);
	pthread_mutex_unlock(&p->mu);
	deliver(p, 0);
	return p->aborted ? -1 : 0;
}

int fw_pool_drain(struct fw_pool *p)
{
	assert(p && !p->closing);
	if (p->c.workers > 1)
		deliver(p, p->next_seq);
	return p->aborted ? -1 : 0;
}

int fw_pool_finish(struct fw_pool *p)
{
	assert(p);
	if (p->c.workers == 1) {
		p->closing = 1;
	} else if (!p->closing) {
		/* the workers read closing: it changes under the lock only */
		fw_pool_drain(p);
		pthread_mutex_lock(&p->mu);
		p->closing = 1;
		pthread_cond_broadcast(&p->cv_work);
		pthread_mutex_unlock(&p->mu);
	}
	return p->aborted ? -1 : 0;
}

void fw_pool_free(struct fw_pool *p)
{
	if (!p)
		return;
	if (p->c.workers == 1) {
		if (p->c.worker_fini)
			p->c.worker_fini(p->inline_state, p->c.arg);
		free(p);
		return;
	}
	if (p->nthreads == p->c.workers)
		fw_pool_finish(p);
	else {
		/* a failed start: the started workers have nothing to do */
		pthread_mutex_lock(&p->mu);
		p->closing = 1;
		pthread_cond_broadcast(&p->cv_work);
		pthread_mutex_unlock(&p->mu);
	}
	for (int i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv_work);
	pthread_cond_destroy(&p->cv_done);
	free(p->slots);
	free(p->threads);
	free(p);
}
