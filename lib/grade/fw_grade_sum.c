/*
 * fw_grade_sum.c — eval bookkeeping over graded rollouts: pass rates with
 * Wilson intervals, pass@k, saturated and never-solved tasks (see
 * fw_grade.h).  Memory grows with tasks × checkpoints, not with rollouts.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_grade.h"
#include "fw_stats.h"

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
