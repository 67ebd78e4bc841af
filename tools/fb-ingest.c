/*
 * fb-ingest — product logs and feedback events to `traj` records.
 *
 * Reads the feedback files first (they are joined to trajectories as these
 * stream by), then each log: detects its format, converts each trajectory,
 * gives it a content id, drops duplicates, joins its feedback, redacts it
 * and writes it.  Feedback left over is orphaned: counted, and written with
 * --orphans.  See fb-ingest(1).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_cli.h"
#include "fw_ingest.h"
#include "fw_json.h"
#include "fw_mp.h"
#include "fw_redact.h"
#include "fw_stream.h"

static const char usage_text[] =
	"usage: fb-ingest [--format F] [--feedback FILE]... [--orphans FILE] [--no-redact]\n"
	"                 [--strict] [-q] [-z] [-o OUT] [LOG...]\n"
	"formats: openai-chat openai-responses anthropic claude-code sharegpt swe-agent flywheel\n";

#define DETECT_BYTES (64 << 10)

struct state {
	enum fw_fmt force;
	int strict, quiet, redact;
	struct fw_redact *rd;
	struct fw_feedback *fb;
	struct fw_writer *w;
	struct fw_buf mp;
	json_t *seen; /* ids written so far */
	unsigned long recs[FW_FMT_N], dups[FW_FMT_N], bad[FW_FMT_N];
	unsigned long files[FW_FMT_N];
	unsigned long fb_bad;
	struct fw_redact_counts red;
	int stop;   /* --strict saw a bad line */
	int status;
};

static int bad_line(struct state *st, enum fw_fmt f, const char *file, long line, const char *why)
{
	fw_warn("%s: line %ld: %s", file, line, why);
	st->bad[f]++;
	if (st->strict) {
		st->stop = 1;
		st->status = FW_EXIT_DATA;
	}
	return st->strict;
}

static int fb_bad_line(void *ctx, const char *file, long line, const char *why)
{
	struct state *st = ctx;
	fw_warn("%s: line %ld: %s", file, line, why);
	st->fb_bad++;
	if (st->strict)
		st->status = FW_EXIT_DATA;
	return st->strict;
}

/* Writes one record object.  Returns 0, or -1 after a message. */
static int put_json(struct state *st, struct fw_writer *w, json_t *rec)
{
	struct fw_json_err je;
	size_t used;
	char *s = json_dumps(rec, JSON_COMPACT | JSON_PRESERVE_ORDER);

	if (!s) {
		fw_warn("out of memory");
		return -1;
	}
	st->mp.n = 0;
	int rc = fw_json_to_mp(&st->mp, s, strlen(s), 1, &used, &je);
	free(s);
	if (rc != 1) {
		fw_warn("cannot encode a record: %s", je.msg);
		return -1;
	}
	if (fw_writer_put(w, st->mp.p, st->mp.n)) {
		fw_warn("write error: %s", fw_writer_error(w));
		return -1;
	}
	return 0;
}

/* Finishes and writes one trajectory (takes traj).  Returns 0, or -1 on a
 * fatal error. */
static int emit(struct state *st, enum fw_fmt f, json_t *traj, const char *file, long line)
{
	json_t *meta = json_object_get(traj, "meta");
	const char *src;
	int rc = -1;

	if (!json_is_object(meta)) {
		meta = json_object();
		json_object_set_new(traj, "meta", meta);
	}
	json_object_set_new(meta, "file", json_string(file));
	json_object_set_new(meta, "line", json_integer(line));
	if (!json_string_length(json_object_get(traj, "id")) && fw_ingest_set_id(traj))
		goto out;
	const char *id = json_string_value(json_object_get(traj, "id"));
	if (json_object_get(st->seen, id)) {
		st->dups[f]++;
		rc = 0;
		goto out;
	}
	json_object_set_new(st->seen, id, json_true());
	if ((src = json_string_value(json_object_get(meta, "source_id"))) &&
	    fw_feedback_join(st->fb, src, traj) < 0)
		goto out;
	if (fw_feedback_join(st->fb, id, traj) < 0)
		goto out;
	if (st->redact && fw_ingest_redact(traj, st->rd, &st->red) < 0)
		goto out;
	if (put_json(st, st->w, traj))
		goto out;
	st->recs[f]++;
	rc = 0;
out:
	if (rc)
		st->status = FW_EXIT_DATA;
	json_decref(traj);
	return rc;
}

/* Converts one document; a document that does not convert is a bad line. */
static int convert_one(struct state *st, enum fw_fmt f, const json_t *doc, const char *file,
		       long line)
{
	char err[256];
	json_t *traj = fw_ingest_convert(f, doc, file, err, sizeof err);

	if (!traj) {
		bad_line(st, f, file, line, err);
		return 0;
	}
	return emit(st, f, traj, file, line);
}

