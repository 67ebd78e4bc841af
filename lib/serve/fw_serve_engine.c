/*
 * fw_serve_engine.c — jobs and the engine of one checkpoint: the
 * scheduler that admits queued requests into free sequences of the
 * decoding state (sharing the prompt prefix a live sequence holds), draws
 * a token for every live sequence and runs one batched step for all of
 * them (fw_gen_step_first), and retires what ended, the last live sequence
 * taking its place so that the live ones stay at the front.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_model.h"
#include "fw_serve_int.h"
#include "fw_tok.h"

void serve_job_free(struct job *j)
{
	for (int k = 0; j->ch && k < j->n; k++) {
		struct choice *c = &j->ch[k];
		free(c->tok);
		free(c->lp);
		free(c->tend);
		free(c->top_id);
		free(c->top_lp);
		fw_buf_free(&c->text);
	}
	for (int i = 0; i < j->nstops; i++)
		free(j->stops[i]);
	free(j->ch);
	free(j->rng);
	free(j->ids);
	free(j->stop_ids);
	free(j->plp);
	pthread_cond_destroy(&j->cv);
	free(j);
}

/* Lets go of one reference to j (under a->mu when locked is set). */
void serve_job_drop(struct arm *a, struct job *j, int locked)
{
	int last;

	if (!locked)
		pthread_mutex_lock(&a->mu);
	last = --j->refs == 0;
	if (!locked)
		pthread_mutex_unlock(&a->mu);
	if (last)
		serve_job_free(j);
}

/* Queues j on a; the engine holds one reference.  Returns 0, or -1 when
 * out of memory. */
int serve_submit(struct arm *a, struct job *j)
{
	pthread_mutex_lock(&a->mu);
	if (a->nq == a->capq) {
		int cap = a->capq ? 2 * a->capq : 16;
		struct job **q = realloc(a->queue, sizeof *q * (size_t)cap);
		if (!q) {
			pthread_mutex_unlock(&a->mu);
			return -1;
		}
		a->queue = q;
		a->capq = cap;
	}
	j->refs = 2;
	j->t0 = serve_now();
	a->queue[a->nq++] = j;
	pthread_cond_signal(&a->work);
	pthread_mutex_unlock(&a->mu);
	return 0;
}

/* Waits (under a->mu) until j is finished. */
void serve_wait_done(struct arm *a, struct job *j)
{
	pthread_mutex_lock(&a->mu);
	while (!j->finished)
		pthread_cond_wait(&j->cv, &a->mu);
	pthread_mutex_unlock(&a->mu);
}

static int is_stop_id(const struct arm *a, const struct job *j, int32_t id)
{
	for (int i = 0; !j->ignore_eos && i < a->b->nstop; i++)
		if (a->b->stop[i] == id)
			return 1;
	for (int i = 0; i < j->nstop_ids; i++)
		if (j->stop_ids[i] == id)
			return 1;
	return 0;
}

/* The ntop most likely ids of logits (V) with their log-probs, best first.
 * Cannot fail. */
static void top_logprobs(const float *logits, int V, int ntop, int32_t *id, float *lp)
{
	double mx = -INFINITY, z = 0;
	int n = 0;

	for (int v = 0; v < V; v++)
		if (logits[v] > mx)
			mx = logits[v];
	for (int v = 0; v < V; v++)
		z += exp((double)logits[v] - mx);
	double lse = mx + log(z);
	for (int v = 0; v < V; v++) {
		float x = logits[v];
		int i;
		if (n == ntop && x <= lp[n - 1])
			continue;
		i = n < ntop ? n++ : n - 1;
		while (i > 0 && lp[i - 1] < x) {
			lp[i] = lp[i - 1];
			id[i] = id[i - 1];
			i--;
		}
		lp[i] = x;
		id[i] = v;
	}
	for (int i = 0; i < n; i++)
		lp[i] = (float)(lp[i] - lse);
}

/* Appends token id (log-prob lp) to choice c of j under a's lock, and ends
 * it at an end token, a stop string or max_tokens.  Returns 0, or -1 when
 * out of memory. */
