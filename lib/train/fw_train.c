/*
 * fw_train.c — batches of training sequences, the sft / pg / distill
 * objectives, the step with micro-batches, and checkpoint directories.
 * See fw_train.h.
 */
#include <assert.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <float.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "fw_base.h"
#include "fw_cli.h"
#include "fw_tok.h"
#include "fw_train.h"
#include "kernels_dev.h"

/* ---- batches ------------------------------------------------------------------ */

struct fw_batch *fw_batch_new(void)
{
	return calloc(1, sizeof(struct fw_batch));
}

void fw_batch_free(struct fw_batch *b)
{
	if (!b)
		return;
	free(b->seq);
	free(b->tok);
	free(b->mask);
	free(b->old);
	free(b->tadv);
	free(b->kid);
	free(b->klp);
	free(b);
}

static int grow_tokens(struct fw_batch *b, size_t extra)
{
	size_t cap = b->captok ? b->captok : 1024;
	void *p;

	while (cap < b->ntok + extra)
		cap *= 2;
	if (cap == b->captok)
		return 0;
	if (!(p = realloc(b->tok, cap * sizeof(int32_t))))
		return -1;
	b->tok = p;
	if (!(p = realloc(b->mask, cap)))
		return -1;
	b->mask = p;
	if (!(p = realloc(b->old, cap * sizeof(float))))
		return -1;
	b->old = p;
	if (!(p = realloc(b->tadv, cap * sizeof(float))))
		return -1;
	b->tadv = p;
	b->captok = cap;
	return 0;
}

/* Appends an empty sequence of n tokens (mask 0, old and tadv NaN) and
 * returns it, or NULL when out of memory. */
static struct fw_seq *add_seq(struct fw_batch *b, int n, uint64_t group, double reward)
{
	struct fw_seq *s;

	if (b->nseq == b->capseq) {
		int cap = b->capseq ? 2 * b->capseq : 64;
		void *p = realloc(b->seq, cap * sizeof(*b->seq));

		if (!p)
			return NULL;
		b->seq = p;
		b->capseq = cap;
	}
	if (grow_tokens(b, n))
		return NULL;
	s = &b->seq[b->nseq++];
	*s = (struct fw_seq){ .off = b->ntok, .n = n, .group = group, .reward = reward };
	memset(b->mask + b->ntok, 0, n);
	for (int i = 0; i < n; i++)
		b->old[b->ntok + i] = b->tadv[b->ntok + i] = NAN;
	b->ntok += n;
	return s;
}

int fw_batch_add(struct fw_batch *b, const int32_t *tok, const uint8_t *mask,
		 const float *old, const float *tadv, int n, uint64_t group,
		 double reward)
{
	struct fw_seq *s;

	assert(b && n >= 0 && (tok || n == 0));
	s = add_seq(b, n, group, reward);
	if (!s)
		return -1;
	memcpy(b->tok + s->off, tok, sizeof(int32_t) * n);
	for (int i = 1; i < n; i++) {
		b->mask[s->off + i] = mask ? !!mask[i] : 1;
		s->ntrain += b->mask[s->off + i];
		if (old)
			b->old[s->off + i] = old[i];
		if (tadv)
			b->tadv[s->off + i] = tadv[i];
	}
	return 0;
}

/* 1 when every value is finite and fits a float. */
static int all_finite(const double *x, long n)
{
	for (long i = 0; i < n; i++)
		if (!isfinite(x[i]) || fabs(x[i]) > FLT_MAX)
			return 0;
	return 1;
}

static uint64_t group_key(struct fw_mpv rec)
{
	struct fw_mpv v, t;
	const char *s;
	size_t n;

	if (fw_mp_get(rec, "group", &v) == 1)
		return fw_hash64(v.p, v.n);
	if (fw_mp_get(rec, "task", &t) == 1) {
		if (fw_mp_get(t, "id", &v) == 1 && fw_mp_str(v, &s, &n) == 0)
			return fw_hash64(s, n);
		if (fw_mp_str(t, &s, &n) == 0)
			return fw_hash64(s, n);
	}
	if (fw_mp_get(rec, "id", &v) == 1 && fw_mp_str(v, &s, &n) == 0)
		return fw_hash64(s, n);
	return fw_hash64(rec.p, rec.n);
}

/* The sampling log-probs of the assistant turns: for each turn in order,
 * its "tokens" count and "logprobs" (NaN-filled when absent).  Fills
 * *cnt (nturns) and *lp (concatenated); returns the number of assistant
 * turns or -1. */
static int turn_logprobs(struct fw_mpv turns, int **cnt, double **lp, long *nlp,
			 char *err, size_t errlen)
{
	struct fw_mp_iter it;
	struct fw_mpv t, v;
	int64_t n = fw_mp_iter_init(&it, turns);
	int k = 0, i = 0;
	long total = 0, cap = 256;

	*cnt = NULL;
	*lp = NULL;
	if (n < 0 || fw_mp_type(turns) != FW_MP_ARRAY) {
		fw_seterr(err, errlen, "'turns' is not an array");
		return -1;
	}
	*cnt = calloc(n > 0 ? n : 1, sizeof(int));
	*lp = malloc(sizeof(double) * cap);
	if (!*cnt || !*lp)
		goto oom;
	while (fw_mp_iter_next(&it, &t) > 0) {
		double *a = NULL;
		long na = 0, nt = 0;
		struct fw_mp_iter ti;

		i++;
		if (fw_mp_get(t, "role", &v) != 1 || !fw_mp_str_eq(v, "assistant", 9))
			continue;
		if (fw_mp_get(t, "tokens", &v) == 1 && fw_mp_type(v) == FW_MP_ARRAY)
			nt = (long)fw_mp_iter_init(&ti, v);
		if (fw_mp_get(t, "logprobs", &v) == 1 && fw_mp_type(v) != FW_MP_NIL) {
			if ((na = fw_mp_doubles(v, &a)) < 0) {
				fw_seterr(err, errlen, "turn %d: 'logprobs' is not an array of numbers", i - 1);
				return -1;
			}
			if (na != nt || !all_finite(a, na)) {
				free(a);
				if (na == nt) {
					fw_seterr(err, errlen, "turn %d: 'logprobs' holds a value that is not finite",
					       i - 1);
					return -1;
				}
				fw_seterr(err, errlen, "turn %d: %ld 'logprobs' for %ld 'tokens'",
				       i - 1, na, nt);
				return -1;
			}
		}
		while (total + nt > cap) {
			double *p = realloc(*lp, sizeof(double) * (cap *= 2));

			if (!p) {
				free(a);
				goto oom;
			}
			*lp = p;
		}
		for (long j = 0; j < nt; j++)
			(*lp)[total + j] = a ? a[j] : NAN;
		free(a);
		total += nt;
		(*cnt)[k++] = (int)nt;
	}
	*nlp = total;
	return k;
oom:
	fw_seterr(err, errlen, "out of memory");
	return -1;
}

