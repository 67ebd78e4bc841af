/*
 * task-mutate — git repositories in, validated `task` records out.
 *
 * For each repository: import its HEAD tree into the task store, run its
 * test suite twice in the clean room, list candidate mutations, and keep
 * those that fw_task_validate() (fw_task.h) finds to be tasks; with
 * --strategy history, the commits fw_history_run() finds.  The -j workers
 * are the shared pool's, run by fw_task_repo_validate() (fw_task_run.h);
 * this file holds the options, the loop over repositories and the
 * summary.  See task-mutate(1).
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
#include "fw_mp.h"
#include "fw_mutate.h"
#include "fw_report.h"
#include "fw_store.h"
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
	struct fw_task_opts t; /* what validation needs */
	uint64_t max, jobs;
	int verbose, progress, level;
	const char *out;
	/* --strategy history */
	int history, split_given;
	struct fw_history_opts h;
	const char *paths[65], *test_paths[65];
	size_t npaths, ntest_paths;
	const char *context;
	const char *env_arg; /* --env */
};

/* With -v: the last lines the test command printed, which say why the
 * original suite cannot be used. */
static void show_tail(const struct opts *o, const struct fw_task_repo *r, const char *repo)
{
	if (!o->verbose || !r->show_tail || !r->tail[0])
		return;
	fw_warn("%s: the test command's output ends:", repo);
	for (const char *p = r->tail; *p;) {
		const char *e = strchr(p, '\n');
		int n = e ? (int)(e - p) : (int)strlen(p);
		fw_warn("%s: | %.*s", repo, n, p);
		p += n + (e != NULL);
	}
}

/* What the results' callbacks need. */
struct repo_ctx {
	const struct opts *o;
	const struct fw_task_repo *r;
	const char *repo;
	struct fw_writer *w;
};

static int put_task(void *arg, const struct fw_task_cand *c)
{
	struct repo_ctx *x = arg;
	if (fw_writer_put(x->w, c->rec.p, c->rec.n) < 0) {
		fw_warn("write error: %s", fw_writer_error(x->w));
		return -1;
	}
	return 0;
}

static void say_rejected(void *arg, const struct fw_task_cand *c)
{
	struct repo_ctx *x = arg;
	if (!x->o->verbose)
		return;
	int file = c->strategy == FW_DELETE_FILE;
	fw_warn("%s: %s %s%s%s: %s: %s", x->repo, fw_strategy_name(c->strategy), c->path,
		file ? "" : ":", file ? "" : x->r->syms.v[c->sym].name,
		fw_task_reason_name(c->reason), c->detail);
}

/* Validates repo's candidates with o->jobs workers and writes the tasks.
 * why gets the reason a repository was not used.  Returns 0 or -1. */
static int run_repo(const struct opts *o, const char *repo, struct fw_writer *w,
		    struct fw_task_tally *t, char *why, size_t whylen)
{
	struct fw_task_repo r = { 0 };
	struct repo_ctx x = { o, &r, repo, w };
	char tmp[4096], msg[512];
	int rc = -1;
	if (fw_scratch_make(tmp) < 0) {
		snprintf(why, whylen, "error (cannot make a temporary directory)");
		return -1;
	}
	int k = fw_task_repo_open(&r, &o->t, repo, tmp);
	if (r.nflaky)
		fw_warn("%s: %zu flaky tests (differ between two runs) are excluded", repo,
			r.nflaky);
	if (r.nbad)
		fw_warn("%s: %zu tests fail on the original and are excluded", repo, r.nbad);
	if (k != 0) {
		fw_warn("%s: %s", repo, k > 0 ? r.msg : "out of memory");
		show_tail(o, &r, repo);
	} else if (fw_task_repo_validate(&r, (int)o->jobs, o->max, o->progress, msg,
					 sizeof msg) < 0) {
		snprintf(r.why, sizeof r.why, "error (%s)", msg);
		fw_warn("%s: %s", repo, msg);
	} else if (fw_task_repo_results(&r, o->max, t, put_task, say_rejected, &x) == 0) {
		rc = 0;
	}
	snprintf(why, whylen, "%s", r.why);
	fw_task_repo_release(&r);
	fw_scratch_remove(tmp);
	return rc;
}

