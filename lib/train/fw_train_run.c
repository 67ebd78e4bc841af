/*
 * fw_train_run.c — a training run: resume a checkpoint where it stopped,
 * take the steps over a batch, write the next checkpoint and the metrics;
 * the objectives train-step names and the private tasks it refuses
 * (fw_train.h).
 */
#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fw_base.h"
#include "fw_cli.h"
#include "fw_mp.h"
#include "fw_stream.h"
#include "fw_tok.h"
#include "fw_train.h"

void fw_run_opts_defaults(struct fw_run_opts *o)
{
	memset(o, 0, sizeof(*o));
	fw_train_defaults(&o->cfg);
	o->steps = 1;
	o->dtype = FW_F32;
}

/* The checkpoint's schedule where the options did not set one. */
static void continue_schedule(struct fw_run *r)
{
	const struct fw_run_opts *o = r->o;
	const struct fw_train_state *s = &r->state;

	if (!s->have_sched)
		return;
	if (!o->have_lr)
		r->cfg.adamw.lr = (float)s->lr;
	if (!o->have_warmup)
		r->cfg.warmup = s->warmup;
	if (!o->have_decay)
		r->cfg.decay_steps = s->decay_steps;
	if (!o->have_min_lr)
		r->cfg.min_lr = s->min_lr;
	if (!o->have_sched)
		r->cfg.sched = s->sched;
}

struct fw_run *fw_run_open(const struct fw_run_opts *o, char *err, size_t errlen)
{
	struct fw_run *r = calloc(1, sizeof(*r));
	char path[PATH_MAX + 32];

