/*
 * fb-report — what users tell us: failure categories of thumbs-down
 * trajectories and A/B verdicts between models.  See fb-report(1).
 *
 * One pass over the traj records gathers per-category counts and the votes
 * (arm, user, rating); the statistics come from fw_stats at the end.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_cli.h"
#include "fw_fbcat.h"
#include "fw_json.h"
#include "fw_judge.h"
#include "fw_mp.h"
#include "fw_stats.h"
#include "fw_stream.h"

static const char usage_text[] =
	"usage: fb-report [--by PATH] [--paired-by PATH] [--records] [--seed S]\n"
	"                 [--resamples N] [-o OUT] [-z] [--skip-bad] [--shard K/N]\n"
	"                 [--progress] [FILE...]\n"
	"       fb-report --judge LABELS [--seed S] [--resamples N] [FILE...]\n";

static const struct fw_opt_doc options[] = {
	{ "--by PATH", "group votes into arms by the value at PATH (default .model)" },
	{ "--paired-by PATH", "compare two arms item by item, the item being the value at PATH" },
	{ "--records", "write records (msgpack) instead of the text report" },
	{ "--seed S", "seed of the bootstrap" },
	{ "--resamples N", "bootstrap resamples (default 2000, more for many pairs)" },
	{ "-o OUT", "write to OUT instead of standard output" },
	{ "-z", "compress the records with zstd" },
	{ "--skip-bad", "skip records that cannot be read, and count them" },
	{ "--shard K/N", "report on the records whose id hashes to K modulo N only" },
	{ "--progress", "a progress meter on standard error even when it is not a terminal" },
	{ "--judge LABELS", "measure how well a judge agrees with people instead" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

#define EXAMPLES 3

/* ---- state ---------------------------------------------------------------------- */

struct category {
	char *name;
	uint64_t count, ext, internal;
	char *examples[EXAMPLES];
	int nex;
};

struct state {
	struct fw_path *by, *paired_by;
	const char *by_src, *paired_src;
	uint64_t seed;
	unsigned resamples;
	double alpha; /* per pair: 0.05 over the number of pairs (Bonferroni) */
	int records;
	struct fw_intern arms, users, keys;
	struct category *cats;
	size_t ncats, capcats;
	struct fw_ab_vote *votes;
	size_t nvotes, capvotes;
	struct fw_ab_item *pv;
	size_t npv, cappv;
	uint64_t ntraj, ndown, ndown_ext, ndown_int, nrated, anon;
	struct fw_fbcat *cat;
	struct fw_buf tmp;
};

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 256;
	while (nc < need)
		nc *= 2;
	void *np = realloc(*p, nc * size);
	if (!np)
		return -1;
	*p = np;
	*cap = nc;
	return 0;
}

/* The string at key in map m: 1 with *s, *n set, or 0 (and NULL) when absent
 * or not a string. */
static int str_of(struct fw_mpv m, const char *key, const char **s, size_t *n)
{
	struct fw_mpv v;
	if (fw_mp_get(m, key, &v) != 1 || fw_mp_str(v, s, n) < 0) {
		*s = NULL;
		*n = 0;
		return 0;
	}
	return 1;
}

static struct category *category(struct state *st, const char *name, size_t n)
{
	for (size_t i = 0; i < st->ncats; i++)
		if (strlen(st->cats[i].name) == n && !memcmp(st->cats[i].name, name, n))
			return &st->cats[i];
	if (grow((void **)&st->cats, &st->capcats, st->ncats + 1, sizeof *st->cats) < 0)
		return NULL;
	struct category *c = &st->cats[st->ncats];
	memset(c, 0, sizeof *c);
	if (!(c->name = strndup(name, n)))
		return NULL;
	st->ncats++;
	return c;
}

static int count_in(struct state *st, const char *name, size_t n, int ext, int internal,
		    const char *id, size_t idn)
{
	struct category *c = category(st, name, n);
	if (!c)
		return -1;
	c->count++;
	c->ext += ext;
	c->internal += internal;
	if (c->nex < EXAMPLES && id && !(c->examples[c->nex++] = strndup(id, idn)))
		return -1;
	return 0;
}

