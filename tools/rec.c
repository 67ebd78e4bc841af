/*
 * rec — the swiss-army knife for flywheel record streams.
 *
 * Subcommands: cat, json, from-json, head, count, get, stats, sample, split.
 * See rec(1).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_base.h"
#include "fw_cli.h"
#include "fw_json.h"
#include "fw_mp.h"
#include "fw_recsample.h"
#include "fw_recstats.h"
#include "fw_stream.h"

static const char usage_text[] =
	"usage: rec cat [-z] [-l LEVEL] [-o OUT] [FILE...]\n"
	"       rec json [FILE...]\n"
	"       rec from-json [-z] [-o OUT] [FILE...]\n"
	"       rec head [-n N] [FILE...]\n"
	"       rec count [FILE...]\n"
	"       rec get PATH [FILE...]\n"
	"       rec stats [FILE...]\n"
	"       rec sample -n N [--seed S] [FILE...]\n"
	"       rec split --shards N -o PREFIX [-z] [FILE...]\n"
	"Common options: [--skip-bad] [--max-record BYTES] [--shard K/N] [--progress]\n"
	"                [-h | --help] [--version]\n";

static const struct fw_opt_doc options[] = {
	{ "-o OUT", "write to OUT instead of standard output" },
	{ "-z", "compress the output with zstd" },
	{ "-l LEVEL", "zstd level of the output" },
	{ "-n N", "head: the first N records; sample: N records at random" },
	{ "--seed S", "seed of sample" },
	{ "--shards N", "split: the number of shards" },
	{ "-o PREFIX", "split: shard K goes to PREFIX.K.msgpack" },
	{ "--skip-bad", "skip a value that is not a map, count it, and go on" },
	{ "--max-record BYTES", "refuse records larger than BYTES" },
	{ "--shard K/N", "keep only the records whose id hashes to K modulo N" },
	{ "--progress", "a progress line on standard error even when it is not a terminal" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

/* Options shared by the subcommands. */
struct opts {
	const char *out;
	int level; /* -1 auto */
	uint64_t n;
	int have_n;
	uint64_t seed;
	uint64_t shards;
	struct fw_reader_opts ropts;
	struct fw_each each; /* --skip-bad, --progress, --shard: every record loop's */
	char **files;
	int nfiles;
};

/* Runs fn over every record of the inputs with arg as e->arg; returns the
 * exit status (see fw_each_record()). */
static int each_record(struct opts *o, void *arg,
		       int (*fn)(struct fw_each *e, const struct fw_rec *rec, const char *file))
{
	struct fw_each e = o->each;
	e.arg = arg;
	return fw_each_record(&e, o->nfiles, o->files, 0, fn);
}

/* ---- cat, head ------------------------------------------------------------- */

struct cat_arg {
	struct fw_writer *w;
	uint64_t limit; /* 0: none */
};

static int cat_one(struct fw_each *e, const struct fw_rec *rec, const char *file)
{
	struct cat_arg *a = e->arg;
	if (fw_out_put(a->w, rec->v.p, rec->v.n) < 0)
		return -1;
	return a->limit && e->records >= a->limit ? 1 : 0;
}

static int cmd_cat(struct opts *o, uint64_t limit)
{
	if (limit == 0 && o->have_n)
		return 0;
	struct cat_arg a = {fw_out_open(o->out, o->level), limit};
	if (!a.w)
		return FW_EXIT_DATA;
	int st = each_record(o, &a, cat_one);
	return fw_out_close(a.w, st);
}

/* ---- count ----------------------------------------------------------------- */

static int count_one(struct fw_each *e, const struct fw_rec *rec, const char *file)
{
	++*(uint64_t *)e->arg;
	return 0;
}

static int cmd_count(struct opts *o)
{
	uint64_t records = 0;
	int st = each_record(o, &records, count_one);
	printf("%llu\n", (unsigned long long)records);
	return st;
}

/* ---- json, get --------------------------------------------------------------- */

struct json_arg {
	struct fw_textout out;
	struct fw_path *path;
};

static int json_one(struct fw_each *e, const struct fw_rec *rec, const char *file)
{
	struct json_arg *a = e->arg;
	char err[256];
	if (fw_json_line(&a->out.buf, rec->v, a->path, err, sizeof err) < 0) {
		fw_textout_flush(&a->out, 1);
		fw_warn_rec(file, rec->index, rec->offset, "%s", err);
		return -1;
	}
	return fw_textout_flush(&a->out, 0);
}

