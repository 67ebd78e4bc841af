/*
 * fw-env — task environments: name a tree by its content id, keep it in
 * the env store, build one from a repository's flywheel.env recipe in
 * the clean room.  See fw-env(1).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fw_cli.h"
#include "fw_env.h"
#include "fw_sandbox.h"
#include "fw_store.h"
#include "fw_workspace.h"

#define MAX_ALLOW 64

static const char usage_text[] =
	"usage: fw-env id DIR\n"
	"       fw-env add [--env-store DIR] [--store DIR] DIR\n"
	"       fw-env build [--env-store DIR] [--store DIR] [--allow HOST ...] [--timeout SEC]\n"
	"                    [-v] REPO\n"
	"       fw-env import [--env-store DIR] [--store DIR] OCI_LAYOUT\n"
	"       fw-env path [--env-store DIR] [--store DIR] ID\n"
	"       fw-env -h | --help | --version\n";

static const struct fw_opt_doc options[] = {
	{ "--env-store DIR", "the env store (made when missing)" },
	{ "--store DIR", "the task store whose envs/ is the env store by default" },
	{ "--allow HOST", "build: a host the build may reach" },
	{ "--timeout SEC", "build: wall-clock limit of the build" },
	{ "-v", "build: show the build's output" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

struct opts {
	const char *env_store, *store;
	const char *allow[MAX_ALLOW + 1];
	size_t nallow;
	double timeout;
	int verbose;
};

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "%s: ", fw_prog);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	fputs(usage_text, stderr);
	return FW_EXIT_USAGE;
}

/* The env store the options name, into out; 0 or -1 (warned). */
static int env_store(const struct opts *o, char *out, size_t outlen)
{
	char err[512], *abs = NULL;
	const char *ts = o->store;
	if (!o->env_store && !getenv(FW_ENV_STORE_VAR)) {
		/* beside the tasks: the task store's envs/ */
		struct stat st;
		if (stat(ts, &st) == 0)
			ts = abs = realpath(ts, NULL);
	}
	int rc = fw_env_store_path(o->env_store, ts, out, outlen, err, sizeof err);
	free(abs);
	if (rc < 0)
		fw_warn("%s", err);
	return rc;
}

/* Prints the last lines of a captured stream, each under the heading. */
static void show_tail(const char *what, const struct fw_sandbox_output *s, int all)
{
	const char *p = s->data ? s->data : "";
	size_t n = s->len;
	while (n && p[n - 1] == '\n')
		n--;
	if (!n)
		return;
	size_t start = n;
	for (int lines = 0; start > 0 && (all || lines < 20); start--)
		if (p[start - 1] == '\n' && ++lines == 20 && !all)
			break;
	fw_warn("the recipe's %s%s:", what, start ? " ends" : "");
	for (const char *q = p + start; q < p + n;) {
		const char *e = memchr(q, '\n', (size_t)(p + n - q));
		int len = e ? (int)(e - q) : (int)(p + n - q);
		fw_warn("| %.*s", len, q);
		q += len + 1;
	}
}

/*
 * Runs REPO's recipe in the clean room: a checkout of its HEAD at
 * /work/src (the working directory), an empty /env to fill, the network
 * through the proxy for the allowed hosts only; then keeps /env in the
 * env store and notes which recipe made it.
 */
