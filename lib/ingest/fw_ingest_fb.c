/*
 * fw_ingest_fb.c — feedback events: loading (JSON Lines or CSV), rating
 * normalisation, latest-vote-per-user, joining to trajectories, orphans.
 *
 * Events are kept in load order in one array; a JSON object maps each
 * trajectory key to the indexes of its live events.  A file's rating scale
 * is only known once the whole file is read (a "1" is a thumbs-up on a ±1
 * scale but one star on a 1-5 scale), so a file is read in two passes over
 * its parsed rows, and the unusable lines of both passes are reported
 * together in line order.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_ingest.h"
#include "fw_ingest_int.h"
#include "fw_mp.h"

enum { EV_LIVE, EV_SUPERSEDED, EV_JOINED, EV_ORPHAN };

struct ev {
	char *trace, *user, *comment, *file;
	json_t *raw;
	const char *origin;
	char at[32];
	long line;
	int rating, state;
};

struct fw_feedback {
	struct ev *ev;
	size_t n, cap;
	json_t *by_trace; /* trace -> [event index...] (live ones) */
	struct fw_feedback_stats st;
	enum fw_rating_scale want;     /* what the caller asked for */
	enum fw_rating_scale last;     /* what the last file was read as */
	char last_why[160];            /* and why */
};

static const char *const scale_names[] = {
	[FW_SCALE_AUTO] = "auto", [FW_SCALE_THUMBS] = "thumbs", [FW_SCALE_STARS] = "stars",
	[FW_SCALE_SCORE] = "score",
};

const char *fw_rating_scale_name(enum fw_rating_scale s)
{
	return (int)s >= 0 && s <= FW_SCALE_SCORE ? scale_names[s] : "auto";
}

enum fw_rating_scale fw_rating_scale_from_name(const char *name)
{
	for (int i = FW_SCALE_THUMBS; i <= FW_SCALE_SCORE; i++)
		if (!strcmp(name, scale_names[i]))
			return (enum fw_rating_scale)i;
	return FW_SCALE_AUTO;
}

void fw_feedback_set_scale(struct fw_feedback *fb, enum fw_rating_scale s)
{
	fb->want = s;
}

enum fw_rating_scale fw_feedback_scale(const struct fw_feedback *fb, char *why, size_t whylen)
{
	snprintf(why, whylen, "%s", fb->last_why);
	return fb->last;
}

struct fw_feedback *fw_feedback_new(void)
{
	struct fw_feedback *fb = calloc(1, sizeof *fb);

	if (!fb || !(fb->by_trace = json_object())) {
		free(fb);
		return NULL;
	}
	return fb;
}

static void ev_release(struct ev *e)
{
	free(e->trace);
	free(e->user);
	free(e->comment);
	free(e->file);
	json_decref(e->raw);
}

void fw_feedback_free(struct fw_feedback *fb)
{
	if (!fb)
		return;
	for (size_t i = 0; i < fb->n; i++)
		ev_release(&fb->ev[i]);
	free(fb->ev);
	json_decref(fb->by_trace);
	free(fb);
}

void fw_feedback_stats(const struct fw_feedback *fb, struct fw_feedback_stats *out)
{
	*out = fb->st;
}

/* ---- field names ------------------------------------------------------------- */

enum { F_TRACE, F_RATING, F_COMMENT, F_USER, F_ORIGIN, F_AT, F_N };

static const char *const names[F_N][12] = {
	[F_TRACE] = {"trace_id", "trajectory_id", "traj_id", "trace", "trajectory", "conversation_id",
		     "session_id", "response_id", "request_id", "message_id", "id", NULL},
	[F_RATING] = {"rating", "vote", "thumbs", "score", "stars", "value", "feedback", "label", NULL},
	[F_COMMENT] = {"comment", "text", "note", "reason", "message", NULL},
	[F_USER] = {"user", "user_id", "rater", "author", "reviewer", NULL},
	[F_ORIGIN] = {"origin", "source", "channel", NULL},
	[F_AT] = {"at", "time", "timestamp", "created_at", "created", "date", NULL},
};

/* Which field a column or key name is, or -1; *rank is its place in that
 * field's list of names (lower wins when several name the same field, so
 * "trace_id" beats an event's own "id"). */
