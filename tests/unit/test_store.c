/* test_store.c — the task store, workspaces, scrub and leak audit, checked
 * with the git command line as the independent reader. */
#include <errno.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
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

/* First line of a shell command's output, trailing newline removed. */
static char *out1(const char *fmt, ...)
{
	static char line[4096];
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	line[0] = '\0';
	FILE *p = popen(cmd, "r");
	if (p) {
		if (!fgets(line, sizeof line, p))
			line[0] = '\0';
		pclose(p);
	}
	line[strcspn(line, "\n")] = '\0';
	return line;
}

#define GITENV "GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t " \
	"GIT_COMMITTER_EMAIL=t@t GIT_AUTHOR_DATE='2001-01-01T00:00:00Z' "     \
	"GIT_COMMITTER_DATE='2001-01-01T00:00:00Z'"

/* A git repository of the textkit sample with a planted cache file. */
static void make_repo(const char *dir)
{
	sh("cp -r samples/repos/textkit %s && cd %s && git init -q -b main && "
	   "mkdir -p textkit/__pycache__ && echo junk > textkit/__pycache__/strings.cpython-311.pyc && "
	   "echo obj > textkit/mod.o && git add -A -f && " GITENV " git commit -qm init", dir, dir);
}

static void setup(void)
{
	if (scratch[0])
		return;
	snprintf(scratch, sizeof scratch, "/tmp/fw-test-store-XXXXXX");
	if (!mkdtemp(scratch))
		abort();
	char repo[512];
	snprintf(repo, sizeof repo, "%s/repo", scratch);
	make_repo(repo);
}

TEST(import_lists_reads_and_dedups)
{
	setup();
	char err[512] = "", st[512], repo[512], tree[FW_OID_HEX], tree2[FW_OID_HEX],
	     commit[FW_OID_HEX];
	int dirty = -1;
	snprintf(st, sizeof st, "%s/store1", scratch);
	snprintf(repo, sizeof repo, "%s/repo", scratch);
	struct fw_store *s = fw_store_open(st, 1, err, sizeof err);
	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ_INT(fw_store_import(s, repo, "HEAD", tree, commit, &dirty, err, sizeof err), 0);
	CHECK_EQ_INT(dirty, 0);
	CHECK_STR(tree, out1("git -C %s rev-parse HEAD^{tree}", repo));
	CHECK_STR(commit, out1("git -C %s rev-parse HEAD", repo));
	CHECK_STR(out1("git -C %s cat-file -t %s", st, tree), "tree");
	/* the store is bare and fsck-clean */
	CHECK_STR(out1("git -C %s rev-parse --is-bare-repository", st), "true");
	CHECK_STR(out1("git -C %s fsck --no-dangling 2>&1 | grep -vc ^notice || true", st), "0");
	size_t objs = (size_t)atol(out1("git -C %s count-objects | cut -d' ' -f1", st));
	/* importing again adds nothing */
	CHECK_EQ_INT(fw_store_import(s, repo, NULL, tree2, NULL, NULL, err, sizeof err), 0);
	CHECK_STR(tree2, tree);
	CHECK_EQ_INT(atol(out1("git -C %s count-objects | cut -d' ' -f1", st)), objs);

	struct fw_file *f;
	size_t n;
	CHECK_EQ_INT(fw_store_files(s, tree, &f, &n, err, sizeof err), 0);
	CHECK_EQ_INT(n, atol(out1("git -C %s ls-files | wc -l", repo)));
	int found = 0;
	for (size_t i = 0; i < n; i++)
		found += strcmp(f[i].path, "textkit/strings.py") == 0 && f[i].mode == 0100644;
	CHECK_EQ_INT(found, 1);
	fw_files_free(f, n);

	char *data;
	size_t len;
	CHECK_EQ_INT(fw_store_read(s, tree, "textkit/__init__.py", &data, &len, err, sizeof err), 0);
	CHECK(data && strstr(data, "__version__ = \"0.3.1\"") != NULL);
	free(data);
	CHECK_EQ_INT(fw_store_read(s, tree, "nope.py", &data, &len, err, sizeof err), -1);
	CHECK(strstr(err, "nope.py") != NULL);
	fw_store_free(s);
	fw_store_free(NULL);
}