/* The text of the value at path as a label: strings as they are, other
 * values as JSON, a missing one as "(none)". */
static int label(struct state *st, const struct fw_path *p, struct fw_mpv rec, const char **s,
		 size_t *n)
{
	struct fw_mpv v;
	char err[128];
	if (!fw_path_get(p, rec, &v)) {
		*s = "(none)";
		*n = 6;
		return 0;
	}
	if (fw_mp_str(v, s, n) == 0)
		return 0;
	fw_buf_reset(&st->tmp);
	if (fw_json_from_mp(&st->tmp, v, err, sizeof err) < 0)
		return -1;
	*s = (const char *)st->tmp.p;
	*n = st->tmp.n;
	return 0;
}

static int one(struct state *st, struct fw_mpv rec, const char *file, uint64_t index,
	       uint64_t offset)
{
	struct fw_mpv fb, f, v;
	struct fw_mp_iter it;
	const char *id, *s;
	size_t idn, n;
	int down = 0, down_ext = 0, down_int = 0;
	int has_fb = fw_mp_get(rec, "feedback", &fb) == 1;
	if (has_fb && fw_mp_type(fb) != FW_MP_ARRAY) {
		fw_warn_rec(file, index, offset, "field 'feedback' is %s, not array",
			    fw_mp_type_name(fw_mp_type(fb)));
		return -1;
	}
	if (has_fb) {
		/* Check the votes before counting anything of this record. */
		uint64_t k = 0;
		fw_mp_iter_init(&it, fb);
		for (; fw_mp_iter_next(&it, &f) == 1; k++) {
			double r;
			if (fw_mp_type(f) != FW_MP_MAP) {
				fw_warn_rec(file, index, offset, "field 'feedback[%llu]' is %s, not map",
					    (unsigned long long)k, fw_mp_type_name(fw_mp_type(f)));
				return -1;
			}
			if (fw_mp_get(f, "rating", &v) == 1 && fw_mp_type(v) != FW_MP_NIL &&
			    fw_mp_double(v, &r) < 0) {
				fw_warn_rec(file, index, offset,
					    "field 'feedback[%llu].rating' is %s, not a number",
					    (unsigned long long)k, fw_mp_type_name(fw_mp_type(v)));
				return -1;
			}
		}
	}
	st->ntraj++;
	str_of(rec, "id", &id, &idn);
	if (label(st, st->by, rec, &s, &n) < 0) {
		fw_warn_rec(file, index, offset, "cannot read '%s'", st->by_src);
		return -1;
	}
	int64_t arm = fw_intern_add(&st->arms, s, n), key = -1;
	if (arm < 0)
		goto oom;
	if (st->paired_by) {
		if (label(st, st->paired_by, rec, &s, &n) < 0) {
			fw_warn_rec(file, index, offset, "cannot read '%s'", st->paired_src);
			return -1;
		}
		if ((key = fw_intern_add(&st->keys, s, n)) < 0)
			goto oom;
	}
	uint32_t ups = 0, downs = 0;
	if (has_fb) {
		fw_mp_iter_init(&it, fb);
		while (fw_mp_iter_next(&it, &f) == 1) {
			double r;
			if (fw_mp_get(f, "rating", &v) != 1 || fw_mp_double(v, &r) < 0 || r == 0)
				continue;
			const char *origin, *user;
			size_t on, un;
			str_of(f, "origin", &origin, &on);
			int internal = origin && on == 8 && !memcmp(origin, "internal", 8);
			if (r < 0) {
				down = 1;
				down_int |= internal;
				down_ext |= !internal;
			}
			char anon[32];
			if (!str_of(f, "user", &user, &un)) {
				/* A vote without a user is its own cluster. */
				un = (size_t)snprintf(anon, sizeof anon, "\x01anon-%llu",
						      (unsigned long long)st->anon++);
				user = anon;
			}
			int64_t u = fw_intern_add(&st->users, user, un);
			if (u < 0 ||
			    grow((void **)&st->votes, &st->capvotes, st->nvotes + 1, sizeof *st->votes) < 0)
				goto oom;
			st->votes[st->nvotes++] = (struct fw_ab_vote){(uint32_t)u, (uint32_t)arm, r > 0};
			st->nrated++;
			ups += r > 0;
			downs += r < 0;
		}
	}
	if (key >= 0 && ups + downs > 0) {
		if (grow((void **)&st->pv, &st->cappv, st->npv + 1, sizeof *st->pv) < 0)
			goto oom;
		st->pv[st->npv++] = (struct fw_ab_item){(uint32_t)key, (uint32_t)arm, ups, downs};
	}
	if (!down)
		return 0;
	st->ndown++;
	st->ndown_ext += down_ext;
	st->ndown_int += down_int;
	unsigned bits = fw_fbcat_classify(st->cat, rec);
	int any = 0;
	for (int r = 0; r < FW_FBCAT_NRULES; r++) {
		if (!(bits & (1u << r)))
			continue;
		any = 1;
		const char *name = fw_fbcat_name(r);
		if (count_in(st, name, strlen(name), down_ext, down_int, id, idn) < 0)
			goto oom;
	}
	if (fw_mp_get(rec, "tags", &v) == 1 && fw_mp_iter_init(&it, v) > 0) {
		while (fw_mp_iter_next(&it, &f) == 1) {
			if (fw_mp_str(f, &s, &n) < 0 || n == 0)
				continue;
			int dup = 0;
			for (int r = 0; r < FW_FBCAT_NRULES; r++)
				dup |= (bits & (1u << r)) && strlen(fw_fbcat_name(r)) == n &&
				       !memcmp(fw_fbcat_name(r), s, n);
			if (dup)
				continue;
			any = 1;
			if (count_in(st, s, n, down_ext, down_int, id, idn) < 0)
				goto oom;
		}
	}
	if (!any && count_in(st, "other", 5, down_ext, down_int, id, idn) < 0)
		goto oom;
	return 0;
oom:
	fw_warn("out of memory");
	return -1;
}