	if (!r) {
		fw_seterr(err, errlen, "out of memory");
		return NULL;
	}
	r->o = o;
	r->cfg = o->cfg;
	r->t_load = fw_now();
	if (fw_ckpt_resolve(o->ckpt, r->dir, sizeof(r->dir), err, errlen) ||
	    !(r->m = fw_model_load(r->dir, err, errlen)) ||
	    fw_train_state_load(&r->state, r->dir, err, errlen))
		goto fail;
	if (!(r->opt = fw_opt_new(r->m)) || fw_model_grads(r->m)) {
		fw_seterr(err, errlen, "out of memory");
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/optimizer.safetensors", r->dir);
	if (!access(path, F_OK)) {
		if (fw_opt_load(r->opt, r->m, path, err, errlen))
			goto fail;
		if (r->state.step != r->opt->step) {
			fw_seterr(err, errlen, "%.900s: step %ld, but trainer_state.json says %ld",
				  path, r->opt->step, r->state.step);
			goto fail;
		}
	}
	r->opt->step = r->state.step;
	r->t_load = fw_now() - r->t_load;
	/* The schedule continues as the checkpoint has it unless told. */
	continue_schedule(r);
	if (o->ref) {
		char rd[PATH_MAX];

		if (fw_ckpt_resolve(o->ref, rd, sizeof(rd), err, errlen) ||
		    !(r->ref = fw_model_load(rd, err, errlen)))
			goto fail;
		if (r->ref->cfg.vocab != r->m->cfg.vocab) {
			fw_seterr(err, errlen, "%.900s: vocabulary of %d ids, the policy has %d", rd,
				  r->ref->cfg.vocab, r->m->cfg.vocab);
			goto fail;
		}
		r->ref->no_grad = 1;
	}
	snprintf(path, sizeof(path), "%s/tokenizer.json", r->dir);
	if (!access(path, F_OK) && !(r->tok = fw_tok_load(path, err, errlen)))
		goto fail;
	if (!(r->b = fw_batch_new())) {
		fw_seterr(err, errlen, "out of memory");
		goto fail;
	}
	return r;
fail:
	fw_run_free(r);
	return NULL;
}

void fw_run_free(struct fw_run *r)
{
	if (!r)
		return;
	free(r->order);
	free(r->idx);
	free(r->sts);
	fw_batch_free(r->b);
	fw_tok_free(r->tok);
	fw_opt_free(r->opt);
	fw_model_free(r->ref);
	fw_model_free(r->m);
	free(r);
}

int fw_run_add(struct fw_run *r, struct fw_mpv rec, char *err, size_t errlen)
{
	return fw_batch_add_record(r->b, rec, r->tok, r->m->cfg.vocab, r->m->cfg.max_pos,
				   r->o->truncate, err, errlen);
}

/* The order sequences are drawn in: the seed's shuffle, or as read. */
static void shuffle(struct fw_run *r)
{
	const struct fw_batch *b = r->b;

	for (int i = 0; i < b->nseq; i++)
		r->order[i] = i;
	/* The order continues as the checkpoint drew it unless told. */
	r->state.have_seed = r->o->have_seed || r->state.have_seed;
	if (r->o->have_seed)
		r->state.seed = r->o->seed;
	else if (!r->state.have_seed)
		r->state.seed = 0;
	if (!r->state.have_seed)
		return;
	uint64_t x = r->state.seed;

	for (int i = b->nseq - 1; i > 0; i--) {
		int j = (int)(fw_rand64(&x) % (uint64_t)(i + 1)), t = r->order[i];

		r->order[i] = r->order[j];
		r->order[j] = t;
	}
}

int fw_run_prepare(struct fw_run *r, char *err, size_t errlen)
{
	const struct fw_batch *b = r->b;
	uint64_t steps = r->o->steps, bsz = r->o->batch_size;

	assert(steps >= 1 && !r->order);
	if (b->nseq == 0) {
		fw_seterr(err, errlen, "no trainable records");
		return -1;
	}
	if (r->cfg.w_pg > 0)
		fw_batch_advantages(r->b, r->o->no_std, &r->gs);

	/* --batch-size sequences each step, cycling through the input from
	 * the position the checkpoint reached. */
	if (!(r->order = malloc(sizeof(int) * b->nseq)) ||
	    !(r->idx = malloc(sizeof(int) * (bsz ? bsz : (uint64_t)b->nseq))) ||
	    !(r->sts = calloc(steps, sizeof(*r->sts)))) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	shuffle(r);
	/* The data position carries over only to the same input. */
	char did[17];
	uint64_t h = fw_hash64(b->tok, sizeof(int32_t) * b->ntok) ^
		     fw_hash64(b->mask, b->ntok) * 31 ^ (uint64_t)b->nseq;

	snprintf(did, sizeof(did), "%016llx", (unsigned long long)h);
	if (strcmp(did, r->state.data_id) || r->state.data_pos >= b->nseq)
		r->state.data_pos = 0;
	memcpy(r->state.data_id, did, sizeof(did));
	snprintf(r->parent, sizeof(r->parent), "%s", r->state.id);
	if (!r->parent[0])
		fw_ckpt_id(r->m, r->parent);
	return 0;
}

int fw_run_steps(struct fw_run *r, int rank, int size, char *err, size_t errlen)
{
	const struct fw_batch *b = r->b;
	uint64_t steps = r->o->steps, bsz = r->o->batch_size;

	assert(rank >= 0 && rank < size && r->order);
	if (!bsz || bsz > (uint64_t)b->nseq)
		bsz = b->nseq;
	for (uint64_t s = 0; s < steps; s++) {
		int nl = 0;

		/* Rank r of N takes every Nth sequence of the step's batch. */
		for (uint64_t k = rank; k < bsz; k += size)
			r->idx[nl++] = r->order[(r->state.data_pos + k) % b->nseq];
		if (fw_train_step(r->m, r->opt, r->ref, &r->cfg, b, r->idx, nl, &r->sts[s], err,
				  errlen)) {
			r->failed_step = r->opt->step + 1;
			return -1;
		}
		r->state.data_pos = (long)((r->state.data_pos + bsz) % b->nseq);
		r->state.tokens_seen += r->sts[s].tokens;
		if (r->on_step)
			r->on_step(r->on_step_ctx, (long)s + 1);
	}
	r->nsteps = (long)steps;
	return 0;
}

int fw_run_save(struct fw_run *r, char *err, size_t errlen)
{
	struct fw_train_state *s = &r->state;
	char tok[PATH_MAX + 32];

	assert(r->nsteps > 0);
	r->t_save = fw_now();
	s->step = r->opt->step;
	snprintf(s->parent, sizeof(s->parent), "%s", r->parent);
	fw_ckpt_id(r->m, s->id);
	s->lr = r->cfg.adamw.lr;
	s->min_lr = r->cfg.min_lr;
	s->warmup = r->cfg.warmup;
	s->decay_steps = r->cfg.decay_steps;
	s->sched = r->cfg.sched;
	snprintf(tok, sizeof(tok), "%s/tokenizer.json", r->dir);
	if (fw_ckpt_write(r->o->out, r->m, r->opt, s, tok, r->o->dtype, r->o->keep, r->newdir,
			  sizeof(r->newdir), err, errlen))
		return -1;
	r->t_save = fw_now() - r->t_save;
	return 0;
}

static int kv_str(msgpack_packer *pk, const char *k, const char *v)
{
	return fw_pack_cstr(pk, k) || fw_pack_cstr(pk, v);
}

static int kv_num(msgpack_packer *pk, const char *k, double v)
{
	return fw_pack_cstr(pk, k) || msgpack_pack_double(pk, v);
}

static int kv_int(msgpack_packer *pk, const char *k, int64_t v)
{
	return fw_pack_cstr(pk, k) || msgpack_pack_int64(pk, v);
}

int fw_run_pack_metrics(const struct fw_run *r, long i, long skipped, struct fw_buf *b)
{
	const struct fw_step_stats *st = &r->sts[i];
	const struct fw_group_stats *gs = &r->gs;
	long step = r->state.step - r->nsteps + 1 + i;
	int pg = r->cfg.w_pg > 0, e;
	msgpack_packer pk;
	char id[17], key[64];

	assert(i >= 0 && i < r->nsteps);
	snprintf(key, sizeof(key), "%s/%ld", r->state.id, step);
	snprintf(id, sizeof(id), "%016llx", (unsigned long long)fw_hash64(key, strlen(key)));
	fw_buf_reset(b);
	fw_buf_packer(&pk, b);
	e = msgpack_pack_map(&pk, 22 + (pg ? 8 : 0));
	e |= kv_str(&pk, "kind", "metrics") || kv_str(&pk, "id", id) || kv_int(&pk, "v", 1);
	e |= kv_int(&pk, "step", step) || kv_str(&pk, "ckpt", r->state.id);
	e |= kv_str(&pk, "ckpt_dir", r->newdir) || kv_num(&pk, "lr", st->lr);
	e |= kv_num(&pk, "loss", st->loss) || kv_num(&pk, "loss_sft", st->loss_sft);
	e |= kv_num(&pk, "loss_pg", st->loss_pg) || kv_num(&pk, "loss_distill", st->loss_distill) ||
	     kv_num(&pk, "loss_topk", st->loss_topk);
	e |= kv_num(&pk, "kl", st->kl) || kv_num(&pk, "grad_norm", st->grad_norm);
	e |= kv_int(&pk, "tokens", st->tokens) || kv_int(&pk, "seqs", st->seqs);
	e |= kv_num(&pk, "tok_per_s", st->seconds > 0 ? st->tokens / st->seconds : 0);
	e |= kv_num(&pk, "clip_frac", st->clip_frac) || kv_num(&pk, "is_clip_frac", st->is_clip_frac);
	e |= kv_int(&pk, "skipped_records", skipped);
	e |= kv_num(&pk, "load_s", r->t_load) || kv_num(&pk, "save_s", r->t_save);
	if (pg) {
		e |= kv_num(&pk, "reward_mean", gs->reward_mean) ||
		     kv_num(&pk, "reward_std", gs->reward_std);
		e |= kv_num(&pk, "adv_mean", gs->adv_mean) || kv_num(&pk, "adv_std", gs->adv_std);
		e |= kv_num(&pk, "adv_min", gs->adv_min) || kv_num(&pk, "adv_max", gs->adv_max);
		e |= kv_int(&pk, "groups", gs->groups) || kv_int(&pk, "skipped_groups", gs->skipped);
	}
	return e ? -1 : 0;
}

int fw_run_write_metrics(const struct fw_run *r, const char *path, int level, long skipped,
			 char *err, size_t errlen)
{
	struct fw_writer *w = fw_writer_open(path, level, err, errlen);
	struct fw_buf b = { 0 };
	int rc = -1;

	if (!w)
		return -1;
	for (long s = 0; s < r->nsteps; s++) {
		if (fw_run_pack_metrics(r, s, skipped, &b)) {
			fw_seterr(err, errlen, "out of memory");
			goto out;
		}
		if (fw_writer_put(w, b.p, b.n)) {
			fw_seterr(err, errlen, "%s", fw_writer_error(w));
			goto out;
		}
	}
	rc = fw_writer_close(w, err, errlen);
	w = NULL;
out:
	fw_writer_abort(w);
	fw_buf_release(&b);
	return rc;
}

/* ---- what a run refuses and how it is asked ------------------------------------ */

int fw_train_parse_objective(const char *s, struct fw_train_cfg *c)
{
	char buf[256], *save = NULL, *tok;

	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	c->w_sft = c->w_pg = c->w_distill = c->w_topk = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':');
		double w = 1;