TEST(dirty_repo_and_non_repo_are_reported)
{
	setup();
	char err[512] = "", st[512], dir[512], tree[FW_OID_HEX];
	int dirty = 0;
	snprintf(st, sizeof st, "%s/store2", scratch);
	snprintf(dir, sizeof dir, "%s/dirty", scratch);
	sh("cp -r %s/repo %s && echo x >> %s/README.md", scratch, dir, dir);
	struct fw_store *s = fw_store_open(st, 1, err, sizeof err);
	CHECK_EQ_INT(fw_store_import(s, dir, "HEAD", tree, NULL, &dirty, err, sizeof err), 0);
	CHECK_EQ_INT(dirty, 1);
	CHECK_EQ_INT(fw_store_import(s, scratch, "HEAD", tree, NULL, &dirty, err, sizeof err), -1);
	CHECK(strstr(err, "not a git repository") != NULL);
	fw_store_free(s);
	snprintf(dir, sizeof dir, "%s/absent/store", scratch);
	CHECK(fw_store_open(dir, 0, err, sizeof err) == NULL);
}

TEST(edit_and_diff_round_trip_through_git_apply)
{
	setup();
	char err[512] = "", st[512], repo[512], ws[512], tree[FW_OID_HEX], mut[FW_OID_HEX];
	snprintf(st, sizeof st, "%s/store3", scratch);
	snprintf(repo, sizeof repo, "%s/repo", scratch);
	snprintf(ws, sizeof ws, "%s/ws3", scratch);
	struct fw_store *s = fw_store_open(st, 1, err, sizeof err);
	CHECK_EQ_INT(fw_store_import(s, repo, "HEAD", tree, NULL, NULL, err, sizeof err), 0);
	const char *stub = "def rot13(text):\n    raise NotImplementedError\n";
	struct fw_edit ed[] = {
		{ "textkit/dates.py", NULL, 0 },
		{ "textkit/strings.py", stub, strlen(stub) },
		{ "NEWS", "new\n", 4 },
	};
	CHECK_EQ_INT(fw_store_edit(s, tree, ed, 3, mut, err, sizeof err), 0);
	CHECK(strcmp(mut, tree) != 0);
	char *data;
	size_t len;
	CHECK_EQ_INT(fw_store_read(s, mut, "textkit/strings.py", &data, &len, err, sizeof err), 0);
	CHECK(data && strcmp(data, stub) == 0);
	free(data);
	CHECK_EQ_INT(fw_store_read(s, mut, "textkit/dates.py", &data, &len, err, sizeof err), -1);
	struct fw_edit bad = { "no/such/file", NULL, 0 };
	CHECK_EQ_INT(fw_store_edit(s, tree, &bad, 1, mut + 0, err, sizeof err), -1);
	CHECK_EQ_INT(fw_store_edit(s, tree, ed, 3, mut, err, sizeof err), 0);

	char *patch = NULL;
	CHECK_EQ_INT(fw_store_diff(s, mut, tree, &patch, err, sizeof err), 0);
	CHECK(patch && strstr(patch, "diff --git a/textkit/dates.py b/textkit/dates.py"));
	CHECK_EQ_INT(fw_workspace_create(s, mut, ws, NULL, NULL, err, sizeof err), 0);
	char pf[600];
	snprintf(pf, sizeof pf, "%s/solution.diff", scratch);
	FILE *fp = fopen(pf, "w");
	fputs(patch, fp);
	fclose(fp);
	free(patch);
	/* git apply of the solution on the mutated tree gives the original */
	sh("cd %s && git apply %s && git add -A", ws, pf);
	/* the scrubbed files of the original are the only difference */
	CHECK_STR(out1("diff -r -x .git -x __pycache__ -x mod.o %s %s | wc -l", repo, ws), "0");
	CHECK_STR(out1("git -C %s diff --cached --stat HEAD | tail -1", ws),
		  " 3 files changed, 257 insertions(+), 2 deletions(-)");
	fw_store_free(s);
}

