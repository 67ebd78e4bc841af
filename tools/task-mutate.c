/*
 * task-mutate — git repositories in, validated `task` records out.
 *
 * For each repository: import its HEAD tree into the task store, run its
 * test suite twice in the clean room, list candidate mutations, and keep
 * those that fw_task_validate() (fw_task.h) finds to be tasks; with
 * --strategy history, the commits fw_history_run() finds.  The -j workers
 * are the shared pool's, run by fw_task_repo_validate() (fw_task_run.h).
 * The repositories of the operands and the run over them are
 * fw_task_sources_fill() and fw_task_run_all(); this file holds the
 * options, the output and the summary.  See task-mutate(1).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fw_base.h"
#include "fw_cli.h"
#include "fw_env.h"
#include "fw_history.h"
#include "fw_mutate.h"
#include "fw_report.h"
#include "fw_stream.h"
#include "fw_task.h"
#include "fw_task_run.h"

static const char usage_text[] =
	"usage: task-mutate --test-cmd CMD [--strategy S ...]\n"
	"                   [--report junit | tap | gotest] [--lang L] [--store DIR]\n"
	"                   [--max N] [--seed S] [-j N] [--shard K/N]\n"
	"                   [--split train=F,eval=F,private=F] [--timeout SEC]\n"
	"                   [--env DIR | ID] [--env-store DIR]\n"
	"                   [--allow-dirty] [-o OUT] [-z] [-v] [--progress] REPO ...\n"
	"       task-mutate --strategy history --test-cmd CMD [--range A..B] [--path P ...]\n"
	"                   [--test-path P ...] [--since DATE] [--until DATE] [--grep RE]\n"
	"                   [--max-files N] [--max-lines N] [--context DIR] [option ...]\n"
	"                   REPO ...\n"
	"       task-mutate -h | --help | --version\n";

static const struct fw_opt_doc options[] = {
	{ "--test-cmd CMD", "the command that runs the suite" },
	{ "--strategy S", "which mutations to try (history: tasks from the commit history)" },
	{ "--report junit | tap | gotest", "how the suite reports results (default junit)" },
	{ "--lang L", "mutate only files of language L" },
	{ "--store DIR", "the task store, a bare git repository created when missing" },
	{ "--max N", "stop after N validated tasks (over all repositories)" },
	{ "--seed S", "order in which candidates are tried (default 0)" },
	{ "-j N", "validate N candidates at a time (default 1)" },
	{ "--shard K/N", "try only the candidates whose key hashes to K modulo N" },
	{ "--split train=F,eval=F,private=F", "weights of the splits a task falls in by the hash of its id" },
	{ "--timeout SEC", "wall-clock limit of one suite run (default 300)" },
	{ "--env DIR | ID", "run every suite in this environment" },
	{ "--env-store DIR", "where environments are kept" },
	{ "--allow-dirty", "accept a work tree with uncommitted changes" },
	{ "-o OUT", "write records to OUT (replaced atomically) instead of standard output" },
	{ "-z", "compress the output with zstd" },
	{ "-v", "say on standard error why each rejected candidate was rejected" },
	{ "--progress", "a progress meter on standard error even when it is not a terminal" },
	{ "--range A..B", "history: the commits reachable from B and not from A" },
	{ "--path P", "history: only commits that change code below P" },
	{ "--test-path P", "history: only commits that change tests below P" },
	{ "--since DATE", "history: only commits dated at or after DATE" },
	{ "--until DATE", "history: only commits dated at or before DATE" },
	{ "--grep RE", "history: only commits whose message matches RE, ignoring case" },
	{ "--max-files N", "history: only commits that change at most N code files" },
	{ "--max-lines N", "history: only commits that change at most N code lines" },
	{ "--context DIR", "history: attach the context bundles of DIR/context.json" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

struct opts {
	struct fw_task_run r; /* the run: validation's options, --max, -j, the history's */
	int verbose, level, split_given;
	const char *out;
	/* --strategy history */
	const char *paths[65], *test_paths[65];
	size_t npaths, ntest_paths;
	const char *context;
	const char *env_arg; /* --env */
};

