/*
 * fw_expr.c — parser and evaluator of the record expression language.
 *
 * A recursive-descent parser builds a small tree; paths are compiled with
 * fw_path_parse() and regexes with PCRE2 (JIT when available) at parse
 * time, so evaluation only walks msgpack bytes.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pcre2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_base.h"
#include "fw_expr.h"

/* ---- values ------------------------------------------------------------- */

enum vtype { V_NULL, V_BOOL, V_NUM, V_STR, V_RAW };

struct val {
	enum vtype t;
	int isint;      /* V_NUM: i holds the exact value */
	int64_t i;
	double d;       /* V_NUM (always set), V_BOOL (0/1) */
	const char *s;  /* V_STR */
	size_t n;
	struct fw_mpv raw; /* V_RAW: array, map, bin, ext; also set for V_STR from a record */
};

static struct val v_null(void)
{
	return (struct val){.t = V_NULL};
}

static struct val v_bool(int b)
{
	return (struct val){.t = V_BOOL, .d = b != 0};
}

static struct val v_int(int64_t i)
{
	return (struct val){.t = V_NUM, .isint = 1, .i = i, .d = (double)i};
}

static struct val v_num(double d)
{
	/* Integral results stay exact integers so that == on ids and counts
	 * does not go through doubles. */
	if (d == floor(d) && fabs(d) < 9007199254740992.0)
		return v_int((int64_t)d);
	return (struct val){.t = V_NUM, .d = d};
}

static struct val from_mp(struct fw_mpv v)
{
	struct val r = v_null();
	switch (fw_mp_type(v)) {
	case FW_MP_BOOL: {
		int b = 0;
		fw_mp_bool(v, &b);
		return v_bool(b);
	}
	case FW_MP_INT: {
		int64_t i = 0;
		fw_mp_int(v, &i);
		return v_int(i);
	}
	case FW_MP_UINT: {
		uint64_t u = 0;
		fw_mp_uint(v, &u);
		if (u <= INT64_MAX)
			return v_int((int64_t)u);
		r.t = V_NUM;
		r.d = (double)u;
		return r;
	}
	case FW_MP_FLOAT:
		r.t = V_NUM;
		fw_mp_double(v, &r.d);
		return r;
	case FW_MP_STR:
		r.t = V_STR;
		fw_mp_str(v, &r.s, &r.n);
		r.raw = v;
		return r;
	case FW_MP_ARRAY:
	case FW_MP_MAP:
	case FW_MP_BIN:
	case FW_MP_EXT:
		r.t = V_RAW;
		r.raw = v;
		return r;
	default:
		return r;
	}
}

static int truthy(struct val v)
{
	switch (v.t) {
	case V_NULL: return 0;
	case V_BOOL: return v.d != 0;
	case V_NUM: return v.d != 0;
	case V_STR: return v.n != 0;
	case V_RAW: {
		struct fw_mp_iter it;
		int64_t n = fw_mp_iter_init(&it, v.raw);
		return n != 0; /* bin and ext (-1) are true */
	}
	}
	return 0;
}

/* ---- tree ------------------------------------------------------------------ */

enum op {
	N_LIT, N_PATH, N_NOT, N_NEG, N_AND, N_OR,
	N_EQ, N_NE, N_LT, N_LE, N_GT, N_GE, N_MATCH, N_NMATCH,
	N_ADD, N_SUB, N_MUL, N_DIV, N_MOD,
	N_LEN, N_HAS, N_ANY, N_ALL, N_COUNT, N_CONTAINS, N_STARTS, N_ENDS, N_LOWER, N_TYPE,
};

static const struct {
	const char *name;
	enum op op;
	int nargs;
} funcs[] = {
	{"len", N_LEN, 1},       {"has", N_HAS, 1},          {"any", N_ANY, 2},
	{"all", N_ALL, 2},       {"count", N_COUNT, 2},      {"contains", N_CONTAINS, 2},
	{"startswith", N_STARTS, 2}, {"endswith", N_ENDS, 2}, {"lower", N_LOWER, 1},
	{"type", N_TYPE, 1},
};

struct node {
	enum op op;
	struct node *a, *b;
	struct val lit;         /* N_LIT; a string literal points into str */
	char *str;              /* owned literal bytes */
	struct fw_path *path;   /* N_PATH */
	pcre2_code *re;         /* N_MATCH, N_NMATCH */
	pcre2_match_data *md;
	struct fw_buf scratch;  /* N_LOWER result */
};

