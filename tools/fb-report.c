/*
 * fb-report — what users tell us: failure categories of thumbs-down
 * trajectories and A/B verdicts between models.  See fb-report(1).
 *
 * Options and the record loop; the counting and the statistics are
 * fw_fbreport's.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_cli.h"
#include "fw_fbreport.h"
#include "fw_judge.h"
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

/* Writes the finished report to out (NULL or "-": standard output): its
 * records, or the text table.  0, or -1 when it was said why not. */
static int write_report(const struct fw_fbreport *R, int records, const char *out, int level)
{
	char err[512];

	if (records) {
		struct fw_writer *w = fw_writer_open(out, level, err, sizeof err);

		if (!w) {
			fw_warn("%s", err);
			return -1;
		}
		if (fw_fbreport_pack(R, w, err, sizeof err) < 0) {
			if (errno != EPIPE)
				fw_warn("%s", err);
			fw_writer_abort(w);
			return -1;
		}
		if (fw_writer_close(w, err, sizeof err) < 0) {
			if (errno != EPIPE)
				fw_warn("%s", err);
			return -1;
		}
		return 0;
	}
	struct fw_buf text = { 0 };
	FILE *f = stdout;
	int rc = 0;

	if (fw_fbreport_table(R, &text) < 0) {
		fw_warn("out of memory");
		rc = -1;
	} else if (out && strcmp(out, "-") && !(f = fopen(out, "w"))) {
		fw_warn("%s: %s", out, strerror(errno));
		rc = -1;
	} else {
		fwrite(text.p, 1, text.n, f);
		if (f != stdout && fclose(f) != 0) {
			fw_warn("%s: %s", out, strerror(errno));
			rc = -1;
		}
	}
	fw_buf_release(&text);
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
	char err[512];

	if (fw_fbreport_add(e->arg, rec->v, err, sizeof err) == 0)
		return 0;
	if (errno == ENOMEM)
		fw_warn("%s", err);
	else
		fw_warn_rec(file, rec->index, rec->offset, "%s", err);
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
	struct fw_fbreport_conf conf = { .by_src = ".model" };
	struct fw_fbreport *R;
	int records = 0;
	const char *judge_labels = NULL;
	const char *out = NULL;
	int level = -1, skip_bad = 0, progress = 0, c;
	uint64_t u, shard_k = 0, shard_n = 0;
	char err[512];
	while ((c = getopt_long(argc, argv, "o:zh", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_BY: conf.by_src = optarg; break;
		case OPT_PAIRED: conf.paired_src = optarg; break;
		case OPT_RECORDS: records = 1; break;
		case OPT_SEED:
			if (fw_parse_u64(optarg, &conf.seed, 0) < 0)
				return fw_usage_fail("bad seed '%s'", optarg);
			break;
		case OPT_RESAMPLES:
			if (fw_parse_u64(optarg, &u, 1) < 0 || u < 100 || u > 10000000)
				return fw_usage_fail("bad resample count '%s' (100..10000000)", optarg);
			conf.resamples = (unsigned)u;
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
		int js = judge_main(judge_labels, argc, argv, optind, conf.seed, conf.resamples ? conf.resamples : 2000);
		if (fw_close_stdout() < 0)
			js = FW_EXIT_DATA;
		return js;
	}
	if (!(conf.by = fw_path_parse(conf.by_src, err, sizeof err)))
		return fw_usage_fail("--by: %s", err);
	if (conf.paired_src && !(conf.paired_by = fw_path_parse(conf.paired_src, err, sizeof err)))
		return fw_usage_fail("--paired-by: %s", err);
	if (!(R = fw_fbreport_new(&conf, err, sizeof err))) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}

	struct fw_each e = {
		.skip_bad = skip_bad, .progress = progress,
		.shard_k = shard_k, .shard_n = shard_n, .arg = R,
	};
	int status = fw_each_record(&e, argc, argv, optind, each_one);
	if (!e.stopped) {
		if (fw_fbreport_finish(R, err, sizeof err) < 0) {
			fw_warn("%s", err);
			status = FW_EXIT_DATA;
		} else if (write_report(R, records, out, level) < 0) {
			status = FW_EXIT_DATA;
		}
	}
	fw_fbreport_free(R);
	if (fw_close_stdout() < 0 && !status)
		status = FW_EXIT_DATA;
	return status;
}