/* Claude Code: every line an event; sessions grouped by sessionId. */
static int do_claude(struct state *st, FILE *in, const char *file)
{
	json_t *sessions = json_object(), *order = json_array(), *first = json_object();
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long lineno = 0;
	json_error_t je;
	int rc = 0;

	while (!st->stop && (len = getline(&line, &cap, in)) >= 0) {
		lineno++;
		json_t *e = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, &je);
		if (!json_is_object(e)) {
			char why[200];
			snprintf(why, sizeof why, "%s%s", e ? "not a JSON object" : "invalid JSON: ",
				 e ? "" : je.text);
			json_decref(e);
			bad_line(st, FW_FMT_CLAUDE_CODE, file, lineno, why);
			continue;
		}
		const char *sid = json_string_value(json_object_get(e, "sessionId"));
		if (!sid) {
			json_decref(e); /* summaries and snapshots belong to no turn */
			continue;
		}
		json_t *evs = json_object_get(sessions, sid);
		if (!evs) {
			evs = json_array();
			json_object_set_new(sessions, sid, evs);
			json_array_append_new(order, json_string(sid));
			json_object_set_new(first, sid, json_integer(lineno));
		}
		json_array_append_new(evs, e);
	}
	free(line);
	size_t i;
	json_t *sid;
	json_array_foreach(order, i, sid) {
		const char *s = json_string_value(sid);
		long at = (long)json_integer_value(json_object_get(first, s));
		char err[256];
		if (st->stop)
			break;
		json_t *traj = fw_ingest_claude_session(json_object_get(sessions, s), err, sizeof err);
		if (!traj) {
			char why[320];
			snprintf(why, sizeof why, "session %.40s: %s", s, err);
			bad_line(st, FW_FMT_CLAUDE_CODE, file, at, why);
			continue;
		}
		if (emit(st, FW_FMT_CLAUDE_CODE, traj, file, at)) {
			rc = -1;
			break;
		}
	}
	json_decref(sessions);
	json_decref(order);
	json_decref(first);
	return rc;
}

/* A whole file holding one JSON document (a .traj, or an array). */
static int do_document(struct state *st, enum fw_fmt f, FILE *in, const char *file)
{
	json_error_t je;
	json_t *doc = json_loadf(in, JSON_ALLOW_NUL, &je);
	size_t i;
	json_t *d;
	int rc = 0;

	if (!doc) {
		bad_line(st, f, file, je.line > 0 ? je.line : 1, je.text);
		return 0;
	}
	if (json_is_array(doc)) {
		json_array_foreach(doc, i, d) {
			if (st->stop || (rc = convert_one(st, f, d, file, 1)))
				break;
		}
	} else {
		rc = convert_one(st, f, doc, file, 1);
	}
	json_decref(doc);
	return rc;
}

/* JSON Lines: one document per line. */
static int do_lines(struct state *st, enum fw_fmt f, FILE *in, const char *file)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long lineno = 0;
	json_error_t je;
	int rc = 0;

	while (!st->stop && (len = getline(&line, &cap, in)) >= 0) {
		lineno++;
		ssize_t k = 0;
		while (k < len && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r' || line[k] == '\n'))
			k++;
		if (k == len)
			continue;
		json_t *doc = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, &je);
		if (!doc) {
			char why[200];
			snprintf(why, sizeof why, "invalid JSON: %s", je.text);
			bad_line(st, f, file, lineno, why);
			continue;
		}
		rc = convert_one(st, f, doc, file, lineno);
		json_decref(doc);
		if (rc)
			break;
	}
	free(line);
	return rc;
}

/* Flywheel records: traj records are joined, redacted and deduplicated
 * again; other records pass through untouched. */