/* ---- results ----------------------------------------------------------------------- */

static int cmp_cat(const void *x, const void *y)
{
	const struct category *a = x, *b = y;
	if (a->count != b->count)
		return a->count < b->count ? 1 : -1;
	return strcmp(a->name, b->name);
}

/* Arm indexes sorted by name. */
static const struct fw_intern *sort_names;
static int cmp_arm(const void *x, const void *y)
{
	return strcmp(sort_names->v[*(const uint32_t *)x], sort_names->v[*(const uint32_t *)y]);
}

/* ---- records output -------------------------------------------------------------- */

struct recw {
	struct fw_buf body, rec;
	msgpack_packer pk;
	uint32_t n;
	int failed; /* a packer ran out of memory: r_end() reports it */
};

static void r_begin(struct recw *r)
{
	fw_buf_reset(&r->body);
	fw_buf_packer(&r->pk, &r->body);
	r->n = 0;
	r->failed = 0;
}

static void r_key(struct recw *r, const char *k)
{
	r->failed |= fw_pack_cstr(&r->pk, k);
	r->n++;
}

static void r_str(struct recw *r, const char *k, const char *v)
{
	r_key(r, k);
	r->failed |= v ? fw_pack_cstr(&r->pk, v) : msgpack_pack_nil(&r->pk);
}

static void r_u64(struct recw *r, const char *k, uint64_t v)
{
	r_key(r, k);
	r->failed |= msgpack_pack_uint64(&r->pk, v);
}

static void r_dbl(struct recw *r, const char *k, double v)
{
	r_key(r, k);
	r->failed |= isnan(v) ? msgpack_pack_nil(&r->pk) : msgpack_pack_double(&r->pk, v);
}

/* Writes {kind: "metrics", v: 1, id, report: section, ...body}; the id
 * hashes the body, so the same figures give the same id. */
