/*
 * fw_teach_run.c — one rollout record taught: its hints, the teacher's
 * credit, the split against the group's demo, the record written back;
 * and the tallies and groups of a run.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_mp.h"
#include "fw_stream.h"
#include "fw_teach.h"
#include "fw_teach_run.h"
#include "fw_tok.h"

enum { NCACHE = 4 };

const char *fw_teach_parse_hints(char *list, struct fw_teach_conf *C, int *rules, int *demo)
{
	char *save = NULL;

	C->use_env = *rules = *demo = 0;
	C->hint_spec = NULL;
	for (char *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save))
		if (!strcmp(w, "env"))
			C->use_env = 1;
		else if (!strcmp(w, "rules"))
			*rules = 1;
		else if (!strcmp(w, "demo"))
			*demo = 1;
		else if (!strncmp(w, "model:", 6) &&
			 (!strcmp(w + 6, "policy") || !fw_teach_spec_ok(w + 6)))
			C->hint_spec = w + 6;
		else
			return w;
	return NULL;
}

int fw_teach_spec_ok(const char *s)
{
	return (!strncmp(s, "builtin:", 8) && s[8]) || (!strncmp(s, "http:", 5) && s[5]) ? 0 : -1;
}

/* What one worker thread owns: teachers by spec (most recent first) and
 * the tokenizer of an http teacher's records. */
struct fw_teach_worker {
	struct { char *spec; struct fw_teacher *T; } tc[NCACHE];
	char *tok_path;
	struct fw_tok *tok;
	struct fw_buf tb;
};

struct fw_teach_worker *fw_teach_worker_new(void)
{
	return calloc(1, sizeof(struct fw_teach_worker));
}

void fw_teach_worker_free(struct fw_teach_worker *W)
{
	if (!W)
		return;
	for (int i = 0; i < NCACHE; i++) {
		free(W->tc[i].spec);
		fw_teacher_free(W->tc[i].T);
	}
	free(W->tok_path);
	fw_tok_free(W->tok);
	fw_buf_free(&W->tb);
	free(W);
}

/* The teacher spec names, opened once per worker.  NULL with err. */
static struct fw_teacher *get_teacher(struct fw_teach_worker *W, const char *spec, double timeout_s,
				      char *err, size_t errlen)
{
	struct fw_teacher *T;
	int i;

	for (i = 0; i < NCACHE && W->tc[i].spec; i++)
		if (!strcmp(W->tc[i].spec, spec))
			break;
	if (i == NCACHE || !W->tc[i].spec) {
		if (!(T = fw_teacher_open(spec, timeout_s, 2, err, errlen)))
			return NULL;
		char *s = strdup(spec);

		if (!s) {
			fw_teacher_free(T);
			snprintf(err, errlen, "out of memory");
			return NULL;
		}
		/* evict the least recent when full */
		i = NCACHE - 1;
		free(W->tc[i].spec);
		fw_teacher_free(W->tc[i].T);
		W->tc[i].spec = s;
		W->tc[i].T = T;
	}
	/* move to the front */
	for (; i > 0; i--) {
		__typeof__(W->tc[0]) x = W->tc[i];

		W->tc[i] = W->tc[i - 1];
		W->tc[i - 1] = x;
	}
	return W->tc[0].T;
}