/*
 * teach.topk of rec onto sequence s, the batch's last: adv index j is
 * token apos[j] (nadv of them).  0; 1 when the field is malformed (err
 * says how); -1 out of memory.  Leaves the batch's top-k as it was unless
 * it returns 0.
 */
static int add_topk(struct fw_batch *b, struct fw_seq *s, struct fw_mpv rec, const int *apos,
		    long nadv, int vocab, char *err, size_t errlen)
{
	struct fw_mpv g, t, v;
	double k = 0, from = 0, *ids = NULL, *lp = NULL;
	long nid = -1, nlp = -1, rows;
	int rc = 1;

	if (fw_mp_get(rec, "teach", &g) != 1 || fw_mp_get(g, "topk", &t) != 1)
		return 0;
	if (fw_mp_get(t, "k", &v) != 1 || fw_mp_double(v, &k) || k != floor(k) || k < 1 ||
	    k > 64 || (fw_mp_get(t, "from", &v) == 1 && fw_mp_double(v, &from)) ||
	    from != floor(from) || from < 0 || fw_mp_get(t, "ids", &v) != 1 ||
	    (nid = fw_mp_doubles(v, &ids)) < 0 || fw_mp_get(t, "logprobs", &v) != 1 ||
	    (nlp = fw_mp_doubles(v, &lp)) != nid || nid % (long)k) {
		fw_seterr(err, errlen, "'teach.topk' wants k (1 to 64), from and ids and logprobs of "
			  "k values per token");
		goto out;
	}
	rows = nid / (long)k;
	if ((long)from + rows > nadv) {
		fw_seterr(err, errlen, "'teach.topk' has %ld tokens from %ld, past the %ld of "
			  "'teach.adv'", rows, (long)from, nadv);
		goto out;
	}
	for (long i = 0; i < nid; i++)
		if (ids[i] != floor(ids[i]) || ids[i] < -1 || ids[i] >= vocab ||
		    (ids[i] >= 0 && !(lp[i] <= 1e-3 && lp[i] > -1e30))) {
			fw_seterr(err, errlen, "'teach.topk' entry %ld: id %g outside the vocabulary "
				  "or log-prob %g not one", i, ids[i], lp[i]);
			goto out;
		}
	rc = -1;
	size_t need = (size_t)s->n * (size_t)k;

	if (b->nk + need > b->capk) {
		size_t cap = b->capk ? b->capk : 4096;
		void *p;

		while (cap < b->nk + need)
			cap *= 2;
		if (!(p = realloc(b->kid, cap * sizeof(int32_t))))
			goto out;
		b->kid = p;
		if (!(p = realloc(b->klp, cap * sizeof(float))))
			goto out;
		b->klp = p;
		b->capk = cap;
	}
	s->k = (int)k;
	s->koff = b->nk;
	for (size_t i = 0; i < need; i++) {
		b->kid[s->koff + i] = -1;
		b->klp[s->koff + i] = -INFINITY;
	}
	for (long r = 0; r < rows; r++) {
		size_t at = s->koff + (size_t)apos[(long)from + r] * s->k;

		for (int j = 0; j < s->k; j++) {
			b->kid[at + j] = (int32_t)ids[r * s->k + j];
			b->klp[at + j] = (float)lp[r * s->k + j];
		}
	}
	b->nk += need;
	rc = 0;
out:
	free(ids);
	free(lp);
	return rc;
}

