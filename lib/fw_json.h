/*
 * fw_json.h — the JSON bridge: msgpack values to JSON text and back.
 *
 * Lossless for every type JSON has: integers keep all 64 bits (signed and
 * unsigned), strings are byte-exact, floats print in the shortest form that
 * reads back to the same double.  Types JSON lacks take a documented form
 * (flywheel-records(5)), an object with one reserved key:
 *
 *   bin              {"$bin": "BASE64"}
 *   ext              {"$ext": [TYPE, "BASE64"]}
 *   NaN, ±Infinity   {"$float": "nan" | "inf" | "-inf"}
 *   a map whose keys are not all strings, or whose only key is one of these
 *   reserved names   {"$map": [[KEY, VALUE], ...]}
 *
 * float32 values come back as float64 (same value).  A JSON integer beyond
 * the 64-bit range reads as a double.
 */
#ifndef FW_JSON_H
#define FW_JSON_H

#include <stddef.h>
#include "fw_mp.h" /* and fw_base.h: fw_utf8_valid() */
#include "fw_stream.h" /* FW_MAX_RECORD_DEFAULT */

/*
 * Appends the JSON text of v (one line, no newline) to out.  Returns 0, or
 * -1 with a message in err (a string that is not valid UTF-8, malformed
 * msgpack, out of memory).  On failure out keeps what it had before.
 */
int fw_json_from_mp(struct fw_buf *out, struct fw_mpv v, char *err, size_t errlen);

/*
 * Appends the line `rec get PATH` prints for rec, '\n' included: the JSON
 * text of the value at path (path NULL: of rec itself, as `rec json`
 * prints it), a string raw (as jq -r prints it; only with a path), or
 * "null" when the path is missing.  Returns 0, or -1 with a message in err
 * as fw_json_from_mp(); on failure out keeps what it had before.
 */
int fw_json_line(struct fw_buf *out, struct fw_mpv rec, const struct fw_path *path, char *err,
		 size_t errlen);

/* Where and why parsing failed: at is the byte offset into the input. */
struct fw_json_err {
	size_t at;
	char msg[128];
};

/* JSON nesting the parser follows.  Larger than FW_MP_MAX_DEPTH because the
 * {"$map": [[k, v]]} form takes three JSON levels for one msgpack level; the
 * msgpack produced is held to FW_MP_MAX_DEPTH. */
#define FW_JSON_MAX_DEPTH 200

/*
 * Parses one JSON value from s[0..n), skipping whitespace before it, and
 * appends its msgpack encoding to out.  at_eof says no more input follows
 * s[n-1].  Returns 1 with *used set to the bytes consumed (the value and the
 * whitespace before it); 0 when s holds only whitespace (*used = n);
 * 2 when the value is cut by the end of s and more input may complete it
 * (only when !at_eof); -1 on invalid JSON (invalid UTF-8 included) or
 * nesting beyond FW_MP_MAX_DEPTH levels, with e filled.  On anything but 1, out
 * keeps what it had before.
 */
int fw_json_to_mp(struct fw_buf *out, const char *s, size_t n, int at_eof, size_t *used,
		  struct fw_json_err *e);

/* Appends standard base64 of p[0..n) to out.  Returns 0 or -1. */
int fw_base64_encode(struct fw_buf *out, const uint8_t *p, size_t n);

/* Appends the bytes decoded from base64 text s[0..n) to out.  Returns 0, or
 * -1 when s is not base64. */
int fw_base64_decode(struct fw_buf *out, const char *s, size_t n);

/* ---- streaming reader ------------------------------------------------------ */

/* A reader of JSON values back to back in a file (JSON Lines, or values
 * split over lines and separated by any whitespace), one at a time as
 * msgpack, in memory bounded by the largest value. */
struct fw_json_reader;

/*
 * Opens path for reading ("-" or NULL: standard input, which is not closed
 * afterwards).  max_value bounds the text of one value: more than twice
 * that (and 4 KiB) without a complete value is an error; 0 means
 * FW_MAX_RECORD_DEFAULT.  Returns the reader (fw_json_reader_close()), or
 * NULL with "PATH: REASON" in err.
 */
struct fw_json_reader *fw_json_reader_open(const char *path, size_t max_value, char *err,
					   size_t errlen);

/*
 * Reads the next value.  Returns 1 with *v its msgpack encoding (valid until
 * the next call), 0 at the end of the input, or -1 when the input is not
 * JSON or cannot be read, with fw_json_reader_error() saying where and why
 * ("line L, column C: REASON"); -1 again on every later call.
 */
int fw_json_reader_next(struct fw_json_reader *r, struct fw_mpv *v);

/* Line and column (1-based) of the first byte of the last value returned.
 * Cannot fail. */
void fw_json_reader_pos(const struct fw_json_reader *r, uint64_t *line, uint64_t *col);

/* Offset in the input of the first byte of the last value returned.
 * Cannot fail. */
uint64_t fw_json_reader_offset(const struct fw_json_reader *r);

/* "<stdin>" or the path.  Cannot fail. */
const char *fw_json_reader_name(const struct fw_json_reader *r);

/* The last error, or "" when there was none.  Cannot fail. */
const char *fw_json_reader_error(const struct fw_json_reader *r);

/* Closes the file (not standard input) and frees r.  NULL does nothing. */
void fw_json_reader_close(struct fw_json_reader *r);

#endif
