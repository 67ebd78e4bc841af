/*
 * fw_grade_sum.c — eval bookkeeping over graded rollouts: pass rates with
 * Wilson intervals, pass@k, saturated and never-solved tasks (see
 * fw_grade.h).  Memory grows with tasks × checkpoints, not with rollouts.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_base.h"
#include "fw_grade.h"
#include "fw_mp.h"
#include "fw_stats.h"
#include "fw_stream.h"

const unsigned fw_gsum_k[FW_GSUM_NK] = { 1, 5, 10 };

/* Counts of one (task, checkpoint) cell. */
struct cell {
	uint32_t task, ckpt;
	uint64_t n, c;
};

struct fw_gsum {
	unsigned recent;
	double retire_at;
	struct fw_intern tasks, ckpts, splits, cells;
	uint32_t *task_split; /* per task: split index */
	struct cell *cell;    /* per cells entry */
	size_t cap_task, cap_cell;
	struct fw_gsum_row *rows;
};

struct fw_gsum *fw_gsum_new(unsigned recent, double retire_at)
{
	struct fw_gsum *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->recent = recent ? recent : 1;
	s->retire_at = retire_at;
	return s;
}

void fw_gsum_free(struct fw_gsum *s)
{
	if (!s)
		return;
	fw_intern_release(&s->tasks);
	fw_intern_release(&s->ckpts);
	fw_intern_release(&s->splits);
	fw_intern_release(&s->cells);
	free(s->task_split);
	free(s->cell);
	free(s->rows);
	free(s);
}

static int get_s(struct fw_mpv m, const char *key, const char **p, size_t *n)
{
	struct fw_mpv v;
	return fw_mp_get(m, key, &v) == 1 && fw_mp_str(v, p, n) == 0 ? 1 : 0;
}

int fw_gsum_add(struct fw_gsum *s, struct fw_mpv rec, char *err, size_t errlen)
{
	struct fw_mpv task, grade, pol, v;
	const char *tid, *ck = "-", *sp = "-";
	size_t tn, ckn = 1, spn = 1;
	int resolved = 0;
	double reward = 0;
	if (fw_mp_get(rec, "grade", &grade) != 1 || fw_mp_type(grade) != FW_MP_MAP) {
		snprintf(err, errlen, "not graded (no 'grade' map)");
		return 1;
	}
	if (fw_mp_get(rec, "task", &task) != 1 || !get_s(task, "id", &tid, &tn)) {
		snprintf(err, errlen, "no 'task.id'");
		return 1;
	}
	get_s(task, "split", &sp, &spn);
	if (fw_mp_get(rec, "policy", &pol) == 1 && !get_s(pol, "ckpt", &ck, &ckn) &&
	    !get_s(pol, "cmd", &ck, &ckn))
		get_s(pol, "backend", &ck, &ckn);
	if (fw_mp_get(grade, "resolved", &v) == 1)
		fw_mp_bool(v, &resolved);
	if (fw_mp_get(grade, "reward", &v) == 1)
		fw_mp_double(v, &reward);
	int solved = resolved && reward > 0;

	long t = fw_intern_add(&s->tasks, tid, tn);
	long c = fw_intern_add(&s->ckpts, ck, ckn);
	long p = fw_intern_add(&s->splits, sp, spn);
	if (t < 0 || c < 0 || p < 0)
		return -1;
	if ((size_t)t >= s->cap_task) {
		size_t cap = s->cap_task ? 2 * s->cap_task : 64;
		uint32_t *v2 = realloc(s->task_split, cap * sizeof *v2);
		if (!v2)
			return -1;
		s->task_split = v2;
		s->cap_task = cap;
	}
	s->task_split[t] = (uint32_t)p;
	char key[24];
	int kn = snprintf(key, sizeof key, "%lx/%lx", (unsigned long)t, (unsigned long)c);
	size_t before = s->cells.n;
	long x = fw_intern_add(&s->cells, key, (size_t)kn);
	if (x < 0)
		return -1;
	if (s->cells.n > before) {
		if ((size_t)x >= s->cap_cell) {
			size_t cap = s->cap_cell ? 2 * s->cap_cell : 64;
			struct cell *v2 = realloc(s->cell, cap * sizeof *v2);
			if (!v2)
				return -1;
			s->cell = v2;
			s->cap_cell = cap;
		}
		s->cell[x] = (struct cell){ (uint32_t)t, (uint32_t)c, 0, 0 };
	}
	s->cell[x].n++;
	s->cell[x].c += solved;
	return 0;
}