static int take(struct arm *a, struct job *j, struct choice *c, int32_t id, float lp,
		const int32_t *tid, const float *tlp)
{
	if (c->n == c->cap)
		return -1; /* cap is max_tokens: the engine ends before */
	c->tok[c->n] = id;
	c->lp[c->n] = lp;
	if (j->ntop) {
		memcpy(c->top_id + (size_t)c->n * j->ntop, tid, sizeof(int32_t) * j->ntop);
		memcpy(c->top_lp + (size_t)c->n * j->ntop, tlp, sizeof(float) * j->ntop);
	}
	if (is_stop_id(a, j, id)) {
		c->tend[c->n++] = c->text.n;
		c->finish = "stop";
		c->stop_tok = c->done = 1;
		return 0;
	}
	size_t before = c->text.n;
	if (!fw_tok_is_special(a->b->t, id)) {
		size_t pn;
		const char *pc = fw_tok_piece(a->b->t, id, &pn);
		if (pc && fw_buf_append(&c->text, pc, pn))
			return -1;
	}
	c->tend[c->n++] = c->text.n;
	c->len = c->text.n;
	/* a stop string that ends in the new bytes: the answer ends before it */
	for (int i = 0; i < j->nstops && c->text.n > before; i++) {
		size_t L = j->stoplen[i], from = before >= L - 1 ? before - (L - 1) : 0;
		const char *t = (const char *)c->text.p;
		const char *hit = c->text.n >= L && c->text.n - from >= L
					  ? memmem(t + from, c->text.n - from, j->stops[i], L)
					  : NULL;
		if (hit && (size_t)(hit - t) < c->len) {
			c->len = (size_t)(hit - t);
			c->finish = "stop";
			c->done = 1;
		}
	}
	if (!c->done && c->n == j->max_tokens) {
		c->finish = "length";
		c->done = 1;
	}
	return 0;
}

static void finish_job(struct arm *a, struct job *j)
{
	double t = serve_now() - j->t0;
	int b = 0;

	j->finished = 1;
	pthread_cond_broadcast(&j->cv);
	a->nrun--;
	if (!j->failed) {
		a->ok++;
		a->prompt_tokens += j->nids;
		for (int k = 0; k < j->n; k++)
			a->gen_tokens += (unsigned long long)j->ch[k].n;
		while (b < NBUCKET && t > fw_serve_buckets[b])
			b++;
		a->hist[b]++;
		a->lat_sum += t;
	}
}

/* Runs a scoring job: the log-prob of each prompt id given the ones before
 * it, through the decoding state's last sequence (free while the engine
 * runs it).  Cannot fail but for the model's own errors, kept in j. */
static void run_score(struct arm *a, struct job *j, int slot)
{
	int32_t *tg = malloc(sizeof(int32_t) * j->nids);

	j->plp = calloc(j->nids + 1, sizeof *j->plp);
	if (!tg || !j->plp) {
		snprintf(j->err, sizeof j->err, "out of memory");
		j->failed = 1;
		free(tg);
		return;
	}
	for (size_t i = 0; i + 1 < j->nids; i++)
		tg[i] = j->ids[i + 1];
	tg[j->nids - 1] = -1;
	if (fw_gen_truncate(a->g, slot, 0, j->err, sizeof j->err) ||
	    fw_gen_score(a->g, slot, j->ids, tg, (int)j->nids, j->plp + 1, j->err,
			 sizeof j->err))
		j->failed = 1;
	/* plp[i] is the log-prob of ids[i]; plp[0] is not defined */
	j->plp[0] = 0;
	free(tg);
}

