/*
 * test_task_run.c — fw_task_run without a repository: the results walk
 * the finished prefix of the order up to the max-th task and count what
 * they pass, a kept() failure stops them, the summary's counts read as
 * task-mutate prints them; fw_scratch makes and removes its directory;
 * the repositories of directory and record-stream operands, with the
 * warnings of what they lack; the run over them leaves out a repository
 * without a test command or with an unknown report, stops at --max, and
 * says why a directory that is no repository is not used.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "test_rec.h"
#include "fw_cli.h"
#include "fw_stream.h"
#include "fw_task_run.h"

struct seen {
	int kept, rejected, fail_at;
};

static int on_kept(void *arg, const struct fw_task_cand *c)
{
	struct seen *s = arg;
	(void)c;
	return ++s->kept == s->fail_at ? -1 : 0;
}

static void on_rejected(void *arg, const struct fw_task_cand *c)
{
	struct seen *s = arg;
	(void)c;
	s->rejected++;
}

TEST(results_walk_the_finished_prefix_up_to_max)
{
	struct fw_task_cand c[6];
	struct fw_task_repo j = { .c = c, .nc = 6 };
	static const enum fw_task_reason r[6] = { FW_TASK_KEPT, FW_TASK_LEAK, FW_TASK_KEPT,
						  FW_TASK_NO_F2P, FW_TASK_KEPT, FW_TASK_KEPT };
	memset(c, 0, sizeof c);
	for (int i = 0; i < 6; i++) {
		c[i].reason = r[i];
		c[i].done = i != 4; /* the fifth is not finished: the prefix ends there */
	}
	struct fw_task_tally t = { 0 };
	struct seen s = { 0 };
	CHECK_EQ_INT(fw_task_repo_results(&j, 0, &t, on_kept, on_rejected, &s), 0);
	CHECK(t.cand == 4 && t.ok == 2 && t.why[FW_TASK_LEAK] == 1 && t.why[FW_TASK_NO_F2P] == 1);
	CHECK(s.kept == 2 && s.rejected == 2);

	/* max 1: the walk ends at the first task */
	struct fw_task_tally t1 = { 0 };
	struct seen s1 = { 0 };
	CHECK_EQ_INT(fw_task_repo_results(&j, 1, &t1, on_kept, NULL, &s1), 0);
	CHECK(t1.cand == 1 && t1.ok == 1 && s1.kept == 1);

	/* a failing kept(): counted as a candidate, not as validated */
	struct fw_task_tally t2 = { 0 };
	struct seen s2 = { .fail_at = 2 };
	CHECK_EQ_INT(fw_task_repo_results(&j, 0, &t2, on_kept, on_rejected, &s2), -1);
	CHECK(t2.cand == 3 && t2.ok == 1 && s2.rejected == 1);
}

TEST(summary_counts_read_as_task_mutate_prints_them)
{
	struct fw_task_tally t = { .cand = 7, .ok = 3, .why = { 1, 0, 2, 0, 1, 0 } };
	char buf[512];
	fw_task_tally_format(buf, sizeof buf, &t);
	CHECK_STR(buf, "candidates 7, validated 3, rejected 4: nothing-to-remove 1, leak 0, "
		  "broken 2, timeout 0, no-f2p 1, empty-patch-passes 0");
	struct fw_history_tally h = { .scanned = 9, .candidates = 4, .kept = 2 };
	fw_task_history_tally_format(buf, sizeof buf, &h);
	CHECK(strncmp(buf, "history: commits 9, candidates 4, validated 2: ", 47) == 0);
	/* truncated, never overrun */
	fw_task_tally_format(buf, 20, &t);
	CHECK_STR(buf, "candidates 7, valid");
}

TEST(scratch_directory_is_made_under_tmpdir_and_removed)
{
	char top[] = "/tmp/test_task_run.XXXXXX", dir[4096], file[4200];
	struct stat st;
	CHECK(mkdtemp(top) != NULL);
	setenv("TMPDIR", top, 1);
	fw_cli_init("test_task_run");
	CHECK_EQ_INT(fw_scratch_make(dir), 0);
	CHECK(strncmp(dir, top, strlen(top)) == 0);
	CHECK(strstr(dir, "/test_task_run.") != NULL);
	snprintf(file, sizeof file, "%s/f", dir);
	FILE *f = fopen(file, "w");
	CHECK(f != NULL && fputs("x", f) >= 0 && fclose(f) == 0);
	fw_scratch_remove(dir);
	CHECK(stat(dir, &st) < 0);
	CHECK(rmdir(top) == 0);
	unsetenv("TMPDIR");
}

/* What a run's callbacks were told. */
struct heard {
	struct fw_strlist warn, note;
	int flushes, emitted;
};

