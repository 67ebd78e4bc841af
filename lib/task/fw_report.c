/*
 * fw_report.c — JUnit XML and TAP result parsers (see fw_report.h).
 *
 * The XML reader is a small tolerant scanner, not a validating parser: it
 * walks tags, skips comments, processing instructions, doctype and CDATA,
 * decodes the five named entities and numeric references in attribute
 * values, and only interprets <testsuite(s)>, <testcase> and the outcome
 * children of a testcase.  That is all a JUnit report needs, and it keeps
 * the build free of an XML library.
 *
 * `go test -json` lines are JSON objects, read with jansson.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fw_base.h"
#include "fw_report.h"

struct fw_report *fw_report_new(void)
{
	struct fw_report *r = calloc(1, sizeof *r);
	if (r)
		r->planned = -1;
	return r;
}

void fw_report_reset(struct fw_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		free(r->tests[i].id);
		free(r->tests[i].message);
	}
	r->n = 0;
	r->planned = -1;
	r->bailed = 0;
	r->docs = 0;
}

void fw_report_free(struct fw_report *r)
{
	if (!r)
		return;
	fw_report_reset(r);
	free(r->tests);
	free(r);
}

const char *fw_outcome_name(enum fw_outcome o)
{
	switch (o) {
	case FW_PASS: return "pass";
	case FW_SKIP: return "skip";
	case FW_XFAIL: return "xfail";
	case FW_FAIL: return "fail";
	case FW_ERROR: return "error";
	}
	return "?";
}

/* Takes ownership of id and message (both malloc'd; message may be NULL). */
static int add(struct fw_report *r, char *id, enum fw_outcome o, double t, char *message)
{
	if (!id) {
		free(message);
		return -1;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		struct fw_test_result *p = realloc(r->tests, cap * sizeof *p);
		if (!p) {
			free(id);
			free(message);
			return -1;
		}
		r->tests = p;
		r->cap = cap;
	}
	r->tests[r->n++] = (struct fw_test_result){ id, o, t, message };
	return 0;
}

static int cmp_result(const void *a, const void *b)
{
	const struct fw_test_result *x = a, *y = b;
	int c = strcmp(x->id, y->id);
	/* Among equal ids put the worst outcome first so merging keeps it. */
	return c ? c : (int)y->outcome - (int)x->outcome;
}

/* Sorts by id and merges duplicates, keeping the worse outcome. */
static void normalize(struct fw_report *r)
{
	if (r->n < 2)
		return;
	qsort(r->tests, r->n, sizeof *r->tests, cmp_result);
	size_t w = 0;
	for (size_t i = 0; i < r->n; i++) {
		if (w > 0 && strcmp(r->tests[w - 1].id, r->tests[i].id) == 0) {
			free(r->tests[i].id);
			free(r->tests[i].message);
			continue;
		}
		r->tests[w++] = r->tests[i];
	}
	r->n = w;
}