TEST(workspace_has_one_commit_no_history_and_no_scrubbed_files)
{
	setup();
	char err[512] = "", st[512], repo[512], ws[512], tree[FW_OID_HEX], c1[FW_OID_HEX],
	     c2[FW_OID_HEX];
	snprintf(st, sizeof st, "%s/store4", scratch);
	snprintf(repo, sizeof repo, "%s/repo", scratch);
	struct fw_store *s = fw_store_open(st, 1, err, sizeof err);
	CHECK_EQ_INT(fw_store_import(s, repo, "HEAD", tree, NULL, NULL, err, sizeof err), 0);
	struct fw_strlist scrubbed = { 0 };
	snprintf(ws, sizeof ws, "%s/ws4", scratch);
	CHECK_EQ_INT(fw_workspace_create(s, tree, ws, c1, &scrubbed, err, sizeof err), 0);
	CHECK_EQ_INT(scrubbed.n, 2);
	CHECK(scrubbed.n == 2 && strcmp(scrubbed.v[0], "textkit/__pycache__") == 0);
	CHECK(scrubbed.n == 2 && strcmp(scrubbed.v[1], "textkit/mod.o") == 0);
	fw_strlist_release(&scrubbed);
	CHECK_STR(out1("git -C %s log --all --oneline | wc -l", ws), "1");
	CHECK_STR(out1("git -C %s rev-parse HEAD", ws), c1);
	CHECK_STR(out1("git -C %s remote | wc -l", ws), "0");
	CHECK_STR(out1("git -C %s status --porcelain | wc -l", ws), "0");
	CHECK_STR(out1("git -C %s symbolic-ref HEAD", ws), "refs/heads/main");
	CHECK_STR(out1("git -C %s log -1 --format='%%an %%ae %%at'", ws),
		  "flywheel flywheel@localhost 946684800");
	CHECK_STR(out1("test -e %s/.git/logs && echo reflog || echo none", ws), "none");
	CHECK_STR(out1("test -e %s/textkit/__pycache__ && echo yes || echo no", ws), "no");
	CHECK_STR(out1("git -C %s fsck --strict 2>&1 | wc -l", ws), "0");
	/* exactly the objects of the tree and one commit */
	CHECK_EQ_INT(atol(out1("git -C %s cat-file --batch-all-objects --batch-check | wc -l", ws)),
		     atol(out1("git -C %s ls-tree -r -t HEAD | wc -l", ws)) + 2);
	/* same tree, same commit id anywhere */
	snprintf(ws, sizeof ws, "%s/ws4b", scratch);
	CHECK_EQ_INT(fw_workspace_create(s, tree, ws, c2, NULL, err, sizeof err), 0);
	CHECK_STR(c1, c2);
	CHECK_EQ_INT(fw_workspace_create(s, tree, ws, c2, NULL, err, sizeof err), -1);
	CHECK(strstr(err, "not empty") != NULL);
	CHECK_EQ_INT(fw_store_keep(s, "base/t", tree, err, sizeof err), 0);
	fw_store_free(s);
	/* from a store whose objects are packed (after git gc) */
	sh("git -C %s repack -a -d -q && git -C %s prune-packed", st, st);
	CHECK_STR(out1("find %s/objects -type f -path '*/objects/[0-9a-f][0-9a-f]/*' | wc -l", st), "0");
	s = fw_store_open(st, 0, err, sizeof err);
	snprintf(ws, sizeof ws, "%s/ws4c", scratch);
	CHECK_EQ_INT(fw_workspace_create(s, tree, ws, c2, NULL, err, sizeof err), 0);
	CHECK_STR(c1, c2);
	CHECK_STR(out1("git -C %s fsck --strict 2>&1 | wc -l", ws), "0");
	CHECK_STR(out1("git -C %s status --porcelain | wc -l", ws), "0");
	fw_store_free(s);
}

TEST(scrub_removes_caches_and_keeps_sources)
{
	setup();
	char dir[512], err[256];
	snprintf(dir, sizeof dir, "%s/scrub", scratch);
	sh("mkdir -p %s/pkg/__pycache__ %s/pkg.egg-info %s/.git/x %s/src && cd %s && "
	   "touch pkg/__pycache__/a.pyc pkg/b.pyc src/a.o src/a.c .coverage src/a.c.orig "
	   "src/a.c.rej .a.c.swp notes~ .git/x/keep.pyc build.py htmlcov", dir, dir, dir, dir, dir);
	struct fw_strlist l = { 0 };
	CHECK_EQ_INT(fw_workspace_scrub(dir, &l, err, sizeof err), 9);
	fw_strlist_release(&l);
	CHECK_STR(out1("cd %s && find . -type f | sort | tr '\\n' ' '", dir),
		  "./.git/x/keep.pyc ./build.py ./htmlcov ./src/a.c ");
	CHECK(fw_scrub_match("__pycache__", 1));
	CHECK(!fw_scrub_match("__pycache__", 0));
	CHECK(fw_scrub_match("foo.egg-info", 1));
	CHECK(!fw_scrub_match("strings.py", 0));
}