/* The tokenizer at path, kept while the next record asks for the same. */
static const struct fw_tok *get_tok(struct fw_teach_worker *W, const char *path,
				    char *err, size_t errlen)
{
	if (W->tok && !strcmp(W->tok_path, path))
		return W->tok;
	fw_tok_free(W->tok);
	free(W->tok_path);
	W->tok_path = NULL;
	if (!(W->tok = fw_tok_load(path, err, errlen)))
		return NULL;
	if (!(W->tok_path = strdup(path))) {
		fw_tok_free(W->tok);
		W->tok = NULL;
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	return W->tok;
}

static void diag(struct fw_teach_result *J, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void diag(struct fw_teach_result *J, const char *fmt, ...)
{
	char m[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m, sizeof m, fmt, ap);
	va_end(ap);
	for (char *p = m; *p; p++)
		if (*p == '\n')
			*p = ' ';
	fw_buf_printf(&J->diag, "%s\n", m);
}

/* The record's policy.ckpt into buf (size n); 1 when it has one. */
static int policy_ckpt(struct fw_mpv v, char *buf, size_t n)
{
	struct fw_mpv pol, ck;
	const char *s;
	size_t sn;

	if (fw_mp_get(v, "policy", &pol) != 1 || fw_mp_get(pol, "ckpt", &ck) != 1 ||
	    fw_mp_str(ck, &s, &sn) || !sn || sn + 9 >= n)
		return 0;
	memcpy(buf, s, sn);
	buf[sn] = 0;
	return 1;
}

/* The reason s into buf (size n) with each run of digits as N, so that
 * reasons differing only in their numbers count together. */
static void reason_class(char *buf, size_t n, const char *s)
{
	size_t j = 0;

	for (; *s && j + 1 < n; s++) {
		if (*s >= '0' && *s <= '9') {
			if (j && buf[j - 1] == 'N')
				continue;
			buf[j++] = 'N';
		} else {
			buf[j++] = *s == '\n' ? ' ' : *s;
		}
	}
	buf[j] = 0;
}

void fw_teach_one(const struct fw_teach_conf *C, struct fw_teach_worker *W, struct fw_mpv v,
		  struct fw_mpv demo, struct fw_teach_result *J)
{
	struct fw_teach_hints hs = { 0 };
	float *adv = NULL;
	long nadv = 0;
	struct fw_teach_topk tk = { .k = C->topk };
	const char *reason = NULL, *other = NULL, *hint_error = NULL;
	char why[1024] = "", hwhy[1024] = "", err[1024], ckpt[4096], spec[4200];
	int has_ckpt = policy_ckpt(v, ckpt, sizeof ckpt);

	fw_buf_reset(&J->out);
	fw_buf_reset(&J->diag);
	J->bad = 0;
	J->hinted = J->credited = 0;
	J->omitted[0] = 0;
	if ((C->use_env && fw_teach_env_hints(v, C->max_chars, &hs, err, sizeof err) < 0) ||
	    (C->rules && fw_teach_rule_hints(C->rules, v, &hs, err, sizeof err) < 0) ||
	    (demo.n && fw_teach_demo_hint(v, demo, C->demo_chars, &hs, err, sizeof err) < 0)) {
		diag(J, "%s", err);
		J->bad = 1;
		fw_teach_hints_free(&hs);
		return;
	}
	if (C->hint_spec) {
		struct fw_teacher *H = NULL;
		const char *hsp = C->hint_spec;

		if (!strcmp(hsp, "policy")) {
			hsp = NULL;
			if (has_ckpt) {
				snprintf(spec, sizeof spec, "builtin:%s", ckpt);
				hsp = spec;
			}
		}
		if (!hsp)
			snprintf(hwhy, sizeof hwhy, "no policy.ckpt for model:policy");
		else if ((H = get_teacher(W, hsp, C->timeout_s, hwhy, sizeof hwhy)) &&
			 fw_teach_model_hint(H, v, &C->ho, &hs, hwhy, sizeof hwhy) >= 0)
			hwhy[0] = 0;
		if (hwhy[0]) {
			hint_error = hwhy;
			diag(J, "model hint: %s", hwhy);
		}
	}
	if (!C->no_teacher) {
		struct fw_teacher *T = NULL;
		const struct fw_tok *t = NULL;
		struct fw_mpv x;
		int cr;

		if (C->teacher) {
			snprintf(spec, sizeof spec, "%s", C->teacher);
			/* the rollout's own checkpoint is not named */
			if (!(has_ckpt && !strncmp(spec, "builtin:", 8) && !strcmp(spec + 8, ckpt)))
				other = !strncmp(spec, "builtin:", 8) ? C->teacher + 8 : C->teacher;
		} else if (has_ckpt) {
			snprintf(spec, sizeof spec, "builtin:%s", ckpt);
		} else {
			reason = "no teacher: no --teacher and no policy.ckpt";
		}
		if (!reason && !(T = get_teacher(W, spec, C->timeout_s, why, sizeof why)))
			reason = why;
		if (T && !(t = fw_teacher_tok(T))) {
			/* an http teacher scores ids of the rollout's own tokenizer */
			char p[4200];

			if (C->tokenizer)
				snprintf(p, sizeof p, "%s", C->tokenizer);
			else if (has_ckpt)
				snprintf(p, sizeof p, "%s/tokenizer.json", ckpt);
			if (!C->tokenizer && !has_ckpt)
				reason = "no tokenizer for the http teacher: no --tokenizer and no policy.ckpt";
			else if (!(t = get_tok(W, p, why, sizeof why)))
				reason = why;
		}
		if (T && t &&
		    (cr = (fw_mp_get(v, "tokens", &x) == 1 ? fw_teach_credit_fill
							   : fw_teach_credit_agent)(
			     T, t, v, &hs, C->clip, &adv, &nadv, &tk, why, sizeof why)) != 0) {
			reason = why;
			if (cr < 0)
				diag(J, "teacher: %s", why);
		}
	}
	J->split = 0;
	J->sum_diff = J->sum_rest = 0;
	J->n_diff = J->n_rest = 0;
	/* only a failing rollout is compared (a resolved one has no hint) */
	if (adv && nadv > 0 && demo.n && hs.n && !fw_teach_resolved(v)) {
		unsigned char *dm = NULL;
		long nd = 0;

		if (fw_teach_diff_mask(v, demo, &dm, &nd, err, sizeof err) < 0) {
			diag(J, "%s", err);
			J->bad = 1;
		} else if (dm && nd == nadv) {
			J->split = 1;
			for (long i = 0; i < nadv; i++)
				if (dm[i]) {
					J->sum_diff += adv[i];
					J->n_diff++;
				} else {
					J->sum_rest += adv[i];
					J->n_rest++;
				}
		}
		free(dm);
	}
	if (!C->no_teacher && hs.n) {
		J->hinted = 1;
		J->credited = adv != NULL;
		if (!adv)
			reason_class(J->omitted, sizeof J->omitted, reason ? reason : "no credit");
	}
	fw_buf_reset(&W->tb);
	if (fw_teach_pack(&W->tb, &hs, adv, nadv, &tk, reason, other, hint_error)) {
		diag(J, "out of memory");
		J->bad = 1;
	} else {
		struct fw_field f = { "teach", 5, { W->tb.p, W->tb.n } };
		struct fw_buf sb = { 0 }, tb2 = { 0 };
		int oom = 0;

		if (J->split) {
			/* teach.adv_split: {differ, rest, n_differ, n_rest}, the
			 * mean credit on each side (0 on an empty one) */
			msgpack_packer pk;
			struct fw_field sf = { "adv_split", 9, { NULL, 0 } };

			fw_buf_packer(&pk, &sb);
			msgpack_pack_map(&pk, 4);
			msgpack_pack_str(&pk, 6);
			msgpack_pack_str_body(&pk, "differ", 6);
			msgpack_pack_double(&pk, J->n_diff ? J->sum_diff / (double)J->n_diff : 0);
			msgpack_pack_str(&pk, 4);
			msgpack_pack_str_body(&pk, "rest", 4);
			msgpack_pack_double(&pk, J->n_rest ? J->sum_rest / (double)J->n_rest : 0);
			msgpack_pack_str(&pk, 8);
			msgpack_pack_str_body(&pk, "n_differ", 8);
			msgpack_pack_int64(&pk, J->n_diff);
			msgpack_pack_str(&pk, 6);
			msgpack_pack_str_body(&pk, "n_rest", 6);
			msgpack_pack_int64(&pk, J->n_rest);
			sf.val = (struct fw_mpv){ sb.p, sb.n };
			oom = fw_buf_packed(&sb, 0) < 0 || fw_rec_set(&tb2, f.val, &sf, 1) != 0;
			f.val = (struct fw_mpv){ tb2.p, tb2.n };
		}
		if (oom || fw_rec_set(&J->out, v, &f, 1)) {
			fw_buf_reset(&J->out);
			diag(J, "out of memory");
			J->bad = 1;
		}
		fw_buf_free(&sb);
		fw_buf_free(&tb2);
	}
	free(adv);
	fw_teach_topk_release(&tk);
	fw_teach_hints_free(&hs);
}


void fw_teach_result_release(struct fw_teach_result *r)
{
	if (!r)
		return;
	fw_buf_release(&r->out);
	fw_buf_release(&r->diag);
}

struct fw_teach_job *fw_teach_job_new(const char *file, uint64_t index, uint64_t offset,
				      struct fw_mpv rec, struct fw_mpv demo)
{
	struct fw_teach_job *J = calloc(1, sizeof *J);

	if (!J)
		return NULL;
	J->file = file;
	J->index = index;
	J->offset = offset;
	if (fw_buf_append(&J->rec, rec.p, rec.n) ||
	    (demo.n && fw_buf_append(&J->demo, demo.p, demo.n))) {
		fw_teach_job_free(J);
		return NULL;
	}
	return J;
}

void fw_teach_job_free(struct fw_teach_job *J)
{
	if (!J)
		return;
	fw_buf_release(&J->rec);
	fw_buf_release(&J->demo);
	fw_teach_result_release(&J->res);
	free(J);
}

/* ---- tallies ----------------------------------------------------------------- */

void fw_teach_tally_add(struct fw_teach_tally *t, const struct fw_teach_result *r)
{
	t->hinted += r->hinted;
	if (r->split) {
		t->n_split++;
		t->sum_diff += r->sum_diff;
		t->sum_rest += r->sum_rest;
		t->n_diff += r->n_diff;
		t->n_rest += r->n_rest;
	}
	t->credited += r->credited;
	if (r->hinted && !r->credited) {
		int i = 0;

		while (i < t->nomit && strcmp(t->omit[i].why, r->omitted))
			i++;
		/* past FW_TEACH_NOMIT distinct reasons the last slot holds the rest */
		if (i == t->nomit && t->nomit == FW_TEACH_NOMIT)
			snprintf(t->omit[i = FW_TEACH_NOMIT - 1].why, sizeof t->omit[0].why,
				 "other reasons");
		else if (i == t->nomit)
			snprintf(t->omit[t->nomit++].why, sizeof t->omit[0].why, "%s", r->omitted);
		t->omit[i].n++;
	}
}

int fw_teach_tally_text(const struct fw_teach_tally *t, const char *prog, struct fw_buf *out)
{
	int e = 0;

	if (t->hinted) {
		e |= fw_buf_printf(out, "%s: credit for %llu of %llu failing rollouts (%.1f%%)\n", prog,
				   (unsigned long long)t->credited, (unsigned long long)t->hinted,
				   100.0 * (double)t->credited / (double)t->hinted);
		for (int i = 0; i < t->nomit; i++)
			e |= fw_buf_printf(out, "%s: omitted for %llu: %s\n", prog,
					   (unsigned long long)t->omit[i].n, t->omit[i].why);
	}
	if (t->n_split)
		e |= fw_buf_printf(out,
				   "%s: credit beside a correct solution (%ld rollouts): mean %.3f on "
				   "the %ld tokens that differ, %.3f on the %ld others\n",
				   prog, t->n_split, t->n_diff ? t->sum_diff / (double)t->n_diff : 0.0,
				   t->n_diff, t->n_rest ? t->sum_rest / (double)t->n_rest : 0.0,
				   t->n_rest);
	return e ? -1 : 0;
}

/* ---- groups -------------------------------------------------------------------- */

int fw_teach_group_ends(const struct fw_teach_group *G, int has, uint64_t key)
{
	return G->n && (!has || !G->has || key != G->key);
}

int fw_teach_group_add(struct fw_teach_group *G, struct fw_mpv rec, uint64_t index,
		       uint64_t offset, int has, uint64_t key)
{
	if (G->n == G->cap) {
		size_t nc = G->cap ? 2 * G->cap : 16;
		void *p = realloc(G->r, nc * sizeof *G->r);

		if (!p)
			return -1;
		G->r = p;
		G->cap = nc;
	}
	G->r[G->n].off = G->data.n;
	G->r[G->n].n = rec.n;
	G->r[G->n].index = index;
	G->r[G->n].offset = offset;
	if (fw_buf_append(&G->data, rec.p, rec.n))
		return -1;
	G->n++;
	G->has = has;
	G->key = key;
	return 0;
}

struct fw_mpv fw_teach_group_rec(const struct fw_teach_group *G, size_t i)
{
	return (struct fw_mpv){ G->data.p + G->r[i].off, G->r[i].n };
}

struct fw_mpv fw_teach_group_demo(const struct fw_teach_group *G)
{
	for (size_t i = 0; G->has && i < G->n; i++) {
		struct fw_mpv v = fw_teach_group_rec(G, i);

		if (fw_teach_resolved(v))
			return v;
	}
	return (struct fw_mpv){ NULL, 0 };
}

void fw_teach_group_reset(struct fw_teach_group *G)
{
	G->n = 0;
	fw_buf_reset(&G->data);
}

void fw_teach_group_release(struct fw_teach_group *G)
{
	if (!G)
		return;
	fw_buf_release(&G->data);
	free(G->r);
	memset(G, 0, sizeof *G);
}
