/*
 * fw_base.h — the base layer every other part of libflywheel stands on:
 * the caller's error buffer, hashing and random numbers, string lists, a
 * string interner, whole files, removing a tree, durable directory writes,
 * UTF-8.
 *
 * Nothing here includes another flywheel header, so any file may include
 * this one without making a circle.  Like the rest of the library it never
 * prints and never exits.
 */
#ifndef FW_BASE_H
#define FW_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* ---- error buffer -------------------------------------------------------- */

/*
 * Writes the printf-formatted message into err (errlen bytes, always
 * NUL-terminated, cut when longer).  err NULL or errlen 0 writes nothing.
 * errno is kept.  Cannot fail.
 */
void fw_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* As fw_seterr() with a va_list. */
void fw_vseterr(char *err, size_t errlen, const char *fmt, va_list ap);

/* ---- hashing and random numbers ----------------------------------------- */

/* FNV-1a 64-bit hash of n bytes at p.  Cannot fail. */
uint64_t fw_hash64(const void *p, size_t n);

/* splitmix64 step: advances *state and returns the next 64 random bits.
 * Cannot fail. */
uint64_t fw_rand64(uint64_t *state);

/* splitmix64 of one value: the bits fw_rand64() returns from state z (z
 * itself is not advanced).  A good 64-bit mixing function.  Cannot fail. */
uint64_t fw_mix64(uint64_t z);

/* ---- string lists ---------------------------------------------------------- */

/* A list of strings, owned.  Zero-initialise it ({0}). */
struct fw_strlist {
	char **v;
	size_t n, cap;
};

/* Appends a copy of s.  Returns 0, or -1 when memory runs out (the list is
 * unchanged). */
int fw_strlist_add(struct fw_strlist *l, const char *s);

/* Frees the strings and the array (not the struct, which the caller
 * owns); the list is empty and reusable afterwards.
 * fw_strlist_release(NULL) does nothing. */
void fw_strlist_release(struct fw_strlist *l);

/* ---- string interner ------------------------------------------------------- */

/* Strings to dense indices 0, 1, ... in the order they were first added.
 * Zero-initialise it ({0}); fw_intern_release() frees what it holds.  v[i]
 * is the string of index i, NUL-terminated. */
struct fw_intern {
	char **v;
	size_t n, cap;
	uint32_t *slot; /* open addressing: index + 1, 0 empty */
	size_t nslot;   /* a power of two, or 0 before the first add */
};

/* The index of s[0..n), or -1 when it was never added.  Cannot fail. */
long fw_intern_find(const struct fw_intern *t, const char *s, size_t n);

/* The index of s[0..n), added (copied) when new.  Returns the index, or -1
 * when memory runs out. */
long fw_intern_add(struct fw_intern *t, const char *s, size_t n);

/* Frees the strings and tables; t is empty and reusable afterwards.  NULL
 * does nothing. */
void fw_intern_release(struct fw_intern *t);

/* ---- files ------------------------------------------------------------------ */

/*
 * Reads the file at path whole, or its first max bytes when max is not 0.
 * Returns the bytes with a NUL after them (caller frees with free()), their
 * count in *len; or NULL with errno set (ENOMEM when memory runs out).
 */
char *fw_read_file(const char *path, size_t max, size_t *len);

/* Copies the bytes of file from to file to (created or truncated, mode
 * 0666 less the umask).  Returns 0, or -1 with errno set. */
int fw_copy_file(const char *from, const char *to);

/* Removes path and everything below it, like rm -rf (links are removed,
 * not followed).  Returns 0, or -1 with errno set.  A missing path is
 * success. */
int fw_rmtree(const char *path);

/* ---- durable writes ------------------------------------------------------- */

/* fsync(2)s the file or directory path, so what it holds, or the names it
 * holds, survive a crash.  Returns 0, or -1 with errno set. */
int fw_durable_sync(const char *path);

/* fw_durable_sync()s every regular file directly in dir, then dir itself.
 * Returns 0, or -1 with err naming the path that failed. */
int fw_durable_sync_dir(const char *dir, char *err, size_t errlen);

/* Makes a fresh directory beside final ("FINAL.tmp.PID") for files to be
 * written into and published with fw_durable_publish().  Returns its path
 * (malloc'd, the caller frees), or NULL with err filled. */
char *fw_durable_tmpdir(const char *final, char *err, size_t errlen);

/*
 * Publishes the directory tmp as final: syncs every file in tmp and tmp
 * itself, renames tmp over final (absent, or an empty directory) and syncs
 * final's parent, so after a crash final is absent, or whole with its
 * data.  Returns 0, or -1 with err filled; tmp is removed on failure
 * before the rename.
 */
int fw_durable_publish(const char *tmp, const char *final, char *err, size_t errlen);

/* ---- UTF-8 ------------------------------------------------------------------ */

/* 1 when the n bytes at s are valid UTF-8 (no overlong forms, surrogates
 * or code points above U+10FFFF), else 0.  Cannot fail. */
int fw_utf8_valid(const uint8_t *s, size_t n);

/* The index of the first byte of the first invalid sequence in the n bytes
 * at s, or n when they are all valid UTF-8.  Cannot fail. */
size_t fw_utf8_check(const uint8_t *s, size_t n);

/* The length (1-4) of the valid UTF-8 sequence at s (n > 0 bytes left), or
 * 0 when the byte there does not start one.  Cannot fail. */
size_t fw_utf8_seq(const uint8_t *s, size_t n);

/* Writes the UTF-8 encoding of code point cp (at most U+10FFFF) to o, which
 * has room for 4 bytes.  Returns the bytes written (1-4).  Cannot fail. */
size_t fw_utf8_put(uint8_t *o, uint32_t cp);

/* Number of code points in the n bytes at s (bytes that are not UTF-8
 * continuation bytes).  Cannot fail. */
size_t fw_utf8_count(const char *s, size_t n);

/* The length of the n bytes at s once each byte that is not part of a
 * valid UTF-8 sequence is U+FFFD (3 bytes): what fw_utf8_fix() returns.
 * n when they are all valid.  Cannot fail. */
size_t fw_utf8_fix_len(const char *s, size_t n);

/*
 * A copy of the n bytes at s in which each byte that is not part of a valid
 * UTF-8 sequence becomes U+FFFD, with a NUL after it.  Returns the copy
 * (caller frees with free()) and its length in *outlen, or NULL when memory
 * runs out.
 */
char *fw_utf8_fix(const char *s, size_t n, size_t *outlen);

#endif