static const char *levenshtein_body =
	"    if len(a) < len(b):\n"
	"        a, b = b, a\n"
	"    previous = list(range(len(b) + 1))\n"
	"    for i, ca in enumerate(a, 1):\n"
	"        current = [i]\n"
	"        for j, cb in enumerate(b, 1):\n"
	"            cost = 0 if ca == cb else 1\n"
	"            current.append(min(previous[j] + 1, current[j - 1] + 1,\n"
	"                               previous[j - 1] + cost))\n"
	"        previous = current\n"
	"    return previous[-1]\n";

/* A store with textkit whose levenshtein() body is stubbed; fills the
 * original and mutated tree ids and an audit built from the removal. */
static struct fw_store *stubbed(const char *name, char *tree, char *mut, struct fw_audit **a)
{
	char err[512] = "", st[512], repo[512];
	snprintf(st, sizeof st, "%s/%s", scratch, name);
	snprintf(repo, sizeof repo, "%s/repo", scratch);
	struct fw_store *s = fw_store_open(st, 1, err, sizeof err);
	fw_store_import(s, repo, "HEAD", tree, NULL, NULL, err, sizeof err);
	char *src;
	size_t len;
	fw_store_read(s, tree, "textkit/strings.py", &src, &len, err, sizeof err);
	char *at = strstr(src, levenshtein_body);
	CHECK(at != NULL);
	size_t pre = (size_t)(at - src), bl = strlen(levenshtein_body);
	const char *stub = "    raise NotImplementedError\n";
	char *m = malloc(len + 64);
	memcpy(m, src, pre);
	strcpy(m + pre, stub);
	strcat(m, at + bl);
	struct fw_edit ed = { "textkit/strings.py", m, strlen(m) };
	CHECK_EQ_INT(fw_store_edit(s, tree, &ed, 1, mut, err, sizeof err), 0);
	*a = fw_audit_new();
	CHECK_EQ_INT(fw_audit_removed(*a, levenshtein_body, bl), 0);
	CHECK_EQ_INT(fw_audit_kept_tree(*a, s, mut, err, sizeof err), 0);
	free(m);
	free(src);
	return s;
}

TEST(audit_of_a_clean_workspace_finds_nothing)
{
	setup();
	char err[512] = "", ws[512], tree[FW_OID_HEX], mut[FW_OID_HEX];
	struct fw_audit *a;
	struct fw_store *s = stubbed("store5", tree, mut, &a);
	snprintf(ws, sizeof ws, "%s/ws5", scratch);
	CHECK_EQ_INT(fw_workspace_create(s, mut, ws, NULL, NULL, err, sizeof err), 0);
	struct fw_strlist found = { 0 };
	CHECK_EQ_INT(fw_audit_workspace(a, ws, &found, err, sizeof err), 0);
	for (size_t i = 0; i < found.n; i++)
		printf("# unexpected: %s\n", found.v[i]);
	fw_strlist_release(&found);
	/* the original tree as a workspace is all leak */
	snprintf(ws, sizeof ws, "%s/ws5orig", scratch);
	CHECK_EQ_INT(fw_workspace_create(s, tree, ws, NULL, NULL, err, sizeof err), 0);
	CHECK(fw_audit_workspace(a, ws, &found, err, sizeof err) >= 2);
	int file_hit = 0, obj_hit = 0;
	for (size_t i = 0; i < found.n; i++) {
		file_hit += strncmp(found.v[i], "file textkit/strings.py:", 24) == 0;
		obj_hit += strncmp(found.v[i], "object ", 7) == 0;
	}
	CHECK_EQ_INT(file_hit, 1);
	CHECK_EQ_INT(obj_hit, 1);
	fw_strlist_release(&found);
	fw_audit_free(a);
	fw_audit_free(NULL);
	fw_store_free(s);
}

