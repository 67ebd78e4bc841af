/*
 * fw_workspace.h — clean-room workspaces: a tree of the task store checked
 * out as a fresh git repository with one root commit, scrubbed of files
 * that leak removed code, and audited for leftovers.
 *
 * A workspace holds exactly the objects of its tree plus one commit: no
 * history, no remotes, no reflog, no stash, no other objects.  The commit
 * has a fixed author, committer and date, so the same tree gives the same
 * commit id on every machine.
 *
 * The scrub drops what caches or build steps leave behind and what could
 * hold a copy of code a task removed: __pycache__/, *.pyc, *.pyo,
 * .pytest_cache/, .mypy_cache/, *.egg-info/, .eggs/, build output (*.o,
 * *.a, *.so, *.obj, *.class, *.gcno, *.gcda), coverage data (.coverage,
 * .coverage.*, coverage.xml, htmlcov/, .nyc_output/, lcov.info), patch
 * leftovers (*.orig, *.rej), editor swap and backup files (*.swp, *.swo,
 * *~, .#*).
 *
 * The audit looks for removed code in every file of a workspace and every
 * object of its git database: text by normalized line n-grams (lines
 * trimmed, inner whitespace collapsed, trivial lines skipped, up to 3
 * consecutive lines), binary files (such as a .pyc) by the identifiers of
 * the removed code.  Only what is unique to the removed code counts: line
 * n-grams and identifiers that also occur in the kept code are ignored, so
 * the audit of a correct workspace finds nothing by construction.
 */
#ifndef FW_WORKSPACE_H
#define FW_WORKSPACE_H

#include <stddef.h>

struct fw_store;

/* Author and date of every workspace commit. */
#define FW_WORKSPACE_AUTHOR "flywheel"
#define FW_WORKSPACE_EMAIL "flywheel@localhost"
#define FW_WORKSPACE_TIME 946684800 /* 2000-01-01T00:00:00Z */

/* A list of strings (paths), owned. */
struct fw_strlist {
	char **v;
	size_t n, cap;
};

/* Appends a copy of s.  Returns 0, or -1 when memory runs out. */
int fw_strlist_add(struct fw_strlist *l, const char *s);

/* Frees the strings and the array; the list is empty afterwards. */
void fw_strlist_free(struct fw_strlist *l);

/*
 * 1 when a file or directory (is_dir) of this base name is removed by the
 * scrub, else 0.  Cannot fail.
 */
int fw_scrub_match(const char *name, int is_dir);

/*
 * Materialises tree tree_hex of store s as a new git repository in dir
 * (which must not exist or be an empty directory): the tree without the
 * entries fw_scrub_match() names, checked out, committed once on branch
 * main with the fixed author and date.  Scrubbed paths are appended to
 * scrubbed (may be NULL).  commit_hex (FW_OID_HEX bytes, may be NULL)
 * receives the commit id.  Returns 0, or -1 with a message in err (dir is
 * then removed if this call created it).
 */
int fw_workspace_create(struct fw_store *s, const char *tree_hex, const char *dir,
			char *commit_hex, struct fw_strlist *scrubbed,
			char *err, size_t errlen);

/*
 * Removes from the files below dir (not descending into .git) every path
 * fw_scrub_match() names, appending the relative paths removed to scrubbed
 * (may be NULL).  Returns the number removed, or -1 with a message in err.
 */
int fw_workspace_scrub(const char *dir, struct fw_strlist *scrubbed, char *err, size_t errlen);

/* Removes path and everything below it, like rm -rf.  Returns 0, or -1
 * with errno set.  A missing path is success. */
int fw_rmtree(const char *path);

/* ---- audit ------------------------------------------------------------------- */

struct fw_audit;

/* Returns an empty audit, or NULL when memory runs out.  Caller frees with
 * fw_audit_free(). */
struct fw_audit *fw_audit_new(void);

/* Frees a.  NULL does nothing. */
void fw_audit_free(struct fw_audit *a);

/* Adds len bytes of removed code (the text a task took out).  Returns 0,
 * or -1 when memory runs out. */
int fw_audit_removed(struct fw_audit *a, const char *text, size_t len);

/* Adds len bytes of kept code (what the workspace legitimately holds: the
 * files of the task tree).  Returns 0 or -1. */
int fw_audit_kept(struct fw_audit *a, const char *text, size_t len);

/* Adds every file of tree tree_hex of s that a workspace keeps (not the
 * ones the scrub removes) as kept code.  Returns 0, or -1 with a message in
 * err. */
int fw_audit_kept_tree(struct fw_audit *a, struct fw_store *s, const char *tree_hex,
		       char *err, size_t errlen);

/*
 * Share (0..1) of the removed code's line n-grams that the kept code holds
 * too: near 1 when the removed code is duplicated elsewhere in the tree (a
 * task one could solve by copying).  0 when the removed code has no
 * significant lines.  Cannot fail.
 */
double fw_audit_kept_share(const struct fw_audit *a);

/*
 * Searches len bytes for removed code; name says where they come from.
 * Returns 1 and appends "NAME: WHAT" to found (may be NULL) when they hold
 * removed code, else 0; -1 when memory runs out.
 */
int fw_audit_check(struct fw_audit *a, const char *name, const char *data, size_t len,
		   struct fw_strlist *found);

/*
 * Audits the workspace at dir: every regular file (below .git too, except
 * the object files) and every object of its git database, read through
 * libgit2 so packed and compressed objects are seen decompressed.  Each
 * leak is appended to found as "file PATH: WHAT" or "object HEX: WHAT".
 * Returns the number of leaks (0: clean), or -1 with a message in err.
 */
int fw_audit_workspace(struct fw_audit *a, const char *dir, struct fw_strlist *found,
		       char *err, size_t errlen);

#endif