static int r_end(struct recw *r, struct fw_writer *w, const char *section)
{
	char id[17];
	uint64_t h = fw_hash64(section, strlen(section)) ^ fw_hash64(r->body.p, r->body.n);
	snprintf(id, sizeof id, "%016llx", (unsigned long long)h);
	msgpack_packer pk;
	fw_buf_reset(&r->rec);
	fw_buf_packer(&pk, &r->rec);
	int e = msgpack_pack_map(&pk, r->n + 4);
	e |= fw_pack_cstr(&pk, "kind") || fw_pack_cstr(&pk, "metrics");
	e |= fw_pack_cstr(&pk, "v") || msgpack_pack_uint8(&pk, 1);
	e |= fw_pack_cstr(&pk, "id") || fw_pack_str(&pk, id, 16);
	e |= fw_pack_cstr(&pk, "report") || fw_pack_cstr(&pk, section);
	if (e || r->failed || fw_buf_append(&r->rec, r->body.p, r->body.n) < 0) {
		fw_warn("out of memory");
		return -1;
	}
	if (fw_writer_put(w, r->rec.p, r->rec.n) < 0) {
		if (errno != EPIPE)
			fw_warn("%s", fw_writer_error(w));
		return -1;
	}
	return 0;
}

static int write_records(struct state *st, struct fw_writer *w, const uint32_t *order,
			 const struct fw_ab_arm *as, const struct fw_ab_pair *ps, size_t nps)
{
	struct recw r = {0};
	int rc = -1;
	r_begin(&r);
	r_u64(&r, "trajectories", st->ntraj);
	r_u64(&r, "votes", st->nrated);
	r_u64(&r, "down", st->ndown);
	r_u64(&r, "down_external", st->ndown_ext);
	r_u64(&r, "down_internal", st->ndown_int);
	r_str(&r, "by", st->by_src);
	r_str(&r, "paired_by", st->paired_src);
	r_u64(&r, "seed", st->seed);
	r_u64(&r, "resamples", st->resamples);
	r_dbl(&r, "level", 1 - st->alpha);
	if (r_end(&r, w, "summary") < 0)
		goto out;
	for (size_t i = 0; i < st->ncats; i++) {
		const struct category *c = &st->cats[i];
		r_begin(&r);
		r_str(&r, "category", c->name);
		r_u64(&r, "count", c->count);
		r_dbl(&r, "share", st->ndown ? (double)c->count / (double)st->ndown : NAN);
		r_u64(&r, "external", c->ext);
		r_u64(&r, "internal", c->internal);
		r_key(&r, "examples");
		r.failed |= msgpack_pack_array(&r.pk, (size_t)c->nex);
		for (int k = 0; k < c->nex; k++)
			r.failed |= fw_pack_cstr(&r.pk, c->examples[k]);
		if (r_end(&r, w, "category") < 0)
			goto out;
	}
	for (size_t k = 0; k < st->arms.n; k++) {
		uint32_t a = order[k];
		r_begin(&r);
		r_str(&r, "by", st->by_src);
		r_str(&r, "arm", st->arms.v[a]);
		r_u64(&r, "up", as[a].up);
		r_u64(&r, "votes", as[a].votes);
		r_dbl(&r, "rate", as[a].votes ? (double)as[a].up / (double)as[a].votes : NAN);
		r_dbl(&r, "lo", as[a].lo);
		r_dbl(&r, "hi", as[a].hi);
		r_u64(&r, "users", as[a].users);
		if (r_end(&r, w, "arm") < 0)
			goto out;
	}
	for (size_t i = 0; i < nps; i++) {
		const struct fw_ab_pair *p = &ps[i];
		r_begin(&r);
		r_str(&r, "a", st->arms.v[p->a]);
		r_str(&r, "b", st->arms.v[p->b]);
		r_dbl(&r, "diff", p->diff);
		r_dbl(&r, "lo", p->ok ? p->lo : NAN);
		r_dbl(&r, "hi", p->ok ? p->hi : NAN);
		r_u64(&r, "users", p->users);
		r_str(&r, "verdict", p->verdict > 0 ? "b" : p->verdict < 0 ? "a" : "none");
		r_str(&r, "preferred", p->verdict > 0 ? st->arms.v[p->b] :
				       p->verdict < 0 ? st->arms.v[p->a] : NULL);
		r_u64(&r, "n_needed", p->verdict ? 0 : p->need);
		r_dbl(&r, "design_effect", p->deff);
		if (p->paired) {
			r_u64(&r, "pairs", p->npairs);
			r_u64(&r, "a_only", p->a_only);
			r_u64(&r, "b_only", p->b_only);
			r_dbl(&r, "mcnemar_p", p->p_mcnemar);
		}
		if (r_end(&r, w, "pair") < 0)
			goto out;
	}
	rc = 0;
out:
	fw_buf_release(&r.body);
	fw_buf_release(&r.rec);
	return rc;
}

