/*
 * fw_scratch.c — the scratch directory of a tool's run, removed when a
 * signal ends the run.  See fw_cli.h.
 */
#include "fw_cli.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fw_base.h"

/* The directory in use, so that the signal thread finds it. */
static pthread_mutex_t scratch_mu = PTHREAD_MUTEX_INITIALIZER;
static char scratch_now[4096];
static sigset_t scratch_sigs;

int fw_scratch_make(char *dir)
{
	const char *tmpdir = getenv("TMPDIR");
	snprintf(dir, 4096, "%s/%s.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp", fw_prog);
	pthread_mutex_lock(&scratch_mu);
	char *made = mkdtemp(dir);
	if (made)
		snprintf(scratch_now, sizeof scratch_now, "%s", dir);
	pthread_mutex_unlock(&scratch_mu);
	if (!made)
		fw_warn("cannot make a temporary directory: %s", strerror(errno));
	return made ? 0 : -1;
}

void fw_scratch_remove(const char *dir)
{
	pthread_mutex_lock(&scratch_mu);
	fw_rmtree(dir);
	scratch_now[0] = '\0';
	pthread_mutex_unlock(&scratch_mu);
}

/* Waits for the signals (blocked in every other thread), removes the
 * directory in use and exits as the signal would have.  Sandboxed
 * children die with their parent. */
static void *scratch_thread(void *arg)
{
	int sig = 0;
	(void)arg;
	if (sigwait(&scratch_sigs, &sig) != 0)
		return NULL;
	pthread_mutex_lock(&scratch_mu);
	if (scratch_now[0]) {
		/* Moved first, so workers stop finding it; removal is retried
		 * while their last writes land. */
		char dead[4200];
		snprintf(dead, sizeof dead, "%s.dead", scratch_now);
		const char *p = rename(scratch_now, dead) == 0 ? dead : scratch_now;
		for (int i = 0; i < 20 && fw_rmtree(p) < 0; i++)
			usleep(50000);
	}
	_exit(128 + sig);
}

int fw_scratch_guard(void)
{
	pthread_t th;
	sigemptyset(&scratch_sigs);
	sigaddset(&scratch_sigs, SIGINT);
	sigaddset(&scratch_sigs, SIGTERM);
	sigaddset(&scratch_sigs, SIGHUP);
	if (pthread_sigmask(SIG_BLOCK, &scratch_sigs, NULL) != 0)
		return -1;
	if (pthread_create(&th, NULL, scratch_thread, NULL) != 0)
		return -1;
	pthread_detach(th);
	return 0;
}
