/* test_report.c — JUnit XML and TAP parsing against reports written by the
 * real tools (pytest, ctest, bats, the tally sample's harness). */
#include "test.h"
#include "fw_report.h"

#define FX "tests/fixtures/reports/"

static struct fw_report *load(const char *path, enum fw_report_format f, int *n)
{
	char err[256] = "";
	struct fw_report *r = fw_report_new();
	*n = fw_report_load(r, path, f, err, sizeof err);
	if (*n < 0)
		printf("# %s: %s\n", path, err);
	return r;
}

static int outcome(const struct fw_report *r, const char *id)
{
	const struct fw_test_result *t = fw_report_find(r, id);
	return t ? (int)t->outcome : -1;
}

TEST(pytest_junit_outcomes)
{
	int n;
	struct fw_report *r = load(FX "pytest.xml", FW_REPORT_JUNIT, &n);
	CHECK_EQ_INT(n, 8);
	CHECK_EQ_INT(r->n, 8);
	CHECK_EQ_INT(outcome(r, "test_mix::test_pass"), FW_PASS);
	CHECK_EQ_INT(outcome(r, "test_mix::test_fail"), FW_FAIL);
	CHECK_EQ_INT(outcome(r, "test_mix::test_skip"), FW_SKIP);
	CHECK_EQ_INT(outcome(r, "test_mix::test_xfail"), FW_XFAIL);
	CHECK_EQ_INT(outcome(r, "test_mix::test_error"), FW_ERROR);
	CHECK_EQ_INT(outcome(r, "test_mix::test_param[1]"), FW_PASS);
	CHECK_EQ_INT(outcome(r, "test_mix::test_param[2]"), FW_FAIL);
	CHECK_EQ_INT(outcome(r, "test_mix.TestGroup::test_method"), FW_PASS);
	CHECK(fw_report_find(r, "test_mix::test_nothing") == NULL);
	const struct fw_test_result *t = fw_report_find(r, "test_mix::test_fail");
	CHECK(t && t->message && strcmp(t->message, "AssertionError: assert 'a & b' == '<b>'") == 0);
	t = fw_report_find(r, "test_mix::test_error");
	CHECK(t && t->message && strstr(t->message, "\"RuntimeError: fixture exploded\""));
	CHECK_EQ_INT(fw_report_count(r, FW_PASS), 3);
	CHECK_EQ_INT(fw_report_count(r, FW_FAIL), 2);
	/* failing: failed, erred or absent; a skip or xfail is not a failure */
	CHECK(fw_report_failing(r, "test_mix::test_fail"));
	CHECK(fw_report_failing(r, "test_mix::test_error"));
	CHECK(fw_report_failing(r, "test_mix::test_nothing"));
	CHECK(!fw_report_failing(r, "test_mix::test_pass"));
	CHECK(!fw_report_failing(r, "test_mix::test_skip"));
	CHECK(!fw_report_failing(r, "test_mix::test_xfail"));
	CHECK(fw_report_is(r, "test_mix::test_xfail", FW_XFAIL));
	CHECK(!fw_report_is(r, "test_mix::test_xfail", FW_PASS));
	CHECK(!fw_report_is(r, "test_mix::test_nothing", FW_FAIL));
	fw_report_free(r);
}

TEST(ctest_junit_status_and_names)
{
	int n;
	struct fw_report *r = load(FX "ctest.xml", FW_REPORT_JUNIT, &n);
	CHECK_EQ_INT(n, 4);
	/* ctest repeats the name as classname: the id is the name alone */
	CHECK_EQ_INT(outcome(r, "passes"), FW_PASS);
	CHECK_EQ_INT(outcome(r, "fails"), FW_FAIL);
	CHECK_EQ_INT(outcome(r, "skipped"), FW_SKIP);
	CHECK_EQ_INT(outcome(r, "disabled_one"), FW_SKIP);
	fw_report_free(r);
}

