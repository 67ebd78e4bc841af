/*
 * fw_grade_run.c — grading one rollout in the clean room (see fw_grade.h):
 * workspace, patch, protected files, test run, score, grade sub-map.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fw_env.h"
#include "fw_base.h"
#include "fw_grade.h"
#include "fw_mutate.h"
#include "fw_sandbox.h"
#include "fw_store.h"
#include "fw_workspace.h"

extern char **environ;

#define MAX_STORES 8
#define LIT_FILE_MAX (256u << 10)
/* bytes of one stream of a graded run kept: the report comes on one */
#define RUN_OUTPUT_CAP (32u << 20)
/* the largest file a binary patch may write that is still read as text */
#define BIN_TEXT_MAX (1u << 20)

/*
 * How the test command runs.  The report comes through descriptor 3, a
 * pipe to the grader ($FW_REPORT is /dev/fd/3): what the code under test
 * writes there cannot be taken back, so a report forged after the
 * runner's own shows as a second one, and there is no report file in the
 * workspace to rewrite or replace by a link.  The command's stdout goes
 * to stderr, where the runner's count line is looked for.  TAP reports
 * are the command's stdout, as before.
 */
static const char run_report_wrapper[] = "exec 3>&1 1>&2; exec sh -c \"$1\"";
/* Python runs as with -P -s and no plugins but the ones the command
 * names: nothing the patch leaves on the path starts with the runner */
static const char *const run_env[] = {
	"FW_REPORT=/dev/fd/3", "PYTHONSAFEPATH=1", "PYTHONNOUSERSITE=1",
	"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1", NULL,
};
static const char *const run_env_tap[] = {
	"FW_REPORT=/dev/null", "PYTHONSAFEPATH=1", "PYTHONNOUSERSITE=1",
	"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1", NULL,
};

struct store_slot {
	char *path;
	struct fw_store *s;
};

static int in_list(const struct fw_strlist *l, const char *s);

struct fw_grader {
	struct fw_grade_opts o;
	struct store_slot stores[MAX_STORES];
	size_t nstores;
	/* test literals of the last original tree seen */
	char lit_tree[FW_OID_HEX];
	struct fw_store *lit_store;
	struct fw_strlist lits;
	/* top-level names the sandbox's Python imports from its site
	 * directories (listed once) */
	struct fw_strlist installed;
	int have_installed;
};

struct fw_grader *fw_grader_new(const struct fw_grade_opts *o)
{
	struct fw_grader *g = calloc(1, sizeof *g);
	if (!g)
		return NULL;
	g->o = *o;
	if (g->o.timeout_s <= 0)
		g->o.timeout_s = 300;
	return g;
}

void fw_grader_free(struct fw_grader *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->nstores; i++) {
		free(g->stores[i].path);
		fw_store_free(g->stores[i].s);
	}
	fw_strlist_release(&g->lits);
	fw_strlist_release(&g->installed);
	free(g);
}

static struct fw_store *store_for(struct fw_grader *g, const char *path, char *err, size_t errlen)
{
	for (size_t i = 0; i < g->nstores; i++)
		if (strcmp(g->stores[i].path, path) == 0)
			return g->stores[i].s;
	struct fw_store *s = fw_store_open(path, 0, err, errlen);
	if (!s)
		return NULL;
	if (g->nstores == MAX_STORES) {
		free(g->stores[0].path);
		fw_store_free(g->stores[0].s);
		memmove(g->stores, g->stores + 1, (MAX_STORES - 1) * sizeof g->stores[0]);
		g->nstores--;
	}
	char *p = strdup(path);
	if (!p) {
		fw_store_free(s);
		fw_seterr(err, errlen, "out of memory");
		return NULL;
	}
	g->stores[g->nstores++] = (struct store_slot){ p, s };
	return s;
}

/* Adds to l the top-level names Python can import from the site
 * directories that the globs pats (NULL-terminated) below root name:
 * packages, modules and extension modules, without their metadata.
 * Returns 0 or -1 (out of memory). */
static int list_site(struct fw_strlist *l, const char *root, const char *const *pats)
{
	for (size_t p = 0; pats[p]; p++) {
		glob_t gl;
		char pat[4200];
		snprintf(pat, sizeof pat, "%s%s", root, pats[p]);
		if (glob(pat, 0, NULL, &gl) != 0)
			continue;
		for (size_t i = 0; i < gl.gl_pathc; i++) {
			DIR *d = opendir(gl.gl_pathv[i]);
			struct dirent *e;
			while (d && (e = readdir(d))) {
				char name[256];
				snprintf(name, sizeof name, "%s", e->d_name);
				if (name[0] == '.' || !strcmp(name, "__pycache__") ||
				    strstr(name, ".dist-info") || strstr(name, ".egg-info") ||
				    strstr(name, ".pth"))
					continue;
				char *dot = strchr(name, '.');
				if (dot)
					*dot = '\0';
				if (name[0] && !in_list(l, name) && fw_strlist_add(l, name) < 0) {
					closedir(d);
					globfree(&gl);
					return -1;
				}
			}
			if (d)
				closedir(d);
		}
		globfree(&gl);
	}
	return 0;
}

static const char *const system_sites[] = { "/usr/lib/python3*/dist-packages",
					    "/usr/lib/python3*/site-packages",
					    "/usr/local/lib/python3*/dist-packages",
					    "/usr/local/lib/python3*/site-packages", NULL };

/* Lists once the top-level names the sandbox's Python can import from its
 * site directories (the sandbox binds /usr as the host has it).  Returns
 * 0 or -1 (out of memory). */
static int list_installed(struct fw_grader *g)
{
	if (g->have_installed)
		return 0;
	if (list_site(&g->installed, "", system_sites) < 0)
		return -1;
	g->have_installed = 1;
	return 0;
}

/* ---- reading the rollout --------------------------------------------------------- */

/* A NUL-terminated copy of the string at key of map m: 1 found, 0 absent,
 * -1 another type (or out of memory). */