TEST(audit_catches_a_planted_pyc_of_the_removed_function)
{
	setup();
	char err[512] = "", ws[512], tree[FW_OID_HEX], mut[FW_OID_HEX];
	struct fw_audit *a;
	struct fw_store *s = stubbed("store6", tree, mut, &a);
	snprintf(ws, sizeof ws, "%s/ws6", scratch);
	CHECK_EQ_INT(fw_workspace_create(s, mut, ws, NULL, NULL, err, sizeof err), 0);
	/* bytecode of the original module, hidden where the scrub does not look */
	sh("/usr/bin/python3 -c \"import py_compile; py_compile.compile('%s/repo/textkit/strings.py', "
	   "cfile='%s/textkit/.cache.bin', doraise=True)\"", scratch, ws);
	struct fw_strlist found = { 0 };
	CHECK_EQ_INT(fw_audit_workspace(a, ws, &found, err, sizeof err), 1);
	CHECK(found.n == 1 && strstr(found.v[0], "file textkit/.cache.bin: ") == found.v[0]);
	CHECK(found.n == 1 && strstr(found.v[0], "identifiers of the removed code"));
	fw_strlist_release(&found);
	/* the bytecode of the mutated module is no leak */
	sh("/usr/bin/python3 -c \"import py_compile; py_compile.compile('%s/textkit/strings.py', "
	   "cfile='%s/textkit/.cache.bin', doraise=True)\"", ws, ws);
	CHECK_EQ_INT(fw_audit_workspace(a, ws, &found, err, sizeof err), 0);
	fw_strlist_release(&found);
	fw_audit_free(a);
	fw_store_free(s);
}

TEST(a_committed_cache_does_not_blind_the_audit)
{
	setup();
	char err[512] = "", ws[512], pyc[512], tree[FW_OID_HEX], mut[FW_OID_HEX],
	     mut2[FW_OID_HEX];
	struct fw_audit *a;
	struct fw_store *s = stubbed("store8", tree, mut, &a);
	fw_audit_free(a);
	/* the task tree also carries bytecode of the original module */
	snprintf(pyc, sizeof pyc, "%s/orig.pyc", scratch);
	sh("/usr/bin/python3 -c \"import py_compile; py_compile.compile('%s/repo/textkit/strings.py', "
	   "cfile='%s', doraise=True)\"", scratch, pyc);
	FILE *f = fopen(pyc, "rb");
	char buf[65536];
	size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
	if (f)
		fclose(f);
	struct fw_edit ed = { "textkit/__pycache__/strings.cpython-311.pyc", buf, n };
	CHECK_EQ_INT(fw_store_edit(s, mut, &ed, 1, mut2, err, sizeof err), 0);
	a = fw_audit_new();
	CHECK_EQ_INT(fw_audit_removed(a, levenshtein_body, strlen(levenshtein_body)), 0);
	CHECK_EQ_INT(fw_audit_kept_tree(a, s, mut2, err, sizeof err), 0);
	snprintf(ws, sizeof ws, "%s/ws8", scratch);
	CHECK_EQ_INT(fw_workspace_create(s, mut2, ws, NULL, NULL, err, sizeof err), 0);
	struct fw_strlist found = { 0 };
	CHECK_EQ_INT(fw_audit_workspace(a, ws, &found, err, sizeof err), 0);
	sh("cp %s %s/textkit/.cache.bin", pyc, ws);
	CHECK_EQ_INT(fw_audit_workspace(a, ws, &found, err, sizeof err), 1);
	/* every identifier only the removed code has counts, none hidden by
	 * the committed cache */
	const char *m = found.n ? strstr(found.v[0], ": ") : NULL;
	CHECK(m && atoi(m + 2) >= 2);
	if (found.n)
		printf("# %s\n", found.v[0]);
	fw_strlist_release(&found);
	fw_audit_free(a);
	fw_store_free(s);
}