/* ---- table output --------------------------------------------------------------- */

static void pct(char *buf, size_t n, double x)
{
	snprintf(buf, n, "%.1f%%", 100 * x);
}

static void write_table(struct state *st, FILE *f, const uint32_t *order,
			const struct fw_ab_arm *as, const struct fw_ab_pair *ps, size_t nps)
{
	char a[32], b[32], c[32];
	fprintf(f, "%llu trajectories, %llu votes, %llu thumbs-down trajectories "
		   "(external %llu, internal %llu)\n",
		(unsigned long long)st->ntraj, (unsigned long long)st->nrated,
		(unsigned long long)st->ndown, (unsigned long long)st->ndown_ext,
		(unsigned long long)st->ndown_int);
	fprintf(f, "\nfailure categories of thumbs-down trajectories\n");
	fprintf(f, "%-18s %6s %7s  %-15s %-15s %s\n", "category", "count", "share", "external",
		"internal", "examples");
	for (size_t i = 0; i < st->ncats; i++) {
		const struct category *k = &st->cats[i];
		char e[48], in[48];
		pct(a, sizeof a, st->ndown ? (double)k->count / (double)st->ndown : 0);
		pct(b, sizeof b, st->ndown_ext ? (double)k->ext / (double)st->ndown_ext : 0);
		pct(c, sizeof c, st->ndown_int ? (double)k->internal / (double)st->ndown_int : 0);
		snprintf(e, sizeof e, "%llu (%s)", (unsigned long long)k->ext, b);
		snprintf(in, sizeof in, "%llu (%s)", (unsigned long long)k->internal, c);
		fprintf(f, "%-18s %6llu %7s  %-15s %-15s", k->name, (unsigned long long)k->count, a,
			e, in);
		for (int x = 0; x < k->nex; x++)
			fprintf(f, " %s", k->examples[x]);
		fputc('\n', f);
	}
	fprintf(f, "\nthumbs-up rate by %s (Wilson 95%%)\n", st->by_src);
	fprintf(f, "%-16s %6s %6s %7s  %-17s %6s\n", "arm", "up", "votes", "rate", "95% interval",
		"users");
	for (size_t k = 0; k < st->arms.n; k++) {
		uint32_t i = order[k];
		char iv[80];
		pct(a, sizeof a, as[i].votes ? (double)as[i].up / (double)as[i].votes : 0);
		pct(b, sizeof b, as[i].lo);
		pct(c, sizeof c, as[i].hi);
		snprintf(iv, sizeof iv, "[%s, %s]", b, c);
		fprintf(f, "%-16s %6llu %6llu %7s  %-17s %6llu\n", st->arms.v[i],
			(unsigned long long)as[i].up, (unsigned long long)as[i].votes,
			as[i].votes ? a : "-", as[i].votes ? iv : "-", (unsigned long long)as[i].users);
	}
	if (!nps)
		return;
	if (nps > 1)
		fprintf(f, "\nA/B: rate(B) - rate(A), bootstrap %.4g%% over users (95%% for the %zu "
			   "pairs together), %u resamples, seed %llu\n",
			100 * (1 - st->alpha), nps, st->resamples, (unsigned long long)st->seed);
	else
		fprintf(f, "\nA/B: rate(B) - rate(A), bootstrap 95%% over users, %u resamples, "
			   "seed %llu\n",
			st->resamples, (unsigned long long)st->seed);
	if (st->paired_by)
		fprintf(f, "paired by %s: McNemar's exact test on the majority vote per item\n",
			st->paired_src);
	for (size_t i = 0; i < nps; i++) {
		const struct fw_ab_pair *p = &ps[i];
		const char *A = st->arms.v[p->a], *B = st->arms.v[p->b];
		snprintf(a, sizeof a, "%+.1f%%", 100 * p->diff);
		fprintf(f, "%s vs %s: %s", A, B, a);
		if (p->ok) {
			snprintf(b, sizeof b, "%+.1f%%", 100 * p->lo);
			snprintf(c, sizeof c, "%+.1f%%", 100 * p->hi);
			fprintf(f, " [%s, %s], %llu users", b, c, (unsigned long long)p->users);
		} else {
			fprintf(f, " (no interval: an arm has no votes)");
		}
		if (p->paired)
			fprintf(f, "; %llu pairs, %llu only %s, %llu only %s, McNemar p = %.3g",
				(unsigned long long)p->npairs, (unsigned long long)p->a_only, A,
				(unsigned long long)p->b_only, B, p->p_mcnemar);
		if (p->verdict > 0)
			fprintf(f, ": %s preferred over %s\n", B, A);
		else if (p->verdict < 0)
			fprintf(f, ": %s preferred over %s\n", A, B);
		else if (p->users < FW_AB_MIN_USERS)
			fprintf(f, ": no verdict (fewer than %d users)\n", FW_AB_MIN_USERS);
		else if (p->need)
			fprintf(f, ": no verdict (about %llu votes per arm needed)\n",
				(unsigned long long)p->need);
		else
			fprintf(f, ": no verdict (no difference observed)\n");
	}
}