static int dup_str(struct fw_mpv m, const char *key, char **out)
{
	struct fw_mpv v;
	const char *s;
	size_t n;
	*out = NULL;
	if (fw_mp_get(m, key, &v) != 1)
		return 0;
	if (fw_mp_str(v, &s, &n) < 0 || memchr(s, '\0', n))
		return -1;
	return (*out = strndup(s, n)) ? 1 : -1;
}

/* The strings of the array at key into l: 1, 0 absent, -1 not an array of
 * strings. */
static int str_array(struct fw_mpv m, const char *key, struct fw_strlist *l)
{
	struct fw_mpv v, e;
	struct fw_mp_iter it;
	if (fw_mp_get(m, key, &v) != 1)
		return 0;
	if (fw_mp_type(v) != FW_MP_ARRAY || fw_mp_iter_init(&it, v) < 0)
		return -1;
	int k;
	while ((k = fw_mp_iter_next(&it, &e)) == 1) {
		const char *s;
		size_t n;
		if (fw_mp_str(e, &s, &n) < 0)
			return -1;
		char *t = strndup(s, n);
		if (!t || fw_strlist_add(l, t) < 0) {
			free(t);
			return -1;
		}
		free(t);
	}
	return k < 0 ? -1 : 1;
}

static int hex40(const char *s)
{
	if (!s || strlen(s) != 40)
		return 0;
	for (const char *p = s; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return 0;
	return 1;
}

static int in_list(const struct fw_strlist *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i], s) == 0)
			return 1;
	return 0;
}

/* ---- one grading ------------------------------------------------------------------ */

struct orig_cache {
	struct fw_store *s;
	const char *tree;
	struct fw_strlist paths;
	char **data;
	size_t n, cap;
};

static const char *orig_lookup(void *arg, const char *path)
{
	struct orig_cache *c = arg;
	for (size_t i = 0; i < c->paths.n; i++)
		if (strcmp(c->paths.v[i], path) == 0)
			return c->data[i];
	char *d = NULL;
	size_t len;
	char e[64];
	if (fw_store_read(c->s, c->tree, path, &d, &len, e, sizeof e) < 0)
		d = NULL;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 8;
		char **v = realloc(c->data, cap * sizeof *v);
		if (!v) {
			free(d);
			return NULL;
		}
		c->data = v;
		c->cap = cap;
	}
	if (fw_strlist_add(&c->paths, path) < 0) {
		free(d);
		return NULL;
	}
	c->data[c->n++] = d;
	return d;
}

static void orig_cache_free(struct orig_cache *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->data[i]);
	free(c->data);
	fw_strlist_release(&c->paths);
}

/* Everything one grading holds, released together. */
struct job {
	char *task_id, *tree, *orig, *cmd, *report, *store_path, *patch, *env_id;
	struct fw_env *env;   /* where the tests run; NULL: the system */
	struct fw_strlist f2p, p2p, xfail, scope;
	char tmp[4096], ws[4200];
	struct fw_store *s;
	struct fw_file *ofiles, *tfiles;
	size_t nofiles, ntfiles;
	struct fw_patch patch_parsed;
	struct fw_hacks hacks;
	struct fw_report *rep;
	int have_report;      /* the tests ran and left a report */
	const char *killed;   /* cause name when a limit ended the run */
	double time;
	int timed;
	char reason[640];
	char error[512];
};

static void job_free(struct job *j)
{
	free(j->task_id);
	free(j->tree);
	free(j->orig);
	free(j->cmd);
	free(j->report);
	free(j->store_path);
	free(j->patch);
	free(j->env_id);
	free(j->env);
	fw_strlist_release(&j->f2p);
	fw_strlist_release(&j->p2p);
	fw_strlist_release(&j->xfail);
	fw_strlist_release(&j->scope);
	fw_files_free(j->ofiles, j->nofiles);
	fw_files_free(j->tfiles, j->ntfiles);
	fw_patch_free(&j->patch_parsed);
	fw_hacks_free(&j->hacks);
	fw_report_free(j->rep);
	if (j->tmp[0])
		fw_rmtree(j->tmp);
}

/* Bad input: the message goes to grade.error and reason.  Returns 1. */
static int bad(struct job *j, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(j->error, sizeof j->error, fmt, ap);
	va_end(ap);
	snprintf(j->reason, sizeof j->reason, "%s", j->error);
	return 1;
}

