/*
 * fw_workspace.c — workspaces, scrub and leak audit (see fw_workspace.h).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/syscall.h>
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#endif

#include <git2.h>

#include "fw_base.h"
#include "fw_json.h"
#include "fw_mp.h"
#include "fw_store.h"
#include "fw_workspace.h"

static const char *gerr(void)
{
	const git_error *e = git_error_last();
	return e && e->message ? e->message : "unknown libgit2 error";
}

/* ---- scrub ------------------------------------------------------------------- */

static const char *const scrub_dirs[] = {
	"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "*.egg-info",
	".eggs", "htmlcov", ".nyc_output", NULL,
};

static const char *const scrub_files[] = {
	"*.pyc", "*.pyo", "*.o", "*.a", "*.so", "*.obj", "*.class", "*.gcno", "*.gcda",
	".coverage", ".coverage.*", "coverage.xml", "lcov.info", "*.orig", "*.rej",
	"*.swp", "*.swo", "*~", ".#*", NULL,
};

int fw_scrub_match(const char *name, int is_dir)
{
	const char *const *pats = is_dir ? scrub_dirs : scrub_files;
	for (size_t i = 0; pats[i]; i++)
		if (fnmatch(pats[i], name, 0) == 0)
			return 1;
	return 0;
}

static int scrub_dir(const char *root, const char *rel, struct fw_strlist *out,
		     char *err, size_t errlen)
{
	char path[4096];
	snprintf(path, sizeof path, "%s%s%s", root, *rel ? "/" : "", rel);
	DIR *d = opendir(path);
	if (!d) {
		fw_seterr(err, errlen, "cannot open '%s': %s", path, strerror(errno));
		return -1;
	}
	int removed = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, ".git") == 0)
			continue;
		char sub[4096], full[8200];
		snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", n);
		snprintf(full, sizeof full, "%s/%s", root, sub);
		struct stat st;
		if (lstat(full, &st) < 0)
			continue;
		int is_dir = S_ISDIR(st.st_mode);
		if (fw_scrub_match(n, is_dir)) {
			if (fw_rmtree(full) < 0) {
				fw_seterr(err, errlen, "cannot remove '%s': %s", full, strerror(errno));
				closedir(d);
				return -1;
			}
			if (out && fw_strlist_add(out, sub) < 0) {
				closedir(d);
				fw_seterr(err, errlen, "out of memory");
				return -1;
			}
			removed++;
		} else if (is_dir) {
			int k = scrub_dir(root, sub, out, err, errlen);
			if (k < 0) {
				closedir(d);
				return -1;
			}
			removed += k;
		}
	}
	closedir(d);
	return removed;
}

int fw_workspace_scrub(const char *dir, struct fw_strlist *scrubbed, char *err, size_t errlen)
{
	return scrub_dir(dir, "", scrubbed, err, errlen);
}

/* ---- workspace --------------------------------------------------------------- */

/* Copies the loose object id of src into dst byte for byte: it is already
 * compressed, so this is much cheaper than reading and writing it through
 * the object database.  Returns 0, or -1 when src does not hold it loose
 * (packed) or the copy fails; the caller then goes through the database. */
static int copy_loose(git_repository *src, git_repository *dst, const git_oid *id)
{
	char hex[GIT_OID_HEXSZ + 1], from[4400], to[4400], tmp[4500];
	git_oid_tostr(hex, sizeof hex, id);
	snprintf(from, sizeof from, "%sobjects/%.2s/%s", git_repository_path(src), hex, hex + 2);
	snprintf(to, sizeof to, "%sobjects/%.2s", git_repository_path(dst), hex);
	int in = open(from, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -1;
	if (mkdir(to, 0755) < 0 && errno != EEXIST) {
		close(in);
		return -1;
	}
	snprintf(tmp, sizeof tmp, "%s/tmp_%s", to, hex + 2);
	snprintf(to + strlen(to), sizeof to - strlen(to), "/%s", hex + 2);
	int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	int rc = out < 0 ? -1 : 0;
	char buf[65536];
	ssize_t n;
	while (rc == 0 && (n = read(in, buf, sizeof buf)) != 0) {
		if (n < 0) {
			if (errno != EINTR)
				rc = -1;
			continue;
		}
		for (ssize_t off = 0; rc == 0 && off < n;) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				rc = -1;
			else
				off += w;
		}
	}
	close(in);
	if (out >= 0 && close(out) < 0)
		rc = -1;
	if (rc == 0 && rename(tmp, to) < 0)
		rc = -1;
	if (rc < 0 && out >= 0)
		unlink(tmp);
	return rc;
}

/* Writes into dst a copy of src_tree (from src) without scrubbed entries.
 * *empty is set when nothing is left. */
static int filtered_copy(git_repository *src, git_odb *sodb, git_repository *dst,
			 git_odb *dodb, git_tree *tree, const char *prefix, git_oid *out,
			 int *empty, struct fw_strlist *scrubbed)
{
	git_treebuilder *tb = NULL;
	int rc = -1;
	if (git_treebuilder_new(&tb, dst, NULL) < 0)
		return -1;
	size_t n = git_tree_entrycount(tree);
	for (size_t i = 0; i < n; i++) {
		const git_tree_entry *e = git_tree_entry_byindex(tree, i);
		const char *name = git_tree_entry_name(e);
		git_object_t t = git_tree_entry_type(e);
		char path[4000];
		snprintf(path, sizeof path, "%s%s", prefix, name);
		if (t != GIT_OBJECT_BLOB && t != GIT_OBJECT_TREE)
			continue; /* submodules are not part of a workspace */
		if (fw_scrub_match(name, t == GIT_OBJECT_TREE)) {
			if (scrubbed && fw_strlist_add(scrubbed, path) < 0)
				goto out;
			continue;
		}
		git_oid id = *git_tree_entry_id(e);
		if (t == GIT_OBJECT_TREE) {
			git_tree *sub;
			int sub_empty;
			if (git_tree_lookup(&sub, src, &id) < 0)
				goto out;
			char pre[4096];
			snprintf(pre, sizeof pre, "%s/", path);
			int k = filtered_copy(src, sodb, dst, dodb, sub, pre, &id, &sub_empty,
					      scrubbed);
			git_tree_free(sub);
			if (k < 0)
				goto out;
			if (sub_empty)
				continue;
		} else if (!git_odb_exists(dodb, &id) && copy_loose(src, dst, &id) < 0) {
			git_odb_object *o;
			git_oid w;
			if (git_odb_read(&o, sodb, &id) < 0)
				goto out;
			int k = git_odb_write(&w, dodb, git_odb_object_data(o),
					      git_odb_object_size(o), GIT_OBJECT_BLOB);
			git_odb_object_free(o);
			if (k < 0)
				goto out;
		}
		if (git_treebuilder_insert(NULL, tb, name, &id, git_tree_entry_filemode(e)) < 0)
			goto out;
	}
	*empty = git_treebuilder_entrycount(tb) == 0;
	rc = git_treebuilder_write(out, tb);
out:
	git_treebuilder_free(tb);
	return rc;
}