static int finish(struct state *st, const char *out, int level)
{
	int rc = 0;
	size_t na = st->arms.n;
	uint32_t *order = calloc(na ? na : 1, sizeof *order);
	struct fw_ab_arm *as = calloc(na ? na : 1, sizeof *as);
	size_t nps = na > 1 ? na * (na - 1) / 2 : 0;
	struct fw_ab_pair *ps = calloc(nps ? nps : 1, sizeof *ps);
	struct fw_cluster *cl = calloc(st->users.n ? st->users.n : 1, sizeof *cl);
	/* Every pair is a test: the family of them keeps a 5% chance of any
	 * false verdict.  By default, enough resamples that each tail of the
	 * interval holds at least 10 of them. */
	st->alpha = fw_ab_alpha(nps);
	if (!st->resamples)
		st->resamples = fw_ab_resamples(st->alpha);
	double *work = calloc(st->resamples, sizeof *work);
	if (!order || !as || !ps || !cl || !work) {
		fw_warn("out of memory");
		rc = -1;
		goto out;
	}
	/* qsort() wants a valid pointer even for no elements. */
	if (st->ncats)
		qsort(st->cats, st->ncats, sizeof *st->cats, cmp_cat);
	fw_ab_sort(st->votes, st->nvotes, st->pv, st->npv);
	for (uint32_t i = 0; i < na; i++)
		order[i] = i;
	sort_names = &st->arms;
	qsort(order, na, sizeof *order, cmp_arm);
	fw_ab_arms(as, na, st->votes, st->nvotes);
	size_t k = 0;
	for (size_t i = 0; i < na; i++)
		for (size_t j = i + 1; j < na; j++) {
			ps[k].a = order[i];
			ps[k].b = order[j];
			fw_ab_compare(&ps[k], st->votes, st->nvotes, as,
				      st->paired_by ? st->pv : NULL, st->npv, st->seed,
				      st->resamples, st->alpha, cl, work);
			k++;
		}
	if (st->records) {
		char err[512];
		struct fw_writer *w = fw_writer_open(out, level, err, sizeof err);
		if (!w) {
			fw_warn("%s", err);
			rc = -1;
			goto out;
		}
		if (write_records(st, w, order, as, ps, nps) < 0) {
			fw_writer_abort(w);
			rc = -1;
			goto out;
		}
		if (fw_writer_close(w, err, sizeof err) < 0) {
			if (errno != EPIPE)
				fw_warn("%s", err);
			rc = -1;
		}
	} else {
		FILE *f = stdout;
		if (out && strcmp(out, "-") && !(f = fopen(out, "w"))) {
			fw_warn("%s: %s", out, strerror(errno));
			rc = -1;
			goto out;
		}
		write_table(st, f, order, as, ps, nps);
		if (f != stdout && fclose(f) != 0) {
			fw_warn("%s: %s", out, strerror(errno));
			rc = -1;
		}
	}
out:
	free(order);
	free(as);
	free(ps);
	free(cl);
	free(work);
	return rc;
}

