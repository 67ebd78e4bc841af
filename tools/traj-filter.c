/*
 * traj-filter — select, dedupe, sample, split and decontaminate record
 * streams.  See traj-filter(1).
 *
 * Each record goes through: --shard, the -e expressions (--invert),
 * --created-after/--created-before, --dedup, --decontam, then --sample, and
 * is written to -o or to its --split file.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_cli.h"
#include "fw_decontam.h"
#include "fw_expr.h"
#include "fw_history.h"
#include "fw_select.h"
#include "fw_mp.h"
#include "fw_stream.h"

static const char usage_text[] =
	"usage: traj-filter [-e EXPR]... [--invert] [--dedup[=PATH]] [--sample N] [--seed S]\n"
	"                   [--split NAME=FRAC,... -o PREFIX] [--decontam FILE] [--shard K/N]\n"
	"                   [--created-after DATE] [--created-before DATE]\n"
	"                   [-o OUT] [-z] [-q | -v] [--skip-bad] [--progress] [FILE...]\n";

static const struct fw_opt_doc options[] = {
	{ "-e EXPR", "keep the records for which EXPR is true (all of them, when repeated)" },
	{ "--invert", "keep the records the expressions do not keep" },
	{ "--dedup[=PATH]", "drop records whose id (or value at PATH) was seen before" },
	{ "--sample N", "keep N records (or a fraction 0..1) drawn at random" },
	{ "--seed S", "seed of --sample and --split" },
	{ "--split NAME=FRAC,...", "write each record to one of the splits PREFIX.NAME.msgpack" },
	{ "-o PREFIX", "with --split: the splits' file prefix" },
	{ "--decontam FILE", "drop records that share text with the eval items in FILE" },
	{ "--shard K/N", "keep the records whose id hashes to K modulo N" },
	{ "--created-after DATE", "keep the records created after DATE" },
	{ "--created-before DATE", "keep the records created before DATE" },
	{ "-o OUT", "write to OUT instead of standard output" },
	{ "-z", "compress the output with zstd" },
	{ "-q", "no summary lines on standard error" },
	{ "-v", "explain every record decontamination drops" },
	{ "--skip-bad", "skip top-level values that are not maps, and count them" },
	{ "--progress", "a progress meter on standard error even when it is not a terminal" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

#define MAX_EXPRS 64
#define MAX_SPLITS 32
#define MAX_DECONTAM 16
#define SHOW_DROPS 10 /* decontamination drops explained one by one */

struct split {
	struct fw_writer *w;
	uint64_t n;
};

struct state {
	struct fw_expr *ex[MAX_EXPRS];
	int nex, invert;
	int dedup;
	struct fw_path *dedup_path;
	struct fw_keyset seen;
	uint64_t seed;
	int sample;         /* 0 none, 1 count, 2 fraction */
	uint64_t sample_n;
	double sample_frac;
	struct fw_sample kept; /* --sample N */
	struct split splits[MAX_SPLITS];
	char *names[MAX_SPLITS]; /* the splits' names, cumulative fractions */
	double upto[MAX_SPLITS];
	int nsplits;
	const char *decontam_files[MAX_DECONTAM];
	int ndecontam;
	struct fw_decontam *dc;
	uint64_t shard_k, shard_n;
	struct fw_select_dates dates; /* --created-after/--created-before */
	const char *out;
	int level, quiet, verbose, skip_bad, progress;
	struct fw_writer *w;
	struct fw_buf msg;
	/* counts */
	uint64_t nin, nexpr, ndup, ncontam, nout, order, nundated, nolder;
};

/* ---- output ------------------------------------------------------------------- */

static int emit(struct state *st, const uint8_t *p, size_t n)
{
	struct fw_writer *w = st->w;
	if (st->nsplits) {
		int i = fw_select_split((struct fw_mpv){p, n}, st->upto, st->nsplits);

		w = st->splits[i].w;
		st->splits[i].n++;
	}
	st->nout++;
	if (fw_writer_put(w, p, n) < 0) {
		if (errno != EPIPE)
			fw_warn("%s", fw_writer_error(w));
		return -1;
	}
	return 0;
}

/* ---- per record ------------------------------------------------------------ */