static void *engine(void *arg)
{
	struct arm *a = arg;
	int V = a->b->m->cfg.vocab, S = a->S, nact = 0;
	struct seq *seqs = a->seqs;
	int32_t *next = a->next, *tid = a->tid;
	float *lps = a->lps, *tlp = a->tlp, *scratch = a->scratch;
	char err[256];

	pthread_mutex_lock(&a->mu);
	for (;;) {
		while (!a->srv->stop && nact == 0 && a->nq == 0)
			pthread_cond_wait(&a->work, &a->mu);
		if (a->srv->stop)
			break;
		/* admit from the head of the queue while its choices fit */
		struct job *adm[64];
		int nadm = 0, room = S - nact;
		while (a->nq && nadm < 64) {
			struct job *j = a->queue[0];
			int need = j->score ? 1 : j->n;
			if (!j->cancelled && need > room)
				break;
			memmove(a->queue, a->queue + 1, sizeof *a->queue * (size_t)--a->nq);
			j->admitted = 1;
			a->nrun++;
			if (j->cancelled) {
				j->failed = 1;
				finish_job(a, j);
				serve_job_drop(a, j, 1);
				continue;
			}
			room -= j->score ? 0 : need;
			adm[nadm++] = j;
			if (j->score)
				break; /* runs alone in the free sequence */
		}
		pthread_mutex_unlock(&a->mu);
		unsigned long long shared = 0;
		for (int i = 0; i < nadm; i++) {
			struct job *j = adm[i];
			if (j->score) {
				run_score(a, j, nact);
				continue;
			}
			j->t_first = 0;
			/* the longest prompt prefix a live sequence holds (the
			 * last prompt id is run anew: its logits are wanted) */
			int from = -1;
			size_t L = 0;
			for (int s = 0; s < nact; s++) {
				const struct job *o = seqs[s].j;
				size_t l = 0, lim = o->nids < j->nids - 1 ? o->nids : j->nids - 1;
				if (o->failed || seqs[s].k)
					continue;
				while (l < lim && o->ids[l] == j->ids[l])
					l++;
				if (l > L) {
					L = l;
					from = s;
				}
			}
			if (L < MIN_SHARE)
				L = 0;
			if ((L ? fw_gen_copy(a->g, from, nact, j->err, sizeof j->err)
			       : 0) ||
			    fw_gen_truncate(a->g, nact, (int)L, j->err, sizeof j->err) ||
			    fw_gen_score(a->g, nact, j->ids + L, NULL, (int)(j->nids - L), NULL,
					 j->err, sizeof j->err)) {
				j->failed = 1;
				continue;
			}
			shared += L;
			for (int k = 0; k < j->n; k++) {
				if (k)
					fw_gen_copy(a->g, nact - k, nact, err, sizeof err);
				seqs[nact].j = j;
				seqs[nact++].k = k;
			}
			j->live = j->n;
		}
		/* one token for every live sequence */
		const float *logits = fw_gen_logits(a->g);
		for (int s = 0; s < nact; s++) {
			struct job *j = seqs[s].j;
			next[s] = fw_sample(logits + (size_t)s * V, V, &j->s, &j->rng[seqs[s].k],
					    scratch, &lps[s]);
			if (j->ntop)
				top_logprobs(logits + (size_t)s * V, V, j->ntop,
					     tid + (size_t)s * MAX_TOP, tlp + (size_t)s * MAX_TOP);
		}
		pthread_mutex_lock(&a->mu);
		a->shared += shared;
		for (int i = 0; i < nadm; i++)
			if (adm[i]->score || adm[i]->failed) {
				finish_job(a, adm[i]);
				serve_job_drop(a, adm[i], 1);
			}
		for (int s = 0; s < nact; s++) {
			struct job *j = seqs[s].j;
			if (take(a, j, &j->ch[seqs[s].k], next[s], lps[s], tid + (size_t)s * MAX_TOP,
				 tlp + (size_t)s * MAX_TOP)) {
				snprintf(j->err, sizeof j->err, "out of memory");
				j->failed = 1;
			}
			if (!j->t_first)
				j->t_first = serve_now();
		}
		/* retire what ended, the last live sequence taking its place */
		for (int s = 0; s < nact;) {
			struct job *j = seqs[s].j;
			struct choice *c = &j->ch[seqs[s].k];
			if (!(c->done || j->cancelled || j->failed)) {
				s++;
				continue;
			}
			c->done = 1;
			if (!c->finish)
				c->finish = "length";
			if (--j->live == 0) {
				finish_job(a, j);
				serve_job_drop(a, j, 1);
			}
			if (--nact > s) {
				fw_gen_copy(a->g, nact, s, err, sizeof err);
				seqs[s] = seqs[nact];
				next[s] = next[nact];
			}
		}
		/* each connection wakes for its own job only: streams at every
		 * token, the others when theirs ends (finish_job) */
		for (int s = 0; s < nact; s++)
			if (seqs[s].j->stream)
				pthread_cond_signal(&seqs[s].j->cv);
		if (nact) {
			a->steps++;
			a->step_seqs += (unsigned long long)nact;
		}
		pthread_mutex_unlock(&a->mu);
		if (nact && fw_gen_step_first(a->g, nact, next, err, sizeof err)) {
			pthread_mutex_lock(&a->mu);
			for (int s = 0; s < nact; s++) {
				struct job *j = seqs[s].j;
				if (!j->failed) {
					snprintf(j->err, sizeof j->err, "%s", err);
					j->failed = 1;
				}
			}
			pthread_mutex_unlock(&a->mu);
			/* the next round retires them */
		}
		pthread_mutex_lock(&a->mu);
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

int serve_engine_start(struct arm *a, char *err, size_t errlen)
{
	size_t S = (size_t)a->S, V = (size_t)a->b->m->cfg.vocab;

	if (!(a->seqs = calloc(S, sizeof *a->seqs)) || !(a->next = calloc(S, sizeof *a->next)) ||
	    !(a->lps = calloc(S, sizeof *a->lps)) ||
	    !(a->tid = calloc(S * MAX_TOP, sizeof *a->tid)) ||
	    !(a->tlp = calloc(S * MAX_TOP, sizeof *a->tlp)) ||
	    !(a->scratch = malloc(sizeof(float) * 2 * V))) {
		fw_seterr(err, errlen, "%s: out of memory for the engine", a->name);
		return -1;
	}
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->work, NULL);
	if (pthread_create(&a->th, NULL, engine, a)) {
		fw_seterr(err, errlen, "%s: cannot start the decoding thread", a->name);
		pthread_mutex_destroy(&a->mu);
		pthread_cond_destroy(&a->work);
		return -1;
	}
	a->started = 1;
	return 0;
}

void serve_engine_stop(struct arm *a)
{
	if (!a->started)
		return;
	pthread_mutex_lock(&a->mu);
	pthread_cond_broadcast(&a->work);
	pthread_mutex_unlock(&a->mu);
	pthread_join(a->th, NULL);
	a->started = 0;
}
