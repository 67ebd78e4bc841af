/*
 * fw_env.c — task environments: content ids, the env store, mounting in
 * the clean room (see fw_env.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <git2.h>

#include "fw_base.h"
#include "fw_env.h"
#include "fw_sandbox.h"
#include "fw_workspace.h"

const char *fw_env_kind_name(enum fw_env_kind k)
{
	switch (k) {
	case FW_ENV_VENV: return "venv";
	case FW_ENV_ROOTFS: return "rootfs";
	default: return "prefix";
	}
}

static int exists_at(const char *dir, const char *rel, mode_t type)
{
	char p[PATH_MAX];
	struct stat st;
	if (snprintf(p, sizeof p, "%s/%s", dir, rel) >= (int)sizeof p)
		return 0;
	/* a link counts as what it names inside the tree would be: an
	 * absolute link (merged /usr: bin -> usr/bin is relative) is taken
	 * as present */
	if (lstat(p, &st) != 0)
		return 0;
	if (S_ISLNK(st.st_mode))
		return 1;
	return type == 0 || (st.st_mode & S_IFMT) == type;
}

enum fw_env_kind fw_env_kind_of(const char *dir)
{
	if (exists_at(dir, "pyvenv.cfg", S_IFREG))
		return FW_ENV_VENV;
	if (exists_at(dir, "etc", S_IFDIR) && exists_at(dir, "usr", S_IFDIR) &&
	    (exists_at(dir, "usr/bin/sh", 0) || exists_at(dir, "bin/sh", 0)))
		return FW_ENV_ROOTFS;
	return FW_ENV_PREFIX;
}

int fw_env_is_id(const char *s)
{
	size_t i = 0;
	for (; s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return i == FW_ENV_ID_LEN - 1;
}

/* ---- content ids ------------------------------------------------------------------ */

struct entry {
	char *name;
	unsigned mode; /* 040000, 0100644, 0100755, 0120000 */
	git_oid oid;
};

/* git's tree order: names compared bytewise, a tree's as if it ended in '/'. */
static int entry_cmp(const void *pa, const void *pb)
{
	const struct entry *a = pa, *b = pb;
	size_t la = strlen(a->name), lb = strlen(b->name), n = la < lb ? la : lb;
	int c = memcmp(a->name, b->name, n);
	if (c)
		return c;
	unsigned char ca = la > n ? (unsigned char)a->name[n] : a->mode == 040000 ? '/' : 0;
	unsigned char cb = lb > n ? (unsigned char)b->name[n] : b->mode == 040000 ? '/' : 0;
	return (int)ca - (int)cb;
}

/* The tree id of dir into out; *empty set when it holds no file at any
 * depth (then it is left out of its parent, as git does).  0 or -1. */
static int hash_dir(const char *dir, git_oid *out, int *empty, char *err, size_t errlen)
{
	DIR *d = opendir(dir);
	struct entry *v = NULL;
	size_t n = 0, cap = 0;
	int rc = -1;
	char *buf = NULL;
	size_t blen = 0;

	if (!d) {
		fw_seterr(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char p[PATH_MAX];
		struct stat st;
		if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p) {
			fw_seterr(err, errlen, "%s/%s: path too long", dir, de->d_name);
			goto out;
		}
		if (lstat(p, &st) != 0) {
			fw_seterr(err, errlen, "%s: %s", p, strerror(errno));
			goto out;
		}
		struct entry e = { 0 };
		if (S_ISDIR(st.st_mode)) {
			int sub_empty;
			if (hash_dir(p, &e.oid, &sub_empty, err, errlen) < 0)
				goto out;
			if (sub_empty)
				continue;
			e.mode = 040000;
		} else if (S_ISREG(st.st_mode)) {
			if (git_odb_hashfile(&e.oid, p, GIT_OBJECT_BLOB) < 0) {
				fw_seterr(err, errlen, "%s: cannot read: %s", p, strerror(errno));
				goto out;
			}
			e.mode = st.st_mode & S_IXUSR ? 0100755 : 0100644;
		} else if (S_ISLNK(st.st_mode)) {
			char t[PATH_MAX];
			ssize_t k = readlink(p, t, sizeof t);
			if (k < 0 || k == (ssize_t)sizeof t) {
				fw_seterr(err, errlen, "%s: cannot read the link", p);
				goto out;
			}
			if (git_odb_hash(&e.oid, t, (size_t)k, GIT_OBJECT_BLOB) < 0) {
				fw_seterr(err, errlen, "%s: cannot hash the link", p);
				goto out;
			}
			e.mode = 0120000;
		} else {
			fw_seterr(err, errlen, "%s: not a file, directory or link (an environment "
			       "holds no devices, FIFOs or sockets)", p);
			goto out;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 32;
			struct entry *nv = realloc(v, cap * sizeof *v);
			if (!nv)
				goto oom;
			v = nv;
		}
		if (!(e.name = strdup(de->d_name)))
			goto oom;
		v[n++] = e;
	}
	if (n) /* qsort wants a pointer even for nothing */
		qsort(v, n, sizeof *v, entry_cmp);
	for (size_t i = 0; i < n; i++)
		blen += 8 + strlen(v[i].name) + 1 + GIT_OID_RAWSZ;
	if (!(buf = malloc(blen ? blen : 1)))
		goto oom;
	blen = 0;
	for (size_t i = 0; i < n; i++) {
		blen += (size_t)sprintf(buf + blen, "%o %s", v[i].mode, v[i].name) + 1;
		memcpy(buf + blen, v[i].oid.id, GIT_OID_RAWSZ);
		blen += GIT_OID_RAWSZ;
	}
	if (git_odb_hash(out, buf, blen, GIT_OBJECT_TREE) < 0) {
		fw_seterr(err, errlen, "%s: cannot hash the tree", dir);
		goto out;
	}
	*empty = n == 0;
	rc = 0;
	goto out;
oom:
	fw_seterr(err, errlen, "out of memory");
out:
	closedir(d);
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
	free(buf);
	return rc;
}

int fw_env_id(const char *dir, char id[FW_ENV_ID_LEN], char *err, size_t errlen)
{
	git_oid oid;
	int empty = 1;
	struct stat st;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fw_seterr(err, errlen, "environment '%s': %s", dir,
		       errno && !S_ISDIR(st.st_mode) ? strerror(errno) : "not a directory");
		return -1;
	}
	git_libgit2_init();
	int rc = hash_dir(dir, &oid, &empty, err, errlen);
	git_libgit2_shutdown();
	if (rc < 0)
		return -1;
	if (empty) {
		fw_seterr(err, errlen, "environment '%s': holds no file", dir);
		return -1;
	}
	git_oid_tostr(id, FW_ENV_ID_LEN, &oid);
	return 0;
}

