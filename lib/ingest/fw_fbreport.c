/*
 * fw_fbreport.c — failure categories and A/B verdicts of traj records.
 *
 * One pass gathers per-category counts and the votes (arm, user, rating)
 * with the arms, users and items interned; fw_fbreport_finish() runs the
 * statistics of fw_stats over them, and the two writers only format.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_base.h"
#include "fw_fbcat.h"
#include "fw_fbreport.h"
#include "fw_json.h"
#include "fw_mp.h"
#include "fw_stats.h"
#include "fw_stream.h"

#define EXAMPLES 3

struct category {
	char *name;
	uint64_t count, ext, internal;
	char *examples[EXAMPLES];
	int nex;
};

struct fw_fbreport {
	struct fw_fbreport_conf c;
	double alpha; /* per pair: 0.05 over the number of pairs (Bonferroni) */
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
	/* filled by fw_fbreport_finish() */
	uint32_t *order;       /* arm indexes sorted by name */
	struct fw_ab_arm *as;  /* per arm */
	struct fw_ab_pair *ps; /* every pair of arms, in name order */
	size_t nps;
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

static struct category *category(struct fw_fbreport *st, const char *name, size_t n)
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

static int count_in(struct fw_fbreport *st, const char *name, size_t n, int ext, int internal,
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
static int label(struct fw_fbreport *st, const struct fw_path *p, struct fw_mpv rec, const char **s,
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


/* Fills err for a record that cannot be counted; errno EINVAL. */
static void bad(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fw_vseterr(err, errlen, fmt, ap);
	va_end(ap);
	errno = EINVAL;
}

int fw_fbreport_add(struct fw_fbreport *st, struct fw_mpv rec, char *err, size_t errlen)
{
	struct fw_mpv fb, f, v;
	struct fw_mp_iter it;
	const char *id, *s;
	size_t idn, n;
	int down = 0, down_ext = 0, down_int = 0;
	int has_fb = fw_mp_get(rec, "feedback", &fb) == 1;
	if (has_fb && fw_mp_type(fb) != FW_MP_ARRAY) {
		bad(err, errlen, "field 'feedback' is %s, not array",
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
				bad(err, errlen, "field 'feedback[%llu]' is %s, not map",
					    (unsigned long long)k, fw_mp_type_name(fw_mp_type(f)));
				return -1;
			}
			if (fw_mp_get(f, "rating", &v) == 1 && fw_mp_type(v) != FW_MP_NIL &&
			    fw_mp_double(v, &r) < 0) {
				bad(err, errlen,
					    "field 'feedback[%llu].rating' is %s, not a number",
					    (unsigned long long)k, fw_mp_type_name(fw_mp_type(v)));
				return -1;
			}
		}
	}
	st->ntraj++;
	str_of(rec, "id", &id, &idn);
	if (label(st, st->c.by, rec, &s, &n) < 0) {
		bad(err, errlen, "cannot read '%s'", st->c.by_src);
		return -1;
	}
	int64_t arm = fw_intern_add(&st->arms, s, n), key = -1;
	if (arm < 0)
		goto oom;
	if (st->c.paired_by) {
		if (label(st, st->c.paired_by, rec, &s, &n) < 0) {
			bad(err, errlen, "cannot read '%s'", st->c.paired_src);
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
	fw_seterr(err, errlen, "out of memory");
	errno = ENOMEM;
	return -1;
}


struct fw_fbreport *fw_fbreport_new(const struct fw_fbreport_conf *conf, char *err,
				    size_t errlen)
{
	struct fw_fbreport *R = calloc(1, sizeof *R);

	if (!R) {
		fw_path_free(conf->by);
		fw_path_free(conf->paired_by);
		fw_seterr(err, errlen, "out of memory");
		return NULL;
	}
	R->c = *conf;
	if (!(R->cat = fw_fbcat_new(err, errlen))) {
		fw_fbreport_free(R);
		return NULL;
	}
	return R;
}

void fw_fbreport_free(struct fw_fbreport *R)
{
	if (!R)
		return;
	for (size_t i = 0; i < R->ncats; i++) {
		free(R->cats[i].name);
		for (int k = 0; k < R->cats[i].nex; k++)
			free(R->cats[i].examples[k]);
	}
	free(R->cats);
	free(R->votes);
	free(R->pv);
	fw_intern_release(&R->arms);
	fw_intern_release(&R->users);
	fw_intern_release(&R->keys);
	fw_path_free(R->c.by);
	fw_path_free(R->c.paired_by);
	fw_fbcat_free(R->cat);
	fw_buf_release(&R->tmp);
	free(R->order);
	free(R->as);
	free(R->ps);
	free(R);
}

/* ---- results ----------------------------------------------------------------------- */

static int cmp_cat(const void *x, const void *y)
{
	const struct category *a = x, *b = y;
	if (a->count != b->count)
		return a->count < b->count ? 1 : -1;
	return strcmp(a->name, b->name);
}

/* An arm's name and index, to sort the arms by name (names are distinct,
 * so the order is the one any sort gives). */
struct named {
	const char *name;
	uint32_t i;
};

static int cmp_named(const void *x, const void *y)
{
	return strcmp(((const struct named *)x)->name, ((const struct named *)y)->name);
}

int fw_fbreport_finish(struct fw_fbreport *st, char *err, size_t errlen)
{
	int rc = 0;
	size_t na = st->arms.n;
	size_t nps = na > 1 ? na * (na - 1) / 2 : 0;
	struct named *nm = calloc(na ? na : 1, sizeof *nm);
	struct fw_cluster *cl = calloc(st->users.n ? st->users.n : 1, sizeof *cl);
	double *work = NULL;

	st->order = calloc(na ? na : 1, sizeof *st->order);
	st->as = calloc(na ? na : 1, sizeof *st->as);
	st->ps = calloc(nps ? nps : 1, sizeof *st->ps);
	st->nps = nps;
	/* Every pair is a test: the family of them keeps a 5% chance of any
	 * false verdict.  By default, enough resamples that each tail of the
	 * interval holds at least 10 of them. */
	st->alpha = fw_ab_alpha(nps);
	if (!st->c.resamples)
		st->c.resamples = fw_ab_resamples(st->alpha);
	work = calloc(st->c.resamples, sizeof *work);
	if (!st->order || !st->as || !st->ps || !nm || !cl || !work) {
		fw_seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		rc = -1;
		goto out;
	}
	/* qsort() wants a valid pointer even for no elements. */
	if (st->ncats)
		qsort(st->cats, st->ncats, sizeof *st->cats, cmp_cat);
	fw_ab_sort(st->votes, st->nvotes, st->pv, st->npv);
	for (uint32_t i = 0; i < na; i++)
		nm[i] = (struct named){ st->arms.v[i], i };
	qsort(nm, na, sizeof *nm, cmp_named);
	for (size_t i = 0; i < na; i++)
		st->order[i] = nm[i].i;
	fw_ab_arms(st->as, na, st->votes, st->nvotes);
	size_t k = 0;
	for (size_t i = 0; i < na; i++)
		for (size_t j = i + 1; j < na; j++) {
			st->ps[k].a = st->order[i];
			st->ps[k].b = st->order[j];
			fw_ab_compare(&st->ps[k], st->votes, st->nvotes, st->as,
				      st->c.paired_by ? st->pv : NULL, st->npv, st->c.seed,
				      st->c.resamples, st->alpha, cl, work);
			k++;
		}
out:
	free(nm);
	free(cl);
	free(work);
	return rc;
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
static int r_end(struct recw *r, struct fw_writer *w, const char *section, char *err,
		 size_t errlen)
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
		fw_seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		return -1;
	}
	if (fw_writer_put(w, r->rec.p, r->rec.n) < 0) {
		fw_seterr(err, errlen, "%s", fw_writer_error(w));
		return -1;
	}
	return 0;
}
int fw_fbreport_pack(const struct fw_fbreport *st, struct fw_writer *w, char *err,
		     size_t errlen)
{
	const uint32_t *order = st->order;
	const struct fw_ab_arm *as = st->as;
	const struct fw_ab_pair *ps = st->ps;
	size_t nps = st->nps;
	struct recw r = {0};
	int rc = -1;
	r_begin(&r);
	r_u64(&r, "trajectories", st->ntraj);
	r_u64(&r, "votes", st->nrated);
	r_u64(&r, "down", st->ndown);
	r_u64(&r, "down_external", st->ndown_ext);
	r_u64(&r, "down_internal", st->ndown_int);
	r_str(&r, "by", st->c.by_src);
	r_str(&r, "paired_by", st->c.paired_src);
	r_u64(&r, "seed", st->c.seed);
	r_u64(&r, "resamples", st->c.resamples);
	r_dbl(&r, "level", 1 - st->alpha);
	if (r_end(&r, w, "summary", err, errlen) < 0)
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
		if (r_end(&r, w, "category", err, errlen) < 0)
			goto out;
	}
	for (size_t k = 0; k < st->arms.n; k++) {
		uint32_t a = order[k];
		r_begin(&r);
		r_str(&r, "by", st->c.by_src);
		r_str(&r, "arm", st->arms.v[a]);
		r_u64(&r, "up", as[a].up);
		r_u64(&r, "votes", as[a].votes);
		r_dbl(&r, "rate", as[a].votes ? (double)as[a].up / (double)as[a].votes : NAN);
		r_dbl(&r, "lo", as[a].lo);
		r_dbl(&r, "hi", as[a].hi);
		r_u64(&r, "users", as[a].users);
		if (r_end(&r, w, "arm", err, errlen) < 0)
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
		if (r_end(&r, w, "pair", err, errlen) < 0)
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

/* Appends to the table, remembering a failure. */
#define PUT(...) (fail |= fw_buf_printf(f, __VA_ARGS__))

int fw_fbreport_table(const struct fw_fbreport *st, struct fw_buf *f)
{
	const uint32_t *order = st->order;
	const struct fw_ab_arm *as = st->as;
	const struct fw_ab_pair *ps = st->ps;
	size_t nps = st->nps;
	int fail = 0;
	char a[32], b[32], c[32];
	PUT("%llu trajectories, %llu votes, %llu thumbs-down trajectories "
	    "(external %llu, internal %llu)\n",
	    (unsigned long long)st->ntraj, (unsigned long long)st->nrated,
	    (unsigned long long)st->ndown, (unsigned long long)st->ndown_ext,
	    (unsigned long long)st->ndown_int);
	PUT("\nfailure categories of thumbs-down trajectories\n");
	PUT("%-18s %6s %7s  %-15s %-15s %s\n", "category", "count", "share", "external",
	    "internal", "examples");
	for (size_t i = 0; i < st->ncats; i++) {
		const struct category *k = &st->cats[i];
		char e[48], in[48];
		pct(a, sizeof a, st->ndown ? (double)k->count / (double)st->ndown : 0);
		pct(b, sizeof b, st->ndown_ext ? (double)k->ext / (double)st->ndown_ext : 0);
		pct(c, sizeof c, st->ndown_int ? (double)k->internal / (double)st->ndown_int : 0);
		snprintf(e, sizeof e, "%llu (%s)", (unsigned long long)k->ext, b);
		snprintf(in, sizeof in, "%llu (%s)", (unsigned long long)k->internal, c);
		PUT("%-18s %6llu %7s  %-15s %-15s", k->name, (unsigned long long)k->count, a, e, in);
		for (int x = 0; x < k->nex; x++)
			PUT(" %s", k->examples[x]);
		PUT("\n");
	}
	PUT("\nthumbs-up rate by %s (Wilson 95%%)\n", st->c.by_src);
	PUT("%-16s %6s %6s %7s  %-17s %6s\n", "arm", "up", "votes", "rate", "95% interval",
	    "users");
	for (size_t k = 0; k < st->arms.n; k++) {
		uint32_t i = order[k];
		char iv[80];
		pct(a, sizeof a, as[i].votes ? (double)as[i].up / (double)as[i].votes : 0);
		pct(b, sizeof b, as[i].lo);
		pct(c, sizeof c, as[i].hi);
		snprintf(iv, sizeof iv, "[%s, %s]", b, c);
		PUT("%-16s %6llu %6llu %7s  %-17s %6llu\n", st->arms.v[i],
		    (unsigned long long)as[i].up, (unsigned long long)as[i].votes,
		    as[i].votes ? a : "-", as[i].votes ? iv : "-", (unsigned long long)as[i].users);
	}
	if (!nps)
		return fail ? -1 : 0;
	if (nps > 1)
		PUT("\nA/B: rate(B) - rate(A), bootstrap %.4g%% over users (95%% for the %zu "
		    "pairs together), %u resamples, seed %llu\n",
		    100 * (1 - st->alpha), nps, st->c.resamples, (unsigned long long)st->c.seed);
	else
		PUT("\nA/B: rate(B) - rate(A), bootstrap 95%% over users, %u resamples, "
		    "seed %llu\n",
		    st->c.resamples, (unsigned long long)st->c.seed);
	if (st->c.paired_by)
		PUT("paired by %s: McNemar's exact test on the majority vote per item\n",
		    st->c.paired_src);
	for (size_t i = 0; i < nps; i++) {
		const struct fw_ab_pair *p = &ps[i];
		const char *A = st->arms.v[p->a], *B = st->arms.v[p->b];
		snprintf(a, sizeof a, "%+.1f%%", 100 * p->diff);
		PUT("%s vs %s: %s", A, B, a);
		if (p->ok) {
			snprintf(b, sizeof b, "%+.1f%%", 100 * p->lo);
			snprintf(c, sizeof c, "%+.1f%%", 100 * p->hi);
			PUT(" [%s, %s], %llu users", b, c, (unsigned long long)p->users);
		} else {
			PUT(" (no interval: an arm has no votes)");
		}
		if (p->paired)
			PUT("; %llu pairs, %llu only %s, %llu only %s, McNemar p = %.3g",
			    (unsigned long long)p->npairs, (unsigned long long)p->a_only, A,
			    (unsigned long long)p->b_only, B, p->p_mcnemar);
		if (p->verdict > 0)
			PUT(": %s preferred over %s\n", B, A);
		else if (p->verdict < 0)
			PUT(": %s preferred over %s\n", A, B);
		else if (p->users < FW_AB_MIN_USERS)
			PUT(": no verdict (fewer than %d users)\n", FW_AB_MIN_USERS);
		else if (p->need)
			PUT(": no verdict (about %llu votes per arm needed)\n",
			    (unsigned long long)p->need);
		else
			PUT(": no verdict (no difference observed)\n");
	}
	return fail ? -1 : 0;
}

#undef PUT