static int build(const struct opts *o, const char *repo)
{
	char store[4096], err[1024] = "", tree[FW_OID_HEX], commit[FW_OID_HEX];
	char top[4096], src[4200], out[4200], recipe[4300], rid[FW_ENV_ID_LEN], id[FW_ENV_ID_LEN];
	int dirty = 0, rc = FW_EXIT_DATA;
	struct fw_store *s = NULL;
	struct fw_sandbox_result res = { 0 };

	if (env_store(o, store, sizeof store) < 0)
		return FW_EXIT_DATA;
	if (!(s = fw_store_open(o->store, 1, err, sizeof err))) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	if (fw_store_import(s, repo, "HEAD", tree, commit, &dirty, err, sizeof err) < 0) {
		fw_warn("%s: %s", repo, err);
		fw_store_free(s);
		return FW_EXIT_DATA;
	}
	if (dirty)
		fw_warn("%s: work tree has uncommitted changes; the recipe of HEAD is built", repo);
	const char *tmp = getenv("TMPDIR");
	snprintf(top, sizeof top, "%s/fw-env.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(top)) {
		fw_warn("cannot make a temporary directory: %s", strerror(errno));
		fw_store_free(s);
		return FW_EXIT_DATA;
	}
	snprintf(src, sizeof src, "%s/src", top);
	snprintf(out, sizeof out, "%s/env", top);
	snprintf(recipe, sizeof recipe, "%s/" FW_ENV_RECIPE, src);
	if (fw_workspace_create(s, tree, src, NULL, NULL, err, sizeof err) < 0) {
		fw_warn("%s: %s", repo, err);
		goto out;
	}
	if (access(recipe, F_OK) != 0) {
		fw_warn("%s: no " FW_ENV_RECIPE " at the top of HEAD", repo);
		goto out;
	}
	if (fw_env_recipe_id(recipe, rid, err, sizeof err) < 0) {
		fw_warn("%s", err);
		goto out;
	}
	if (mkdir(out, 0755) != 0) {
		fw_warn("cannot make %s: %s", out, strerror(errno));
		goto out;
	}
	char bind[4300];
	snprintf(bind, sizeof bind, "%s:%s", out, FW_ENV_DIR);
	const char *rw[] = { bind, NULL };
	const char *vars[] = { "FW_ENV=" FW_ENV_DIR, NULL };
	struct fw_sandbox_opts so;
	fw_sandbox_opts_init(&so);
	so.workspace = top;
	so.cwd = FW_SANDBOX_WORKDIR "/src";
	so.rw_binds = rw;
	so.env = vars;
	so.allow = o->nallow ? o->allow : NULL;
	so.timeout_s = o->timeout;
	char *argv[] = { "sh", "-e", "./" FW_ENV_RECIPE, NULL };
	if (fw_sandbox_run(&so, argv, &res, err, sizeof err) < 0) {
		fw_warn("%s", err);
		goto out;
	}
	for (size_t i = 0; i < res.nevents; i++)
		if (o->verbose || !strncmp(res.events[i].kind, "net-", 4))
			fw_warn("%s: %s", res.events[i].kind,
				res.events[i].detail ? res.events[i].detail : "");
	if (res.cause != FW_SANDBOX_OK || res.exit_code != 0) {
		if (res.cause != FW_SANDBOX_OK)
			fw_warn("%s: the recipe was stopped by the %s limit after %.1f s", repo,
				fw_sandbox_cause_name(res.cause), res.wall_s);
		else
			fw_warn("%s: the recipe failed (exit %d)", repo, res.exit_code);
		show_tail("stdout", &res.out, o->verbose);
		show_tail("stderr", &res.err, o->verbose);
		goto out;
	}
	if (o->verbose) {
		show_tail("stdout", &res.out, 1);
		show_tail("stderr", &res.err, 1);
	}
	if (fw_env_add(store, out, id, err, sizeof err) < 0 ||
	    fw_env_recipe_note(store, rid, id, err, sizeof err) < 0) {
		fw_warn("%s: %s", repo, err);
		goto out;
	}
	printf("%s\n", id);
	rc = FW_EXIT_OK;
out:
	fw_sandbox_result_free(&res);
	fw_rmtree(top);
	fw_store_free(s);
	return rc;
}

/* Unpacks the OCI image layout into a scratch directory, keeps the tree
 * in the env store and prints its id. */
static int import(const char *store, const char *layout)
{
	char top[4096], root[4200], err[1024], id[FW_ENV_ID_LEN];
	const char *tmp = getenv("TMPDIR");
	int rc = FW_EXIT_DATA;

	snprintf(top, sizeof top, "%s/fw-env.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(top)) {
		fw_warn("cannot make a temporary directory: %s", strerror(errno));
		return FW_EXIT_DATA;
	}
	snprintf(root, sizeof root, "%s/rootfs", top);
	if (fw_env_oci_unpack(layout, root, err, sizeof err) < 0)
		fw_warn("%s: %s", layout, err);
	else if (fw_env_add(store, root, id, err, sizeof err) < 0)
		fw_warn("%s: %s", layout, err);
	else {
		if (fw_env_kind_of(root) != FW_ENV_ROOTFS)
			fw_warn("%s: the image is kept as a %s: it has no etc/, usr/ and a shell at "
				"bin/sh or usr/bin/sh to be a root", layout,
				fw_env_kind_name(fw_env_kind_of(root)));
		printf("%s\n", id);
		rc = FW_EXIT_OK;
	}
	fw_rmtree(top);
	return rc;
}

