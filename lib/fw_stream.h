/*
 * fw_stream.h — record streams: a reader and a writer; text for standard
 * output held and written out on the writer's clock.
 *
 * A stream is msgpack maps back to back, optionally zstd-compressed.  The
 * reader detects zstd by its magic (28 b5 2f fd) at the start of the input
 * and at every record boundary, so concatenated frames and `cat a b.zst`
 * both read as one stream.  Memory is bounded by the largest record (limit
 * settable, default 64 MiB): a bigger record is an error with its position,
 * never an allocation of what a length field claims.
 *
 * Positions: a record's index counts records from 0 in its file; its offset
 * is the byte offset of its first byte in the file's decompressed content
 * (equal to the file offset for an uncompressed file).
 */
#ifndef FW_STREAM_H
#define FW_STREAM_H

#include <stdint.h>
#include <stddef.h>
#include "fw_mp.h"

#define FW_MAX_RECORD_DEFAULT (64u << 20)

/* One record as the reader hands it out.  v points into the reader's
 * buffer and stays valid until the next fw_reader_next() or
 * fw_reader_close(): copy what you keep. */
struct fw_rec {
	struct fw_mpv v;
	uint64_t index;  /* 0-based record number in this input */
	uint64_t offset; /* byte offset of the record (decompressed) */
};

struct fw_reader_opts {
	size_t max_record; /* largest record accepted in bytes; 0: default */
	int max_depth;     /* nesting limit; 0: FW_MP_MAX_DEPTH */
	int any_value;     /* accept top-level values that are not maps */
};

struct fw_reader;

/*
 * Opens path for reading; NULL or "-" reads standard input.  opts may be
 * NULL for the defaults.  Returns a reader the caller frees with
 * fw_reader_close(), or NULL with errno kept and a message in err.
 */
struct fw_reader *fw_reader_open(const char *path, const struct fw_reader_opts *opts,
				 char *err, size_t errlen);

/* Same over an open descriptor (not closed by the reader); name is used in
 * messages.  Returns NULL only when memory runs out. */
struct fw_reader *fw_reader_fdopen(int fd, const char *name, const struct fw_reader_opts *opts);

/* Same over bytes in memory (not copied: they must outlive the reader). */
struct fw_reader *fw_reader_memopen(const void *p, size_t n, const char *name,
				    const struct fw_reader_opts *opts);

/*
 * Reads the next record.  Returns 1 and fills *rec; 0 at the end of the
 * input; -1 on bad input or a read error, with fw_reader_error() telling
 * what and fw_reader_index()/fw_reader_offset() where.  After -1 the reader
 * is finished unless fw_reader_recoverable() says the bad value was skipped
 * whole (a well-formed value that is not a map), in which case the next
 * call goes on at the next plausible record: a non-empty map with string
 * keys, followed by another map, a zstd frame or the end.  The bytes
 * dropped up to there are one error, counted as one record (the message
 * says how many bytes), so text amid records costs one error, not one per
 * byte.  Input that looks like JSON ('{' or '[' at the start, after optional
 * whitespace, or a bracket and a JSON byte at a record boundary) is an error
 * after which the reader is finished: "this looks like JSON; convert it
 * with `rec from-json`".  Neither applies with opts.any_value.
 */
int fw_reader_next(struct fw_reader *r, struct fw_rec *rec);

/* Message of the last error ("" if none): lowercase, no position. */
const char *fw_reader_error(const struct fw_reader *r);

/* 1 when the last error skipped a whole value and reading may go on. */
int fw_reader_recoverable(const struct fw_reader *r);

/* Index and offset of the record being read when the last error happened
 * (or of the next record). */
uint64_t fw_reader_index(const struct fw_reader *r);
uint64_t fw_reader_offset(const struct fw_reader *r);

/* Name given at open ("-" shows as "<stdin>"). */
const char *fw_reader_name(const struct fw_reader *r);

/* Writes the last error with its place into buf (n bytes, cut to fit):
 * "NAME: record N (byte B): MESSAGE", N counted from 1. */
void fw_reader_fault(const struct fw_reader *r, char *buf, size_t n);

/* Compressed bytes consumed so far (for progress meters). */
uint64_t fw_reader_bytes_in(const struct fw_reader *r);

/* Closes and frees r.  fw_reader_close(NULL) does nothing. */
void fw_reader_close(struct fw_reader *r);

/* ---- writer ---------------------------------------------------------------- */

struct fw_writer;

/*
 * Opens a writer.  path NULL or "-" writes standard output; any other path
 * is written to a temporary name beside it and renamed by fw_writer_close(),
 * so a reader never sees half a file (through a symbolic link, beside the
 * file it names).  A path that exists and is not a regular file (a device
 * such as /dev/null, a FIFO) is opened and written in place.  level 0 writes plain msgpack, 1..19
 * zstd at that level, and -1 picks zstd level 3 when path ends in ".zst"
 * and plain otherwise.  Returns NULL with errno kept and a message in err.
 */
struct fw_writer *fw_writer_open(const char *path, int level, char *err, size_t errlen);

/* Appends n bytes (normally one whole record).  Returns 0, or -1 with
 * errno kept (see fw_writer_error()). */
int fw_writer_put(struct fw_writer *w, const void *p, size_t n);

/* Pushes buffered bytes to the file (and ends a zstd block so a reader on
 * the other end of a pipe can decode them).  Returns 0 or -1. */
int fw_writer_flush(struct fw_writer *w);

/* Flushes, ends the zstd frame, closes and renames into place.  Frees w.
 * Returns 0, or -1 with a message in err (the temporary file is removed).
 * fw_writer_close(NULL) returns 0. */
int fw_writer_close(struct fw_writer *w, char *err, size_t errlen);

/* Gives up: removes the temporary file and frees w.  NULL does nothing. */
void fw_writer_abort(struct fw_writer *w);

/* Message of the last error of w. */
const char *fw_writer_error(const struct fw_writer *w);

/* ---- text on standard output ------------------------------------------------ */

/* Text held at most before it is written out. */
#define FW_TEXTOUT_HOLD (64u << 10)

/*
 * Text for standard output (the JSON lines of `rec json`), held in buf and
 * written out on the clock of fw_writer_put(): at once after a pause in
 * the input, at least every 200 ms otherwise, and whenever
 * FW_TEXTOUT_HOLD bytes are held.  Zero-initialise; fw_textout_release()
 * frees.
 */
struct fw_textout {
	struct fw_buf buf;     /* the caller appends a line, then fw_textout_flush() */
	double last, last_put; /* the clock */
};

/* Call after each line appended to t->buf: writes buf to stdout (fwrite,
 * fflush) and empties it when that is due, or when force and it holds
 * anything.  Returns 0, or -1 when standard output failed (its error flag
 * is set: fw_close_stdout() says why). */
int fw_textout_flush(struct fw_textout *t, int force);

/* Frees what t holds; t is zeroed.  NULL does nothing. */
void fw_textout_release(struct fw_textout *t);

#endif