static int do_flywheel(struct state *st, const char *path, const char *mem, size_t memlen,
		       const char *file)
{
	char err[256] = "";
	struct fw_reader *r = mem ? fw_reader_memopen(mem, memlen, file, NULL)
				  : fw_reader_open(path, NULL, err, sizeof err);
	struct fw_rec rec;
	struct fw_buf js = {0};
	int rc = 0, n;

	if (!r) {
		fw_warn("%s", err[0] ? err : "out of memory");
		st->status = FW_EXIT_DATA;
		return 0;
	}
	while (!st->stop && (n = fw_reader_next(r, &rec)) != 0) {
		if (n < 0) {
			fw_warn_reader(r);
			st->bad[FW_FMT_FLYWHEEL]++;
			if (st->strict) {
				st->stop = 1;
				st->status = FW_EXIT_DATA;
			}
			if (!fw_reader_recoverable(r))
				break;
			continue;
		}
		struct fw_mpv kind;
		if (fw_mp_get(rec.v, "kind", &kind) != 1 || !fw_mp_str_eq(kind, "traj", 4)) {
			if (fw_writer_put(st->w, rec.v.p, rec.v.n)) {
				fw_warn("write error: %s", fw_writer_error(st->w));
				rc = -1;
				break;
			}
			continue;
		}
		js.n = 0;
		json_error_t je;
		json_t *traj = NULL;
		if (fw_json_from_mp(&js, rec.v, err, sizeof err) == 0)
			traj = json_loadb((const char *)js.p, js.n, JSON_ALLOW_NUL, &je);
		if (!traj) {
			fw_warn_rec(file, rec.index, rec.offset, "%s", err);
			st->bad[FW_FMT_FLYWHEEL]++;
			continue;
		}
		if (emit(st, FW_FMT_FLYWHEEL, traj, file, (long)rec.index + 1)) {
			rc = -1;
			break;
		}
	}
	fw_buf_free(&js);
	fw_reader_close(r);
	return rc;
}

/* Whether the first non-blank line of p is a complete JSON value. */
static int first_line_is_json(const char *p, size_t n)
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
			if (!nl)
				return 0; /* cut by the detection window: undecided */
			json_t *v = json_loadb(p + k, end - k, JSON_ALLOW_NUL, &je);
			json_decref(v);
			return v != NULL;
		}
		i = end + 1;
	}
	return 0;
}

static int ingest_file(struct state *st, const char *path)
{
	const char *name = strcmp(path, "-") ? path : "<stdin>";
	FILE *in = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	char *buf = NULL;
	size_t len = 0;
	char why[256];
	int rc = 0;

	if (!in) {
		fw_warn("%s: %s", path, strerror(errno));
		st->status = FW_EXIT_DATA;
		return 0;
	}
	if (in == stdin || fseek(in, 0, SEEK_CUR) != 0) {
		/* a pipe: keep everything, then read it back from memory */
		FILE *mem = open_memstream(&buf, &len);
		char chunk[65536];
		size_t k;
		while (mem && (k = fread(chunk, 1, sizeof chunk, in)) > 0)
			fwrite(chunk, 1, k, mem);
		if (!mem || fclose(mem)) {
			fw_warn("%s: out of memory", name);
			return -1;
		}
		if (in != stdin)
			fclose(in);
		in = len ? fmemopen(buf, len, "rb") : NULL;
		if (!len) {
			free(buf);
			return 0;
		}
	}
	char *head = malloc(DETECT_BYTES);
	size_t hn = head ? fread(head, 1, DETECT_BYTES, in) : 0;
	if (!head || fseek(in, 0, SEEK_SET)) {
		fw_warn("%s: %s", name, head ? strerror(errno) : "out of memory");
		st->status = FW_EXIT_DATA;
		goto done;
	}
	enum fw_fmt f = st->force;
	if (!f)
		f = fw_ingest_detect(head, hn, why, sizeof why);
	if (f == FW_FMT_UNKNOWN) {
		if (hn == 0)
			goto done; /* an empty log holds no trajectory */
		fw_warn("%s: unknown format: %s", name, why);
		st->status = FW_EXIT_DATA;
		goto done;
	}
	st->files[f]++;
	if (f == FW_FMT_FLYWHEEL)
		rc = do_flywheel(st, path, buf, len, name);
	else if (f == FW_FMT_CLAUDE_CODE)
		rc = do_claude(st, in, name);
	else if (f != FW_FMT_SWE_AGENT && first_line_is_json(head, hn))
		rc = do_lines(st, f, in, name);
	else
		rc = do_document(st, f, in, name);
	if (ferror(in)) {
		fw_warn("%s: read error", name);
		st->status = FW_EXIT_DATA;
	}
done:
	free(head);
	if (in != stdin)
		fclose(in);
	free(buf);
	return rc;
}

struct orphan_out {
	struct state *st;
	struct fw_writer *w;
};

static int put_orphan(void *ctx, json_t *rec)
{
	struct orphan_out *o = ctx;

	if (!o->w)
		return 0;
	if (o->st->redact)
		fw_ingest_redact(rec, o->st->rd, &o->st->red);
	return put_json(o->st, o->w, rec);
}