static int cmd_json(struct opts *o, const char *path)
{
	struct json_arg a = {.path = NULL};
	if (path) {
		char err[256];
		a.path = fw_path_parse(path, err, sizeof err);
		if (!a.path) {
			fw_warn("%s", err);
			return FW_EXIT_USAGE;
		}
	}
	int st = each_record(o, &a, json_one);
	fw_textout_flush(&a.out, 1);
	fw_textout_release(&a.out);
	fw_path_free(a.path);
	return st;
}

/* ---- from-json ----------------------------------------------------------------- */

static int cmd_from_json(struct opts *o)
{
	struct fw_writer *w = fw_out_open(o->out, o->level);
	if (!w)
		return FW_EXIT_DATA;
	return fw_out_close(w, fw_json_records(w, o->nfiles, o->files, 0, o->ropts.max_record,
					   o->each.skip_bad, o->each.progress));
}

/* ---- sample ---------------------------------------------------------------- */

static int sample_one(struct fw_each *e, const struct fw_rec *rec, const char *file)
{
	if (fw_recsample_add(e->arg, rec->v) < 0) {
		fw_warn("out of memory");
		return -1;
	}
	return 0;
}

static int cmd_sample(struct opts *o)
{
	struct fw_recsample *a = fw_recsample_new(o->n, o->seed);
	if (!a) {
		fw_warn("out of memory");
		return FW_EXIT_DATA;
	}
	int st = each_record(o, a, sample_one);
	uint64_t kept = fw_recsample_finish(a);
	struct fw_writer *w = fw_out_open(o->out, o->level);
	if (!w)
		st = FW_EXIT_DATA;
	for (uint64_t i = 0; w && i < kept; i++) {
		struct fw_mpv v = fw_recsample_get(a, i);
		if (fw_writer_put(w, v.p, v.n) < 0) {
			fw_warn("%s", fw_writer_error(w));
			st = FW_EXIT_DATA;
			break;
		}
	}
	fw_recsample_free(a);
	return w ? fw_out_close(w, st) : st;
}

/* ---- split ----------------------------------------------------------------- */

struct split_arg {
	struct fw_writer **w;
	uint64_t n;
};

static int split_one(struct fw_each *e, const struct fw_rec *rec, const char *file)
{
	struct split_arg *a = e->arg;
	return fw_out_put(a->w[fw_shard_hash(rec->v) % a->n], rec->v.p, rec->v.n);
}

static int cmd_split(struct opts *o)
{
	struct split_arg a = {calloc(o->shards, sizeof(struct fw_writer *)), o->shards};
	int st = 0;
	if (!a.w) {
		fw_warn("out of memory");
		return FW_EXIT_DATA;
	}
	int digits = snprintf(NULL, 0, "%llu", (unsigned long long)(o->shards - 1));
	for (uint64_t k = 0; k < o->shards; k++) {
		char name[4096];
		snprintf(name, sizeof name, "%s.%0*llu.msgpack%s", o->out, digits,
			 (unsigned long long)k, o->level > 0 ? ".zst" : "");
		if (!(a.w[k] = fw_out_open(name, o->level > 0 ? o->level : 0))) {
			st = FW_EXIT_DATA;
			break;
		}
	}
	if (!st)
		st = each_record(o, &a, split_one);
	for (uint64_t k = 0; k < o->shards; k++)
		if (a.w[k])
			st = fw_out_close(a.w[k], st);
	free(a.w);
	return st;
}

/* ---- stats ----------------------------------------------------------------- */

static int stats_one(struct fw_each *e, const struct fw_rec *rec, const char *file)
{
	fw_recstats_add(e->arg, rec->v);
	return 0;
}

static int cmd_stats(struct opts *o)
{
	struct fw_recstats *a = fw_recstats_new();
	struct fw_buf out = {0};
	if (!a) {
		fw_warn("out of memory");
		return FW_EXIT_DATA;
	}
	int st = each_record(o, a, stats_one);
	if (fw_recstats_table(a, &out) < 0) {
		fw_warn("out of memory");
		st = FW_EXIT_DATA;
	}
	fwrite(out.p, 1, out.n, stdout);
	fw_buf_release(&out);
	fw_recstats_free(a);
	return st;
}

/* ---- main ------------------------------------------------------------------- */

enum {
	OPT_SEED = 256, OPT_SHARDS, OPT_SHARD, OPT_SKIP_BAD, OPT_MAX_RECORD, OPT_PROGRESS,
	OPT_VERSION,
};