		if (colon) {
			*colon = 0;
			if (fw_parse_double(colon + 1, &w) || !(w > 0) || !isfinite(w))
				return -1;
		}
		if (!strcmp(tok, "sft"))
			c->w_sft = w;
		else if (!strcmp(tok, "pg"))
			c->w_pg = w;
		else if (!strcmp(tok, "distill"))
			c->w_distill = w;
		else if (!strcmp(tok, "topk"))
			c->w_topk = w;
		else
			return -1;
	}
	return c->w_sft + c->w_pg + c->w_distill + c->w_topk > 0 ? 0 : -1;
}

int fw_private_load(const char *file, struct fw_intern *ids, char *err, size_t errlen)
{
	struct fw_reader *r = fw_reader_open(file, NULL, err, errlen);
	struct fw_rec rec;
	struct fw_mpv id;
	const char *s;
	size_t n;
	int got;

	if (!r)
		return -1;
	*err = 0;
	while ((got = fw_reader_next(r, &rec)) > 0) {
		if (fw_mp_get(rec.v, "id", &id) != 1 || fw_mp_str(id, &s, &n)) {
			fw_seterr(err, errlen, "--private %s: record %llu has no string 'id'", file,
				  (unsigned long long)rec.index + 1);
			got = -1;
			break;
		}
		if (fw_intern_add(ids, s, n) < 0) {
			fw_seterr(err, errlen, "out of memory");
			got = -1;
			break;
		}
	}
	if (got < 0 && !*err)
		fw_seterr(err, errlen, "--private %s: record %llu: %s", file,
			  (unsigned long long)fw_reader_index(r) + 1, fw_reader_error(r));
	fw_reader_close(r);
	return got < 0 ? -1 : 0;
}

int fw_private_task(struct fw_mpv rec, const struct fw_intern *ids, const char **id,
		    size_t *idn)
{
	struct fw_mpv task = rec, v;

	*id = NULL;
	*idn = 0;
	if (fw_mp_get(rec, "task", &v) == 1) {
		if (!fw_mp_str(v, id, idn))
			return fw_intern_find(ids, *id, *idn) >= 0;
		task = v;
	}
	if (fw_mp_get(task, "id", &v) == 1 && fw_mp_str(v, id, idn))
		*id = NULL, *idn = 0;
	if (fw_mp_get(task, "split", &v) == 1 && fw_mp_str_eq(v, "private", 7))
		return 1;
	return *id && fw_intern_find(ids, *id, *idn) >= 0;
}