static void summary(struct state *st, long orphans)
{
	struct fw_feedback_stats fs;
	char line[1024];
	size_t n = 0;
	unsigned long total = 0;

	for (int f = 1; f < FW_FMT_N; f++) {
		if (!st->files[f] && !st->bad[f])
			continue;
		fprintf(stderr, "%s: %s: %lu %s from %lu file%s, %lu duplicates dropped, "
			"%lu skipped\n", fw_prog, fw_fmt_name(f), st->recs[f],
			st->recs[f] == 1 ? "trajectory" : "trajectories", st->files[f],
			st->files[f] == 1 ? "" : "s", st->dups[f], st->bad[f]);
	}
	fw_feedback_stats(st->fb, &fs);
	fprintf(stderr, "%s: feedback: %lu events, %lu joined, %ld orphaned, %lu superseded, "
		"%lu neutral, %lu skipped\n", fw_prog, fs.events, fs.joined, orphans, fs.superseded,
		fs.neutral, st->fb_bad);
	for (int r = 0; r < FW_RD_NRULES; r++) {
		if (!st->red.n[r])
			continue;
		total += st->red.n[r];
		n += (size_t)snprintf(line + n, n < sizeof line ? sizeof line - n : 0, "%s%s %lu",
				      n ? ", " : "", fw_redact_rule_name(r), st->red.n[r]);
	}
	if (st->redact)
		fprintf(stderr, "%s: redactions: %lu%s%s%s\n", fw_prog, total, total ? " (" : "",
			total ? line : "", total ? ")" : "");
	else
		fprintf(stderr, "%s: redaction off\n", fw_prog);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"format", required_argument, NULL, 'f'},
		{"feedback", required_argument, NULL, 'F'},
		{"orphans", required_argument, NULL, 'O'},
		{"no-redact", no_argument, NULL, 'R'},
		{"strict", no_argument, NULL, 'S'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct state st = {.redact = 1};
	const char *out = NULL, *orphans = NULL;
	const char *fbfiles[argc + 1];
	int nfb = 0, level = -1, c;
	char err[512];

	fw_cli_init("fb-ingest");
	while ((c = getopt_long(argc, argv, "f:o:zqh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			st.force = fw_fmt_from_name(optarg);
			if (!st.force) {
				fw_warn("unknown format '%s'", optarg);
				fputs(usage_text, stderr);
				return FW_EXIT_USAGE;
			}
			break;
		case 'F': fbfiles[nfb++] = optarg; break;
		case 'O': orphans = optarg; break;
		case 'R': st.redact = 0; break;
		case 'S': st.strict = 1; break;
		case 'q': st.quiet = 1; break;
		case 'o': out = optarg; break;
		case 'z': level = 3; break;
		case 'h': fputs(usage_text, stdout); return FW_EXIT_OK;
		case 'V': fw_print_version(); return FW_EXIT_OK;
		default: fputs(usage_text, stderr); return FW_EXIT_USAGE;
		}
	}
	st.status = FW_EXIT_DATA;
	if (st.redact && !(st.rd = fw_redact_new(err, sizeof err))) {
		fw_warn("%s", err);
		goto done;
	}
	st.fb = fw_feedback_new();
	st.seen = json_object();
	if (!st.fb || !st.seen) {
		fw_warn("out of memory");
		goto done;
	}
	for (int i = 0; i < nfb; i++) {
		int rc = fw_feedback_load(st.fb, fbfiles[i], fb_bad_line, &st, err, sizeof err);
		if (rc < 0)
			fw_warn("%s: %s", fbfiles[i], err);
		if (rc)
			goto done; /* nothing written yet */
	}
	if (!(st.w = fw_writer_open(out, level, err, sizeof err))) {
		fw_warn("%s", err);
		goto done;
	}
	st.status = FW_EXIT_OK;
	if (optind == argc)
		ingest_file(&st, "-");
	for (int i = optind; i < argc && !st.stop; i++)
		if (ingest_file(&st, argv[i]))
			break;

	struct orphan_out oo = {.st = &st};
	if (orphans && !(oo.w = fw_writer_open(orphans, -1, err, sizeof err))) {
		fw_warn("%s", err);
		st.status = FW_EXIT_DATA;
	}
	long norph = fw_feedback_orphans(st.fb, put_orphan, &oo);
	if (norph < 0)
		st.status = FW_EXIT_DATA;
	if (oo.w && fw_writer_close(oo.w, err, sizeof err)) {
		fw_warn("%s", err);
		st.status = FW_EXIT_DATA;
	}
	if (fw_writer_close(st.w, err, sizeof err)) {
		fw_warn("%s", err);
		st.status = FW_EXIT_DATA;
	}
	if (!st.quiet)
		summary(&st, norph);
done:
	fw_redact_free(st.rd);
	fw_feedback_free(st.fb);
	json_decref(st.seen);
	fw_buf_free(&st.mp);
	return st.status;
}