static int field_of(const char *name, int *rank)
{
	char low[64];
	size_t i;

	for (i = 0; name[i] && i < sizeof low - 1; i++)
		low[i] = (char)tolower((unsigned char)name[i]);
	low[i] = 0;
	for (int f = 0; f < F_N; f++)
		for (int k = 0; names[f][k]; k++)
			if (!strcmp(low, names[f][k])) {
				*rank = k;
				return f;
			}
	return -1;
}

/* ---- ratings --------------------------------------------------------------------- */

/* The number a rating is written as (JSON number or numeric string);
 * returns 0 and fills *x, -1 when it is not a whole number. */
static int rating_number(const json_t *raw, long *x)
{
	if (json_is_integer(raw)) {
		*x = (long)json_integer_value(raw);
		return 0;
	}
	if (json_is_real(raw)) {
		double d = json_real_value(raw);
		if (d != (long)d)
			return -1;
		*x = (long)d;
		return 0;
	}
	const char *s = json_string_value(raw);
	char *end;
	if (!s)
		return -1;
	while (isspace((unsigned char)*s))
		s++;
	if (!*s)
		return -1;
	errno = 0;
	*x = strtol(s, &end, 10);
	while (isspace((unsigned char)*end))
		end++;
	return errno || *end ? -1 : 0;
}

/* +1/-1 in *out and 0; 1 for a neutral rating; -1 when not a rating on
 * scale (never FW_SCALE_AUTO: a file's scale is decided before). */
static int rating_of(const json_t *raw, enum fw_rating_scale scale, int *out)
{
	static const char *const up[] = {"up", "thumbs_up", "thumbsup", "thumbs-up", "\xf0\x9f\x91\x8d",
					 "+", "positive", "good", "like", "yes", "true", "pos", NULL};
	static const char *const down[] = {"down", "thumbs_down", "thumbsdown", "thumbs-down",
					   "\xf0\x9f\x91\x8e", "-", "negative", "bad", "dislike", "no",
					   "false", "neg", NULL};
	long x;

	if (json_is_boolean(raw)) {
		*out = json_is_true(raw) ? 1 : -1;
		return 0;
	}
	if (json_is_string(raw)) {
		char low[32];
		const char *s = json_string_value(raw);
		size_t i, j = 0;
		for (i = 0; s[i] && j < sizeof low - 1; i++)
			if (!isspace((unsigned char)s[i]))
				low[j++] = (char)tolower((unsigned char)s[i]);
		low[j] = 0;
		for (i = 0; up[i]; i++)
			if (!strcmp(low, up[i]))
				return *out = 1, 0;
		for (i = 0; down[i]; i++)
			if (!strcmp(low, down[i]))
				return *out = -1, 0;
	}
	if (rating_number(raw, &x)) {
		/* a score may be a fraction, as a number or as text */
		double d;
		char *end = NULL;
		if (scale != FW_SCALE_SCORE)
			return -1;
		if (json_is_real(raw)) {
			d = json_real_value(raw);
		} else {
			const char *t = json_string_value(raw);
			if (!t)
				return -1;
			d = strtod(t, &end);
			while (end && isspace((unsigned char)*end))
				end++;
			if (end == t || (end && *end) || d != d)
				return -1;
		}
		if (d == 0)
			return 1;
		*out = d > 0 ? 1 : -1;
		return 0;
	}
	if (scale == FW_SCALE_SCORE) {
		if (x == 0)
			return 1;
		*out = x > 0 ? 1 : -1;
		return 0;
	}
	if (scale == FW_SCALE_STARS) {
		if (x < 1 || x > 5)
			return -1;
		if (x == 3)
			return 1;
		*out = x >= 4 ? 1 : -1;
		return 0;
	}
	if (x == 1 || x == -1 || x == 0) {
		*out = x == 1 ? 1 : -1;
		return 0;
	}
	return -1;
}

/* ---- adding events ------------------------------------------------------------------- */

/* Whether a is later than b (an event without a time is the oldest). */
static int later(const struct ev *a, const struct ev *b)
{
	return strcmp(a->at, b->at) >= 0;
}

