/*
 * fw_store.h — the task store: a bare git repository (libgit2) holding the
 * original and mutated trees of tasks as git objects.
 *
 * Trees are named by their 40-hex git object id.  Identical files and
 * directories are stored once (git's content addressing) and compressed
 * (zlib).  Objects are written to temporary files and renamed, so an
 * interrupted writer never leaves a half-written object; a store is created
 * in a temporary directory and renamed into place.
 *
 * A struct fw_store is not shared between threads; open one per thread.
 */
#ifndef FW_STORE_H
#define FW_STORE_H

#include <stddef.h>

#define FW_OID_HEX 41 /* 40 hex digits and a NUL */

struct fw_store;

/*
 * Opens the bare repository at dir; with create != 0 makes it first when
 * dir does not exist.  Returns a store the caller frees with
 * fw_store_free(), or NULL with a message in err.
 */
struct fw_store *fw_store_open(const char *dir, int create, char *err, size_t errlen);

/* Closes s.  fw_store_free(NULL) does nothing. */
void fw_store_free(struct fw_store *s);

/* The store's libgit2 repository (a git_repository *), for callers that
 * need libgit2 directly.  Owned by s. */
void *fw_store_repo(struct fw_store *s);

/*
 * Copies the tree of revision rev (e.g. "HEAD") of the git repository at
 * repo_path into s.  Fills tree_hex and commit_hex (FW_OID_HEX bytes each;
 * commit_hex may be NULL) and *dirty (may be NULL) with 1 when the work
 * tree has changes to tracked files or untracked files that are not
 * ignored.  Returns 0, or -1 with a message in err (not a repository, no
 * such revision, an empty repository).
 */
int fw_store_import(struct fw_store *s, const char *repo_path, const char *rev,
		    char *tree_hex, char *commit_hex, int *dirty, char *err, size_t errlen);

/* One file of a tree. */
struct fw_file {
	char *path;   /* relative, '/'-separated, owned */
	unsigned mode; /* git file mode: 0100644, 0100755 or 0120000 */
	char oid[FW_OID_HEX];
};

/*
 * Lists the files of tree tree_hex (recursively, in git order; submodule
 * entries are skipped).  *files receives an array of *n entries the caller
 * frees with fw_files_free().  Returns 0, or -1 with a message in err.
 */
int fw_store_files(struct fw_store *s, const char *tree_hex, struct fw_file **files,
		   size_t *n, char *err, size_t errlen);

/* Frees an array from fw_store_files().  NULL does nothing. */
void fw_files_free(struct fw_file *files, size_t n);

/*
 * Reads the file at path in tree tree_hex.  *data receives a malloc'd,
 * NUL-terminated copy of its *len bytes, which the caller frees.  Returns 0,
 * or -1 with a message in err (no such path, not a file).
 */
int fw_store_read(struct fw_store *s, const char *tree_hex, const char *path,
		  char **data, size_t *len, char *err, size_t errlen);

/* One change to a tree: path gets data (len bytes, mode 0100644 unless the
 * file existed), or is deleted when data is NULL. */
struct fw_edit {
	const char *path;
	const char *data;
	size_t len;
};

/*
 * Writes the tree that is tree_hex with the n edits applied and fills
 * out_hex.  Directories left empty disappear.  Returns 0, or -1 with a
 * message in err (a deleted path that does not exist, a write failure).
 */
int fw_store_edit(struct fw_store *s, const char *tree_hex, const struct fw_edit *edits,
		  size_t n, char *out_hex, char *err, size_t errlen);

/*
 * The unified diff (git format, a/ and b/ prefixes) that turns tree from_hex
 * into tree to_hex: `git apply` of it on a checkout of from_hex gives to_hex.
 * *patch is malloc'd and NUL-terminated; the caller frees it.  Returns 0, or
 * -1 with a message in err.
 */
int fw_store_diff(struct fw_store *s, const char *from_hex, const char *to_hex,
		  char **patch, char *err, size_t errlen);

/*
 * Points the reference refs/flywheel/NAME at object oid_hex so that git gc
 * keeps it.  Safe for processes writing the same reference into one store
 * at once: a reference that already points at oid_hex is success without a
 * write, and a reference whose lock another writer holds is tried again
 * with a short backoff for up to about 2 s, then checked once more.
 * Returns 0, or -1 with a message in err (a bad id, a lock still held after
 * the wait, a write failure).
 */
int fw_store_keep(struct fw_store *s, const char *name, const char *oid_hex,
		  char *err, size_t errlen);

#endif
