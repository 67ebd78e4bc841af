/*
 * fw_mp.h — zero-copy msgpack views, byte buffers, record paths and
 * record editing.
 *
 * A record is one msgpack map.  Readers hand out records as views into a
 * buffer they own (struct fw_mpv); nothing here allocates per value.  A view
 * handed out by fw_reader_next() has been validated by fw_mp_scan(), so the
 * accessors below may trust its structure (they still never read past the
 * view's end).
 *
 * Writing uses msgpack-c's packer on top of struct fw_buf
 * (fw_buf_packer()), and fw_rec_set() builds an output record from an input
 * record plus replaced or added fields, copying untouched fields as raw bytes.
 *
 * fw_hash64() (fw_base.h) is the hash sharding and splitting use on the
 * record id, so its values are part of the record format.
 */
#ifndef FW_MP_H
#define FW_MP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <msgpack.h>

#include "fw_base.h"

/* ---- byte buffer ------------------------------------------------------ */

/* A growable byte buffer.  Zero-initialise it ({0}); fw_buf_release() frees
 * its memory.  p is NULL until the first append.
 *
 * Failure is sticky: once memory runs out, failed is set and every later
 * append (and msgpack_pack_*() through fw_buf_packer()) is refused until
 * fw_buf_reset() or fw_buf_release(), so a record packed field by field
 * never holds a hole where one field was lost.  Pack the whole record,
 * then check once with fw_buf_packed(). */
struct fw_buf {
	uint8_t *p;
	size_t n;   /* bytes used */
	size_t cap; /* bytes allocated */
	int failed; /* an append ran out of memory */
};

/* Makes room for at least extra more bytes.  Returns 0, or -1 (ENOMEM). */
int fw_buf_reserve(struct fw_buf *b, size_t extra);

/* Appends n bytes from p.  Returns 0, or -1 (ENOMEM). */
int fw_buf_append(struct fw_buf *b, const void *p, size_t n);

/* Appends a NUL-terminated string without its NUL.  Returns 0 or -1. */
int fw_buf_puts(struct fw_buf *b, const char *s);