/* The run's callbacks: arg is the writer. */
static int put(void *arg, const void *rec, size_t n)
{
	struct fw_writer *w = arg;
	if (fw_writer_put(w, rec, n) < 0) {
		fw_warn("write error: %s", fw_writer_error(w));
		return -1;
	}
	return 0;
}

static void flush(void *arg)
{
	fw_writer_flush(arg);
}

static void say(void *arg, const char *msg)
{
	(void)arg;
	fw_warn("%s", msg);
}

/* Parses the options into o.  Returns -1 to go on, else the exit status. */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	enum { O_TEST_CMD = 256, O_STRATEGY, O_REPORT, O_LANG, O_STORE, O_MAX, O_SEED, O_SHARD,
	       O_SPLIT, O_TIMEOUT, O_ALLOW_DIRTY, O_PROGRESS, O_VERSION, OH_RANGE, OH_PATH,
	       OH_TEST_PATH, OH_SINCE, OH_UNTIL, OH_GREP, OH_MAX_FILES, OH_MAX_LINES, OH_CONTEXT,
	       O_ENV, O_ENV_STORE };
	static const struct option longopts[] = {
		{ "test-cmd", required_argument, NULL, O_TEST_CMD },
		{ "strategy", required_argument, NULL, O_STRATEGY },
		{ "report", required_argument, NULL, O_REPORT },
		{ "lang", required_argument, NULL, O_LANG },
		{ "store", required_argument, NULL, O_STORE },
		{ "max", required_argument, NULL, O_MAX },
		{ "seed", required_argument, NULL, O_SEED },
		{ "jobs", required_argument, NULL, 'j' },
		{ "shard", required_argument, NULL, O_SHARD },
		{ "split", required_argument, NULL, O_SPLIT },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "allow-dirty", no_argument, NULL, O_ALLOW_DIRTY },
		{ "range", required_argument, NULL, OH_RANGE },
		{ "path", required_argument, NULL, OH_PATH },
		{ "test-path", required_argument, NULL, OH_TEST_PATH },
		{ "since", required_argument, NULL, OH_SINCE },
		{ "until", required_argument, NULL, OH_UNTIL },
		{ "grep", required_argument, NULL, OH_GREP },
		{ "max-files", required_argument, NULL, OH_MAX_FILES },
		{ "max-lines", required_argument, NULL, OH_MAX_LINES },
		{ "context", required_argument, NULL, OH_CONTEXT },
		{ "env", required_argument, NULL, O_ENV },
		{ "env-store", required_argument, NULL, O_ENV_STORE },
		{ "output", required_argument, NULL, 'o' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "progress", no_argument, NULL, O_PROGRESS },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	struct fw_task_opts *t = &o->r.t;
	struct fw_history_opts *h = &o->r.h;
	int ch, st;
	while ((ch = getopt_long(argc, argv, "j:o:zvh", longopts, NULL)) != -1) {
		switch (ch) {
		case O_TEST_CMD: t->test_cmd = optarg; break;
		case O_STRATEGY:
			if (strcmp(optarg, "history") == 0) {
				o->r.history = 1;
				break;
			}
			if ((st = fw_strategy_parse(optarg)) < 0)
				return fw_usage_fail("unknown strategy '%s' (stub-body, delete-function, "
						      "delete-file, delete-feature, history)", optarg);
			t->strategies |= 1u << st;
			break;
		case OH_RANGE: h->rev = optarg; break;
		case OH_PATH:
			if (o->npaths == 64)
				return fw_usage_fail("too many --path options (at most %s)", "64");
			o->paths[o->npaths++] = optarg;
			break;
		case OH_TEST_PATH:
			if (o->ntest_paths == 64)
				return fw_usage_fail("too many --test-path options (at most %s)", "64");
			o->test_paths[o->ntest_paths++] = optarg;
			break;
		case OH_SINCE:
		case OH_UNTIL:
			if (fw_time_parse(optarg, strlen(optarg),
					  ch == OH_SINCE ? &h->since : &h->until))
				return fw_usage_fail("bad date '%s' (want ISO 8601: 2024-03-01 or "
						      "2024-03-01T12:00:00Z)", optarg);
			/* a bare --until day takes in the whole day */
			if (ch == OH_UNTIL && strlen(optarg) == 10)
				h->until += 86399;
			break;
		case OH_GREP: h->grep = optarg; break;
		case OH_MAX_FILES:
		case OH_MAX_LINES:
			if (fw_parse_u64(optarg, ch == OH_MAX_FILES ? &h->max_files : &h->max_lines, 0))
				return fw_usage_fail("bad count '%s'", optarg);
			break;
		case OH_CONTEXT: o->context = optarg; break;
		case O_ENV: o->env_arg = optarg; break;
		case O_ENV_STORE: t->env_store = optarg; break;
		case O_REPORT:
			if ((st = fw_report_format_parse(optarg)) < 0)
				return fw_usage_fail("unknown report format '%s' (junit, tap, gotest)",
						      optarg);
			t->fmt = (enum fw_report_format)st;
			break;
		case O_LANG:
			if ((t->lang = fw_lang_parse(optarg)) == FW_LANG_UNKNOWN)
				return fw_usage_fail("unknown language '%s' (python, c, javascript, "
						      "typescript, go)", optarg);
			break;
		case O_STORE: t->store = optarg; break;
		case O_MAX:
			if (fw_parse_u64(optarg, &o->r.max, 0) < 0)
				return fw_usage_fail("bad count '%s'", optarg);
			break;
		case O_SEED:
			if (fw_parse_u64(optarg, &t->seed, 0) < 0)
				return fw_usage_fail("bad seed '%s'", optarg);
			break;
		case 'j':
			if (fw_parse_u64(optarg, &o->r.jobs, 0) < 0 || o->r.jobs < 1 ||
			    o->r.jobs > 64)
				return fw_usage_fail("bad job count '%s' (1..64)", optarg);
			break;
		case O_SHARD:
			if (fw_parse_shard(optarg, &t->shard_k, &t->shard_n) < 0)
				return fw_usage_fail("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case O_SPLIT:
			if (fw_task_split_parse(optarg, t->split) < 0)
				return fw_usage_fail("bad split '%s' (want train=F,eval=F,private=F)",
						      optarg);
			o->split_given = 1;
			break;
		case O_TIMEOUT:
			if (fw_parse_double(optarg, &t->timeout_s) < 0 || t->timeout_s <= 0)
				return fw_usage_fail("bad timeout '%s'", optarg);
			break;
		case O_ALLOW_DIRTY: t->allow_dirty = 1; break;
		case 'o': o->out = optarg; break;
		case 'z': o->level = 3; break;
		case 'v': o->verbose = 1; break;
		case O_PROGRESS: o->r.progress = 1; break;
		case 'h': return fw_help_exit();
		case O_VERSION: return fw_version_exit();
		default: return fw_usage_exit();
		}
	}
	if (optind >= argc)
		return fw_usage_fail("%s", "no repository given");
	/* without --test-cmd, every repository must come from a record
	 * that names its own */
	int only_dirs = 1;
	for (int i = optind; i < argc; i++)
		if (fw_task_operand_kind(argv[i]) == 0)
			only_dirs = 0;
	if (!t->test_cmd && only_dirs)
		return fw_usage_fail("%s", "--test-cmd is required");
	if (!t->strategies && !o->r.history)
		t->strategies = (1u << FW_NSTRATEGIES) - 1;
	if (!o->r.history && (h->rev || o->npaths || o->ntest_paths || h->since || h->until ||
			    h->grep || h->max_files || h->max_lines || o->context))
		return fw_usage_fail("%s", "--range, --path, --test-path, --since, --until, --grep, "
				      "--max-files, --max-lines and --context go with --strategy history");
	return -1;
}