enum { OPT_BY = 256, OPT_PAIRED, OPT_RECORDS, OPT_SEED, OPT_RESAMPLES, OPT_SKIP_BAD, OPT_VERSION,
       OPT_JUDGE, OPT_PROGRESS, OPT_SHARD };

/*
 * fb-report --judge: the agreement of the judge verdicts in the records'
 * grade.judge with the human labels of the file `labels`.  Prints one block
 * per criterion; exit 1 when a criterion is no better than chance.
 */
struct judged_arg {
	struct fw_agree_set *set;
	int bad; /* a record's verdicts could not be read */
};

static int judged_one(struct fw_each *e, const struct fw_rec *rec, const char *file)
{
	struct judged_arg *a = e->arg;
	char err[512];
	if (fw_agree_set_judged(a->set, rec->v, err, sizeof err) < 0) {
		fw_warn_rec(file, rec->index, rec->offset, "%s", err);
		a->bad = 1;
	}
	return 0;
}

static int judge_main(const char *labels, int argc, char **argv, int first, uint64_t seed,
		      unsigned resamples)
{
	struct fw_agree_set *set = fw_agree_set_new();
	struct fw_buf text = { 0 };
	char err[512];
	int status = 0, flagged = 0, k;
	long nl;

	if (!set) {
		fw_warn("out of memory");
		return FW_EXIT_DATA;
	}
	if ((nl = fw_agree_set_labels(set, labels, err, sizeof err)) < 0) {
		fw_warn("%s", err);
		fw_agree_set_free(set);
		return FW_EXIT_DATA;
	}
	struct judged_arg ja = { set, 0 };
	struct fw_each e = { .arg = &ja };
	status = fw_each_record(&e, argc, argv, first, judged_one);
	if (ja.bad)
		status = FW_EXIT_DATA;
	k = fw_agree_set_report(set, resamples, seed, &text, &flagged, err, sizeof err);
	if (k < 0) {
		fw_warn("%s", err);
		status = FW_EXIT_DATA;
	} else if (k == 0) {
		fw_warn("no judged record has a label in %s", labels);
		status = FW_EXIT_DATA;
	} else {
		fwrite(text.p, 1, text.n, stdout);
		if (flagged) {
			fw_warn("%d criteri%s no better than chance", flagged,
				flagged == 1 ? "on is" : "a are");
			status = FW_EXIT_DATA;
		}
	}
	fw_buf_release(&text);
	fw_agree_set_free(set);
	return status;
}

/* The record loop's call: a record one() refuses is skipped with
 * --skip-bad, and stops the report without. */
static int each_one(struct fw_each *e, const struct fw_rec *rec, const char *file)
{
	if (one(e->arg, rec->v, file, rec->index, rec->offset) == 0)
		return 0;
	if (!e->skip_bad)
		return -1;
	e->skipped++;
	return 0;
}