/* Writes the files of tree (objects in repo) below dir, which exists.
 * Returns 0, or -1 with errno set (0 for a libgit2 error). */
static int write_files(git_repository *repo, git_tree *tree, const char *dir)
{
	size_t n = git_tree_entrycount(tree);
	for (size_t i = 0; i < n; i++) {
		const git_tree_entry *e = git_tree_entry_byindex(tree, i);
		const char *name = git_tree_entry_name(e);
		if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, ".git") ||
		    strchr(name, '/')) {
			errno = EINVAL;
			return -1;
		}
		char path[8200];
		snprintf(path, sizeof path, "%s/%s", dir, name);
		git_filemode_t mode = git_tree_entry_filemode(e);
		errno = 0;
		if (mode == GIT_FILEMODE_TREE) {
			git_tree *sub;
			if (mkdir(path, 0755) < 0)
				return -1;
			if (git_tree_lookup(&sub, repo, git_tree_entry_id(e)) < 0)
				return -1;
			int k = write_files(repo, sub, path);
			git_tree_free(sub);
			if (k < 0)
				return -1;
			continue;
		}
		git_blob *b;
		if (git_blob_lookup(&b, repo, git_tree_entry_id(e)) < 0)
			return -1;
		const char *data = git_blob_rawcontent(b);
		size_t len = (size_t)git_blob_rawsize(b);
		int k = 0;
		if (mode == GIT_FILEMODE_LINK) {
			char *target = strndup(data, len);
			k = target ? symlink(target, path) : -1;
			free(target);
		} else {
			int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
				      mode == GIT_FILEMODE_BLOB_EXECUTABLE ? 0755 : 0644);
			k = fd < 0 ? -1 : 0;
			for (size_t off = 0; k == 0 && off < len;) {
				ssize_t w = write(fd, data + off, len - off);
				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0)
					k = -1;
				else
					off += (size_t)w;
			}
			if (fd >= 0 && close(fd) < 0)
				k = -1;
		}
		git_blob_free(b);
		if (k < 0)
			return -1;
	}
	return 0;
}

static int dir_is_empty(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	struct dirent *e;
	int empty = 1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			empty = 0;
	closedir(d);
	return empty;
}

int fw_workspace_create(struct fw_store *s, const char *tree_hex, const char *dir,
			char *commit_hex, struct fw_strlist *scrubbed,
			char *err, size_t errlen)
{
	git_repository *src = fw_store_repo(s), *dst = NULL;
	git_odb *sodb = NULL, *dodb = NULL;
	git_tree *tree = NULL, *wtree = NULL;
	git_signature *sig = NULL;
	git_config *cfg = NULL;
	git_index *idx = NULL;
	int rc = -1, created = 0;
	git_oid id, wid, cid;

	struct stat st;
	if (stat(dir, &st) == 0) {
		if (!S_ISDIR(st.st_mode) || !dir_is_empty(dir)) {
			fw_seterr(err, errlen, "workspace '%s' exists and is not empty", dir);
			return -1;
		}
	} else {
		if (mkdir(dir, 0755) < 0) {
			fw_seterr(err, errlen, "cannot create '%s': %s", dir, strerror(errno));
			return -1;
		}
		created = 1;
	}
	if (strlen(tree_hex) != 40 || git_oid_fromstr(&id, tree_hex) < 0) {
		fw_seterr(err, errlen, "bad tree id '%s'", tree_hex);
		goto out;
	}
	if (git_tree_lookup(&tree, src, &id) < 0) {
		fw_seterr(err, errlen, "no tree %s in the store: %s", tree_hex, gerr());
		goto out;
	}
	git_repository_init_options io;
	git_repository_init_options_init(&io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
	io.flags = GIT_REPOSITORY_INIT_MKPATH | GIT_REPOSITORY_INIT_NO_REINIT;
	io.initial_head = "main";
	if (git_repository_init_ext(&dst, dir, &io) < 0 ||
	    git_repository_config(&cfg, dst) < 0 ||
	    git_config_set_bool(cfg, "core.logAllRefUpdates", 0) < 0 ||
	    git_repository_odb(&sodb, src) < 0 || git_repository_odb(&dodb, dst) < 0) {
		fw_seterr(err, errlen, "cannot create repository in '%s': %s", dir, gerr());
		goto out;
	}
	int empty;
	if (filtered_copy(src, sodb, dst, dodb, tree, "", &wid, &empty, scrubbed) < 0 ||
	    git_tree_lookup(&wtree, dst, &wid) < 0) {
		fw_seterr(err, errlen, "cannot copy tree %s: %s", tree_hex, gerr());
		goto out;
	}
	/* Files are written straight from the blobs, byte for byte (no
	 * attribute filters), and the index is read from the tree: several
	 * times faster than libgit2's checkout on large trees. */
	if (write_files(dst, wtree, dir) < 0 || git_repository_index(&idx, dst) < 0 ||
	    git_index_read_tree(idx, wtree) < 0 || git_index_write(idx) < 0) {
		fw_seterr(err, errlen, "cannot check out into '%s': %s", dir,
		       errno ? strerror(errno) : gerr());
		goto out;
	}
	if (git_signature_new(&sig, FW_WORKSPACE_AUTHOR, FW_WORKSPACE_EMAIL,
			      FW_WORKSPACE_TIME, 0) < 0 ||
	    git_commit_create(&cid, dst, "HEAD", sig, sig, NULL, "task\n", wtree, 0, NULL) < 0) {
		fw_seterr(err, errlen, "cannot commit in '%s': %s", dir, gerr());
		goto out;
	}
	/* No reflog, whatever the defaults did. */
	char logs[4096];
	snprintf(logs, sizeof logs, "%s/.git/logs", dir);
	fw_rmtree(logs);
	if (commit_hex)
		git_oid_tostr(commit_hex, FW_OID_HEX, &cid);
	rc = 0;
out:
	git_index_free(idx);
	git_config_free(cfg);
	git_signature_free(sig);
	git_tree_free(wtree);
	git_tree_free(tree);
	git_odb_free(sodb);
	git_odb_free(dodb);
	git_repository_free(dst);
	if (rc < 0 && created)
		fw_rmtree(dir);
	return rc;
}

/* ---- audit ------------------------------------------------------------------- */

/* An open-addressing set of nonzero 64-bit hashes. */
struct hset {
	uint64_t *v;
	size_t n, cap;
};

static int hset_add(struct hset *h, uint64_t x)
{
	x |= 1; /* 0 marks an empty slot */
	if (2 * (h->n + 1) > h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 256;
		uint64_t *v = calloc(cap, sizeof *v);
		if (!v)
			return -1;
		for (size_t i = 0; i < h->cap; i++) {
			if (!h->v[i])
				continue;
			size_t j = h->v[i] & (cap - 1);
			while (v[j])
				j = (j + 1) & (cap - 1);
			v[j] = h->v[i];
		}
		free(h->v);
		h->v = v;
		h->cap = cap;
	}
	size_t j = x & (h->cap - 1);
	while (h->v[j]) {
		if (h->v[j] == x)
			return 0;
		j = (j + 1) & (h->cap - 1);
	}
	h->v[j] = x;
	h->n++;
	return 0;
}

static int hset_has(const struct hset *h, uint64_t x)
{
	x |= 1;
	if (!h->cap)
		return 0;
	size_t j = x & (h->cap - 1);
	while (h->v[j]) {
		if (h->v[j] == x)
			return 1;
		j = (j + 1) & (h->cap - 1);
	}
	return 0;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 1099511628211ull;
	}
	return h;
}