/* Opens the store (made when absent), the environment of --env and the
 * output.  Returns the writer, or NULL after a diagnostic. */
static struct fw_writer *open_all(struct opts *o, char **store_abs, struct fw_env *env)
{
	static char env_store[4096];
	char err[512];
	if (fw_task_run_open(&o->r.t, o->env_arg, env, store_abs, env_store, sizeof env_store, err,
			     sizeof err) < 0) {
		fw_warn("%s", err);
		return NULL;
	}
	/* An output that exists and is not a regular file (/dev/null, a
	 * FIFO) is written in place: the writer's write-beside-and-rename
	 * would replace it with a file. */
	struct stat ost;
	if (o->out && stat(o->out, &ost) == 0 && !S_ISREG(ost.st_mode)) {
		int fd = open(o->out, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) {
			fw_warn("%s: %s", o->out, strerror(errno));
			return NULL;
		}
		close(fd);
		o->out = NULL;
	}
	struct fw_writer *w = fw_writer_open(o->out, o->level, err, sizeof err);
	if (!w)
		fw_warn("%s", err);
	return w;
}

/* The summary on stderr: a line per repository, then the totals. */
static void summary(const struct fw_task_run *r)
{
	char buf[1024];
	if (r->t.strategies) {
		for (size_t i = 0; i < r->lines.n; i++)
			fprintf(stderr, "%s: %s\n", fw_prog, r->lines.v[i]);
		fw_task_tally_format(buf, sizeof buf, &r->tally);
		fprintf(stderr, "%s: %s\n", fw_prog, buf);
	}
	if (r->history) {
		fw_task_history_tally_format(buf, sizeof buf, &r->htally);
		fprintf(stderr, "%s: %s\n", fw_prog, buf);
	}
}