TEST(audit_catches_removed_code_in_a_loose_object_and_a_renamed_copy)
{
	setup();
	char err[512] = "", ws[512], tree[FW_OID_HEX], mut[FW_OID_HEX];
	struct fw_audit *a;
	struct fw_store *s = stubbed("store7", tree, mut, &a);
	snprintf(ws, sizeof ws, "%s/ws7", scratch);
	CHECK_EQ_INT(fw_workspace_create(s, mut, ws, NULL, NULL, err, sizeof err), 0);
	/* re-indented copy of three lines in a git object only */
	sh("printf 'x = 1\\nprevious = list(range(len(b) + 1))\\nfor i, ca in enumerate(a, 1):\\n"
	   "\\t current = [i]\\n' | git -C %s hash-object -w --stdin >/dev/null", ws);
	struct fw_strlist found = { 0 };
	CHECK_EQ_INT(fw_audit_workspace(a, ws, &found, err, sizeof err), 1);
	CHECK(found.n == 1 && strncmp(found.v[0], "object ", 7) == 0);
	fw_strlist_release(&found);
	sh("cp %s/repo/textkit/strings.py %s/notes.txt", scratch, ws);
	CHECK_EQ_INT(fw_audit_workspace(a, ws, &found, err, sizeof err), 2);
	fw_strlist_release(&found);
	fw_audit_free(a);
	fw_store_free(s);
}

/* A store at scratch/NAME holding the sample tree; fills st and tree, and
 * blob with the id of one of its files (a second object to point at). */