int fw_batch_add_record(struct fw_batch *b, struct fw_mpv rec,
			const struct fw_tok *tok, int vocab, int max_len, int truncate,
			char *err, size_t errlen)
{
	struct fw_mpv v, g;
	struct fw_tok_ids ids = { 0 };
	double *lp = NULL, *adv = NULL, reward = NAN;
	int *cnt = NULL, rc = -1, n = 0, nturns = 0;
	long nlp = 0, nadv = -1;
	int32_t *tk = NULL;
	uint8_t *mk = NULL;
	int lp_shift = 0;
	struct fw_seq *s;
	int *tpos = NULL; /* positions of the assistant turns' own tokens */
	long ntpos = 0;

	if (fw_mp_get(rec, "grade", &g) == 1 && fw_mp_get(g, "reward", &v) == 1 &&
	    fw_mp_double(v, &reward)) {
		fw_seterr(err, errlen, "'grade.reward' is not a number");
		return -1;
	}
	/* Rewards beyond any scale (or NaN, inf) would overflow the group
	 * statistics: such a record counts as one without a reward. */
	if (!(fabs(reward) <= 1e30))
		reward = NAN;
	if (fw_mp_get(rec, "teach", &g) == 1 && fw_mp_get(g, "adv", &v) == 1) {
		if ((nadv = fw_mp_doubles(v, &adv)) < 0) {
			fw_seterr(err, errlen, "'teach.adv' is not an array of numbers");
			return -1;
		}
		if (!all_finite(adv, nadv)) {
			fw_seterr(err, errlen, "'teach.adv' holds a value that is not finite");
			goto out;
		}
	}
	if (fw_mp_get(rec, "tokens", &v) == 1) {
		double *x = NULL, *m = NULL;
		long nx = fw_mp_doubles(v, &x), nm;

		if (nx < 0) {
			fw_seterr(err, errlen, "'tokens' is not an array of ids");
			goto out;
		}
		n = (int)(nx < INT_MAX ? nx : INT_MAX);
		tk = malloc(sizeof(int32_t) * (n + 1));
		mk = malloc(n + 1);
		if (!tk || !mk) {
			free(x);
			goto oom;
		}
		for (int i = 0; i < n; i++) {
			if (x[i] != floor(x[i]) || x[i] < 0 || x[i] >= vocab) {
				fw_seterr(err, errlen, "'tokens' holds an id outside the vocabulary");
				free(x);
				goto out;
			}
			tk[i] = (int32_t)x[i];
			mk[i] = i > 0;
		}
		free(x);
		if (fw_mp_get(rec, "mask", &v) == 1) {
			if ((nm = fw_mp_doubles(v, &m)) != n) {
				free(m);
				fw_seterr(err, errlen, "'mask' does not have one value per token");
				goto out;
			}
			for (int i = 0; i < n; i++)
				mk[i] = i > 0 && m[i] != 0;
			free(m);
		}
		if (fw_mp_get(rec, "logprobs", &v) == 1) {
			if ((nlp = fw_mp_doubles(v, &lp)) != n && nlp != n - 1) {
				fw_seterr(err, errlen, "'logprobs' needs one value per token (or per token after the first)");
				goto out;
			}
			lp_shift = nlp == n - 1;
			if (!all_finite(lp, nlp)) {
				fw_seterr(err, errlen, "'logprobs' holds a value that is not finite");
				goto out;
			}
		}
	} else if (fw_mp_get(rec, "turns", &v) == 1) {
		int tmpl;

		if (!tok) {
			fw_seterr(err, errlen, "'turns' needs the checkpoint's tokenizer.json");
			goto out;
		}
		if ((tmpl = fw_chat_detect(tok)) < 0) {
			fw_seterr(err, errlen, "the tokenizer has no chat template tokens");
			goto out;
		}
		if ((nturns = turn_logprobs(v, &cnt, &lp, &nlp, err, errlen)) < 0)
			goto out;
		if (fw_chat_render_mp(tok, tmpl, &v, 0, &ids, err, errlen))
			goto out;
		n = (int)ids.n;
		tk = ids.ids;
		mk = ids.mask;
		if (n > 0)
			mk[0] = 0;
		if (!(tpos = malloc(sizeof(int) * (nlp + 1))))
			goto oom;
	} else if (fw_mp_get(rec, "completion", &v) == 1) {
		/* A completion record: the prompt, then the trained completion
		 * and the end-of-text token, as a fill policy's rollout holds
		 * them: BOS first when the tokenizer has one, else the
		 * end-of-text token only before an empty prompt. */
		struct fw_mpv pv;
		const char *ps = "", *cs;
		size_t pn = 0, cn;
		int32_t bos, eos;

		if (!tok) {
			fw_seterr(err, errlen, "'completion' needs the checkpoint's tokenizer.json");
			goto out;
		}
		if (fw_mp_str(v, &cs, &cn) ||
		    (fw_mp_get(rec, "prompt", &pv) == 1 && fw_mp_str(pv, &ps, &pn))) {
			fw_seterr(err, errlen, "'prompt' and 'completion' must be strings");
			goto out;
		}
		bos = fw_tok_bos(tok);
		eos = fw_tok_eos(tok);
		if (bos < 0 && pn == 0)
			bos = eos;
		if ((bos >= 0 && fw_tok_ids_push(&ids, bos, 0)) ||
		    fw_tok_encode(tok, ps, pn, 0, 0, &ids) ||
		    fw_tok_encode(tok, cs, cn, 0, 1, &ids) ||
		    (eos >= 0 && fw_tok_ids_push(&ids, eos, 1)))
			goto oom;
		n = (int)ids.n;
		tk = ids.ids;
		mk = ids.mask;
		if (n > 0)
			mk[0] = 0;
	} else {
		fw_seterr(err, errlen, "record has neither 'tokens', 'turns' nor 'completion'");
		rc = 1;
		goto out;
	}
	if (n > max_len && !truncate) {
		fw_seterr(err, errlen, "%d tokens exceed max_position_embeddings %d", n, max_len);
		goto out;
	}
	for (int i = 0; i < n; i++)
		if (tk[i] < 0 || tk[i] >= vocab) {
			fw_seterr(err, errlen, "token %d (id %d) is outside the vocabulary", i, (int)tk[i]);
			goto out;
		}
	if (!(s = add_seq(b, n, group_key(rec), reward)))
		goto oom;
	memcpy(b->tok + s->off, tk, sizeof(int32_t) * n);
	{
		/* Runs of trained tokens are the assistant turns in order; the
		 * first cnt[k] tokens of run k are the turn's own (sampled)
		 * tokens, any further one the end token the template added. */
		int run = -1, inrun = 0, j = 0;
		long used = 0;

		for (int i = 0; i < n; i++) {
			float *old = &b->old[s->off + i];

			b->mask[s->off + i] = mk[i] != 0;
			s->ntrain += mk[i] != 0;
			if (!mk[i]) {
				inrun = 0;
				continue;
			}
			if (!inrun) {
				inrun = 1;
				run++;
				j = 0;
				if (run > 0 && run - 1 < nturns)
					used += cnt[run - 1];
			}
			if (tpos) {
				if (run < nturns && j < cnt[run]) {
					*old = (float)lp[used + j];
					tpos[ntpos++] = i;
				}
			} else if (lp) {
				*old = lp_shift ? (i > 0 ? (float)lp[i - 1] : NAN) : (float)lp[i];
			}
			j++;
		}
	}
	if (nadv >= 0) {
		long k = 0;

		if (nadv == s->ntrain) {
			for (int i = 0; i < n; i++)
				if (b->mask[s->off + i])
					b->tadv[s->off + i] = (float)adv[k++];
		} else if (tpos && nadv == ntpos) {
			for (long i = 0; i < ntpos; i++)
				b->tadv[s->off + tpos[i]] = (float)adv[i];
		} else {
			b->nseq--;
			b->ntok -= n;
			fw_seterr(err, errlen, "'teach.adv' has %ld values for %d trained tokens",
			       nadv, s->ntrain);
			goto out;
		}
		/* adv index -> token position, for teach.topk */
		int *apos = tpos;

		if (nadv == s->ntrain) {
			if (!(apos = malloc(sizeof(int) * (size_t)(nadv + 1)))) {
				b->nseq--;
				b->ntok -= n;
				goto oom;
			}
			for (int i = 0, j = 0; i < n; i++)
				if (b->mask[s->off + i])
					apos[j++] = i;
		}
		int kr = add_topk(b, s, rec, apos, nadv, vocab, err, errlen);

		if (apos != tpos)
			free(apos);
		if (kr) {
			b->nseq--;
			b->ntok -= n;
			if (kr < 0)
				goto oom;
			goto out;
		}
	}
	if (n > max_len) {
		/* Truncated: s is the last sequence, so it just ends sooner. */
		s->n = max_len;
		s->ntrain = 0;
		for (int i = 0; i < max_len; i++)
			s->ntrain += b->mask[s->off + i];
		b->ntok = s->off + max_len;
	}
	if (s->ntrain == 0) {
		b->nseq--;
		b->ntok = s->off;
		if (s->k)
			b->nk = s->koff;
		fw_seterr(err, errlen, n > max_len ? "record has no trained token in its first %d" :
			 "record has no trained token", max_len);
		rc = 1;
		goto out;
	}
	rc = 0;
	goto out;
oom:
	fw_seterr(err, errlen, "out of memory");
out:
	if (ids.ids) {
		fw_tok_ids_release(&ids);
	} else {
		free(tk);
		free(mk);
	}
	free(lp);
	free(adv);
	free(cnt);
	free(tpos);
	return rc;
}

static int cmp_group(const void *a, const void *b)
{
	const struct fw_seq *x = *(struct fw_seq *const *)a, *y = *(struct fw_seq *const *)b;

	return x->group < y->group ? -1 : x->group > y->group;
}

