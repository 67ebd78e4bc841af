/*
 * fw_store.c — the task store on libgit2 (see fw_store.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <git2.h>

#include "fw_base.h"
#include "fw_store.h"

struct fw_store {
	git_repository *repo;
};

/* Message of libgit2's last error, lowercased first letter. */
static const char *gerr(void)
{
	const git_error *e = git_error_last();
	return e && e->message ? e->message : "unknown libgit2 error";
}

static int parse_oid(git_oid *oid, const char *hex, char *err, size_t errlen)
{
	if (!hex || strlen(hex) != 40 || git_oid_fromstr(oid, hex) < 0) {
		fw_seterr(err, errlen, "bad object id '%s'", hex ? hex : "(null)");
		return -1;
	}
	return 0;
}

struct fw_store *fw_store_open(const char *dir, int create, char *err, size_t errlen)
{
	git_libgit2_init();
	struct fw_store *s = calloc(1, sizeof *s);
	if (!s) {
		fw_seterr(err, errlen, "out of memory");
		git_libgit2_shutdown();
		return NULL;
	}
	struct stat st;
	if (create && stat(dir, &st) < 0 && errno == ENOENT) {
		/* Build the repository beside its final name and rename it, so
		 * that a crash never leaves a half-initialised store. */
		char tmp[4096];
		snprintf(tmp, sizeof tmp, "%s.tmp-%ld", dir, (long)getpid());
		git_repository *r = NULL;
		if (git_repository_init(&r, tmp, 1) < 0) {
			fw_seterr(err, errlen, "cannot create store '%s': %s", dir, gerr());
			goto fail;
		}
		git_repository_free(r);
		if (rename(tmp, dir) < 0 && errno != EEXIST && errno != ENOTEMPTY) {
			fw_seterr(err, errlen, "cannot create store '%s': %s", dir, strerror(errno));
			goto fail;
		}
		/* Lost a race with another creator: theirs is as good. */
		if (access(tmp, F_OK) == 0)
			fw_rmtree(tmp);
	}
	if (git_repository_open_bare(&s->repo, dir) < 0) {
		fw_seterr(err, errlen, "cannot open store '%s': %s", dir, gerr());
		goto fail;
	}
	return s;
fail:
	free(s);
	git_libgit2_shutdown();
	return NULL;
}

void fw_store_free(struct fw_store *s)
{
	if (!s)
		return;
	git_repository_free(s->repo);
	free(s);
	git_libgit2_shutdown();
}

void *fw_store_repo(struct fw_store *s)
{
	return s->repo;
}

/* Copies one object from src to dst unless dst has it. */
static int copy_object(git_odb *src, git_odb *dst, const git_oid *id)
{
	if (git_odb_exists(dst, id))
		return 0;
	git_odb_object *o;
	if (git_odb_read(&o, src, id) < 0)
		return -1;
	git_oid out;
	int rc = git_odb_write(&out, dst, git_odb_object_data(o), git_odb_object_size(o),
			       git_odb_object_type(o));
	git_odb_object_free(o);
	return rc;
}

struct copy_ctx {
	git_odb *src, *dst;
	int failed;
};

static int copy_cb(const char *root, const git_tree_entry *e, void *payload)
{
	struct copy_ctx *c = payload;
	git_object_t t = git_tree_entry_type(e);
	if (t != GIT_OBJECT_BLOB && t != GIT_OBJECT_TREE)
		return 0; /* submodule commits are not ours to copy */
	if (copy_object(c->src, c->dst, git_tree_entry_id(e)) < 0) {
		c->failed = 1;
		return -1;
	}
	return 0;
}

/* Copies tree and everything below it from repository src to dst. */
static int copy_tree(git_repository *src, git_repository *dst, git_tree *tree)
{
	struct copy_ctx c = { 0 };
	int rc = -1;
	if (git_repository_odb(&c.src, src) < 0 || git_repository_odb(&c.dst, dst) < 0)
		goto out;
	if (copy_object(c.src, c.dst, git_tree_id(tree)) < 0)
		goto out;
	if (git_tree_walk(tree, GIT_TREEWALK_PRE, copy_cb, &c) < 0 || c.failed)
		goto out;
	rc = 0;
out:
	git_odb_free(c.src);
	git_odb_free(c.dst);
	return rc;
}

