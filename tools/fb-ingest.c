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
#include <sys/stat.h>

#include "fw_base.h"
#include "fw_cli.h"
#include "fw_ingest.h"
#include "fw_json.h"
#include "fw_mp.h"
#include "fw_redact.h"
#include "fw_stream.h"

static const char usage_text[] =
	"usage: fb-ingest [--format F] [--model NAME] [--meta KEY=VALUE]... [--feedback FILE]...\n"
	"                 [--rating-scale S] [--orphans FILE] [--no-redact] [--strict] [-q] [-z]\n"
	"                 [-o OUT] [--shard K/N] [--progress] [LOG...]\n";

static const struct fw_opt_doc options[] = {
	{ "--format F", "read every LOG as F: openai-chat, openai-responses, anthropic, claude-code," },
	{ "", "sharegpt, swe-agent, mini-swe-agent, openhands, codex, otel or flywheel" },
	{ "--model NAME", "set the model of records that name none" },
	{ "--meta KEY=VALUE", "set meta.KEY of every record" },
	{ "--feedback FILE", "read feedback events from FILE" },
	{ "--rating-scale S", "numeric ratings of the feedback files are on scale thumbs, stars or score" },
	{ "--orphans FILE", "write feedback events that name no written trajectory to FILE" },
	{ "--no-redact", "leave secrets in" },
	{ "--strict", "stop at the first bad line, after writing every record before it" },
	{ "-q", "no summary" },
	{ "-z", "compress the output with zstd" },
	{ "-o OUT", "write to OUT instead of standard output" },
	{ "--shard K/N", "write only the trajectories whose id hashes to K modulo N" },
	{ "--progress", "a meter of records written and log bytes read on standard error" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

struct state {
	enum fw_fmt force;
	const char *model; /* --model: for records that name none */
	json_t *meta;      /* --meta: keys records do not have */
	int strict, quiet, redact;
	struct fw_redact *rd;
	struct fw_feedback *fb;
	struct fw_writer *w;
	struct fw_buf mp;
	json_t *seen; /* ids written so far */
	json_t *scales; /* per feedback file: "FILE: SCALE scale (WHY)" */
	struct fw_ingest_tally n;
	struct fw_progress prog;
	uint64_t written, bytes_in; /* records out; bytes of the logs read */
	uint64_t shard_k, shard_n;  /* --shard; shard_n == 0: every trajectory */
	int stop;   /* --strict saw a bad line */
	int fatal;  /* output failed: stop everything */
	int status;
};

static int fb_bad_line(void *ctx, const char *file, long line, const char *why)
{
	struct state *st = ctx;
	fw_warn("%s: line %ld: %s", file, line, why);
	st->n.fb_bad++;
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
	const char *src;
	int rc = -1;

	if (fw_ingest_finish(traj, file, line, st->model, st->meta))
		goto out;
	const char *id = json_string_value(json_object_get(traj, "id"));
	json_t *meta = json_object_get(traj, "meta");
	if (json_object_get(st->seen, id)) {
		st->n.dups[f]++;
		rc = 0;
		goto out;
	}
	json_object_set_new(st->seen, id, json_true());
	if ((src = json_string_value(json_object_get(meta, "source_id"))) &&
	    fw_feedback_join(st->fb, src, traj) < 0)
		goto out;
	if (fw_feedback_join(st->fb, id, traj) < 0)
		goto out;
	if (st->shard_n && fw_hash64(id, strlen(id)) % st->shard_n != st->shard_k) {
		/* another shard's: its feedback is joined all the same, so
		 * --orphans keeps meaning "no trajectory" */
		rc = 0;
		goto out;
	}
	if (st->redact && fw_ingest_redact(traj, st->rd, &st->n.red) < 0)
		goto out;
	if (put_json(st, st->w, traj))
		goto out;
	st->n.recs[f]++;
	fw_progress_tick(&st->prog, ++st->written, st->bytes_in);
	rc = 0;
out:
	if (rc) {
		st->status = FW_EXIT_DATA;
		st->fatal = 1;
	}
	json_decref(traj);
	return rc;
}

/* The sink of fw_ingest_file() for one file. */
struct file_sink {
	struct state *st;
	const char *name;
};

static int on_traj(void *ctx, enum fw_fmt f, json_t *traj, long line)
{
	struct file_sink *fs = ctx;
	return emit(fs->st, f, traj, fs->name, line);
}

static int on_raw(void *ctx, const void *p, size_t n)
{
	struct file_sink *fs = ctx;

	if (fw_writer_put(fs->st->w, p, n)) {
		fw_warn("write error: %s", fw_writer_error(fs->st->w));
		fs->st->status = FW_EXIT_DATA;
		fs->st->fatal = 1;
		return -1;
	}
	return 0;
}

static int on_bad(void *ctx, enum fw_fmt f, const char *where, const char *why)
{
	struct file_sink *fs = ctx;
	struct state *st = fs->st;

	fw_progress_pause(&st->prog); /* the meter redraws itself on the next record */
	fw_warn("%s: %s: %s", fs->name, where, why);
	st->n.bad[f]++;
	if (st->strict) {
		st->stop = 1;
		st->status = FW_EXIT_DATA;
	}
	return st->strict;
}

static int on_warn(void *ctx, enum fw_fmt f, const char *where, const char *msg)
{
	struct file_sink *fs = ctx;

	(void)f;
	fw_progress_pause(&fs->st->prog);
	fw_warn("%s: %s: %s", fs->name, where, msg);
	return 0;
}

/* Ingests one log.  Returns 0, or -1 when output failed. */
static int ingest_file(struct state *st, const char *path)
{
	struct file_sink fs = {.st = st, .name = strcmp(path, "-") ? path : "<stdin>"};
	struct fw_ingest_sink sink = {.traj = on_traj, .raw = on_raw, .bad = on_bad, .ctx = &fs};
	enum fw_fmt f;
	char err[512];

	int rc = fw_ingest_file_ex(path, st->force, &sink, on_warn, &f, err, sizeof err);
	struct stat sb;
	if (strcmp(path, "-") && stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
		st->bytes_in += (uint64_t)sb.st_size;
	fw_progress_tick(&st->prog, st->written, st->bytes_in);
	if (f)
		st->n.files[f]++;
	if (rc != 0) {
		fw_warn("%s: %s", fs.name, err);
		st->status = FW_EXIT_DATA;
	}
	return st->fatal ? -1 : 0;
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
		fw_ingest_redact(rec, o->st->rd, &o->st->n.red);
	return put_json(o->st, o->w, rec);
}

static void summary(struct state *st, long orphans)
{
	struct fw_buf b = { 0 };

	if (fw_ingest_summary(&b, fw_prog, &st->n, st->fb, st->scales, orphans, st->redact))
		fw_warn("out of memory");
	else
		fwrite(b.p, 1, b.n, stderr);
	fw_buf_release(&b);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"format", required_argument, NULL, 'f'},
		{"model", required_argument, NULL, 'M'},
		{"meta", required_argument, NULL, 'm'},
		{"feedback", required_argument, NULL, 'F'},
		{"orphans", required_argument, NULL, 'O'},
		{"rating-scale", required_argument, NULL, 'r'},
		{"no-redact", no_argument, NULL, 'R'},
		{"strict", no_argument, NULL, 'S'},
		{"quiet", no_argument, NULL, 'q'},
		{"progress", no_argument, NULL, 'P'},
		{"shard", required_argument, NULL, 'K'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct state st = {.redact = 1, .meta = json_object(), .scales = json_array()};
	enum fw_rating_scale scale = FW_SCALE_AUTO;
	const char *out = NULL, *orphans = NULL;
	const char *fbfiles[argc + 1];
	int nfb = 0, level = -1, progress = 0, c;
	char err[512];

	fw_cli_init("fb-ingest");
	fw_usage_init(usage_text, options);
	while ((c = getopt_long(argc, argv, "f:o:zqh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			st.force = fw_fmt_from_name(optarg);
			if (!st.force) {
				fw_warn("unknown format '%s'", optarg);
				fw_usage(stderr);
				return FW_EXIT_USAGE;
			}
			break;
		case 'M':
			if (!*optarg) {
				fw_warn("--model needs a name");
				fw_usage(stderr);
				return FW_EXIT_USAGE;
			}
			st.model = optarg;
			break;
		case 'm': {
			const char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg) {
				fw_warn("--meta '%s': not KEY=VALUE", optarg);
				fw_usage(stderr);
				return FW_EXIT_USAGE;
			}
			char key[128];
			snprintf(key, sizeof key, "%.*s", (int)(eq - optarg), optarg);
			if (!st.meta || json_object_set_new(st.meta, key, json_string(eq + 1))) {
				fw_warn("--meta '%s': not valid UTF-8", optarg);
				return FW_EXIT_USAGE;
			}
			break;
		}
		case 'F': fbfiles[nfb++] = optarg; break;
		case 'O': orphans = optarg; break;
		case 'r':
			scale = fw_rating_scale_from_name(optarg);
			if (!scale) {
				fw_warn("unknown rating scale '%s'", optarg);
				fw_usage(stderr);
				return FW_EXIT_USAGE;
			}
			break;
		case 'R': st.redact = 0; break;
		case 'S': st.strict = 1; break;
		case 'q': st.quiet = 1; break;
		case 'P': progress = 1; break;
		case 'K':
			if (fw_parse_shard(optarg, &st.shard_k, &st.shard_n) < 0)
				return fw_usage_fail("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case 'o': out = optarg; break;
		case 'z': level = 3; break;
		case 'h': return fw_help_exit();
		case 'V': return fw_version_exit();
		default: return fw_usage_exit();
		}
	}
	st.status = FW_EXIT_DATA;
	if (st.redact && !(st.rd = fw_redact_new(err, sizeof err))) {
		fw_warn("%s", err);
		goto done;
	}
	st.fb = fw_feedback_new();
	st.seen = json_object();
	if (!st.fb || !st.seen || !st.scales) {
		fw_warn("out of memory");
		goto done;
	}
	fw_feedback_set_scale(st.fb, scale);
	for (int i = 0; i < nfb; i++) {
		int rc = fw_feedback_load(st.fb, fbfiles[i], fb_bad_line, &st, err, sizeof err);
		if (rc < 0)
			fw_warn("%s: %s", fbfiles[i], err);
		if (rc)
			goto done; /* nothing written yet */
		char why[200], line[600];
		enum fw_rating_scale s = fw_feedback_scale(st.fb, why, sizeof why);
		snprintf(line, sizeof line, "%s: %s scale (%s)", fbfiles[i], fw_rating_scale_name(s), why);
		json_array_append_new(st.scales, json_string(line));
	}
	if (!(st.w = fw_writer_open(out, level, err, sizeof err))) {
		fw_warn("%s", err);
		goto done;
	}
	st.status = FW_EXIT_OK;
	fw_progress_start(&st.prog, progress);
	struct fw_operands ops;
	fw_operands_init(&ops, argc, argv, optind);
	for (const char *file; st.prog.on && (file = fw_operands_next(&ops));)
		fw_progress_expect(&st.prog, file);
	fw_operands_init(&ops, argc, argv, optind);
	for (const char *file; !st.stop && (file = fw_operands_next(&ops));)
		if (ingest_file(&st, file))
			break;

	struct orphan_out oo = {.st = &st};
	if (orphans && !(oo.w = fw_writer_open(orphans, -1, err, sizeof err))) {
		fw_warn("%s", err);
		st.status = FW_EXIT_DATA;
	}
	long norph = fw_feedback_orphans(st.fb, put_orphan, &oo);
	if (norph < 0)
		st.status = FW_EXIT_DATA;
	struct fw_feedback_stats fbs;
	fw_feedback_stats(st.fb, &fbs);
	if (nfb && !fbs.joined && st.n.fb_bad) {
		/* every rating lost, some of them to bad lines: not a success */
		fw_warn("feedback: no event was joined to a trajectory and %lu line%s skipped",
			st.n.fb_bad, st.n.fb_bad == 1 ? " was" : "s were");
		st.status = FW_EXIT_DATA;
	}
	if (oo.w && fw_writer_close(oo.w, err, sizeof err)) {
		fw_warn("%s", err);
		st.status = FW_EXIT_DATA;
	}
	if (fw_writer_close(st.w, err, sizeof err)) {
		fw_warn("%s", err);
		st.status = FW_EXIT_DATA;
	}
	fw_progress_end(&st.prog);
	if (!st.quiet)
		summary(&st, norph);
done:
	fw_redact_free(st.rd);
	fw_feedback_free(st.fb);
	json_decref(st.seen);
	json_decref(st.meta);
	json_decref(st.scales);
	fw_buf_release(&st.mp);
	return st.status;
}