int main(int argc, char **argv)
{
	fw_cli_init("fw-env");
	fw_usage_init(usage_text, options);
	struct opts o = { .store = "tasks.git", .timeout = 1800 };
	enum { O_ENV_STORE = 256, O_STORE, O_ALLOW, O_TIMEOUT, O_VERSION };
	static const struct option longopts[] = {
		{ "env-store", required_argument, NULL, O_ENV_STORE },
		{ "store", required_argument, NULL, O_STORE },
		{ "allow", required_argument, NULL, O_ALLOW },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "+vh", longopts, NULL)) != -1) {
		if (ch == 'h') {
			fw_help();
			return fw_close_stdout() ? FW_EXIT_DATA : FW_EXIT_OK;
		}
		if (ch == O_VERSION) {
			fw_print_version();
			return fw_close_stdout() ? FW_EXIT_DATA : FW_EXIT_OK;
		}
		fputs(usage_text, stderr);
		return FW_EXIT_USAGE;
	}
	if (optind >= argc)
		return usage_error("%s", "no command given (id, add, build, import, path)");
	const char *cmd = argv[optind++];
	if (strcmp(cmd, "id") && strcmp(cmd, "add") && strcmp(cmd, "build") && strcmp(cmd, "path") &&
	    strcmp(cmd, "import"))
		return usage_error("unknown command '%s' (id, add, build, import, path)", cmd);
	while ((ch = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		switch (ch) {
		case O_ENV_STORE: o.env_store = optarg; break;
		case O_STORE: o.store = optarg; break;
		case O_ALLOW:
			if (o.nallow == MAX_ALLOW)
				return usage_error("%s", "too many --allow options (at most 64)");
			o.allow[o.nallow++] = optarg;
			break;
		case O_TIMEOUT:
			if (fw_parse_double(optarg, &o.timeout) < 0 || !(o.timeout > 0))
				return usage_error("bad timeout '%s'", optarg);
			break;
		case 'v': o.verbose = 1; break;
		case 'h': fw_help(); return FW_EXIT_OK;
		default: fputs(usage_text, stderr); return FW_EXIT_USAGE;
		}
	}
	if (strcmp(cmd, "build") && (o.nallow || o.verbose || o.timeout != 1800))
		return usage_error("%s", "--allow, --timeout and -v go with build");
	if (argc - optind != 1)
		return usage_error("%s", "want one operand");
	const char *arg = argv[optind];
	char store[4096], err[1024], id[FW_ENV_ID_LEN], path[4200];
	int status = FW_EXIT_OK;
	if (!strcmp(cmd, "id")) {
		if (fw_env_id(arg, id, err, sizeof err) < 0) {
			fw_warn("%s", err);
			status = FW_EXIT_DATA;
		} else {
			printf("%s\t%s\n", id, fw_env_kind_name(fw_env_kind_of(arg)));
		}
	} else if (!strcmp(cmd, "build")) {
		status = build(&o, arg);
	} else if (env_store(&o, store, sizeof store) < 0) {
		status = FW_EXIT_DATA;
	} else if (!strcmp(cmd, "import")) {
		status = import(store, arg);
	} else if (!strcmp(cmd, "add")) {
		if (fw_env_add(store, arg, id, err, sizeof err) < 0) {
			fw_warn("%s", err);
			status = FW_EXIT_DATA;
		} else {
			printf("%s\n", id);
		}
	} else if (fw_env_find(store, arg, path, sizeof path, err, sizeof err) < 0) {
		fw_warn("%s", err);
		status = FW_EXIT_DATA;
	} else {
		printf("%s\n", path);
	}
	if (fw_close_stdout() < 0)
		status = FW_EXIT_DATA;
	return status;
}
