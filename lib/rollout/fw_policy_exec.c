/*
 * fw_policy_exec.c — exec episodes: an external agent program run in the
 * clean room on a workspace of the task tree.  See fw_policy.h.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "fw_env.h"
#include "fw_ingest.h"
#include "fw_json.h"
#include "fw_policy.h"
#include "fw_rollout.h"
#include "fw_store.h"
#include "fw_workspace.h"

/* Where $FW_TRAJ and $FW_TASK_FILE point, inside the workspace's git
 * directory (so that neither is part of the patch). */
#define TRAJ_NAME ".git/fw-traj"
#define TASK_NAME ".git/fw-task.json"
/* Tasks longer than this go in the file only ($FW_TASK is then empty). */
#define TASK_ENV_MAX 100000

void fw_exec_result_release(struct fw_exec_result *r)
{
	if (!r)
		return;
	free(r->patch);
	fw_strlist_release(&r->left_out);
	fw_buf_free(&r->turns);
	fw_sandbox_result_free(&r->run);
	memset(r, 0, sizeof *r);
}

struct traj_sink {
	struct fw_exec_result *r;
	int seen;
};

static int on_traj(void *ctx, enum fw_fmt f, json_t *traj, long line)
{
	struct traj_sink *t = ctx;
	json_t *turns = json_object_get(traj, "turns");
	char *s;

	(void)f;
	(void)line;
	if (!t->seen && json_is_array(turns) && (s = json_dumps(turns, JSON_COMPACT))) {
		size_t used;
		struct fw_json_err e;

		if (fw_json_to_mp(&t->r->turns, s, strlen(s), 1, &used, &e) != 1)
			snprintf(t->r->traj_error, sizeof t->r->traj_error, "%s", e.msg);
		free(s);
		t->seen = 1;
	}
	json_decref(traj);
	return 0;
}

static int on_bad(void *ctx, enum fw_fmt f, const char *where, const char *why)
{
	struct traj_sink *t = ctx;

	(void)f;
	if (!t->r->traj_error[0])
		snprintf(t->r->traj_error, sizeof t->r->traj_error, "%s: %s", where, why);
	return 0;
}

/* Reads $FW_TRAJ, which the agent may have made anything: only a regular
 * file inside the workspace's .git, reached through no link, of at most
 * FW_TRAJ_MAX bytes, copied to priv (where the agent cannot reach) and
 * parsed from there. */
static void read_traj(const char *ws, const char *priv, struct fw_exec_result *r)
{
	struct traj_sink t = { r, 0 };
	struct fw_ingest_sink sink = { on_traj, NULL, on_bad, &t };
	enum fw_fmt fmt;
	char e[256], *data;
	size_t len;
	FILE *f;

	if (fw_read_beneath(ws, TRAJ_NAME, FW_TRAJ_MAX, &data, &len) < 0) {
		if (errno == EFBIG)
			snprintf(r->traj_error, sizeof r->traj_error,
				 "$FW_TRAJ is over the %u-byte limit", FW_TRAJ_MAX);
		else if (errno == ENOMEM)
			snprintf(r->traj_error, sizeof r->traj_error, "out of memory");
		else if (errno != ENOENT)
			snprintf(r->traj_error, sizeof r->traj_error, "$FW_TRAJ is not a regular file in the workspace");
		return;
	}
	int ok = (f = fopen(priv, "wx")) && fwrite(data, 1, len, f) == len;
	if (f && fclose(f))
		ok = 0;
	free(data);
	if (!ok) {
		snprintf(r->traj_error, sizeof r->traj_error, "cannot copy $FW_TRAJ: %s",
			 strerror(errno));
		return;
	}
	if (fw_ingest_file(priv, FW_FMT_UNKNOWN, &sink, &fmt, e, sizeof e) != 0 &&
	    !r->traj_error[0])
		snprintf(r->traj_error, sizeof r->traj_error, "%s", e);
}

