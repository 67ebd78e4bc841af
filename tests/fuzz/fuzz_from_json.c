/*
 * libFuzzer target for the JSON parser: any bytes must parse or fail with a
 * position inside the input; whatever parses must be valid msgpack and must
 * print back to JSON that parses to the same bytes.  Also feeds the input in
 * two pieces to exercise the "need more input" path.  Built by `make fuzz`.
 */
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "fw_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fw_buf mp = {0}, js = {0}, mp2 = {0};
	struct fw_json_err e;
	size_t used, pos = 0;
	char err[256];
	const char *s = (const char *)data;
	while (pos < size) {
		fw_buf_reset(&mp);
		int rc = fw_json_to_mp(&mp, s + pos, size - pos, 1, &used, &e);
		if (rc == -1) {
			if (e.at > size - pos)
				__builtin_trap();
			break;
		}
		if (rc == 0 || rc == 2)
			break;
		uint64_t need;
		const char *why;
		if (fw_mp_scan(mp.p, mp.n, 0, &need, &why) != (ssize_t)mp.n)
			__builtin_trap();
		/* A prefix must ask for more input, never succeed differently. */
		if (used > 1) {
			size_t used2;
			fw_buf_reset(&mp2);
			int r2 = fw_json_to_mp(&mp2, s + pos, used - 1, 0, &used2, &e);
			if (r2 == 1 && used2 > used - 1)
				__builtin_trap();
		}
		fw_buf_reset(&js);
		if (fw_json_from_mp(&js, (struct fw_mpv){mp.p, mp.n}, err, sizeof err) == 0) {
			fw_buf_reset(&mp2);
			size_t u2;
			if (fw_json_to_mp(&mp2, (char *)js.p, js.n, 1, &u2, &e) != 1)
				__builtin_trap();
			/* Text printed from msgpack is canonical: printing again is stable. */
			struct fw_buf js2 = {0};
			if (fw_json_from_mp(&js2, (struct fw_mpv){mp2.p, mp2.n}, err, sizeof err) != 0 ||
			    js2.n != js.n || memcmp(js2.p, js.p, js.n) != 0)
				__builtin_trap();
			fw_buf_free(&js2);
		}
		pos += used;
	}
	fw_buf_free(&mp);
	fw_buf_free(&js);
	fw_buf_free(&mp2);
	return 0;
}