/* ---- the store ------------------------------------------------------------------- */

int fw_env_store_path(const char *opt, const char *task_store, char *out, size_t outlen,
		      char *err, size_t errlen)
{
	const char *ev = getenv(FW_ENV_STORE_VAR);
	int k;
	if (opt && *opt)
		k = snprintf(out, outlen, "%s", opt);
	else if (ev && *ev)
		k = snprintf(out, outlen, "%s", ev);
	else if (task_store && *task_store)
		k = snprintf(out, outlen, "%s/envs", task_store);
	else {
		fw_seterr(err, errlen, "no env store (--env-store DIR or $%s)", FW_ENV_STORE_VAR);
		return -1;
	}
	if (k < 0 || (size_t)k >= outlen) {
		fw_seterr(err, errlen, "env store path too long");
		return -1;
	}
	return 0;
}

static int mkdirs(const char *path, char *err, size_t errlen)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) {
		fw_seterr(err, errlen, "%s: path too long", path);
		return -1;
	}
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST) {
			fw_seterr(err, errlen, "cannot make %s: %s", p, strerror(errno));
			return -1;
		}
		*s = '/';
	}
	if (mkdir(p, 0755) != 0 && errno != EEXIST) {
		fw_seterr(err, errlen, "cannot make %s: %s", p, strerror(errno));
		return -1;
	}
	return 0;
}

static int copy_file(const char *src, const char *dst, mode_t mode, char *err, size_t errlen)
{
	int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0) {
		fw_seterr(err, errlen, "%s: %s", src, strerror(errno));
		return -1;
	}
	int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0) {
		fw_seterr(err, errlen, "cannot create %s: %s", dst, strerror(errno));
		close(in);
		return -1;
	}
	char buf[1 << 16];
	ssize_t k;
	int rc = 0;
	while ((k = read(in, buf, sizeof buf)) > 0) {
		for (ssize_t off = 0; off < k;) {
			ssize_t w = write(out, buf + off, (size_t)(k - off));
			if (w < 0) {
				fw_seterr(err, errlen, "%s: %s", dst, strerror(errno));
				rc = -1;
				goto done;
			}
			off += w;
		}
	}
	if (k < 0) {
		fw_seterr(err, errlen, "%s: %s", src, strerror(errno));
		rc = -1;
	}