struct fw_expr {
	struct node *root;
};

static void node_free(struct node *n)
{
	if (!n)
		return;
	node_free(n->a);
	node_free(n->b);
	free(n->str);
	fw_path_free(n->path);
	if (n->md)
		pcre2_match_data_free(n->md);
	if (n->re)
		pcre2_code_free(n->re);
	fw_buf_release(&n->scratch);
	free(n);
}

void fw_expr_free(struct fw_expr *e)
{
	if (!e)
		return;
	node_free(e->root);
	free(e);
}

/* ---- lexer ----------------------------------------------------------------- */

enum tok {
	T_END, T_PATH, T_NUM, T_STR, T_IDENT, T_LP, T_RP, T_COMMA,
	T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE, T_MATCH, T_NMATCH,
	T_PLUS, T_MINUS, T_STAR, T_SLASH, T_PCT, T_AND, T_OR, T_NOT, T_BAD,
};

struct parser {
	const char *src;
	size_t pos;       /* start of the current token */
	size_t end;       /* end of the current token */
	enum tok t;
	int depth;
	char *err;
	size_t errlen;
	size_t errcol;
	int failed;
};

static void fail(struct parser *p, size_t at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void fail(struct parser *p, size_t at, const char *fmt, ...)
{
	if (p->failed)
		return;
	p->failed = 1;
	p->errcol = at + 1;
	int k = snprintf(p->err, p->errlen, "column %zu: ", at + 1);
	if (k >= 0 && (size_t)k < p->errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(p->err + k, p->errlen - (size_t)k, fmt, ap);
		va_end(ap);
	}
}

static int ident_start(int c)
{
	return isalpha(c) || c == '_' || c == '$' || c >= 0x80;
}

static int ident_char(int c)
{
	return ident_start(c) || isdigit(c);
}

/* Skips a quoted string starting at s[i] (the quote); returns the index
 * after the closing quote, or 0 when unterminated. */
static size_t skip_quoted(const char *s, size_t i)
{
	char q = s[i++];
	while (s[i] && s[i] != q) {
		if (s[i] == '\\' && s[i + 1])
			i++;
		i++;
	}
	return s[i] == q ? i + 1 : 0;
}

static void next(struct parser *p)
{
	const char *s = p->src;
	size_t i = p->end;
	while (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')
		i++;
	p->pos = i;
	unsigned char c = (unsigned char)s[i];
	enum tok t = T_BAD;
	size_t e = i + 1;
	if (c == 0) {
		t = T_END;
		e = i;
	} else if (c == '.') {
		/* A path: segments .key ."key" [N] ["key"] up to the first other
		 * character; fw_path_parse() checks the details. */
		t = T_PATH;
		e = i;
		for (;;) {
			if (s[e] == '.') {
				e++;
				if (s[e] == '"') {
					size_t k = skip_quoted(s, e);
					if (!k) {
						fail(p, e, "unterminated quoted key");
						break;
					}
					e = k;
				} else {
					while (ident_char((unsigned char)s[e]))
						e++;
				}
			} else if (s[e] == '[') {
				size_t k = e + 1;
				if (s[k] == '"') {
					k = skip_quoted(s, k);
					if (!k) {
						fail(p, e + 1, "unterminated quoted key");
						break;
					}
				} else {
					if (s[k] == '-')
						k++;
					while (isdigit((unsigned char)s[k]))
						k++;
				}
				if (s[k] != ']') {
					fail(p, k, "expected ']' in path");
					break;
				}
				e = k + 1;
			} else {
				break;
			}
		}
	} else if (isdigit(c)) {
		t = T_NUM;
		e = i;
		while (isdigit((unsigned char)s[e]))
			e++;
		if (s[e] == '.' && isdigit((unsigned char)s[e + 1])) {
			e++;
			while (isdigit((unsigned char)s[e]))
				e++;
		}
		if (s[e] == 'e' || s[e] == 'E') {
			size_t k = e + 1;
			if (s[k] == '+' || s[k] == '-')
				k++;
			if (isdigit((unsigned char)s[k])) {
				while (isdigit((unsigned char)s[k]))
					k++;
				e = k;
			}
		}
	} else if (c == '"' || c == '\'') {
		t = T_STR;
		e = skip_quoted(s, i);
		if (!e) {
			fail(p, i, "unterminated string");
			e = strlen(s);
		}
	} else if (ident_start(c)) {
		e = i;
		while (ident_char((unsigned char)s[e]))
			e++;
		size_t n = e - i;
		if (n == 3 && !memcmp(s + i, "and", 3))
			t = T_AND;
		else if (n == 2 && !memcmp(s + i, "or", 2))
			t = T_OR;
		else if (n == 3 && !memcmp(s + i, "not", 3))
			t = T_NOT;
		else
			t = T_IDENT;
	} else {
		switch (c) {
		case '(': t = T_LP; break;
		case ')': t = T_RP; break;
		case ',': t = T_COMMA; break;
		case '+': t = T_PLUS; break;
		case '-': t = T_MINUS; break;
		case '*': t = T_STAR; break;
		case '/': t = T_SLASH; break;
		case '%': t = T_PCT; break;
		case '<':
			t = T_LT;
			if (s[i + 1] == '=')
				t = T_LE, e++;
			break;
		case '>':
			t = T_GT;
			if (s[i + 1] == '=')
				t = T_GE, e++;
			break;
		case '=':
			if (s[i + 1] == '=')
				t = T_EQ, e++;
			else if (s[i + 1] == '~')
				t = T_MATCH, e++;
			break;
		case '!':
			t = T_NOT;
			if (s[i + 1] == '=')
				t = T_NE, e++;
			else if (s[i + 1] == '~')
				t = T_NMATCH, e++;
			break;
		case '&':
			if (s[i + 1] == '&')
				t = T_AND, e++;
			break;
		case '|':
			if (s[i + 1] == '|')
				t = T_OR, e++;
			break;
		}
	}
	p->t = t;
	p->end = e;
}

/* Describes the current token for messages. */
static void tok_desc(struct parser *p, char *buf, size_t n)
{
	if (p->t == T_END) {
		snprintf(buf, n, "end of expression");
		return;
	}
	size_t len = p->end - p->pos;
	if (len == 0)
		len = 1;
	if (len > 24)
		len = 24;
	snprintf(buf, n, "'%.*s'", (int)len, p->src + p->pos);
}

static void unexpected(struct parser *p, const char *want)
{
	char d[64];
	tok_desc(p, d, sizeof d);
	if (p->t == T_BAD)
		fail(p, p->pos, "unexpected character %s%s%s", d, want ? ", expected " : "",
		     want ? want : "");
	else
		fail(p, p->pos, "expected %s, found %s", want ? want : "an operand", d);
}

static struct node *mk(struct parser *p, enum op op, struct node *a, struct node *b)
{
	struct node *n = calloc(1, sizeof *n);
	if (!n) {
		fail(p, p->pos, "out of memory");
		node_free(a);
		node_free(b);
		return NULL;
	}
	n->op = op;
	n->a = a;
	n->b = b;
	return n;
}

/* Appends the UTF-8 encoding of code point cp to b. */
static int put_utf8(struct fw_buf *b, uint32_t cp)
{
	uint8_t u[4];

	return fw_buf_append(b, u, fw_utf8_put(u, cp));
}

static int hexval(const char *s, uint32_t *out)
{
	uint32_t v = 0;
	for (int k = 0; k < 4; k++) {
		int c = (unsigned char)s[k];
		if (!isxdigit(c))
			return -1;
		v = v * 16 + (uint32_t)(isdigit(c) ? c - '0' : (tolower(c) - 'a' + 10));
	}
	*out = v;
	return 0;
}

/* Unescapes the string token at p->pos..p->end.  An unknown escape keeps its
 * backslash, so regexes read naturally: "\d+" is the pattern \d+. */
static struct node *string_lit(struct parser *p)
{
	struct fw_buf b = {0};
	const char *s = p->src;
	size_t i = p->pos + 1, e = p->end - 1;
	while (i < e) {
		char c = s[i];
		if (c != '\\') {
			if (fw_buf_append(&b, &c, 1) < 0)
				goto oom;
			i++;
			continue;
		}
		char x = s[i + 1];
		const char *rep = NULL;
		switch (x) {
		case 'n': rep = "\n"; break;
		case 't': rep = "\t"; break;
		case 'r': rep = "\r"; break;
		case '"': rep = "\""; break;
		case '\'': rep = "'"; break;
		case '\\': rep = "\\"; break;
		case '/': rep = "/"; break;
		case 'u': {
			uint32_t cp, lo;
			if (hexval(s + i + 2, &cp) < 0) {
				fail(p, i, "bad \\u escape");
				fw_buf_release(&b);
				return NULL;
			}
			i += 6;
			if (cp >= 0xd800 && cp < 0xdc00 && s[i] == '\\' && s[i + 1] == 'u' &&
			    hexval(s + i + 2, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				i += 6;
			} else if (cp >= 0xd800 && cp < 0xe000) {
				fail(p, i - 6, "lone surrogate in \\u escape");
				fw_buf_release(&b);
				return NULL;
			}
			if (put_utf8(&b, cp) < 0)
				goto oom;
			continue;
		}
		}
		if (rep) {
			if (fw_buf_append(&b, rep, 1) < 0)
				goto oom;
		} else if (fw_buf_append(&b, s + i, 2) < 0) {
			goto oom;
		}
		i += 2;
	}
	struct node *n = mk(p, N_LIT, NULL, NULL);
	if (!n) {
		fw_buf_release(&b);
		return NULL;
	}
	/* The node owns the bytes; keep a NUL after them for PCRE2 messages. */
	if (fw_buf_append(&b, "", 1) < 0) {
		fw_buf_release(&b);
		node_free(n);
		goto oom;
	}
	n->str = (char *)b.p;
	n->lit.t = V_STR;
	n->lit.s = n->str;
	n->lit.n = b.n - 1;
	return n;
oom:
	fw_buf_release(&b);
	fail(p, p->pos, "out of memory");
	return NULL;
}

static struct node *parse_or(struct parser *p);

static struct node *parse_primary(struct parser *p)
{
	struct node *n = NULL;
	char pe[256];
	switch (p->t) {
	case T_PATH: {
		size_t len = p->end - p->pos;
		char *text = strndup(p->src + p->pos, len);
		if (!text) {
			fail(p, p->pos, "out of memory");
			return NULL;
		}
		struct fw_path *path = fw_path_parse(text, pe, sizeof pe);
		free(text);
		if (!path) {
			fail(p, p->pos, "bad path: %s", pe);
			return NULL;
		}
		if (!(n = mk(p, N_PATH, NULL, NULL))) {
			fw_path_free(path);
			return NULL;
		}
		n->path = path;
		next(p);
		return n;
	}
	case T_NUM: {
		char *end;
		errno = 0;
		const char *s = p->src + p->pos;
		size_t len = p->end - p->pos;
		if (!(n = mk(p, N_LIT, NULL, NULL)))
			return NULL;
		if (memchr(s, '.', len) || memchr(s, 'e', len) || memchr(s, 'E', len)) {
			n->lit = v_num(strtod(s, &end));
		} else {
			long long v = strtoll(s, &end, 10);
			n->lit = errno == ERANGE ? (struct val){.t = V_NUM, .d = strtod(s, &end)} : v_int(v);
		}
		next(p);
		return n;
	}
	case T_STR:
		n = string_lit(p);
		if (n)
			next(p);
		return n;
	case T_LP:
		if (++p->depth > FW_EXPR_MAX_DEPTH) {
			fail(p, p->pos, "expression nested too deeply");
			return NULL;
		}
		next(p);
		n = parse_or(p);
		p->depth--;
		if (!n)
			return NULL;
		if (p->t != T_RP) {
			unexpected(p, "')'");
			node_free(n);
			return NULL;
		}
		next(p);
		return n;
	case T_IDENT: {
		const char *s = p->src + p->pos;
		size_t len = p->end - p->pos, at = p->pos;
		if ((len == 4 && !memcmp(s, "true", 4)) || (len == 5 && !memcmp(s, "false", 5))) {
			if (!(n = mk(p, N_LIT, NULL, NULL)))
				return NULL;
			n->lit = v_bool(len == 4);
			next(p);
			return n;
		}
		if (len == 4 && !memcmp(s, "null", 4)) {
			if (!(n = mk(p, N_LIT, NULL, NULL)))
				return NULL;
			next(p);
			return n;
		}
		size_t f;
		for (f = 0; f < sizeof funcs / sizeof *funcs; f++)
			if (strlen(funcs[f].name) == len && !memcmp(funcs[f].name, s, len))
				break;
		next(p);
		if (f == sizeof funcs / sizeof *funcs) {
			if (p->t == T_LP)
				fail(p, at, "unknown function '%.*s'", (int)len, s);
			else
				fail(p, at, "unexpected word '%.*s' (paths start with '.', strings are quoted)",
				     (int)len, s);
			return NULL;
		}
		if (p->t != T_LP) {
			unexpected(p, "'(' after a function name");
			return NULL;
		}
		if (++p->depth > FW_EXPR_MAX_DEPTH) {
			fail(p, p->pos, "expression nested too deeply");
			return NULL;
		}
		next(p);
		if (!(n = mk(p, funcs[f].op, NULL, NULL)))
			return NULL;
		size_t argat = p->pos;
		if (!(n->a = parse_or(p)))
			goto bad;
		if (funcs[f].op == N_HAS && n->a->op != N_PATH) {
			fail(p, argat, "has() takes a path");
			goto bad;
		}
		if (funcs[f].nargs == 2) {
			if (p->t != T_COMMA) {
				unexpected(p, "','");
				goto bad;
			}
			next(p);
			if (!(n->b = parse_or(p)))
				goto bad;
		}
		if (p->t != T_RP) {
			unexpected(p, funcs[f].nargs == 2 ? "')'" : "')' (one argument)");
			goto bad;
		}
		p->depth--;
		next(p);
		return n;
bad:
		node_free(n);
		return NULL;
	}
	default:
		unexpected(p, NULL);
		return NULL;
	}
}

static struct node *parse_unary(struct parser *p)
{
	if (p->t == T_MINUS) {
		if (++p->depth > FW_EXPR_MAX_DEPTH) {
			fail(p, p->pos, "expression nested too deeply");
			return NULL;
		}
		next(p);
		struct node *a = parse_unary(p);
		p->depth--;
		return a ? mk(p, N_NEG, a, NULL) : NULL;
	}
	return parse_primary(p);
}

static struct node *parse_mul(struct parser *p)
{
	struct node *a = parse_unary(p);
	while (a && (p->t == T_STAR || p->t == T_SLASH || p->t == T_PCT)) {
		enum op op = p->t == T_STAR ? N_MUL : p->t == T_SLASH ? N_DIV : N_MOD;
		next(p);
		struct node *b = parse_unary(p);
		a = b ? mk(p, op, a, b) : (node_free(a), NULL);
	}
	return a;
}

static struct node *parse_add(struct parser *p)
{
	struct node *a = parse_mul(p);
	while (a && (p->t == T_PLUS || p->t == T_MINUS)) {
		enum op op = p->t == T_PLUS ? N_ADD : N_SUB;
		next(p);
		struct node *b = parse_mul(p);
		a = b ? mk(p, op, a, b) : (node_free(a), NULL);
	}
	return a;
}

static struct node *compile_regex(struct parser *p, struct node *n, size_t at)
{
	int ec;
	PCRE2_SIZE eo;
	uint32_t opts = PCRE2_UTF;
#ifdef PCRE2_MATCH_INVALID_UTF
	opts |= PCRE2_MATCH_INVALID_UTF;
#else
	opts |= PCRE2_NO_UTF_CHECK;
#endif
	const struct node *lit = n->b;
	n->re = pcre2_compile((PCRE2_SPTR)lit->lit.s, lit->lit.n, opts, &ec, &eo, NULL);
	if (!n->re) {
		PCRE2_UCHAR msg[160];
		pcre2_get_error_message(ec, msg, sizeof msg);
		fail(p, at, "bad regex at offset %zu: %s", (size_t)eo, (char *)msg);
		node_free(n);
		return NULL;
	}
	pcre2_jit_compile(n->re, PCRE2_JIT_COMPLETE);
	if (!(n->md = pcre2_match_data_create_from_pattern(n->re, NULL))) {
		fail(p, at, "out of memory");
		node_free(n);
		return NULL;
	}
	return n;
}

static struct node *parse_cmp(struct parser *p)
{
	struct node *a = parse_add(p);
	if (!a)
		return NULL;
	enum op op;
	switch (p->t) {
	case T_EQ: op = N_EQ; break;
	case T_NE: op = N_NE; break;
	case T_LT: op = N_LT; break;
	case T_LE: op = N_LE; break;
	case T_GT: op = N_GT; break;
	case T_GE: op = N_GE; break;
	case T_MATCH: op = N_MATCH; break;
	case T_NMATCH: op = N_NMATCH; break;
	default: return a;
	}
	next(p);
	size_t at = p->pos;
	struct node *b = parse_add(p);
	if (!b) {
		node_free(a);
		return NULL;
	}
	struct node *n = mk(p, op, a, b);
	if (!n)
		return NULL;
	if (op == N_MATCH || op == N_NMATCH) {
		if (b->op != N_LIT || b->lit.t != V_STR) {
			fail(p, at, "the right side of =~ must be a string literal");
			node_free(n);
			return NULL;
		}
		return compile_regex(p, n, at);
	}
	if (p->t >= T_EQ && p->t <= T_NMATCH) {
		fail(p, p->pos, "comparisons do not chain: use 'and' or parentheses");
		node_free(n);
		return NULL;
	}
	return n;
}

/* `not` binds looser than comparisons: not .a == 1 is not (.a == 1). */
static struct node *parse_not(struct parser *p)
{
	if (p->t == T_NOT) {
		if (++p->depth > FW_EXPR_MAX_DEPTH) {
			fail(p, p->pos, "expression nested too deeply");
			return NULL;
		}
		next(p);
		struct node *a = parse_not(p);
		p->depth--;
		return a ? mk(p, N_NOT, a, NULL) : NULL;
	}
	return parse_cmp(p);
}

static struct node *parse_and(struct parser *p)
{
	struct node *a = parse_not(p);
	while (a && p->t == T_AND) {
		next(p);
		struct node *b = parse_not(p);
		a = b ? mk(p, N_AND, a, b) : (node_free(a), NULL);
	}
	return a;
}

static struct node *parse_or(struct parser *p)
{
	if (++p->depth > FW_EXPR_MAX_DEPTH) {
		fail(p, p->pos, "expression nested too deeply");
		return NULL;
	}
	struct node *a = parse_and(p);
	while (a && p->t == T_OR) {
		next(p);
		struct node *b = parse_and(p);
		a = b ? mk(p, N_OR, a, b) : (node_free(a), NULL);
	}
	p->depth--;
	return a;
}

struct fw_expr *fw_expr_parse(const char *src, char *err, size_t errlen, size_t *col)
{
	struct parser p = {.src = src, .err = err, .errlen = errlen};
	if (col)
		*col = 0;
	if (errlen)
		err[0] = 0;
	next(&p);
	struct node *root = NULL;
	if (!p.failed) {
		if (p.t == T_END)
			fail(&p, p.pos, "empty expression");
		else
			root = parse_or(&p);
	}
	if (root && !p.failed && p.t != T_END) {
		char d[64];
		tok_desc(&p, d, sizeof d);
		fail(&p, p.pos, "unexpected %s after the expression", d);
	}
	struct fw_expr *e = NULL;
	if (!p.failed && root) {
		e = calloc(1, sizeof *e);
		if (!e)
			fail(&p, 0, "out of memory");
		else
			e->root = root;
	}
	if (!e) {
		node_free(root);
		if (col)
			*col = p.errcol;
		return NULL;
	}
	return e;
}

/* ---- evaluation ---------------------------------------------------------- */

static struct val eval(struct node *n, struct fw_mpv cur);

/* Three-way comparison of a and b: sets *c and returns 1 when they are
 * comparable (two numbers, two strings, two bools, two nulls). */
static int compare(struct val a, struct val b, int *c)
{
	if (a.t != b.t)
		return 0;
	switch (a.t) {
	case V_NULL:
		*c = 0;
		return 1;
	case V_BOOL:
		*c = (a.d > b.d) - (a.d < b.d);
		return 1;
	case V_NUM:
		if (a.isint && b.isint)
			*c = (a.i > b.i) - (a.i < b.i);
		else if (isnan(a.d) || isnan(b.d))
			return 0;
		else
			*c = (a.d > b.d) - (a.d < b.d);
		return 1;
	case V_STR: {
		size_t m = a.n < b.n ? a.n : b.n;
		int r = m ? memcmp(a.s, b.s, m) : 0;
		*c = r ? (r > 0) - (r < 0) : (a.n > b.n) - (a.n < b.n);
		return 1;
	}
	case V_RAW:
		/* Containers are equal when their encodings are. */
		if (a.raw.n == b.raw.n && memcmp(a.raw.p, b.raw.p, a.raw.n) == 0) {
			*c = 0;
			return 1;
		}
		return 0;
	}
	return 0;
}

static struct val arith(enum op op, struct val a, struct val b)
{
	if (a.t != V_NUM || b.t != V_NUM)
		return v_null();
	if (a.isint && b.isint) {
		int64_t r;
		switch (op) {
		case N_ADD:
			if (!__builtin_add_overflow(a.i, b.i, &r))
				return v_int(r);
			break;
		case N_SUB:
			if (!__builtin_sub_overflow(a.i, b.i, &r))
				return v_int(r);
			break;
		case N_MUL:
			if (!__builtin_mul_overflow(a.i, b.i, &r))
				return v_int(r);
			break;
		case N_MOD:
			if (b.i == 0 || (b.i == -1 && a.i == INT64_MIN))
				return v_null();
			return v_int(a.i % b.i);
		default:
			break;
		}
	}
	switch (op) {
	case N_ADD: return v_num(a.d + b.d);
	case N_SUB: return v_num(a.d - b.d);
	case N_MUL: return v_num(a.d * b.d);
	case N_DIV: return b.d == 0 ? v_null() : v_num(a.d / b.d);
	case N_MOD: return b.d == 0 ? v_null() : v_num(fmod(a.d, b.d));
	default: return v_null();
	}
}

static struct val quantify(struct node *n, struct fw_mpv cur)
{
	struct val x = eval(n->a, cur);
	struct fw_mp_iter it;
	int64_t count = 0;
	if (x.t != V_RAW)
		return n->op == N_COUNT ? v_int(0) : v_bool(0);
	enum fw_mp_type t = fw_mp_type(x.raw);
	if (fw_mp_iter_init(&it, x.raw) < 0)
		return n->op == N_COUNT ? v_int(0) : v_bool(0);
	struct fw_mpv el;
	while (fw_mp_iter_next(&it, &el) == 1) {
		if (t == FW_MP_MAP && fw_mp_iter_next(&it, &el) != 1)
			break;
		int ok = truthy(eval(n->b, el));
		if (n->op == N_ANY && ok)
			return v_bool(1);
		if (n->op == N_ALL && !ok)
			return v_bool(0);
		count += ok;
	}
	if (n->op == N_COUNT)
		return v_int(count);
	return v_bool(n->op == N_ALL);
}

static struct val eval(struct node *n, struct fw_mpv cur)
{
	struct val a, b;
	int c;
	switch (n->op) {
	case N_LIT:
		return n->lit;
	case N_PATH: {
		struct fw_mpv v;
		if (!fw_path_get(n->path, cur, &v))
			return v_null();
		return from_mp(v);
	}
	case N_NOT:
		return v_bool(!truthy(eval(n->a, cur)));
	case N_NEG:
		a = eval(n->a, cur);
		if (a.t != V_NUM)
			return v_null();
		if (a.isint && a.i != INT64_MIN)
			return v_int(-a.i);
		return v_num(-a.d);
	case N_AND:
		return v_bool(truthy(eval(n->a, cur)) && truthy(eval(n->b, cur)));
	case N_OR:
		return v_bool(truthy(eval(n->a, cur)) || truthy(eval(n->b, cur)));
	case N_EQ:
	case N_NE:
		a = eval(n->a, cur);
		b = eval(n->b, cur);
		{
			int eq = compare(a, b, &c) && c == 0;
			return v_bool(n->op == N_EQ ? eq : !eq);
		}
	case N_LT:
	case N_LE:
	case N_GT:
	case N_GE:
		a = eval(n->a, cur);
		b = eval(n->b, cur);
		if (a.t == V_NULL || a.t == V_RAW || !compare(a, b, &c))
			return v_bool(0);
		switch (n->op) {
		case N_LT: return v_bool(c < 0);
		case N_LE: return v_bool(c <= 0);
		case N_GT: return v_bool(c > 0);
		default: return v_bool(c >= 0);
		}
	case N_MATCH:
	case N_NMATCH: {
		a = eval(n->a, cur);
		int m = 0;
		if (a.t == V_STR)
			m = pcre2_match(n->re, (PCRE2_SPTR)(a.s ? a.s : ""), a.n, 0, 0, n->md, NULL) >= 0;
		return v_bool(n->op == N_MATCH ? m : !m);
	}
	case N_ADD:
	case N_SUB:
	case N_MUL:
	case N_DIV:
	case N_MOD:
		return arith(n->op, eval(n->a, cur), eval(n->b, cur));
	case N_LEN: {
		a = eval(n->a, cur);
		struct fw_mp_iter it;
		switch (a.t) {
		case V_NULL: return v_int(0);
		case V_STR: return v_int((int64_t)fw_utf8_count(a.s, a.n));
		case V_NUM: return v_num(fabs(a.d));
		case V_RAW: {
			int64_t k = fw_mp_iter_init(&it, a.raw);
			if (k >= 0)
				return v_int(k);
			const uint8_t *bp;
			size_t bn;
			int8_t et;
			if (fw_mp_bin(a.raw, &bp, &bn) == 0 || fw_mp_ext(a.raw, &et, &bp, &bn) == 0)
				return v_int((int64_t)bn);
			return v_null();
		}
		default: return v_null();
		}
	}
	case N_HAS: {
		struct fw_mpv v;
		return v_bool(fw_path_get(n->a->path, cur, &v));
	}
	case N_ANY:
	case N_ALL:
	case N_COUNT:
		return quantify(n, cur);
	case N_CONTAINS:
	case N_STARTS:
	case N_ENDS:
		a = eval(n->a, cur);
		b = eval(n->b, cur);
		if (a.t != V_STR || b.t != V_STR || b.n > a.n)
			return v_bool(0);
		if (b.n == 0)
			return v_bool(1);
		if (n->op == N_STARTS)
			return v_bool(memcmp(a.s, b.s, b.n) == 0);
		if (n->op == N_ENDS)
			return v_bool(memcmp(a.s + a.n - b.n, b.s, b.n) == 0);
		return v_bool(memmem(a.s, a.n, b.s, b.n) != NULL);
	case N_LOWER:
		a = eval(n->a, cur);
		if (a.t != V_STR)
			return v_null();
		fw_buf_reset(&n->scratch);
		if (fw_buf_reserve(&n->scratch, a.n + 1) < 0)
			return v_null();
		for (size_t i = 0; i < a.n; i++)
			n->scratch.p[i] = (uint8_t)tolower((unsigned char)a.s[i]);
		n->scratch.n = a.n;
		a.s = (const char *)n->scratch.p;
		a.raw = (struct fw_mpv){0};
		return a;
	case N_TYPE: {
		static const char *names[] = {"null", "bool", "number", "string"};
		a = eval(n->a, cur);
		const char *name = a.t == V_RAW ? fw_mp_type_name(fw_mp_type(a.raw)) : names[a.t];
		if (a.t == V_RAW && fw_mp_type(a.raw) == FW_MP_MAP)
			name = "object";
		struct val r = {.t = V_STR, .s = name, .n = strlen(name)};
		return r;
	}
	}
	return v_null();
}

int fw_expr_test(struct fw_expr *e, struct fw_mpv rec)
{
	return truthy(eval(e->root, rec));
}

int fw_expr_eval_mp(struct fw_expr *e, struct fw_mpv rec, struct fw_buf *out)
{
	struct val v = eval(e->root, rec);
	msgpack_packer pk;
	fw_buf_packer(&pk, out);
	switch (v.t) {
	case V_NULL: return msgpack_pack_nil(&pk) ? -1 : 0;
	case V_BOOL: return (v.d ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk)) ? -1 : 0;
	case V_NUM:
		if (v.isint)
			return msgpack_pack_int64(&pk, v.i) ? -1 : 0;
		return msgpack_pack_double(&pk, v.d) ? -1 : 0;
	case V_STR:
		if (msgpack_pack_str(&pk, v.n) || msgpack_pack_str_body(&pk, v.s, v.n))
			return -1;
		return 0;
	case V_RAW:
		return fw_buf_append(out, v.raw.p, v.raw.n);
	}
	return 0;
}
