/*
 * fw_cli.h — what every flywheel tool shares: its name in diagnostics,
 * exit codes, option values (--seed, --shard K/N), the progress meter, and
 * the loops over input operands: their records, or their JSON as records.
 *
 * This is the one part of libflywheel that prints: each function that
 * writes to stderr says so, as does a call of another module that prints
 * through these (fw_recscore_files).  None of them exits.
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
 * option padded to a column (up to 24 wide) and its text after it.
 * Cannot fail. */
void fw_help(void);

/* The ends of option parsing, for main to return: --help (fw_help(),
 * then standard output closed: 0, or FW_EXIT_DATA when it was lost),
 * --version (likewise with fw_print_version()), and a bad option (the
 * synopsis on stderr, FW_EXIT_USAGE; getopt has said what was wrong). */
int fw_help_exit(void);
int fw_version_exit(void);
int fw_usage_exit(void);

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

/*
 * The record loop of a filter: every record of every operand (no operand:
 * standard input), with the conventions kept in one place: --skip-bad
 * passes over damaged records that the reader can step past (counted, and
 * "PROG: skipped N bad records" said at the end), --shard K/N keeps the
 * records of one shard, --progress draws the meter with the operands' total
 * size.  A file that cannot be opened or a bad record is reported with its
 * position and makes the result FW_EXIT_DATA; the loop goes on with the
 * next file, or with go_on at the next record when the reader can step
 * past the bad one (a tool that reports every fault of its input).
 *
 * fn is called per record kept, on the caller's thread; it returns 0 to go
 * on, > 0 to stop (not an error), < 0 to stop with FW_EXIT_DATA (fn has
 * said why).  It may count a record it refuses in e->skipped.
 */
struct fw_each {
	const struct fw_reader_opts *ropts; /* NULL: the defaults */
	int skip_bad, go_on;
	int progress;                       /* fw_progress_start()'s force */
	uint64_t shard_k, shard_n;          /* shard_n == 0: every record */
	void *arg;                          /* for fn */
	/* filled by the loop */
	uint64_t records, skipped;          /* records given to fn; passed over */
	int stopped;                        /* fn returned non-zero */
	struct fw_progress *meter;          /* the running meter, for fw_progress_pause() */
};

/* Runs fn over the records of argv[first..argc) (see above).  Returns
 * FW_EXIT_OK or FW_EXIT_DATA.  Prints diagnostics on stderr. */
int fw_each_record(struct fw_each *e, int argc, char **argv, int first,
		   int (*fn)(struct fw_each *e, const struct fw_rec *rec, const char *file));

/*
 * The loop of a tool that reads JSON (rec from-json): the JSON values of
 * every operand (no operand: standard input), read by fw_json_reader, are
 * written to w one record each; progress is fw_progress_start()'s force
 * for the meter of the operands' total size.  A value that is not an
 * object is said with its place ("FILE: line L, column C: value is array,
 * not an object") and ends its file with FW_EXIT_DATA, or with skip_bad is
 * passed over.  A record larger than max_record (0:
 * FW_MAX_RECORD_DEFAULT), text that is not JSON (the reader's line and
 * column), a file that cannot be opened and a write error (not said when
 * the reader went away: EPIPE) are said, end their file and make the
 * result FW_EXIT_DATA; the loop goes on with the next file.  Every record
 * before a fault is written.  Returns FW_EXIT_OK or FW_EXIT_DATA.
 */
int fw_json_records(struct fw_writer *w, int argc, char **argv, int first, size_t max_record,
		    int skip_bad, int progress);

/* ---- output --------------------------------------------------------------- */

/* fw_writer_open() that says why it failed ("PROG: REASON") and returns
 * NULL. */
struct fw_writer *fw_out_open(const char *path, int level);

/* fw_writer_put() that says a write error, unless the reader went away
 * (EPIPE).  Returns 0 or -1. */
int fw_out_put(struct fw_writer *w, const void *p, size_t n);

/* fw_writer_close() that says why it failed, unless the reader went away
 * (EPIPE).  Returns status, or FW_EXIT_DATA when the close failed. */
int fw_out_close(struct fw_writer *w, int status);

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

/* The hash that places a record in a shard: fw_hash64() of the record's
 * `id` string, or of its whole bytes without one.  Cannot fail. */
uint64_t fw_shard_hash(struct fw_mpv rec);

/* 1 when the record belongs to shard k of n: fw_shard_hash(rec) % n == k.
 * Cannot fail. */
int fw_shard_keep(struct fw_mpv rec, uint64_t k, uint64_t n);

/* ---- ordered worker pool (-j N) ------------------------------------------- */

/*
 * N workers that run jobs while the caller keeps reading, and hand the
 * results back in the order the jobs were submitted: what `-j N` means in
 * every tool.  A job is the caller's pointer (a slot with the input record
 * and room for the output); the pool never looks inside it.
 *
 * Threads: work() runs on a worker thread, with that worker's state
 * (worker_init's result, NULL without one); done() and drop() run on the
 * caller's thread, inside fw_pool_submit() and fw_pool_finish(), so done()
 * may write to the tool's output without a lock.  With workers == 1 no
 * thread is started: each job runs at once in fw_pool_submit(), and the
 * output is the same as with any N.
 *
 * Order: done() is called once per job, in submission order, and only
 * after every earlier job's done().  At most `window` jobs (submitted and
 * not yet done) are in flight; fw_pool_submit() blocks while the window is
 * full, so memory is bounded by window jobs.
 *
 * Errors: work()'s return value is passed to done() as rc, untouched: a
 * failing job (rc != 0) is the caller's to report, and the pool goes on.
 * done() returning < 0 aborts the pool (a write error, a fatal fault):
 * done() is called for no later job, workers take no new job, the jobs
 * that were in flight are given to drop() (when set) instead, and
 * fw_pool_submit() and fw_pool_finish() return -1 from then on, giving
 * later submissions straight to drop().  So every job submitted reaches
 * exactly one of done() or drop().  worker_init() returning NULL is not an
 * error: work() gets NULL and decides (grade reports "out of memory").
 *
 * How tools use it: grade, rollout, teach and task-mutate each kept their
 * own ordered pool; they move to this one with a job struct holding the
 * record bytes, file, index and offset, work() = grade/roll/teach/mutate
 * one record with the worker's grader/policy, done() = warn on rc, write
 * the output, tick the meter; records passed through untouched are jobs
 * whose work() does nothing, so their place in the order is kept.
 */