done:
	/* no write bits: what is stored is what its id names */
	if (rc == 0 && fchmod(out, mode & S_IXUSR ? 0555 : 0444) != 0) {
		fw_seterr(err, errlen, "%s: %s", dst, strerror(errno));
		rc = -1;
	}
	if (close(out) != 0 && rc == 0) {
		fw_seterr(err, errlen, "%s: %s", dst, strerror(errno));
		rc = -1;
	}
	close(in);
	return rc;
}

/* Copies what dir src holds into the existing directory dst. */
static int copy_into(const char *src, const char *dst, char *err, size_t errlen)
{
	DIR *d = opendir(src);
	if (!d) {
		fw_seterr(err, errlen, "%s: %s", src, strerror(errno));
		return -1;
	}
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char s[PATH_MAX], t[PATH_MAX];
		struct stat st;
		if (snprintf(s, sizeof s, "%s/%s", src, de->d_name) >= (int)sizeof s ||
		    snprintf(t, sizeof t, "%s/%s", dst, de->d_name) >= (int)sizeof t) {
			fw_seterr(err, errlen, "%s/%s: path too long", src, de->d_name);
			rc = -1;
		} else if (lstat(s, &st) != 0) {
			fw_seterr(err, errlen, "%s: %s", s, strerror(errno));
			rc = -1;
		} else if (S_ISDIR(st.st_mode)) {
			if (mkdir(t, 0755) != 0) {
				fw_seterr(err, errlen, "cannot make %s: %s", t, strerror(errno));
				rc = -1;
			} else {
				rc = copy_into(s, t, err, errlen);
			}
		} else if (S_ISREG(st.st_mode)) {
			rc = copy_file(s, t, st.st_mode, err, errlen);
		} else if (S_ISLNK(st.st_mode)) {
			char l[PATH_MAX];
			ssize_t k = readlink(s, l, sizeof l - 1);
			if (k < 0) {
				fw_seterr(err, errlen, "%s: %s", s, strerror(errno));
				rc = -1;
			} else {
				l[k] = '\0';
				if (symlink(l, t) != 0) {
					fw_seterr(err, errlen, "cannot make %s: %s", t, strerror(errno));
					rc = -1;
				}
			}
		} else {
			fw_seterr(err, errlen, "%s: not a file, directory or link (an environment "
			       "holds no devices, FIFOs or sockets)", s);
			rc = -1;
		}
	}
	closedir(d);
	return rc;
}

int fw_env_find(const char *store, const char *id, char *path, size_t pathlen, char *err,
		size_t errlen)
{
	struct stat st;
	if (!fw_env_is_id(id)) {
		fw_seterr(err, errlen, "bad environment id '%s' (want 40 hex digits)", id);
		return -1;
	}
	if (snprintf(path, pathlen, "%s/%s", store, id) >= (int)pathlen) {
		fw_seterr(err, errlen, "env store path too long");
		return -1;
	}
	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fw_seterr(err, errlen, "environment %s is missing from the env store %s (give the "
		       "store with --env-store or $%s, or add the tree with fw-env add)", id,
		       store, FW_ENV_STORE_VAR);
		return -1;
	}
	return 0;
}

int fw_env_add(const char *store, const char *dir, char id[FW_ENV_ID_LEN], char *err,
	       size_t errlen)
{
	char tmp[PATH_MAX], dst[PATH_MAX];
	struct stat st;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fw_seterr(err, errlen, "environment '%s': %s", dir,
		       S_ISDIR(st.st_mode) ? strerror(errno) : "not a directory");
		return -1;
	}
	/* stored before: nothing to copy */
	if (fw_env_id(dir, id, err, errlen) < 0)
		return -1;
	if (snprintf(dst, sizeof dst, "%s/%s", store, id) < (int)sizeof dst && stat(dst, &st) == 0 &&
	    S_ISDIR(st.st_mode))
		return 0;
	if (mkdirs(store, err, errlen) < 0)
		return -1;
	if (snprintf(tmp, sizeof tmp, "%s/.new-XXXXXX", store) >= (int)sizeof tmp) {
		fw_seterr(err, errlen, "env store path too long");
		return -1;
	}
	if (!mkdtemp(tmp)) {
		fw_seterr(err, errlen, "cannot make a directory in %s: %s", store, strerror(errno));
		return -1;
	}
	if (chmod(tmp, 0755) != 0) {
		fw_seterr(err, errlen, "%s: %s", tmp, strerror(errno));
		fw_rmtree(tmp);
		return -1;
	}
	if (copy_into(dir, tmp, err, errlen) < 0 || fw_env_id(tmp, id, err, errlen) < 0) {
		fw_rmtree(tmp);
		return -1;
	}
	snprintf(dst, sizeof dst, "%s/%s", store, id);
	if (stat(dst, &st) == 0) {
		/* stored before, or by a run beside this one */
		fw_rmtree(tmp);
		return 0;
	}
	if (rename(tmp, dst) != 0) {
		int e = errno;
		fw_rmtree(tmp);
		if (stat(dst, &st) == 0)
			return 0;
		fw_seterr(err, errlen, "cannot store %s: %s", dst, strerror(e));
		return -1;
	}
	return 0;
}