static int one(struct state *st, struct fw_mpv v, const char *file, uint64_t index,
	       uint64_t offset)
{
	st->nin++;
	int ok = 1;
	for (int i = 0; i < st->nex && ok; i++)
		ok = fw_expr_test(st->ex[i], v);
	if (ok == st->invert)
		return 0;
	int dated = fw_select_dated(&st->dates, v);
	if (dated <= 0) {
		/* outside the dates, or without a date */
		*(dated ? &st->nundated : &st->nolder) += 1;
		return 0;
	}
	st->nexpr++;
	if (st->dedup) {
		struct fw_mpv key = v;
		if (!st->dedup_path || fw_path_get(st->dedup_path, v, &key)) {
			int r = fw_keyset_add(&st->seen, key.p, key.n);
			if (r < 0) {
				fw_warn("out of memory");
				return -1;
			}
			if (r == 0) {
				st->ndup++;
				return 0;
			}
		}
	}
	if (st->dc) {
		struct fw_decontam_hit hit;
		if (fw_decontam_check_record(st->dc, v, &hit)) {
			st->ncontam++;
			if (!st->quiet && (st->verbose || st->ncontam <= SHOW_DROPS)) {
				fw_buf_reset(&st->msg);
				fw_select_hit_text(&st->msg, v, &hit, st->decontam_files);
				fw_warn_rec(file, index, offset, "%s",
					    st->msg.p ? (char *)st->msg.p : "");
			}
			return 0;
		}
	}
	if (st->sample == 1) {
		if (fw_sample_offer(&st->kept, fw_select_key(v, st->seed), v) < 0) {
			fw_warn("out of memory");
			return -1;
		}
		return 0;
	}
	if (st->sample == 2) {
		if (fw_select_unit(fw_select_key(v, st->seed)) >= st->sample_frac)
			return 0;
	}
	return emit(st, v.p, v.n);
}

/* ---- decontamination sources ------------------------------------------------ */

/* Loads --decontam FILE number f and says what it added.  0 or -1
 * (reported). */
static int load_decontam(struct state *st, int f, const char *path)
{
	struct fw_select_eval ev;
	char err[1024];

	if (fw_select_eval_load(st->dc, f, path, &ev, err, sizeof err) < 0) {
		fw_warn("%s", err);
		return -1;
	}
	if (!st->quiet) {
		fw_warn("decontam: %s: %llu text%s, %llu %u-grams (%llu new)", path,
			(unsigned long long)ev.texts, ev.texts == 1 ? "" : "s",
			(unsigned long long)ev.grams, FW_DECONTAM_N, (unsigned long long)ev.added);
		/* A short item cannot be matched: say so rather than let it pass
		 * for clean. */
		if (ev.shorts)
			fw_warn("decontam: %s: %llu text%s shorter than %u words, not checked", path,
				(unsigned long long)ev.shorts, ev.shorts == 1 ? "" : "s", FW_DECONTAM_N);
	}
	return 0;
}

/* ---- options ------------------------------------------------------------------ */

enum {
	OPT_INVERT = 256, OPT_DEDUP, OPT_SAMPLE, OPT_SEED, OPT_SPLIT, OPT_DECONTAM, OPT_SHARD,
	OPT_SKIP_BAD, OPT_PROGRESS, OPT_VERSION, OPT_AFTER, OPT_BEFORE,
};