/* Adds event e (taking its memory), keeping the latest per (trace, user). */
static int add_event(struct fw_feedback *fb, struct ev *e)
{
	if (fb->n == fb->cap) {
		size_t cap = fb->cap ? fb->cap * 2 : 256;
		struct ev *p = realloc(fb->ev, cap * sizeof *p);
		if (!p)
			return -1;
		fb->ev = p;
		fb->cap = cap;
	}
	size_t me = fb->n;
	fb->ev[fb->n++] = *e;
	fb->st.events++;
	struct ev *ne = &fb->ev[me];

	json_t *list = json_object_get(fb->by_trace, ne->trace);
	if (!list) {
		list = json_array();
		if (!list || json_object_set_new(fb->by_trace, ne->trace, list))
			return -1;
	}
	size_t i;
	json_t *v;
	json_array_foreach(list, i, v) {
		struct ev *old = &fb->ev[json_integer_value(v)];
		if (!ne->user[0] || strcmp(old->user, ne->user))
			continue;
		fb->st.superseded++;
		if (later(ne, old)) {
			old->state = EV_SUPERSEDED;
			return json_array_set_new(list, i, json_integer((json_int_t)me));
		}
		ne->state = EV_SUPERSEDED;
		return 0;
	}
	return json_array_append_new(list, json_integer((json_int_t)me));
}

/* One parsed row: the values of the fields, as JSON. */
struct row {
	long line;
	json_t *f[F_N];
};

struct bad {
	long line;
	char why[160];
};

struct load {
	struct row *rows;
	size_t nrows, caprows;
	struct bad *bads;
	size_t nbads, capbads;
	char star_col[64]; /* the rating column's name when it says stars */
	long star_line;    /* first rating of 2..5 */
	long neg_line;     /* first negative rating */
	long star_x, neg_x;
};

static int add_bad(struct load *L, long line, const char *why)
{
	if (L->nbads == L->capbads) {
		size_t cap = L->capbads ? L->capbads * 2 : 16;
		struct bad *p = realloc(L->bads, cap * sizeof *p);
		if (!p)
			return -1;
		L->bads = p;
		L->capbads = cap;
	}
	L->bads[L->nbads].line = line;
	snprintf(L->bads[L->nbads++].why, sizeof L->bads[0].why, "%s", why);
	return 0;
}

static int add_row(struct load *L, struct row *r)
{
	if (L->nrows == L->caprows) {
		size_t cap = L->caprows ? L->caprows * 2 : 256;
		struct row *p = realloc(L->rows, cap * sizeof *p);
		if (!p)
			return -1;
		L->rows = p;
		L->caprows = cap;
	}
	L->rows[L->nrows++] = *r;
	return 0;
}

/* Splits one CSV line (RFC 4180 quoting, no line breaks inside fields) into
 * a JSON array of strings; NULL with why set when a quote is not closed. */
static json_t *csv_split(const char *s, size_t n, const char **why)
{
	json_t *a = json_array();
	char *buf = malloc(n + 1);
	size_t i = 0;

	*why = "out of memory";
	if (!a || !buf)
		goto fail;
	for (;;) {
		size_t k = 0;
		if (i < n && s[i] == '"') {
			i++;
			for (;;) {
				if (i >= n) {
					*why = "unterminated quote";
					goto fail;
				}
				if (s[i] == '"') {
					if (i + 1 < n && s[i + 1] == '"') {
						buf[k++] = '"';
						i += 2;
						continue;
					}
					i++;
					break;
				}
				buf[k++] = s[i++];
			}
			if (i < n && s[i] != ',') {
				*why = "text after a closing quote";
				goto fail;
			}
		} else {
			while (i < n && s[i] != ',') {
				if (s[i] == '"') {
					*why = "quote inside an unquoted field";
					goto fail;
				}
				buf[k++] = s[i++];
			}
		}
		json_t *cell = json_stringn(buf, k);
		if (!cell) {
			*why = "not valid UTF-8";
			goto fail;
		}
		json_array_append_new(a, cell);
		if (i >= n)
			break;
		i++; /* the comma */
	}
	free(buf);
	return a;
fail:
	free(buf);
	json_decref(a);
	return NULL;
}

/* Notes what a row's rating says about the file's scale: a 2..5 is a
 * star, a negative number a sign. */
static void note_scale(struct load *L, const json_t *raw, long line)
{
	long x;

	if (json_is_boolean(raw) || rating_number(raw, &x))
		return;
	if (x >= 2 && x <= 5 && !L->star_line) {
		L->star_line = line;
		L->star_x = x;
	}
	if (x < 0 && !L->neg_line) {
		L->neg_line = line;
		L->neg_x = x;
	}
}