int fw_store_import(struct fw_store *s, const char *repo_path, const char *rev,
		    char *tree_hex, char *commit_hex, int *dirty, char *err, size_t errlen)
{
	git_repository *r = NULL;
	git_object *obj = NULL;
	git_commit *commit = NULL;
	git_tree *tree = NULL;
	git_status_list *st = NULL;
	int rc = -1;

	if (git_repository_open_ext(&r, repo_path, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0) {
		fw_seterr(err, errlen, "not a git repository: %s", gerr());
		goto out;
	}
	if (git_revparse_single(&obj, r, rev ? rev : "HEAD") < 0) {
		fw_seterr(err, errlen, "no revision '%s': %s", rev ? rev : "HEAD", gerr());
		goto out;
	}
	if (git_object_peel((git_object **)&commit, obj, GIT_OBJECT_COMMIT) < 0 ||
	    git_commit_tree(&tree, commit) < 0) {
		fw_seterr(err, errlen, "'%s' is not a commit: %s", rev ? rev : "HEAD", gerr());
		goto out;
	}
	if (copy_tree(r, s->repo, tree) < 0) {
		fw_seterr(err, errlen, "cannot copy tree into the store: %s", gerr());
		goto out;
	}
	git_oid_tostr(tree_hex, FW_OID_HEX, git_tree_id(tree));
	if (commit_hex)
		git_oid_tostr(commit_hex, FW_OID_HEX, git_commit_id(commit));
	if (dirty) {
		*dirty = 0;
		if (!git_repository_is_bare(r)) {
			git_status_options so;
			git_status_options_init(&so, GIT_STATUS_OPTIONS_VERSION);
			so.show = GIT_STATUS_SHOW_INDEX_AND_WORKDIR;
			so.flags = GIT_STATUS_OPT_INCLUDE_UNTRACKED | GIT_STATUS_OPT_EXCLUDE_SUBMODULES;
			if (git_status_list_new(&st, r, &so) < 0) {
				fw_seterr(err, errlen, "cannot read status: %s", gerr());
				goto out;
			}
			*dirty = git_status_list_entrycount(st) > 0;
		}
	}
	rc = 0;
out:
	git_status_list_free(st);
	git_tree_free(tree);
	git_commit_free(commit);
	git_object_free(obj);
	git_repository_free(r);
	return rc;
}

static int lookup_tree(struct fw_store *s, const char *hex, git_tree **tree,
		       char *err, size_t errlen)
{
	git_oid id;
	if (parse_oid(&id, hex, err, errlen) < 0)
		return -1;
	if (git_tree_lookup(tree, s->repo, &id) < 0) {
		fw_seterr(err, errlen, "no tree %s in the store: %s", hex, gerr());
		return -1;
	}
	return 0;
}

struct list_ctx {
	struct fw_file *v;
	size_t n, cap;
	int failed;
};

static int list_cb(const char *root, const git_tree_entry *e, void *payload)
{
	struct list_ctx *c = payload;
	if (git_tree_entry_type(e) != GIT_OBJECT_BLOB)
		return 0;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct fw_file *v = realloc(c->v, cap * sizeof *v);
		if (!v)
			goto nomem;
		c->v = v;
		c->cap = cap;
	}
	const char *name = git_tree_entry_name(e);
	size_t len = strlen(root) + strlen(name) + 1;
	char *path = malloc(len);
	if (!path)
		goto nomem;
	snprintf(path, len, "%s%s", root, name);
	struct fw_file *f = &c->v[c->n++];
	f->path = path;
	f->mode = git_tree_entry_filemode(e);
	git_oid_tostr(f->oid, FW_OID_HEX, git_tree_entry_id(e));
	return 0;
nomem:
	c->failed = 1;
	return -1;
}

