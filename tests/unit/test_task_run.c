/*
 * test_task_run.c — fw_task_run without a repository: the results walk
 * the finished prefix of the order up to the max-th task and count what
 * they pass, a kept() failure stops them, the summary's counts read as
 * task-mutate prints them; fw_scratch makes and removes its directory.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "fw_cli.h"
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

TEST_MAIN()
