/*
 * test_rec.h — records for the C unit tests, written as JSON text.
 */
#ifndef FW_TEST_REC_H
#define FW_TEST_REC_H

#include <stdio.h>
#include <string.h>

#include "fw_json.h"
#include "fw_mp.h"

/* The msgpack record of the JSON text js, packed into b (emptied first).
 * Text that is not one JSON value gives a view of nothing, after a TAP
 * comment saying where it went wrong. */
static inline struct fw_mpv test_rec(struct fw_buf *b, const char *js)
{
	struct fw_json_err e;
	size_t used;

	b->n = 0;
	if (fw_json_to_mp(b, js, strlen(js), 1, &used, &e) != 1) {
		printf("# bad JSON at %zu: %s\n", e.at, e.msg);
		return (struct fw_mpv){ NULL, 0 };
	}
	return (struct fw_mpv){ b->p, b->n };
}

#endif