void fw_batch_advantages(struct fw_batch *b, int no_std, struct fw_group_stats *st)
{
	struct fw_seq **p = malloc(sizeof(*p) * (b->nseq ? b->nseq : 1));
	double rs = 0, rss = 0, as = 0, ass = 0;
	long nr = 0, na = 0;

	memset(st, 0, sizeof(*st));
	st->adv_min = INFINITY;
	st->adv_max = -INFINITY;
	if (!p)
		return;
	for (int i = 0; i < b->nseq; i++) {
		struct fw_seq *s = &b->seq[i];

		s->adv = 0;
		s->skip = !isfinite(s->reward);
		if (s->skip)
			st->no_reward++;
		else {
			rs += s->reward;
			rss += s->reward * s->reward;
			nr++;
		}
		p[i] = s;
	}
	/* A stable order (the sort only groups; order within is kept by
	 * comparing positions when keys tie is unnecessary: the group's
	 * statistics do not depend on it). */
	qsort(p, b->nseq, sizeof(*p), cmp_group);
	for (int i = 0; i < b->nseq;) {
		int j = i, k = 0;
		double sum = 0, sq = 0, mean, sd, lo = INFINITY, hi = -INFINITY;

		while (j < b->nseq && p[j]->group == p[i]->group)
			j++;
		for (int q = i; q < j; q++)
			if (!p[q]->skip) {
				sum += p[q]->reward;
				k++;
				lo = fmin(lo, p[q]->reward);
				hi = fmax(hi, p[q]->reward);
			}
		st->groups++;
		if (k < 2 || lo == hi) {
			st->skipped++;
			for (int q = i; q < j; q++)
				p[q]->skip = 1;
			i = j;
			continue;
		}
		mean = sum / k;
		for (int q = i; q < j; q++)
			if (!p[q]->skip)
				sq += (p[q]->reward - mean) * (p[q]->reward - mean);
		sd = sqrt(sq / (k - 1));
		for (int q = i; q < j; q++) {
			double a;

			if (p[q]->skip)
				continue;
			a = p[q]->reward - mean;
			if (!no_std)
				a /= sd + 1e-4;
			p[q]->adv = (float)a;
			as += a;
			ass += a * a;
			na++;
			st->adv_min = fmin(st->adv_min, a);
			st->adv_max = fmax(st->adv_max, a);
		}
		i = j;
	}
	free(p);
	if (nr) {
		st->reward_mean = rs / nr;
		st->reward_std = sqrt(fmax(0, rss / nr - st->reward_mean * st->reward_mean));
	}
	if (na) {
		st->adv_mean = as / na;
		st->adv_std = sqrt(fmax(0, ass / na - st->adv_mean * st->adv_mean));
	} else
		st->adv_min = st->adv_max = 0;
}

/* ---- the step ------------------------------------------------------------------ */

void fw_train_defaults(struct fw_train_cfg *c)
{
	*c = (struct fw_train_cfg){
		.w_sft = 1,
		.adamw = { .lr = 1e-5f, .b1 = 0.9f, .b2 = 0.95f, .eps = 1e-8f,
			   .wd = 0.1f, .clip = 1.0f },
		.sched = FW_SCHED_COSINE,
		.min_lr = 0.1,
		.batch_tokens = 8192,
		.clip_low = 0.2,
		.clip_high = 0.28,
		.is_clip = 2,
	};
}

double fw_train_lr(const struct fw_train_cfg *c, long step)
{
	double lr = c->adamw.lr, p;

	if (c->warmup > 0 && step <= c->warmup)
		return lr * step / c->warmup;
	if (c->sched == FW_SCHED_CONSTANT || c->decay_steps <= c->warmup)
		return lr;
	p = (double)(step - c->warmup) / (double)(c->decay_steps - c->warmup);
	if (p > 1)
		p = 1;
	return lr * (c->min_lr + (1 - c->min_lr) * 0.5 * (1 + cos(M_PI * p)));
}

/* Sums that the ranks share: normalizers first, then measurements. */
enum { S_NSFT, S_NPG, S_NDIST, S_SEQSFT, S_SEQPG, S_SEQDIST, S_NTOPK, S_SEQTOPK,
       S_NSEQ, S_NTOK, S_COUNT_NORM };
enum { M_SFT, M_PG, M_KL, M_DIST, M_CLIP, M_ISCLIP, M_PGTOK, M_DTOK, M_TOPK, M_COUNT };

/* *p reallocated to bytes; left as it was on failure.  0, or -1. */
static int regrow(void **p, size_t bytes)
{
	void *q = realloc(*p, bytes);

	if (!q)
		return -1;
	*p = q;
	return 0;
}

/* 1 when token i of s has the teacher's top-k (its first id is one). */
static int has_topk(const struct fw_batch *b, const struct fw_seq *s, int i)
{
	return s->k > 0 && b->mask[s->off + i] && b->kid[s->koff + (size_t)i * s->k] >= 0;
}

/* The tokens of s the topk term trains: those with the teacher's top-k,
 * with first_miss only up to the first whose sampled id is not the
 * teacher's first choice (that one included).  Their number; *last gets
 * the position of the last one (-1: none). */
static int topk_tokens(const struct fw_batch *b, const struct fw_seq *s, int first_miss,
		       int *last)
{
	int n = 0;

	*last = -1;
	for (int i = 0; i < s->n; i++)
		if (has_topk(b, s, i)) {
			n++;
			*last = i;
			if (first_miss && b->kid[s->koff + (size_t)i * s->k] != b->tok[s->off + i])
				break;
		}
	return n;
}

/* 1 when a trained token of s has a non-zero teacher advantage. */
static int taught(const struct fw_batch *b, const struct fw_seq *s)
{
	for (int i = 0; i < s->n; i++)
		if (b->mask[s->off + i] && isfinite(b->tadv[s->off + i]) && b->tadv[s->off + i] != 0)
			return 1;
	return 0;
}

static int trains_pg(const struct fw_train_cfg *c, const struct fw_batch *b,
		     const struct fw_seq *s)
{
	return c->w_pg > 0 && !s->skip &&
	       !(c->route && (c->w_distill > 0 || c->w_topk > 0) && taught(b, s));
}

