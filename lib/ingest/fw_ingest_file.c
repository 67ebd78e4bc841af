/*
 * fw_ingest_file.c — reading one log file: detection, then the loop that
 * fits its format (JSON Lines, a whole document, Claude Code sessions,
 * flywheel records), handing trajectories and bad lines to a sink.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_ingest.h"
#include "fw_ingest_int.h"
#include "fw_json.h"
#include "fw_stream.h"

#define DETECT_BYTES (64 << 10)

struct in {
	const struct fw_ingest_sink *sink;
	fw_ingest_warn_fn warn;
	json_t *warned; /* unknown fields already reported for this file */
	const char *name;
	enum fw_fmt f;
	int stop;
};

static void bad_at(struct in *in, const char *unit, long n, const char *why)
{
	char where[64];

	snprintf(where, sizeof where, "%s %ld", unit, n);
	if (in->sink->bad(in->sink->ctx, in->f, where, why))
		in->stop = 1;
}

/* A line as a JSON object, or NULL when it is none (reported bad at its
 * number). */
static json_t *line_object(struct in *in, const char *line, size_t len, long lineno)
{
	json_error_t je;
	json_t *e = json_loadb(line, len, JSON_ALLOW_NUL, &je);
	char why[200];

	if (json_is_object(e))
		return e;
	snprintf(why, sizeof why, "%s%s", e ? "not a JSON object" : "invalid JSON: ", e ? "" : je.text);
	json_decref(e);
	bad_at(in, "line", lineno, why);
	return NULL;
}

/* Only white space. */
static int blank(const char *line, ssize_t len)
{
	for (ssize_t k = 0; k < len; k++)
		if (line[k] != ' ' && line[k] != '\t' && line[k] != '\r' && line[k] != '\n')
			return 0;
	return 1;
}

/* Reports the unknown fields a converter noted (each once per file) and
 * takes the note out of the record. */
static void report_unknown(struct in *in, json_t *traj, long line)
{
	json_t *u = json_object_get(traj, "_unknown"), *k;
	size_t i;
	char where[64], msg[256];

	if (!u)
		return;
	json_array_foreach(u, i, k) {
		const char *name = json_string_value(k);
		if (!name || json_object_get(in->warned, name))
			continue;
		json_object_set_new(in->warned, name, json_true());
		snprintf(where, sizeof where, "line %ld", line);
		snprintf(msg, sizeof msg, "unknown field '%s' is ignored", name);
		if (in->warn && in->warn(in->sink->ctx, in->f, where, msg))
			in->stop = 1;
	}
	json_object_del(traj, "_unknown");
}

static void give(struct in *in, json_t *traj, long line)
{
	report_unknown(in, traj, line);
	if (in->sink->traj(in->sink->ctx, in->f, traj, line))
		in->stop = 1;
}

static void convert_one(struct in *in, const json_t *doc, long line)
{
	char err[256];
	json_t *traj = fw_ingest_convert(in->f, doc, in->name, err, sizeof err);

	if (traj)
		give(in, traj, line);
	else
		bad_at(in, "line", line, err);
}

/* Claude Code: every line an event; sessions grouped by sessionId, each
 * reported at the line of its first event. */
static int do_claude(struct in *in, FILE *fp)
{
	json_t *sessions = json_object(), *order = json_array(), *first = json_object();
	char *line = NULL;
	size_t cap = 0, i;
	ssize_t len;
	long lineno = 0;
	json_t *sid;

	if (!sessions || !order || !first)
		goto oom;
	while (!in->stop && (len = getline(&line, &cap, fp)) >= 0) {
		lineno++;
		json_t *e = line_object(in, line, (size_t)len, lineno);
		if (!e)
			continue;
		const char *s = fw_ing_str(e, "sessionId");
		if (!s) {
			json_decref(e); /* summaries and snapshots belong to no turn */
			continue;
		}
		json_t *evs = json_object_get(sessions, s);
		if (!evs) {
			evs = json_array();
			if (!evs || json_object_set_new(sessions, s, evs) ||
			    json_array_append_new(order, json_string(s)) ||
			    json_object_set_new(first, s, json_integer(lineno))) {
				json_decref(e);
				goto oom;
			}
		}
		json_array_append_new(evs, e);
	}
	json_array_foreach(order, i, sid) {
		const char *s = json_string_value(sid);
		long at = (long)json_integer_value(json_object_get(first, s));
		char err[256];
		if (in->stop)
			break;
		json_t *traj = fw_ingest_claude_session(json_object_get(sessions, s), err, sizeof err);
		if (traj) {
			give(in, traj, at);
		} else {
			char why[320];
			snprintf(why, sizeof why, "session %.40s: %s", s, err);
			bad_at(in, "line", at, why);
		}
	}
	free(line);
	json_decref(sessions);
	json_decref(order);
	json_decref(first);
	return 0;
oom:
	free(line);
	json_decref(sessions);
	json_decref(order);
	json_decref(first);
	errno = ENOMEM;
	return -1;
}

