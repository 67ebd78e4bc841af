/*
 * fw_rollout.h — episodes of a policy on a task: where a fill completion
 * goes in a stubbed file and where it stops, seeds and ids of rollouts,
 * the patch of a file's new text against the task tree, and what of a task
 * a policy sees.  (The patch of a whole workspace is fw_workspace_diff().)
 *
 * A fill episode works on a task made by the stub-body strategy
 * (fw_mutate.h): the task tree holds the target function with its
 * signature and documentation and a not-implemented stub for a body.  The
 * prompt is the file up to the stub; the completion replaces the stub and
 * ends where the function ends: for Python at the first line indented no
 * deeper than the `def`, for brace languages (C, JavaScript, TypeScript,
 * Go) at the brace that closes the body.
 */
#ifndef FW_ROLLOUT_H
#define FW_ROLLOUT_H

#include <stddef.h>
#include <stdint.h>

#include "fw_mp.h"

/* Where a completion goes in a stubbed file. */
struct fw_fill_site {
	size_t a, b;   /* bytes [a, b) of the file (the stub) are replaced;
			* the prompt is bytes [0, a) */
	int brace;     /* 1: brace language, 0: Python (indentation) */
	size_t indent; /* Python: columns of the def line (tab = 1) */
};

/*
 * Finds the stub of the function whose definition starts on line start
 * (1-based, as task targets give it) of src (len bytes), a file in
 * language lang ("python", "c", "javascript", "typescript", "go").  The
 * stub is the first line at or after start that is the language's
 * not-implemented statement, searched over at most 400 lines.  Returns 0
 * and fills *site, or -1 with a message in err (no stub there, an unknown
 * language).
 */
int fw_fill_locate(const char *src, size_t len, const char *lang, int start,
		   struct fw_fill_site *site, char *err, size_t errlen);

/*
 * How much of completion c (n bytes, the text decoded so far) belongs in
 * the function.  Python: the completion ends before the first line holding
 * code indented no deeper than the def (a blank line does not end it).
 * Brace languages: before the brace that closes the body (braces in
 * comments, strings and character literals do not count).  Returns the
 * number of bytes to keep when the end is in c, or -1 when the function
 * goes on past c.  Cannot fail.
 */
long fw_fill_cut(const struct fw_fill_site *site, const char *c, size_t n);

/*
 * The new text of a stubbed file: src with bytes [site->a, site->b)
 * replaced by c[0..n).  For Python a final newline is added when c lacks
 * one; for brace languages a newline is put before the closing brace when
 * c does not end a line.  Returns a malloc'd NUL-terminated buffer (*outlen
 * bytes, the NUL not counted) the caller frees, or NULL when out of memory.
 */
char *fw_fill_apply(const struct fw_fill_site *site, const char *src, size_t len,
		    const char *c, size_t n, size_t *outlen);

/*
 * The seed of sample number sample of task task_id (n bytes) under base
 * seed base: a 64-bit hash of the three, never 0.  The same (base, task,
 * sample) gives the same seed on every machine.  Cannot fail.
 */
uint64_t fw_rollout_seed(uint64_t base, const char *task_id, size_t n, int sample);

/*
 * The id of a rollout: 16 hex digits (and a NUL, out has 17 bytes) of a
 * hash of the task id, the policy spec, the base seed and the sample
 * number.  Cannot fail.
 */
void fw_rollout_id(char out[17], const char *task_id, size_t n, const char *policy,
		   uint64_t seed, int sample);

/*
 * The unified diff (git format: diff --git a/PATH b/PATH, as git apply
 * takes it) from old (oldlen bytes) to new (newlen bytes) of the file at
 * path; a git binary patch when either text is not valid UTF-8.  *patch
 * receives a malloc'd NUL-terminated text the caller frees ("" when the
 * texts are equal).  Returns 0, or -1 with a message in err.
 */
int fw_file_patch(const char *path, const char *old, size_t oldlen, const char *new_,
		  size_t newlen, char **patch, char *err, size_t errlen);

/*
 * The task as a policy may see it, appended to out as a msgpack map: the
 * fields of task (a task record) that state the problem, in this order
 * when present: kind, id, v, strategy, lang, prompt, targets, test_cmd,
 * report, f2p, p2p, xfail, split.  Never the solution, nor where the task
 * lives on the host (repo, store, the base commit and tree ids), nor any
 * field of another tool.  Returns 0, or -1 when memory runs out.
 */
int fw_task_for_policy(struct fw_buf *out, struct fw_mpv task);

/*
 * Keeps the first head and the last tail bytes of s (n bytes) with a line
 * "[... K bytes cut ...]" between them when n > head + tail, else all of
 * it.  Returns a malloc'd NUL-terminated copy (*outlen bytes) the caller
 * frees, or NULL when out of memory.
 */
char *fw_head_tail(const char *s, size_t n, size_t head, size_t tail, size_t *outlen);

/* fw_utf8_fix(), which makes model output record text, is in fw_base.h. */

#endif