int fw_train_step(struct fw_model *m, struct fw_opt *o, struct fw_model *ref,
		  const struct fw_train_cfg *c, const struct fw_batch *b,
		  const int *idx, int n, struct fw_step_stats *st, char *err,
		  size_t errlen)
{
	double nrm[S_COUNT_NORM] = { 0 }, ms[M_COUNT] = { 0 };
	double t0 = fw_now(), gsq = 0;
	int two = c->w_pg > 0 || c->w_distill > 0 || c->w_topk > 0 || c->kl_coef > 0;
	long cap = c->batch_tokens > 0 ? c->batch_tokens : 1, kcap = 0;
	int32_t *tok = NULL, *tgt = NULL, *krow = NULL, *ktok = NULL;
	float *wt = NULL, *lp = NULL, *rlp = NULL, *kw = NULL, *klog = NULL;
	double *kq = NULL;
	int rc = -1;

	assert(m && o && c && b && st && n >= 0);
	assert(c->kl_coef <= 0 || ref);
	for (int i = 0; i < n; i++)
		assert(idx[i] >= 0 && idx[i] < b->nseq);

	if (c->kl_coef > 0 && !ref) {
		fw_seterr(err, errlen, "the KL term needs a reference model");
		return -1;
	}
	memset(st, 0, sizeof(*st));
	for (int k = 0; k < n; k++) {
		const struct fw_seq *s = &b->seq[idx[k]];
		int nd = 0;

		if (s->n > cap)
			cap = s->n;
		for (int i = 0; i < s->n; i++)
			nd += b->mask[s->off + i] && isfinite(b->tadv[s->off + i]);
		nrm[S_NSFT] += s->ntrain;
		nrm[S_SEQSFT] += s->ntrain > 0;
		if (trains_pg(c, b, s)) {
			nrm[S_NPG] += s->ntrain;
			nrm[S_SEQPG] += s->ntrain > 0;
		}
		nrm[S_NDIST] += nd;
		nrm[S_SEQDIST] += nd > 0;
		if (c->w_topk > 0) {
			int last, nk = topk_tokens(b, s, c->topk_first_miss, &last);

			nrm[S_NTOPK] += nk;
			nrm[S_SEQTOPK] += nk > 0;
		}
		nrm[S_NSEQ] += 1;
		nrm[S_NTOK] += s->ntrain;
	}
	if (c->allreduce && c->allreduce(nrm, S_COUNT_NORM, c->ctx)) {
		fw_seterr(err, errlen, "all-reduce failed");
		return -1;
	}
	tok = malloc(sizeof(int32_t) * cap);
	tgt = malloc(sizeof(int32_t) * cap);
	wt = malloc(sizeof(float) * cap);
	lp = malloc(sizeof(float) * cap);
	rlp = malloc(sizeof(float) * cap);
	if (!tok || !tgt || !wt || !lp || !rlp || fw_model_grads(m)) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	fw_model_zero_grad(m);
	for (int k = 0; k < n;) {
		int rows = 0, T = 0, any = 0;

		/* Greedy packing in input order: rows share the longest length. */
		while (k + rows < n) {
			int len = b->seq[idx[k + rows]].n, t = len > T ? len : T;

			if (rows > 0 && (long)(rows + 1) * t > c->batch_tokens)
				break;
			T = t;
			rows++;
		}
		for (int r = 0; r < rows; r++) {
			const struct fw_seq *s = &b->seq[idx[k + r]];

			for (int p = 0; p < T; p++) {
				size_t i = s->off + p + 1;

				tok[r * T + p] = p < s->n ? b->tok[s->off + p] : 0;
				tgt[r * T + p] = p + 1 < s->n && b->mask[i] ? b->tok[i] : -1;
				wt[r * T + p] = 0;
			}
		}
		if (T < 2) {
			k += rows;
			continue;
		}
		/* the teacher's top-k as soft targets: weight w_topk * q_j / norm,
		 * q the teacher's distribution renormalized over its k tokens */
		long nsoft = 0;

		for (int r = 0; c->w_topk > 0 && r < rows; r++) {
			const struct fw_seq *s = &b->seq[idx[k + r]];
			int last, nk = s->k ? topk_tokens(b, s, c->topk_first_miss, &last) : 0;
			double kn;

			if (!nk)
				continue;
			kn = c->norm_seq ? 1.0 / ((double)nk * nrm[S_SEQTOPK]) : 1.0 / nrm[S_NTOPK];
			if (nsoft + (long)nk * s->k > kcap) {
				long want = 2 * (nsoft + (long)nk * s->k);

				if (regrow((void **)&krow, sizeof(int32_t) * want) ||
				    regrow((void **)&ktok, sizeof(int32_t) * want) ||
				    regrow((void **)&kw, sizeof(float) * want) ||
				    regrow((void **)&klog, sizeof(float) * want) ||
				    regrow((void **)&kq, sizeof(double) * 2 * want)) {
					fw_seterr(err, errlen, "out of memory");
					goto out;
				}
				kcap = want;
			}
			for (int p = 0; p + 1 < s->n && p + 1 <= last; p++) {
				const int32_t *id = b->kid + s->koff + (size_t)(p + 1) * s->k;
				const float *kl = b->klp + s->koff + (size_t)(p + 1) * s->k;
				double mx = -INFINITY, z = 0;
				int kk = 0;

				if (!has_topk(b, s, p + 1))
					continue;
				for (; kk < s->k && id[kk] >= 0; kk++)
					mx = fmax(mx, kl[kk]);
				for (int j = 0; j < kk; j++)
					z += exp(kl[j] - mx);
				for (int j = 0; j < kk; j++) {
					double q = exp(kl[j] - mx) / z;

					krow[nsoft] = r * T + p;
					ktok[nsoft] = id[j];
					kw[nsoft] = (float)(c->w_topk * q * kn);
					kq[2 * nsoft] = q * kn;
					kq[2 * nsoft + 1] = log(q);
					nsoft++;
				}
			}
		}
		struct fw_soft soft = { nsoft, krow, ktok, kw, klog };

		if (two && fw_model_forward_soft(m, tok, tgt, NULL, rows, T, 1, lp, NULL, &soft, err,
						 errlen))
			goto out;
		/* KL(q || p) over the k tokens: sum q_j / norm (log q_j - log p_j) */
		for (long i = 0; i < nsoft; i++)
			ms[M_TOPK] += kq[2 * i] * (kq[2 * i + 1] - klog[i]);
		if (c->kl_coef > 0 &&
		    fw_model_forward(ref, tok, tgt, NULL, rows, T, 1, rlp, NULL, err, errlen))
			goto out;
		for (int r = 0; r < rows; r++) {
			const struct fw_seq *s = &b->seq[idx[k + r]];
			int nd = 0;
			double sn, pn, dn;

			for (int i = 0; i < s->n; i++)
				nd += b->mask[s->off + i] && isfinite(b->tadv[s->off + i]);
			sn = c->norm_seq ? 1.0 / ((double)s->ntrain * nrm[S_SEQSFT]) : 1.0 / nrm[S_NSFT];
			pn = c->norm_seq ? 1.0 / ((double)s->ntrain * nrm[S_SEQPG]) : 1.0 / nrm[S_NPG];
			dn = c->norm_seq ? 1.0 / ((double)nd * nrm[S_SEQDIST]) : 1.0 / nrm[S_NDIST];
			for (int p = 0; p + 1 < s->n; p++) {
				size_t i = s->off + p + 1;
				double g = 0, l = two ? lp[r * T + p] : 0, old, ratio;

				if (!b->mask[i])
					continue;
				if (c->w_sft > 0) {
					g -= c->w_sft * sn;
					if (two)
						ms[M_SFT] -= l * sn;
				}
				old = isfinite(b->old[i]) ? b->old[i] : l;
				ratio = exp(l - old);
				if (trains_pg(c, b, s)) {
					double A = s->adv, rcl = fmin(fmax(ratio, 1 - c->clip_low), 1 + c->clip_high);
					int clipped = (A > 0 && ratio > 1 + c->clip_high) ||
						      (A < 0 && ratio < 1 - c->clip_low);

					ms[M_PG] -= fmin(ratio * A, rcl * A) * pn;
					if (!clipped)
						g -= c->w_pg * A * ratio * pn;
					ms[M_CLIP] += clipped;
					ms[M_PGTOK]++;
					if (c->kl_coef > 0) {
						double d = rlp[r * T + p] - l;

						ms[M_KL] += (exp(d) - d - 1) * pn;
						g += c->w_pg * c->kl_coef * (1 - exp(d)) * pn;
					}
				}
				if (c->w_distill > 0 && isfinite(b->tadv[i])) {
					double a = b->tadv[i], w = fmin(ratio, c->is_clip);

					ms[M_DIST] -= w * a * dn;
					g -= c->w_distill * w * a * dn;
					ms[M_ISCLIP] += ratio > c->is_clip;
					ms[M_DTOK]++;
				}
				/* forward's loss is -sum(w * logp) / 1: w = -dL/dlogp */
				wt[r * T + p] = (float)-g;
				any |= g != 0;
			}
		}
		any |= nsoft > 0;
		if (any) {
			float loss;

			if (fw_model_forward_soft(m, tok, tgt, wt, rows, T, 1, lp, &loss, &soft, err,
						  errlen) ||
			    fw_model_backward(m, err, errlen))
				goto out;
			if (!two)
				ms[M_SFT] += loss / c->w_sft;
		}
		k += rows;
	}
	if (c->allreduce && c->allreduce(ms, M_COUNT, c->ctx)) {
		fw_seterr(err, errlen, "all-reduce failed");
		goto out;
	}
	if (m->dev != FW_DEV_CPU && c->allreduce_dev) {
		/* NCCL: the gradients are summed where they are */
		if (c->allreduce_dev(m->g, m->nw, c->ctx)) {
			fw_seterr(err, errlen, "all-reduce of the gradients on the device failed");
			goto out;
		}
	} else if (c->allreduce_f && m->dev != FW_DEV_CPU) {
		/* MPI over host buffers: through the host and back */
		float *h = malloc(sizeof(float) * (size_t)m->nw);

		if (!h) {
			fw_seterr(err, errlen, "out of memory");
			goto out;
		}
		fw_dev_d2h(m->dev, h, m->g, sizeof(float) * (size_t)m->nw);
		if (fw_dev_check(m->dev, err, errlen)) {
			free(h);
			goto out;
		}
		if (c->allreduce_f(h, m->nw, c->ctx)) {
			fw_seterr(err, errlen, "all-reduce failed");
			free(h);
			goto out;
		}
		fw_dev_h2d(m->dev, m->g, h, sizeof(float) * (size_t)m->nw);
		free(h);
		if (fw_dev_check(m->dev, err, errlen))
			goto out;
	} else if (c->allreduce_f && c->allreduce_f(m->g, m->nw, c->ctx)) {
		fw_seterr(err, errlen, "all-reduce failed");
		goto out;
	}
	st->loss_sft = ms[M_SFT];
	st->loss_pg = ms[M_PG];
	st->kl = ms[M_KL];
	st->loss_distill = ms[M_DIST];
	st->loss_topk = ms[M_TOPK];
	st->loss = c->w_sft * ms[M_SFT] + c->w_pg * (ms[M_PG] + c->kl_coef * ms[M_KL]) +
		   c->w_distill * ms[M_DIST] + c->w_topk * ms[M_TOPK];
	st->clip_frac = ms[M_PGTOK] > 0 ? ms[M_CLIP] / ms[M_PGTOK] : 0;
	st->is_clip_frac = ms[M_DTOK] > 0 ? ms[M_ISCLIP] / ms[M_DTOK] : 0;
	st->tokens = (long)nrm[S_NTOK];
	st->seqs = (long)nrm[S_NSEQ];
	st->lr = fw_train_lr(c, o->step + 1);
	gsq = fw_model_grad_sumsq(m);
	st->grad_norm = sqrt(gsq);
	if (!isfinite(st->loss) || !isfinite(st->grad_norm)) {
		fw_seterr(err, errlen, "the loss (%g) or the gradient norm (%g) is not finite",
		       st->loss, st->grad_norm);
		goto out;
	}
	/* As torch.optim does, the step is taken even when no token gave a
	 * gradient (every group skipped): momentum and weight decay go on and
	 * the step counts stay those of the schedule. */
	{
		struct fw_adamw_cfg a = c->adamw;

		a.lr = (float)st->lr;
		fw_opt_step(o, m, &a);
		if (!fw_model_weights_finite(m)) {
			if (fw_dev_check(m->dev, err, errlen) == 0)
				fw_seterr(err, errlen, "the update made weights that are not finite");
			goto out;
		}
	}
	st->seconds = fw_now() - t0;
	rc = 0;
out:
	free(tok);
	free(tgt);
	free(wt);
	free(lp);
	free(rlp);
	free(krow);
	free(ktok);
	free(kw);
	free(klog);
	free(kq);
	return rc;
}