/* Decides the scale of a file from what note_scale() saw, or refuses it
 * (-1, err set) when it mixes signs with stars: one of the two readings
 * would turn votes upside down. */
static int decide_scale(struct fw_feedback *fb, const struct load *L, char *err, size_t errlen)
{
	if (fb->want != FW_SCALE_AUTO) {
		fb->last = fb->want;
		snprintf(fb->last_why, sizeof fb->last_why, "as --rating-scale says");
		return 0;
	}
	if ((L->star_line || L->star_col[0]) && L->neg_line) {
		if (L->star_line)
			snprintf(err, errlen, "ratings mix signs (%ld at line %ld) with stars (%ld at line %ld): "
				 "say which with --rating-scale", L->neg_x, L->neg_line, L->star_x, L->star_line);
		else
			snprintf(err, errlen, "the rating column '%s' says stars but line %ld has %ld: "
				 "say which with --rating-scale", L->star_col, L->neg_line, L->neg_x);
		return -1;
	}
	if (L->star_col[0]) {
		fb->last = FW_SCALE_STARS;
		snprintf(fb->last_why, sizeof fb->last_why, "the rating column is called '%s'",
			 L->star_col);
	} else if (L->star_line) {
		fb->last = FW_SCALE_STARS;
		snprintf(fb->last_why, sizeof fb->last_why, "a rating of %ld at line %ld", L->star_x,
			 L->star_line);
	} else {
		fb->last = FW_SCALE_THUMBS;
		snprintf(fb->last_why, sizeof fb->last_why, "no rating above 1");
	}
	return 0;
}

static int parse_csv(struct load *L, FILE *f, char *err, size_t errlen)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long lineno = 0;
	int col[F_N], ncols = 0;
	const char *why;

	for (int i = 0; i < F_N; i++)
		col[i] = -1;
	while ((len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			len--;
		if (len == 0)
			continue;
		json_t *cells = csv_split(line, (size_t)len, &why);
		if (!cells) {
			if (!strcmp(why, "out of memory") || add_bad(L, lineno, why))
				goto oom;
			continue;
		}
		if (!ncols) {
			/* the header */
			size_t i;
			json_t *c;
			ncols = (int)json_array_size(cells);
			int rank[F_N];
			json_array_foreach(cells, i, c) {
				int rk, fld = field_of(json_string_value(c), &rk);
				if (fld >= 0 && (col[fld] < 0 || rk < rank[fld])) {
					col[fld] = (int)i;
					rank[fld] = rk;
				}
				if (fld == F_RATING && strcasestr(json_string_value(c), "star"))
					snprintf(L->star_col, sizeof L->star_col, "%s", json_string_value(c));
			}
			json_decref(cells);
			if (col[F_TRACE] < 0 || col[F_RATING] < 0) {
				snprintf(err, errlen, "line %ld: the header names no %s column", lineno,
					 col[F_TRACE] < 0 ? "trajectory id" : "rating");
				free(line);
				errno = EINVAL;
				return -1;
			}
			continue;
		}
		if ((int)json_array_size(cells) != ncols) {
			char msg[80];
			snprintf(msg, sizeof msg, "%zu fields, the header has %d",
				 json_array_size(cells), ncols);
			json_decref(cells);
			if (add_bad(L, lineno, msg))
				goto oom;
			continue;
		}
		struct row r = {.line = lineno};
		for (int fld = 0; fld < F_N; fld++) {
			json_t *c = col[fld] >= 0 ? json_array_get(cells, (size_t)col[fld]) : NULL;
			if (c && json_string_length(c))
				r.f[fld] = json_incref(c);
		}
		json_decref(cells);
		note_scale(L, r.f[F_RATING], lineno);
		if (add_row(L, &r))
			goto oom;
	}
	free(line);
	return 0;
oom:
	free(line);
	snprintf(err, errlen, "out of memory");
	return -1;
}