static int read_task(struct fw_grader *g, struct fw_mpv rec, struct job *j)
{
	struct fw_mpv task, v;
	if (fw_mp_get(rec, "task", &task) != 1)
		return bad(j, "rollout has no task");
	if (fw_mp_type(task) != FW_MP_MAP)
		return bad(j, "'task' is %s, not map", fw_mp_type_name(fw_mp_type(task)));
	if (dup_str(task, "id", &j->task_id) < 0)
		return bad(j, "task 'id' is not a string");
	if (dup_str(task, "tree", &j->tree) != 1 || !hex40(j->tree))
		return bad(j, "task has no 'tree' (40 hex digits)");
	if (dup_str(task, "orig_tree", &j->orig) != 1 || !hex40(j->orig))
		return bad(j, "task has no 'orig_tree' (40 hex digits)");
	if (dup_str(task, "test_cmd", &j->cmd) != 1 || !*j->cmd)
		return bad(j, "task has no 'test_cmd'");
	if (dup_str(task, "report", &j->report) < 0 ||
	    (j->report && fw_report_format_parse(j->report) < 0))
		return bad(j, "task 'report' is not junit, tap or gotest");
	if (str_array(task, "f2p", &j->f2p) != 1 || j->f2p.n == 0)
		return bad(j, "task has no 'f2p' tests");
	if (str_array(task, "p2p", &j->p2p) < 0)
		return bad(j, "task 'p2p' is not an array of strings");
	if (str_array(task, "xfail", &j->xfail) < 0)
		return bad(j, "task 'xfail' is not an array of strings");
	if (str_array(task, "scope", &j->scope) < 0)
		return bad(j, "task 'scope' is not an array of strings");
	if (dup_str(task, "store", &j->store_path) < 0)
		return bad(j, "task 'store' is not a string");
	if (dup_str(task, "env", &j->env_id) < 0)
		return bad(j, "task 'env' is not a string");
	if (fw_mp_get(rec, "patch", &v) != 1)
		return bad(j, "rollout has no patch");
	const char *s;
	size_t n;
	if (fw_mp_str(v, &s, &n) < 0 || memchr(s, '\0', n))
		return bad(j, "corrupt patch: 'patch' is %s, not text",
			   fw_mp_type_name(fw_mp_type(v)));
	if (!(j->patch = strndup(s, n)))
		return -1;
	const char *store = g->o.store ? g->o.store : j->store_path;
	if (!store)
		return bad(j, "no task store (give --store, or a task with 'store')");
	char e[512];
	if (!(j->s = store_for(g, store, e, sizeof e)))
		return bad(j, "task store: %s", e);
	if (fw_store_files(j->s, j->tree, &j->tfiles, &j->ntfiles, e, sizeof e) < 0)
		return bad(j, "task tree %s is missing from the store %s", j->tree, store);
	if (fw_store_files(j->s, j->orig, &j->ofiles, &j->nofiles, e, sizeof e) < 0)
		return bad(j, "original tree %s is missing from the store %s", j->orig, store);
	/* the environment: --env's, else the task's */
	const char *env = g->o.env ? g->o.env : j->env_id;
	if (env) {
		char es[4096];
		if (!(j->env = malloc(sizeof *j->env)))
			return -1;
		if (fw_env_store_path(g->o.env_store, store, es, sizeof es, e, sizeof e) < 0 ||
		    fw_env_open_arg(j->env, es, env, e, sizeof e) < 0)
			return bad(j, "%s", e);
	}
	char pe[256];
	if (fw_patch_parse(&j->patch_parsed, j->patch, n, pe, sizeof pe) < 0)
		return bad(j, "corrupt patch: %s", pe);
	return 0;
}

/* Writes n bytes to path (mode from the git mode), creating directories;
 * nothing on the way may be a symbolic link the patch planted. */
static int put_file(const char *ws, const char *rel, const char *data, size_t n, unsigned mode)
{
	char path[8400];
	snprintf(path, sizeof path, "%s/%s", ws, rel);
	for (char *p = path + strlen(ws) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		struct stat st;
		if (lstat(path, &st) == 0 && !S_ISDIR(st.st_mode) && unlink(path) < 0)
			return -1;
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (fw_rmtree(path) < 0)
		return -1;
	if (!data)
		return 0;
	if (mode == 0120000)
		return symlink(data, path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		      mode == 0100755 ? 0755 : 0644);
	if (fd < 0)
		return -1;
	size_t off = 0;
	while (off < n) {
		ssize_t w = write(fd, data + off, n - off);
		if (w < 0) {
			close(fd);
			return -1;
		}
		off += (size_t)w;
	}
	return close(fd);
}

static int read_file(const char *path, char **data, size_t *len)
{
	struct stat st;
	*data = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	char *d = malloc((size_t)st.st_size + 1);
	size_t off = 0;
	while (d && off < (size_t)st.st_size) {
		ssize_t r = read(fd, d + off, (size_t)st.st_size - off);
		if (r <= 0)
			break;
		off += (size_t)r;
	}
	close(fd);
	if (!d)
		return -1;
	d[off] = '\0';
	*data = d;
	*len = off;
	return 0;
}

static const struct fw_file *find_file(const struct fw_file *f, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(f[i].path, path) == 0)
			return &f[i];
	return NULL;
}

/* Puts one protected path back as the original has it.  from_patch: the
 * patch touched it (a finding when it differed).  Returns 0 or -1. */
static int restore(struct job *j, const char *path, int from_patch, char *err, size_t errlen)
{
	enum fw_protect how = fw_protected_path(path, j->cmd);
	if (how == FW_PROTECT_NONE)
		return 0;
	const struct fw_file *of = find_file(j->ofiles, j->nofiles, path);
	char *odata = NULL, *cdata = NULL, *merged = NULL;
	size_t olen = 0, clen = 0, mlen = 0;
	int rc = -1, changed = 1;
	if (of && fw_store_read(j->s, j->orig, path, &odata, &olen, err, errlen) < 0)
		goto out;
	/* the patch's version, through no link it planted on the way */
	if (how == FW_PROTECT_SECTIONS &&
	    fw_read_beneath(j->ws, path, FW_WS_FILE_MAX, &cdata, &clen) == 0 &&
	    (!of || of->mode != 0120000)) {
		merged = fw_restore_sections(odata ? odata : "", olen, cdata, clen, &mlen, &changed);
		if (!merged) {
			fw_seterr(err, errlen, "out of memory");
			goto out;
		}
		if (changed && put_file(j->ws, path, merged, mlen, of ? of->mode : 0100644) < 0)
			goto fail;
	} else if (put_file(j->ws, path, odata, olen, of ? of->mode : 0) < 0) {
		goto fail;
	}
	if (from_patch && changed &&
	    fw_hacks_add(&j->hacks, FW_HACK_PROTECTED, "%s%s", path,
			 how == FW_PROTECT_SECTIONS ? " (test sections)" : "") < 0)
		goto oom;
	rc = 0;
	goto out;
fail:
	fw_seterr(err, errlen, "cannot restore '%s': %s", path, strerror(errno));
	goto out;
oom:
	fw_seterr(err, errlen, "out of memory");
out:
	free(odata);
	free(cdata);
	free(merged);
	return rc;
}

/* Puts back the protected files: those in t (the paths the patch
 * touched) and those in which the task tree differs from the original. */