int fw_env_resolve(const char *store, const char *arg, char id[FW_ENV_ID_LEN], char *err,
		   size_t errlen)
{
	struct stat st;
	char path[PATH_MAX];
	if (fw_env_is_id(arg) && stat(arg, &st) != 0) {
		if (fw_env_find(store, arg, path, sizeof path, err, errlen) < 0)
			return -1;
		memcpy(id, arg, FW_ENV_ID_LEN);
		return 0;
	}
	if (stat(arg, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fw_seterr(err, errlen, "environment '%s': %s", arg,
		       errno && stat(arg, &st) != 0 ? strerror(errno) : "not a directory");
		return -1;
	}
	/* one of the store's own: its name is its id */
	char *ra = realpath(arg, NULL), *rs = realpath(store, NULL);
	const char *base = ra ? strrchr(ra, '/') : NULL;
	int own = ra && rs && base && fw_env_is_id(base + 1) &&
		  (size_t)(base - ra) == strlen(rs) && strncmp(ra, rs, strlen(rs)) == 0;
	if (own)
		memcpy(id, base + 1, FW_ENV_ID_LEN);
	free(ra);
	free(rs);
	if (own)
		return 0;
	return fw_env_add(store, arg, id, err, errlen);
}

int fw_env_recipe_id(const char *path, char id[FW_ENV_ID_LEN], char *err, size_t errlen)
{
	git_oid oid;
	struct stat st;
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
		fw_seterr(err, errlen, "%s: %s", path,
		       S_ISREG(st.st_mode) ? strerror(errno) : "not a regular file");
		return -1;
	}
	git_libgit2_init();
	int rc = git_odb_hashfile(&oid, path, GIT_OBJECT_BLOB);
	git_libgit2_shutdown();
	if (rc < 0) {
		fw_seterr(err, errlen, "%s: cannot read", path);
		return -1;
	}
	git_oid_tostr(id, FW_ENV_ID_LEN, &oid);
	return 0;
}

int fw_env_recipe_note(const char *store, const char *recipe, const char *id, char *err,
		       size_t errlen)
{
	char dir[PATH_MAX], tmp[PATH_MAX + 16], dst[PATH_MAX + 48];
	snprintf(dir, sizeof dir, "%s/recipes", store);
	if (mkdirs(dir, err, errlen) < 0)
		return -1;
	snprintf(tmp, sizeof tmp, "%s/.new-XXXXXX", dir);
	snprintf(dst, sizeof dst, "%s/%s", dir, recipe);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		fw_seterr(err, errlen, "cannot write in %s: %s", dir, strerror(errno));
		return -1;
	}
	FILE *f = fdopen(fd, "w");
	int wrc = !f || fprintf(f, "%s\n", id) < 0 || fflush(f) != 0 || fsync(fd) != 0;
	if (f && fclose(f) != 0)
		wrc = -1;
	if (wrc || chmod(tmp, 0644) != 0 || rename(tmp, dst) != 0) {
		fw_seterr(err, errlen, "cannot write %s: %s", dst, strerror(errno));
		if (!f)
			close(fd);
		unlink(tmp);
		return -1;
	}
	return 0;
}

int fw_env_recipe_find(const char *store, const char *recipe, char id[FW_ENV_ID_LEN],
		       char *err, size_t errlen)
{
	char p[PATH_MAX + 64], line[128];
	snprintf(p, sizeof p, "%s/recipes/%s", store, recipe);
	FILE *f = fopen(p, "r");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		fw_seterr(err, errlen, "%s: %s", p, strerror(errno));
		return -1;
	}
	int ok = fgets(line, sizeof line, f) != NULL;
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	if (!ok || !fw_env_is_id(line)) {
		fw_seterr(err, errlen, "%s: not an environment id", p);
		return -1;
	}
	memcpy(id, line, FW_ENV_ID_LEN);
	return 1;
}

/* ---- the clean room ---------------------------------------------------------------- */