#define FNV0 14695981039346656037ull
#define MAX_GRAM 3

struct fw_audit {
	struct hset removed_grams, kept_grams;  /* line n-grams, n tagged in */
	struct hset removed_ids, kept_ids;      /* identifiers */
	struct fw_strlist removed_id_names;     /* for messages */
	struct fw_strlist removed_lines;        /* first line of each gram, for messages */
	unsigned gram_sizes;                    /* bit k set: removed has k-grams */
};

struct fw_audit *fw_audit_new(void)
{
	return calloc(1, sizeof(struct fw_audit));
}

void fw_audit_free(struct fw_audit *a)
{
	if (!a)
		return;
	free(a->removed_grams.v);
	free(a->kept_grams.v);
	free(a->removed_ids.v);
	free(a->kept_ids.v);
	fw_strlist_release(&a->removed_id_names);
	fw_strlist_release(&a->removed_lines);
	free(a);
}

/* A normalized line: its hash, and where it starts for messages. */
struct nline {
	uint64_t h;
	const char *s;
	size_t n;
};

/* Splits text into significant normalized lines (trimmed, whitespace runs
 * as one space, at least 3 alphanumerics).  Returns the count; *out is
 * malloc'd (NULL when the count is 0); -1 when memory runs out. */
static long norm_lines(const char *text, size_t len, struct nline **out)
{
	size_t cap = 0, n = 0;
	struct nline *v = NULL;
	*out = NULL;
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t e = nl ? (size_t)(nl - text) : len;
		uint64_t h = FNV0;
		int alnum = 0, pending_space = 0, started = 0;
		for (size_t k = i; k < e; k++) {
			unsigned char c = (unsigned char)text[k];
			if (isspace(c)) {
				pending_space = started;
				continue;
			}
			if (pending_space)
				h = fnv(" ", 1, h);
			pending_space = 0;
			started = 1;
			h = fnv(&c, 1, h);
			alnum += isalnum(c) != 0;
		}
		if (alnum >= 3) {
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				struct nline *w = realloc(v, cap * sizeof *w);
				if (!w) {
					free(v);
					return -1;
				}
				v = w;
			}
			const char *s = text + i;
			while (s < text + e && isspace((unsigned char)*s))
				s++;
			v[n++] = (struct nline){ h, s, (size_t)(text + e - s) };
		}
		i = e + 1;
	}
	*out = v;
	return (long)n;
}

static uint64_t gram_hash(const struct nline *l, size_t k)
{
	uint64_t h = fnv(&k, sizeof k, FNV0);
	for (size_t i = 0; i < k; i++)
		h = fnv(&l[i].h, sizeof l[i].h, h);
	return h;
}

static int is_binary(const char *data, size_t len)
{
	return memchr(data, '\0', len < 8192 ? len : 8192) != NULL;
}

/* Calls fn for every identifier of at least 4 characters in data. */
static int each_ident(const char *data, size_t len,
		      int (*fn)(void *ctx, const char *s, size_t n), void *ctx)
{
	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)data[i];
		if (isalpha(c) || c == '_') {
			size_t j = i + 1;
			while (j < len && (isalnum((unsigned char)data[j]) || data[j] == '_'))
				j++;
			if (j - i >= 4 && fn(ctx, data + i, j - i) < 0)
				return -1;
			i = j;
		} else {
			i++;
		}
	}
	return 0;
}

static int add_removed_id(void *ctx, const char *s, size_t n)
{
	struct fw_audit *a = ctx;
	uint64_t h = fnv(s, n, FNV0);
	if (hset_has(&a->removed_ids, h))
		return 0;
	char buf[128];
	snprintf(buf, sizeof buf, "%.*s", (int)(n < 120 ? n : 120), s);
	if (hset_add(&a->removed_ids, h) < 0 || fw_strlist_add(&a->removed_id_names, buf) < 0)
		return -1;
	return 0;
}

static int add_kept_id(void *ctx, const char *s, size_t n)
{
	struct fw_audit *a = ctx;
	return hset_add(&a->kept_ids, fnv(s, n, FNV0));
}

int fw_audit_removed(struct fw_audit *a, const char *text, size_t len)
{
	struct nline *l;
	long n = norm_lines(text, len, &l);
	if (n < 0)
		return -1;
	size_t k = n < MAX_GRAM ? (size_t)n : MAX_GRAM;
	int rc = 0;
	if (k > 0) {
		a->gram_sizes |= 1u << k;
		for (size_t i = 0; i + k <= (size_t)n && rc == 0; i++) {
			rc = hset_add(&a->removed_grams, gram_hash(l + i, k));
			char buf[256];
			snprintf(buf, sizeof buf, "%.*s", (int)(l[i].n < 200 ? l[i].n : 200), l[i].s);
			if (rc == 0)
				rc = fw_strlist_add(&a->removed_lines, buf);
		}
	}
	free(l);
	if (rc == 0)
		rc = each_ident(text, len, add_removed_id, a);
	return rc;
}

