/*
 * fw_grade_job.c — a record read by grade and what grading made of it,
 * the job a worker of the pool runs (see fw_grade.h).
 */
#include <stdlib.h>
#include <string.h>

#include "fw_grade.h"

struct fw_grade_job *fw_grade_job_new(struct fw_mpv rec, int judge_only, const char *file,
				      uint64_t index, uint64_t offset)
{
	struct fw_grade_job *j = calloc(1, sizeof *j);
	if (!j)
		return NULL;
	j->file = file;
	j->index = index;
	j->offset = offset;
	j->judge_now = judge_only &&
		       (fw_mp_kind_is(rec, "rollout") || fw_mp_kind_is(rec, "traj"));
	j->pass = !j->judge_now && !fw_mp_kind_is(rec, "rollout");
	if (fw_buf_append(&j->in, rec.p, rec.n) < 0 ||
	    (j->judge_now && fw_buf_append(&j->out, rec.p, rec.n) < 0)) {
		fw_grade_job_free(j);
		return NULL;
	}
	return j;
}

void fw_grade_job_free(struct fw_grade_job *j)
{
	if (!j)
		return;
	fw_buf_release(&j->in);
	fw_buf_release(&j->out);
	free(j);
}

int fw_grade_job_run(struct fw_grader *g, struct fw_grade_job *j)
{
	if (j->pass || j->judge_now)
		return 0;
	if (!g) {
		strcpy(j->err, "out of memory");
		return -1;
	}
	j->err[0] = '\0';
	return fw_grade_rollout(g, (struct fw_mpv){ j->in.p, j->in.n }, &j->out, j->err,
				sizeof j->err);
}