static int parse_jsonl(struct load *L, FILE *f, char *err, size_t errlen)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long lineno = 0;
	json_error_t je;
	char msg[200];

	while ((len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		size_t k = 0;
		while (k < (size_t)len && isspace((unsigned char)line[k]))
			k++;
		if (k == (size_t)len)
			continue;
		json_t *o = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, &je);
		if (!json_is_object(o)) {
			if (o)
				snprintf(msg, sizeof msg, "a JSON %s, not an object", fw_ing_type_name(o));
			else
				snprintf(msg, sizeof msg, "invalid JSON: %s", je.text);
			json_decref(o);
			if (add_bad(L, lineno, msg))
				goto oom;
			continue;
		}
		struct row r = {.line = lineno};
		int rank[F_N];
		const char *key;
		json_t *v;
		json_object_foreach(o, key, v) {
			int rk, fld = field_of(key, &rk);
			if (fld < 0 || json_is_null(v) || (r.f[fld] && rk >= rank[fld]))
				continue;
			if (fld == F_RATING && !strcasecmp(key, "stars"))
				snprintf(L->star_col, sizeof L->star_col, "%s", key);
			json_decref(r.f[fld]);
			r.f[fld] = json_incref(v);
			rank[fld] = rk;
		}
		json_decref(o);
		note_scale(L, r.f[F_RATING], lineno);
		if (add_row(L, &r))
			goto oom;
	}
	free(line);
	return 0;
oom:
	free(line);
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* A field's value as a malloc'd string ("" when absent): strings as they
 * are, other values as JSON text. */
static char *as_text(const json_t *v)
{
	if (!v)
		return strdup("");
	if (json_is_string(v))
		return strndup(json_string_value(v), json_string_length(v));
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	return s ? s : strdup("");
}

/* Turns a row into an event; returns 0, 1 when the row is unusable (why
 * set), -1 when memory runs out. */
static int row_event(struct fw_feedback *fb, struct load *L, struct row *r, const char *path,
		     char *why, size_t whylen)
{
	struct ev e = {.line = r->line, .origin = "external"};
	int rc;

	if (!r->f[F_TRACE] || (json_is_string(r->f[F_TRACE]) && !json_string_length(r->f[F_TRACE])))
		return snprintf(why, whylen, "no trajectory id"), 1;
	if (!r->f[F_RATING])
		return snprintf(why, whylen, "no rating"), 1;
	rc = rating_of(r->f[F_RATING], fb->last, &e.rating);
	if (rc == 1) {
		fb->st.neutral++;
		return 0;
	}
	if (rc < 0) {
		char *t = as_text(r->f[F_RATING]);
		snprintf(why, whylen, "cannot parse rating '%.40s'", t ? t : "");
		free(t);
		return 1;
	}
	if (r->f[F_AT] && fw_ingest_time(r->f[F_AT], e.at, sizeof e.at)) {
		char *t = as_text(r->f[F_AT]);
		snprintf(why, whylen, "cannot parse time '%.40s'", t ? t : "");
		free(t);
		return 1;
	}
	const char *o = json_string_value(r->f[F_ORIGIN]);
	if (o && (!strcasecmp(o, "internal") || !strcasecmp(o, "dogfood")))
		e.origin = "internal";
	e.trace = as_text(r->f[F_TRACE]);
	e.user = as_text(r->f[F_USER]);
	e.comment = as_text(r->f[F_COMMENT]);
	e.file = strdup(path);
	e.raw = json_incref(r->f[F_RATING]);
	if (!e.trace || !e.user || !e.comment || !e.file || add_event(fb, &e)) {
		ev_release(&e);
		return -1;
	}
	return 0;
}

static int cmp_bad(const void *a, const void *b)
{
	const struct bad *x = a, *y = b;
	return (x->line > y->line) - (x->line < y->line);
}