int fw_audit_kept(struct fw_audit *a, const char *text, size_t len)
{
	struct nline *l;
	long n = norm_lines(text, len, &l);
	if (n < 0)
		return -1;
	int rc = 0;
	for (size_t k = 1; k <= MAX_GRAM && rc == 0; k++)
		for (size_t i = 0; i + k <= (size_t)n && rc == 0; i++)
			rc = hset_add(&a->kept_grams, gram_hash(l + i, k));
	free(l);
	if (rc == 0)
		rc = each_ident(text, len, add_kept_id, a);
	return rc;
}

/* 1 when the scrub removes path or a directory above it. */
static int scrubbed_path(const char *path)
{
	char buf[4096];
	snprintf(buf, sizeof buf, "%s", path);
	char *save = NULL, *next;
	for (char *c = strtok_r(buf, "/", &save); c; c = next) {
		next = strtok_r(NULL, "/", &save);
		if (fw_scrub_match(c, next != NULL))
			return 1;
	}
	return 0;
}

int fw_audit_kept_tree(struct fw_audit *a, struct fw_store *s, const char *tree_hex,
		       char *err, size_t errlen)
{
	struct fw_file *f;
	size_t n;
	if (fw_store_files(s, tree_hex, &f, &n, err, errlen) < 0)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		char *data;
		size_t len;
		if (scrubbed_path(f[i].path))
			continue; /* not in a workspace, so not kept */
		rc = fw_store_read(s, tree_hex, f[i].path, &data, &len, err, errlen);
		if (rc == 0) {
			rc = fw_audit_kept(a, data, len);
			if (rc < 0)
				fw_seterr(err, errlen, "out of memory");
			free(data);
		}
	}
	fw_files_free(f, n);
	return rc;
}

double fw_audit_kept_share(const struct fw_audit *a)
{
	size_t total = 0, kept = 0;
	for (size_t i = 0; i < a->removed_grams.cap; i++) {
		uint64_t h = a->removed_grams.v[i];
		if (!h)
			continue;
		total++;
		kept += hset_has(&a->kept_grams, h);
	}
	return total ? (double)kept / (double)total : 0;
}

/* Identifiers of the removed code that the kept code does not have. */
static size_t unique_removed_ids(struct fw_audit *a)
{
	size_t k = 0;
	for (size_t i = 0; i < a->removed_id_names.n; i++) {
		const char *s = a->removed_id_names.v[i];
		k += !hset_has(&a->kept_ids, fnv(s, strlen(s), FNV0));
	}
	return k;
}

int fw_audit_check(struct fw_audit *a, const char *name, const char *data, size_t len,
		   struct fw_strlist *found)
{
	char msg[512];
	if (is_binary(data, len)) {
		/* Compiled code keeps identifiers, not lines: count the
		 * identifiers only the removed code has. */
		size_t uniq = unique_removed_ids(a);
		if (uniq == 0)
			return 0;
		/* Substrings, not tokens: serialized code packs names
		 * between type and length bytes that may be letters. */
		size_t hits = 0;
		const char *first = NULL;
		for (size_t i = 0; i < a->removed_id_names.n; i++) {
			const char *id = a->removed_id_names.v[i];
			size_t n = strlen(id);
			if (hset_has(&a->kept_ids, fnv(id, n, FNV0)) || !memmem(data, len, id, n))
				continue;
			if (hits++ == 0)
				first = id;
		}
		size_t need = uniq < 2 ? uniq : 2;
		if (hits < need)
			return 0;
		snprintf(msg, sizeof msg, "%s: %zu identifiers of the removed code, e.g. '%s'",
			 name, hits, first);
		return found && fw_strlist_add(found, msg) < 0 ? -1 : 1;
	}
	struct nline *l;
	long n = norm_lines(data, len, &l);
	if (n < 0)
		return -1;
	int hit = 0;
	for (size_t k = 1; k <= MAX_GRAM && !hit; k++) {
		if (!(a->gram_sizes & (1u << k)))
			continue;
		for (size_t i = 0; i + k <= (size_t)n; i++) {
			uint64_t h = gram_hash(l + i, k);
			if (hset_has(&a->removed_grams, h) && !hset_has(&a->kept_grams, h)) {
				snprintf(msg, sizeof msg, "%s: removed code at line '%.*s'", name,
					 (int)(l[i].n < 120 ? l[i].n : 120), l[i].s);
				hit = 1;
				break;
			}
		}
	}
	free(l);
	if (hit && found && fw_strlist_add(found, msg) < 0)
		return -1;
	return hit;
}

static int audit_dir(struct fw_audit *a, const char *root, const char *rel,
		     struct fw_strlist *found, char *err, size_t errlen)
{
	char path[4096];
	snprintf(path, sizeof path, "%s%s%s", root, *rel ? "/" : "", rel);
	DIR *d = opendir(path);
	if (!d) {
		fw_seterr(err, errlen, "cannot open '%s': %s", path, strerror(errno));
		return -1;
	}
	int leaks = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
			continue;
		char sub[4096], full[8200];
		snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", n);
		snprintf(full, sizeof full, "%s/%s", root, sub);
		if (strcmp(sub, ".git/objects") == 0)
			continue; /* read decompressed through libgit2 below */
		struct stat st;
		if (lstat(full, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int k = audit_dir(a, root, sub, found, err, errlen);
			if (k < 0) {
				closedir(d);
				return -1;
			}
			leaks += k;
			continue;
		}
		if (!S_ISREG(st.st_mode))
			continue;
		char *data;
		size_t len;
		/* audit the first 64 MiB of huge files */
		if (!(data = fw_read_file(full, 64u << 20, &len))) {
			fw_seterr(err, errlen, "cannot read '%s': %s", full, strerror(errno));
			closedir(d);
			return -1;
		}
		char name[4200];
		snprintf(name, sizeof name, "file %s", sub);
		int k = fw_audit_check(a, name, data, len, found);
		free(data);
		if (k < 0) {
			fw_seterr(err, errlen, "out of memory");
			closedir(d);
			return -1;
		}
		leaks += k;
	}
	closedir(d);
	return leaks;
}

struct obj_ctx {
	struct fw_audit *a;
	git_odb *odb;
	struct fw_strlist *found;
	int leaks, failed;
};