int main(int argc, char **argv)
{
	fw_cli_init("task-mutate");
	fw_usage_init(usage_text, options);
	struct opts o = {
		.r = { .t = { .fmt = FW_REPORT_JUNIT, .store = "tasks.git",
			      .split = { 0.8, 0.1, 0.1 }, .timeout_s = 300 },
		       .jobs = 1, .emit = put, .flush = flush, .warn = say },
		.level = -1,
	};
	int st = parse_opts(argc, argv, &o);
	if (st >= 0)
		return st;
	struct fw_context_map *cm = NULL;
	if (o.context) {
		char cerr[1024];
		if (!(cm = fw_context_load(o.context, cerr, sizeof cerr))) {
			fw_warn("%s", cerr);
			return FW_EXIT_DATA;
		}
	}

	struct fw_task_sources src = { 0 };
	int status = FW_EXIT_OK;
	if (fw_task_sources_fill(&src, argc - optind, argv + optind, say, NULL) < 0)
		status = FW_EXIT_DATA;

	char *store_abs = NULL, err[512];
	static struct fw_env env;
	struct fw_writer *w = open_all(&o, &store_abs, &env);
	if (!w) {
		status = FW_EXIT_DATA;
		goto out;
	}
	fw_scratch_guard();
	o.r.arg = w;
	o.r.note = o.verbose ? say : NULL;
	o.r.h.split = o.split_given ? o.r.t.split : NULL;
	o.r.h.context = cm;
	o.r.h.paths = o.npaths ? o.paths : NULL;
	o.r.h.test_paths = o.ntest_paths ? o.test_paths : NULL;
	if (fw_task_run_all(&o.r, &src) < 0)
		status = FW_EXIT_DATA;
	if (fw_writer_close(w, err, sizeof err) < 0) {
		fw_warn("%s", err);
		status = FW_EXIT_DATA;
	}
	summary(&o.r);
out:
	fw_context_free(cm);
	fw_task_run_release(&o.r);
	free(store_abs);
	fw_task_sources_release(&src);
	if (fw_close_stdout() < 0)
		status = FW_EXIT_DATA;
	return status;
}
