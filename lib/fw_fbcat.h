/*
 * fw_fbcat.h — failure categories of a trajectory, found by rules over its
 * turns (fb-report(1) lists them).  A trajectory may meet several rules.
 */
#ifndef FW_FBCAT_H
#define FW_FBCAT_H

#include <stddef.h>
#include "fw_mp.h"

enum fw_fbcat_rule {
	FW_FBCAT_TOOL_ERROR,  /* a tool result flagged or reading as an error */
	FW_FBCAT_FAILING,     /* the last test run in the tool output failed */
	FW_FBCAT_REFUSAL,     /* the final answer declines */
	FW_FBCAT_TIMEOUT,     /* a tool or the run timed out */
	FW_FBCAT_LOOP,        /* the same call or answer three times or more */
	FW_FBCAT_CORRECTION,  /* the user corrects an answer */
	FW_FBCAT_LONG,        /* very long text or final answer */
	FW_FBCAT_NRULES,
};

/* Thresholds of the rules. */
#define FW_FBCAT_LONG_TOTAL 16384 /* bytes of text in all turns and call arguments */
#define FW_FBCAT_LONG_ANSWER 2000 /* bytes of the final answer */
#define FW_FBCAT_LOOP_REPEATS 3   /* the same call or answer this many times */

struct fw_fbcat;

/* Compiles the rules.  Returns a classifier the caller frees with
 * fw_fbcat_free(), or NULL with a message in err (out of memory). */
struct fw_fbcat *fw_fbcat_new(char *err, size_t errlen);

/* Frees c.  fw_fbcat_free(NULL) does nothing. */
void fw_fbcat_free(struct fw_fbcat *c);

/*
 * The rules a traj record meets, as a bit set: bit r is set when rule r
 * (enum fw_fbcat_rule) holds.  Reads .turns[] {role, text, calls[{name,
 * args}], is_error} and .meta.stop; a record without turns meets none.
 * Uses c's match buffer, so one classifier serves one thread.  Cannot fail.
 */
unsigned fw_fbcat_classify(struct fw_fbcat *c, struct fw_mpv rec);

/* Name of rule r for reports ("tool error", "failing tests", ...), or NULL
 * when r is out of range. */
const char *fw_fbcat_name(int r);

#endif
