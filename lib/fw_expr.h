/*
 * fw_expr.h — the record expression language of traj-filter(1).
 *
 * An expression is compiled once and evaluated on each record's msgpack
 * bytes directly: paths are followed inside the encoded map, strings are
 * compared and matched where they lie, nothing is decoded into a tree.
 *
 *   paths        .  .a.b  .turns[0]  .turns[-1]  ."odd key"  .["odd key"]
 *   literals     12  -3.5  1e6  "text"  'text'  true  false  null
 *   comparison   ==  !=  <  <=  >  >=      (numbers by value, strings by bytes)
 *   regex        s =~ "re"   s !~ "re"     (PCRE2, the pattern a literal)
 *   logic        and  or  not              (also && || !)
 *   arithmetic   +  -  *  /  %  unary -
 *   functions    len(x) has(PATH) any(X, E) all(X, E) count(X, E)
 *                contains(s, t) startswith(s, t) endswith(s, t) lower(s) type(x)
 *
 * Inside any/all/count, E is evaluated once per element of X (an array, or
 * the values of a map) and its paths are relative to that element:
 * `any(.feedback, .rating < 0)`.
 *
 * Evaluation never fails: a missing path is null; an operator given values
 * of the wrong type yields null (arithmetic) or false (comparisons, except
 * != which is true).  Falsy values: missing, null, false, 0, "", and empty
 * arrays and maps; everything else is true.
 */
#ifndef FW_EXPR_H
#define FW_EXPR_H

#include <stddef.h>
#include "fw_mp.h"

/* Deepest nesting of parentheses and operators the parser accepts. */
#define FW_EXPR_MAX_DEPTH 128

struct fw_expr;

/*
 * Compiles the NUL-terminated expression src.  Returns the compiled
 * expression, which the caller frees with fw_expr_free(), or NULL on a
 * syntax error (or out of memory) with a message "column N: what" in err
 * and the 1-based column of the fault in *col (0 when it has none; col may
 * be NULL).
 */
struct fw_expr *fw_expr_parse(const char *src, char *err, size_t errlen, size_t *col);

/* Frees e.  fw_expr_free(NULL) does nothing. */
void fw_expr_free(struct fw_expr *e);

/*
 * Evaluates e with `.` bound to rec (any msgpack value, normally a record
 * validated by the stream reader) and returns its truth: 1 or 0.  Does not
 * allocate once the scratch buffers of string functions have grown; an
 * expression is not safe to evaluate from two threads at once.  Cannot fail.
 */
int fw_expr_test(struct fw_expr *e, struct fw_mpv rec);

/*
 * Evaluates e on rec and appends the result to out as one msgpack value
 * (strings and containers of the record are copied as they are).  Returns
 * 0, or -1 when memory runs out.
 */
int fw_expr_eval_mp(struct fw_expr *e, struct fw_mpv rec, struct fw_buf *out);

#endif