int fw_feedback_load(struct fw_feedback *fb, const char *path, fw_bad_line_fn bad, void *ctx,
		     char *err, size_t errlen)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
	struct load L = {0};
	int c, rc = 0;

	if (!f) {
		snprintf(err, errlen, "%s", strerror(errno));
		return -1;
	}
	while ((c = getc(f)) != EOF && (isspace(c) || c == 0xef || c == 0xbb || c == 0xbf))
		; /* blanks and a UTF-8 byte order mark */
	if (c != EOF)
		ungetc(c, f);
	if (c == '{')
		rc = parse_jsonl(&L, f, err, errlen);
	else if (c != EOF)
		rc = parse_csv(&L, f, err, errlen);
	if (!rc && ferror(f)) {
		snprintf(err, errlen, "%s", strerror(errno));
		rc = -1;
	}
	if (f != stdin)
		fclose(f);
	if (rc == 0 && decide_scale(fb, &L, err, errlen)) {
		errno = EINVAL;
		rc = -1;
	}

	for (size_t i = 0; i < L.nrows && rc == 0; i++) {
		char why[160];
		int r = row_event(fb, &L, &L.rows[i], path, why, sizeof why);
		if (r < 0) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
		} else if (r > 0 && add_bad(&L, L.rows[i].line, why)) {
			rc = -1;
		}
	}
	if (rc == 0) {
		if (L.nbads)
			qsort(L.bads, L.nbads, sizeof *L.bads, cmp_bad);
		for (size_t i = 0; i < L.nbads; i++) {
			fb->st.bad++;
			if (bad && bad(ctx, path, L.bads[i].line, L.bads[i].why)) {
				rc = 1;
				break;
			}
		}
	}
	for (size_t i = 0; i < L.nrows; i++)
		for (int k = 0; k < F_N; k++)
			json_decref(L.rows[i].f[k]);
	free(L.rows);
	free(L.bads);
	return rc;
}

/* ---- joining ---------------------------------------------------------------------------- */

/* An event as a feedback[] entry; "at" is left out when the event has no
 * time. */
static json_t *ev_json(const struct ev *e)
{
	json_t *o = json_pack("{sisOssssss}", "rating", e->rating, "raw", e->raw, "comment",
			      e->comment, "user", e->user, "origin", e->origin);
	if (o && e->at[0] && json_object_set_new(o, "at", json_string(e->at))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

long fw_feedback_join(struct fw_feedback *fb, const char *key, json_t *traj)
{
	json_t *list = json_object_get(fb->by_trace, key);
	json_t *arr = json_object_get(traj, "feedback");
	size_t i, j;
	json_t *v, *have;
	long moved = 0;

	if (!list)
		return 0;
	if (!json_is_array(arr)) {
		arr = json_array();
		if (!arr || json_object_set_new(traj, "feedback", arr))
			return -1;
	}
	json_array_foreach(list, i, v) {
		struct ev *e = &fb->ev[json_integer_value(v)];
		int skip = 0;
		if (e->state != EV_LIVE)
			continue;
		e->state = EV_JOINED;
		fb->st.joined++;
		moved++;
		/* the same user may already have voted under another key */
		json_array_foreach(arr, j, have) {
			const char *u = fw_ing_str(have, "user");
			const char *at = fw_ing_str(have, "at");
			if (!e->user[0] || !u || strcmp(u, e->user))
				continue;
			fb->st.superseded++;
			if (strcmp(e->at, at ? at : "") >= 0)
				json_array_remove(arr, j);
			else
				skip = 1;
			break;
		}
		if (skip)
			continue;
		json_t *o = ev_json(e);
		if (!o || json_array_append_new(arr, o))
			return -1;
	}
	json_object_del(fb->by_trace, key);
	return moved;
}

long fw_feedback_orphans(struct fw_feedback *fb, int (*fn)(void *ctx, json_t *rec), void *ctx)
{
	long n = 0;
	char hex[17];

	for (size_t i = 0; i < fb->n; i++) {
		struct ev *e = &fb->ev[i];
		if (e->state != EV_LIVE)
			continue;
		e->state = EV_ORPHAN;
		json_t *o = ev_json(e);
		json_t *rec = json_pack("{sssiss}", "kind", "feedback", "v", 1, "id", "");
		if (!o || !rec || json_object_set_new(rec, "trace", json_string(e->trace)) ||
		    json_object_update(rec, o)) {
			json_decref(o);
			json_decref(rec);
			return -1;
		}
		json_decref(o);
		json_object_set_new(rec, "file", json_string(e->file));
		json_object_set_new(rec, "line", json_integer(e->line));
		char *s = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
		if (s) {
			snprintf(hex, sizeof hex, "%016llx", (unsigned long long)fw_hash64(s, strlen(s)));
			json_object_set_new(rec, "id", json_string(hex));
			free(s);
		}
		int stop = fn ? fn(ctx, rec) : 0;
		json_decref(rec);
		if (stop)
			return -1;
		n++;
	}
	json_object_clear(fb->by_trace);
	return n;
}
