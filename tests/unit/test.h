/*
 * test.h — a minimal TAP harness for flywheel's C unit tests.
 *
 * Each test is a function registered with TEST(name); CHECK() records a
 * failure with file and line and lets the test go on, so one run shows every
 * broken assertion.  main() comes from TEST_MAIN().  Output is TAP on stdout,
 * failure detail on stdout as TAP comments.  Build and run: `make unit` then
 * `tests/run --unit-only` (or run build/tests/test_NAME directly).
 */
#ifndef FW_TEST_H
#define FW_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*test_fn)(void);
struct test_case { const char *name; test_fn fn; };

static struct test_case test_cases[512];
static int test_ncases;
static int test_failed_now;

#define TEST(tname)                                                        \
	static void test_##tname(void);                                    \
	__attribute__((constructor)) static void reg_##tname(void)         \
	{                                                                 \
		test_cases[test_ncases].name = #tname;                     \
		test_cases[test_ncases++].fn = test_##tname;               \
	}                                                                 \
	static void test_##tname(void)

#define CHECK(cond)                                                       \
	do {                                                              \
		if (!(cond)) {                                            \
			printf("# %s:%d: check failed: %s\n", __FILE__,   \
			       __LINE__, #cond);                          \
			test_failed_now = 1;                              \
		}                                                         \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                \
	do {                                                              \
		long long a_ = (long long)(a), b_ = (long long)(b);       \
		if (a_ != b_) {                                           \
			printf("# %s:%d: %s == %s: %lld != %lld\n",       \
			       __FILE__, __LINE__, #a, #b, a_, b_);       \
			test_failed_now = 1;                              \
		}                                                         \
	} while (0)

#define CHECK_STR(a, b)                                                   \
	do {                                                              \
		const char *a_ = (a), *b_ = (b);                          \
		if (!a_ || !b_ || strcmp(a_, b_) != 0) {                  \
			printf("# %s:%d: %s == %s: \"%s\" != \"%s\"\n",   \
			       __FILE__, __LINE__, #a, #b,                \
			       a_ ? a_ : "(null)", b_ ? b_ : "(null)");   \
			test_failed_now = 1;                              \
		}                                                         \
	} while (0)

/* |a - b| <= tol * max(1, |b|) */
#define CHECK_NEAR(a, b, tol)                                             \
	do {                                                              \
		double a_ = (a), b_ = (b);                                \
		double s_ = fabs(b_) > 1 ? fabs(b_) : 1;                  \
		if (!(fabs(a_ - b_) <= (tol) * s_)) {                     \
			printf("# %s:%d: %s ~ %s: %.9g vs %.9g\n",        \
			       __FILE__, __LINE__, #a, #b, a_, b_);       \
			test_failed_now = 1;                              \
		}                                                         \
	} while (0)

#define TEST_MAIN()                                                       \
	int main(int argc, char **argv)                                   \
	{                                                                 \
		int fails = 0;                                            \
		printf("1..%d\n", test_ncases);                           \
		for (int i = 0; i < test_ncases; i++) {                   \
			if (argc > 1 && !strstr(test_cases[i].name, argv[1])) { \
				printf("ok %d - %s # skip filtered\n", i + 1, \
				       test_cases[i].name);               \
				continue;                                 \
			}                                                 \
			test_failed_now = 0;                              \
			test_cases[i].fn();                               \
			fflush(stdout);                                   \
			printf("%sok %d - %s\n",                          \
			       test_failed_now ? "not " : "", i + 1,      \
			       test_cases[i].name);                       \
			fails += test_failed_now;                         \
		}                                                         \
		return fails ? 1 : 0;                                     \
	}

#endif