static int restore_protected(struct job *j, const struct fw_strlist *tl, char *err, size_t errlen)
{
	const struct fw_strlist t = *tl;
	int rc = -1;
	for (size_t i = 0; i < t.n; i++)
		if (restore(j, t.v[i], 1, err, errlen) < 0)
			goto out;
	/* protected files in which the task tree itself differs */
	for (size_t i = 0; i < j->nofiles; i++) {
		const struct fw_file *o = &j->ofiles[i], *f;
		if (in_list(&t, o->path) || !fw_protected_path(o->path, j->cmd))
			continue;
		f = find_file(j->tfiles, j->ntfiles, o->path);
		if ((!f || strcmp(f->oid, o->oid) != 0) && restore(j, o->path, 0, err, errlen) < 0)
			goto out;
	}
	for (size_t i = 0; i < j->ntfiles; i++) {
		const char *p = j->tfiles[i].path;
		if (!in_list(&t, p) && fw_protected_path(p, j->cmd) &&
		    !find_file(j->ofiles, j->nofiles, p) && restore(j, p, 0, err, errlen) < 0)
			goto out;
	}
	rc = 0;
out:
	return rc;
}

/* patch-scope: every path the patch touched that it may not. */
static int check_scope(struct fw_grader *g, struct job *j, const struct fw_strlist *t)
{
	if (list_installed(g) < 0)
		return -1;
	/* an environment's packages are installed too; a rootfs's system
	 * is the sandbox's in place of the host's */
	struct fw_strlist env_names = { 0 };
	const struct fw_strlist *installed = &g->installed;
	if (j->env) {
		static const char *const env_sites[] = { "/lib/python3*/site-packages", NULL };
		int rootfs = j->env->kind == FW_ENV_ROOTFS;
		for (size_t i = 0; !rootfs && i < g->installed.n; i++)
			if (fw_strlist_add(&env_names, g->installed.v[i]) < 0)
				goto oom;
		if (list_site(&env_names, j->env->dir, rootfs ? system_sites : env_sites) < 0)
			goto oom;
		installed = &env_names;
	}
	struct fw_scope sc = { &j->scope, j->ofiles, j->nofiles, installed, j->cmd };
	for (size_t i = 0; i < t->n; i++) {
		const char *why = fw_scope_why(&sc, t->v[i]);
		if (why && fw_hacks_add(&j->hacks, FW_HACK_SCOPE, "%s: %s", t->v[i], why) < 0)
			goto oom;
	}
	fw_strlist_release(&env_names);
	return 0;
oom:
	fw_strlist_release(&env_names);
	return -1;
}

/* 1 when n bytes at d read as text: no NUL in the first 8000 (git's own
 * test). */
static int is_text(const char *d, size_t n)
{
	return !memchr(d, '\0', n < 8000 ? n : 8000);
}

/*
 * binary-patch: a binary patch whose target is text (the original file, or
 * what the patch wrote).  The text it wrote goes through the detectors
 * like added lines, so a payload does not hide in a binary hunk.
 */
static int check_binary(struct job *j, fw_orig_fn orig, void *arg, const struct fw_strlist *lits)
{
	struct fw_patch bin = { 0 };
	int rc = -1;
	for (size_t i = 0; i < j->patch_parsed.n; i++) {
		const struct fw_patch_file *f = &j->patch_parsed.v[i];
		if (!f->binary)
			continue;
		const char *path = f->new_path ? f->new_path : f->old_path;
		if (!path)
			continue;
		const char *o = f->old_path ? orig(arg, f->old_path) : NULL;
		char *d = NULL;
		size_t n = 0;
		int wrote = f->new_path &&
			    fw_read_beneath(j->ws, path, BIN_TEXT_MAX, &d, &n) == 0;
		if (!(o && is_text(o, strlen(o))) && !(wrote && is_text(d, n))) {
			free(d);
			continue;
		}
		if (fw_hacks_add(&j->hacks, FW_HACK_BINARY, "%s: binary patch of a text file", path) < 0) {
			free(d);
			goto out;
		}
		if (wrote && is_text(d, n)) {
			/* the file's lines as a patch that adds them all */
			struct fw_buf b = { 0 };
			size_t lines = 0;
			for (size_t k = 0; k < n; k++)
				lines += d[k] == '\n';
			lines += n && d[n - 1] != '\n';
			int fail = fw_buf_printf(&b, "--- a/%s\n+++ b/%s\n@@ -0,0 +1,%zu @@\n", path,
						 path, lines) < 0;
			for (size_t k = 0; k < n && !fail;) {
				size_t e = k;
				while (e < n && d[e] != '\n')
					e++;
				fail |= fw_buf_append(&b, "+", 1) < 0 || fw_buf_append(&b, d + k, e - k) < 0 ||
					fw_buf_append(&b, "\n", 1) < 0;
				k = e + 1;
			}
			char pe[128];
			int k = fail ? -1 : fw_patch_parse(&bin, (const char *)b.p, b.n, pe, sizeof pe);
			fw_buf_free(&b);
			if (k < 0) {
				free(d);
				goto out;
			}
		}
		free(d);
	}
	rc = bin.n ? fw_detect_patch(&bin, orig, arg, lits, &j->hacks) : 0;
	rc = rc < 0 ? -1 : 0;
out:
	fw_patch_free(&bin);
	return rc;
}

/* `git apply` of the patch in the workspace.  Returns 0 applied, 1 does
 * not apply, 2 corrupt (message in msg), -1 cannot run git. */