/* A whole file holding one JSON document (a .traj) or an array of them. */
static int do_document(struct in *in, FILE *fp)
{
	json_error_t je;
	json_t *doc = json_loadf(fp, JSON_ALLOW_NUL, &je);
	size_t i;
	json_t *d;

	if (!doc) {
		bad_at(in, "line", je.line > 0 ? je.line : 1, je.text);
		return 0;
	}
	if (json_is_array(doc) && in->f != FW_FMT_MINI_SWE_AGENT && in->f != FW_FMT_OPENHANDS) {
		json_array_foreach(doc, i, d) {
			if (in->stop)
				break;
			convert_one(in, d, 1);
		}
	} else {
		convert_one(in, doc, 1);
	}
	json_decref(doc);
	return 0;
}

/* JSON Lines: one document per line; blank lines are skipped. */
static int do_lines(struct in *in, FILE *fp)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long lineno = 0;
	json_error_t je;

	while (!in->stop && (len = getline(&line, &cap, fp)) >= 0) {
		lineno++;
		if (blank(line, len))
			continue;
		json_t *doc = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, &je);
		if (!doc) {
			char why[200];
			snprintf(why, sizeof why, "invalid JSON: %s", je.text);
			bad_at(in, "line", lineno, why);
			continue;
		}
		convert_one(in, doc, lineno);
		json_decref(doc);
	}
	free(line);
	return 0;
}

/* Codex rollouts: a session is the lines from one session_meta to the
 * next that names another session (a file may be several rollouts put
 * together); each is converted when it ends, reported at its first line. */
static int do_codex(struct in *in, FILE *fp)
{
	json_t *lines = json_array();
	char *line = NULL, *sid = NULL;
	size_t cap = 0;
	ssize_t len;
	long lineno = 0, first = 0;
	char err[256];

	if (!lines)
		goto oom;
	for (;;) {
		json_t *e = NULL;
		int eof = in->stop || (len = getline(&line, &cap, fp)) < 0;
		const char *id = NULL;
		if (!eof) {
			lineno++;
			if (blank(line, len))
				continue;
			if (!(e = line_object(in, line, (size_t)len, lineno)))
				continue;
			const char *type = fw_ing_str(e, "type");
			if (type && !strcmp(type, "session_meta"))
				id = fw_ing_str(json_object_get(e, "payload"), "id");
		}
		/* a session ends at the end of the file or where another begins */
		if (json_array_size(lines) && !in->stop && (eof || (id && sid && strcmp(id, sid)))) {
			long at;
			json_t *traj = fw_ingest_codex_session(lines, &at, err, sizeof err);
			if (traj)
				give(in, traj, first);
			else
				bad_at(in, "line", at ? at : first, err);
			json_array_clear(lines);
			free(sid);
			sid = NULL;
		}
		if (eof)
			break;
		if (!json_array_size(lines))
			first = lineno;
		if (id && !sid && !(sid = strdup(id))) {
			json_decref(e);
			goto oom;
		}
		if (json_object_set_new(e, "_line", json_integer(lineno)) ||
		    json_array_append_new(lines, e))
			goto oom;
	}
	free(line);
	free(sid);
	json_decref(lines);
	return 0;
oom:
	free(line);
	free(sid);
	json_decref(lines);
	errno = ENOMEM;
	return -1;
}

struct otel_give {
	struct in *in;
	long n;
};

static int otel_one(void *ctx, json_t *traj, const char *err)
{
	struct otel_give *g = ctx;

	g->n++;
	if (traj)
		give(g->in, traj, g->n);
	else
		bad_at(g->in, "trajectory", g->n, err);
	return 0;
}

/* OTLP JSON: one export document, or one per line as the collector's file
 * exporter writes them; spans of one trace may be spread over several, so
 * the whole file is read before anything is rebuilt.  Trajectories are
 * reported by their number in the file. */
