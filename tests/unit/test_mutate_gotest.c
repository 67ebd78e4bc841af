/* Unit tests for the `go test -json` report format (fw_report.h), which
 * task-mutate and grade read with --report gotest / report: gotest. */
#include "test.h"

#include <unistd.h>

#include "fw_report.h"

/* Real output of `go test -vet=off -json ./...` (Go 1.19) over four
 * packages: ok (pass, fail, skip, subtests), crash (a test panics, so the
 * next never runs), broken (does not compile: only Go's plain-text line),
 * exits (a test calls os.Exit, so it never ends).  The Time fields are
 * dropped to keep the lines short; the parser does not read them. */
static const char go_json[] =
	"FAIL\texample.org/gj/broken [build failed]\n"
	"{\"Action\":\"run\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestBefore\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestBefore\",\"Output\":\"=== RUN   TestBefore\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestBefore\",\"Output\":\"--- PASS: TestBefore (0.00s)\\n\"}\n"
	"{\"Action\":\"pass\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestBefore\",\"Elapsed\":0}\n"
	"{\"Action\":\"run\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"=== RUN   TestPanics\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"--- FAIL: TestPanics (0.00s)\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"panic: assignment to entry in nil map [recovered]\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"\\tpanic: assignment to entry in nil map\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"goroutine 19 [running]:\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"testing.tRunner.func1.2({0x508ec0, 0x551cc0})\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"\\t/usr/lib/go-1.19/src/testing/testing.go:1396 +0x24e\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"testing.tRunner.func1()\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"\\t/usr/lib/go-1.19/src/testing/testing.go:1399 +0x39f\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"panic({0x508ec0, 0x551cc0})\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"\\t/usr/lib/go-1.19/src/runtime/panic.go:884 +0x212\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"example.org/gj/crash.TestPanics(0xc000096680?)\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"\\t/tmp/room-gj/crash/crash_test.go:6 +0x2e\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"testing.tRunner(0xc0000969c0, 0x52f310)\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"\\t/usr/lib/go-1.19/src/testing/testing.go:1446 +0x10b\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"created by testing.(*T).Run\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Output\":\"\\t/usr/lib/go-1.19/src/testing/testing.go:1493 +0x35f\\n\"}\n"
	"{\"Action\":\"fail\",\"Package\":\"example.org/gj/crash\",\"Test\":\"TestPanics\",\"Elapsed\":0}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/crash\",\"Output\":\"FAIL\\texample.org/gj/crash\\t0.041s\\n\"}\n"
	"{\"Action\":\"fail\",\"Package\":\"example.org/gj/crash\",\"Elapsed\":0.041}\n"
	"{\"Action\":\"run\",\"Package\":\"example.org/gj/exits\",\"Test\":\"TestFirst\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/exits\",\"Test\":\"TestFirst\",\"Output\":\"=== RUN   TestFirst\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/exits\",\"Test\":\"TestFirst\",\"Output\":\"--- PASS: TestFirst (0.00s)\\n\"}\n"
	"{\"Action\":\"pass\",\"Package\":\"example.org/gj/exits\",\"Test\":\"TestFirst\",\"Elapsed\":0}\n"
	"{\"Action\":\"run\",\"Package\":\"example.org/gj/exits\",\"Test\":\"TestExits\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/exits\",\"Test\":\"TestExits\",\"Output\":\"=== RUN   TestExits\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/exits\",\"Test\":\"TestExits\",\"Output\":\"    exits_test.go:9: leaving\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/exits\",\"Output\":\"FAIL\\texample.org/gj/exits\\t0.032s\\n\"}\n"
	"{\"Action\":\"fail\",\"Package\":\"example.org/gj/exits\",\"Elapsed\":0.035}\n"
	"{\"Action\":\"run\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestPass\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestPass\",\"Output\":\"=== RUN   TestPass\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestPass\",\"Output\":\"--- PASS: TestPass (0.00s)\\n\"}\n"
	"{\"Action\":\"pass\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestPass\",\"Elapsed\":0}\n"
	"{\"Action\":\"run\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestFail\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestFail\",\"Output\":\"=== RUN   TestFail\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestFail\",\"Output\":\"    ok_test.go:6: want 2, got 3\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestFail\",\"Output\":\"--- FAIL: TestFail (0.00s)\\n\"}\n"
	"{\"Action\":\"fail\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestFail\",\"Elapsed\":0}\n"
	"{\"Action\":\"run\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSkip\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSkip\",\"Output\":\"=== RUN   TestSkip\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSkip\",\"Output\":\"    ok_test.go:7: not on this machine\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSkip\",\"Output\":\"--- SKIP: TestSkip (0.00s)\\n\"}\n"
	"{\"Action\":\"skip\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSkip\",\"Elapsed\":0}\n"
	"{\"Action\":\"run\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSub\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSub\",\"Output\":\"=== RUN   TestSub\\n\"}\n"
	"{\"Action\":\"run\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSub/a\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSub/a\",\"Output\":\"=== RUN   TestSub/a\\n\"}\n"
	"{\"Action\":\"run\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSub/b\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSub/b\",\"Output\":\"=== RUN   TestSub/b\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSub/b\",\"Output\":\"    ok_test.go:10: b broke\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSub\",\"Output\":\"--- FAIL: TestSub (0.00s)\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSub/a\",\"Output\":\"    --- PASS: TestSub/a (0.00s)\\n\"}\n"
	"{\"Action\":\"pass\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSub/a\",\"Elapsed\":0}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSub/b\",\"Output\":\"    --- FAIL: TestSub/b (0.00s)\\n\"}\n"
	"{\"Action\":\"fail\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSub/b\",\"Elapsed\":0}\n"
	"{\"Action\":\"fail\",\"Package\":\"example.org/gj/ok\",\"Test\":\"TestSub\",\"Elapsed\":0}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Output\":\"FAIL\\n\"}\n"
	"{\"Action\":\"output\",\"Package\":\"example.org/gj/ok\",\"Output\":\"FAIL\\texample.org/gj/ok\\t0.021s\\n\"}\n"
	"{\"Action\":\"fail\",\"Package\":\"example.org/gj/ok\",\"Elapsed\":0.021}\n";

