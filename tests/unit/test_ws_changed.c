/* test_ws_changed.c — fw_workspace_changed(), the paths a workspace's files
 * differ at, checked against git status of an untouched copy; and the same
 * list whatever the workspace's own .git says (issue 16: the git-config
 * attack family). */
#include <errno.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "fw_store.h"
#include "fw_workspace.h"

static char scratch[256];

static void sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	int rc = system(cmd);
	if (rc != 0)
		printf("# command failed (%d): %s\n", rc, cmd);
}

/* The whole output of a shell command (static, at most 64 KiB). */
static const char *out(const char *fmt, ...)
{
	static char buf[65536];
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	buf[0] = '\0';
	FILE *p = popen(cmd, "r");
	if (p) {
		size_t n = fread(buf, 1, sizeof buf - 1, p);
		buf[n] = '\0';
		pclose(p);
	}
	return buf;
}

/* The paths of l, one a line. */
static const char *lines(const struct fw_strlist *l)
{
	static char buf[65536];
	size_t n = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < l->n && n < sizeof buf; i++)
		n += (size_t)snprintf(buf + n, sizeof buf - n, "%s\n", l->v[i]);
	return buf;
}

#define GITENV "GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t " \
	"GIT_COMMITTER_EMAIL=t@t GIT_AUTHOR_DATE='2001-01-01T00:00:00Z' "     \
	"GIT_COMMITTER_DATE='2001-01-01T00:00:00Z'"

TEST(changed_paths_are_git_status_of_the_files)
{
	char err[512] = "", st[512], repo[512], ws[512], ref[512], tree[FW_OID_HEX];
	snprintf(scratch, sizeof scratch, "/tmp/fw-test-changed-XXXXXX");
	if (!mkdtemp(scratch))
		abort();
	snprintf(st, sizeof st, "%s/store", scratch);
	snprintf(repo, sizeof repo, "%s/repo", scratch);
	snprintf(ws, sizeof ws, "%s/ws", scratch);
	snprintf(ref, sizeof ref, "%s/ref", scratch);
	/* the sample with a cache file in its history: the scrub takes it
	 * out of a workspace, so its absence is no change */
	sh("cp -r samples/repos/textkit %s && cd %s && git init -q -b main && "
	   "mkdir -p textkit/__pycache__ && echo junk > textkit/__pycache__/x.pyc && "
	   "git add -A -f && " GITENV " git commit -qm init", repo, repo);
	struct fw_store *s = fw_store_open(st, 1, err, sizeof err);
	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ_INT(fw_store_import(s, repo, "HEAD", tree, NULL, NULL, err, sizeof err), 0);
	CHECK_EQ_INT(fw_workspace_create(s, tree, ws, NULL, NULL, err, sizeof err), 0);
	CHECK_EQ_INT(fw_workspace_create(s, tree, ref, NULL, NULL, err, sizeof err), 0);

	struct fw_strlist got = { 0 };
	CHECK_EQ_INT(fw_workspace_changed(s, tree, ws, &got, err, sizeof err), 0);
	CHECK_EQ_INT(got.n, 0);

	/* the same edits in both: changed, added (an ignored file and a
	 * new cache file too), removed, a mode, a link, a file turned link */
	const char *edit =
		"echo 'x = 1' >> textkit/strings.py && printf 'n\\n' > notes.txt && "
		"chmod +x README.md && rm textkit/units.py && ln -s /etc etc && "
		"rm tests/test_units.py && ln -s ../README.md tests/test_units.py && "
		"echo c > textkit/y.pyc && mkdir -p new/deep && echo d > new/deep/f.py";
	sh("cd %s && %s && cd %s && %s", ws, edit, ref, edit);
	char *want = strdup(out("cd %s && git status --porcelain --ignored -uall | cut -c4- | "
				"LC_ALL=C sort", ref));
	CHECK(strstr(want, "textkit/y.pyc\n") && strstr(want, "textkit/units.py\n"));
	CHECK_EQ_INT(fw_workspace_changed(s, tree, ws, &got, err, sizeof err), 0);
	CHECK_STR(lines(&got), want);
	fw_strlist_release(&got);

	/* the workspace's git re-pointed, hooked, monitored, included,
	 * ignoring and excluding everything, borrowing objects, a nested
	 * .git file pointing elsewhere: the same paths and the one new file,
	 * and nothing of it ran */
	sh("cd %s && mkdir -p hooks && printf '#!/bin/sh\\ntouch %s/ran-hook\\n' > hooks/post-index-change && "
	   "printf '#!/bin/sh\\ntouch %s/ran-fsmonitor\\n' > mon && chmod +x mon hooks/*",
	   scratch, scratch, scratch);
	sh("cd %s && git config -f .git/config core.worktree %s && "
	   "git config -f .git/config core.fsmonitor %s/mon && "
	   "git config -f .git/config core.hooksPath %s/hooks && "
	   "git config -f .git/config include.path %s/.git/config && "
	   "echo '*' > .git/info/exclude && echo '* -diff -text binary' > .git/info/attributes && "
	   "echo %s/.git/objects > .git/objects/info/alternates && "
	   "mkdir sub && echo 'gitdir: %s/.git' > sub/.git && echo s > sub/x",
	   ws, repo, scratch, scratch, repo, repo, repo);
	char *want2 = strdup(out("(printf '%%s' '%s'; echo sub/x) | LC_ALL=C sort", want));
	CHECK_EQ_INT(fw_workspace_changed(s, tree, ws, &got, err, sizeof err), 0);
	CHECK_STR(lines(&got), want2);
	size_t n2 = got.n;
	fw_strlist_release(&got);
	/* and .git a link to another repository */
	sh("cd %s && mv .git ../ws-git && ln -s %s/.git .git", ws, repo);
	CHECK_EQ_INT(fw_workspace_changed(s, tree, ws, &got, err, sizeof err), 0);
	CHECK_STR(lines(&got), want2);
	fw_strlist_release(&got);
	char mark[600];
	snprintf(mark, sizeof mark, "%s/ran-hook", scratch);
	CHECK_EQ_INT(access(mark, F_OK), -1);
	snprintf(mark, sizeof mark, "%s/ran-fsmonitor", scratch);
	CHECK_EQ_INT(access(mark, F_OK), -1);

	/* what is not a regular file or link counts as changed */
	sh("cd %s && mkfifo fifo", ws);
	CHECK_EQ_INT(fw_workspace_changed(s, tree, ws, &got, err, sizeof err), 0);
	int fifo = 0;
	for (size_t i = 0; i < got.n; i++)
		fifo |= !strcmp(got.v[i], "fifo");
	CHECK(fifo);
	CHECK_EQ_INT(got.n, n2 + 1);
	fw_strlist_release(&got);
	free(want);
	free(want2);
	fw_store_free(s);
}

TEST(cleanup)
{
	CHECK_EQ_INT(fw_rmtree(scratch), 0);
}

TEST_MAIN()
