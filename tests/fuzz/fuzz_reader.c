/*
 * libFuzzer target for the record reader: any bytes, plain or zstd, must
 * give records or a clean error — no crash, no hang, no allocation beyond
 * the record limit.  Every record handed out must also survive the JSON
 * bridge and path lookups.  Built and run by `make fuzz`.
 */
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "fw_json.h"
#include "fw_stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fw_reader_opts o = {.max_record = 1u << 20};
	struct fw_reader *r = fw_reader_memopen(data, size, "fuzz", &o);
	struct fw_rec rec;
	struct fw_buf js = {0}, mp = {0}, set = {0};
	char err[256];
	static struct fw_path *path;
	if (!path)
		path = fw_path_parse(".turns[-1].text", err, sizeof err);
	int rc;
	while ((rc = fw_reader_next(r, &rec)) != 0) {
		if (rc < 0) {
			if (fw_reader_recoverable(r))
				continue;
			break;
		}
		struct fw_mpv v;
		fw_path_get(path, rec.v, &v);
		fw_buf_reset(&js);
		if (fw_json_from_mp(&js, rec.v, err, sizeof err) == 0) {
			/* JSON written must read back. */
			size_t used;
			struct fw_json_err e;
			fw_buf_reset(&mp);
			if (fw_json_to_mp(&mp, (char *)js.p, js.n, 1, &used, &e) != 1)
				__builtin_trap();
		}
		struct fw_field f = {"k", 1, {(const uint8_t *)"\xc0", 1}};
		fw_buf_reset(&set);
		fw_rec_set(&set, rec.v, &f, 1);
	}
	fw_reader_close(r);
	fw_buf_free(&js);
	fw_buf_free(&mp);
	fw_buf_free(&set);
	return 0;
}
