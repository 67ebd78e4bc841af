/*
 * fw_teach_score.c — records scored by the teacher's scorer, what
 * `ckpt score` writes: the same numbers as teach's for the same ids
 * (fw_teach.h), and a run of them on the worker pool.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_base.h"
#include "fw_cli.h"
#include "fw_stream.h"
#include "fw_teach.h"
#include "fw_train.h"

struct fw_recscore {
	struct fw_model *m;
	const struct fw_tok *t;
	struct fw_kvscore *ks;
	struct fw_tok_ids ids;   /* a text's encoding */
	struct fw_buf lb, tb;    /* fw_score_record's scratch */
	int32_t *seq;            /* max_position_embeddings ids */
	float *lp;
	char err[512];           /* the last record's fault */
};

struct fw_recscore *fw_recscore_new(struct fw_model *m, const struct fw_tok *t, char *err,
				    size_t errlen)
{
	struct fw_recscore *s = calloc(1, sizeof(*s));

	if (!s || !(s->seq = malloc(sizeof(int32_t) * m->cfg.max_pos)) ||
	    !(s->lp = malloc(sizeof(float) * m->cfg.max_pos))) {
		fw_seterr(err, errlen, "out of memory");
		fw_recscore_free(s);
		return NULL;
	}
	if (!(s->ks = fw_kvscore_new(m, err, errlen))) {
		fw_recscore_free(s);
		return NULL;
	}
	m->no_grad = 1;
	s->m = m;
	s->t = t;
	return s;
}

void fw_recscore_free(struct fw_recscore *s)
{
	if (!s)
		return;
	fw_kvscore_free(s->ks);
	fw_tok_ids_release(&s->ids);
	fw_buf_release(&s->lb);
	fw_buf_release(&s->tb);
	free(s->seq);
	free(s->lp);
	free(s);
}

int fw_recscore_run(struct fw_recscore *s, struct fw_mpv rec, struct fw_buf *out,
		    const char **why)
{
	int n, add_tokens;

	*why = NULL;
	n = fw_score_ids(rec, s->t, s->m->cfg.vocab, s->m->cfg.max_pos, s->seq, &s->ids,
			 &add_tokens, why);
	if (n >= 2 && fw_kvscore_run(s->ks, s->seq, n, 0, s->lp, s->err, sizeof(s->err)))
		*why = s->err;
	if (*why)
		return 0;
	if (fw_score_record(out, rec, s->seq, n, s->lp, add_tokens, &s->lb, &s->tb))
		return -1;
	return 1;
}

/* ---- a scoring run on the ordered pool ---------------------------------------- */

/*
 * The records go to the shared ordered pool (fw_pool) of o->workers
 * threads and are written back in input order by the caller's thread,
 * which also reads.  The threads share the model and the tokenizer, which
 * scoring only reads (fw_model.h, fw_tok.h); each has its own scorer, the
 * decoding state and buffers a record is scored in.
 */

/* One record: a copy of its bytes, where it was read, what scoring made. */
struct score_job {
	struct fw_buf in, out;
	char *file;
	uint64_t index, offset;
	char why[512];           /* why it cannot be scored (rc 0) */
};

/* The run the pool's callbacks share. */
struct score_run {
	struct fw_recscore **rs; /* one per worker, made before they start */
	int nrs, next;           /* scorers; the next to hand to a worker */
	pthread_mutex_t mu;
	struct fw_pool *pool;
	struct fw_writer *w;
	struct fw_progress *meter; /* fw_each_record()'s, while it runs */
	int bad;                 /* a record was refused */
};

static void job_free(struct score_job *j)
{
	if (!j)
		return;
	fw_buf_release(&j->in);
	fw_buf_release(&j->out);
	free(j->file);
	free(j);
}

/* A worker's scorer: each of the pool's threads gets one of its own. */
static void *take_scorer(void *arg)
{
	struct score_run *sr = arg;
	struct fw_recscore *rs;

	pthread_mutex_lock(&sr->mu);
	rs = sr->rs[sr->next++ % sr->nrs];
	pthread_mutex_unlock(&sr->mu);
	return rs;
}