int main(int argc, char **argv)
{
	fw_cli_init("fb-report");
	fw_usage_init(usage_text, options);
	static const struct option longopts[] = {
		{"by", required_argument, NULL, OPT_BY},
		{"paired-by", required_argument, NULL, OPT_PAIRED},
		{"records", no_argument, NULL, OPT_RECORDS},
		{"seed", required_argument, NULL, OPT_SEED},
		{"resamples", required_argument, NULL, OPT_RESAMPLES},
		{"output", required_argument, NULL, 'o'},
		{"skip-bad", no_argument, NULL, OPT_SKIP_BAD},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{"judge", required_argument, NULL, OPT_JUDGE},
		{"progress", no_argument, NULL, OPT_PROGRESS},
		{"shard", required_argument, NULL, OPT_SHARD},
		{NULL, 0, NULL, 0},
	};
	static struct state st;
	const char *judge_labels = NULL;
	const char *out = NULL;
	int level = -1, skip_bad = 0, progress = 0, c;
	uint64_t u, shard_k = 0, shard_n = 0;
	char err[512];
	st.by_src = ".model";
	while ((c = getopt_long(argc, argv, "o:zh", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_BY: st.by_src = optarg; break;
		case OPT_PAIRED: st.paired_src = optarg; break;
		case OPT_RECORDS: st.records = 1; break;
		case OPT_SEED:
			if (fw_parse_u64(optarg, &st.seed, 0) < 0)
				return fw_usage_fail("bad seed '%s'", optarg);
			break;
		case OPT_RESAMPLES:
			if (fw_parse_u64(optarg, &u, 1) < 0 || u < 100 || u > 10000000)
				return fw_usage_fail("bad resample count '%s' (100..10000000)", optarg);
			st.resamples = (unsigned)u;
			break;
		case 'o': out = optarg; break;
		case 'z': level = 3; break;
		case OPT_SKIP_BAD: skip_bad = 1; break;
		case OPT_PROGRESS: progress = 1; break;
		case OPT_SHARD:
			if (fw_parse_shard(optarg, &shard_k, &shard_n) < 0)
				return fw_usage_fail("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case OPT_JUDGE: judge_labels = optarg; break;
		case 'h': return fw_help_exit();
		case OPT_VERSION: return fw_version_exit();
		default: return fw_usage_exit();
		}
	}
	if (judge_labels) {
		int js = judge_main(judge_labels, argc, argv, optind, st.seed, st.resamples ? st.resamples : 2000);
		if (fw_close_stdout() < 0)
			js = FW_EXIT_DATA;
		return js;
	}
	if (!(st.by = fw_path_parse(st.by_src, err, sizeof err)))
		return fw_usage_fail("--by: %s", err);
	if (st.paired_src && !(st.paired_by = fw_path_parse(st.paired_src, err, sizeof err)))
		return fw_usage_fail("--paired-by: %s", err);
	if (!(st.cat = fw_fbcat_new(err, sizeof err))) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}

	struct fw_each e = {
		.skip_bad = skip_bad, .progress = progress,
		.shard_k = shard_k, .shard_n = shard_n, .arg = &st,
	};
	int status = fw_each_record(&e, argc, argv, optind, each_one);
	int stop = e.stopped;
	if (!stop && finish(&st, out, level) < 0)
		status = FW_EXIT_DATA;
	for (size_t i = 0; i < st.ncats; i++) {
		free(st.cats[i].name);
		for (int k = 0; k < st.cats[i].nex; k++)
			free(st.cats[i].examples[k]);
	}
	free(st.cats);
	free(st.votes);
	free(st.pv);
	fw_intern_release(&st.arms);
	fw_intern_release(&st.users);
	fw_intern_release(&st.keys);
	fw_path_free(st.by);
	fw_path_free(st.paired_by);
	fw_fbcat_free(st.cat);
	fw_buf_release(&st.tmp);
	if (fw_close_stdout() < 0 && !status)
		status = FW_EXIT_DATA;
	return status;
}