/* What the history run's callbacks need. */
struct history_ctx {
	struct fw_writer *w;
	const char *repo;
	int verbose;
};

static int history_emit(void *ctx, const void *rec, size_t n)
{
	struct history_ctx *h = ctx;
	if (fw_writer_put(h->w, rec, n) < 0) {
		fw_warn("write error: %s", fw_writer_error(h->w));
		return -1;
	}
	return 0;
}

static void history_note(void *ctx, const char *hex, const char *subject,
			 enum fw_history_reason r, const char *detail)
{
	struct history_ctx *h = ctx;
	if (h->verbose)
		fw_warn("%s: %.12s %s: %s: %s", h->repo, hex, subject, fw_history_reason_name(r),
			detail);
}

/* --strategy history on one repository. */
static int run_history(const struct opts *o, const char *repo, const struct fw_context_map *cm,
		       struct fw_writer *w, struct fw_history_tally *t)
{
	struct fw_history_opts h = o->h;
	struct history_ctx hc = { w, repo, o->verbose };
	char tmp[4096], err[1024];
	if (fw_scratch_make(tmp) < 0)
		return -1;
	h.max = o->max;
	h.jobs = o->jobs;
	h.split = o->split_given ? o->t.split : NULL;
	h.tmp = tmp;
	h.context = cm;
	h.paths = o->npaths ? o->paths : NULL;
	h.test_paths = o->ntest_paths ? o->test_paths : NULL;
	int rc = fw_task_run_history(&h, &o->t, repo, history_emit, history_note, &hc, t, err,
				     sizeof err);
	if (rc < 0)
		fw_warn("%s: %s", repo, err);
	fw_scratch_remove(tmp);
	return rc;
}

/* Repositories named by the `repo` fields of a record stream, with the
 * record's own `test_cmd` and `report` when it has them ("" otherwise). */