static int add_var(struct fw_env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int add_var(struct fw_env *e, const char *fmt, ...)
{
	va_list ap;
	if (e->nvars == FW_ENV_MAXVARS)
		return -1;
	va_start(ap, fmt);
	vsnprintf(e->vars[e->nvars++], sizeof e->vars[0], fmt, ap);
	va_end(ap);
	return 0;
}

/* Fills e for the tree at e->dir. */
static int open_dir(struct fw_env *e)
{
	e->kind = fw_env_kind_of(e->dir);
	if (e->kind == FW_ENV_ROOTFS)
		return 0;
	snprintf(e->bind, sizeof e->bind, "%s:%s", e->dir, FW_ENV_DIR);
	int nm = exists_at(e->dir, "node_modules", S_IFDIR);
	add_var(e, "FW_ENV=%s", FW_ENV_DIR);
	add_var(e, "PATH=%s/bin:%s%s", FW_ENV_DIR, nm ? FW_ENV_DIR "/node_modules/.bin:" : "",
		FW_SANDBOX_PATH);
	if (e->kind == FW_ENV_VENV) {
		add_var(e, "VIRTUAL_ENV=%s", FW_ENV_DIR);
		return 0;
	}
	if (exists_at(e->dir, "lib", S_IFDIR))
		add_var(e, "LD_LIBRARY_PATH=%s/lib", FW_ENV_DIR);
	if (nm)
		add_var(e, "NODE_PATH=%s/node_modules", FW_ENV_DIR);
	else if (exists_at(e->dir, "lib/node_modules", S_IFDIR))
		add_var(e, "NODE_PATH=%s/lib/node_modules", FW_ENV_DIR);
	char pat[PATH_MAX + 32];
	glob_t gl;
	snprintf(pat, sizeof pat, "%s/lib/python3*/site-packages", e->dir);
	if (glob(pat, 0, NULL, &gl) == 0 && gl.gl_pathc > 0) {
		const char *rel = gl.gl_pathv[gl.gl_pathc - 1] + strlen(e->dir);
		add_var(e, "PYTHONPATH=%s%s", FW_ENV_DIR, rel);
	}
	globfree(&gl);
	return 0;
}

int fw_env_open(struct fw_env *e, const char *store, const char *id, char *err,
		size_t errlen)
{
	memset(e, 0, sizeof *e);
	if (fw_env_find(store, id, e->dir, sizeof e->dir, err, errlen) < 0)
		return -1;
	memcpy(e->id, id, FW_ENV_ID_LEN);
	return open_dir(e);
}

int fw_env_open_arg(struct fw_env *e, const char *store, const char *arg, char *err,
		    size_t errlen)
{
	struct stat st;
	if (stat(arg, &st) != 0 && fw_env_is_id(arg)) {
		if (!store) {
			fw_seterr(err, errlen, "environment %s: no env store (--env-store DIR or $%s)",
			       arg, FW_ENV_STORE_VAR);
			return -1;
		}
		return fw_env_open(e, store, arg, err, errlen);
	}
	memset(e, 0, sizeof *e);
	if (stat(arg, &st) != 0 || !S_ISDIR(st.st_mode) || !realpath(arg, e->dir)) {
		fw_seterr(err, errlen, "environment '%s': %s", arg,
		       errno && stat(arg, &st) != 0 ? strerror(errno) : "not a directory");
		return -1;
	}
	return open_dir(e);
}

int fw_env_apply(const struct fw_env *e, struct fw_sandbox_opts *o, const char **binds,
		 size_t nbinds, const char **vars, size_t nvars)
{
	size_t nb = 0, nv = 0;
	if (!e)
		return 0;
	for (const char *const *b = o->ro_binds; b && *b; b++) {
		if (nb + 2 > nbinds)
			return -1;
		binds[nb++] = *b;
	}
	if (e->bind[0]) {
		if (nb + 2 > nbinds)
			return -1;
		binds[nb++] = e->bind;
	}
	binds[nb] = NULL;
	for (const char *const *v = o->env; v && *v; v++) {
		if (nv + 1 + (size_t)e->nvars > nvars)
			return -1;
		vars[nv++] = *v;
	}
	if (nv + 1 + (size_t)e->nvars > nvars)
		return -1;
	for (int i = 0; i < e->nvars; i++)
		vars[nv++] = e->vars[i];
	vars[nv] = NULL;
	o->ro_binds = binds;
	o->env = vars;
	if (e->kind == FW_ENV_ROOTFS)
		o->root = e->dir;
	return 0;
}