int main(int argc, char **argv)
{
	fw_cli_init("rec");
	fw_usage_init(usage_text, options);
	if (argc < 2)
		return fw_usage_exit();
	const char *cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help"))
		return fw_help_exit();
	if (!strcmp(cmd, "--version"))
		return fw_version_exit();
	static const char *cmds[] = {"cat", "json", "from-json", "head", "count",
				     "get", "stats", "sample", "split"};
	int known = 0;
	for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
		known |= !strcmp(cmd, cmds[i]);
	if (!known)
		return fw_usage_fail("unknown command '%s'", cmd);

	static const struct option longopts[] = {
		{"output", required_argument, NULL, 'o'},
		{"seed", required_argument, NULL, OPT_SEED},
		{"shards", required_argument, NULL, OPT_SHARDS},
		{"shard", required_argument, NULL, OPT_SHARD},
		{"skip-bad", no_argument, NULL, OPT_SKIP_BAD},
		{"max-record", required_argument, NULL, OPT_MAX_RECORD},
		{"progress", no_argument, NULL, OPT_PROGRESS},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{NULL, 0, NULL, 0},
	};
	struct opts o = {.level = -1};
	o.each.ropts = &o.ropts;
	int c;
	uint64_t u;
	/* getopt's own messages name argv[0]: "rec json: unrecognized option" */
	char self[64];
	snprintf(self, sizeof self, "%s %s", fw_prog, cmd);
	argv++;
	argc--;
	argv[0] = self;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:zl:n:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o': o.out = optarg; break;
		case 'z': if (o.level <= 0) o.level = 3; break;
		case 'l':
			if (fw_parse_u64(optarg, &u, 0) < 0 || u < 1 || u > 19)
				return fw_usage_fail("bad level '%s' (1..19)", optarg);
			o.level = (int)u;
			break;
		case 'n':
			if (fw_parse_u64(optarg, &o.n, 0) < 0)
				return fw_usage_fail("bad count '%s'", optarg);
			o.have_n = 1;
			break;
		case OPT_SEED:
			if (fw_parse_u64(optarg, &o.seed, 0) < 0)
				return fw_usage_fail("bad seed '%s'", optarg);
			break;
		case OPT_SHARDS:
			if (fw_parse_u64(optarg, &o.shards, 0) < 0 || o.shards < 1 || o.shards > 100000)
				return fw_usage_fail("bad shard count '%s'", optarg);
			break;
		case OPT_SHARD:
			if (fw_parse_shard(optarg, &o.each.shard_k, &o.each.shard_n) < 0)
				return fw_usage_fail("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case OPT_SKIP_BAD: o.each.skip_bad = 1; break;
		case OPT_MAX_RECORD:
			if (fw_parse_u64(optarg, &u, 1) < 0 || u < 16 || u > (1ULL << 40))
				return fw_usage_fail("bad record limit '%s'", optarg);
			o.ropts.max_record = (size_t)u;
			break;
		case OPT_PROGRESS: o.each.progress = 1; break;
		case 'h': return fw_help_exit();
		case OPT_VERSION: return fw_version_exit();
		default: return fw_usage_exit();
		}
	}
	const char *path = NULL;
	if (!strcmp(cmd, "get")) {
		if (optind >= argc)
			return fw_usage_fail("%s: missing PATH", cmd);
		path = argv[optind++];
	}
	o.files = argv + optind;
	o.nfiles = argc - optind;

	int st;
	if (!strcmp(cmd, "cat")) {
		o.have_n = 0;
		st = cmd_cat(&o, 0);
	} else if (!strcmp(cmd, "head")) {
		st = cmd_cat(&o, o.have_n ? o.n : 10);
	} else if (!strcmp(cmd, "count")) {
		st = cmd_count(&o);
	} else if (!strcmp(cmd, "json") || !strcmp(cmd, "get")) {
		st = cmd_json(&o, path);
	} else if (!strcmp(cmd, "from-json")) {
		st = cmd_from_json(&o);
	} else if (!strcmp(cmd, "stats")) {
		st = cmd_stats(&o);
	} else if (!strcmp(cmd, "sample")) {
		if (!o.have_n)
			return fw_usage_fail("%s: -n N is required", cmd);
		st = cmd_sample(&o);
	} else {
		if (!o.shards || !o.out)
			return fw_usage_fail("%s: --shards N and -o PREFIX are required", cmd);
		st = cmd_split(&o);
	}
	if (fw_close_stdout() < 0 && !st)
		st = FW_EXIT_DATA;
	return st;
}