static int do_otel(struct in *in, FILE *fp, int lines)
{
	json_t *docs = json_array();
	json_error_t je;

	if (!docs)
		goto oom;
	if (lines) {
		char *line = NULL;
		size_t cap = 0;
		ssize_t len;
		long lineno = 0;
		while (!in->stop && (len = getline(&line, &cap, fp)) >= 0) {
			lineno++;
			if (blank(line, len))
				continue;
			json_t *d = line_object(in, line, (size_t)len, lineno);
			if (!d)
				continue;
			if (json_array_append_new(docs, d)) {
				free(line);
				goto oom;
			}
		}
		free(line);
	} else {
		json_t *d = json_loadf(fp, JSON_ALLOW_NUL, &je);
		if (!d) {
			bad_at(in, "line", je.line > 0 ? je.line : 1, je.text);
			json_decref(docs);
			return 0;
		}
		if (json_is_array(d))
			json_array_extend(docs, d);
		else
			json_array_append(docs, d);
		json_decref(d);
	}
	struct otel_give g = {in, 0};
	if (!in->stop && fw_ingest_otel(docs, otel_one, &g) < 0)
		goto oom;
	json_decref(docs);
	return 0;
oom:
	json_decref(docs);
	errno = ENOMEM;
	return -1;
}

/* Flywheel records: traj records go to the sink as objects, other records
 * as raw bytes. */
static int do_flywheel(struct in *in, const char *path, const char *mem, size_t memlen,
		       char *err, size_t errlen)
{
	struct fw_reader *r = mem ? fw_reader_memopen(mem, memlen, in->name, NULL)
				  : fw_reader_open(path, NULL, err, errlen);
	struct fw_rec rec;
	struct fw_buf js = {0};
	char where[64], why[256];
	int n;

	if (!r) {
		if (mem)
			snprintf(err, errlen, "out of memory");
		return -1;
	}
	while (!in->stop && (n = fw_reader_next(r, &rec)) != 0) {
		if (n < 0) {
			snprintf(where, sizeof where, "record %llu (byte %llu)",
				 (unsigned long long)fw_reader_index(r) + 1,
				 (unsigned long long)fw_reader_offset(r));
			if (in->sink->bad(in->sink->ctx, in->f, where, fw_reader_error(r)))
				in->stop = 1;
			if (!fw_reader_recoverable(r))
				break;
			continue;
		}
		struct fw_mpv kind;
		if (fw_mp_get(rec.v, "kind", &kind) != 1 || !fw_mp_str_eq(kind, "traj", 4)) {
			if (in->sink->raw && in->sink->raw(in->sink->ctx, rec.v.p, rec.v.n))
				in->stop = 1;
			continue;
		}
		json_error_t je;
		json_t *traj = NULL;
		js.n = 0;
		if (fw_json_from_mp(&js, rec.v, why, sizeof why) == 0) {
			traj = json_loadb((const char *)js.p, js.n, JSON_ALLOW_NUL, &je);
			if (!traj)
				snprintf(why, sizeof why, "%s", je.text);
		}
		if (!traj) {
			snprintf(where, sizeof where, "record %llu (byte %llu)",
				 (unsigned long long)rec.index + 1, (unsigned long long)rec.offset);
			if (in->sink->bad(in->sink->ctx, in->f, where, why))
				in->stop = 1;
			continue;
		}
		give(in, traj, (long)rec.index + 1);
	}
	fw_buf_release(&js);
	fw_reader_close(r);
	return 0;
}

/* Whether the first non-blank line of the file is a complete JSON value
 * (JSON Lines) rather than the start of a longer document.  p[0..n) is the
 * file's head; a first line longer than that is read from fp, which is
 * left at the start. */
static int first_line_is_json(FILE *fp, const char *p, size_t n)
{
	size_t i = 0;
	json_error_t je;

	while (i < n) {
		const char *nl = memchr(p + i, '\n', n - i);
		size_t end = nl ? (size_t)(nl - p) : n;
		size_t k = i;
		while (k < end && (p[k] == ' ' || p[k] == '\t' || p[k] == '\r'))
			k++;
		if (k < end) {
			json_t *v;
			if (nl || n < DETECT_BYTES) {
				v = json_loadb(p + k, end - k, JSON_ALLOW_NUL, &je);
			} else {
				/* cut by the window: read the whole line */
				char *line = NULL;
				size_t cap = 0;
				ssize_t len;
				if (fseek(fp, (long)i, SEEK_SET) || (len = getline(&line, &cap, fp)) < 0)
					len = 0;
				v = len ? json_loadb(line, (size_t)len, JSON_ALLOW_NUL, &je) : NULL;
				free(line);
				if (fseek(fp, 0, SEEK_SET))
					v = NULL;
			}
			json_decref(v);
			return v != NULL;
		}
		i = end + 1;
	}
	return 0;
}

