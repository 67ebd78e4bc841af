/*
 * libFuzzer target for the expression language of traj-filter.  The input
 * is an expression, a newline, then a JSON record.  Any expression must
 * compile or fail with a column inside it (or one past its end); a compiled
 * one is evaluated on the record (and on `.`-less values inside it) and its
 * result must be valid msgpack.  The record's text also goes through the
 * decontamination set both ways.  Built by `make fuzz`.
 */
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fw_decontam.h"
#include "fw_expr.h"
#include "fw_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t elen = nl ? (size_t)(nl - data) : size;
	char *src = malloc(elen + 1), err[256];
	if (!src)
		return 0;
	memcpy(src, data, elen);
	src[elen] = 0;
	size_t slen = strlen(src), col = 0;
	struct fw_buf rec = {0}, out = {0};
	const char *json = nl ? (const char *)nl + 1 : "{}";
	size_t jlen = nl ? size - elen - 1 : 2, used;
	struct fw_json_err je;
	if (fw_json_to_mp(&rec, json, jlen, 1, &used, &je) != 1) {
		fw_buf_reset(&rec);
		fw_json_to_mp(&rec, "{\"a\":[1,\"x\",{\"b\":null}]}", 24, 1, &used, &je);
	}
	struct fw_mpv v = {rec.p, rec.n};
	struct fw_expr *e = fw_expr_parse(src, err, sizeof err, &col);
	if (!e) {
		if (col < 1 || col > slen + 1 || strncmp(err, "column ", 7) != 0)
			__builtin_trap();
	} else {
		fw_expr_test(e, v);
		if (fw_expr_eval_mp(e, v, &out) == 0) {
			uint64_t need;
			const char *why;
			if (fw_mp_scan(out.p, out.n, 0, &need, &why) != (ssize_t)out.n)
				__builtin_trap();
		}
		fw_expr_free(e);
	}
	struct fw_decontam *d = fw_decontam_new(3);
	if (d) {
		struct fw_decontam_hit h;
		fw_decontam_add(d, src, slen, 1);
		fw_decontam_add_record(d, v, 2);
		if (fw_decontam_check(d, src, slen, &h) && (h.start > h.end || h.end > slen))
			__builtin_trap();
		fw_decontam_check_record(d, v, &h);
		fw_decontam_free(d);
	}
	fw_buf_free(&rec);
	fw_buf_free(&out);
	free(src);
	return 0;
}