int fw_exec_episode(const struct fw_exec_opts *o, struct fw_store *s, const char *tree_hex,
		    const char *prompt, size_t plen, const char *task_json, uint64_t seed,
		    int sample, struct fw_exec_result *r, char *err, size_t errlen)
{
	const char *tmp = o->tmpdir ? o->tmpdir : getenv("TMPDIR");
	char top[PATH_MAX], ws[PATH_MAX + 8], in[PATH_MAX + 8], traj[PATH_MAX + 32];
	char host[PATH_MAX + 8];
	char prog[PATH_MAX];
	char *env[7] = { NULL }, *binds[66];
	size_t nb = 0;
	int rc = -1;
	FILE *f;

	memset(r, 0, sizeof *r);
	snprintf(top, sizeof top, "%s/fw-rollout-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(top)) {
		snprintf(err, errlen, "%s: %s", top, strerror(errno));
		return -1;
	}
	snprintf(ws, sizeof ws, "%s/ws", top);
	snprintf(in, sizeof in, "%s/stdin", top);
	/* the host's own files, outside the workspace: the sandbox sees ws
	 * only */
	snprintf(traj, sizeof traj, "%s/traj", top);
	snprintf(host, sizeof host, "%s/host", top);
	if (fw_workspace_create(s, tree_hex, ws, NULL, NULL, err, errlen))
		goto out;
	if (!(f = fopen(in, "w")) || fwrite(prompt, 1, plen, f) != plen || fclose(f)) {
		snprintf(err, errlen, "%s: %s", in, strerror(errno));
		goto out;
	}
	/* the task as a file too: an environment string is limited to 128 kB */
	char tf[PATH_MAX + 32];
	size_t tl = task_json ? strlen(task_json) : 2;
	snprintf(tf, sizeof tf, "%s/%s", ws, TASK_NAME);
	if (!(f = fopen(tf, "w")) || fwrite(task_json ? task_json : "{}", 1, tl, f) != tl ||
	    fclose(f)) {
		snprintf(err, errlen, "%s: %s", tf, strerror(errno));
		goto out;
	}
	/* the program itself, when the command starts with a path */
	size_t pn = strcspn(o->cmd, " \t\n");
	if (pn < sizeof prog && o->cmd[0] == '/') {
		memcpy(prog, o->cmd, pn);
		prog[pn] = '\0';
		if (access(prog, F_OK) == 0)
			binds[nb++] = prog;
	}
	for (size_t i = 0; o->mounts && o->mounts[i] && nb < 64; i++)
		binds[nb++] = (char *)o->mounts[i];
	binds[nb] = NULL;
	if (asprintf(&env[0], "FW_TASK=%s",
		     task_json && strlen(task_json) < TASK_ENV_MAX ? task_json : "") < 0 ||
	    asprintf(&env[1], "FW_SEED=%llu", (unsigned long long)seed) < 0 ||
	    asprintf(&env[2], "FW_SAMPLE=%d", sample) < 0 ||
	    asprintf(&env[3], "FW_TRAJ=%s/%s", FW_SANDBOX_WORKDIR, TRAJ_NAME) < 0 ||
	    asprintf(&env[4], "FW_TASK_FILE=%s/%s", FW_SANDBOX_WORKDIR, TASK_NAME) < 0) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	struct fw_sandbox_opts so;
	fw_sandbox_opts_init(&so);
	so.workspace = ws;
	so.ro_binds = (const char *const *)binds;
	so.env = (const char *const *)env;
	so.stdin_path = in;
	so.timeout_s = o->timeout_s;
	if (o->output_cap)
		so.output_cap = o->output_cap;
	so.allow = o->allow;
	so.procs = 256;
	const char *eb[67], *ev[7 + FW_ENV_MAXVARS];
	if (fw_env_apply(o->env, &so, eb, 67, ev, 7 + FW_ENV_MAXVARS)) {
		snprintf(err, errlen, "too many mounts");
		goto out;
	}
	char *argv[] = { "sh", "-c", (char *)o->cmd, NULL };
	if (fw_sandbox_run(&so, argv, &r->run, err, errlen))
		goto out;
	switch (r->run.cause) {
	case FW_SANDBOX_OK:
		r->stop = r->run.exit_code == 0 ? "exit" : "crash";
		break;
	case FW_SANDBOX_KILLED:
		r->stop = "crash";
		break;
	default:
		r->stop = fw_sandbox_cause_name(r->run.cause);
	}
	read_traj(ws, traj, r);
	if (fw_workspace_diff(s, tree_hex, ws, host, &r->patch, &r->left_out, err, errlen))
		goto out;
	rc = 0;
out:
	for (int i = 0; i < 5; i++)
		free(env[i]);
	if (rc)
		fw_exec_result_release(r);
	fw_rmtree(top);
	return rc;
}