static int keep_store(const char *name, char *st, size_t stlen, char *tree, char *blob)
{
	char err[512] = "", repo[512];
	snprintf(st, stlen, "%s/%s", scratch, name);
	snprintf(repo, sizeof repo, "%s/repo", scratch);
	struct fw_store *s = fw_store_open(st, 1, err, sizeof err);
	struct fw_file *f = NULL;
	size_t n = 0;
	int rc = -1;
	if (s && fw_store_import(s, repo, "HEAD", tree, NULL, NULL, err, sizeof err) == 0 &&
	    fw_store_files(s, tree, &f, &n, err, sizeof err) == 0 && n > 0) {
		memcpy(blob, f[0].oid, FW_OID_HEX);
		rc = 0;
	}
	if (rc)
		printf("# keep_store: %s\n", err);
	fw_files_free(f, n);
	fw_store_free(s);
	return rc;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Like task-mutate shards started together by a Slurm array: 16 processes
 * write the same references (refs/flywheel/base/TREE) into one store at the
 * same moment, first as new references, then again over existing ones.
 * Every write must succeed, and git must read each reference back. */
TEST(keep_succeeds_for_racing_writers_of_the_same_reference)
{
	setup();
	enum { PROCS = 16, REFS = 40 };
	char st[512], tree[FW_OID_HEX], blob[FW_OID_HEX];
	if (keep_store("race", st, sizeof st, tree, blob) < 0) {
		CHECK(0);
		return;
	}
	int gate[2];
	CHECK_EQ_INT(pipe(gate), 0);
	pid_t pid[PROCS];
	fflush(stdout); /* children must not print the parent's buffered TAP */
	for (int k = 0; k < PROCS; k++) {
		pid[k] = fork();
		if (pid[k] == 0) {
			char err[512] = "", c;
			close(gate[1]);
			struct fw_store *s = fw_store_open(st, 0, err, sizeof err);
			/* all start when the parent closes the gate */
			if (!s || read(gate[0], &c, 1) != 0)
				_exit(2);
			int failed = 0;
			for (int pass = 0; pass < 2; pass++)
				for (int r = 0; r < REFS; r++) {
					char name[64];
					snprintf(name, sizeof name, "base/race%d", r);
					if (fw_store_keep(s, name, tree, err, sizeof err) < 0) {
						if (!failed++)
							printf("# process %d: %s\n", k, err);
					}
				}
			fflush(stdout);
			fw_store_free(s);
			_exit(failed ? 1 : 0);
		}
	}
	close(gate[0]);
	close(gate[1]);
	int failed = 0;
	for (int k = 0; k < PROCS; k++) {
		int ws = 0;
		if (pid[k] < 0 || waitpid(pid[k], &ws, 0) < 0 || !WIFEXITED(ws) ||
		    WEXITSTATUS(ws) != 0)
			failed++;
	}
	CHECK_EQ_INT(failed, 0);
	CHECK_STR(out1("git -C %s for-each-ref --format='%%(objectname)' refs/flywheel/base/ | "
		       "sort | uniq -c | sed 's/^ *//'", st),
		  out1("echo '%d %s'", REFS, tree));
	CHECK_STR(out1("find %s/refs -name '*.lock' | wc -l", st), "0");
}

/* A reference that already holds the value is kept even while another
 * writer holds its lock; a lock that is let go in time is waited for; one
 * that never is (a writer that died holding it) fails in bounded time with
 * a message that names the lock, and the reference is left as it was. */
TEST(keep_waits_for_a_held_lock_and_gives_up_in_bounded_time)
{
	setup();
	char err[512] = "", st[512], tree[FW_OID_HEX], blob[FW_OID_HEX], lock[600];
	if (keep_store("held", st, sizeof st, tree, blob) < 0) {
		CHECK(0);
		return;
	}
	struct fw_store *s = fw_store_open(st, 0, err, sizeof err);
	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ_INT(fw_store_keep(s, "base/held", tree, err, sizeof err), 0);
	snprintf(lock, sizeof lock, "%s/refs/flywheel/base/held.lock", st);
	sh("echo %s > %s", blob, lock);

	/* same value, lock held: nothing to write */
	double t0 = now_s();
	CHECK_EQ_INT(fw_store_keep(s, "base/held", tree, err, sizeof err), 0);
	CHECK(now_s() - t0 < 0.5);

	/* another value, lock never let go */
	t0 = now_s();
	err[0] = '\0';
	CHECK_EQ_INT(fw_store_keep(s, "base/held", blob, err, sizeof err), -1);
	double waited = now_s() - t0;
	printf("# gave up on a held lock after %.2f s: %s\n", waited, err);
	CHECK(waited >= 0.5 && waited < 10);
	CHECK(strstr(err, "refs/flywheel/base/held") != NULL);
	CHECK(strstr(err, "lock") != NULL);
	CHECK_STR(out1("git -C %s rev-parse refs/flywheel/base/held", st), tree);

	/* another value, lock let go after 0.3 s */
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		usleep(300000);
		_exit(unlink(lock) == 0 ? 0 : 1);
	}
	int ws = 0;
	CHECK_EQ_INT(fw_store_keep(s, "base/held", blob, err, sizeof err), 0);
	CHECK(p > 0 && waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK_STR(out1("git -C %s rev-parse refs/flywheel/base/held", st), blob);

	/* a new reference whose lock is held by a writer of the same value */
	snprintf(lock, sizeof lock, "%s/refs/flywheel/base/new.lock", st);
	sh("echo %s > %s", tree, lock);
	fflush(stdout);
	p = fork();
	if (p == 0) {
		/* the other writer finishes: its lock becomes the reference */
		usleep(200000);
		char ref[600];
		snprintf(ref, sizeof ref, "%s/refs/flywheel/base/new", st);
		_exit(rename(lock, ref) == 0 ? 0 : 1);
	}
	CHECK_EQ_INT(fw_store_keep(s, "base/new", tree, err, sizeof err), 0);
	CHECK(p > 0 && waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK_STR(out1("git -C %s rev-parse refs/flywheel/base/new", st), tree);
	CHECK_STR(out1("find %s/refs -name '*.lock' | wc -l", st), "0");
	fw_store_free(s);
}

TEST(read_beneath_follows_no_link_and_reads_no_more_than_asked)
{
	setup();
	char d[512];
	snprintf(d, sizeof d, "%s/beneath", scratch);
	sh("mkdir -p %s/a && printf hello > %s/a/b.txt && ln -s a %s/l && ln -s a/b.txt %s/f && "
	   "ln -s /etc %s/etc && mkfifo %s/p && truncate -s 1M %s/big",
	   d, d, d, d, d, d, d);
	char *data = NULL;
	size_t len = 0;
	CHECK_EQ_INT(fw_read_beneath(d, "a/b.txt", 100, &data, &len), 0);
	CHECK(data && len == 5 && memcmp(data, "hello", 5) == 0);
	free(data);
	const struct {
		const char *rel;
		int err;
	} bad[] = {
		{ "l/b.txt", ELOOP }, { "f", ELOOP }, { "etc/passwd", ELOOP }, { "p", EINVAL },
		{ "big", EFBIG }, { "../beneath/a/b.txt", EINVAL }, { "/etc/passwd", EINVAL },
		{ "a/./b.txt", EINVAL }, { "a/none", ENOENT }, { "a", EINVAL },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		errno = 0;
		data = NULL;
		CHECK_EQ_INT(fw_read_beneath(d, bad[i].rel, 4096, &data, &len), -1);
		if (errno != bad[i].err)
			printf("# %s: errno %d, want %d\n", bad[i].rel, errno, bad[i].err);
		CHECK_EQ_INT(errno, bad[i].err);
		CHECK(data == NULL);
	}
	/* the limit is the size read, not a size the file claims */
	CHECK_EQ_INT(fw_read_beneath(d, "big", 1 << 20, &data, &len), 0);
	CHECK_EQ_INT(len, 1 << 20);
	free(data);
}

/* The SHA-1 of text p (NULL: ""), written to file path first. */
static const char *sha1_of(const char *path, const char *p)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(p ? p : "", f);
		fclose(f);
	}
	return out1("sha1sum < %s", path);
}