/* The record loop's call: one() with the record's place; > 0 never. */
static int each_one(struct fw_each *e, const struct fw_rec *rec, const char *file)
{
	return one(e->arg, rec->v, file, rec->index, rec->offset) < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
	fw_cli_init("traj-filter");
	fw_usage_init(usage_text, options);
	static const struct option longopts[] = {
		{"expr", required_argument, NULL, 'e'},
		{"invert", no_argument, NULL, OPT_INVERT},
		{"dedup", optional_argument, NULL, OPT_DEDUP},
		{"sample", required_argument, NULL, OPT_SAMPLE},
		{"seed", required_argument, NULL, OPT_SEED},
		{"split", required_argument, NULL, OPT_SPLIT},
		{"decontam", required_argument, NULL, OPT_DECONTAM},
		{"shard", required_argument, NULL, OPT_SHARD},
		{"created-after", required_argument, NULL, OPT_AFTER},
		{"created-before", required_argument, NULL, OPT_BEFORE},
		{"output", required_argument, NULL, 'o'},
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"skip-bad", no_argument, NULL, OPT_SKIP_BAD},
		{"progress", no_argument, NULL, OPT_PROGRESS},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{NULL, 0, NULL, 0},
	};
	static struct state st;
	st.level = -1;
	const char *exprs[MAX_EXPRS];
	char *split_spec = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "e:o:zqvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'e':
			if (st.nex == MAX_EXPRS)
				return fw_usage_fail("too many expressions (at most %s)", "64");
			exprs[st.nex++] = optarg;
			break;
		case OPT_INVERT: st.invert = 1; break;
		case OPT_DEDUP:
		{
			char err[256];
			st.dedup = 1;
			fw_path_free(st.dedup_path);
			if (!(st.dedup_path = fw_path_parse(optarg ? optarg : ".id", err, sizeof err)))
				return fw_usage_fail("--dedup: %s", err);
			break;
		}
		case OPT_SAMPLE:
			if (strchr(optarg, '.')) {
				if (fw_parse_double(optarg, &st.sample_frac) < 0 ||
				    !(st.sample_frac >= 0 && st.sample_frac <= 1))
					return fw_usage_fail("bad sample '%s' (a count, or a fraction 0..1)",
							   optarg);
				st.sample = 2;
			} else {
				if (fw_parse_u64(optarg, &st.sample_n, 1) < 0 ||
				    st.sample_n > (1ULL << 32))
					return fw_usage_fail("bad sample '%s' (a count, or a fraction 0..1)",
							   optarg);
				st.sample = 1;
			}
			break;
		case OPT_SEED:
			if (fw_parse_u64(optarg, &st.seed, 0) < 0)
				return fw_usage_fail("bad seed '%s'", optarg);
			break;
		case OPT_SPLIT: split_spec = optarg; break;
		case OPT_DECONTAM:
			if (st.ndecontam == MAX_DECONTAM)
				return fw_usage_fail("too many --decontam files (at most %s)", "16");
			st.decontam_files[st.ndecontam++] = optarg;
			break;
		case OPT_SHARD:
			if (fw_parse_shard(optarg, &st.shard_k, &st.shard_n) < 0)
				return fw_usage_fail("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case OPT_AFTER:
		case OPT_BEFORE:
			if (fw_time_parse(optarg, strlen(optarg), c == OPT_AFTER ? &st.dates.after : &st.dates.before))
				return fw_usage_fail("bad date '%s' (want ISO 8601: 2024-03-01 or "
						   "2024-03-01T12:00:00Z)", optarg);
			*(c == OPT_AFTER ? &st.dates.has_after : &st.dates.has_before) = 1;
			break;
		case 'o': st.out = optarg; break;
		case 'z': st.level = 3; break;
		case 'q': st.quiet = 1; break;
		case 'v': st.verbose = 1; break;
		case OPT_SKIP_BAD: st.skip_bad = 1; break;
		case OPT_PROGRESS: st.progress = 1; break;
		case 'h': return fw_help_exit();
		case OPT_VERSION: return fw_version_exit();
		default: return fw_usage_exit();
		}
	}
	for (int i = 0; i < st.nex; i++) {
		char err[512];
		size_t col;
		if (!(st.ex[i] = fw_expr_parse(exprs[i], err, sizeof err, &col))) {
			fw_warn("-e '%s': %s", exprs[i], err);
			if (col) {
				/* Point at the column under the expression. */
				fprintf(stderr, "  %s\n  %*s^\n", exprs[i], (int)col - 1, "");
			}
			return FW_EXIT_USAGE;
		}
	}
	if (split_spec) {
		if (!st.out)
			return fw_usage_fail("--split needs -o PREFIX%s", "");
		char *copy = strdup(split_spec);
		if (!copy || (st.nsplits = fw_select_parse_splits(copy, st.names, st.upto,
								   MAX_SPLITS)) < 0)
			return fw_usage_fail("bad split '%s' (want NAME=FRAC,... with fractions adding up to 1)",
					   split_spec);
	}
	if (st.sample == 1 && fw_sample_init(&st.kept, st.sample_n) < 0) {
		fw_warn("out of memory");
		return FW_EXIT_DATA;
	}
	if (st.ndecontam) {
		if (!(st.dc = fw_decontam_new(FW_DECONTAM_N))) {
			fw_warn("out of memory");
			return FW_EXIT_DATA;
		}
		for (int i = 0; i < st.ndecontam; i++)
			if (load_decontam(&st, i, st.decontam_files[i]) < 0)
				return FW_EXIT_DATA;
	}

	/* Open the outputs. */
	char err[512];
	int status = 0;
	if (st.nsplits) {
		for (int i = 0; i < st.nsplits; i++) {
			char name[4096];
			snprintf(name, sizeof name, "%s.%s.msgpack%s", st.out, st.names[i],
				 st.level > 0 ? ".zst" : "");
			if (!(st.splits[i].w = fw_writer_open(name, st.level > 0 ? st.level : 0, err,
							      sizeof err))) {
				fw_warn("%s", err);
				status = FW_EXIT_DATA;
				/* No split file appears unless all of them can. */
				for (int k = 0; k < i; k++) {
					fw_writer_abort(st.splits[k].w);
					st.splits[k].w = NULL;
				}
				goto done;
			}
		}
	} else if (!(st.w = fw_writer_open(st.out, st.level, err, sizeof err))) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}

	struct fw_each e = {
		.skip_bad = st.skip_bad, .progress = st.progress,
		.shard_k = st.shard_k, .shard_n = st.shard_n, .arg = &st,
	};
	if (fw_each_record(&e, argc, argv, optind, each_one) != FW_EXIT_OK)
		status = FW_EXIT_DATA;
	int stop = e.stopped;
	if (st.sample == 1 && !stop) {
		fw_sample_sort(&st.kept);
		for (uint64_t i = 0; i < st.kept.n; i++) {
			if (emit(&st, st.kept.r[i].p, st.kept.r[i].n) < 0) {
				status = FW_EXIT_DATA;
				break;
			}
		}
	}
	if (st.ndecontam && !st.quiet) {
		fw_warn("decontam: dropped %llu of %llu record%s sharing a %u-gram with %s%s",
			(unsigned long long)st.ncontam, (unsigned long long)(st.nexpr - st.ndup),
			st.nexpr - st.ndup == 1 ? "" : "s", FW_DECONTAM_N, st.decontam_files[0],
			st.ndecontam > 1 ? " and others" : "");
		if (!st.verbose && st.ncontam > SHOW_DROPS)
			fw_warn("decontam: %llu more drops not shown",
				(unsigned long long)(st.ncontam - SHOW_DROPS));
	}
	if ((st.dates.has_after || st.dates.has_before) && !st.quiet && (st.nolder || st.nundated))
		fw_warn("created: dropped %llu record%s outside the dates, %llu without a created date",
			(unsigned long long)st.nolder, st.nolder == 1 ? "" : "s",
			(unsigned long long)st.nundated);
	if (st.dedup && !st.quiet && st.ndup)
		fw_warn("dedup: dropped %llu duplicate%s", (unsigned long long)st.ndup,
			st.ndup == 1 ? "" : "s");
done:
	if (st.nsplits) {
		for (int i = 0; i < st.nsplits; i++) {
			if (!st.splits[i].w)
				continue;
			if (fw_writer_close(st.splits[i].w, err, sizeof err) < 0) {
				fw_warn("%s", err);
				status = FW_EXIT_DATA;
			}
		}
		if (!status && !st.quiet) {
			for (int i = 0; i < st.nsplits; i++)
				fw_warn("split: %s: %llu record%s", st.names[i],
					(unsigned long long)st.splits[i].n, st.splits[i].n == 1 ? "" : "s");
		}
	} else if (st.w && fw_writer_close(st.w, err, sizeof err) < 0) {
		if (errno != EPIPE)
			fw_warn("%s", err);
		status = FW_EXIT_DATA;
	}
	fw_sample_release(&st.kept);
	for (int i = 0; i < st.nex; i++)
		fw_expr_free(st.ex[i]);
	fw_path_free(st.dedup_path);
	fw_keyset_release(&st.seen);
	fw_decontam_free(st.dc);
	fw_buf_release(&st.msg);
	if (fw_close_stdout() < 0 && !status)
		status = FW_EXIT_DATA;
	return status;
}