/* On a worker: fw_recscore_run()'s result (1 scored, 0 refused, -1 out
 * of memory). */
static int score_job(void *state, void *job, void *arg)
{
	struct score_job *j = job;
	const char *why;
	int rc = fw_recscore_run(state, (struct fw_mpv){ j->in.p, j->in.n }, &j->out, &why);

	(void)arg;
	if (rc == 0)
		snprintf(j->why, sizeof(j->why), "%s", why);
	return rc;
}

/* On the caller's thread, in input order: the diagnostic or the record.
 * Returns -1, which stops the pool, when memory runs out or a write fails. */
static int write_job(void *job, int rc, void *arg)
{
	struct score_run *sr = arg;
	struct score_job *j = job;
	int ret = 0;

	if (rc == 0) {
		if (sr->meter)
			fw_progress_pause(sr->meter);
		fw_warn_rec(j->file, j->index, j->offset, "%s", j->why);
		sr->bad = 1;
	} else if (rc < 0) {
		fw_warn("out of memory");
		ret = -1;
	} else if (fw_writer_put(sr->w, j->out.p, j->out.n)) {
		fw_warn("%s", fw_writer_error(sr->w));
		ret = -1;
	}
	job_free(j);
	return ret;
}

static void drop_job(void *job, void *arg)
{
	(void)arg;
	job_free(job);
}

/* fw_each_record()'s function: the record, copied, to the pool. */
static int submit_record(struct fw_each *e, const struct fw_rec *rec, const char *file)
{
	struct score_run *sr = e->arg;
	struct score_job *j = calloc(1, sizeof(*j));

	sr->meter = e->meter;
	if (!j || fw_buf_append(&j->in, rec->v.p, rec->v.n) || !(j->file = strdup(file))) {
		job_free(j);
		fw_warn("out of memory");
		return -1;
	}
	j->index = rec->index;
	j->offset = rec->offset;
	return fw_pool_submit(sr->pool, j);
}

int fw_recscore_files(struct fw_model *m, const struct fw_tok *t,
		      const struct fw_recscore_opts *o, int argc, char **argv, int first)
{
	struct score_run sr = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct fw_pool_conf pc = { .workers = o->workers, .worker_init = take_scorer,
				   .work = score_job, .done = write_job, .drop = drop_job,
				   .arg = &sr };
	struct fw_each e = { .go_on = 1, .progress = o->progress, .shard_k = o->shard_k,
			     .shard_n = o->shard_n, .arg = &sr };
	char err[1024];
	int rc = FW_EXIT_DATA;

	if (!(sr.rs = calloc(o->workers, sizeof(*sr.rs)))) {
		fw_warn("out of memory");
		goto out;
	}
	for (; sr.nrs < o->workers; sr.nrs++)
		if (!(sr.rs[sr.nrs] = fw_recscore_new(m, t, err, sizeof(err)))) {
			fw_warn("%s", err);
			goto out;
		}
	if (!(sr.w = fw_writer_open(o->out, o->level, err, sizeof(err)))) {
		fw_warn("%s", err);
		goto out;
	}
	if (!(sr.pool = fw_pool_new(&pc))) {
		fw_warn("cannot start a worker thread");
		goto out;
	}
	rc = fw_each_record(&e, argc, argv, first, submit_record);
	sr.meter = NULL; /* the meter has ended; the last records come after it */
	if (fw_pool_finish(sr.pool) || e.stopped) {
		/* out of memory or a write failed: what was written stays
		 * unfinished */
		rc = FW_EXIT_DATA;
		goto out;
	}
	if (fw_writer_close(sr.w, err, sizeof(err))) {
		fw_warn("%s", err);
		rc = FW_EXIT_DATA;
	}
	sr.w = NULL;
	if (sr.bad)
		rc = FW_EXIT_DATA;
out:
	fw_pool_free(sr.pool);
	fw_writer_abort(sr.w);
	for (int i = 0; i < sr.nrs; i++)
		fw_recscore_free(sr.rs[i]);
	free(sr.rs);
	return rc;
}
