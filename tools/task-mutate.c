/*
 * task-mutate — git repositories in, validated `task` records out.
 *
 * For each repository: import its HEAD tree into the task store, run its
 * test suite twice in the clean room, list candidate mutations, and keep
 * those that fw_task_validate() (fw_task.h) finds to be tasks; with
 * --strategy history, the commits fw_history_run() finds.  This file holds
 * the options, the -j workers and the summary.  See task-mutate(1).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
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

/* One repository's run: the prepared repository and the workers' state. */
struct job {
	const struct opts *o;
	struct fw_task_repo r;
	size_t next, ndone;
	pthread_mutex_t mu;
	struct fw_progress prog;
	int fatal;
	char fatal_msg[512];
};

/* Counts of one run, for the summary. */
struct tally {
	uint64_t cand, ok, why[FW_TASK_NREASONS];
};

/* The temporary directory of the repository being worked on, so that a
 * signal does not leave workspaces behind. */
static pthread_mutex_t tmp_mu = PTHREAD_MUTEX_INITIALIZER;
static char tmp_now[4096];

/* Makes the run's temporary directory into tmp (4096 bytes).  0 or -1. */
static int tmp_make(char *tmp)
{
	const char *tmpdir = getenv("TMPDIR");
	snprintf(tmp, 4096, "%s/task-mutate.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
	pthread_mutex_lock(&tmp_mu);
	char *made = mkdtemp(tmp);
	if (made)
		snprintf(tmp_now, sizeof tmp_now, "%s", tmp);
	pthread_mutex_unlock(&tmp_mu);
	if (!made)
		fw_warn("cannot make a temporary directory: %s", strerror(errno));
	return made ? 0 : -1;
}

static void tmp_remove(const char *tmp)
{
	pthread_mutex_lock(&tmp_mu);
	fw_rmtree(tmp);
	tmp_now[0] = '\0';
	pthread_mutex_unlock(&tmp_mu);
}

/* Validated candidates among the finished prefix of the order. */
static uint64_t validated_prefix(const struct job *j)
{
	uint64_t v = 0;
	for (size_t i = 0; i < j->r.nc && j->r.c[i].done; i++)
		v += j->r.c[i].reason == FW_TASK_KEPT;
	return v;
}

static void *worker(void *arg)
{
	struct job *j = arg;
	char err[512];
	struct fw_store *s = fw_store_open(j->o->t.store, 0, err, sizeof err);
	for (;;) {
		pthread_mutex_lock(&j->mu);
		if (!s && !j->fatal) {
			j->fatal = 1;
			snprintf(j->fatal_msg, sizeof j->fatal_msg, "%s", err);
		}
		if (j->fatal || j->next >= j->r.nc ||
		    (j->o->max && validated_prefix(j) >= j->o->max)) {
			pthread_mutex_unlock(&j->mu);
			break;
		}
		size_t i = j->next++;
		pthread_mutex_unlock(&j->mu);
		enum fw_task_reason r = fw_task_validate(&j->r, s, i);
		pthread_mutex_lock(&j->mu);
		if (r == FW_TASK_ERROR && !j->fatal) {
			j->fatal = 1;
			snprintf(j->fatal_msg, sizeof j->fatal_msg, "%s", j->r.c[i].detail);
		}
		j->r.c[i].reason = r;
		j->r.c[i].done = 1;
		j->ndone++;
		fw_progress_tick(&j->prog, j->ndone, 0);
		pthread_mutex_unlock(&j->mu);
	}
	fw_store_free(s);
	return NULL;
}

/* With -v: the last lines the test command printed, which say why the
 * original suite cannot be used. */
static void show_tail(const struct job *j, const char *repo)
{
	if (!j->o->verbose || !j->r.show_tail || !j->r.tail[0])
		return;
	fw_warn("%s: the test command's output ends:", repo);
	for (const char *p = j->r.tail; *p;) {
		const char *e = strchr(p, '\n');
		int n = e ? (int)(e - p) : (int)strlen(p);
		fw_warn("%s: | %.*s", repo, n, p);
		p += n + (e != NULL);
	}
}

/* Validates repo's candidates with o->jobs workers and writes the tasks.
 * why gets the reason a repository was not used.  Returns 0 or -1. */
static int run_repo(const struct opts *o, const char *repo, struct fw_writer *w,
		    struct tally *t, char *why, size_t whylen)
{
	struct job j = { .o = o };
	char tmp[4096];
	int rc = -1;
	pthread_mutex_init(&j.mu, NULL);
	if (tmp_make(tmp) < 0) {
		snprintf(why, whylen, "error (cannot make a temporary directory)");
		pthread_mutex_destroy(&j.mu);
		return -1;
	}
	int k = fw_task_repo_open(&j.r, &o->t, repo, tmp);
	if (j.r.nflaky)
		fw_warn("%s: %zu flaky tests (differ between two runs) are excluded", repo,
			j.r.nflaky);
	if (j.r.nbad)
		fw_warn("%s: %zu tests fail on the original and are excluded", repo, j.r.nbad);
	if (k != 0) {
		fw_warn("%s: %s", repo, k > 0 ? j.r.msg : "out of memory");
		show_tail(&j, repo);
		goto out;
	}

	fw_progress_start(&j.prog, o->progress);
	size_t nt = o->jobs < 64 ? o->jobs : 64, started = 0;
	pthread_t th[64];
	for (; started < nt; started++)
		if (pthread_create(&th[started], NULL, worker, &j) != 0)
			break;
	if (started == 0)
		worker(&j);
	for (size_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	fw_progress_end(&j.prog);
	if (j.fatal) {
		snprintf(j.r.why, sizeof j.r.why, "error (%s)", j.fatal_msg);
		fw_warn("%s: %s", repo, j.fatal_msg);
		goto out;
	}

	/* Output in candidate order, up to --max; the summary counts the same
	 * prefix, so it does not depend on -j. */
	uint64_t kept = 0;
	for (size_t i = 0; i < j.r.nc && j.r.c[i].done; i++) {
		if (o->max && kept >= o->max)
			break;
		const struct fw_task_cand *c = &j.r.c[i];
		t->cand++;
		if (c->reason == FW_TASK_KEPT) {
			if (fw_writer_put(w, c->rec.p, c->rec.n) < 0) {
				fw_warn("write error: %s", fw_writer_error(w));
				goto out;
			}
			kept++;
			t->ok++;
			continue;
		}
		t->why[c->reason]++;
		if (o->verbose) {
			int file = c->strategy == FW_DELETE_FILE;
			fw_warn("%s: %s %s%s%s: %s: %s", repo, fw_strategy_name(c->strategy), c->path,
				file ? "" : ":", file ? "" : j.r.syms.v[c->sym].name,
				fw_task_reason_name(c->reason), c->detail);
		}
	}
	rc = 0;
out:
	snprintf(why, whylen, "%s", j.r.why);
	fw_task_repo_release(&j.r);
	tmp_remove(tmp);
	pthread_mutex_destroy(&j.mu);
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
	if (tmp_make(tmp) < 0)
		return -1;
	h.test_cmd = o->t.test_cmd;
	h.fmt = o->t.fmt;
	h.timeout_s = o->t.timeout_s;
	h.max = o->max;
	h.shard_k = o->t.shard_k;
	h.shard_n = o->t.shard_n;
	h.jobs = o->jobs;
	h.split = o->split_given ? o->t.split : NULL;
	h.store = o->t.store;
	h.store_abs = o->t.store_abs;
	h.tmp = tmp;
	h.context = cm;
	h.paths = o->npaths ? o->paths : NULL;
	h.test_paths = o->ntest_paths ? o->test_paths : NULL;
	struct fw_env *own = malloc(sizeof *own);
	int rc = -1;
	if (!own || fw_task_repo_env(o->t.env, o->t.env_store, repo, own, &h.env, err,
				     sizeof err) < 0)
		fw_warn("%s: %s", repo, own ? err : "out of memory");
	else if ((rc = fw_history_run(&h, repo, history_emit, history_note, &hc, t, err,
				      sizeof err)) < 0)
		fw_warn("%s: %s", repo, err);
	free(own);
	tmp_remove(tmp);
	return rc;
}

/* Waits for SIGINT, SIGTERM or SIGHUP (blocked in every other thread),
 * removes the workspaces and exits as the signal would have.  The
 * sandboxed test runs die with their parent. */
static void *signal_thread(void *arg)
{
	sigset_t *set = arg;
	int sig = 0;
	if (sigwait(set, &sig) != 0)
		return NULL;
	pthread_mutex_lock(&tmp_mu);
	if (tmp_now[0]) {
		/* Moved first, so workers stop finding it; removal is retried
		 * while their last writes land. */
		char dead[4200];
		snprintf(dead, sizeof dead, "%s.dead", tmp_now);
		const char *p = rename(tmp_now, dead) == 0 ? dead : tmp_now;
		for (int i = 0; i < 20 && fw_rmtree(p) < 0; i++)
			usleep(50000);
	}
	_exit(128 + sig);
}


static int usage_error(const char *fmt, const char *arg)
{
	return fw_usage_error(usage_text, fmt, arg);
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
				return usage_error("unknown strategy '%s' (stub-body, delete-function, "
						   "delete-file, delete-feature, history)", optarg);
			o->t.strategies |= 1u << st;
			break;
		case OH_RANGE: o->h.rev = optarg; break;
		case OH_PATH:
			if (o->npaths == 64)
				return usage_error("too many --path options (at most %s)", "64");
			o->paths[o->npaths++] = optarg;
			break;
		case OH_TEST_PATH:
			if (o->ntest_paths == 64)
				return usage_error("too many --test-path options (at most %s)", "64");
			o->test_paths[o->ntest_paths++] = optarg;
			break;
		case OH_SINCE:
		case OH_UNTIL:
			if (fw_time_parse(optarg, strlen(optarg),
					  ch == OH_SINCE ? &o->h.since : &o->h.until))
				return usage_error("bad date '%s' (want ISO 8601: 2024-03-01 or "
						   "2024-03-01T12:00:00Z)", optarg);
			/* a bare --until day takes in the whole day */
			if (ch == OH_UNTIL && strlen(optarg) == 10)
				o->h.until += 86399;
			break;
		case OH_GREP: o->h.grep = optarg; break;
		case OH_MAX_FILES:
		case OH_MAX_LINES:
			if (fw_parse_u64(optarg, ch == OH_MAX_FILES ? &o->h.max_files : &o->h.max_lines, 0))
				return usage_error("bad count '%s'", optarg);
			break;
		case OH_CONTEXT: o->context = optarg; break;
		case O_ENV: o->env_arg = optarg; break;
		case O_ENV_STORE: o->t.env_store = optarg; break;
		case O_REPORT:
			if ((st = fw_report_format_parse(optarg)) < 0)
				return usage_error("unknown report format '%s' (junit, tap, gotest)",
						   optarg);
			o->t.fmt = (enum fw_report_format)st;
			break;
		case O_LANG:
			if ((o->t.lang = fw_lang_parse(optarg)) == FW_LANG_UNKNOWN)
				return usage_error("unknown language '%s' (python, c, javascript, "
						   "typescript, go)", optarg);
			break;
		case O_STORE: o->t.store = optarg; break;
		case O_MAX:
			if (fw_parse_u64(optarg, &o->max, 0) < 0)
				return usage_error("bad count '%s'", optarg);
			break;
		case O_SEED:
			if (fw_parse_u64(optarg, &o->t.seed, 0) < 0)
				return usage_error("bad seed '%s'", optarg);
			break;
		case 'j':
			if (fw_parse_u64(optarg, &o->jobs, 0) < 0 || o->jobs < 1 || o->jobs > 64)
				return usage_error("bad job count '%s' (1..64)", optarg);
			break;
		case O_SHARD:
			if (fw_parse_shard(optarg, &o->t.shard_k, &o->t.shard_n) < 0)
				return usage_error("bad shard '%s' (want K/N, 0 <= K < N)", optarg);
			break;
		case O_SPLIT:
			if (fw_task_split_parse(optarg, o->t.split) < 0)
				return usage_error("bad split '%s' (want train=F,eval=F,private=F)",
						   optarg);
			o->split_given = 1;
			break;
		case O_TIMEOUT:
			if (fw_parse_double(optarg, &o->t.timeout_s) < 0 || o->t.timeout_s <= 0)
				return usage_error("bad timeout '%s'", optarg);
			break;
		case O_ALLOW_DIRTY: o->t.allow_dirty = 1; break;
		case 'o': o->out = optarg; break;
		case 'z': o->level = 3; break;
		case 'v': o->verbose = 1; break;
		case O_PROGRESS: o->progress = 1; break;
		case 'h': fw_help(); return fw_close_stdout() ? FW_EXIT_DATA : FW_EXIT_OK;
		case O_VERSION: fw_print_version(); return FW_EXIT_OK;
		default: fputs(usage_text, stderr); return FW_EXIT_USAGE;
		}
	}
	if (optind >= argc)
		return usage_error("%s", "no repository given");
	/* without --test-cmd, every repository must come from a record
	 * that names its own */
	int only_dirs = 1;
	for (int i = optind; i < argc; i++) {
		struct stat sb;
		if (strcmp(argv[i], "-") == 0 || (stat(argv[i], &sb) == 0 && !S_ISDIR(sb.st_mode)))
			only_dirs = 0;
	}
	if (!o->t.test_cmd && only_dirs)
		return usage_error("%s", "--test-cmd is required");
	if (!o->t.strategies && !o->history)
		o->t.strategies = (1u << FW_NSTRATEGIES) - 1;
	if (!o->history && (o->h.rev || o->npaths || o->ntest_paths || o->h.since || o->h.until ||
			    o->h.grep || o->h.max_files || o->h.max_lines || o->context))
		return usage_error("%s", "--range, --path, --test-path, --since, --until, --grep, "
				   "--max-files, --max-lines and --context go with --strategy history");
	return -1;
}