/* Appends printf-formatted text.  Returns 0 or -1. */
int fw_buf_printf(struct fw_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Empties the buffer, keeping its memory; clears failed. */
void fw_buf_reset(struct fw_buf *b);

/* After packing into b from byte start on: 0 when every append since the
 * buffer was last reset succeeded; else b is cut back to start, failed
 * is cleared and -1 returned (errno ENOMEM), so the caller can report the
 * record as lost and go on with the next. */
int fw_buf_packed(struct fw_buf *b, size_t start);

/* Releases the memory (the buffer's contents, not the struct, which the
 * caller owns); the buffer is empty and reusable afterwards.
 * fw_buf_release(NULL) does nothing. */
void fw_buf_release(struct fw_buf *b);

/* The older name of fw_buf_release(), kept for its many callers. */
static inline void fw_buf_free(struct fw_buf *b)
{
	fw_buf_release(b);
}

/* Initialises a msgpack-c packer that appends to b.  Allocation failures
 * inside the packer surface as a non-zero return of msgpack_pack_*(). */
void fw_buf_packer(msgpack_packer *pk, struct fw_buf *b);

/* ---- views ---------------------------------------------------------------- */

/* One complete encoded msgpack value: n bytes at p.  Does not own p. */
struct fw_mpv {
	const uint8_t *p;
	size_t n;
};

enum fw_mp_type {
	FW_MP_INVALID = 0,
	FW_MP_NIL,
	FW_MP_BOOL,
	FW_MP_UINT, /* a non-negative integer */
	FW_MP_INT,  /* a negative integer */
	FW_MP_FLOAT,
	FW_MP_STR,
	FW_MP_BIN,
	FW_MP_ARRAY,
	FW_MP_MAP,
	FW_MP_EXT,
};

/* Default nesting limit of fw_mp_scan() (arrays and maps inside a record). */
#define FW_MP_MAX_DEPTH 64

/*
 * Validates the msgpack value starting at p, of which avail bytes are
 * available.  Declared lengths are never trusted: a string, array or map
 * whose declared size exceeds the bytes that follow is reported incomplete,
 * never allocated.  Nesting deeper than max_depth is an error of its own.
 *
 * Returns the value's length in bytes (> 0) when it is complete and valid;
 * 0 when more bytes are needed, with *need set to a lower bound of the total
 * length (so a caller can refuse a value larger than its limit before
 * reading it); -1 when the bytes are not msgpack, with *why set to a static
 * message.  Cannot fail otherwise.
 */
ssize_t fw_mp_scan(const uint8_t *p, size_t avail, int max_depth, uint64_t *need,
		   const char **why);

/* Type of the value v.  FW_MP_INVALID for an empty or malformed view. */
enum fw_mp_type fw_mp_type(struct fw_mpv v);

/* Name of a type for messages: "nil", "bool", "int", "float", "str", "bin",
 * "array", "map", "ext", "invalid". */
const char *fw_mp_type_name(enum fw_mp_type t);

/* Length of the encoded value at p (no more than end - p bytes), or 0 when it
 * does not fit.  For values already validated by fw_mp_scan(). */
size_t fw_mp_skip(const uint8_t *p, const uint8_t *end);

/* View of the first value at p, bounded by end; {NULL, 0} when malformed. */
struct fw_mpv fw_mp_view(const uint8_t *p, const uint8_t *end);

/* Typed getters.  Each returns 0 and fills *out, or -1 when v has another
 * type (or does not fit: fw_mp_int on a uint above INT64_MAX).  Strings and
 * binaries point into v: not NUL-terminated, valid as long as v. */
int fw_mp_bool(struct fw_mpv v, int *out);
int fw_mp_int(struct fw_mpv v, int64_t *out);    /* int or uint */
int fw_mp_uint(struct fw_mpv v, uint64_t *out);  /* non-negative ints */
int fw_mp_double(struct fw_mpv v, double *out);  /* float or int */
int fw_mp_str(struct fw_mpv v, const char **s, size_t *n);
int fw_mp_bin(struct fw_mpv v, const uint8_t **s, size_t *n);
/* Ext: type code and payload. */
int fw_mp_ext(struct fw_mpv v, int8_t *type, const uint8_t **s, size_t *n);

/* Iteration over an array (one value per step) or a map (key then value,
 * two steps per pair). */
struct fw_mp_iter {
	const uint8_t *p, *end;
	uint64_t left; /* values left */
};

/* Starts iterating v.  Returns the number of elements (array) or pairs
 * (map), or -1 when v is neither. */
int64_t fw_mp_iter_init(struct fw_mp_iter *it, struct fw_mpv v);

/* Next value.  Returns 1 and fills *out, 0 at the end, -1 if malformed. */
int fw_mp_iter_next(struct fw_mp_iter *it, struct fw_mpv *out);

/* Reads an array of numbers (float or int) into a new array of doubles
 * (*out, caller frees with free(); NULL on failure).  Returns the count, or
 * -1 when v is not an array of numbers or memory runs out. */
long fw_mp_doubles(struct fw_mpv v, double **out);

/* Looks up a string key in map m.  Returns 1 and fills *val, 0 when absent,
 * -1 when m is not a map. */
int fw_mp_map_get(struct fw_mpv m, const char *key, size_t keylen, struct fw_mpv *val);

/* Same, key NUL-terminated. */
int fw_mp_get(struct fw_mpv m, const char *key, struct fw_mpv *val);

/* Equality of two strings: 1 when v is a str equal to s[0..n). */
int fw_mp_str_eq(struct fw_mpv v, const char *s, size_t n);

/* 1 when the record rec (a map) has the string kind as its `kind`.
 * Cannot fail. */
int fw_mp_kind_is(struct fw_mpv rec, const char *kind);

/* ---- paths --------------------------------------------------------------- */

/*
 * A compiled path into a record: `.` (the record), `.key`, `.a.b`,
 * `.turns[3]`, `.feedback[-1]` (negative indexes count from the end),
 * `."key with spaces"` or `.["key"]`.  The leading dot may be omitted.
 */
struct fw_path;

/* Compiles s.  Returns a path the caller frees with fw_path_free(), or NULL
 * with a message (naming the column) in err. */
struct fw_path *fw_path_parse(const char *s, char *err, size_t errlen);

/* Frees p; fw_path_free(NULL) does nothing. */
void fw_path_free(struct fw_path *p);

/* The source text of p, as given to fw_path_parse(). */
const char *fw_path_str(const struct fw_path *p);

/* Follows p from v.  Returns 1 and fills *out when the path exists, 0 when
 * some step is missing (absent key, index out of range, or a step into a
 * value that is not a container). */
int fw_path_get(const struct fw_path *p, struct fw_mpv v, struct fw_mpv *out);

/* Typed lookups: 1 found (and *out set), 0 missing, -1 present with another
 * type, with err set to "'.PATH' is TYPE, not WANT". */
int fw_path_str_get(const struct fw_path *p, struct fw_mpv v, const char **s,
		    size_t *n, char *err, size_t errlen);
int fw_path_int_get(const struct fw_path *p, struct fw_mpv v, int64_t *out,
		    char *err, size_t errlen);
int fw_path_double_get(const struct fw_path *p, struct fw_mpv v, double *out,
		       char *err, size_t errlen);

/* ---- editing --------------------------------------------------------------- */

/* A field to set on a record: key and its encoded value.  A value with
 * p == NULL deletes the key. */
struct fw_field {
	const char *key;
	size_t keylen;
	struct fw_mpv val;
};

/*
 * Appends to out the map rec with fields f[0..nf) set: a key already in rec
 * keeps its place and takes the new value (or is dropped), a new key is
 * appended in the order given.  Every other pair is copied as raw bytes.
 * Returns 0, or -1 when rec is not a map (errno EINVAL) or memory runs out.
 */
int fw_rec_set(struct fw_buf *out, struct fw_mpv rec, const struct fw_field *f, size_t nf);

/* ---- string packers ------------------------------------------------------- */

/* Packs the n bytes at s as a msgpack str.  Returns 0, or non-zero when the
 * packer failed (out of memory). */
int fw_pack_str(msgpack_packer *pk, const char *s, size_t n);

/* Packs the NUL-terminated s as a msgpack str.  Returns as fw_pack_str(). */
int fw_pack_cstr(msgpack_packer *pk, const char *s);

/* Packs the n bytes at s as record text: a msgpack str in which each byte
 * that is not part of valid UTF-8 becomes U+FFFD (as fw_utf8_fix() does),
 * so the record stays text that JSON can hold.  Returns as fw_pack_str(). */
int fw_pack_text(msgpack_packer *pk, const char *s, size_t n);

/* Packs the strings of l as a msgpack array of str.  Returns as
 * fw_pack_str(). */
int fw_pack_strlist(msgpack_packer *pk, const struct fw_strlist *l);

#endif