/* ---- data parallel ------------------------------------------------------------------ */

typedef int (*mpi_init_fn)(int *, char ***);
typedef int (*mpi_rank_fn)(void *, int *);
typedef int (*mpi_allreduce_fn)(const void *, void *, int, void *, void *, void *);
typedef int (*mpi_finalize_fn)(void);

struct fw_dp {
	int rank, size;
	void *lib;
	void *world, *t_float, *t_double, *op_sum, *in_place;
	mpi_allreduce_fn allreduce;
	mpi_finalize_fn finalize;
};

struct fw_dp *fw_dp_init(int *argc, char ***argv, char *err, size_t errlen)
{
	struct fw_dp *dp = calloc(1, sizeof(*dp));
	const char *off = getenv("FW_MPI"), *name = getenv("FW_MPI_LIB");
	mpi_init_fn init;
	mpi_rank_fn rank, size;

	if (!dp) {
		fw_seterr(err, errlen, "out of memory");
		return NULL;
	}
	dp->size = 1;
	if ((off && !strcmp(off, "0")) ||
	    (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK")))
		return dp;
	/* RTLD_GLOBAL: Open MPI's own plugins resolve against it. */
	if (!(dp->lib = dlopen(name ? name : "libmpi.so.40", RTLD_NOW | RTLD_GLOBAL))) {
		fw_seterr(err, errlen, "started by an MPI launcher, but %s", dlerror());
		free(dp);
		return NULL;
	}
	init = (mpi_init_fn)dlsym(dp->lib, "MPI_Init");
	rank = (mpi_rank_fn)dlsym(dp->lib, "MPI_Comm_rank");
	size = (mpi_rank_fn)dlsym(dp->lib, "MPI_Comm_size");
	dp->allreduce = (mpi_allreduce_fn)dlsym(dp->lib, "MPI_Allreduce");
	dp->finalize = (mpi_finalize_fn)dlsym(dp->lib, "MPI_Finalize");
	dp->world = dlsym(dp->lib, "ompi_mpi_comm_world");
	dp->t_float = dlsym(dp->lib, "ompi_mpi_float");
	dp->t_double = dlsym(dp->lib, "ompi_mpi_double");
	dp->op_sum = dlsym(dp->lib, "ompi_mpi_op_sum");
	if (!init || !rank || !size || !dp->allreduce || !dp->finalize || !dp->world ||
	    !dp->t_float || !dp->t_double || !dp->op_sum) {
		fw_seterr(err, errlen, "the MPI library is not Open MPI (a symbol is missing)");
		dlclose(dp->lib);
		free(dp);
		return NULL;
	}
	if (init(argc, argv) || rank(dp->world, &dp->rank) || size(dp->world, &dp->size)) {
		fw_seterr(err, errlen, "MPI_Init failed");
		free(dp);
		return NULL;
	}
	return dp;
}

int fw_dp_rank(const struct fw_dp *dp)
{
	return dp->rank;
}

int fw_dp_size(const struct fw_dp *dp)
{
	return dp->size;
}

/* MPI_IN_PLACE is (void *)1 in Open MPI's mpi.h. */
#define OMPI_IN_PLACE ((void *)1)

static int dp_sum(struct fw_dp *dp, void *x, long n, size_t esz, void *type)
{
	/* The count is an int: large buffers go in pieces. */
	for (long i = 0; i < n; i += 1L << 28) {
		long k = n - i < (1L << 28) ? n - i : (1L << 28);

		if (dp->allreduce(OMPI_IN_PLACE, (char *)x + i * esz, (int)k, type, dp->op_sum,
				  dp->world))
			return -1;
	}
	return 0;
}

int fw_dp_sum_f(float *x, long n, void *p)
{
	struct fw_dp *dp = p;

	return dp->size > 1 ? dp_sum(dp, x, n, sizeof(float), dp->t_float) : 0;
}

int fw_dp_sum_d(double *x, long n, void *p)
{
	struct fw_dp *dp = p;

	return dp->size > 1 ? dp_sum(dp, x, n, sizeof(double), dp->t_double) : 0;
}

int fw_dp_bcast_bytes(unsigned char *buf, int n, void *p)
{
	struct fw_dp *dp = p;
	double *d;
	int rc;

	if (dp->size <= 1)
		return 0;
	if (!(d = calloc(n, sizeof(double))))
		return -1;
	/* A sum in which only rank 0's values are not zero: small integers,
	 * exact in double. */
	for (int i = 0; dp->rank == 0 && i < n; i++)
		d[i] = buf[i];
	rc = fw_dp_sum_d(d, n, dp);
	for (int i = 0; !rc && i < n; i++)
		buf[i] = (unsigned char)d[i];
	free(d);
	return rc;
}

void fw_dp_free(struct fw_dp *dp)
{
	if (!dp)
		return;
	if (dp->lib)
		dp->finalize();
	/* The library stays loaded: Open MPI does not support unloading. */
	free(dp);
}

/* ---- checkpoints ----------------------------------------------------------------- */

static const char *sched_name(enum fw_sched s)
{
	return s == FW_SCHED_CONSTANT ? "constant" : "cosine";
}

int fw_train_state_load(struct fw_train_state *s, const char *dir, char *err,
			size_t errlen)
{
	char p[PATH_MAX];
	json_error_t je;
	json_t *j, *v, *sc;

	memset(s, 0, sizeof(*s));
	snprintf(p, sizeof(p), "%s/trainer_state.json", dir);
	if (access(p, F_OK))
		return 0;
	if (!(j = json_load_file(p, 0, &je))) {
		fw_seterr(err, errlen, "%s: line %d: %s", p, je.line, je.text);
		return -1;
	}
	if (!json_is_object(j) || !json_is_integer(json_object_get(j, "step"))) {
		fw_seterr(err, errlen, "%s: no integer 'step'", p);
		json_decref(j);
		return -1;
	}
	s->step = (long)json_integer_value(json_object_get(j, "step"));
	s->data_pos = (long)json_integer_value(json_object_get(j, "data_position"));
	s->tokens_seen = (long)json_integer_value(json_object_get(j, "tokens_seen"));
	if ((v = json_object_get(j, "id")) && json_is_string(v))
		snprintf(s->id, sizeof(s->id), "%s", json_string_value(v));
	if ((v = json_object_get(j, "seed")) && json_is_string(v)) {
		s->seed = strtoull(json_string_value(v), NULL, 10);
		s->have_seed = 1;
	}
	if ((v = json_object_get(j, "data_id")) && json_is_string(v))
		snprintf(s->data_id, sizeof(s->data_id), "%s", json_string_value(v));
	if ((v = json_object_get(j, "parent")) && json_is_string(v))
		snprintf(s->parent, sizeof(s->parent), "%s", json_string_value(v));
	if ((sc = json_object_get(j, "schedule")) && json_is_object(sc)) {
		s->have_sched = 1;
		s->lr = json_number_value(json_object_get(sc, "lr"));
		s->min_lr = json_number_value(json_object_get(sc, "min_lr"));
		s->warmup = (long)json_integer_value(json_object_get(sc, "warmup"));
		s->decay_steps = (long)json_integer_value(json_object_get(sc, "decay_steps"));
		v = json_object_get(sc, "name");
		s->sched = v && json_is_string(v) && !strcmp(json_string_value(v), "constant")
			? FW_SCHED_CONSTANT : FW_SCHED_COSINE;
	}
	json_decref(j);
	if (s->step < 0 || s->data_pos < 0) {
		fw_seterr(err, errlen, "%s: negative 'step' or 'data_position'", p);
		return -1;
	}
	return 0;
}

int fw_train_state_save(const struct fw_train_state *s, const char *dir,
			char *err, size_t errlen)
{
	char p[PATH_MAX], t[PATH_MAX + 8];
	json_t *j;
	int rc;

	snprintf(p, sizeof(p), "%s/trainer_state.json", dir);
	snprintf(t, sizeof(t), "%s.tmp", p);
	j = json_pack("{s:I, s:I, s:s, s:I, s:s, s:s, s:{s:s, s:f, s:f, s:I, s:I}}",
		      "step", (json_int_t)s->step,
		      "data_position", (json_int_t)s->data_pos,
		      "data_id", s->data_id,
		      "tokens_seen", (json_int_t)s->tokens_seen,
		      "id", s->id, "parent", s->parent,
		      "schedule", "name", sched_name(s->sched), "lr", s->lr,
		      "min_lr", s->min_lr, "warmup", (json_int_t)s->warmup,
		      "decay_steps", (json_int_t)s->decay_steps);
	if (j && s->have_seed) {
		/* A string: JSON readers lose 64-bit integers to doubles. */
		char b[24];

		snprintf(b, sizeof(b), "%llu", (unsigned long long)s->seed);
		json_object_set_new(j, "seed", json_string(b));
	}
	if (!j) {
		fw_seterr(err, errlen, "%s: out of memory", p);
		return -1;
	}
	rc = json_dump_file(j, t, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
	json_decref(j);
	if (rc || fw_durable_sync(t) || rename(t, p)) {
		fw_seterr(err, errlen, "%s: %s", p, strerror(errno));
		unlink(t);
		return -1;
	}
	return 0;
}

int fw_ckpt_resolve(const char *dir, char *out, size_t outlen, char *err,
		    size_t errlen)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/config.json", dir);
	if (!access(p, F_OK)) {
		snprintf(out, outlen, "%s", dir);
		return 0;
	}
	snprintf(p, sizeof(p), "%s/latest/config.json", dir);
	if (!access(p, F_OK)) {
		snprintf(out, outlen, "%s/latest", dir);
		return 0;
	}
	fw_seterr(err, errlen, "%s: not a checkpoint (no config.json, no latest/config.json)", dir);
	return -1;
}

void fw_ckpt_id(const struct fw_model *m, char id[17])
{
	/* Four independent multiply-xorshift lanes over 8-byte words: a
	 * 100M-parameter model hashes in tens of milliseconds, where a
	 * byte-at-a-time hash takes half a second. */
	uint64_t h[4] = { 0x243f6a8885a308d3ull, 0x13198a2e03707344ull,
			  0xa4093822299f31d0ull, 0x082efa98ec4e6c89ull }, x, r;
	size_t nb = sizeof(float) * (size_t)m->nw, i = 0;
	/* NULL only when the copy from a GPU failed: then the id is that of
	 * no weights, and the save that follows reports the failure. */
	const unsigned char *p = (const unsigned char *)fw_model_host_w(m, NULL, 0);

	if (!p)
		nb = 0;

	for (; i + 32 <= nb; i += 32)
		for (int k = 0; k < 4; k++) {
			memcpy(&x, p + i + 8 * k, 8);
			h[k] = (h[k] ^ x) * 0x9e3779b97f4a7c15ull;
			h[k] ^= h[k] >> 29;
		}
	for (; i < nb; i++)
		h[0] = (h[0] ^ p[i]) * 0x100000001b3ull;
	r = nb;
	for (int k = 0; k < 4; k++) {
		r = (r ^ h[k]) * 0xbf58476d1ce4e5b9ull;
		r ^= r >> 31;
	}
	snprintf(id, 17, "%016llx", (unsigned long long)r);
}

static int cmp_name_desc(const void *a, const void *b)
{
	return -strcmp(*(char *const *)a, *(char *const *)b);
}

/* Removes the temporary directories of writers that are gone, and step-*
 * checkpoints beyond the keep newest (never the one named keep_name). */
static void tidy(const char *root, int keep, const char *keep_name)
{
	DIR *dp = opendir(root);
	struct dirent *e;
	char p[PATH_MAX], **names = NULL;
	int n = 0, cap = 0;

	if (!dp)
		return;
	while ((e = readdir(dp))) {
		const char *dash;
		long pid;

		if (!strncmp(e->d_name, ".tmp-", 5) && (dash = strrchr(e->d_name, '-'))) {
			pid = strtol(dash + 1, NULL, 10);
			if (pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) && errno == ESRCH) {
				snprintf(p, sizeof(p), "%s/%s", root, e->d_name);
				fw_rmtree(p);
			}
		} else if (!strncmp(e->d_name, "step-", 5) && keep > 0) {
			if (n == cap) {
				char **q = realloc(names, sizeof(char *) * (cap = cap ? 2 * cap : 16));

				if (!q)
					break;
				names = q;
			}
			if (!(names[n] = strdup(e->d_name)))
				break;
			n++;
		}
	}
	closedir(dp);
	if (n > 1)
		qsort(names, n, sizeof(char *), cmp_name_desc);
	for (int i = 0; i < n; i++) {
		if (i >= keep && strcmp(names[i], keep_name)) {
			snprintf(p, sizeof(p), "%s/%s", root, names[i]);
			fw_rmtree(p);
		}
		free(names[i]);
	}
	free(names);
}

int fw_ckpt_write(const char *root, const struct fw_model *m,
		  const struct fw_opt *o, const struct fw_train_state *s,
		  const char *tok_from, enum fw_dtype dtype, int keep,
		  char *out, size_t outlen, char *err, size_t errlen)
{
	char tmp[PATH_MAX], name[64], fin[PATH_MAX], p[PATH_MAX + 64], lt[PATH_MAX];
	struct stat sb;

	if (mkdir(root, 0777) && errno != EEXIST) {
		fw_seterr(err, errlen, "%s: %s", root, strerror(errno));
		return -1;
	}
	snprintf(name, sizeof(name), "step-%08ld-%s", s->step, s->id);
	snprintf(tmp, sizeof(tmp), "%s/.tmp-%s-%ld", root, name, (long)getpid());
	snprintf(fin, sizeof(fin), "%s/%s", root, name);
	fw_rmtree(tmp);
	if (mkdir(tmp, 0777)) {
		fw_seterr(err, errlen, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	if (fw_model_save(m, tmp, dtype, err, errlen))
		goto fail;
	snprintf(p, sizeof(p), "%s/optimizer.safetensors", tmp);
	if (fw_opt_save(o, m, p, err, errlen) || fw_train_state_save(s, tmp, err, errlen))
		goto fail;
	if (tok_from && !access(tok_from, F_OK)) {
		snprintf(p, sizeof(p), "%s/tokenizer.json", tmp);
		if (fw_copy_file(tok_from, p)) {
			fw_seterr(err, errlen, "%s: %s", p, strerror(errno));
			goto fail;
		}
	}
	/* Data on disk before the names that point at it. */
	if (fw_durable_sync_dir(tmp, err, errlen))
		goto fail;
	if (!stat(fin, &sb)) {
		/* The same step and content id: that checkpoint is already here. */
		fw_rmtree(tmp);
	} else if (rename(tmp, fin)) {
		fw_seterr(err, errlen, "%s: %s", fin, strerror(errno));
		goto fail;
	}
	snprintf(lt, sizeof(lt), "%s/.tmp-latest-%ld", root, (long)getpid());
	snprintf(p, sizeof(p), "%s/latest", root);
	unlink(lt);
	if (symlink(name, lt) || rename(lt, p)) {
		fw_seterr(err, errlen, "%s: %s", p, strerror(errno));
		unlink(lt);
		return -1;
	}
	if (fw_durable_sync(root)) {
		fw_seterr(err, errlen, "%s: %s", root, strerror(errno));
		return -1;
	}
	tidy(root, keep, name);
	snprintf(out, outlen, "%s", fin);
	return 0;
fail:
	fw_rmtree(tmp);
	return -1;
}

int fw_ckpt_create(const char *out, const struct fw_model *m, const struct fw_tok *t,
		   const char *tok_from, enum fw_dtype dtype, char *err, size_t errlen)
{
	char *tmp = fw_durable_tmpdir(out, err, errlen), p[PATH_MAX + 32];
	int rc = -1;

	assert(m);
	if (!tmp)
		return -1;
	snprintf(p, sizeof(p), "%s/tokenizer.json", tmp);
	if (fw_model_save(m, tmp, dtype, err, errlen) || (t && fw_tok_save(t, p, err, errlen)))
		fw_rmtree(tmp);
	else if (!t && tok_from && !access(tok_from, F_OK) && fw_copy_file(tok_from, p)) {
		fw_seterr(err, errlen, "%s: %s", p, strerror(errno));
		fw_rmtree(tmp);
	} else
		rc = fw_durable_publish(tmp, out, err, errlen);
	free(tmp);
	return rc;
}
