/*
 * fw_cli.h — what every flywheel tool shares: its name in diagnostics,
 * exit codes, option values (--seed, --shard K/N), the progress meter, and
 * a loop over input operands.
 *
 * This is the one part of libflywheel that prints: each function that
 * writes to stderr says so.  None of them exits.
 */
#ifndef FW_CLI_H
#define FW_CLI_H

#include <stdint.h>
#include <stdio.h>
#include "fw_stream.h"

enum { FW_EXIT_OK = 0, FW_EXIT_DATA = 1, FW_EXIT_USAGE = 2 };

/* The tool's name, as diagnostics print it ("rec"). */
extern const char *fw_prog;

/* Sets fw_prog and restores the default SIGPIPE action, so that a tool
 * whose reader went away (`rec json | head`) ends quietly.  Cannot fail. */
void fw_cli_init(const char *prog);

/* Prints "PROG: MESSAGE\n" to stderr. */
void fw_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "PROG: FILE: record N (byte B): MESSAGE\n" to stderr.  N counts
 * from 1 for people; index is the reader's 0-based index. */
void fw_warn_rec(const char *file, uint64_t index, uint64_t offset, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Prints "PROG: " and fmt formatted with arg (one %s) on stderr, then the
 * usage text, and returns FW_EXIT_USAGE for main to return. */
int fw_usage_error(const char *usage, const char *fmt, const char *arg);

/* ---- usage ---------------------------------------------------------------- */

/* One line of --help: the option as the synopsis spells it ("-o OUT") and
 * what it does. */
struct fw_opt_doc {
	const char *opt, *doc;
};

/*
 * Registers the tool's usage: synopsis is the text the man page's SYNOPSIS
 * says, lines ending in '\n' ("usage: TOOL ...", then indented lines); opts
 * its options, ended by an entry whose opt is NULL (opts may be NULL).  Both
 * are kept by pointer: pass static text.  Call once in main, before the
 * options are parsed.  Cannot fail.
 */
void fw_usage_init(const char *synopsis, const struct fw_opt_doc *opts);

/* Prints the registered synopsis to f.  Cannot fail. */
void fw_usage(FILE *f);

/* What --help prints, to stdout: the synopsis, then (when options were
 * registered) an empty line, "options:" and one line per option, the
 * option padded to a column and its text after it.  Cannot fail. */
void fw_help(void);

/* As fw_usage_error() with the registered synopsis. */
int fw_usage_fail(const char *fmt, const char *arg);

/* ---- operands ------------------------------------------------------------- */

/* The input operands of a tool: argv[first..argc), or "-" (standard input)
 * once when there are none.  Fill with fw_operands_init(). */
struct fw_operands {
	char **argv;
	int i, n;
	int stdin_only;
};

/* Starts iterating argv[first..argc) (first is optind after getopt).
 * Cannot fail. */
void fw_operands_init(struct fw_operands *it, int argc, char **argv, int first);

/* The next operand, or NULL after the last.  Cannot fail. */
const char *fw_operands_next(struct fw_operands *it);

/* Prints the reader's last error with its position via fw_warn_rec(). */
void fw_warn_reader(const struct fw_reader *r);

/* Prints "PROG (flywheel) VERSION" to stdout. */
void fw_print_version(void);

/* Parses a decimal unsigned integer that fills the whole string (an
 * optional K/M/G suffix multiplies by 1024s when suffix_ok).  Returns 0 or
 * -1. */
int fw_parse_u64(const char *s, uint64_t *out, int suffix_ok);

/* Parses a floating-point number filling the whole string.  0 or -1. */
int fw_parse_double(const char *s, double *out);

/* Parses "K/N" with 0 <= K < N.  Returns 0 or -1. */
int fw_parse_shard(const char *s, uint64_t *k, uint64_t *n);

/* 1 when the record belongs to shard k of n: fw_hash64(id) % n == k, where
 * id is the record's `id` string (a record without one hashes its whole
 * bytes).  Cannot fail. */
int fw_shard_keep(struct fw_mpv rec, uint64_t k, uint64_t n);

/* ---- progress meter ------------------------------------------------------- */

struct fw_progress {
	int on;
	double t0, last;
	uint64_t records, bytes;
};

/* Starts a meter: on when force (--progress) or stderr is a terminal. */
void fw_progress_start(struct fw_progress *p, int force);

/* Counts records and input bytes; redraws the line on stderr at most ten
 * times a second. */
void fw_progress_tick(struct fw_progress *p, uint64_t records, uint64_t bytes);

/* Clears the line.  Safe when the meter is off. */
void fw_progress_end(struct fw_progress *p);

/* Monotonic seconds. */
double fw_now(void);

/*
 * Finishes standard output: flushes, checks ferror() and closes it.  Prints
 * "PROG: write error: REASON" and returns -1 when output was lost (a closed
 * pipe is not reported), 0 otherwise.
 */
int fw_close_stdout(void);

#endif