const struct fw_test_result *fw_report_find(const struct fw_report *r, const char *id)
{
	size_t lo = 0, hi = r->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(r->tests[mid].id, id);
		if (c == 0)
			return &r->tests[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int fw_report_failing(const struct fw_report *r, const char *id)
{
	const struct fw_test_result *t = fw_report_find(r, id);
	return !t || t->outcome == FW_FAIL || t->outcome == FW_ERROR;
}

int fw_report_is(const struct fw_report *r, const char *id, enum fw_outcome o)
{
	const struct fw_test_result *t = fw_report_find(r, id);
	return t && t->outcome == o;
}

size_t fw_report_count(const struct fw_report *r, enum fw_outcome o)
{
	size_t k = 0;
	for (size_t i = 0; i < r->n; i++)
		k += r->tests[i].outcome == o;
	return k;
}

/* ---- JUnit XML -------------------------------------------------------------- */

#define MAX_ATTRS 16

struct attr {
	const char *name, *val;
	size_t nlen, vlen;
};

struct tag {
	const char *name;
	size_t nlen;
	int closing, selfclosing;
	struct attr a[MAX_ATTRS];
	int na;
};

static int name_is(const char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static const char *find(const char *p, const char *end, const char *lit)
{
	size_t k = strlen(lit);
	for (; p + k <= end; p++)
		if (memcmp(p, lit, k) == 0)
			return p;
	return NULL;
}

/* Appends the UTF-8 encoding of code point c to *o. */
static void put_utf8(char **o, unsigned long c)
{
	*o += fw_utf8_put((uint8_t *)*o, (uint32_t)c);
}

/* Decodes XML entities of n bytes at s into a new string (malloc'd).  An
 * encoded character never takes more bytes than its reference, so n + 1
 * bytes suffice. */
static char *xml_decode(const char *s, size_t n)
{
	char *out = malloc(n + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n;) {
		if (s[i] != '&') {
			*o++ = s[i++];
			continue;
		}
		const char *semi = memchr(s + i, ';', n - i < 12 ? n - i : 12);
		if (!semi) {
			*o++ = s[i++];
			continue;
		}
		const char *e = s + i + 1;
		size_t k = (size_t)(semi - e);
		unsigned long c = 0;
		int ok = 1;
		if (name_is(e, k, "amp")) c = '&';
		else if (name_is(e, k, "lt")) c = '<';
		else if (name_is(e, k, "gt")) c = '>';
		else if (name_is(e, k, "quot")) c = '"';
		else if (name_is(e, k, "apos")) c = '\'';
		else if (k > 1 && e[0] == '#') {
			char *stop;
			c = e[1] == 'x' ? strtoul(e + 2, &stop, 16) : strtoul(e + 1, &stop, 10);
			ok = stop == semi && c > 0 && c < 0x110000;
		} else
			ok = 0;
		if (!ok) {
			*o++ = s[i++];
			continue;
		}
		put_utf8(&o, c);
		i = (size_t)(semi - s) + 1;
	}
	*o = '\0';
	return out;
}

static const struct attr *attr_get(const struct tag *t, const char *name)
{
	for (int i = 0; i < t->na; i++)
		if (name_is(t->a[i].name, t->a[i].nlen, name))
			return &t->a[i];
	return NULL;
}

static int attr_is(const struct tag *t, const char *name, const char *val)
{
	const struct attr *a = attr_get(t, name);
	return a && name_is(a->val, a->vlen, val);
}

/* Parses the tag starting at p ('<' already consumed).  Returns the byte
 * after '>' or NULL when the document ends inside the tag. */
static const char *parse_tag(const char *p, const char *end, struct tag *t)
{
	memset(t, 0, sizeof *t);
	if (p < end && *p == '/') {
		t->closing = 1;
		p++;
	}
	t->name = p;
	while (p < end && !isspace((unsigned char)*p) && *p != '>' && *p != '/')
		p++;
	t->nlen = (size_t)(p - t->name);
	for (;;) {
		while (p < end && isspace((unsigned char)*p))
			p++;
		if (p >= end)
			return NULL;
		if (*p == '>')
			return p + 1;
		if (*p == '/') {
			t->selfclosing = 1;
			p++;
			continue;
		}
		struct attr a = { .name = p };
		while (p < end && *p != '=' && *p != '>' && !isspace((unsigned char)*p))
			p++;
		a.nlen = (size_t)(p - a.name);
		while (p < end && isspace((unsigned char)*p))
			p++;
		if (p < end && *p == '=') {
			p++;
			while (p < end && isspace((unsigned char)*p))
				p++;
			if (p >= end)
				return NULL;
			char q = *p;
			if (q != '"' && q != '\'')
				return NULL;
			a.val = ++p;
			const char *close = memchr(p, q, (size_t)(end - p));
			if (!close)
				return NULL;
			a.vlen = (size_t)(close - p);
			p = close + 1;
		} else if (a.nlen == 0) {
			p++; /* stray character: step over it */
			continue;
		}
		if (t->na < MAX_ATTRS)
			t->a[t->na++] = a;
	}
}

/* The first line of an attribute value, decoded, or NULL. */
static char *first_line(const struct attr *a)
{
	if (!a || a->vlen == 0)
		return NULL;
	char *s = xml_decode(a->val, a->vlen);
	if (s)
		s[strcspn(s, "\n")] = '\0';
	return s;
}

static char *make_id(const struct attr *cls, const struct attr *name)
{
	char *n = xml_decode(name ? name->val : "", name ? name->vlen : 0);
	if (!n || !cls || cls->vlen == 0)
		return n;
	char *c = xml_decode(cls->val, cls->vlen);
	if (!c || strcmp(c, n) == 0) {
		free(c);
		return n;
	}
	size_t len = strlen(c) + 2 + strlen(n) + 1;
	char *id = malloc(len);
	if (id)
		snprintf(id, len, "%s::%s", c, n);
	free(c);
	free(n);
	return id;
}

int fw_report_parse_junit(struct fw_report *r, const char *xml, size_t len,
			  char *err, size_t errlen)
{
	const char *p = xml, *end = xml + len;
	int suites_open = 0, saw_suite = 0, count = 0, rc = 0;
	char *id = NULL, *msg = NULL;
	enum fw_outcome oc = FW_PASS;
	double tm = 0;

	while (p < end) {
		const char *lt = memchr(p, '<', (size_t)(end - p));
		if (!lt)
			break;
		p = lt + 1;
		const char *skip_to = NULL, *close = NULL;
		if (end - p >= 3 && memcmp(p, "!--", 3) == 0)
			skip_to = "-->";
		else if (end - p >= 8 && memcmp(p, "![CDATA[", 8) == 0)
			skip_to = "]]>";
		else if (p < end && *p == '?')
			skip_to = "?>";
		else if (p < end && *p == '!')
			skip_to = ">";
		if (skip_to) {
			close = find(p, end, skip_to);
			if (!close) {
				fw_seterr(err, errlen, "report ends inside a comment or declaration");
				rc = -1;
				goto out;
			}
			p = close + strlen(skip_to);
			continue;
		}
		struct tag t;
		const char *next = parse_tag(p, end, &t);
		if (!next) {
			fw_seterr(err, errlen, "report ends inside a tag at byte %zu",
			       (size_t)(lt - xml));
			rc = -1;
			goto out;
		}
		p = next;
		int is_suite = name_is(t.name, t.nlen, "testsuite") ||
			       name_is(t.name, t.nlen, "testsuites");
		if (is_suite) {
			saw_suite = 1;
			if (!t.closing && suites_open == 0)
				r->docs++;
			if (t.closing)
				suites_open--;
			else if (!t.selfclosing)
				suites_open++;
			continue;
		}
		if (name_is(t.name, t.nlen, "testcase")) {
			if (t.closing) {
				if (id) {
					if (add(r, id, oc, tm, msg) < 0)
						goto nomem;
					id = msg = NULL;
					count++;
				}
				continue;
			}
			if (id) { /* an unclosed testcase before this one */
				if (add(r, id, oc, tm, msg) < 0)
					goto nomem;
				id = msg = NULL;
				count++;
			}
			id = make_id(attr_get(&t, "classname"), attr_get(&t, "name"));
			if (!id)
				goto nomem;
			oc = FW_PASS;
			const struct attr *ta = attr_get(&t, "time");
			tm = 0;
			if (ta && ta->vlen) {
				/* the value is not NUL-terminated: copy it */
				char num[32];
				snprintf(num, sizeof num, "%.*s", (int)(ta->vlen < 31 ? ta->vlen : 31),
					 ta->val);
				tm = strtod(num, NULL);
			}
			/* ctest marks outcomes in a status attribute too. */
			if (attr_is(&t, "status", "fail"))
				oc = FW_FAIL;
			else if (attr_is(&t, "status", "notrun") || attr_is(&t, "status", "disabled"))
				oc = FW_SKIP;
			if (t.selfclosing) {
				if (add(r, id, oc, tm, NULL) < 0)
					goto nomem;
				id = NULL;
				count++;
			}
			continue;
		}
		if (!id || t.closing)
			continue;
		enum fw_outcome child = FW_PASS;
		if (name_is(t.name, t.nlen, "failure"))
			child = FW_FAIL;
		else if (name_is(t.name, t.nlen, "error"))
			child = FW_ERROR;
		else if (name_is(t.name, t.nlen, "skipped"))
			child = attr_is(&t, "type", "pytest.xfail") ? FW_XFAIL : FW_SKIP;
		if (child == FW_PASS)
			continue;
		if (child > oc)
			oc = child;
		if (!msg)
			msg = first_line(attr_get(&t, "message"));
	}
	if (id) {
		fw_seterr(err, errlen, "report ends inside a testcase");
		rc = -1;
		goto out;
	}
	if (!saw_suite) {
		fw_seterr(err, errlen, "not a junit report: no <testsuite> element");
		rc = -1;
		goto out;
	}
	if (suites_open > 0) {
		fw_seterr(err, errlen, "report is cut short: <testsuite> not closed");
		rc = -1;
		goto out;
	}
	goto out;
nomem:
	fw_seterr(err, errlen, "out of memory");
	rc = -1;
out:
	free(id);
	free(msg);
	normalize(r);
	return rc < 0 ? -1 : count;
}

/* ---- TAP ----------------------------------------------------------------------- */

/* Case-insensitive "# word" directive in s; returns a pointer after it. */
static const char *directive(const char *s, const char *word)
{
	const char *h = strchr(s, '#');
	while (h) {
		const char *q = h + 1;
		while (*q == ' ')
			q++;
		if (strncasecmp(q, word, strlen(word)) == 0)
			return q + strlen(word);
		h = strchr(h + 1, '#');
	}
	return NULL;
}

int fw_report_parse_tap(struct fw_report *r, const char *text, size_t len,
			char *err, size_t errlen)
{
	int count = 0;
	char *line = NULL;
	size_t cap = 0;
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
		if (n + 1 > cap) {
			char *b = realloc(line, n + 1);
			if (!b)
				goto nomem;
			line = b;
			cap = n + 1;
		}
		memcpy(line, text + i, n);
		line[n] = '\0';
		if (n && line[n - 1] == '\r')
			line[n - 1] = '\0';
		i += n + 1;

		int notok = 0;
		const char *s = line;
		if (strncmp(s, "not ok", 6) == 0 && (s[6] == ' ' || s[6] == '\0')) {
			notok = 1;
			s += 6;
		} else if (strncmp(s, "ok", 2) == 0 && (s[2] == ' ' || s[2] == '\0')) {
			s += 2;
		} else {
			long a, b;
			if (sscanf(line, "%ld..%ld", &a, &b) == 2 && a == 1)
				r->planned = b;
			else if (strncmp(line, "Bail out!", 9) == 0)
				r->bailed = 1;
			continue;
		}
		while (*s == ' ')
			s++;
		char *num = (char *)s;
		long number = strtol(s, &num, 10);
		int has_num = num != s;
		s = num;
		while (*s == ' ')
			s++;
		if (*s == '-' && (s[1] == ' ' || s[1] == '\0'))
			s++;
		while (*s == ' ')
			s++;

		enum fw_outcome oc = notok ? FW_FAIL : FW_PASS;
		const char *why = NULL;
		if ((why = directive(s, "skip")))
			oc = FW_SKIP;
		else if ((why = directive(s, "todo")))
			oc = notok ? FW_XFAIL : FW_PASS;

		/* The description ends at an unescaped '#'. */
		size_t dlen = 0;
		const char *hash = NULL;
		for (const char *q = s; *q; q++) {
			if (*q == '\\' && q[1]) {
				q++;
				continue;
			}
			if (*q == '#') {
				hash = q;
				break;
			}
		}
		dlen = hash ? (size_t)(hash - s) : strlen(s);
		while (dlen && s[dlen - 1] == ' ')
			dlen--;
		char *id;
		if (dlen) {
			id = strndup(s, dlen);
		} else {
			char buf[32];
			snprintf(buf, sizeof buf, "%ld", has_num ? number : (long)count + 1);
			id = strdup(buf);
		}
		char *msg = NULL;
		if (why) {
			while (*why == ' ' || *why == ':')
				why++;
			if (*why)
				msg = strdup(why);
		}
		if (add(r, id, oc, 0, msg) < 0)
			goto nomem;
		count++;
	}
	free(line);
	normalize(r);
	return count;
nomem:
	free(line);
	normalize(r);
	fw_seterr(err, errlen, "out of memory");
	return -1;
}

/* ---- go test -json ------------------------------------------------------------ */

/* A test seen in the event stream: whether it is still running, and the
 * first line it printed. */
struct gotest {
	char *id;
	char *msg;
	int open;
};

struct gotab {
	struct gotest *v; /* open addressing; cap a power of two */
	size_t cap, n;
};

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* The entry for id, added when new; NULL when memory runs out. */
static struct gotest *gotab_get(struct gotab *t, const char *id)
{
	if (2 * (t->n + 1) > t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		struct gotest *v = calloc(cap, sizeof *v);
		if (!v)
			return NULL;
		for (size_t i = 0; i < t->cap; i++) {
			if (!t->v[i].id)
				continue;
			size_t k = fnv(t->v[i].id) & (cap - 1);
			while (v[k].id)
				k = (k + 1) & (cap - 1);
			v[k] = t->v[i];
		}
		free(t->v);
		t->v = v;
		t->cap = cap;
	}
	size_t k = fnv(id) & (t->cap - 1);
	while (t->v[k].id) {
		if (strcmp(t->v[k].id, id) == 0)
			return &t->v[k];
		k = (k + 1) & (t->cap - 1);
	}
	if (!(t->v[k].id = strdup(id)))
		return NULL;
	t->n++;
	return &t->v[k];
}

static void gotab_free(struct gotab *t)
{
	for (size_t i = 0; i < t->cap; i++) {
		free(t->v[i].id);
		free(t->v[i].msg);
	}
	free(t->v);
}

/* Ends every test still running whose id starts with prefix (all: "") as
 * an error.  Returns how many, or -1 when memory runs out. */
static int gotab_close(struct gotab *t, struct fw_report *r, const char *prefix)
{
	size_t pl = strlen(prefix);
	int n = 0;
	for (size_t i = 0; i < t->cap; i++) {
		struct gotest *g = &t->v[i];
		if (!g->id || !g->open || strncmp(g->id, prefix, pl) != 0)
			continue;
		g->open = 0;
		if (add(r, strdup(g->id), FW_ERROR, 0,
			strdup(g->msg ? g->msg : "the test did not finish")) < 0)
			return -1;
		n++;
	}
	return n;
}

/* A line worth quoting as a failure's message: not test2json's own
 * "=== RUN" / "--- FAIL" framing, not blank.  Returns its trimmed copy or
 * NULL. */
static char *go_message(const char *out)
{
	while (*out == ' ' || *out == '\t')
		out++;
	if (!*out || *out == '\n' || strncmp(out, "=== ", 4) == 0 || strncmp(out, "--- ", 4) == 0)
		return NULL;
	size_t n = strcspn(out, "\n");
	while (n && (out[n - 1] == ' ' || out[n - 1] == '\r'))
		n--;
	return n ? strndup(out, n) : NULL;
}

int fw_report_parse_gotest(struct fw_report *r, const char *text, size_t len,
			   char *err, size_t errlen)
{
	struct gotab tab = { 0 };
	int count = 0, rc = 0;
	size_t lineno = 0;
	char id[2048];

	for (size_t i = 0; i < len;) {
		const char *line = text + i, *nl = memchr(line, '\n', len - i);
		size_t n = nl ? (size_t)(nl - line) : len - i;
		i += n + 1;
		lineno++;
		if (n == 0 || line[0] != '{')
			continue;
		json_error_t je;
		json_t *ev = json_loadb(line, n, 0, &je);
		const char *action = ev ? json_string_value(json_object_get(ev, "Action")) : NULL;
		const char *pkg = ev ? json_string_value(json_object_get(ev, "Package")) : NULL;
		const char *test = ev ? json_string_value(json_object_get(ev, "Test")) : NULL;
		if (!action) {
			fw_seterr(err, errlen, "line %zu: not a go test -json event%s%s", lineno,
			       ev ? "" : ": ", ev ? "" : je.text);
			json_decref(ev);
			rc = -1;
			break;
		}
		snprintf(id, sizeof id, "%s::%s", pkg ? pkg : "", test ? test : "");
		int pass = !strcmp(action, "pass"), fail = !strcmp(action, "fail"),
		    skip = !strcmp(action, "skip");
		if (!test) {
			/* a package that fails ends the tests it left running */
			int k = fail ? gotab_close(&tab, r, id) : 0;
			json_decref(ev);
			if (k < 0)
				goto nomem;
			count += k;
			continue;
		}
		struct gotest *g = gotab_get(&tab, id);
		if (!g) {
			json_decref(ev);
			goto nomem;
		}
		if (!strcmp(action, "run")) {
			g->open = 1;
		} else if (!strcmp(action, "output")) {
			const char *out = json_string_value(json_object_get(ev, "Output"));
			if (!g->msg && out)
				g->msg = go_message(out);
		} else if (pass || fail || skip) {
			g->open = 0;
			char *msg = fail && g->msg ? strdup(g->msg) : NULL;
			if (add(r, strdup(id), pass ? FW_PASS : fail ? FW_FAIL : FW_SKIP,
				json_number_value(json_object_get(ev, "Elapsed")), msg) < 0) {
				json_decref(ev);
				goto nomem;
			}
			count++;
		}
		json_decref(ev);
	}
	if (rc == 0) {
		/* the output ended with tests running: the binary died */
		int k = gotab_close(&tab, r, "");
		if (k < 0)
			goto nomem;
		count += k;
	}
	gotab_free(&tab);
	normalize(r);
	return rc < 0 ? -1 : count;
nomem:
	gotab_free(&tab);
	normalize(r);
	fw_seterr(err, errlen, "out of memory");
	return -1;
}

const char *fw_report_format_name(enum fw_report_format f)
{
	switch (f) {
	case FW_REPORT_TAP: return "tap";
	case FW_REPORT_GOTEST: return "gotest";
	default: return "junit";
	}
}

int fw_report_format_parse(const char *s)
{
	if (!strcmp(s, "junit"))
		return FW_REPORT_JUNIT;
	if (!strcmp(s, "tap"))
		return FW_REPORT_TAP;
	if (!strcmp(s, "gotest"))
		return FW_REPORT_GOTEST;
	return -1;
}

int fw_report_load(struct fw_report *r, const char *path, enum fw_report_format fmt,
		   char *err, size_t errlen)
{
	size_t n;
	char *buf = fw_read_file(path, 0, &n);
	if (!buf) {
		fw_seterr(err, errlen, "cannot read '%s': %s", path, strerror(errno));
		return -1;
	}
	int rc = fmt == FW_REPORT_TAP	   ? fw_report_parse_tap(r, buf, n, err, errlen)
		 : fmt == FW_REPORT_GOTEST ? fw_report_parse_gotest(r, buf, n, err, errlen)
					   : fw_report_parse_junit(r, buf, n, err, errlen);
	free(buf);
	return rc;
}

/* ---- count lines ---------------------------------------------------------------- */

/* Reads one count line [s, e) into out; 1 when it is one. */
static int count_line(const char *s, const char *e, struct fw_summary *out)
{
	static const struct {
		const char *word;
		size_t off; /* offset of the count in struct fw_summary, or -1 */
	} words[] = {
		{ "passed", offsetof(struct fw_summary, passed) },
		{ "failed", offsetof(struct fw_summary, failed) },
		{ "errors", offsetof(struct fw_summary, errors) },
		{ "error", offsetof(struct fw_summary, errors) },
		{ "skipped", offsetof(struct fw_summary, skipped) },
		{ "xfailed", offsetof(struct fw_summary, xfailed) },
		{ "xpassed", offsetof(struct fw_summary, xpassed) },
		{ "deselected", (size_t)-1 },
		{ "warnings", (size_t)-1 },
		{ "warning", (size_t)-1 },
		{ "rerun", (size_t)-1 },
	};
	struct fw_summary c = { 0 };
	while (s < e && (*s == '=' || *s == ' '))
		s++;
	while (e > s && (e[-1] == '=' || e[-1] == ' ' || e[-1] == '\r'))
		e--;
	int items = 0;
	while (s < e) {
		if (!isdigit((unsigned char)*s))
			return 0;
		long v = 0;
		while (s < e && isdigit((unsigned char)*s) && v < 100000000)
			v = v * 10 + (*s++ - '0');
		if (s >= e || *s++ != ' ')
			return 0;
		size_t k = 0, nw = sizeof words / sizeof words[0];
		for (; k < nw; k++) {
			size_t m = strlen(words[k].word);
			if ((size_t)(e - s) >= m && memcmp(s, words[k].word, m) == 0 &&
			    (s + m == e || s[m] == ',' || s[m] == ' '))
				break;
		}
		if (k == nw)
			return 0;
		if (words[k].off != (size_t)-1)
			*(long *)((char *)&c + words[k].off) += v;
		s += strlen(words[k].word);
		items++;
		if (s < e && *s == ',') {
			if (e - s < 2 || s[1] != ' ')
				return 0;
			s += 2;
		} else if (s < e) {
			/* " in 0.52s" or " in 1.20s (0:00:01)" ends the line */
			if (e - s < 4 || memcmp(s, " in ", 4) != 0 ||
			    !isdigit((unsigned char)s[4]))
				return 0;
			break;
		}
	}
	if (!items)
		return 0;
	*out = c;
	return 1;
}

int fw_summary_find(const char *text, size_t len, struct fw_summary *s)
{
	const char *end = text + len;
	while (end > text) {
		const char *e = end;
		while (e > text && (e[-1] == '\n'))
			e--;
		const char *b = e;
		while (b > text && b[-1] != '\n')
			b--;
		if (b < e && count_line(b, e, s))
			return 1;
		end = b;
	}
	return 0;
}
