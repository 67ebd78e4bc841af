/* harness.h — a tiny TAP test harness.  Each test runs in its own child
 * process, so a crash or abort() fails that test alone.  Register tests with
 * T(name) { ... } and end the file with RUN_ALL().  EXPECT(cond) fails the
 * current test and goes on. */
#ifndef HARNESS_H
#define HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct h_test { const char *name; void (*fn)(void); };
static struct h_test h_tests[256];
static int h_ntests, h_failed;

#define T(id)                                                           \
	static void id(void);                                           \
	__attribute__((constructor)) static void reg_##id(void)         \
	{ h_tests[h_ntests].name = #id; h_tests[h_ntests++].fn = id; }  \
	static void id(void)

#define EXPECT(cond)                                                    \
	do {                                                            \
		if (!(cond)) {                                          \
			printf("# %s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
			h_failed = 1;                                   \
		}                                                       \
	} while (0)

#define NEAR(a, b) (fabs((double)(a) - (double)(b)) <= 1e-9 * (1 + fabs((double)(b))))

#define RUN_ALL()                                                       \
	int main(void)                                                  \
	{                                                               \
		int bad = 0;                                            \
		printf("1..%d\n", h_ntests);                            \
		for (int i = 0; i < h_ntests; i++) {                    \
			fflush(stdout);                                 \
			pid_t pid = fork();                             \
			if (pid == 0) {                                 \
				alarm(5);                               \
				h_tests[i].fn();                        \
				fflush(stdout);                         \
				_exit(h_failed);                        \
			}                                               \
			int st = 0;                                     \
			waitpid(pid, &st, 0);                           \
			int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0; \
			if (WIFSIGNALED(st))                            \
				printf("# killed by signal %d\n", WTERMSIG(st)); \
			printf("%sok %d - %s\n", ok ? "" : "not ", i + 1, h_tests[i].name); \
			bad += !ok;                                     \
		}                                                       \
		return bad ? 1 : 0;                                     \
	}

#endif
