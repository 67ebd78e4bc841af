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

#include "fw_base.h" /* struct fw_strlist, fw_rmtree() */

struct fw_store;

/* Author and date of every workspace commit. */
#define FW_WORKSPACE_AUTHOR "flywheel"
#define FW_WORKSPACE_EMAIL "flywheel@localhost"
#define FW_WORKSPACE_TIME 946684800 /* 2000-01-01T00:00:00Z */

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

/* ---- reading what the sandbox left ------------------------------------------ */

/*
 * What untrusted code left in a workspace is read by the host as regular
 * files and links below the workspace, never through a link, never
 * through the workspace's .git (whose configuration, attributes and
 * ignore rules the code could have written), and within these limits.
 */
#define FW_WS_FILE_MAX (16u << 20)     /* bytes of one file */
#define FW_WS_TOTAL_MAX (1024u << 20)  /* bytes of all files read */
#define FW_WS_CHANGED_MAX (64u << 20)  /* bytes of the files that changed */
#define FW_WS_FILES_MAX 200000         /* files and links */
#define FW_WS_DEPTH_MAX 128            /* directory levels */

/*
 * Opens rel, a relative '/'-separated path without ".", ".." or empty
 * components, below the directory dirfd, following no symbolic link and
 * never leaving dirfd: openat2(2) with RESOLVE_BENEATH and
 * RESOLVE_NO_SYMLINKS where the kernel has it, else one component at a
 * time with O_NOFOLLOW.  flags are open(2)'s (O_NOFOLLOW and O_CLOEXEC are
 * added).  Returns the descriptor, which the caller closes, or -1 with
 * errno set (EINVAL a bad rel, ELOOP a link on the way, ENOENT, ...).
 */
int fw_open_beneath(int dirfd, const char *rel, int flags);

/*
 * Reads the regular file at rel below directory dir (opened as by
 * fw_open_beneath(), and dir itself not through a link) into *data, a
 * malloc'd NUL-terminated copy of its *len bytes that the caller frees.
 * At most max bytes are read: a bigger file is refused.  A FIFO or device
 * there is refused without being opened for long.  Returns 0, or -1 with
 * errno set: ENOENT no such file, ELOOP a link on the way, EINVAL not a
 * regular file, EFBIG over max, ENOMEM.
 */
int fw_read_beneath(const char *dir, const char *rel, size_t max, char **data, size_t *len);

/*
 * The unified diff (git format, as `git apply` takes it) from tree
 * tree_hex of store s as a workspace holds it (without what the scrub
 * removes) to the files below dir now: changed, added and deleted files,
 * mode changes, links, binary files as git binary patches.  The files are
 * read as fw_read_beneath() reads them, within the FW_WS_* limits; nothing
 * below a directory named .git is read.  New files that the workspace's
 * own .gitignore files ignore are left out, as git leaves them out.  A
 * file whose text is not valid UTF-8 on either side goes as a binary
 * patch, so the patch is valid UTF-8 whatever the files hold.  A file the
 * limits leave unread stays as the task tree has it (absent when new), and
 * "PATH: why" is appended to left_out (may be NULL) for it.  scratch names
 * a directory that does not exist, where no untrusted code can reach (not
 * below dir): the host's own repository is made there and removed at the
 * end.  *patch is malloc'd and NUL-terminated, "" for no change; the
 * caller frees it.  Returns 0, or -1 with a message in err.
 */
int fw_workspace_diff(struct fw_store *s, const char *tree_hex, const char *dir,
		      const char *scratch, char **patch, struct fw_strlist *left_out,
		      char *err, size_t errlen);

/*
 * Appends to paths every path at which the files below dir now differ from
 * tree tree_hex of store s as a workspace holds it (without what the scrub
 * removes): changed bytes or mode, a file turned link or back, new files
 * (whatever any ignore rule says), then the removed ones.  Files are read
 * as fw_workspace_diff() reads them, but only hashed: nothing below a
 * directory named .git is read and no repository is opened, so no
 * configuration, attribute, ignore rule, hook or alternate the workspace's
 * .git holds counts.  A path the FW_WS_* limits (the total and the counts;
 * one file is not capped) or its name leave unread counts as changed.
 * Returns 0, or -1 with a message in err.
 */
int fw_workspace_changed(struct fw_store *s, const char *tree_hex, const char *dir,
			 struct fw_strlist *paths, char *err, size_t errlen);

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