TEST(bats_junit_entities_in_names)
{
	int n;
	struct fw_report *r = load(FX "bats.xml", FW_REPORT_JUNIT, &n);
	CHECK_EQ_INT(n, 3);
	CHECK_EQ_INT(outcome(r, "t.bats::addition works"), FW_PASS);
	CHECK_EQ_INT(outcome(r, "t.bats::string <compare> & fails"), FW_FAIL);
	CHECK_EQ_INT(outcome(r, "t.bats::skipped for now"), FW_SKIP);
	fw_report_free(r);
}

TEST(bats_tap_without_dashes)
{
	int n;
	struct fw_report *r = load(FX "bats.tap", FW_REPORT_TAP, &n);
	CHECK_EQ_INT(n, 3);
	CHECK_EQ_INT(r->planned, 3);
	CHECK_EQ_INT(outcome(r, "addition works"), FW_PASS);
	CHECK_EQ_INT(outcome(r, "string <compare> & fails"), FW_FAIL);
	CHECK_EQ_INT(outcome(r, "skipped for now"), FW_SKIP);
	const struct fw_test_result *t = fw_report_find(r, "skipped for now");
	CHECK(t && t->message && strcmp(t->message, "needs network") == 0);
	fw_report_free(r);
}

TEST(tally_harness_tap)
{
	int n;
	struct fw_report *r = load(FX "tally.tap", FW_REPORT_TAP, &n);
	CHECK_EQ_INT(n, 32);
	CHECK_EQ_INT(fw_report_count(r, FW_PASS), 32);
	CHECK_EQ_INT(outcome(r, "gcd_handles_signs"), FW_PASS);
	fw_report_free(r);
}

TEST(tap_directives_subtests_and_bail_out)
{
	int n;
	struct fw_report *r = load(FX "edge.tap", FW_REPORT_TAP, &n);
	CHECK_EQ_INT(n, 6);
	CHECK_EQ_INT(r->planned, 7);
	CHECK(r->bailed);
	CHECK_EQ_INT(outcome(r, "parses the header"), FW_PASS);
	CHECK_EQ_INT(outcome(r, "rejects bad input"), FW_FAIL);
	CHECK_EQ_INT(outcome(r, "optional feature"), FW_SKIP);
	CHECK_EQ_INT(outcome(r, "known rounding bug"), FW_XFAIL);
	CHECK_EQ_INT(outcome(r, "fixed early"), FW_PASS);
	CHECK_EQ_INT(outcome(r, "6"), FW_PASS);
	CHECK(fw_report_find(r, "inner") == NULL);
	fw_report_free(r);
}

TEST(truncated_junit_is_an_error_but_keeps_earlier_cases)
{
	int n;
	struct fw_report *r = load(FX "truncated.xml", FW_REPORT_JUNIT, &n);
	CHECK_EQ_INT(n, -1);
	CHECK_EQ_INT(outcome(r, "m::a"), FW_PASS);
	fw_report_free(r);
}

TEST(junit_rejects_non_junit_and_accepts_empty_suite)
{
	char err[128] = "";
	struct fw_report *r = fw_report_new();
	const char *html = "<html><body>hi</body></html>";
	CHECK_EQ_INT(fw_report_parse_junit(r, html, strlen(html), err, sizeof err), -1);
	CHECK(strstr(err, "not a junit report") != NULL);
	const char *empty = "<?xml version='1.0'?><!-- none --><testsuite name='x' tests='0'/>";
	CHECK_EQ_INT(fw_report_parse_junit(r, empty, strlen(empty), err, sizeof err), 0);
	CHECK_EQ_INT(r->n, 0);
	fw_report_free(r);
}

TEST(junit_duplicates_keep_the_worse_outcome_and_cdata_is_skipped)
{
	char err[128] = "";
	struct fw_report *r = fw_report_new();
	const char *x =
		"<testsuites><testsuite>"
		"<testcase classname='c' name='t'/>"
		"<testcase classname='c' name='t'><failure message='m'><![CDATA[<testcase name='fake'/>]]></failure></testcase>"
		"<testcase classname='c' name='u&#233;'/>"
		"</testsuite></testsuites>";
	CHECK_EQ_INT(fw_report_parse_junit(r, x, strlen(x), err, sizeof err), 3);
	CHECK_EQ_INT(r->n, 2);
	CHECK_EQ_INT(outcome(r, "c::t"), FW_FAIL);
	CHECK_EQ_INT(outcome(r, "c::u\xc3\xa9"), FW_PASS);
	CHECK(fw_report_find(r, "fake") == NULL);
	fw_report_free(r);
}