static int obj_cb(const git_oid *id, void *payload)
{
	struct obj_ctx *c = payload;
	git_odb_object *o;
	if (git_odb_read(&o, c->odb, id) < 0) {
		c->failed = 1;
		return -1;
	}
	char hex[FW_OID_HEX], name[64];
	git_oid_tostr(hex, sizeof hex, id);
	snprintf(name, sizeof name, "object %s", hex);
	int k = fw_audit_check(c->a, name, git_odb_object_data(o), git_odb_object_size(o),
			       c->found);
	git_odb_object_free(o);
	if (k < 0) {
		c->failed = 1;
		return -1;
	}
	c->leaks += k;
	return 0;
}

int fw_audit_workspace(struct fw_audit *a, const char *dir, struct fw_strlist *found,
		       char *err, size_t errlen)
{
	int leaks = audit_dir(a, dir, "", found, err, errlen);
	if (leaks < 0)
		return -1;
	git_libgit2_init();
	git_repository *r = NULL;
	struct obj_ctx c = { .a = a, .found = found };
	int rc = -1;
	if (git_repository_open_ext(&r, dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0 ||
	    git_repository_odb(&c.odb, r) < 0) {
		fw_seterr(err, errlen, "cannot open the workspace repository: %s", gerr());
		goto out;
	}
	if (git_odb_foreach(c.odb, obj_cb, &c) < 0 || c.failed) {
		fw_seterr(err, errlen, "cannot read workspace objects: %s", gerr());
		goto out;
	}
	rc = leaks + c.leaks;
out:
	git_odb_free(c.odb);
	git_repository_free(r);
	git_libgit2_shutdown();
	return rc;
}

/* ---- reading what the sandbox left ------------------------------------------- */

/* 1 when rel is a relative '/'-separated path without empty, "." or ".."
 * components. */
static int rel_ok(const char *rel)
{
	if (!*rel || *rel == '/')
		return 0;
	for (const char *c = rel; *c;) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		c += n;
		if (*c == '/' && !*++c)
			return 0;
	}
	return 1;
}

/* openat2(2) where the kernel and libc headers have it. */
static int open_resolve(int dirfd, const char *rel, int flags)
{
#if defined(SYS_openat2) && defined(RESOLVE_BENEATH)
	struct open_how how = {
		.flags = (uint64_t)flags,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	return (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
#else
	(void)dirfd;
	(void)rel;
	(void)flags;
	errno = ENOSYS;
	return -1;
#endif
}

int fw_open_beneath(int dirfd, const char *rel, int flags)
{
	if (!rel_ok(rel)) {
		errno = EINVAL;
		return -1;
	}
	flags |= O_NOFOLLOW | O_CLOEXEC;
	int fd = open_resolve(dirfd, rel, flags);
	if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
		return fd;
	/* No openat2 (or a filter that refuses it): one component at a
	 * time, each a directory opened without following a link. */
	char buf[4096];
	if (strlen(rel) >= sizeof buf) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(buf, rel);
	int cur = dirfd;
	char *c = buf;
	for (;;) {
		char *slash = strchr(c, '/');
		if (!slash)
			break;
		*slash = '\0';
		int next = openat(cur, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;
		if (cur != dirfd)
			close(cur);
		if (next < 0) {
			errno = e == ENOTDIR ? ELOOP : e;
			return -1;
		}
		cur = next;
		c = slash + 1;
	}
	fd = openat(cur, c, flags);
	int e = errno;
	if (cur != dirfd)
		close(cur);
	errno = e;
	return fd;
}

/* Reads at most max bytes of regular file fd (and one more, to tell a
 * file over the limit).  Returns 0, or -1 with errno (EFBIG: over max). */
static int read_fd(int fd, size_t max, char **data, size_t *len)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -1;
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		return -1;
	}
	if ((uint64_t)st.st_size > max) {
		errno = EFBIG;
		return -1;
	}
	size_t cap = (size_t)st.st_size + 1, n = 0;
	char *p = malloc(cap + 1);
	if (!p)
		return -1;
	for (;;) {
		if (n == cap) {
			if (cap > max) {
				free(p);
				errno = EFBIG;
				return -1;
			}
			size_t nc = cap * 2 > max + 1 ? max + 1 : cap * 2;
			char *q = realloc(p, nc + 1);
			if (!q) {
				free(p);
				return -1;
			}
			p = q;
			cap = nc;
		}
		ssize_t k = read(fd, p + n, cap - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;
			free(p);
			errno = e;
			return -1;
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	if (n > max) {
		free(p);
		errno = EFBIG;
		return -1;
	}
	p[n] = '\0';
	*data = p;
	*len = n;
	return 0;
}

int fw_read_beneath(const char *dir, const char *rel, size_t max, char **data, size_t *len)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	/* O_NONBLOCK: a FIFO put there must not hang the host */
	int fd = fw_open_beneath(dfd, rel, O_RDONLY | O_NONBLOCK);
	int e = errno;
	close(dfd);
	if (fd < 0) {
		errno = e;
		return -1;
	}
	int rc = read_fd(fd, max, data, len);
	e = errno;
	close(fd);
	errno = e;
	return rc;
}

/* ---- the patch of a workspace ------------------------------------------------ */

/* A file of a tree: path, git mode, blob id. */
struct went {
	char *path;
	unsigned mode;
	git_oid id;
	int tracked; /* in the task tree */
};

struct wlist {
	struct went *v;
	size_t n, cap;
};

static int wlist_add(struct wlist *l, const char *path, unsigned mode, const git_oid *id)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		struct went *v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	char *p = strdup(path);
	if (!p)
		return -1;
	l->v[l->n++] = (struct went){ p, mode, *id, 0 };
	return 0;
}

static void wlist_free(struct wlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].path);
	free(l->v);
	memset(l, 0, sizeof *l);
}

static int went_cmp(const void *a, const void *b)
{
	return strcmp(((const struct went *)a)->path, ((const struct went *)b)->path);
}

static struct went *wlist_find(const struct wlist *l, const char *path)
{
	struct went key = { (char *)path, 0, { { 0 } }, 0 };
	return bsearch(&key, l->v, l->n, sizeof *l->v, went_cmp);
}

static int old_cb(const char *root, const git_tree_entry *e, void *payload)
{
	git_filemode_t m = git_tree_entry_filemode(e);
	if (m != GIT_FILEMODE_BLOB && m != GIT_FILEMODE_BLOB_EXECUTABLE && m != GIT_FILEMODE_LINK)
		return 0;
	char path[8200];
	snprintf(path, sizeof path, "%s%s", root, git_tree_entry_name(e));
	return wlist_add(payload, path, (unsigned)m, git_tree_entry_id(e)) < 0 ? -1 : 0;
}