int fw_ingest_file(const char *path, enum fw_fmt force, const struct fw_ingest_sink *sink,
		   enum fw_fmt *fmt, char *err, size_t errlen)
{
	return fw_ingest_file_ex(path, force, sink, NULL, fmt, err, errlen);
}

int fw_ingest_file_ex(const char *path, enum fw_fmt force, const struct fw_ingest_sink *sink,
		      fw_ingest_warn_fn warn, enum fw_fmt *fmt, char *err, size_t errlen)
{
	struct in in = {.sink = sink, .warn = warn, .warned = json_object(),
			.name = strcmp(path, "-") ? path : "<stdin>"};
	FILE *fp = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	char *buf = NULL, *head = NULL;
	size_t len = 0;
	char why[256];
	int rc = -1;

	*fmt = FW_FMT_UNKNOWN;
	if (errlen)
		err[0] = 0;
	if (!fp || !in.warned) {
		snprintf(err, errlen, "%s", fp ? "out of memory" : strerror(errno));
		if (fp && fp != stdin)
			fclose(fp);
		json_decref(in.warned);
		return -1;
	}
	if (fp == stdin || fseek(fp, 0, SEEK_CUR) != 0) {
		/* a pipe: keep everything, then read it back from memory */
		FILE *mem = open_memstream(&buf, &len);
		char chunk[65536];
		size_t k;
		while (mem && (k = fread(chunk, 1, sizeof chunk, fp)) > 0)
			fwrite(chunk, 1, k, mem);
		int bad = ferror(fp);
		if (fp != stdin)
			fclose(fp);
		fp = NULL;
		if (!mem || fclose(mem) || bad) {
			snprintf(err, errlen, "%s", bad ? "read error" : "out of memory");
			goto done;
		}
		if (!len) {
			rc = 0; /* an empty log holds no trajectory */
			goto done;
		}
		fp = fmemopen(buf, len, "rb");
		if (!fp) {
			snprintf(err, errlen, "%s", strerror(errno));
			goto done;
		}
	}
	head = malloc(DETECT_BYTES);
	size_t hn = head ? fread(head, 1, DETECT_BYTES, fp) : 0;
	if (!head || fseek(fp, 0, SEEK_SET)) {
		snprintf(err, errlen, "%s", head ? strerror(errno) : "out of memory");
		goto done;
	}
	in.f = force ? force : fw_ingest_detect(head, hn, why, sizeof why);
	if (!in.f && hn == DETECT_BYTES && !memchr(head, '\n', hn)) {
		/* a first line longer than the window: read all of it */
		char *line = NULL;
		size_t cap = 0;
		ssize_t n = getline(&line, &cap, fp);
		if (n > 0)
			in.f = fw_ingest_detect(line, (size_t)n, why, sizeof why);
		free(line);
		if (fseek(fp, 0, SEEK_SET)) {
			snprintf(err, errlen, "%s", strerror(errno));
			goto done;
		}
	}
	*fmt = in.f;
	if (in.f == FW_FMT_UNKNOWN) {
		rc = hn ? 1 : 0;
		if (hn)
			snprintf(err, errlen, "unknown format: %s", why);
		goto done;
	}
	if (in.f == FW_FMT_FLYWHEEL)
		rc = do_flywheel(&in, path, buf, len, err, errlen);
	else if (in.f == FW_FMT_CLAUDE_CODE)
		rc = do_claude(&in, fp);
	else if (in.f == FW_FMT_CODEX)
		rc = do_codex(&in, fp);
	else if (in.f == FW_FMT_OTEL)
		rc = do_otel(&in, fp, first_line_is_json(fp, head, hn));
	else if (in.f != FW_FMT_SWE_AGENT && in.f != FW_FMT_MINI_SWE_AGENT &&
		 first_line_is_json(fp, head, hn))
		rc = do_lines(&in, fp);
	else
		rc = do_document(&in, fp);
	if (rc == 0 && ferror(fp)) {
		snprintf(err, errlen, "read error");
		rc = -1;
	} else if (rc < 0 && !err[0]) {
		snprintf(err, errlen, "%s", strerror(errno));
	}
done:
	free(head);
	if (fp && fp != stdin)
		fclose(fp);
	free(buf);
	json_decref(in.warned);
	return rc;
}