static void hear_warn(void *arg, const char *msg)
{
	fw_strlist_add(&((struct heard *)arg)->warn, msg);
}

static void hear_note(void *arg, const char *msg)
{
	fw_strlist_add(&((struct heard *)arg)->note, msg);
}

static void hear_flush(void *arg)
{
	((struct heard *)arg)->flushes++;
}

static int hear_emit(void *arg, const void *rec, size_t n)
{
	(void)rec;
	(void)n;
	((struct heard *)arg)->emitted++;
	return 0;
}

static void heard_release(struct heard *h)
{
	fw_strlist_release(&h->warn);
	fw_strlist_release(&h->note);
}

/* Writes the JSON records js[0..n) to path as a record stream; tail (when
 * not NULL) is appended raw after them.  Returns 0 or -1. */
static int write_stream(const char *path, const char *const *js, int n, const char *tail)
{
	struct fw_buf b = { 0 };
	char err[256];
	struct fw_writer *w = fw_writer_open(path, -1, err, sizeof err);
	int rc = w ? 0 : -1;
	for (int i = 0; w && i < n; i++) {
		struct fw_mpv v = test_rec(&b, js[i]);
		if (!v.p || fw_writer_put(w, v.p, v.n) < 0)
			rc = -1;
	}
	if (w && fw_writer_close(w, err, sizeof err) < 0)
		rc = -1;
	fw_buf_release(&b);
	if (rc == 0 && tail) {
		FILE *f = fopen(path, "a");
		rc = f && fputs(tail, f) >= 0 && fclose(f) == 0 ? 0 : -1;
	}
	return rc;
}

TEST(sources_from_directories_and_record_streams)
{
	char top[] = "/tmp/test_task_run.XXXXXX", dir[4200], st[4200], bad[4200], gone[4200];
	CHECK(mkdtemp(top) != NULL);
	snprintf(dir, sizeof dir, "%s/repo", top);
	snprintf(st, sizeof st, "%s/repos.mp", top);
	snprintf(bad, sizeof bad, "%s/bad.mp", top);
	snprintf(gone, sizeof gone, "%s/gone", top);
	CHECK(mkdir(dir, 0755) == 0);
	static const char *const good[] = {
		"{\"repo\": \"/r/one\", \"test_cmd\": \"make check\", \"report\": \"tap\"}",
		"{\"repo\": \"/r/two\"}",
	};
	static const char *const some[] = {
		"{\"repo\": \"/r/three\", \"test_cmd\": \"pytest\"}",
		"{\"test_cmd\": \"pytest\"}",
		"{\"repo\": \"/r/four\"}",
	};
	CHECK_EQ_INT(write_stream(st, good, 2, NULL), 0);
	/* a byte no msgpack value starts with ends the stream */
	CHECK_EQ_INT(write_stream(bad, some, 3, "\xc1"), 0);

	CHECK_EQ_INT(fw_task_operand_kind(dir), 1);
	CHECK_EQ_INT(fw_task_operand_kind(st), 0);
	CHECK_EQ_INT(fw_task_operand_kind("-"), 0);
	CHECK_EQ_INT(fw_task_operand_kind(gone), -1);

	/* a directory and a stream: every repository, nothing said */
	struct fw_task_sources s = { 0 };
	struct heard h = { 0 };
	char *ops[] = { dir, st };
	CHECK_EQ_INT(fw_task_sources_fill(&s, 2, ops, hear_warn, &h), 0);
	CHECK_EQ_INT(h.warn.n, 0);
	CHECK(s.repos.n == 3 && s.cmds.n == 3 && s.fmts.n == 3);
	if (s.repos.n == 3 && s.cmds.n == 3 && s.fmts.n == 3) {
		CHECK_STR(s.repos.v[0], dir);
		CHECK_STR(s.cmds.v[0], "");
		CHECK_STR(s.fmts.v[0], "");
		CHECK_STR(s.repos.v[1], "/r/one");
		CHECK_STR(s.cmds.v[1], "make check");
		CHECK_STR(s.fmts.v[1], "tap");
		CHECK_STR(s.repos.v[2], "/r/two");
		CHECK_STR(s.cmds.v[2], "");
		CHECK_STR(s.fmts.v[2], "");
	}
	fw_task_sources_release(&s);
	CHECK(s.repos.n == 0 && s.repos.v == NULL);

	/* an operand that is not there, a record without `repo`, a bad
	 * record: each said, the rest kept, and the result -1 */
	char *ops2[] = { gone, bad, dir };
	char want[8400];
	CHECK_EQ_INT(fw_task_sources_fill(&s, 3, ops2, hear_warn, &h), -1);
	CHECK_EQ_INT(h.warn.n, 3);
	CHECK(s.repos.n == 3 && s.cmds.n == 3 && s.fmts.n == 3);
	if (h.warn.n == 3) {
		snprintf(want, sizeof want, "%s: No such file or directory", gone);
		CHECK_STR(h.warn.v[0], want);
		snprintf(want, sizeof want, "%s: record 2 (byte ", bad);
		CHECK(strncmp(h.warn.v[1], want, strlen(want)) == 0);
		CHECK(strstr(h.warn.v[1], "): no 'repo' string") != NULL);
		snprintf(want, sizeof want, "%s: record 4 (byte ", bad);
		CHECK(strncmp(h.warn.v[2], want, strlen(want)) == 0);
	}
	if (s.repos.n == 3) {
		CHECK_STR(s.repos.v[0], "/r/three");
		CHECK_STR(s.cmds.v[0], "pytest");
		CHECK_STR(s.repos.v[1], "/r/four");
		CHECK_STR(s.repos.v[2], dir);
	}
	fw_task_sources_release(&s);
	fw_task_sources_release(NULL);
	heard_release(&h);
	CHECK_EQ_INT(fw_rmtree(top), 0);
}