const char *const *fw_gsum_recent(const struct fw_gsum *s, size_t *n)
{
	size_t k = s->ckpts.n < s->recent ? s->ckpts.n : s->recent;
	*n = k;
	if (k == 0)
		return NULL;
	return (const char *const *)s->ckpts.v + (s->ckpts.n - k);
}

static int key_cmp(const void *a, const void *b)
{
	const struct fw_gsum_row *x = a, *y = b;
	return strcmp(x->key, y->key);
}

/* Fills r from the cells that match (scope index idx; recent marks the
 * recent checkpoints). */
static void fill(struct fw_gsum *s, struct fw_gsum_row *r, int scope, size_t idx,
		 const unsigned char *recent, unsigned char *seen_task)
{
	uint64_t kn[FW_GSUM_NK] = { 0 };
	double ks[FW_GSUM_NK] = { 0 };
	uint64_t rn = 0, rc = 0;
	memset(seen_task, 0, s->tasks.n);
	for (size_t i = 0; i < s->cells.n; i++) {
		const struct cell *c = &s->cell[i];
		if ((scope == FW_GSUM_CKPT && c->ckpt != idx) ||
		    (scope == FW_GSUM_TASK && c->task != idx) ||
		    (scope == FW_GSUM_SPLIT && s->task_split[c->task] != idx))
			continue;
		r->rollouts += c->n;
		r->solved += c->c;
		if (!seen_task[c->task]) {
			seen_task[c->task] = 1;
			r->tasks++;
		}
		if (recent[c->ckpt]) {
			rn += c->n;
			rc += c->c;
		}
		/* pass@k per (task, checkpoint): samples of one policy */
		for (int k = 0; k < FW_GSUM_NK; k++)
			if (c->n >= fw_gsum_k[k]) {
				ks[k] += fw_pass_at_k(c->n, c->c, fw_gsum_k[k]);
				kn[k]++;
			}
	}
	r->rate = r->rollouts ? (double)r->solved / r->rollouts : NAN;
	fw_wilson(r->solved, r->rollouts, FW_Z95, &r->lo, &r->hi);
	for (int k = 0; k < FW_GSUM_NK; k++)
		r->pass_at[k] = kn[k] ? ks[k] / kn[k] : NAN;
	r->recent_rollouts = rn;
	r->recent_rate = rn ? (double)rc / rn : NAN;
	r->retire = scope != FW_GSUM_CKPT && rn > 0 && r->recent_rate >= s->retire_at;
	r->never_solved = scope == FW_GSUM_TASK && r->solved == 0;
}

long fw_gsum_rows(struct fw_gsum *s, const struct fw_gsum_row **rows)
{
	size_t n = s->ckpts.n + s->tasks.n + s->splits.n;
	free(s->rows);
	s->rows = calloc(n ? n : 1, sizeof *s->rows);
	unsigned char *recent = calloc(s->ckpts.n + 1, 1), *seen = calloc(s->tasks.n + 1, 1);
	if (!s->rows || !recent || !seen) {
		free(recent);
		free(seen);
		return -1;
	}
	size_t nr;
	fw_gsum_recent(s, &nr);
	for (size_t i = s->ckpts.n - nr; i < s->ckpts.n; i++)
		recent[i] = 1;
	size_t k = 0;
	struct { int scope; struct fw_intern *t; } parts[3] = {
		{ FW_GSUM_CKPT, &s->ckpts }, { FW_GSUM_TASK, &s->tasks }, { FW_GSUM_SPLIT, &s->splits },
	};
	for (int p = 0; p < 3; p++) {
		size_t first = k;
		for (size_t i = 0; i < parts[p].t->n; i++) {
			struct fw_gsum_row *r = &s->rows[k++];
			r->scope = parts[p].scope;
			r->key = parts[p].t->v[i];
			r->split = p == 1 ? s->splits.v[s->task_split[i]] : NULL;
			fill(s, r, parts[p].scope, i, recent, seen);
		}
		if (p > 0)
			qsort(s->rows + first, k - first, sizeof *s->rows, key_cmp);
	}
	free(recent);
	free(seen);
	*rows = s->rows;
	return (long)k;
}

