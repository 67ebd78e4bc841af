/*
 * fw_recstats.c — the counts behind `rec stats`.  See fw_recstats.h.
 *
 * Fields are found by a linear search of their paths: a stream has few
 * distinct fields, and the table is sorted once at the end.
 */
#include "fw_recstats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Types as fw_mp_type() numbers them, FW_MP_NIL to FW_MP_EXT. */
#define NTYPES 11

struct field_stat {
	char *path;
	uint64_t present;
	uint64_t types[NTYPES];
	uint64_t nnum;
	double min, max, sum;
	uint64_t strbytes;
};

struct kind_stat {
	char *kind;
	uint64_t n;
};

struct fw_recstats {
	struct field_stat f[FW_RECSTATS_MAX_FIELDS];
	size_t nf;
	struct kind_stat k[256];
	size_t nk;
	uint64_t nrec, bytes, minsz, maxsz;
	int overflow;
};

struct fw_recstats *fw_recstats_new(void)
{
	return calloc(1, sizeof(struct fw_recstats));
}

static struct field_stat *field(struct fw_recstats *a, const char *path)
{
	for (size_t i = 0; i < a->nf; i++)
		if (strcmp(a->f[i].path, path) == 0)
			return &a->f[i];
	if (a->nf == FW_RECSTATS_MAX_FIELDS) {
		a->overflow = 1;
		return NULL;
	}
	struct field_stat *f = &a->f[a->nf];
	memset(f, 0, sizeof *f);
	if (!(f->path = strdup(path)))
		return NULL;
	f->min = INFINITY;
	f->max = -INFINITY;
	a->nf++;
	return f;
}

static void stat_value(struct fw_recstats *a, const char *path, struct fw_mpv v, int depth)
{
	struct field_stat *f = field(a, path);
	if (!f)
		return;
	enum fw_mp_type t = fw_mp_type(v);
	f->present++;
	f->types[t]++;
	double d;
	const char *s;
	size_t n;
	if ((t == FW_MP_INT || t == FW_MP_UINT || t == FW_MP_FLOAT) && fw_mp_double(v, &d) == 0) {
		f->nnum++;
		f->sum += d;
		if (d < f->min)
			f->min = d;
		if (d > f->max)
			f->max = d;
	} else if (fw_mp_str(v, &s, &n) == 0) {
		f->strbytes += n;
	}
	if (t == FW_MP_MAP && depth < 2) {
		struct fw_mp_iter it;
		struct fw_mpv k, x;
		fw_mp_iter_init(&it, v);
		while (fw_mp_iter_next(&it, &k) == 1 && fw_mp_iter_next(&it, &x) == 1) {
			if (fw_mp_str(k, &s, &n) < 0)
				continue;
			char sub[512];
			snprintf(sub, sizeof sub, "%s.%.*s", depth ? path : "", (int)n, s);
			stat_value(a, sub, x, depth + 1);
		}
	}
}

void fw_recstats_add(struct fw_recstats *a, struct fw_mpv rec)
{
	struct fw_mpv kv;
	const char *s = "(none)";
	size_t n = 6;
	if (fw_mp_get(rec, "kind", &kv) == 1 && fw_mp_str(kv, &s, &n) == 0 && n > 200)
		n = 200;
	size_t i;
	for (i = 0; i < a->nk; i++)
		if (strlen(a->k[i].kind) == n && memcmp(a->k[i].kind, s, n) == 0)
			break;
	if (i == a->nk && a->nk < 256) {
		a->k[i].kind = strndup(s, n);
		a->k[i].n = 0;
		a->nk++;
	}
	if (i < a->nk)
		a->k[i].n++;
	a->nrec++;
	a->bytes += rec.n;
	if (a->nrec == 1 || rec.n < a->minsz)
		a->minsz = rec.n;
	if (rec.n > a->maxsz)
		a->maxsz = rec.n;
	stat_value(a, ".", rec, 0);
}

static int by_path(const void *x, const void *y)
{
	return strcmp(((const struct field_stat *)x)->path, ((const struct field_stat *)y)->path);
}

/* "int:3,str:1": the types of f with their counts; signed and unsigned
 * integers count as one type. */
static void type_list(const struct field_stat *f, char *types, size_t len)
{
	types[0] = '\0';
	for (int t = 1; t < NTYPES; t++) {
		if (!f->types[t] || (t == FW_MP_INT && f->types[FW_MP_UINT]))
			continue;
		uint64_t c = f->types[t] + (t == FW_MP_UINT ? f->types[FW_MP_INT] : 0);
		size_t l = strlen(types);
		snprintf(types + l, len - l, "%s%s:%llu", l ? "," : "",
			 fw_mp_type_name((enum fw_mp_type)t), (unsigned long long)c);
	}
}

int fw_recstats_table(struct fw_recstats *a, struct fw_buf *out)
{
	int bad = fw_buf_printf(out, "records %llu\n", (unsigned long long)a->nrec) < 0;
	if (a->nrec)
		bad |= fw_buf_printf(out, "bytes   %llu (min %llu, mean %.0f, max %llu per record)\n",
				     (unsigned long long)a->bytes, (unsigned long long)a->minsz,
				     (double)a->bytes / (double)a->nrec,
				     (unsigned long long)a->maxsz) < 0;
	bad |= fw_buf_puts(out, "\nkind\tcount\n") < 0;
	for (size_t i = 0; i < a->nk; i++)
		bad |= fw_buf_printf(out, "%s\t%llu\n", a->k[i].kind,
				     (unsigned long long)a->k[i].n) < 0;
	qsort(a->f, a->nf, sizeof *a->f, by_path);
	bad |= fw_buf_puts(out, "\nfield\tpresent\ttypes\tmin\tmean\tmax\n") < 0;
	for (size_t i = 0; i < a->nf; i++) {
		const struct field_stat *f = &a->f[i];
		if (strcmp(f->path, ".") == 0)
			continue;
		char types[256];
		type_list(f, types, sizeof types);
		bad |= fw_buf_printf(out, "%s\t%llu\t%s", f->path, (unsigned long long)f->present,
				     types) < 0;
		if (f->nnum)
			bad |= fw_buf_printf(out, "\t%.6g\t%.6g\t%.6g", f->min,
					     f->sum / (double)f->nnum, f->max) < 0;
		bad |= fw_buf_puts(out, "\n") < 0;
	}
	if (a->overflow)
		bad |= fw_buf_printf(out, "(more than %d distinct fields; the rest not shown)\n",
				     FW_RECSTATS_MAX_FIELDS) < 0;
	return bad ? -1 : 0;
}

void fw_recstats_free(struct fw_recstats *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nf; i++)
		free(a->f[i].path);
	for (size_t i = 0; i < a->nk; i++)
		free(a->k[i].kind);
	free(a);
}