TEST(junit_attribute_without_a_value_and_times)
{
	char err[128] = "";
	struct fw_report *r = fw_report_new();
	/* found by fuzzing: `time` with no value */
	const char *x = "<testsuite><testcase name='a' time/><testcase name='b' time='1.5'/></testsuite>";
	CHECK_EQ_INT(fw_report_parse_junit(r, x, strlen(x), err, sizeof err), 2);
	const struct fw_test_result *t = fw_report_find(r, "b");
	CHECK(t && t->time == 1.5);
	t = fw_report_find(r, "a");
	CHECK(t && t->time == 0 && t->outcome == FW_PASS);
	fw_report_free(r);
}

TEST(missing_file_is_an_error)
{
	char err[128] = "";
	struct fw_report *r = fw_report_new();
	CHECK_EQ_INT(fw_report_load(r, FX "nope.xml", FW_REPORT_JUNIT, err, sizeof err), -1);
	CHECK(strstr(err, "nope.xml") != NULL);
	fw_report_free(r);
	fw_report_free(NULL);
}

TEST(junit_counts_its_documents)
{
	/* a forged report written beside the runner's own is a second root */
	static const char two[] = "<?xml version=\"1.0\"?><testsuites><testsuite>"
				  "<testcase classname=\"t\" name=\"a\"/></testsuite></testsuites>\n"
				  "<?xml version=\"1.0\"?><testsuite><testcase classname=\"t\" "
				  "name=\"a\"><failure/></testcase></testsuite>";
	struct fw_report *r = fw_report_new();
	char err[128];
	CHECK_EQ_INT(fw_report_parse_junit(r, two, sizeof two - 1, err, sizeof err), 2);
	CHECK_EQ_INT(r->docs, 2);
	fw_report_reset(r);
	CHECK_EQ_INT(r->docs, 0);
	int n;
	fw_report_free(r);
	r = load(FX "pytest.xml", FW_REPORT_JUNIT, &n);
	CHECK_EQ_INT(r->docs, 1);
	fw_report_free(r);
}

static int summary(const char *text, struct fw_summary *s)
{
	return fw_summary_find(text, strlen(text), s);
}

TEST(summary_lines_of_pytest_and_the_drills)
{
	struct fw_summary s;
	CHECK_EQ_INT(summary("....F.\n=== FAILURES ===\nE assert 1 == 2\n"
			     "FAILED tests/test_units.py::test_percent - assert\n"
			     "1 failed, 63 passed in 0.52s\n", &s), 1);
	CHECK_EQ_INT(s.failed, 1);
	CHECK_EQ_INT(s.passed, 63);
	CHECK_EQ_INT(s.errors, 0);
	CHECK_EQ_INT(summary("===== 2 passed, 1 skipped, 1 xfailed, 1 xpassed, 3 warnings, "
			     "2 errors in 1.20s (0:00:01) =====\n\n", &s), 1);
	CHECK_EQ_INT(s.passed, 2);
	CHECK_EQ_INT(s.skipped, 1);
	CHECK_EQ_INT(s.xfailed, 1);
	CHECK_EQ_INT(s.xpassed, 1);
	CHECK_EQ_INT(s.errors, 2);
	/* the last count line counts: a forged one printed earlier does not */
	CHECK_EQ_INT(summary("64 passed in 0.1s\nFAIL percent: bad\n63 passed, 1 failed\n", &s), 1);
	CHECK_EQ_INT(s.passed, 63);
	CHECK_EQ_INT(s.failed, 1);
	CHECK_EQ_INT(summary("1 error\r\n", &s), 1);
	CHECK_EQ_INT(s.errors, 1);
	/* lines that only look like counts */
	CHECK_EQ_INT(summary("tests passed\n3 passed tests\n2 apples, 1 passed\n", &s), 0);
	CHECK_EQ_INT(summary("", &s), 0);
	CHECK_EQ_INT(summary("1 passed,2 failed\n1 passed in soon\n", &s), 0);
}

TEST_MAIN()
