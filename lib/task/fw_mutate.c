/*
 * fw_mutate.c — feature-removing mutations, ctags symbols, suite runs
 * (see fw_mutate.h).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "fw_env.h"
#include "fw_base.h"
#include "fw_mp.h"
#include "fw_mutate.h"
#include "fw_sandbox.h"

/* ---- languages and names ------------------------------------------------------ */

static int ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return m <= n && strcmp(s + n - m, suf) == 0;
}

enum fw_lang fw_lang_of_path(const char *path)
{
	static const struct { const char *ext; enum fw_lang l; } t[] = {
		{ ".py", FW_LANG_PYTHON }, { ".c", FW_LANG_C }, { ".h", FW_LANG_C },
		{ ".js", FW_LANG_JAVASCRIPT }, { ".mjs", FW_LANG_JAVASCRIPT },
		{ ".cjs", FW_LANG_JAVASCRIPT }, { ".jsx", FW_LANG_JAVASCRIPT },
		{ ".ts", FW_LANG_TYPESCRIPT }, { ".tsx", FW_LANG_TYPESCRIPT },
		{ ".go", FW_LANG_GO },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (ends_with(path, t[i].ext))
			return t[i].l;
	return FW_LANG_UNKNOWN;
}

enum fw_lang fw_lang_parse(const char *name)
{
	if (!strcasecmp(name, "python") || !strcmp(name, "py")) return FW_LANG_PYTHON;
	if (!strcasecmp(name, "c")) return FW_LANG_C;
	if (!strcasecmp(name, "javascript") || !strcmp(name, "js")) return FW_LANG_JAVASCRIPT;
	if (!strcasecmp(name, "typescript") || !strcmp(name, "ts")) return FW_LANG_TYPESCRIPT;
	if (!strcasecmp(name, "go")) return FW_LANG_GO;
	return FW_LANG_UNKNOWN;
}

const char *fw_lang_name(enum fw_lang l)
{
	switch (l) {
	case FW_LANG_PYTHON: return "python";
	case FW_LANG_C: return "c";
	case FW_LANG_JAVASCRIPT: return "javascript";
	case FW_LANG_TYPESCRIPT: return "typescript";
	case FW_LANG_GO: return "go";
	default: return "unknown";
	}
}

int fw_is_test_path(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	static const char *const dirs[] = { "test/", "tests/", "testing/", "__tests__/",
					    "spec/", "testdata/", NULL };
	for (size_t i = 0; dirs[i]; i++) {
		size_t k = strlen(dirs[i]);
		if (strncmp(path, dirs[i], k) == 0)
			return 1;
		for (const char *p = strstr(path, dirs[i]); p; p = strstr(p + 1, dirs[i]))
			if (p > path && p[-1] == '/')
				return 1;
	}
	if (strncmp(base, "test_", 5) == 0 || strncmp(base, "test.", 5) == 0 ||
	    strcmp(base, "conftest.py") == 0)
		return 1;
	static const char *const suf[] = { "_test.py", "_test.go", "_test.c", ".test.js",
					   ".test.ts", ".spec.js", ".spec.ts", ".test.jsx",
					   ".test.tsx", ".spec.tsx", NULL };
	for (size_t i = 0; suf[i]; i++)
		if (ends_with(base, suf[i]))
			return 1;
	return 0;
}

const char *fw_strategy_name(enum fw_strategy s)
{
	switch (s) {
	case FW_STUB_BODY: return "stub-body";
	case FW_DELETE_FUNCTION: return "delete-function";
	case FW_DELETE_FILE: return "delete-file";
	case FW_DELETE_FEATURE: return "delete-feature";
	default: return "?";
	}
}

int fw_strategy_parse(const char *s)
{
	for (int i = 0; i < FW_NSTRATEGIES; i++)
		if (strcmp(s, fw_strategy_name(i)) == 0)
			return i;
	return -1;
}

/* ---- ctags ---------------------------------------------------------------------- */

static int fix_spans(const char *dir, struct fw_symbols *out, char *err, size_t errlen);

static int sym_cmp(const void *a, const void *b)
{
	const struct fw_symbol *x = a, *y = b;
	int c = strcmp(x->path, y->path);
	return c ? c : x->start - y->start;
}

void fw_symbols_release(struct fw_symbols *out)
{
	if (!out)
		return;
	for (size_t i = 0; i < out->n; i++) {
		free(out->v[i].path);
		free(out->v[i].name);
	}
	free(out->v);
	memset(out, 0, sizeof *out);
}

static int is_function_kind(const char *k)
{
	return !strcmp(k, "function") || !strcmp(k, "member") || !strcmp(k, "method") ||
	       !strcmp(k, "func") || !strcmp(k, "generator");
}

int fw_ctags(const char *dir, enum fw_lang only, struct fw_symbols *out,
	     char *err, size_t errlen)
{
	int fd[2];
	if (pipe(fd) < 0) {
		fw_seterr(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		fw_seterr(err, errlen, "fork: %s", strerror(errno));
		close(fd[0]);
		close(fd[1]);
		return -1;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);
		dup2(fd[1], 1);
		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 2);
		}
		close(fd[0]);
		close(fd[1]);
		if (chdir(dir) < 0)
			_exit(126);
		execlp("ctags", "ctags", "--output-format=json", "--fields=+nel", "-G", "-f", "-", "-R",
		       "--exclude=.git", "--exclude=node_modules", "--exclude=vendor",
		       "--languages=Python,C,JavaScript,TypeScript,Go", "--langmap=C:+.h",
		       "--kinds-Python=fm", "--kinds-C=f", "--kinds-JavaScript=fmg",
		       "--kinds-TypeScript=fmg", "--kinds-Go=f", ".", (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	FILE *f = fdopen(fd[0], "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;
	while (f && (n = getline(&line, &cap, f)) > 0) {
		json_error_t je;
		json_t *t = json_loads(line, 0, &je);
		if (!t)
			continue;
		const char *name = json_string_value(json_object_get(t, "name"));
		const char *path = json_string_value(json_object_get(t, "path"));
		const char *kind = json_string_value(json_object_get(t, "kind"));
		json_int_t start = json_integer_value(json_object_get(t, "line"));
		json_int_t end = json_integer_value(json_object_get(t, "end"));
		if (name && path && kind && is_function_kind(kind) && start > 0 &&
		    (end >= start || end == 0)) {
			if (strncmp(path, "./", 2) == 0)
				path += 2;
			/* ctags's own guess (it reads #! lines) over the
			 * extension, then --lang for what neither knows */
			const char *cl = json_string_value(json_object_get(t, "language"));
			enum fw_lang l = cl ? fw_lang_parse(cl) : FW_LANG_UNKNOWN;
			if (l == FW_LANG_UNKNOWN)
				l = fw_lang_of_path(path);
			if (l == FW_LANG_UNKNOWN)
				l = only;
			if (l != FW_LANG_UNKNOWN && (only == FW_LANG_UNKNOWN || only == l ||
			    (only == FW_LANG_JAVASCRIPT && l == FW_LANG_TYPESCRIPT) ||
			    (only == FW_LANG_TYPESCRIPT && l == FW_LANG_JAVASCRIPT))) {
				if (out->n == out->cap) {
					size_t nc = out->cap ? out->cap * 2 : 64;
					struct fw_symbol *v = realloc(out->v, nc * sizeof *v);
					if (!v) {
						json_decref(t);
						rc = -1;
						fw_seterr(err, errlen, "out of memory");
						break;
					}
					out->v = v;
					out->cap = nc;
				}
				struct fw_symbol *s = &out->v[out->n++];
				s->path = strdup(path);
				s->name = strdup(name);
				s->lang = l;
				s->start = (int)start;
				s->end = (int)end;
				s->method = json_object_get(t, "scope") != NULL;
			}
		}
		json_decref(t);
	}
	free(line);
	if (f)
		fclose(f);
	else
		close(fd[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (rc == 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
		int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		if (code == 127)
			fw_seterr(err, errlen, "ctags not found (install Universal Ctags: "
					    "Debian package universal-ctags)");
		else
			fw_seterr(err, errlen, "ctags failed in '%s' (exit %d): it must be "
					    "Universal Ctags with JSON output", dir, code);
		rc = -1;
	}
	if (out->n > 1)
		qsort(out->v, out->n, sizeof *out->v, sym_cmp);
	if (rc == 0)
		rc = fix_spans(dir, out, err, errlen);
	return rc;
}

/* ---- text helpers ------------------------------------------------------------------ */

/* Byte offsets of line starts: off[i] is where line i+1 starts; off[n] is
 * the length. */
struct lines {
	size_t *off;
	int n;
};

static int lines_index(struct lines *L, const char *s, size_t len)
{
	int cap = 64;
	L->off = malloc(sizeof *L->off * (size_t)cap);
	L->n = 0;
	if (!L->off)
		return -1;
	size_t i = 0;
	while (i < len) {
		if (L->n + 2 > cap) {
			cap *= 2;
			size_t *o = realloc(L->off, sizeof *o * (size_t)cap);
			if (!o) {
				free(L->off);
				return -1;
			}
			L->off = o;
		}
		L->off[L->n++] = i;
		const char *nl = memchr(s + i, '\n', len - i);
		i = nl ? (size_t)(nl - s) + 1 : len;
	}
	L->off[L->n] = len;
	return 0;
}

/* Start offset of line k (1-based), clamped. */
static size_t lstart(const struct lines *L, int k)
{
	if (k < 1)
		return 0;
	if (k > L->n)
		return L->off[L->n];
	return L->off[k - 1];
}

/* Offset just past line k (after its newline). */
static size_t lend(const struct lines *L, int k)
{
	return lstart(L, k + 1);
}

static int line_blank(const char *s, const struct lines *L, int k)
{
	for (size_t i = lstart(L, k); i < lend(L, k); i++)
		if (!isspace((unsigned char)s[i]))
			return 0;
	return 1;
}

/* Pointer to the first non-space byte of line k and its length to the end
 * of the line without trailing space. */
static const char *line_trim(const char *s, const struct lines *L, int k, size_t *n)
{
	size_t a = lstart(L, k), b = lend(L, k);
	while (a < b && isspace((unsigned char)s[a]))
		a++;
	while (b > a && isspace((unsigned char)s[b - 1]))
		b--;
	*n = b - a;
	return s + a;
}

static size_t indent_of(const char *s, const struct lines *L, int k)
{
	size_t a = lstart(L, k), i = a;
	while (i < lend(L, k) && (s[i] == ' ' || s[i] == '\t'))
		i++;
	return i - a;
}

static char *dupn(const char *s, size_t n)
{
	char *p = malloc(n + 1);
	if (p) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

/* Lines a..b of s, each with up to `dedent` leading blanks removed. */
static char *lines_text(const char *s, const struct lines *L, int a, int b, size_t dedent)
{
	struct fw_buf buf = { 0 };
	for (int k = a; k <= b; k++) {
		size_t x = lstart(L, k), e = lend(L, k), d = 0;
		while (d < dedent && x < e && (s[x] == ' ' || s[x] == '\t')) {
			x++;
			d++;
		}
		if (fw_buf_append(&buf, s + x, e - x) < 0) {
			fw_buf_free(&buf);
			return NULL;
		}
	}
	while (buf.n && isspace(buf.p[buf.n - 1]))
		buf.n--;
	if (fw_buf_append(&buf, "", 1) < 0) {
		fw_buf_free(&buf);
		return NULL;
	}
	return (char *)buf.p;
}

void fw_mutation_release(struct fw_mutation *m)
{
	if (!m)
		return;
	free(m->path);
	free(m->data);
	free(m->removed);
	free(m->signature);
	free(m->doc);
	for (size_t i = 0; i < m->ntargets; i++) {
		free(m->targets[i].path);
		free(m->targets[i].symbol);
	}
	free(m->targets);
	memset(m, 0, sizeof *m);
}

static int add_target(struct fw_mutation *m, const char *path, const char *symbol,
		      enum fw_lang lang, int start, int end)
{
	struct fw_target *t = realloc(m->targets, (m->ntargets + 1) * sizeof *t);
	if (!t)
		return -1;
	m->targets = t;
	t = &t[m->ntargets];
	t->path = strdup(path);
	t->symbol = strdup(symbol);
	t->lang = lang;
	t->start = start;
	t->end = end;
	if (!t->path || !t->symbol) {
		free(t->path);
		free(t->symbol);
		return -1;
	}
	m->ntargets++;
	return 0;
}

/* new = src[0..a) + mid + src[b..len) */
static char *splice_text(const char *src, size_t len, size_t a, size_t b, const char *mid,
		    size_t *outlen)
{
	size_t k = strlen(mid), n = a + k + (len - b);
	char *p = malloc(n + 1);
	if (!p)
		return NULL;
	memcpy(p, src, a);
	memcpy(p + a, mid, k);
	memcpy(p + a + k, src + b, len - b);
	p[n] = '\0';
	*outlen = n;
	return p;
}

/* ---- Python -------------------------------------------------------------------------- */

/* Line where the def's signature ends (the ':' at bracket depth 0), or -1.
 * *inline_body is set when code follows the colon on that line. */
static int py_sig_end(const char *s, const struct lines *L, int start, int end,
		      int *inline_body)
{
	int depth = 0;
	*inline_body = 0;
	for (int k = start; k <= end; k++) {
		for (size_t i = lstart(L, k); i < lend(L, k); i++) {
			char c = s[i];
			if (c == '#')
				break;
			if (c == '"' || c == '\'') {
				size_t j = i + 1;
				while (j < lend(L, k) && s[j] != c) {
					if (s[j] == '\\')
						j++;
					j++;
				}
				i = j;
				continue;
			}
			if (c == '(' || c == '[' || c == '{')
				depth++;
			else if (c == ')' || c == ']' || c == '}')
				depth--;
			else if (c == ':' && depth == 0) {
				for (size_t j = i + 1; j < lend(L, k); j++) {
					if (s[j] == '#' || s[j] == '\n')
						break;
					if (!isspace((unsigned char)s[j])) {
						*inline_body = 1;
						break;
					}
				}
				return k;
			}
		}
	}
	return -1;
}

/* If line k opens a docstring, returns the line where it closes, else 0. */
static int py_docstring_end(const char *s, const struct lines *L, int k, int end)
{
	size_t n;
	const char *t = line_trim(s, L, k, &n);
	size_t i = 0;
	while (i < n && i < 2 && strchr("rRuUbBfF", t[i]))
		i++;
	if (i + 3 <= n && (memcmp(t + i, "\"\"\"", 3) == 0 || memcmp(t + i, "'''", 3) == 0)) {
		char q[4] = { t[i], t[i], t[i], 0 };
		const char *rest = t + i + 3;
		size_t rn = n - i - 3;
		for (size_t j = 0; j + 3 <= rn; j++)
			if (memcmp(rest + j, q, 3) == 0)
				return k;
		for (int m = k + 1; m <= end; m++) {
			size_t mn;
			const char *mt = line_trim(s, L, m, &mn);
			for (size_t j = 0; j + 3 <= mn; j++)
				if (memcmp(mt + j, q, 3) == 0)
					return m;
		}
		return 0;
	}
	if (i < n && (t[i] == '"' || t[i] == '\'') && n >= 2 && t[n - 1] == t[i])
		return k;
	return 0;
}

/* 1 when lines a..b hold code beyond blanks, comments, `pass` and `...`. */
static int py_has_code(const char *s, const struct lines *L, int a, int b)
{
	for (int k = a; k <= b; k++) {
		size_t n;
		const char *t = line_trim(s, L, k, &n);
		if (n == 0 || t[0] == '#')
			continue;
		if ((n == 4 && memcmp(t, "pass", 4) == 0) || (n == 3 && memcmp(t, "...", 3) == 0))
			continue;
		return 1;
	}
	return 0;
}

static char *py_doc_text(const char *s, const struct lines *L, int a, int b)
{
	char *raw = lines_text(s, L, a, b, indent_of(s, L, a));
	if (!raw)
		return NULL;
	/* drop the quotes, keep the words */
	char *p = raw;
	while (*p && strchr("rRuUbBfF", *p) && p[1] && strchr("\"'", p[1]))
		p++;
	while (*p == '"' || *p == '\'')
		p++;
	size_t n = strlen(p);
	while (n && (p[n - 1] == '"' || p[n - 1] == '\'' || isspace((unsigned char)p[n - 1])))
		n--;
	char *d = dupn(p, n);
	free(raw);
	return d;
}

static int py_stub(const struct fw_symbol *sym, const char *src, size_t len,
		   const struct lines *L, struct fw_mutation *m)
{
	int inl, sig = py_sig_end(src, L, sym->start, sym->end, &inl);
	if (sig < 0 || inl || sig >= sym->end)
		return 1;
	int first = sig + 1;
	while (first <= sym->end && line_blank(src, L, first))
		first++;
	if (first > sym->end)
		return 1;
	int doc_end = py_docstring_end(src, L, first, sym->end);
	int body = doc_end ? doc_end + 1 : first;
	if (body > sym->end || !py_has_code(src, L, body, sym->end))
		return 1;
	size_t ind = indent_of(src, L, first);
	char stub[256];
	snprintf(stub, sizeof stub, "%.*sraise NotImplementedError\n",
		 (int)(ind < 64 ? ind : 64), src + lstart(L, first));
	size_t keep = doc_end ? lend(L, doc_end) : lend(L, sig);
	m->data = splice_text(src, len, keep, lend(L, sym->end), stub, &m->len);
	m->removed = dupn(src + keep, lend(L, sym->end) - keep);
	m->signature = lines_text(src, L, sym->start, sig, indent_of(src, L, sym->start));
	m->doc = doc_end ? py_doc_text(src, L, first, doc_end) : NULL;
	return m->data && m->removed && m->signature ? 0 : -1;
}

/* ---- brace languages ----------------------------------------------------------------- */

/* Finds the body braces of the function spanning lines start..end: the
 * first '{' outside parentheses, and its match.  Comments and string or
 * character literals are skipped.  Returns 0 or -1. */
static int brace_body(const char *s, const struct lines *L, int start, int end,
		      size_t *open, size_t *close)
{
	size_t i = lstart(L, start), e = lend(L, end);
	int paren = 0, depth = 0;
	*open = (size_t)-1;
	for (; i < e; i++) {
		char c = s[i];
		if (c == '/' && i + 1 < e && s[i + 1] == '/') {
			while (i < e && s[i] != '\n')
				i++;
			continue;
		}
		if (c == '/' && i + 1 < e && s[i + 1] == '*') {
			i += 2;
			while (i + 1 < e && !(s[i] == '*' && s[i + 1] == '/'))
				i++;
			i++;
			continue;
		}
		if (c == '"' || c == '\'' || c == '`') {
			size_t j = i + 1;
			while (j < e && s[j] != c) {
				if (s[j] == '\\')
					j++;
				j++;
			}
			i = j;
			continue;
		}
		if (c == '(')
			paren++;
		else if (c == ')')
			paren--;
		else if (c == '{') {
			if (*open == (size_t)-1) {
				if (paren != 0)
					continue;
				*open = i;
			}
			depth++;
		} else if (c == '}' && *open != (size_t)-1) {
			if (--depth == 0) {
				*close = i;
				return 0;
			}
		}
	}
	return -1;
}

/* ctags gives no end line for some languages (JavaScript, TypeScript in
 * 5.9) and no class scope for Python functions: derive the end from the
 * braces and a Python method from its indentation.  Symbols whose end
 * cannot be found are dropped. */
static int fix_spans(const char *dir, struct fw_symbols *out, char *err, size_t errlen)
{
	char *text = NULL, *cur = NULL;
	size_t len = 0, w = 0;
	struct lines L = { 0 };
	for (size_t i = 0; i < out->n; i++) {
		struct fw_symbol *y = &out->v[i];
		if (!cur || strcmp(cur, y->path) != 0) {
			free(text);
			free(L.off);
			L.off = NULL;
			char p[8200];
			snprintf(p, sizeof p, "%s/%s", dir, y->path);
			text = fw_read_file(p, 0, &len);
			free(cur);
			cur = strdup(y->path);
			if (text && lines_index(&L, text, len) < 0) {
				free(text);
				text = NULL;
			}
		}
		int keep = text != NULL && y->start <= L.n;
		if (keep && y->lang == FW_LANG_PYTHON)
			y->method |= indent_of(text, &L, y->start) > 0;
		if (keep && y->end == 0) {
			size_t open, close;
			keep = brace_body(text, &L, y->start, L.n, &open, &close) == 0;
			if (keep) {
				int e = y->start;
				while (e < L.n && lend(&L, e) <= close)
					e++;
				y->end = e;
			}
		}
		if (!keep) {
			free(y->path);
			free(y->name);
			continue;
		}
		out->v[w++] = *y;
	}
	free(cur);
	free(text);
	free(L.off);
	out->n = w;
	(void)err;
	(void)errlen;
	return 0;
}

static int is_comment_line(const char *t, size_t n)
{
	return (n >= 2 && (memcmp(t, "//", 2) == 0 || memcmp(t, "/*", 2) == 0)) ||
	       (n >= 1 && t[0] == '*') || (n >= 2 && memcmp(t + n - 2, "*/", 2) == 0);
}

/* First line of the C return type when it sits on its own line above the
 * name (`static int\nname(...)`), else start. */
static int c_decl_start(const struct fw_symbol *sym, const char *s, const struct lines *L)
{
	if (sym->lang != FW_LANG_C || sym->start < 2)
		return sym->start;
	size_t n;
	const char *t = line_trim(s, L, sym->start - 1, &n);
	if (n == 0 || t[0] == '#' || is_comment_line(t, n) || strchr(";{}", t[n - 1]) ||
	    t[n - 1] == ')')
		return sym->start;
	return sym->start - 1;
}

/* First line of the comment block right above line k, or k. */
static int comment_above(const char *s, const struct lines *L, int k)
{
	int a = k;
	while (a > 1) {
		size_t n;
		const char *t = line_trim(s, L, a - 1, &n);
		if (n == 0 || !is_comment_line(t, n))
			break;
		a--;
	}
	return a;
}

static const char *brace_stub(enum fw_lang l, const char *src)
{
	switch (l) {
	case FW_LANG_C:
		return strstr(src, "<stdlib.h>") ? "abort(); /* not implemented */"
						 : "__builtin_trap(); /* not implemented */";
	case FW_LANG_GO:
		return "panic(\"not implemented\")";
	default:
		return "throw new Error(\"not implemented\");";
	}
}

static int brace_stub_apply(const struct fw_symbol *sym, const char *src, size_t len,
			    const struct lines *L, struct fw_mutation *m)
{
	size_t open, close;
	if (brace_body(src, L, sym->start, sym->end, &open, &close) < 0)
		return 1;
	int code = 0;
	for (size_t i = open + 1; i < close; i++)
		code |= isalnum((unsigned char)src[i]) != 0;
	if (!code)
		return 1;
	/* Indent the stub like the body's first line, or one level in. */
	const char *body = src + open + 1;
	while (body < src + close && *body != '\n')
		body++;
	char ind[64] = "\t";
	if (body < src + close) {
		body++;
		size_t k = 0;
		while (k < 63 && body + k < src + close && (body[k] == ' ' || body[k] == '\t'))
			k++;
		if (k) {
			memcpy(ind, body, k);
			ind[k] = '\0';
		}
	}
	size_t bl = close;
	while (bl > open && src[bl - 1] != '\n')
		bl--;
	char base[64] = "";
	size_t k = 0;
	while (bl > open && k < 63 && (src[bl + k] == ' ' || src[bl + k] == '\t') && bl + k < close)
		k++;
	if (bl > open) {
		memcpy(base, src + bl, k);
		base[k] = '\0';
	}
	char stub[512];
	snprintf(stub, sizeof stub, "{\n%s%s\n%s", ind, brace_stub(sym->lang, src), base);
	m->data = splice_text(src, len, open, close, stub, &m->len);
	m->removed = dupn(src + open + 1, close - open - 1);
	int a = c_decl_start(sym, src, L);
	size_t sa = lstart(L, a), sb = open;
	while (sb > sa && isspace((unsigned char)src[sb - 1]))
		sb--;
	m->signature = dupn(src + sa, sb - sa);
	int ca = comment_above(src, L, a);
	m->doc = ca < a ? lines_text(src, L, ca, a - 1, indent_of(src, L, ca)) : NULL;
	return m->data && m->removed && m->signature ? 0 : -1;
}

int fw_mutate_stub(const struct fw_symbol *sym, const char *src, size_t len,
		   struct fw_mutation *m)
{
	struct lines L;
	memset(m, 0, sizeof *m);
	if (lines_index(&L, src, len) < 0)
		return -1;
	int rc = sym->lang == FW_LANG_PYTHON ? py_stub(sym, src, len, &L, m)
					     : brace_stub_apply(sym, src, len, &L, m);
	free(L.off);
	if (rc == 0) {
		m->strategy = FW_STUB_BODY;
		m->path = strdup(sym->path);
		if (!m->path || add_target(m, sym->path, sym->name, sym->lang, sym->start,
					   sym->end) < 0)
			rc = -1;
	}
	if (rc != 0)
		fw_mutation_release(m);
	return rc;
}

/* ---- deletion ------------------------------------------------------------------------- */

struct span {
	size_t a, b;
	int la, lb;
};

/* The byte span a deletion of sym removes: decorators or leading comment
 * and return-type line before it, blank lines after it. */
static struct span del_span(const struct fw_symbol *sym, const char *s, const struct lines *L)
{
	int a = sym->start, b = sym->end;
	if (sym->lang == FW_LANG_PYTHON) {
		while (a > 1) {
			size_t n;
			const char *t = line_trim(s, L, a - 1, &n);
			if (n == 0 || t[0] != '@')
				break;
			a--;
		}
	} else {
		a = comment_above(s, L, c_decl_start(sym, s, L));
	}
	while (b < L->n && line_blank(s, L, b + 1))
		b++;
	return (struct span){ lstart(L, a), lend(L, b), a, b };
}

static int span_cmp(const void *x, const void *y)
{
	const struct span *p = x, *q = y;
	return (p->a > q->a) - (p->a < q->a);
}

int fw_mutate_delete(enum fw_strategy strategy, const struct fw_symbol *sym,
		     const struct fw_symbol *const *helpers, size_t nh,
		     const char *src, size_t len, struct fw_mutation *m)
{
	struct lines L;
	memset(m, 0, sizeof *m);
	if (lines_index(&L, src, len) < 0)
		return -1;
	struct span *sp = calloc(nh + 1, sizeof *sp);
	int rc = -1;
	if (!sp)
		goto out;
	sp[0] = del_span(sym, src, &L);
	for (size_t i = 0; i < nh; i++)
		sp[i + 1] = del_span(helpers[i], src, &L);
	qsort(sp, nh + 1, sizeof *sp, span_cmp);
	for (size_t i = 1; i <= nh; i++)
		if (sp[i].a < sp[i - 1].b) {
			rc = 1;
			goto out;
		}
	/* signature and doc of the main target, before it goes */
	if (sym->lang == FW_LANG_PYTHON) {
		int inl, sig = py_sig_end(src, &L, sym->start, sym->end, &inl);
		if (sig < 0)
			sig = sym->start;
		m->signature = lines_text(src, &L, sym->start, sig, indent_of(src, &L, sym->start));
		int first = sig + 1;
		while (first <= sym->end && line_blank(src, &L, first))
			first++;
		int de = !inl && first <= sym->end ? py_docstring_end(src, &L, first, sym->end) : 0;
		m->doc = de ? py_doc_text(src, &L, first, de) : NULL;
	} else {
		size_t open, close;
		int a = c_decl_start(sym, src, &L);
		size_t sa = lstart(&L, a), sb = lend(&L, sym->start);
		if (brace_body(src, &L, sym->start, sym->end, &open, &close) == 0)
			sb = open;
		while (sb > sa && isspace((unsigned char)src[sb - 1]))
			sb--;
		m->signature = dupn(src + sa, sb - sa);
		int ca = comment_above(src, &L, a);
		m->doc = ca < a ? lines_text(src, &L, ca, a - 1, indent_of(src, &L, ca)) : NULL;
	}
	struct fw_buf out = { 0 }, rem = { 0 };
	size_t at = 0;
	for (size_t i = 0; i <= nh; i++) {
		if (fw_buf_append(&out, src + at, sp[i].a - at) < 0 ||
		    fw_buf_append(&rem, src + sp[i].a, sp[i].b - sp[i].a) < 0)
			goto nomem;
		at = sp[i].b;
	}
	if (fw_buf_append(&out, src + at, len - at) < 0 || fw_buf_append(&out, "", 1) < 0 ||
	    fw_buf_append(&rem, "", 1) < 0)
		goto nomem;
	m->data = (char *)out.p;
	m->len = out.n - 1;
	m->removed = (char *)rem.p;
	m->strategy = strategy;
	m->path = strdup(sym->path);
	if (!m->path || add_target(m, sym->path, sym->name, sym->lang, sym->start, sym->end) < 0)
		goto out;
	for (size_t i = 0; i < nh; i++)
		if (add_target(m, helpers[i]->path, helpers[i]->name, helpers[i]->lang,
			       helpers[i]->start, helpers[i]->end) < 0)
			goto out;
	rc = 0;
	goto out;
nomem:
	fw_buf_free(&out);
	fw_buf_free(&rem);
out:
	free(sp);
	free(L.off);
	if (rc != 0)
		fw_mutation_release(m);
	return rc;
}

int fw_mutate_delete_file(const char *path, const char *src, size_t len,
			  const struct fw_symbol *syms, size_t nsyms, struct fw_mutation *m)
{
	memset(m, 0, sizeof *m);
	m->strategy = FW_DELETE_FILE;
	m->path = strdup(path);
	m->removed = dupn(src, len);
	int nl = 0;
	for (size_t i = 0; i < len; i++)
		nl += src[i] == '\n';
	if (len && src[len - 1] != '\n')
		nl++;
	enum fw_lang l = nsyms ? syms[0].lang : fw_lang_of_path(path);
	if (!m->path || !m->removed || add_target(m, path, "", l, 1, nl) < 0)
		goto fail;
	for (size_t i = 0; i < nsyms; i++)
		if (add_target(m, syms[i].path, syms[i].name, syms[i].lang, syms[i].start,
			       syms[i].end) < 0)
			goto fail;
	return 0;
fail:
	fw_mutation_release(m);
	return -1;
}

/* ---- helpers -------------------------------------------------------------------------- */

static int is_ident(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$';
}

/* Counts whole-word occurrences of name in s[a..b). */
static size_t count_word(const char *s, size_t a, size_t b, const char *name)
{
	size_t k = strlen(name), n = 0;
	if (!k)
		return 0;
	for (size_t i = a; i + k <= b; i++) {
		if (s[i] != name[0] || memcmp(s + i, name, k) != 0)
			continue;
		if ((i > 0 && is_ident(s[i - 1])) || (i + k < b && is_ident(s[i + k])))
			continue;
		n++;
		i += k - 1;
	}
	return n;
}

static int is_private(const struct fw_symbol *h, const char *src, const struct lines *L)
{
	const char *n = h->name;
	size_t tn;
	const char *t;
	switch (h->lang) {
	case FW_LANG_PYTHON:
		return n[0] == '_' && !(n[1] == '_' && ends_with(n, "__")) && !h->method;
	case FW_LANG_GO:
		return islower((unsigned char)n[0]) && strcmp(n, "main") && strcmp(n, "init");
	case FW_LANG_C: {
		int a = c_decl_start(h, src, L);
		for (int k = a; k <= h->start; k++) {
			t = line_trim(src, L, k, &tn);
			if (tn >= 6 && memcmp(t, "static", 6) == 0)
				return 1;
		}
		return 0;
	}
	default:
		t = line_trim(src, L, h->start, &tn);
		return !h->method && !(tn >= 6 && memcmp(t, "export", 6) == 0);
	}
}

size_t fw_private_helpers(const struct fw_symbols *syms, size_t target,
			  const struct fw_text *files, size_t nfiles, size_t *out, size_t max)
{
	const struct fw_symbol *t = &syms->v[target];
	const struct fw_text *ft = NULL;
	for (size_t i = 0; i < nfiles; i++)
		if (strcmp(files[i].path, t->path) == 0)
			ft = &files[i];
	if (!ft)
		return 0;
	struct lines L;
	if (lines_index(&L, ft->data, ft->len) < 0)
		return 0;
	size_t ta = lstart(&L, t->start), tb = lend(&L, t->end), found = 0;
	for (size_t i = 0; i < syms->n && found < max; i++) {
		const struct fw_symbol *h = &syms->v[i];
		if (i == target || strcmp(h->path, t->path) != 0 || strcmp(h->name, t->name) == 0)
			continue;
		if (h->start <= t->end && t->start <= h->end)
			continue; /* nested in the target or around it */
		if (!is_private(h, ft->data, &L))
			continue;
		if (count_word(ft->data, ta, tb, h->name) == 0)
			continue;
		/* what the deletion takes, leading comments included: a Go
		 * doc comment starts with the function's own name */
		struct span ts = del_span(t, ft->data, &L), hs = del_span(h, ft->data, &L);
		size_t da = ts.a, db = ts.b, ha = hs.a, hb = hs.b, elsewhere = 0;
		for (size_t f = 0; f < nfiles && !elsewhere; f++) {
			const struct fw_text *x = &files[f];
			if (x != ft) {
				elsewhere = count_word(x->data, 0, x->len, h->name);
				continue;
			}
			size_t lo1 = da < ha ? da : ha, hi1 = da < ha ? db : hb;
			size_t lo2 = da < ha ? ha : da, hi2 = da < ha ? hb : db;
			elsewhere = count_word(x->data, 0, lo1, h->name) +
				    count_word(x->data, hi1, lo2, h->name) +
				    count_word(x->data, hi2, x->len, h->name);
		}
		if (!elsewhere)
			out[found++] = i;
	}
	free(L.off);
	return found;
}

/* ---- problem statement ---------------------------------------------------------------------- */

static void indented(struct fw_buf *b, const char *text)
{
	const char *p = text;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		fw_buf_printf(b, "    %.*s\n", (int)n, p);
		p += n + (nl != NULL);
	}
}

char *fw_task_prompt(const struct fw_mutation *m, const char *const *f2p, size_t nf2p)
{
	struct fw_buf b = { 0 };
	const struct fw_target *t = &m->targets[0];
	switch (m->strategy) {
	case FW_STUB_BODY:
		fw_buf_printf(&b, "The body of the %s function `%s` in `%s` has been replaced "
			      "by a stub that fails with a not-implemented error. Implement it.\n",
			      fw_lang_name(t->lang), t->symbol, t->path);
		break;
	case FW_DELETE_FUNCTION:
		fw_buf_printf(&b, "The %s function `%s` has been removed from `%s`. "
			      "Write it again.\n", fw_lang_name(t->lang), t->symbol, t->path);
		break;
	case FW_DELETE_FEATURE:
		fw_buf_printf(&b, "The %s function `%s` and the private helpers only it used (",
			      fw_lang_name(t->lang), t->symbol);
		for (size_t i = 1; i < m->ntargets; i++)
			fw_buf_printf(&b, "%s`%s`", i > 1 ? ", " : "", m->targets[i].symbol);
		fw_buf_printf(&b, ") have been removed from `%s`. Write them again.\n", t->path);
		break;
	case FW_DELETE_FILE:
		fw_buf_printf(&b, "The %s file `%s` has been removed. Write it again",
			      fw_lang_name(t->lang), t->path);
		if (m->ntargets > 1) {
			fw_buf_puts(&b, "; it defined ");
			for (size_t i = 1; i < m->ntargets; i++)
				fw_buf_printf(&b, "%s`%s`", i > 1 ? ", " : "", m->targets[i].symbol);
		}
		fw_buf_puts(&b, ".\n");
		break;
	default:
		break;
	}
	if (m->signature && *m->signature) {
		fw_buf_puts(&b, "\nSignature:\n");
		indented(&b, m->signature);
	}
	if (m->doc && *m->doc) {
		fw_buf_puts(&b, "\nDocumentation:\n");
		indented(&b, m->doc);
	}
	fw_buf_puts(&b, "\nThese tests fail now and must pass:\n");
	for (size_t i = 0; i < nf2p; i++)
		fw_buf_printf(&b, "- %s\n", f2p[i]);
	fw_buf_puts(&b, "\nThe tests that pass now must keep passing. Do not change the tests.\n");
	if (fw_buf_append(&b, "", 1) < 0) {
		fw_buf_free(&b);
		return NULL;
	}
	return (char *)b.p;
}

/* ---- suite runs ------------------------------------------------------------------------------- */

int fw_suite_run(const char *ws, const char *cmd, enum fw_report_format fmt,
		 double timeout_s, struct fw_report *rep, char *detail, size_t detlen,
		 char *err, size_t errlen)
{
	return fw_suite_run_env(ws, cmd, fmt, timeout_s, NULL, rep, detail, detlen, NULL, 0, err,
				errlen);
}

/* Appends to tail the last max lines of the n bytes at s, each cut to 200
 * bytes, under a heading. */
static void tail_lines(char *tail, size_t taillen, const char *head, const char *s, size_t n,
		       int max)
{
	size_t used = strlen(tail), start;
	int lines = 0;
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
		n--;
	if (n == 0)
		return;
	start = n;
	while (start > 0 && lines < max) {
		start--;
		if (s[start] == '\n' && ++lines == max) {
			start++;
			break;
		}
	}
	used += (size_t)snprintf(tail + used, used < taillen ? taillen - used : 0, "%s\n", head);
	for (size_t i = start; i < n && used + 1 < taillen;) {
		size_t e = i;
		while (e < n && s[e] != '\n')
			e++;
		size_t len = e - i > 200 ? 200 : e - i;
		int k = snprintf(tail + used, taillen - used, "%.*s\n", (int)len, s + i);
		if (k < 0 || (size_t)k >= taillen - used)
			break;
		used += (size_t)k;
		i = e + 1;
	}
}

int fw_suite_run_env(const char *ws, const char *cmd, enum fw_report_format fmt,
		     double timeout_s, const struct fw_env *env, struct fw_report *rep,
		     char *detail, size_t detlen, char *tail, size_t taillen, char *err,
		     size_t errlen)
{
	char rpath[4200];
	snprintf(rpath, sizeof rpath, "%s/%s", ws, FW_REPORT_PATH);
	unlink(rpath);
	fw_report_reset(rep);

	struct fw_sandbox_opts o;
	fw_sandbox_opts_init(&o);
	o.workspace = ws;
	o.timeout_s = timeout_s;
	o.fsize_bytes = 1ull << 30;
	/* Python as grade(1) runs it (-P -s, no autoloaded plugins), so a
	 * task valid here is gradable there */
	const char *vars[] = { "FW_REPORT=" FW_SANDBOX_WORKDIR "/" FW_REPORT_PATH,
			      "PYTHONSAFEPATH=1", "PYTHONNOUSERSITE=1",
			      "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1", NULL };
	o.env = vars;
	const char *binds[2], *evars[8 + FW_ENV_MAXVARS];
	if (fw_env_apply(env, &o, binds, 2, evars, 8 + FW_ENV_MAXVARS) < 0) {
		fw_seterr(err, errlen, "too many variables");
		return -1;
	}
	char *argv[] = { "sh", "-c", (char *)cmd, NULL };
	struct fw_sandbox_result res;
	if (tail && taillen)
		tail[0] = '\0';
	if (fw_sandbox_run(&o, argv, &res, err, errlen) < 0)
		return -1;
	if (tail && taillen) {
		tail_lines(tail, taillen, "stdout:", res.out.data ? res.out.data : "", res.out.len, 20);
		tail_lines(tail, taillen, "stderr:", res.err.data ? res.err.data : "", res.err.len, 20);
	}
	int st = FW_SUITE_OK;
	const char *etail = res.err.data ? res.err.data : "";
	if (res.err.len > 300)
		etail += res.err.len - 300;
	if (res.cause != FW_SANDBOX_OK) {
		fw_seterr(detail, detlen, "%s after %.1f s", fw_sandbox_cause_name(res.cause),
		       res.wall_s);
		st = FW_SUITE_TIMEOUT;
		goto out;
	}
	char perr[256] = "";
	int n;
	struct stat rst;
	if (fmt == FW_REPORT_TAP) {
		n = fw_report_parse_tap(rep, res.out.data ? res.out.data : "", res.out.len, perr,
					sizeof perr);
	} else if (lstat(rpath, &rst) == 0 && !S_ISREG(rst.st_mode)) {
		/* What the sandbox leaves is untrusted: a link or FIFO planted as
		 * the report must not make us read a host file or block. */
		snprintf(perr, sizeof perr, "the report is not a regular file");
		n = -1;
	} else {
		n = fw_report_load(rep, rpath, fmt, perr, sizeof perr);
	}
	if (n < 0 || rep->n == 0) {
		fw_seterr(detail, detlen, "exit %d, %s: %s", res.exit_code,
		       n < 0 ? perr : "no test results", etail);
		for (char *p = detail; p && *p; p++)
			if (*p == '\n' || *p == '\t')
				*p = ' ';
		st = FW_SUITE_NO_REPORT;
	}
out:
	unlink(rpath);
	fw_sandbox_result_free(&res);
	return st;
}