/* Opens the store (made when absent), the environment of --env and the
 * output.  Returns the writer, or NULL after a diagnostic. */
static struct fw_writer *open_all(struct opts *o, char **store_abs, struct fw_env *env)
{
	static char env_store[4096];
	char err[512];
	struct fw_store *s = fw_store_open(o->t.store, 1, err, sizeof err);
	if (!s) {
		fw_warn("%s", err);
		return NULL;
	}
	fw_store_free(s);
	if (!(*store_abs = realpath(o->t.store, NULL))) {
		fw_warn("%s", strerror(errno));
		return NULL;
	}
	o->t.store_abs = *store_abs;
	/* the environment: named once, the same for every repository */
	if (fw_env_store_path(o->t.env_store, *store_abs, env_store, sizeof env_store, err,
			      sizeof err) < 0) {
		fw_warn("%s", err);
		return NULL;
	}
	o->t.env_store = env_store;
	if (o->env_arg) {
		char id[FW_ENV_ID_LEN];
		if (fw_env_resolve(o->t.env_store, o->env_arg, id, err, sizeof err) < 0 ||
		    fw_env_open(env, o->t.env_store, id, err, sizeof err) < 0) {
			fw_warn("%s", err);
			return NULL;
		}
		o->t.env = env;
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
static void summary(const struct opts *o, const struct fw_strlist *lines, const struct tally *t,
		    const struct fw_history_tally *ht)
{
	if (o->t.strategies) {
		for (size_t i = 0; i < lines->n; i++)
			fprintf(stderr, "%s: %s\n", fw_prog, lines->v[i]);
		fprintf(stderr, "%s: candidates %llu, validated %llu, rejected %llu", fw_prog,
			(unsigned long long)t->cand, (unsigned long long)t->ok,
			(unsigned long long)(t->cand - t->ok));
		for (int r = 0; r < FW_TASK_NREASONS; r++)
			fprintf(stderr, "%s %s %llu", r ? "," : ":", fw_task_reason_name(r),
				(unsigned long long)t->why[r]);
		fputc('\n', stderr);
	}
	if (o->history) {
		fprintf(stderr, "%s: history: commits %llu, candidates %llu, validated %llu",
			fw_prog, (unsigned long long)ht->scanned, (unsigned long long)ht->candidates,
			(unsigned long long)ht->kept);
		for (int r = 0; r < FW_HIST_NREASONS; r++)
			fprintf(stderr, "%s %s %llu", r ? "," : ":", fw_history_reason_name(r),
				(unsigned long long)ht->why[r]);
		fputc('\n', stderr);
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
	static sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_t sig_th;
	if (pthread_sigmask(SIG_BLOCK, &sigs, NULL) == 0)
		pthread_create(&sig_th, NULL, signal_thread, &sigs);
	struct tally t = { 0 };
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
		struct tally before = t;
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
	fw_strlist_free(&lines);
	free(store_abs);
	fw_strlist_free(&repos);
	fw_strlist_free(&cmds);
	fw_strlist_free(&fmts);
	if (fw_close_stdout() < 0)
		status = FW_EXIT_DATA;
	return status;
}
