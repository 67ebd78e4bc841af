/*
 * fw_mutate.h — mutations that remove a feature from a repository, the
 * symbol spans they work on (Universal Ctags), and running a test suite in
 * the clean room.
 *
 * Symbols come from `ctags --output-format=json --fields=+ne`, which gives
 * each function's first and last line.  A mutation works on one file's
 * text and yields that file's new content (or its deletion), the removed
 * code (for the leak audit) and what a problem statement may show: the
 * signature and documentation of the main target, never its body.
 *
 * Strategies:
 *   stub-body        keep signature, decorators, docstring / leading
 *                    comment; the body becomes the language's
 *                    not-implemented stub (Python `raise
 *                    NotImplementedError`, C `abort();`, JS/TS `throw new
 *                    Error("not implemented");`, Go `panic("not
 *                    implemented")`)
 *   delete-function  the function with its decorators and leading comment
 *   delete-file      a whole source file
 *   delete-feature   a function and the private helpers only it uses
 */
#ifndef FW_MUTATE_H
#define FW_MUTATE_H

#include <stddef.h>

#include "fw_report.h"

enum fw_lang {
	FW_LANG_UNKNOWN = 0,
	FW_LANG_PYTHON,
	FW_LANG_C,
	FW_LANG_JAVASCRIPT,
	FW_LANG_TYPESCRIPT,
	FW_LANG_GO,
};

/* Language of a file by its extension (.py .c .h .js .mjs .cjs .jsx .ts
 * .tsx .go); FW_LANG_UNKNOWN otherwise.  Cannot fail. */
enum fw_lang fw_lang_of_path(const char *path);

/* Language by name, any case ("python", "c", "javascript"/"js",
 * "typescript"/"ts", "go"; so ctags's "Python" too); FW_LANG_UNKNOWN for
 * anything else. */
enum fw_lang fw_lang_parse(const char *name);

/* Lowercase name ("python", "c", "javascript", "typescript", "go",
 * "unknown").  Cannot fail. */
const char *fw_lang_name(enum fw_lang l);

/* 1 when path looks like test code (a tests/ or test/ directory, test_*.py,
 * *_test.py, *_test.go, *.test.js, *.spec.ts, test_*.c, ...), else 0. */
int fw_is_test_path(const char *path);

struct fw_symbol {
	char *path;       /* relative to the scanned directory, owned */
	char *name;       /* owned */
	enum fw_lang lang;
	int start, end;   /* first and last line, 1-based, inclusive */
	int method;       /* 1 for a method/member (has a class scope) */
};

struct fw_symbols {
	struct fw_symbol *v;
	size_t n, cap;
};

/*
 * Runs ctags over dir (recursively, skipping .git, node_modules, vendor)
 * and appends every function and method definition in a file of language
 * only (FW_LANG_UNKNOWN: every supported language) to out, sorted by path
 * then start line.  A file's language is what ctags says (it reads `#!`
 * lines of files without an extension), else its extension, else only.
 * Where ctags gives no end line the matching brace does.  Returns 0, or -1 with a message in
 * err (ctags missing or failing).
 */
int fw_ctags(const char *dir, enum fw_lang only, struct fw_symbols *out,
	     char *err, size_t errlen);

/* Frees what out holds; the list is empty afterwards.  NULL does nothing. */
void fw_symbols_release(struct fw_symbols *out);

enum fw_strategy {
	FW_STUB_BODY = 0,
	FW_DELETE_FUNCTION,
	FW_DELETE_FILE,
	FW_DELETE_FEATURE,
	FW_NSTRATEGIES,
};

/* "stub-body", "delete-function", "delete-file", "delete-feature". */
const char *fw_strategy_name(enum fw_strategy s);

/* The strategy named s, or -1. */
int fw_strategy_parse(const char *s);

struct fw_target {
	char *path, *symbol; /* owned; symbol "" for a whole file */
	enum fw_lang lang;
	int start, end;
};

struct fw_mutation {
	enum fw_strategy strategy;
	char *path;              /* the file changed, owned */
	char *data;              /* its new content (NUL-terminated), or NULL: deleted */
	size_t len;
	char *removed;           /* the code taken out, owned */
	char *signature, *doc;   /* of the main target, owned, may be NULL */
	struct fw_target *targets; /* main target first, owned */
	size_t ntargets;
};