TEST(run_leaves_out_what_it_cannot_run_and_stops_at_max)
{
	char top[] = "/tmp/test_task_run.XXXXXX", store[4200], plain[4200], want[8400];
	CHECK(mkdtemp(top) != NULL);
	setenv("TMPDIR", top, 1);
	fw_cli_init("test_task_run");
	snprintf(store, sizeof store, "%s/tasks.git", top);
	snprintf(plain, sizeof plain, "%s/plain", top);
	CHECK(mkdir(plain, 0755) == 0);

	struct fw_task_sources s = { 0 };
	CHECK(fw_strlist_add(&s.repos, "/r/nocmd") == 0 && fw_strlist_add(&s.cmds, "") == 0 &&
	      fw_strlist_add(&s.fmts, "") == 0);
	CHECK(fw_strlist_add(&s.repos, "/r/badfmt") == 0 && fw_strlist_add(&s.cmds, "true") == 0 &&
	      fw_strlist_add(&s.fmts, "junitxml") == 0);
	CHECK(fw_strlist_add(&s.repos, plain) == 0 && fw_strlist_add(&s.cmds, "true") == 0 &&
	      fw_strlist_add(&s.fmts, "tap") == 0);

	struct heard h = { 0 };
	struct fw_task_run R = {
		.t = { .fmt = FW_REPORT_JUNIT, .store = store, .split = { 0.8, 0.1, 0.1 },
		       .timeout_s = 30, .strategies = 1u << FW_STUB_BODY },
		.jobs = 1, .emit = hear_emit, .flush = hear_flush, .warn = hear_warn,
		.note = hear_note, .arg = &h,
	};
	CHECK_EQ_INT(fw_task_run_all(&R, &s), -1);
	CHECK_EQ_INT(h.warn.n, 3);
	if (h.warn.n == 3) {
		CHECK_STR(h.warn.v[0], "/r/nocmd: no test command (--test-cmd, or a test_cmd "
			  "field)");
		CHECK_STR(h.warn.v[1], "/r/badfmt: unknown report format 'junitxml' (junit, tap, "
			  "gotest)");
		snprintf(want, sizeof want, "%s: ", plain);
		CHECK(strncmp(h.warn.v[2], want, strlen(want)) == 0);
	}
	/* only the repository that was run has a line, and was flushed */
	CHECK_EQ_INT(R.lines.n, 1);
	if (R.lines.n == 1) {
		snprintf(want, sizeof want, "%s: not used: import-failed (", plain);
		CHECK(strncmp(R.lines.v[0], want, strlen(want)) == 0);
	}
	CHECK_EQ_INT(h.flushes, 1);
	CHECK(h.emitted == 0 && R.tally.cand == 0 && h.note.n == 0);
	fw_task_run_release(&R);
	fw_task_run_release(NULL);

	/* --max already reached: nothing is run, nothing said */
	heard_release(&h);
	memset(&h, 0, sizeof h);
	struct fw_task_run M = { .t = { .store = store, .strategies = 1u << FW_STUB_BODY },
				 .max = 2, .jobs = 1, .emit = hear_emit, .flush = hear_flush,
				 .warn = hear_warn, .arg = &h };
	M.tally.ok = 1;
	M.htally.kept = 1;
	CHECK_EQ_INT(fw_task_run_all(&M, &s), 0);
	CHECK(h.warn.n == 0 && h.flushes == 0 && M.lines.n == 0);
	fw_task_run_release(&M);

	fw_task_sources_release(&s);
	heard_release(&h);
	unsetenv("TMPDIR");
	CHECK_EQ_INT(fw_rmtree(top), 0);
}

TEST_MAIN()