/* The walk of a workspace. */
struct walk {
	git_odb *odb;             /* the host's own repository's; NULL: only
				   * hash (fw_workspace_changed()) */
	const struct wlist *old;  /* the task tree, sorted */
	struct wlist now;         /* what the workspace holds */
	const char *scratch;      /* where .gitignore files are copied */
	struct fw_strlist *left;  /* "PATH: why", may be NULL */
	struct fw_strlist *unread; /* paths left unread (only hashing) */
	size_t read, changed;     /* bytes read, bytes of changed files */
	size_t files;
	int full;                 /* FW_WS_FILES_MAX reached */
	char *err;
	size_t errlen;
};

/* Notes what is left out of the patch (path, the raw name for unread).
 * Returns 0 or -1 (out of memory). */
static int leave_out(struct walk *w, const char *path, const char *fmt, ...)
{
	if (w->unread && fw_strlist_add(w->unread, path) < 0) {
		fw_seterr(w->err, w->errlen, "out of memory");
		return -1;
	}
	if (!w->left)
		return 0;
	char why[200], msg[4400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	snprintf(msg, sizeof msg, "%s: %s", path, why);
	if (fw_strlist_add(w->left, msg) < 0) {
		fw_seterr(w->err, w->errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* A file that is not read stays as the task tree has it. */
static int keep_old(struct walk *w, const char *path)
{
	struct went *o = wlist_find(w->old, path);
	return o && wlist_add(&w->now, path, o->mode, &o->id) < 0 ? -1 : 0;
}

/* Copies a workspace .gitignore (data, len bytes) to the same place below
 * the scratch directory, where the host's repository reads it. */
static int copy_ignore(struct walk *w, const char *path, const char *data, size_t len)
{
	char full[8200];
	snprintf(full, sizeof full, "%s/%s", w->scratch, path);
	for (char *c = full + strlen(w->scratch) + 1; (c = strchr(c, '/')); c++) {
		*c = '\0';
		int k = mkdir(full, 0700);
		*c = '/';
		if (k < 0 && errno != EEXIST)
			return -1;
	}
	int fd = open(full, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	int rc = 0;
	for (size_t off = 0; rc == 0 && off < len;) {
		ssize_t k = write(fd, data + off, len - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			rc = -1;
		else
			off += (size_t)k;
	}
	if (close(fd) < 0)
		rc = -1;
	return rc;
}

/* Adds the entry of regular file name (in directory dfd, at path, st its
 * lstat) to w->now with the blob id of its bytes, read through a mapping.
 * Returns 0 or -1. */
static int hash_mapped(struct walk *w, int dfd, const char *name, const char *path,
		       const struct stat *st)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat fs;
	if (fd < 0 || fstat(fd, &fs) < 0 || !S_ISREG(fs.st_mode) || fs.st_ino != st->st_ino) {
		int e = fd < 0 ? errno : EINVAL;
		if (fd >= 0)
			close(fd);
		if (leave_out(w, path, "cannot open: %s", strerror(e)) < 0)
			return -1;
		return keep_old(w, path);
	}
	size_t len = (size_t)fs.st_size;
	void *map = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	int e = errno;
	close(fd);
	if (len && map == MAP_FAILED) {
		if (leave_out(w, path, "cannot read: %s", strerror(e)) < 0)
			return -1;
		return keep_old(w, path);
	}
	w->read += len;
	git_oid id;
	int rc = git_odb_hash(&id, len ? map : "", len, GIT_OBJECT_BLOB);
	if (len)
		munmap(map, len);
	if (rc < 0) {
		fw_seterr(w->err, w->errlen, "cannot hash '%s': %s", path, gerr());
		return -1;
	}
	unsigned mode = fs.st_mode & 0100 ? GIT_FILEMODE_BLOB_EXECUTABLE : GIT_FILEMODE_BLOB;
	if (wlist_add(&w->now, path, mode, &id) < 0) {
		fw_seterr(w->err, w->errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* One file or link (name in directory dfd, at path): its blob into the
 * host's repository and its entry into w->now. */
static int walk_file(struct walk *w, int dfd, const char *name, const char *path,
		     const struct stat *st)
{
	char *data = NULL;
	size_t len = 0;
	unsigned mode;
	char link[4097];

	if (S_ISLNK(st->st_mode)) {
		ssize_t k = readlinkat(dfd, name, link, sizeof link);
		if (k < 0 || (size_t)k >= sizeof link)
			return leave_out(w, path, "unreadable link");
		data = link;
		len = (size_t)k;
		mode = GIT_FILEMODE_LINK;
	} else if (!w->odb) {
		/* only the blob id: the file is mapped, not copied, so a big
		 * tracked file the patch left alone still reads unchanged */
		if (w->read + (size_t)st->st_size > FW_WS_TOTAL_MAX) {
			if (leave_out(w, path, "over the %u-byte limit of all files",
				      FW_WS_TOTAL_MAX) < 0)
				return -1;
			return keep_old(w, path);
		}
		return hash_mapped(w, dfd, name, path, st);
	} else {
		if ((uint64_t)st->st_size > FW_WS_FILE_MAX) {
			if (leave_out(w, path, "over the %u-byte file limit", FW_WS_FILE_MAX) < 0)
				return -1;
			return keep_old(w, path);
		}
		if (w->read + (size_t)st->st_size > FW_WS_TOTAL_MAX) {
			if (leave_out(w, path, "over the %u-byte limit of all files",
				      FW_WS_TOTAL_MAX) < 0)
				return -1;
			return keep_old(w, path);
		}
		int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			return leave_out(w, path, "cannot open: %s", strerror(errno));
		int k = read_fd(fd, FW_WS_FILE_MAX, &data, &len);
		int e = errno;
		close(fd);
		if (k < 0) {
			if (e == ENOMEM) {
				fw_seterr(w->err, w->errlen, "out of memory");
				return -1;
			}
			if (leave_out(w, path, "cannot read: %s", strerror(e)) < 0)
				return -1;
			return keep_old(w, path);
		}
		w->read += len;
		mode = st->st_mode & 0100 ? GIT_FILEMODE_BLOB_EXECUTABLE : GIT_FILEMODE_BLOB;
	}
	git_oid id;
	int rc = 0;
	if (git_odb_hash(&id, data, len, GIT_OBJECT_BLOB) < 0) {
		fw_seterr(w->err, w->errlen, "cannot hash '%s': %s", path, gerr());
		rc = -1;
		goto out;
	}
	struct went *o = wlist_find(w->old, path);
	if (!o || !git_oid_equal(&o->id, &id)) {
		if (w->changed + len > FW_WS_CHANGED_MAX) {
			rc = leave_out(w, path, "over the %u-byte limit of changed files",
				       FW_WS_CHANGED_MAX);
			if (rc == 0)
				rc = keep_old(w, path);
			goto out;
		}
		w->changed += len;
		if (w->odb && !git_odb_exists(w->odb, &id) &&
		    git_odb_write(&id, w->odb, data, len, GIT_OBJECT_BLOB) < 0) {
			fw_seterr(w->err, w->errlen, "cannot store '%s': %s", path, gerr());
			rc = -1;
			goto out;
		}
	}
	if (w->odb && !S_ISLNK(st->st_mode) && !strcmp(name, ".gitignore") &&
	    copy_ignore(w, path, data, len) < 0) {
		fw_seterr(w->err, w->errlen, "cannot copy '%s': %s", path, strerror(errno));
		rc = -1;
		goto out;
	}
	if (wlist_add(&w->now, path, mode, &id) < 0) {
		fw_seterr(w->err, w->errlen, "out of memory");
		rc = -1;
	}
out:
	if (data != link)
		free(data);
	return rc;
}

/* The entries of directory dfd (at rel, "" for the top), depth levels
 * down.  Takes dfd. */
static int walk_dir(struct walk *w, int dfd, const char *rel, int depth)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return leave_out(w, *rel ? rel : ".", "cannot read: %s", strerror(errno));
	}
	int rc = 0;
	struct dirent *e;
	while (rc == 0 && (e = readdir(d))) {
		const char *n = e->d_name;
		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		char path[4096];
		if ((size_t)snprintf(path, sizeof path, "%s%s%s", rel, *rel ? "/" : "", n) >=
		    sizeof path) {
			rc = leave_out(w, rel, "a name below it is too long");
			continue;
		}
		/* git's own directory, the workspace's or a nested one, is
		 * no part of a patch (git does not descend into one either) */
		if (!strcmp(n, ".git"))
			continue;
		if (!fw_utf8_valid((const uint8_t *)path, strlen(path)) || strchr(n, '\n') ||
		    strchr(n, '\\')) {
			rc = leave_out(w, w->unread ? path : "(a name)",
				       "not a path a patch can hold");
			continue;
		}
		struct stat st;
		if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = leave_out(w, path, "cannot stat: %s", strerror(errno));
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (depth + 1 > FW_WS_DEPTH_MAX) {
				rc = leave_out(w, path, "deeper than %d levels", FW_WS_DEPTH_MAX);
				continue;
			}
			int sub = openat(dirfd(d), n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0) {
				rc = leave_out(w, path, "cannot open: %s", strerror(errno));
				continue;
			}
			rc = walk_dir(w, sub, path, depth + 1);
			continue;
		}
		if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
			rc = leave_out(w, path, "not a regular file");
			continue;
		}
		if (w->files >= FW_WS_FILES_MAX) {
			if (!w->full++ || w->unread)
				rc = leave_out(w, path, "and what follows: over %d files",
					       FW_WS_FILES_MAX);
			if (rc == 0)
				rc = keep_old(w, path);
			continue;
		}
		w->files++;
		rc = walk_file(w, dirfd(d), n, path, &st);
	}
	closedir(d);
	return rc;
}

/* 1 when blob id of repo r is not valid UTF-8 (a text diff of it would not
 * be text). */
static int blob_not_utf8(git_repository *r, const git_oid *id)
{
	git_blob *b;
	if (git_oid_is_zero(id) || git_blob_lookup(&b, r, id) < 0)
		return 0;
	int bad = !fw_utf8_valid(git_blob_rawcontent(b), (size_t)git_blob_rawsize(b));
	git_blob_free(b);
	return bad;
}

/* Appends the patch text of diff d to out, delta by delta: the ones
 * flagged in bin from db (the same deltas, made binary) when db is not
 * NULL.  Returns 0 or -1. */
static int print_diff(git_diff *d, git_diff *db, const char *bin, struct fw_buf *out)
{
	size_t n = db ? git_diff_num_deltas(d) : 1;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		git_patch *p = NULL;
		git_buf b = { 0 };
		if (!db)
			rc = git_diff_to_buf(&b, d, GIT_DIFF_FORMAT_PATCH);
		else if ((rc = git_patch_from_diff(&p, bin[i] ? db : d, i)) == 0 && p)
			rc = git_patch_to_buf(&b, p);
		if (rc == 0 && b.size && fw_buf_append(out, b.ptr, b.size))
			rc = -1;
		git_buf_dispose(&b);
		git_patch_free(p);
	}
	return rc;
}

int fw_workspace_diff(struct fw_store *s, const char *tree_hex, const char *dir,
		      const char *scratch, char **patch, struct fw_strlist *left_out,
		      char *err, size_t errlen)
{
	git_repository *src = fw_store_repo(s), *r = NULL;
	git_odb *sodb = NULL, *odb = NULL;
	git_tree *tree = NULL, *otree = NULL, *ntree = NULL;
	git_index *idx = NULL;
	git_diff *d = NULL, *db = NULL;
	struct fw_buf b = { 0 };
	struct wlist old = { 0 };
	struct walk w = { .left = left_out, .scratch = scratch, .err = err, .errlen = errlen };
	char *bin = NULL;
	git_oid id, oid, nid;
	int rc = -1, dfd = -1;

	*patch = NULL;
	git_libgit2_init();
	/* The host's own repository, in a directory only the host reaches:
	 * the task tree's blobs come from the store (an alternate), the
	 * workspace's are written here.  Nothing of the workspace's .git is
	 * opened, so no configuration, attribute or ignore rule the agent
	 * wrote there counts. */
	if (git_repository_init(&r, scratch, 0) < 0 || git_repository_odb(&odb, r) < 0 ||
	    git_repository_odb(&sodb, src) < 0) {
		fw_seterr(err, errlen, "cannot create '%s': %s", scratch, gerr());
		goto out;
	}
	char objs[4200];
	snprintf(objs, sizeof objs, "%sobjects", git_repository_path(src));
	if (git_odb_add_disk_alternate(odb, objs) < 0) {
		fw_seterr(err, errlen, "cannot read the store: %s", gerr());
		goto out;
	}
	int empty;
	if (strlen(tree_hex) != 40 || git_oid_fromstr(&id, tree_hex) < 0 ||
	    git_tree_lookup(&tree, src, &id) < 0 ||
	    filtered_copy(src, sodb, r, odb, tree, "", &oid, &empty, NULL) < 0 ||
	    git_tree_lookup(&otree, r, &oid) < 0) {
		fw_seterr(err, errlen, "no tree %s in the store: %s", tree_hex, gerr());
		goto out;
	}
	if (git_tree_walk(otree, GIT_TREEWALK_PRE, old_cb, &old) < 0) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	qsort(old.v, old.n, sizeof *old.v, went_cmp);
	w.odb = odb;
	w.old = &old;
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		fw_seterr(err, errlen, "cannot open '%s': %s", dir, strerror(errno));
		goto out;
	}
	int k = walk_dir(&w, dfd, "", 0);
	dfd = -1;
	if (k < 0)
		goto out;
	/* New files that the workspace's .gitignore files ignore are left
	 * out, as git leaves them out of a diff. */
	if (git_index_new(&idx) < 0) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < w.now.n; i++) {
		struct went *e = &w.now.v[i];
		int ign = 0;
		if (!wlist_find(&old, e->path) &&
		    (git_ignore_path_is_ignored(&ign, r, e->path) < 0 || ign))
			continue;
		git_index_entry ie;
		memset(&ie, 0, sizeof ie);
		ie.path = e->path;
		ie.mode = e->mode;
		ie.id = e->id;
		if (git_index_add(idx, &ie) < 0 &&
		    leave_out(&w, e->path, "not a path git takes") < 0)
			goto out;
	}
	if (git_index_write_tree_to(&nid, idx, r) < 0 || git_tree_lookup(&ntree, r, &nid) < 0) {
		fw_seterr(err, errlen, "cannot write the workspace tree: %s", gerr());
		goto out;
	}
	git_diff_options o;
	git_diff_options_init(&o, GIT_DIFF_OPTIONS_VERSION);
	o.flags = GIT_DIFF_SHOW_BINARY;
	if (git_diff_tree_to_tree(&d, r, otree, ntree, &o) < 0) {
		fw_seterr(err, errlen, "workspace diff: %s", gerr());
		goto out;
	}
	/* A file that is not UTF-8 on either side goes as a git binary
	 * patch: the patch is record text, and must still apply. */
	size_t nd = git_diff_num_deltas(d);
	int any = 0;
	if (nd && !(bin = calloc(nd, 1))) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < nd; i++) {
		const git_diff_delta *dl = git_diff_get_delta(d, i);
		bin[i] = !(dl->flags & GIT_DIFF_FLAG_BINARY) &&
			 (blob_not_utf8(r, &dl->old_file.id) || blob_not_utf8(r, &dl->new_file.id));
		any |= bin[i];
	}
	o.flags |= GIT_DIFF_FORCE_BINARY;
	if (any && git_diff_tree_to_tree(&db, r, otree, ntree, &o) < 0) {
		fw_seterr(err, errlen, "workspace diff: %s", gerr());
		goto out;
	}
	if (print_diff(d, db, bin, &b) < 0) {
		fw_seterr(err, errlen, "workspace diff: %s", gerr());
		goto out;
	}
	if (fw_buf_append(&b, "", 1)) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	*patch = (char *)b.p;
	b.p = NULL;
	rc = 0;
out:
	if (dfd >= 0)
		close(dfd);
	free(bin);
	fw_buf_free(&b);
	git_diff_free(d);
	git_diff_free(db);
	git_index_free(idx);
	git_tree_free(ntree);
	git_tree_free(otree);
	git_tree_free(tree);
	git_odb_free(odb);
	git_odb_free(sodb);
	git_repository_free(r);
	wlist_free(&old);
	wlist_free(&w.now);
	fw_rmtree(scratch);
	git_libgit2_shutdown();
	return rc;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int fw_workspace_changed(struct fw_store *s, const char *tree_hex, const char *dir,
			 struct fw_strlist *paths, char *err, size_t errlen)
{
	struct fw_file *f = NULL;
	size_t nf = 0;
	struct wlist old = { 0 };
	struct fw_strlist unread = { 0 }, got = { 0 };
	struct walk w = { .unread = &unread, .err = err, .errlen = errlen };
	int rc = -1;

	git_libgit2_init();
	if (fw_store_files(s, tree_hex, &f, &nf, err, errlen) < 0)
		goto out;
	for (size_t i = 0; i < nf; i++) {
		git_oid id;
		if (scrubbed_path(f[i].path))
			continue; /* not in a workspace */
		if (git_oid_fromstr(&id, f[i].oid) < 0 ||
		    wlist_add(&old, f[i].path, f[i].mode, &id) < 0) {
			fw_seterr(err, errlen, "out of memory");
			goto out;
		}
	}
	qsort(old.v, old.n, sizeof *old.v, went_cmp);
	w.old = &old;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		fw_seterr(err, errlen, "cannot open '%s': %s", dir, strerror(errno));
		goto out;
	}
	if (walk_dir(&w, dfd, "", 0) < 0)
		goto out;
	qsort(w.now.v, w.now.n, sizeof *w.now.v, went_cmp);
	/* changed, added and removed, in path order as git's status has
	 * them; what was left unread counts as changed, whatever the tree
	 * holds there */
	for (size_t i = 0; i < w.now.n; i++) {
		const struct went *e = &w.now.v[i], *o = wlist_find(&old, e->path);
		if ((!o || o->mode != e->mode || !git_oid_equal(&o->id, &e->id)) &&
		    fw_strlist_add(&got, e->path) < 0)
			goto oom;
	}
	for (size_t i = 0; i < old.n; i++)
		if (!wlist_find(&w.now, old.v[i].path) &&
		    fw_strlist_add(&got, old.v[i].path) < 0)
			goto oom;
	for (size_t i = 0; i < unread.n; i++) {
		int seen = 0;
		for (size_t k = 0; k < got.n && !seen; k++)
			seen = !strcmp(got.v[k], unread.v[i]);
		if (!seen && fw_strlist_add(&got, unread.v[i]) < 0)
			goto oom;
	}
	if (got.n) /* qsort wants a pointer even for nothing */
		qsort(got.v, got.n, sizeof *got.v, str_cmp);
	for (size_t i = 0; i < got.n; i++)
		if (fw_strlist_add(paths, got.v[i]) < 0)
			goto oom;
	rc = 0;
	goto out;
oom:
	fw_seterr(err, errlen, "out of memory");
out:
	fw_files_free(f, nf);
	wlist_free(&old);
	wlist_free(&w.now);
	fw_strlist_release(&unread);
	fw_strlist_release(&got);
	git_libgit2_shutdown();
	return rc;
}