static enum fw_outcome outcome(const struct fw_report *r, const char *id)
{
	const struct fw_test_result *t = fw_report_find(r, id);
	return t ? t->outcome : (enum fw_outcome)-1;
}

TEST(go_test_json_gives_each_test_and_subtest_its_outcome)
{
	struct fw_report *r = fw_report_new();
	char err[256] = "";

	CHECK_EQ_INT(fw_report_parse_gotest(r, go_json, sizeof go_json - 1, err, sizeof err), 10);
	CHECK_EQ_INT(r->n, 10);
	CHECK_EQ_INT(outcome(r, "example.org/gj/ok::TestPass"), FW_PASS);
	CHECK_EQ_INT(outcome(r, "example.org/gj/ok::TestFail"), FW_FAIL);
	CHECK_EQ_INT(outcome(r, "example.org/gj/ok::TestSkip"), FW_SKIP);
	CHECK_EQ_INT(outcome(r, "example.org/gj/ok::TestSub"), FW_FAIL);
	CHECK_EQ_INT(outcome(r, "example.org/gj/ok::TestSub/a"), FW_PASS);
	CHECK_EQ_INT(outcome(r, "example.org/gj/ok::TestSub/b"), FW_FAIL);
	CHECK_EQ_INT(outcome(r, "example.org/gj/crash::TestBefore"), FW_PASS);
	CHECK_EQ_INT(outcome(r, "example.org/gj/crash::TestPanics"), FW_FAIL);
	CHECK_EQ_INT(outcome(r, "example.org/gj/exits::TestFirst"), FW_PASS);
	/* started, never ended: its package's test binary exited under it */
	CHECK_EQ_INT(outcome(r, "example.org/gj/exits::TestExits"), FW_ERROR);
	/* a test after a panic never ran, and a package that does not build
	 * has no tests: both are simply absent */
	CHECK(fw_report_find(r, "example.org/gj/crash::TestNeverRuns") == NULL);
	CHECK(fw_report_find(r, "example.org/gj/broken::TestX") == NULL);
	CHECK_EQ_INT(fw_report_count(r, FW_PASS), 4);
	CHECK_EQ_INT(r->planned, -1);
	fw_report_free(r);
}

TEST(go_test_json_keeps_the_first_line_a_failing_test_printed)
{
	struct fw_report *r = fw_report_new();
	char err[256];

	fw_report_parse_gotest(r, go_json, sizeof go_json - 1, err, sizeof err);
	CHECK_STR(fw_report_find(r, "example.org/gj/ok::TestFail")->message,
		  "ok_test.go:6: want 2, got 3");
	CHECK_STR(fw_report_find(r, "example.org/gj/ok::TestSub/b")->message,
		  "ok_test.go:10: b broke");
	CHECK_STR(fw_report_find(r, "example.org/gj/exits::TestExits")->message,
		  "exits_test.go:9: leaving");
	CHECK(fw_report_find(r, "example.org/gj/ok::TestPass")->message == NULL);
	fw_report_free(r);
}