/* Frees what m holds and zeroes it.  NULL does nothing. */
void fw_mutation_release(struct fw_mutation *m);

/*
 * Stubs the body of sym in src (len bytes, the content of sym->path).
 * Returns 0 and fills m; 1 when there is nothing to remove (the body is
 * only a docstring, `pass`, a one-line def, or no braces were found); -1
 * when memory runs out.
 */
int fw_mutate_stub(const struct fw_symbol *sym, const char *src, size_t len,
		   struct fw_mutation *m);

/*
 * Deletes sym (with decorators or leading comment) and the nh helpers
 * (symbols of the same file) from src.  strategy is FW_DELETE_FUNCTION or
 * FW_DELETE_FEATURE.  Returns 0 and fills m, 1 when the spans overlap, or
 * -1 when memory runs out.
 */
int fw_mutate_delete(enum fw_strategy strategy, const struct fw_symbol *sym,
		     const struct fw_symbol *const *helpers, size_t nh,
		     const char *src, size_t len, struct fw_mutation *m);

/*
 * Deletes the file path (src, len bytes) whose functions are the nsyms
 * entries of syms (for the problem statement).  Returns 0 or -1.
 */
int fw_mutate_delete_file(const char *path, const char *src, size_t len,
			  const struct fw_symbol *syms, size_t nsyms, struct fw_mutation *m);

/* One source file's text, for the helper search. */
struct fw_text {
	const char *path;
	const char *data;
	size_t len;
};

/*
 * Finds the private helpers only syms->v[target] uses: functions of the
 * same file that are private (Python `_name` at module level, C `static`,
 * Go lowercase, JS/TS not exported), are named inside the target's span,
 * and are named nowhere else in the nfiles texts.  Writes up to max indices
 * into syms->v to out and returns how many it found.
 */
size_t fw_private_helpers(const struct fw_symbols *syms, size_t target,
			  const struct fw_text *files, size_t nfiles, size_t *out, size_t max);

/*
 * Writes the problem statement for m and its failing tests (nf2p ids) as a
 * malloc'd string the caller frees: file and symbol, signature,
 * documentation, the failing tests.  Never the removed code.  NULL when
 * memory runs out.
 */
char *fw_task_prompt(const struct fw_mutation *m, const char *const *f2p, size_t nf2p);

/* ---- running a suite --------------------------------------------------------- */

/* Where the report file is written inside the sandbox ($FW_REPORT). */
#define FW_REPORT_PATH ".fw-report.xml"

enum fw_suite_status {
	FW_SUITE_OK = 0,      /* ran and reported results */
	FW_SUITE_NO_REPORT,   /* ran but left no readable report / no tests */
	FW_SUITE_TIMEOUT,     /* killed by the timeout or a resource limit */
};

/*
 * Runs `sh -c cmd` in the clean room with the workspace ws as its working
 * directory and FW_REPORT set to the report path, then reads the report
 * (TAP from stdout when fmt is FW_REPORT_TAP; otherwise the file at
 * FW_REPORT, JUnit XML or `go test -json` output as fmt says) into rep
 * (cleared first).  timeout_s bounds the wall
 * clock (0: none).  detail (may be NULL, detlen bytes) receives the cause
 * of a NO_REPORT or TIMEOUT status, with the tail of stderr.  Returns a
 * status, or -1 with a message in err when the sandbox cannot run.
 */
int fw_suite_run(const char *ws, const char *cmd, enum fw_report_format fmt,
		 double timeout_s, struct fw_report *rep, char *detail, size_t detlen,
		 char *err, size_t errlen);

struct fw_env;

/*
 * fw_suite_run() in environment env (fw_env.h; NULL: the system alone),
 * which also writes the last lines of what the command printed (up to 20
 * of stdout, then up to 20 of stderr, each line at most 200 bytes) to
 * tail (taillen bytes; may be NULL), whatever the status: the test
 * command's own account of why a suite cannot be used.
 */
int fw_suite_run_env(const char *ws, const char *cmd, enum fw_report_format fmt,
		     double timeout_s, const struct fw_env *env, struct fw_report *rep,
		     char *detail, size_t detlen, char *tail, size_t taillen, char *err,
		     size_t errlen);

#endif
