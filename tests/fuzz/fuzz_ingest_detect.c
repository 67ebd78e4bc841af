/*
 * fuzz_ingest_detect.c — libFuzzer target for fb-ingest's input side:
 * format detection on arbitrary bytes, then the converter of whatever
 * format was detected (or of every format, for a JSON object that parses),
 * then content ids and redaction of the result.  Nothing may crash, leak
 * or read out of bounds; a converter either builds a traj or names a
 * reason.  Build and run: `make fuzz` (FUZZ_TIME=seconds), seeds in
 * tests/fuzz/seeds/fuzz_ingest_detect/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fw_ingest.h"
#include "fw_redact.h"

static struct fw_redact *rd;

static void finish(json_t *traj)
{
	if (!traj)
		return;
	if (fw_ingest_set_id(traj) == 0) {
		const char *id = json_string_value(json_object_get(traj, "id"));
		if (!id || strlen(id) != 16)
			abort();
	}
	fw_ingest_redact(traj, rd, NULL);
	json_decref(traj);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[256], err[256];
	json_error_t je;

	if (!rd && !(rd = fw_redact_new(err, sizeof err)))
		abort();
	enum fw_fmt f = fw_ingest_detect(data, size, why, sizeof why);
	if (f == FW_FMT_UNKNOWN && !why[0])
		abort(); /* an unknown format always says what was seen */

	json_t *doc = json_loadb((const char *)data, size, JSON_ALLOW_NUL, &je);
	if (!doc)
		return 0;
	if (json_is_array(doc)) {
		/* a Claude Code session is an array of events */
		finish(fw_ingest_claude_session(doc, err, sizeof err));
	} else {
		for (int g = FW_FMT_OPENAI_CHAT; g < FW_FMT_N; g++) {
			if (g == FW_FMT_CLAUDE_CODE || g == FW_FMT_FLYWHEEL)
				continue;
			json_t *t = fw_ingest_convert((enum fw_fmt)g, doc, "x.traj", err, sizeof err);
			if (!t && !err[0])
				abort();
			finish(t);
		}
		json_t *one = json_array();
		json_array_append(one, doc);
		finish(fw_ingest_claude_session(one, err, sizeof err));
		json_decref(one);
	}
	json_decref(doc);
	return 0;
}