TEST(workspace_diff_reads_files_not_the_workspace_git)
{
	setup();
	char err[512] = "", st[512], repo[512], ws[512], ref[512], tmp[512], outf[512],
	     tree[FW_OID_HEX];
	snprintf(st, sizeof st, "%s/store-diff", scratch);
	snprintf(repo, sizeof repo, "%s/repo", scratch);
	snprintf(ws, sizeof ws, "%s/ws-diff", scratch);
	snprintf(ref, sizeof ref, "%s/ws-ref", scratch);
	snprintf(tmp, sizeof tmp, "%s/host-diff", scratch);
	snprintf(outf, sizeof outf, "%s/out-diff", scratch);
	struct fw_store *s = fw_store_open(st, 1, err, sizeof err);
	CHECK_EQ_INT(fw_store_import(s, repo, "HEAD", tree, NULL, NULL, err, sizeof err), 0);
	CHECK_EQ_INT(fw_workspace_create(s, tree, ws, NULL, NULL, err, sizeof err), 0);
	CHECK_EQ_INT(fw_workspace_create(s, tree, ref, NULL, NULL, err, sizeof err), 0);
	/* the same edits in both; git's own diff of the untouched one is the
	 * reference */
	const char *edit = "echo 'x = 1' >> textkit/strings.py && printf 'n\\n' > notes.txt && "
			   "chmod +x README.md && rm textkit/units.py && ln -s /etc etc";
	sh("cd %s && %s && cd %s && %s", ws, edit, ref, edit);
	char *want = strdup(out1("cd %s && git add -A && git diff --cached | sha1sum", ref));
	char *p = NULL;
	struct fw_strlist left = { 0 };
	CHECK_EQ_INT(fw_workspace_diff(s, tree, ws, tmp, &p, &left, err, sizeof err), 0);
	CHECK(p && strstr(p, "+x = 1\n") && strstr(p, "new file mode 120000"));
	CHECK_EQ_INT(left.n, 0);
	CHECK_STR(sha1_of(outf, p), want);
	/* the host's own repository is gone */
	CHECK_EQ_INT(access(tmp, F_OK), -1);
	free(p);
	/* the workspace's git pointed elsewhere, its attributes, ignore rules
	 * and abbreviation changed: the same patch */
	sh("cd %s && git config -f .git/config core.worktree /etc && "
	   "git config -f .git/config core.abbrev 40 && echo '* binary' > .git/info/attributes && "
	   "echo '*' > .git/info/exclude", ws);
	CHECK_EQ_INT(fw_workspace_diff(s, tree, ws, tmp, &p, NULL, err, sizeof err), 0);
	CHECK_STR(sha1_of(outf, p), want);
	free(p);
	/* and with .git a link into the host, a file too big and a FIFO:
	 * the same patch, and the two files named as left out */
	sh("cd %s && mv .git ../ws-diff-git && ln -s /etc .git && truncate -s 17M big.bin && "
	   "mkfifo fifo", ws);
	CHECK_EQ_INT(fw_workspace_diff(s, tree, ws, tmp, &p, &left, err, sizeof err), 0);
	CHECK_STR(sha1_of(outf, p), want);
	CHECK_EQ_INT(left.n, 2);
	CHECK(left.n == 2 && (!strcmp(left.v[0], "big.bin: over the 16777216-byte file limit") ||
			      !strcmp(left.v[1], "big.bin: over the 16777216-byte file limit")));
	CHECK(left.n == 2 && (!strcmp(left.v[0], "fifo: not a regular file") ||
			      !strcmp(left.v[1], "fifo: not a regular file")));
	fw_strlist_release(&left);
	free(p);
	free(want);
	fw_store_free(s);
}

TEST(cleanup)
{
	CHECK_EQ_INT(fw_rmtree(scratch), 0);
	CHECK_EQ_INT(access(scratch, F_OK), -1);
}

TEST_MAIN()