/* ---- output ------------------------------------------------------------------- */

static const char *const scope_names[] = { "checkpoint", "task", "split" };

const char *fw_gsum_scope_name(enum fw_gsum_scope scope)
{
	return scope_names[scope];
}

static int pack_num(msgpack_packer *pk, double x)
{
	return isnan(x) ? msgpack_pack_nil(pk) : msgpack_pack_double(pk, x);
}

int fw_gsum_pack_row(struct fw_buf *b, const struct fw_gsum_row *r)
{
	char key[600], id[17], k[8];
	snprintf(key, sizeof key, "%s\n%s", scope_names[r->scope], r->key);
	snprintf(id, sizeof id, "%016llx", (unsigned long long)fw_hash64(key, strlen(key)));
	msgpack_packer pk;
	fw_buf_packer(&pk, b);
	int e = msgpack_pack_map(&pk, 16 + (r->scope == FW_GSUM_TASK));
	e |= fw_pack_cstr(&pk, "kind") | fw_pack_cstr(&pk, "grade-summary");
	e |= fw_pack_cstr(&pk, "id") | fw_pack_cstr(&pk, id);
	e |= fw_pack_cstr(&pk, "v") | msgpack_pack_int(&pk, 1);
	e |= fw_pack_cstr(&pk, "scope") | fw_pack_cstr(&pk, scope_names[r->scope]);
	e |= fw_pack_cstr(&pk, "key") | fw_pack_cstr(&pk, r->key);
	if (r->scope == FW_GSUM_TASK)
		e |= fw_pack_cstr(&pk, "split") | fw_pack_cstr(&pk, r->split);
	e |= fw_pack_cstr(&pk, "tasks") | msgpack_pack_uint64(&pk, r->tasks);
	e |= fw_pack_cstr(&pk, "rollouts") | msgpack_pack_uint64(&pk, r->rollouts);
	e |= fw_pack_cstr(&pk, "solved") | msgpack_pack_uint64(&pk, r->solved);
	e |= fw_pack_cstr(&pk, "rate") | pack_num(&pk, r->rate);
	e |= fw_pack_cstr(&pk, "lo") | pack_num(&pk, r->lo);
	e |= fw_pack_cstr(&pk, "hi") | pack_num(&pk, r->hi);
	e |= fw_pack_cstr(&pk, "pass_at");
	int nk = 0;
	for (int j = 0; j < FW_GSUM_NK; j++)
		nk += !isnan(r->pass_at[j]);
	e |= msgpack_pack_map(&pk, nk);
	for (int j = 0; j < FW_GSUM_NK; j++) {
		if (isnan(r->pass_at[j]))
			continue;
		snprintf(k, sizeof k, "%u", fw_gsum_k[j]);
		e |= fw_pack_cstr(&pk, k) | msgpack_pack_double(&pk, r->pass_at[j]);
	}
	e |= fw_pack_cstr(&pk, "recent_rollouts") | msgpack_pack_uint64(&pk, r->recent_rollouts);
	e |= fw_pack_cstr(&pk, "recent_rate") | pack_num(&pk, r->recent_rate);
	e |= fw_pack_cstr(&pk, "retire");
	e |= r->retire ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
	e |= fw_pack_cstr(&pk, "never_solved");
	e |= r->never_solved ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
	return e ? -1 : 0;
}

static void fmt_num(char *buf, size_t n, double x)
{
	if (isnan(x))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.3f", x);
}