TEST(go_test_json_ids_are_sorted_for_lookup)
{
	struct fw_report *r = fw_report_new();
	char err[256];

	fw_report_parse_gotest(r, go_json, sizeof go_json - 1, err, sizeof err);
	for (size_t i = 1; i < r->n; i++)
		CHECK(strcmp(r->tests[i - 1].id, r->tests[i].id) < 0);
	fw_report_free(r);
}

TEST(go_test_json_output_cut_short_ends_running_tests_as_errors)
{
	static const char cut[] =
		"{\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"TestA\"}\n"
		"{\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"TestA\",\"Elapsed\":0.25}\n"
		"{\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"TestB\"}\n";
	struct fw_report *r = fw_report_new();
	char err[256];

	CHECK_EQ_INT(fw_report_parse_gotest(r, cut, sizeof cut - 1, err, sizeof err), 2);
	CHECK_EQ_INT(outcome(r, "p::TestA"), FW_PASS);
	CHECK_NEAR(fw_report_find(r, "p::TestA")->time, 0.25, 1e-12);
	CHECK_EQ_INT(outcome(r, "p::TestB"), FW_ERROR);
	CHECK_STR(fw_report_find(r, "p::TestB")->message, "the test did not finish");
	fw_report_free(r);
}

TEST(go_test_json_bad_event_is_an_error_with_its_line_and_keeps_what_came_before)
{
	static const char bad[] =
		"# a note Go prints\n"
		"{\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"TestA\"}\n"
		"{\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"TestA\"}\n"
		"{\"Action\":\"run\",\"Pack\n";
	static const char noaction[] = "{\"Package\":\"p\"}\n";
	struct fw_report *r = fw_report_new();
	char err[256] = "";

	CHECK_EQ_INT(fw_report_parse_gotest(r, bad, sizeof bad - 1, err, sizeof err), -1);
	CHECK(strncmp(err, "line 4: not a go test -json event", 33) == 0);
	CHECK_EQ_INT(outcome(r, "p::TestA"), FW_PASS);
	fw_report_reset(r);
	CHECK_EQ_INT(fw_report_parse_gotest(r, noaction, sizeof noaction - 1, err, sizeof err), -1);
	CHECK_STR(err, "line 1: not a go test -json event");
	fw_report_free(r);
}

TEST(go_test_json_of_nothing_is_no_tests)
{
	struct fw_report *r = fw_report_new();
	char err[256];

	CHECK_EQ_INT(fw_report_parse_gotest(r, "", 0, err, sizeof err), 0);
	CHECK_EQ_INT(fw_report_parse_gotest(r, "FAIL\tp [build failed]\n", 22, err, sizeof err), 0);
	CHECK_EQ_INT(r->n, 0);
	fw_report_free(r);
}

TEST(report_format_names_round_trip)
{
	CHECK_STR(fw_report_format_name(FW_REPORT_JUNIT), "junit");
	CHECK_STR(fw_report_format_name(FW_REPORT_TAP), "tap");
	CHECK_STR(fw_report_format_name(FW_REPORT_GOTEST), "gotest");
	CHECK_EQ_INT(fw_report_format_parse("junit"), FW_REPORT_JUNIT);
	CHECK_EQ_INT(fw_report_format_parse("tap"), FW_REPORT_TAP);
	CHECK_EQ_INT(fw_report_format_parse("gotest"), FW_REPORT_GOTEST);
	CHECK_EQ_INT(fw_report_format_parse("json"), -1);
	CHECK_EQ_INT(fw_report_format_parse(""), -1);
}

TEST(a_gotest_file_loads_like_a_junit_one)
{
	char path[] = "/tmp/fw-gotest-XXXXXX", err[256] = "";
	int fd = mkstemp(path);
	struct fw_report *r = fw_report_new();

	CHECK(fd >= 0);
	CHECK_EQ_INT(write(fd, go_json, sizeof go_json - 1), (long long)(sizeof go_json - 1));
	close(fd);
	CHECK_EQ_INT(fw_report_load(r, path, FW_REPORT_GOTEST, err, sizeof err), 10);
	unlink(path);
	fw_report_free(r);
}

TEST_MAIN()
