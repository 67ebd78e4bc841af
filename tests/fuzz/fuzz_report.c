/*
 * libFuzzer target for the test-report parsers (fw_report.h): the input is
 * parsed as JUnit XML, as TAP and as `go test -json` output.  Either may fail, never crash; whatever
 * is read must be sorted, free of duplicate ids, and findable by id.
 * Seeds: tests/fuzz/seeds/fuzz_report (real pytest, ctest, bats reports).
 * Built by `make fuzz`.
 */
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fw_report.h"

static void check(const struct fw_report *r)
{
	for (size_t i = 0; i < r->n; i++) {
		if (i > 0 && strcmp(r->tests[i - 1].id, r->tests[i].id) >= 0)
			abort();
		if (fw_report_find(r, r->tests[i].id) != &r->tests[i])
			abort();
		if (r->tests[i].outcome > FW_ERROR)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	struct fw_report *r = fw_report_new();
	if (!r)
		return 0;
	fw_report_parse_junit(r, (const char *)data, size, err, sizeof err);
	check(r);
	fw_report_reset(r);
	fw_report_parse_tap(r, (const char *)data, size, err, sizeof err);
	check(r);
	fw_report_reset(r);
	fw_report_parse_gotest(r, (const char *)data, size, err, sizeof err);
	check(r);
	fw_report_free(r);
	return 0;
}