/* Appends one table line without its trailing blanks.  Returns 0 or -1. */
static int put_line(struct fw_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int put_line(struct fw_buf *b, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	size_t n = strlen(buf);
	while (n && buf[n - 1] == ' ')
		n--;
	return fw_buf_append(b, buf, n) < 0 || fw_buf_append(b, "\n", 1) < 0 ? -1 : 0;
}

int fw_gsum_text(struct fw_buf *b, const struct fw_gsum *s, const struct fw_gsum_row *rows,
		 long n)
{
	int kw = 10, e = 0;
	for (long i = 0; i < n; i++)
		if ((int)strlen(rows[i].key) > kw)
			kw = (int)strlen(rows[i].key);
	char a[32], p1[32], p5[32], p10[32];
	for (int scope = 0; scope < 3; scope++) {
		int any = 0;
		for (long i = 0; i < n; i++) {
			const struct fw_gsum_row *r = &rows[i];
			if ((int)r->scope != scope)
				continue;
			if (!any) {
				if (scope)
					e |= fw_buf_append(b, "\n", 1) < 0;
				e |= put_line(b, "%-*s  %-7s %5s %8s %6s  %-5s  %-13s  %-6s  %-6s  %-7s  %s",
					      kw, scope_names[scope], scope == FW_GSUM_TASK ? "split" : "",
					      "tasks", "rollouts", "solved", "rate", "95% wilson", "pass@1",
					      "pass@5", "pass@10", scope ? "recent" : "");
				any = 1;
			}
			fmt_num(a, sizeof a, r->rate);
			fmt_num(p1, sizeof p1, r->pass_at[0]);
			fmt_num(p5, sizeof p5, r->pass_at[1]);
			fmt_num(p10, sizeof p10, r->pass_at[2]);
			char ci[40], rec[64];
			snprintf(ci, sizeof ci, "%.3f-%.3f", r->lo, r->hi);
			rec[0] = '\0';
			if (scope) {
				fmt_num(rec, sizeof rec, r->recent_rate);
				if (r->retire)
					strcat(rec, " retire");
				if (r->never_solved)
					strcat(rec, " never-solved");
			}
			e |= put_line(b, "%-*s  %-7s %5llu %8llu %6llu  %-5s  %-13s  %-6s  %-6s  %-7s  %s",
				      kw, r->key, r->split ? r->split : "", (unsigned long long)r->tasks,
				      (unsigned long long)r->rollouts, (unsigned long long)r->solved, a,
				      ci, p1, p5, p10, rec);
		}
	}
	size_t nr;
	const char *const *recent = fw_gsum_recent(s, &nr);
	e |= fw_buf_printf(b, "\nrecent checkpoints:") < 0;
	for (size_t i = 0; i < nr; i++)
		e |= fw_buf_printf(b, "%s %s", i ? "," : "", recent[i]) < 0;
	e |= fw_buf_printf(b, "\nretire (recent pass rate >= %g):", s->retire_at) < 0;
	int any = 0;
	for (long i = 0; i < n; i++)
		if (rows[i].retire)
			e |= fw_buf_printf(b, "%s %s %s", any++ ? "," : "",
					   scope_names[rows[i].scope], rows[i].key) < 0;
	e |= fw_buf_printf(b, "%s\nnever solved (too hard or broken):", any ? "" : " none") < 0;
	any = 0;
	for (long i = 0; i < n; i++)
		if (rows[i].never_solved)
			e |= fw_buf_printf(b, "%s task %s", any++ ? "," : "", rows[i].key) < 0;
	e |= fw_buf_printf(b, "%s\n", any ? "" : " none") < 0;
	return e ? -1 : 0;
}

int fw_gsum_put_rows(struct fw_writer *w, const struct fw_gsum_row *rows, long n, char *err,
		     size_t errlen)
{
	struct fw_buf b = { 0 };
	int rc = 0;
	for (long i = 0; i < n && !rc; i++) {
		fw_buf_reset(&b);
		if (fw_gsum_pack_row(&b, &rows[i]) < 0) {
			fw_seterr(err, errlen, "out of memory");
			rc = -1;
		} else if (fw_writer_put(w, b.p, b.n) < 0) {
			fw_seterr(err, errlen, "write error: %s", fw_writer_error(w));
			rc = -1;
		}
	}
	fw_buf_release(&b);
	return rc;
}

int fw_gsum_write_text(const struct fw_gsum *s, const struct fw_gsum_row *rows, long n,
		       const char *path, char *err, size_t errlen)
{
	struct fw_buf b = { 0 };
	FILE *f = stdout;
	int rc = -1;
	if (fw_gsum_text(&b, s, rows, n) < 0) {
		fw_seterr(err, errlen, "out of memory");
	} else if (path && strcmp(path, "-") != 0 && !(f = fopen(path, "w"))) {
		fw_seterr(err, errlen, "%s: %s", path, strerror(errno));
	} else {
		/* standard output's errors are the tool's, when it closes it */
		fwrite(b.p, 1, b.n, f);
		if (f != stdout && fclose(f) != 0)
			fw_seterr(err, errlen, "%s: %s", path, strerror(errno));
		else
			rc = 0;
	}
	fw_buf_release(&b);
	return rc;
}
