/*
 * fw_report.h — test results from JUnit XML and TAP reports.
 *
 * A report maps test ids to outcomes.  JUnit XML (pytest --junitxml, ctest
 * --output-junit, bats --formatter junit, jest-junit, go-junit-report) gives
 * one <testcase> per test: its id is "CLASSNAME::NAME", or NAME alone when
 * the classname is empty or equal to the name (ctest).  TAP gives one
 * "ok"/"not ok" line per test: its id is the description after the number
 * (without a leading "- "), or the number when there is none.
 *
 * Outcomes: pass; fail (<failure>, "not ok"); error (<error>, ctest status
 * "fail" without detail is a fail); skip (<skipped>, "# SKIP", ctest
 * "notrun"/"disabled"); xfail (pytest's skipped type "pytest.xfail",
 * "not ok ... # TODO").  An "ok ... # TODO" is a pass.  When an id occurs
 * twice (reruns, duplicate names) the worse outcome is kept.
 *
 * `go test -json` output (its test2json events, one JSON object a line)
 * gives one id per test and subtest: "PACKAGE::TestName" and
 * "PACKAGE::TestName/sub"; outcomes from the "pass", "fail" and "skip"
 * events; a test that started and never ended is an error.
 *
 * Tests are kept sorted by id (strcmp order), so fw_report_find() is a
 * binary search and iteration order is stable.
 */
#ifndef FW_REPORT_H
#define FW_REPORT_H

#include <stddef.h>

enum fw_outcome {
	FW_PASS = 0,
	FW_SKIP,
	FW_XFAIL,
	FW_FAIL,
	FW_ERROR,
};

struct fw_test_result {
	char *id;               /* owned by the report */
	enum fw_outcome outcome;
	double time;            /* seconds; 0 when the report does not say */
	char *message;          /* first line of the failure message, or NULL */
};

struct fw_report {
	struct fw_test_result *tests; /* n entries, sorted by id */
	size_t n, cap;
	long planned;           /* TAP plan "1..N"; -1 when absent or JUnit */
	int bailed;             /* TAP "Bail out!" seen */
	int docs;               /* JUnit: top-level <testsuite(s)> elements
				 * read (one per report a runner wrote) */
};

/* Returns an empty report, or NULL when memory runs out.  Caller frees with
 * fw_report_free(). */
struct fw_report *fw_report_new(void);

/* Frees r and everything it owns.  fw_report_free(NULL) does nothing. */
void fw_report_free(struct fw_report *r);

/* Empties r, keeping it usable.  NULL does nothing. */
void fw_report_reset(struct fw_report *r);

/*
 * Adds the testcases of a JUnit XML document (len bytes at xml, need not be
 * NUL-terminated) to r.  Returns the number of testcases read (0 is valid:
 * an empty suite), or -1 when the document is not JUnit XML or is cut short
 * (message in err; testcases before the fault are kept).
 */
int fw_report_parse_junit(struct fw_report *r, const char *xml, size_t len,
			  char *err, size_t errlen);

/*
 * Adds the results of a TAP stream (len bytes at text) to r: top-level
 * test lines only (indented subtests are ignored), plan and "Bail out!"
 * noted in r->planned and r->bailed.  Returns the number of test lines
 * read, or -1 when memory runs out.
 */
int fw_report_parse_tap(struct fw_report *r, const char *text, size_t len,
			char *err, size_t errlen);

/*
 * Adds the results of `go test -json` output (len bytes at text) to r.
 * Each line that starts with '{' must be a test2json event; other lines
 * (the "FAIL pkg [build failed]" Go prints for a package that does not
 * compile, stray output) are skipped, so the tests of a package that does
 * not build are simply absent.  A test's outcome comes from its "pass",
 * "fail" or "skip" event, its time from "Elapsed", a failure's message
 * from the first line it printed; a test that started but had no outcome
 * when its package ended or the output did (a crash, a panic elsewhere) is
 * an error.  Returns the number of tests read, or -1 when a line is not a
 * test2json event (message in err with its line number; results before it
 * are kept) or memory runs out.
 */
int fw_report_parse_gotest(struct fw_report *r, const char *text, size_t len,
			   char *err, size_t errlen);

enum fw_report_format { FW_REPORT_JUNIT, FW_REPORT_TAP, FW_REPORT_GOTEST };

/* "junit", "tap" or "gotest".  Cannot fail. */
const char *fw_report_format_name(enum fw_report_format f);

/* The format named s ("junit", "tap", "gotest"), or -1. */
int fw_report_format_parse(const char *s);

/* Reads the file at path and parses it as fmt (see above).  Returns the
 * number of tests read, or -1 with a message in err (unreadable file,
 * malformed report). */
int fw_report_load(struct fw_report *r, const char *path, enum fw_report_format fmt,
		   char *err, size_t errlen);

/* The result for id, or NULL when r has none.  The pointer is valid until
 * r is changed or freed. */
const struct fw_test_result *fw_report_find(const struct fw_report *r, const char *id);

/* Whether id did not pass in r: it failed, erred, or has no result. */
int fw_report_failing(const struct fw_report *r, const char *id);

/* Whether r has a result for id and its outcome is o. */
int fw_report_is(const struct fw_report *r, const char *id, enum fw_outcome o);

/* Number of tests in r with outcome o. */
size_t fw_report_count(const struct fw_report *r, enum fw_outcome o);

/* "pass", "fail", "skip", "xfail" or "error".  Cannot fail. */
const char *fw_outcome_name(enum fw_outcome o);

/* A runner's closing count line: "1 failed, 63 passed in 0.52s" (pytest,
 * with or without its '=' rule), "63 passed, 1 failed" (the drills'
 * runner). */
struct fw_summary {
	long passed, failed, errors, skipped, xfailed, xpassed;
};

/*
 * Finds the last line of text (len bytes, need not be NUL-terminated) that
 * is a count line: only "N WORD" items joined by ", ", WORD one of passed,
 * failed, error(s), skipped, xfailed, xpassed, deselected, warning(s),
 * rerun, optionally followed by " in TIME" and framed by '=' rules.
 * Fills s (counts it does not name are 0).  Returns 1 when found, 0 when
 * text holds no such line.  Cannot fail.
 */
int fw_summary_find(const char *text, size_t len, struct fw_summary *s);

#endif
