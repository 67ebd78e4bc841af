/*
 * fuzz_ingest_detect.c — libFuzzer target for fb-ingest's input side:
 * format detection on arbitrary bytes, then the converter of whatever
 * format was detected (or of every format, for a JSON value that parses:
 * document converters, Claude Code and Codex sessions, OpenTelemetry
 * traces), then content ids and redaction of the result.  Nothing may crash, leak
 * or read out of bounds; a converter either builds a traj or names a
 * reason.  Build and run: `make fuzz` (FUZZ_TIME=seconds), seeds in
 * tests/fuzz/seeds/fuzz_ingest_detect/.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

static int take_otel(void *ctx, json_t *traj, const char *err)
{
	if (!traj && (!err || !err[0]))
		abort(); /* a trajectory not rebuilt says why */
	finish(traj);
	return 0;
}

static int no_bad(void *ctx, const char *file, long line, const char *why)
{
	if (line < 1 || !why[0])
		abort(); /* every bad line has a position and a reason */
	return 0;
}

static int take_orphan(void *ctx, json_t *rec)
{
	if (!json_string_value(json_object_get(rec, "trace")))
		abort();
	return 0;
}

/* The bytes as a feedback file: load, join a few keys, list orphans. */
static void feedback(const uint8_t *data, size_t size)
{
	char path[64], err[256];
	int fd = memfd_create("fb", 0);

	if (fd < 0)
		return;
	if (write(fd, data, size) == (ssize_t)size) {
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		struct fw_feedback *fb = fw_feedback_new();
		json_t *t = json_pack("{s[]}", "feedback");
		if (fb && t && fw_feedback_load(fb, path, no_bad, NULL, err, sizeof err) == 0) {
			fw_feedback_join(fb, "t1", t);
			fw_feedback_join(fb, "1", t);
			fw_feedback_orphans(fb, take_orphan, NULL);
		}
		json_decref(t);
		fw_feedback_free(fb);
	}
	close(fd);
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

	feedback(data, size);
	json_t *doc = json_loadb((const char *)data, size, JSON_ALLOW_NUL, &je);
	if (!doc)
		return 0;
	long at;
	if (json_is_array(doc)) {
		/* a Claude Code session or a Codex rollout is an array of lines;
		 * a mini-swe-agent or OpenHands file may be a bare array */
		finish(fw_ingest_claude_session(doc, err, sizeof err));
		finish(fw_ingest_codex_session(doc, &at, err, sizeof err));
		finish(fw_ingest_convert(FW_FMT_MINI_SWE_AGENT, doc, "x.traj.json", err, sizeof err));
		finish(fw_ingest_convert(FW_FMT_OPENHANDS, doc, "x.json", err, sizeof err));
		fw_ingest_otel(doc, take_otel, NULL);
	} else {
		for (int g = FW_FMT_OPENAI_CHAT; g < FW_FMT_N; g++) {
			if (g == FW_FMT_CLAUDE_CODE || g == FW_FMT_FLYWHEEL || g == FW_FMT_CODEX ||
			    g == FW_FMT_OTEL)
				continue;
			json_t *t = fw_ingest_convert((enum fw_fmt)g, doc, "x.traj", err, sizeof err);
			if (!t && !err[0])
				abort();
			finish(t);
		}
		json_t *one = json_array();
		json_array_append(one, doc);
		finish(fw_ingest_claude_session(one, err, sizeof err));
		finish(fw_ingest_codex_session(one, &at, err, sizeof err));
		fw_ingest_otel(one, take_otel, NULL);
		json_decref(one);
	}
	json_decref(doc);
	return 0;
}