int fw_store_files(struct fw_store *s, const char *tree_hex, struct fw_file **files,
		   size_t *n, char *err, size_t errlen)
{
	git_tree *tree;
	*files = NULL;
	*n = 0;
	if (lookup_tree(s, tree_hex, &tree, err, errlen) < 0)
		return -1;
	struct list_ctx c = { 0 };
	int rc = git_tree_walk(tree, GIT_TREEWALK_PRE, list_cb, &c);
	git_tree_free(tree);
	if (rc < 0 || c.failed) {
		fw_files_free(c.v, c.n);
		fw_seterr(err, errlen, c.failed ? "out of memory" : "cannot walk tree: %s", gerr());
		return -1;
	}
	*files = c.v;
	*n = c.n;
	return 0;
}

void fw_files_free(struct fw_file *files, size_t n)
{
	if (!files)
		return;
	for (size_t i = 0; i < n; i++)
		free(files[i].path);
	free(files);
}

int fw_store_read(struct fw_store *s, const char *tree_hex, const char *path,
		  char **data, size_t *len, char *err, size_t errlen)
{
	git_tree *tree;
	git_tree_entry *e = NULL;
	git_blob *blob = NULL;
	int rc = -1;
	*data = NULL;
	*len = 0;
	if (lookup_tree(s, tree_hex, &tree, err, errlen) < 0)
		return -1;
	if (git_tree_entry_bypath(&e, tree, path) < 0 ||
	    git_tree_entry_type(e) != GIT_OBJECT_BLOB) {
		fw_seterr(err, errlen, "no file '%s' in tree %s", path, tree_hex);
		goto out;
	}
	if (git_blob_lookup(&blob, s->repo, git_tree_entry_id(e)) < 0) {
		fw_seterr(err, errlen, "cannot read '%s': %s", path, gerr());
		goto out;
	}
	size_t n = (size_t)git_blob_rawsize(blob);
	char *p = malloc(n + 1);
	if (!p) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	memcpy(p, git_blob_rawcontent(blob), n);
	p[n] = '\0';
	*data = p;
	*len = n;
	rc = 0;
out:
	git_blob_free(blob);
	git_tree_entry_free(e);
	git_tree_free(tree);
	return rc;
}

int fw_store_edit(struct fw_store *s, const char *tree_hex, const struct fw_edit *edits,
		  size_t n, char *out_hex, char *err, size_t errlen)
{
	git_tree *tree;
	git_index *idx = NULL;
	int rc = -1;
	if (lookup_tree(s, tree_hex, &tree, err, errlen) < 0)
		return -1;
	/* An in-memory index is the simplest tree editor libgit2 offers:
	 * read the tree, change entries, write the tree back. */
	if (git_index_new(&idx) < 0 || git_index_read_tree(idx, tree) < 0) {
		fw_seterr(err, errlen, "cannot read tree %s: %s", tree_hex, gerr());
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const struct fw_edit *ed = &edits[i];
		const git_index_entry *old = git_index_get_bypath(idx, ed->path, 0);
		if (!ed->data) {
			if (!old || git_index_remove(idx, ed->path, 0) < 0) {
				fw_seterr(err, errlen, "cannot delete '%s': no such file", ed->path);
				goto out;
			}
			continue;
		}
		git_index_entry e;
		memset(&e, 0, sizeof e);
		e.mode = old ? old->mode : GIT_FILEMODE_BLOB;
		e.path = ed->path;
		if (git_blob_create_from_buffer(&e.id, s->repo, ed->data, ed->len) < 0 ||
		    git_index_add(idx, &e) < 0) {
			fw_seterr(err, errlen, "cannot write '%s': %s", ed->path, gerr());
			goto out;
		}
	}
	git_oid out;
	if (git_index_write_tree_to(&out, idx, s->repo) < 0) {
		fw_seterr(err, errlen, "cannot write tree: %s", gerr());
		goto out;
	}
	git_oid_tostr(out_hex, FW_OID_HEX, &out);
	rc = 0;
out:
	git_index_free(idx);
	git_tree_free(tree);
	return rc;
}