static int repos_from_stream(const char *path, struct fw_strlist *repos,
			     struct fw_strlist *cmds, struct fw_strlist *fmts)
{
	char err[256];
	struct fw_reader *r = fw_reader_open(path, NULL, err, sizeof err);
	if (!r) {
		fw_warn("%s: %s", path, err);
		return -1;
	}
	struct fw_rec rec;
	int k, rc = 0;
	while ((k = fw_reader_next(r, &rec)) == 1) {
		char *p, *c, *f;
		int got = fw_task_source(rec.v, &p, &c, &f);
		if (got == 1) {
			fw_warn_rec(fw_reader_name(r), rec.index, rec.offset, "no 'repo' string");
			rc = -1;
			continue;
		}
		if (got < 0 || fw_strlist_add(repos, p) < 0 || fw_strlist_add(cmds, c) < 0 ||
		    fw_strlist_add(fmts, f) < 0)
			rc = -1;
		free(p);
		free(c);
		free(f);
	}
	if (k < 0) {
		fw_warn_reader(r);
		rc = -1;
	}
	fw_reader_close(r);
	return rc;
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
	int ch, st;
	while ((ch = getopt_long(argc, argv, "j:o:zvh", longopts, NULL)) != -1) {
		switch (ch) {
		case O_TEST_CMD: o->t.test_cmd = optarg; break;
		case O_STRATEGY:
			if (strcmp(optarg, "history") == 0) {
				o->history = 1;
				break;
			}
			if ((st = fw_strategy_parse(optarg)) < 0)
				return fw_usage_fail("unknown strategy '%s' (stub-body, delete-function, "
						      "delete-file, delete-feature, history)", optarg);
			o->t.strategies |= 1u << st;
			break;
		case OH_RANGE: o->h.rev = optarg; break;
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
					  ch == OH_SINCE ? &o->h.since : &o->h.until))
				return fw_usage_fail("bad date '%s' (want ISO 8601: 2024-03-01 or "
						      "2024-03-01T12:00:00Z)", optarg);
			/* a bare --until day takes in the whole day */
			if (ch == OH_UNTIL && strlen(optarg) == 10)
				o->h.until += 86399;
			break;
		case OH_GREP: o->h.grep = optarg; break;
		case OH_MAX_FILES:
		case OH_MAX_LINES:
			if (fw_parse_u64(optarg, ch == OH_MAX_FILES ? &o->h.max_files : &o->h.max_lines, 0))
				return fw_usage_fail("bad count '%s'", optarg);
			break;
		case OH_CONTEXT: o->context = optarg; break;
		case O_ENV: o->env_arg = optarg; break;
		case O_ENV_STORE: o->t.env_store = optarg; break;
		case O_REPORT:
			if ((st = fw_report_format_parse(optarg)) < 0)
				return fw_usage_fail("unknown report format '%s' (junit, tap, gotest)",
						      optarg);
			o->t.fmt = (enum fw_report_format)st;
			break;
		case O_LANG:
			if ((o->t.lang = fw_lang_parse(optarg)) == FW_LANG_UNKNOWN)
				return fw_usage_fail("unknown language '%s' (python, c, javascript, "
						      "typescript, go)", optarg);
			break;
		case O_STORE: o->t.store = optarg; break;
		case O_MAX:
			if (fw_parse_u64(optarg, &o->max, 0) < 0)
				return fw_usage_fail("bad count '%s'", optarg);
			break;
		case O_SEED:
			if (fw_parse_u64(optarg, &o->t.seed, 0) < 0)
				return fw_usage_fail("bad seed '%s'", optarg);
			break;
		case 'j':
			if (fw_parse_u64(optarg, &o->jobs, 0) < 0 || o->jobs < 1 || o->jobs > 64)
				return fw_usage_fail("bad job count '%s' (1..64)", optarg);
			break;
		case O_SHARD:
			if (fw_parse_shard(optarg, &o->t.shard_k, &o->t.shard_n) < 0)
				return fw_usage_fail("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case O_SPLIT:
			if (fw_task_split_parse(optarg, o->t.split) < 0)
				return fw_usage_fail("bad split '%s' (want train=F,eval=F,private=F)",
						      optarg);
			o->split_given = 1;
			break;
		case O_TIMEOUT:
			if (fw_parse_double(optarg, &o->t.timeout_s) < 0 || o->t.timeout_s <= 0)
				return fw_usage_fail("bad timeout '%s'", optarg);
			break;
		case O_ALLOW_DIRTY: o->t.allow_dirty = 1; break;
		case 'o': o->out = optarg; break;
		case 'z': o->level = 3; break;
		case 'v': o->verbose = 1; break;
		case O_PROGRESS: o->progress = 1; break;
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
	for (int i = optind; i < argc; i++) {
		struct stat sb;
		if (strcmp(argv[i], "-") == 0 || (stat(argv[i], &sb) == 0 && !S_ISDIR(sb.st_mode)))
			only_dirs = 0;
	}
	if (!o->t.test_cmd && only_dirs)
		return fw_usage_fail("%s", "--test-cmd is required");
	if (!o->t.strategies && !o->history)
		o->t.strategies = (1u << FW_NSTRATEGIES) - 1;
	if (!o->history && (o->h.rev || o->npaths || o->ntest_paths || o->h.since || o->h.until ||
			    o->h.grep || o->h.max_files || o->h.max_lines || o->context))
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
	if (fw_task_run_open(&o->t, o->env_arg, env, store_abs, env_store, sizeof env_store, err,
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
static void summary(const struct opts *o, const struct fw_strlist *lines,
		    const struct fw_task_tally *t, const struct fw_history_tally *ht)
{
	char buf[1024];
	if (o->t.strategies) {
		for (size_t i = 0; i < lines->n; i++)
			fprintf(stderr, "%s: %s\n", fw_prog, lines->v[i]);
		fw_task_tally_format(buf, sizeof buf, t);
		fprintf(stderr, "%s: %s\n", fw_prog, buf);
	}
	if (o->history) {
		fw_task_history_tally_format(buf, sizeof buf, ht);
		fprintf(stderr, "%s: %s\n", fw_prog, buf);
	}
}

int main(int argc, char **argv)
{
	fw_cli_init("task-mutate");
	fw_usage_init(usage_text, options);
	struct opts o = {
		.t = { .fmt = FW_REPORT_JUNIT, .store = "tasks.git", .split = { 0.8, 0.1, 0.1 },
		       .timeout_s = 300 },
		.jobs = 1, .level = -1,
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

	struct fw_strlist repos = { 0 }, cmds = { 0 }, fmts = { 0 }, lines = { 0 };
	int status = FW_EXIT_OK;
	for (int i = optind; i < argc; i++) {
		struct stat sb;
		if (strcmp(argv[i], "-") != 0 && stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode)) {
			if (fw_strlist_add(&repos, argv[i]) < 0 || fw_strlist_add(&cmds, "") < 0 ||
			    fw_strlist_add(&fmts, "") < 0)
				status = FW_EXIT_DATA;
		} else if (strcmp(argv[i], "-") != 0 && stat(argv[i], &sb) < 0) {
			fw_warn("%s: %s", argv[i], strerror(errno));
			status = FW_EXIT_DATA;
		} else if (repos_from_stream(argv[i], &repos, &cmds, &fmts) < 0) {
			status = FW_EXIT_DATA;
		}
	}

	char *store_abs = NULL, err[512];
	static struct fw_env env;
	struct fw_writer *w = open_all(&o, &store_abs, &env);
	if (!w) {
		status = FW_EXIT_DATA;
		goto out;
	}
	fw_scratch_guard();
	struct fw_task_tally t = { 0 };
	struct fw_history_tally ht = { 0 };
	for (size_t i = 0; i < repos.n; i++) {
		if (o.max && t.ok + ht.kept >= o.max)
			break;
		struct opts oi = o;
		if (o.max)
			oi.max = o.max - t.ok - ht.kept;
		if (cmds.v[i][0])
			oi.t.test_cmd = cmds.v[i];
		if (fmts.v[i][0] && (st = fw_report_format_parse(fmts.v[i])) >= 0) {
			oi.t.fmt = (enum fw_report_format)st;
		} else if (fmts.v[i][0]) {
			fw_warn("%s: unknown report format '%s' (junit, tap, gotest)", repos.v[i],
				fmts.v[i]);
			status = FW_EXIT_DATA;
			continue;
		}
		if (!oi.t.test_cmd) {
			fw_warn("%s: no test command (--test-cmd, or a test_cmd field)", repos.v[i]);
			status = FW_EXIT_DATA;
			continue;
		}
		if (oi.history && run_history(&oi, repos.v[i], cm, w, &ht) < 0)
			status = FW_EXIT_DATA;
		if (o.max && t.ok + ht.kept >= o.max)
			oi.t.strategies = 0;
		else if (o.max)
			oi.max = o.max - t.ok - ht.kept;
		struct fw_task_tally before = t;
		char why[600] = "", line[1400];
		if (oi.t.strategies) {
			if (run_repo(&oi, repos.v[i], w, &t, why, sizeof why) < 0)
				status = FW_EXIT_DATA;
			if (why[0])
				snprintf(line, sizeof line, "%s: not used: %s", repos.v[i], why);
			else
				snprintf(line, sizeof line, "%s: candidates %llu, validated %llu",
					 repos.v[i], (unsigned long long)(t.cand - before.cand),
					 (unsigned long long)(t.ok - before.ok));
			fw_strlist_add(&lines, line);
		}
		fw_writer_flush(w);
	}
	if (fw_writer_close(w, err, sizeof err) < 0) {
		fw_warn("%s", err);
		status = FW_EXIT_DATA;
	}
	summary(&o, &lines, &t, &ht);
out:
	fw_context_free(cm);
	fw_strlist_release(&lines);
	free(store_abs);
	fw_strlist_release(&repos);
	fw_strlist_release(&cmds);
	fw_strlist_release(&fmts);
	if (fw_close_stdout() < 0)
		status = FW_EXIT_DATA;
	return status;
}