struct fw_pool;

struct fw_pool_conf {
	int workers;       /* >= 1 */
	size_t window;     /* jobs in flight at most; 0: 4 * workers, at least 8 */
	void *(*worker_init)(void *arg);         /* optional, on the worker's thread */
	void (*worker_fini)(void *state, void *arg); /* optional */
	int (*work)(void *state, void *job, void *arg);   /* required */
	int (*done)(void *job, int rc, void *arg);       /* required; < 0 aborts */
	void (*drop)(void *job, void *arg);              /* optional */
	void *arg;         /* passed to every callback */
};

/* Starts the pool and its workers; conf is copied.  Returns NULL (errno
 * set) when memory or a thread cannot be had.  Caller frees with
 * fw_pool_free(). */
struct fw_pool *fw_pool_new(const struct fw_pool_conf *conf);

/* Submits one job; calls done() for the jobs finished so far, in order,
 * and blocks while the window is full.  Returns 0, or -1 once the pool
 * has aborted (the job then went to drop()). */
int fw_pool_submit(struct fw_pool *p, void *job);

/* Waits for every job submitted so far and delivers them in order; the
 * pool takes more jobs afterwards.  For a tool whose jobs borrow what an
 * input holds (its name), before it closes that input.  Returns 0, or -1
 * once the pool has aborted. */
int fw_pool_drain(struct fw_pool *p);

/* Waits for every job submitted and delivers them in order.  Returns 0,
 * or -1 when the pool aborted.  Idempotent. */
int fw_pool_finish(struct fw_pool *p);

/* Finishes the pool if fw_pool_finish() was not called, stops and joins
 * the workers (calling worker_fini), frees the pool.  NULL does nothing.
 * Returns nothing: call fw_pool_finish() first to learn of an abort. */
void fw_pool_free(struct fw_pool *p);

/* ---- scratch directories ------------------------------------------------- */

/*
 * Blocks SIGINT, SIGTERM and SIGHUP in the calling thread and the threads
 * it starts afterwards, and starts a thread that waits for them: it
 * removes the scratch directory in use (fw_scratch_make()) and exits as the
 * signal would have (status 128 + the signal).  Call once in main, before
 * any other thread starts.  Returns 0, or -1 when the signals could not be
 * blocked or the thread started.
 */
int fw_scratch_guard(void);

/* Makes $TMPDIR/PROG.XXXXXX (TMPDIR unset or empty: /tmp) into dir, a
 * buffer of 4096 bytes, as the directory in use.  Returns 0, or -1 after
 * "PROG: cannot make a temporary directory: REASON" on stderr. */
int fw_scratch_make(char *dir);

/* Removes dir with everything in it; no directory is in use afterwards.
 * Cannot fail (what cannot be removed stays). */
void fw_scratch_remove(const char *dir);

/* ---- progress meter ------------------------------------------------------- */

/*
 * The meter --progress asks for (and a terminal gets unasked): records,
 * input bytes, rate and time; with a known total of input bytes also the
 * percentage done and an estimate of the time left.  On a terminal one
 * line is redrawn in place ten times a second; elsewhere (a log, a pipe)
 * plain lines, one a second and a last one at the end, never a '\r'.
 */
struct fw_progress {
	int on, tty;
	double t0, last;
	uint64_t records, bytes;
	uint64_t total;   /* input bytes expected; 0: not known */
	int unknown;      /* an input whose size cannot be known */
	uint64_t steps;   /* fw_progress_steps(): the count of steps, else 0 */
};

/* Starts a meter: on when force > 0 (--progress) or, when force is 0,
 * stderr is a terminal; force < 0 keeps it off (a data-parallel rank
 * other than the first, whose meter would repeat the first's). */
void fw_progress_start(struct fw_progress *p, int force);

/* Adds the size of the input path to the total ("-" is standard input):
 * a regular file's size, or makes the total unknown (a pipe, a terminal).
 * Call once per operand after fw_progress_start().  Cannot fail. */
void fw_progress_expect(struct fw_progress *p, const char *path);

/* Makes the meter count n steps instead of records and bytes (a training
 * run: the records are read before the first step): fw_progress_tick()'s
 * records are the steps done, and the share and ETA are of n.  Cannot
 * fail. */
void fw_progress_steps(struct fw_progress *p, uint64_t n);

/* Counts records and input bytes (compressed bytes read, as
 * fw_reader_bytes_in() gives them, summed over the inputs); redraws at
 * most ten times a second (a terminal) or once a second (otherwise). */
void fw_progress_tick(struct fw_progress *p, uint64_t records, uint64_t bytes);

/* Clears the terminal line before a diagnostic; the meter comes back on
 * the next tick.  Does nothing off a terminal or when the meter is off. */
void fw_progress_pause(struct fw_progress *p);

/* Ends the meter: clears the terminal line, or off a terminal writes the
 * last plain line.  Safe when the meter is off. */
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