int fw_store_diff(struct fw_store *s, const char *from_hex, const char *to_hex,
		  char **patch, char *err, size_t errlen)
{
	git_tree *a = NULL, *b = NULL;
	git_diff *diff = NULL;
	git_buf buf = { 0 };
	int rc = -1;
	*patch = NULL;
	if (lookup_tree(s, from_hex, &a, err, errlen) < 0 ||
	    lookup_tree(s, to_hex, &b, err, errlen) < 0)
		goto out;
	git_diff_options o;
	git_diff_options_init(&o, GIT_DIFF_OPTIONS_VERSION);
	o.flags |= GIT_DIFF_SHOW_BINARY;
	o.context_lines = 3;
	if (git_diff_tree_to_tree(&diff, s->repo, a, b, &o) < 0 ||
	    git_diff_to_buf(&buf, diff, GIT_DIFF_FORMAT_PATCH) < 0) {
		fw_seterr(err, errlen, "cannot diff %s..%s: %s", from_hex, to_hex, gerr());
		goto out;
	}
	*patch = malloc(buf.size + 1);
	if (!*patch) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	memcpy(*patch, buf.ptr ? buf.ptr : "", buf.size);
	(*patch)[buf.size] = '\0';
	rc = 0;
out:
	git_buf_dispose(&buf);
	git_diff_free(diff);
	git_tree_free(a);
	git_tree_free(b);
	return rc;
}

/* 1 when reference refname exists and points at id. */
static int ref_is(git_repository *r, const char *refname, const git_oid *id)
{
	git_oid cur;
	return git_reference_name_to_id(&cur, r, refname) == 0 && git_oid_equal(&cur, id);
}

static void nap_us(long us)
{
	struct timespec ts = { us / 1000000, us % 1000000 * 1000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int fw_store_keep(struct fw_store *s, const char *name, const char *oid_hex,
		  char *err, size_t errlen)
{
	git_oid id;
	git_reference *ref = NULL;
	if (parse_oid(&id, oid_hex, err, errlen) < 0)
		return -1;
	char refname[512];
	snprintf(refname, sizeof refname, "refs/flywheel/%s", name);
	/* Shards of one run (Slurm array tasks, parallel task-mutate) write
	 * the same references into one store at the same moment.  A writer
	 * holds a reference's lock file for well under a millisecond, so a
	 * held lock is waited for, with a doubling wait (jittered by the pid
	 * so that waiters do not wake in step) of at most KEEP_WAIT_US in all;
	 * and a reference that already holds the value is success whoever
	 * wrote it, with no lock taken. */
	enum { KEEP_WAIT_US = 2000000, KEEP_NAP_MAX_US = 100000 };
	long waited = 0, nap = 1000;
	for (;;) {
		if (ref_is(s->repo, refname, &id))
			return 0;
		int rc = git_reference_create(&ref, s->repo, refname, &id, 1, NULL);
		if (rc == 0) {
			git_reference_free(ref);
			return 0;
		}
		/* libgit2's message, before ref_is() below can replace it;
		 * its lock message ends in ": " with nothing after */
		char msg[512];
		snprintf(msg, sizeof msg, "%s", gerr());
		size_t ml = strlen(msg);
		while (ml && (msg[ml - 1] == ' ' || msg[ml - 1] == ':'))
			msg[--ml] = '\0';
		if (rc == GIT_ELOCKED && waited < KEEP_WAIT_US) {
			long us = nap + (long)getpid() % (nap / 2 + 1);
			nap_us(us);
			waited += us;
			nap = nap * 2 < KEEP_NAP_MAX_US ? nap * 2 : KEEP_NAP_MAX_US;
			continue;
		}
		if (rc == GIT_ELOCKED) {
			/* the holder may have written our value as we gave up */
			if (ref_is(s->repo, refname, &id))
				return 0;
			fw_seterr(err, errlen,
			       "cannot write %s: %s: still locked after %.1f s (a writer that "
			       "died leaves its .lock file: remove it when none is running)",
			       refname, msg, waited / 1e6);
		} else {
			fw_seterr(err, errlen, "cannot write %s: %s", refname, msg);
		}
		return -1;
	}
}