static int apply_patch(struct job *j, char *msg, size_t msglen)
{
	char pf[4200], ef[4200];
	snprintf(pf, sizeof pf, "%s/patch", j->tmp);
	snprintf(ef, sizeof ef, "%s/apply.err", j->tmp);
	if (put_file(j->tmp, "patch", j->patch, strlen(j->patch), 0100644) < 0) {
		fw_seterr(msg, msglen, "cannot write the patch: %s", strerror(errno));
		return -1;
	}
	/* the environment without GIT_* variables that would point git at
	 * another repository, and without the host's system and global
	 * configuration (core.autocrlf there would change what the patch
	 * writes): only the workspace's own, which the host wrote */
	size_t ne = 0;
	while (environ[ne])
		ne++;
	char **envp = calloc(ne + 3, sizeof *envp);
	if (!envp)
		return -1;
	size_t k = 0;
	for (size_t i = 0; i < ne; i++)
		if (strncmp(environ[i], "GIT_", 4) != 0)
			envp[k++] = environ[i];
	envp[k++] = "GIT_CONFIG_NOSYSTEM=1";
	envp[k++] = "GIT_CONFIG_GLOBAL=/dev/null";
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, ef, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	char *argv[] = { "git", "-C", j->ws, "apply", "--whitespace=nowarn", "--", pf, NULL };
	pid_t pid;
	int st = posix_spawnp(&pid, "git", &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	free(envp);
	if (st != 0) {
		fw_seterr(msg, msglen, "cannot run git: %s", strerror(st));
		return -1;
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	char *e = NULL;
	size_t en = 0;
	read_file(ef, &e, &en);
	const char *first = e ? e : "";
	/* the first line that says what went wrong */
	const char *l = strstr(first, "error: ");
	l = l ? l + 7 : first;
	size_t ln = strcspn(l, "\n");
	int corrupt = e && (strstr(e, "corrupt patch") || strstr(e, "No valid patches") ||
			    strstr(e, "unrecognized input") || strstr(e, "lacks filename") ||
			    strstr(e, "patch fragment without header") ||
			    strstr(e, "unable to find filename"));
	fw_seterr(msg, msglen, "%.*s", (int)(ln > 200 ? 200 : ln), l);
	free(e);
	return corrupt ? 2 : 1;
}

/* 1 when a component of path names git's own directory as git reads
 * names on any file system: ".git" in any case, with trailing dots or
 * spaces. */
static int git_dir_in(const char *path)
{
	for (const char *c = path; *c;) {
		size_t n = strcspn(c, "/");
		if (n >= 4 && strncasecmp(c, ".git", 4) == 0 && strspn(c + 4, ". ") >= n - 4)
			return 1;
		c += n + (c[n] == '/');
	}
	return 0;
}

/* patch-scope for each path of a patch that git refused to apply into
 * the workspace's .git: the attempt is named though nothing was written.
 * Returns 0 or -1 (out of memory). */
static int git_metadata(struct job *j)
{
	for (size_t i = 0; i < j->patch_parsed.n; i++) {
		const struct fw_patch_file *f = &j->patch_parsed.v[i];
		const char *p[2] = { f->old_path, f->new_path };
		for (int k = 0; k < 2; k++)
			if (p[k] && (k == 0 || !f->old_path || strcmp(p[0], p[1])) &&
			    git_dir_in(p[k]) &&
			    fw_hacks_add(&j->hacks, FW_HACK_SCOPE, "%s: git metadata", p[k]) < 0)
				return -1;
	}
	return 0;
}

static int load_literals(struct fw_grader *g, struct job *j)
{
	if (g->lit_store == j->s && strcmp(g->lit_tree, j->orig) == 0)
		return 0;
	fw_strlist_release(&g->lits);
	g->lit_store = NULL;
	for (size_t i = 0; i < j->nofiles; i++) {
		const struct fw_file *f = &j->ofiles[i];
		if (f->mode == 0120000 || !fw_is_test_path(f->path))
			continue;
		char *d;
		size_t n;
		char e[64];
		if (fw_store_read(j->s, j->orig, f->path, &d, &n, e, sizeof e) < 0)
			continue;
		int rc = 0;
		if (n <= LIT_FILE_MAX && !memchr(d, '\0', n))
			rc = fw_test_literals(d, n, &g->lits);
		free(d);
		if (rc < 0)
			return -1;
	}
	g->lit_store = j->s;
	snprintf(g->lit_tree, sizeof g->lit_tree, "%s", j->orig);
	return 0;
}

struct shell_scan {
	struct fw_hacks *h;
	int turn, rc;
};

/* cache-read in one shell block of a turn's text */
static void scan_block(void *arg, const char *s, size_t n)
{
	struct shell_scan *sc = arg;
	if (sc->rc == 0 && fw_mentions_cache(s, n) &&
	    fw_hacks_add(sc->h, FW_HACK_CACHE, "turn %d: %.*s", sc->turn, (int)(n > 80 ? 80 : n),
			 s) < 0)
		sc->rc = -1;
}

/* 1 when a turn of this role is the agent's own (what it said it ran),
 * not the prompt or a tool's output */
static int agent_role(struct fw_mpv turn)
{
	struct fw_mpv r;
	const char *s;
	size_t n;
	if (fw_mp_get(turn, "role", &r) != 1 || fw_mp_str(r, &s, &n) < 0)
		return 1;
	return !((n == 4 && !memcmp(s, "user", 4)) || (n == 4 && !memcmp(s, "tool", 4)) ||
		 (n == 6 && !memcmp(s, "system", 6)));
}

/* network and cache-read findings from the rollout's events, its tool
 * calls and the shell blocks of its agent turns */
static int rollout_findings(struct fw_mpv rec, struct fw_hacks *h)
{
	struct fw_mpv v, e, k;
	struct fw_mp_iter it, ci;
	const char *s, *d;
	size_t n, dn;
	if (fw_mp_get(rec, "events", &v) == 1 && fw_mp_iter_init(&it, v) >= 0 &&
	    fw_mp_type(v) == FW_MP_ARRAY) {
		while (fw_mp_iter_next(&it, &e) == 1) {
			if (fw_mp_type(e) == FW_MP_MAP) {
				if (fw_mp_get(e, "kind", &k) != 1 || fw_mp_str(k, &s, &n) < 0)
					continue;
			} else if (fw_mp_str(e, &s, &n) < 0) {
				continue;
			}
			if (!(n >= 10 && memcmp(s, "net-denied", 10) == 0))
				continue;
			d = "", dn = 0;
			if (fw_mp_type(e) == FW_MP_MAP && fw_mp_get(e, "detail", &k) == 1)
				fw_mp_str(k, &d, &dn);
			if (fw_hacks_add(h, FW_HACK_NETWORK, "%.*s", (int)(dn > 200 ? 200 : dn), d) < 0)
				return -1;
		}
	}
	if (fw_mp_get(rec, "turns", &v) != 1 || fw_mp_type(v) != FW_MP_ARRAY ||
	    fw_mp_iter_init(&it, v) < 0)
		return 0;
	for (int t = 0; fw_mp_iter_next(&it, &e) == 1; t++) {
		if (fw_mp_type(e) != FW_MP_MAP)
			continue;
		if (agent_role(e) && fw_mp_get(e, "text", &k) == 1 && fw_mp_str(k, &s, &n) >= 0) {
			struct shell_scan sc = { h, t, 0 };
			fw_shell_blocks(s, n, scan_block, &sc);
			if (sc.rc < 0)
				return -1;
		}
		if (fw_mp_get(e, "calls", &k) != 1 || fw_mp_type(k) != FW_MP_ARRAY ||
		    fw_mp_iter_init(&ci, k) < 0)
			continue;
		struct fw_mpv c, a;
		while (fw_mp_iter_next(&ci, &c) == 1) {
			if (fw_mp_get(c, "args", &a) != 1 || fw_mp_str(a, &s, &n) < 0)
				continue;
			if (fw_mentions_cache(s, n) &&
			    fw_hacks_add(h, FW_HACK_CACHE, "turn %d: %.*s", t, (int)(n > 80 ? 80 : n),
					 s) < 0)
				return -1;
		}
	}
	return 0;
}

/*
 * report-mismatch: what the report says against what the runner said.  A
 * report better than its runner is forged: the runner failed (exit status
 * not 0) and the report holds no failure; the runner's count line says
 * tests failed and the report holds no failure, or it says fewer passed
 * than the report does; or the report descriptor got more than one report.
 */
static int check_agreement(struct job *j, const struct fw_sandbox_result *res, int tap)
{
	const struct fw_report *r = j->rep;
	size_t bad = fw_report_count(r, FW_FAIL) + fw_report_count(r, FW_ERROR);
	size_t pass = fw_report_count(r, FW_PASS);
	if (!tap && r->docs > 1 &&
	    fw_hacks_add(&j->hacks, FW_HACK_MISMATCH, "%d reports on the report descriptor",
			 r->docs) < 0)
		return -1;
	if (res->exit_code != 0 && bad == 0 &&
	    fw_hacks_add(&j->hacks, FW_HACK_MISMATCH,
			 "the runner exited %d, the report has no failure", res->exit_code) < 0)
		return -1;
	struct fw_summary sm;
	if (tap || res->err.truncated || !res->err.data ||
	    !fw_summary_find(res->err.data, res->err.len, &sm))
		return 0;
	if (sm.failed + sm.errors > 0 && bad == 0 &&
	    fw_hacks_add(&j->hacks, FW_HACK_MISMATCH,
			 "the runner counted %ld failed and %ld errors, the report none", sm.failed,
			 sm.errors) < 0)
		return -1;
	if ((long)pass > sm.passed + sm.xpassed &&
	    fw_hacks_add(&j->hacks, FW_HACK_MISMATCH,
			 "the runner counted %ld passed, the report %zu", sm.passed + sm.xpassed,
			 pass) < 0)
		return -1;
	return 0;
}

/* Runs the test command and reads its report.  Returns 0, 1 bad input
 * (report that cannot be parsed), -1 the sandbox failed. */
static int run_tests(struct fw_grader *g, struct job *j, char *err, size_t errlen)
{
	int tap = j->report && strcmp(j->report, "tap") == 0;
	struct fw_sandbox_opts o;
	fw_sandbox_opts_init(&o);
	o.workspace = j->ws;
	o.timeout_s = g->o.timeout_s;
	o.fsize_bytes = 1ull << 30;
	o.output_cap = RUN_OUTPUT_CAP;
	o.env = tap ? run_env_tap : run_env;
	const char *binds[2], *vars[8 + FW_ENV_MAXVARS];
	if (fw_env_apply(j->env, &o, binds, 2, vars, 8 + FW_ENV_MAXVARS) < 0) {
		fw_seterr(err, errlen, "too many variables");
		return -1;
	}
	char *argv_tap[] = { "sh", "-c", j->cmd, NULL };
	char *argv_fd[] = { "sh", "-c", (char *)run_report_wrapper, "sh", j->cmd, NULL };
	struct fw_sandbox_result res;
	if (fw_sandbox_run(&o, tap ? argv_tap : argv_fd, &res, err, errlen) < 0)
		return -1;
	int rc = 0;
	j->time = res.wall_s;
	j->timed = 1;
	if (!(j->rep = fw_report_new())) {
		fw_seterr(err, errlen, "out of memory");
		rc = -1;
		goto out;
	}
	if (res.cause != FW_SANDBOX_OK) {
		j->killed = fw_sandbox_cause_name(res.cause);
		snprintf(j->reason, sizeof j->reason, "%s after %.1f s", j->killed, res.wall_s);
		if (fw_hacks_add(&j->hacks, res.cause == FW_SANDBOX_TIMEOUT ? FW_HACK_TIMEOUT
					  : FW_HACK_RESOURCE, "%s after %.1f s", j->killed,
				 res.wall_s) < 0)
			rc = -1;
		goto out;
	}
	char perr[256] = "";
	int n;
	const char *rd = res.out.data ? res.out.data : "";
	size_t rn = res.out.len;
	if (res.out.truncated) {
		rc = bad(j, "cannot parse the test report: larger than %u MiB", RUN_OUTPUT_CAP >> 20);
		goto out;
	}
	if (tap) {
		n = fw_report_parse_tap(j->rep, rd, rn, perr, sizeof perr);
	} else {
		size_t lead = 0;
		while (lead < rn && (rd[lead] == ' ' || rd[lead] == '\n' || rd[lead] == '\r' ||
				     rd[lead] == '\t'))
			lead++;
		if (lead == rn) {
			n = 0;
		} else {
			int fmt = j->report ? fw_report_format_parse(j->report) : FW_REPORT_JUNIT;
			n = fmt == FW_REPORT_GOTEST
				    ? fw_report_parse_gotest(j->rep, rd, rn, perr, sizeof perr)
				    : fw_report_parse_junit(j->rep, rd, rn, perr, sizeof perr);
			if (n < 0) {
				rc = bad(j, "cannot parse the test report: %s", perr);
				goto out;
			}
		}
	}
	if (n < 0) {
		fw_seterr(err, errlen, "out of memory");
		rc = -1;
		goto out;
	}
	if (j->rep->n == 0) {
		const char *tail = res.err.data ? res.err.data : "";
		if (res.err.len > 160)
			tail += res.err.len - 160;
		snprintf(j->reason, sizeof j->reason, "no test results (exit %d): %s", res.exit_code,
			 tail);
		for (char *p = j->reason; *p; p++)
			if (*p == '\n' || *p == '\t')
				*p = ' ';
		goto out;
	}
	j->have_report = 1;
	if (check_agreement(j, &res, tap) < 0) {
		fw_seterr(err, errlen, "out of memory");
		rc = -1;
	}
out:
	fw_sandbox_result_free(&res);
	return rc;
}

static int grade(struct fw_grader *g, struct fw_mpv rec, struct job *j, char *err, size_t errlen)
{
	int k = read_task(g, rec, j);
	if (k)
		return k;
	const char *tmpdir = g->o.tmpdir ? g->o.tmpdir : getenv("TMPDIR");
	snprintf(j->tmp, sizeof j->tmp, "%s/grade.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
	if (!mkdtemp(j->tmp)) {
		fw_seterr(err, errlen, "cannot make a temporary directory in '%s': %s",
		       tmpdir && *tmpdir ? tmpdir : "/tmp", strerror(errno));
		j->tmp[0] = '\0';
		return -1;
	}
	snprintf(j->ws, sizeof j->ws, "%s/w", j->tmp);
	char e[512];
	if (fw_workspace_create(j->s, j->tree, j->ws, NULL, NULL, e, sizeof e) < 0)
		return bad(j, "cannot check out the task tree: %s", e);

	/* findings that do not depend on the run */
	struct orig_cache oc = { .s = j->s, .tree = j->orig };
	k = load_literals(g, j);
	if (k == 0)
		k = fw_detect_patch(&j->patch_parsed, orig_lookup, &oc, &g->lits, &j->hacks);
	orig_cache_free(&oc);
	if (k < 0 || rollout_findings(rec, &j->hacks) < 0) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}

	const char *p = j->patch;
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	if (*p) {
		k = apply_patch(j, e, sizeof e);
		if (k < 0) {
			fw_seterr(err, errlen, "%s", e);
			return -1;
		}
		if (k == 2)
			return bad(j, "corrupt patch: %s", e);
		if (k == 1) {
			snprintf(j->reason, sizeof j->reason, "patch does not apply: %s", e);
			if (git_metadata(j) < 0) {
				fw_seterr(err, errlen, "out of memory");
				return -1;
			}
			return 0;
		}
	}
	struct fw_strlist t = { 0 };
	/* what the patch touched, from the files alone: never through the
	 * workspace's repository, whose configuration is no part of a task */
	if (fw_workspace_changed(j->s, j->tree, j->ws, &t, err, errlen) < 0) {
		fw_strlist_release(&t);
		return -1;
	}
	k = check_scope(g, j, &t);
	if (k == 0) {
		struct orig_cache bc = { .s = j->s, .tree = j->orig };
		k = check_binary(j, orig_lookup, &bc, &g->lits);
		orig_cache_free(&bc);
	}
	if (k < 0) {
		fw_strlist_release(&t);
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	k = restore_protected(j, &t, err, errlen);
	fw_strlist_release(&t);
	if (k < 0)
		return -1;
	struct fw_strlist scrubbed = { 0 };
	if (fw_workspace_scrub(j->ws, &scrubbed, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < scrubbed.n; i++) {
		const char *b = strrchr(scrubbed.v[i], '/');
		b = b ? b + 1 : scrubbed.v[i];
		size_t bn = strlen(b);
		/* editor and patch leftovers are dropped without a finding */
		if ((bn && b[bn - 1] == '~') || (b[0] == '.' && b[1] == '#') ||
		    (bn > 4 && (!strcmp(b + bn - 4, ".rej") || !strcmp(b + bn - 4, ".swp") ||
				!strcmp(b + bn - 4, ".swo"))) ||
		    (bn > 5 && !strcmp(b + bn - 5, ".orig")))
			continue;
		if (fw_hacks_add(&j->hacks, FW_HACK_CACHE, "%s: cache or build output added",
				 scrubbed.v[i]) < 0) {
			fw_strlist_release(&scrubbed);
			return -1;
		}
	}
	fw_strlist_release(&scrubbed);
	return run_tests(g, j, err, errlen);
}

/* Packs s as a msgpack str.  Text grade writes comes from the patch, the
 * run's output and the report, cut at byte counts: each byte that is not
 * part of valid UTF-8 becomes U+FFFD, so the record stays text that JSON
 * can hold. */
static void pack_str(msgpack_packer *pk, const char *s)
{
	fw_pack_text(pk, s, strlen(s));
}

int fw_grade_rollout(struct fw_grader *g, struct fw_mpv rec, struct fw_buf *out,
		     char *err, size_t errlen)
{
	struct job j;
	memset(&j, 0, sizeof j);
	struct fw_buf gb = { 0 };
	int rc = grade(g, rec, &j, err, errlen);
	if (rc < 0)
		goto out;

	/* score: every listed test, f2p first; a test listed twice counts once */
	struct fw_score sc = { 0 };
	const struct fw_report *r = j.have_report ? j.rep : NULL;
	const struct fw_strlist *lists[2] = { &j.f2p, &j.p2p };
	size_t ntests = 0;
	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < lists[l]->n; i++) {
			const char *id = lists[l]->v[i];
			if (l == 1 && in_list(&j.f2p, id))
				continue;
			int ok = fw_test_passes(r, id, l == 1 && in_list(&j.xfail, id), NULL);
			if (l == 0) {
				sc.f2p_total++;
				sc.f2p_pass += ok;
			} else {
				sc.p2p_total++;
				sc.p2p_pass += ok;
			}
			ntests++;
		}
	if (j.error[0])
		sc.f2p_pass = sc.p2p_pass = 0;
	sc.resolved = !j.error[0] && r && sc.f2p_total > 0 && sc.f2p_pass == sc.f2p_total &&
		      sc.p2p_pass == sc.p2p_total;
	double reward = j.error[0] ? 0 : fw_reward_of(g->o.reward, &sc);
	int zeroed = j.hacks.n && !g->o.hacks_warn && reward > 0;
	if (j.hacks.n && !g->o.hacks_warn)
		reward = 0;
	if (!j.reason[0]) {
		if (sc.resolved)
			snprintf(j.reason, sizeof j.reason, "resolved");
		else
			snprintf(j.reason, sizeof j.reason, "%u of %u f2p fail, %u of %u p2p fail",
				 sc.f2p_total - sc.f2p_pass, sc.f2p_total, sc.p2p_total - sc.p2p_pass,
				 sc.p2p_total);
	}
	if (j.hacks.n) {
		size_t n = strlen(j.reason);
		n += (size_t)snprintf(j.reason + n, sizeof j.reason - n, "; hacks:");
		for (size_t i = 0; i < j.hacks.n && n < sizeof j.reason; i++) {
			const char *name = fw_hack_name(j.hacks.v[i].kind);
			int dup = 0;
			for (size_t m = 0; m < i; m++)
				dup |= j.hacks.v[m].kind == j.hacks.v[i].kind;
			if (!dup)
				n += (size_t)snprintf(j.reason + n, sizeof j.reason - n, " %s", name);
		}
		if (zeroed && n < sizeof j.reason)
			snprintf(j.reason + n, sizeof j.reason - n, " (reward zeroed)");
	}

	msgpack_packer pk;
	fw_buf_packer(&pk, &gb);
	int nfields = 11 + (j.killed != NULL) + (j.timed && !g->o.no_time) + (j.error[0] != 0);
	msgpack_pack_map(&pk, nfields);
	pack_str(&pk, "f2p_pass"); msgpack_pack_uint32(&pk, sc.f2p_pass);
	pack_str(&pk, "f2p_total"); msgpack_pack_uint32(&pk, sc.f2p_total);
	pack_str(&pk, "p2p_pass"); msgpack_pack_uint32(&pk, sc.p2p_pass);
	pack_str(&pk, "p2p_total"); msgpack_pack_uint32(&pk, sc.p2p_total);
	pack_str(&pk, "resolved");
	sc.resolved ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
	pack_str(&pk, "reward"); msgpack_pack_double(&pk, reward);
	pack_str(&pk, "reward_by"); pack_str(&pk, fw_reward_name(g->o.reward));
	pack_str(&pk, "hacks");
	msgpack_pack_array(&pk, j.hacks.n);
	for (size_t i = 0; i < j.hacks.n; i++) {
		msgpack_pack_map(&pk, 2);
		pack_str(&pk, "name"); pack_str(&pk, fw_hack_name(j.hacks.v[i].kind));
		pack_str(&pk, "detail"); pack_str(&pk, j.hacks.v[i].detail);
	}
	pack_str(&pk, "tests");
	msgpack_pack_map(&pk, r ? ntests : 0);
	for (int l = 0; r && l < 2; l++)
		for (size_t i = 0; i < lists[l]->n; i++) {
			const char *id = lists[l]->v[i], *status;
			if (l == 1 && in_list(&j.f2p, id))
				continue;
			fw_test_passes(r, id, 0, &status);
			pack_str(&pk, id);
			pack_str(&pk, status);
		}
	/* the first line of each failing test's message: what the code did,
	 * for a teacher's hint */
	size_t nmsg = 0;
	for (int l = 0; r && l < 2; l++)
		for (size_t i = 0; i < lists[l]->n; i++) {
			const struct fw_test_result *tr = fw_report_find(r, lists[l]->v[i]);
			if ((l == 0 || !in_list(&j.f2p, lists[l]->v[i])) && tr && tr->message &&
			    tr->outcome >= FW_FAIL)
				nmsg++;
		}
	pack_str(&pk, "messages");
	msgpack_pack_map(&pk, nmsg);
	for (int l = 0; nmsg && l < 2; l++)
		for (size_t i = 0; i < lists[l]->n; i++) {
			const struct fw_test_result *tr = fw_report_find(r, lists[l]->v[i]);
			if ((l == 0 || !in_list(&j.f2p, lists[l]->v[i])) && tr && tr->message &&
			    tr->outcome >= FW_FAIL) {
				pack_str(&pk, lists[l]->v[i]);
				pack_str(&pk, tr->message);
			}
		}
	pack_str(&pk, "reason"); pack_str(&pk, j.reason);
	if (j.killed) {
		pack_str(&pk, "killed");
		pack_str(&pk, j.killed);
	}
	if (j.timed && !g->o.no_time) {
		pack_str(&pk, "time");
		msgpack_pack_double(&pk, (double)(long long)(j.time * 1000 + 0.5) / 1000);
	}
	if (j.error[0]) {
		pack_str(&pk, "error");
		pack_str(&pk, j.error);
		fw_seterr(err, errlen, "%s", j.error);
	}
	struct fw_field f = { "grade", 5, { gb.p, gb.n } };
	if (fw_buf_packed(&gb, 0) < 0 || fw_rec_set(out, rec, &f, 1) < 0) {
		fw_seterr(err, errlen, "out of memory");
		rc = -1;
	}
out:
	fw_buf_free(&gb);
	job_free(&j);
	return rc;
}
