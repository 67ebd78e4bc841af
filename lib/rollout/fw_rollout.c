/*
 * fw_rollout.c — fill sites, rollout seeds and ids, patches.  See
 * fw_rollout.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <git2.h>

#include "fw_base.h"
#include "fw_json.h"
#include "fw_mp.h"
#include "fw_rollout.h"

/* ---- fill sites ------------------------------------------------------------ */

/* Offset of the start of line `line` (1-based) of s, or len when s has
 * fewer lines. */
static size_t line_off(const char *s, size_t len, int line)
{
	size_t i = 0;

	for (int l = 1; l < line && i < len; i++)
		if (s[i] == '\n')
			l++;
	return i;
}

static size_t line_end(const char *s, size_t len, size_t i)
{
	while (i < len && s[i] != '\n')
		i++;
	return i < len ? i + 1 : len;
}

/* The trimmed text of the line at i: *t and *n. */
static void line_trim(const char *s, size_t len, size_t i, const char **t, size_t *n)
{
	size_t e = line_end(s, len, i);

	while (i < e && (s[i] == ' ' || s[i] == '\t'))
		i++;
	while (e > i && (s[e - 1] == '\n' || s[e - 1] == '\r' || s[e - 1] == ' ' ||
			 s[e - 1] == '\t'))
		e--;
	*t = s + i;
	*n = e - i;
}

static size_t indent_at(const char *s, size_t len, size_t i)
{
	size_t k = 0;

	while (i + k < len && (s[i + k] == ' ' || s[i + k] == '\t'))
		k++;
	return k;
}

static int is_stub(const char *t, size_t n, int brace)
{
	static const char *const py[] = { "raise NotImplementedError" };
	static const char *const br[] = { "abort(); /* not implemented */",
					  "__builtin_trap(); /* not implemented */",
					  "panic(\"not implemented\")",
					  "throw new Error(\"not implemented\");" };
	const char *const *v = brace ? br : py;
	size_t nv = brace ? sizeof(br) / sizeof(br[0]) : 1;

	for (size_t i = 0; i < nv; i++)
		if (strlen(v[i]) == n && !memcmp(v[i], t, n))
			return 1;
	return 0;
}

int fw_fill_locate(const char *src, size_t len, const char *lang, int start,
		   struct fw_fill_site *site, char *err, size_t errlen)
{
	int brace;

	if (!strcmp(lang, "python"))
		brace = 0;
	else if (!strcmp(lang, "c") || !strcmp(lang, "javascript") ||
		 !strcmp(lang, "typescript") || !strcmp(lang, "go"))
		brace = 1;
	else {
		fw_seterr(err, errlen, "no fill mode for language '%s'", lang);
		return -1;
	}
	if (start < 1) {
		fw_seterr(err, errlen, "target line %d out of range", start);
		return -1;
	}
	size_t i = line_off(src, len, start);
	if (i >= len) {
		fw_seterr(err, errlen, "target line %d is past the end of the file", start);
		return -1;
	}
	memset(site, 0, sizeof *site);
	site->brace = brace;
	/* Python: the indentation of the def (decorators may come first). */
	site->indent = indent_at(src, len, i);
	for (int l = 0; l < 400 && i < len; l++) {
		const char *t;
		size_t n;

		line_trim(src, len, i, &t, &n);
		if (!brace && ((n > 4 && !memcmp(t, "def ", 4)) ||
			       (n > 10 && !memcmp(t, "async def ", 10))) && l < 40)
			site->indent = (size_t)(t - (src + i));
		if (is_stub(t, n, brace)) {
			site->a = i;
			site->b = line_end(src, len, i);
			if (brace) {
				/* the closing brace follows the stub line */
				size_t j = site->b;
				while (j < len && (src[j] == ' ' || src[j] == '\t' ||
						   src[j] == '\n' || src[j] == '\r'))
					j++;
				if (j >= len || src[j] != '}') {
					fw_seterr(err, errlen, "no closing brace after the stub on line %d",
					       start + l);
					return -1;
				}
				site->b = j;
			}
			return 0;
		}
		i = line_end(src, len, i);
	}
	fw_seterr(err, errlen, "no not-implemented stub after line %d", start);
	return -1;
}

/* Python: the end of the last line holding code before i, so that the blank
 * lines between a body and what follows it stay with what follows. */
static long trim_blank_tail(const char *c, size_t i)
{
	size_t last = 0;

	for (size_t k = 0; k < i; k++)
		if (c[k] == '\n') {
			size_t a = k;
			while (a > 0 && c[a - 1] != '\n')
				a--;
			for (size_t t = a; t < k; t++)
				if (c[t] != ' ' && c[t] != '\t' && c[t] != '\r') {
					last = k + 1;
					break;
				}
		}
	return (long)last;
}

static long cut_python(const struct fw_fill_site *site, const char *c, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t k = 0;

		while (i + k < n && (c[i + k] == ' ' || c[i + k] == '\t'))
			k++;
		if (i + k >= n)
			return -1; /* the line's indentation is not known yet */
		if (c[i + k] != '\n' && c[i + k] != '\r' && k <= site->indent &&
		    !(i == 0 && c[i + k] == '#'))
			return trim_blank_tail(c, i);
		while (i < n && c[i] != '\n')
			i++;
		if (i < n)
			i++;
	}
	return -1;
}

static long cut_brace(const char *c, size_t n)
{
	int depth = 1;
	char q = 0; /* open quote, or 0 */

	for (size_t i = 0; i < n; i++) {
		if (q) {
			if (c[i] == '\\')
				i++;
			else if (c[i] == q)
				q = 0;
			continue;
		}
		if (c[i] == '/' && i + 1 < n && c[i + 1] == '/') {
			while (i < n && c[i] != '\n')
				i++;
		} else if (c[i] == '/' && i + 1 < n && c[i + 1] == '*') {
			const char *e = NULL;
			for (size_t j = i + 2; j + 1 < n; j++)
				if (c[j] == '*' && c[j + 1] == '/') {
					e = c + j;
					break;
				}
			if (!e)
				return -1;
			i = (size_t)(e - c) + 1;
		} else if (c[i] == '"' || c[i] == '\'' || c[i] == '`') {
			q = c[i];
		} else if (c[i] == '{') {
			depth++;
		} else if (c[i] == '}' && --depth == 0) {
			return (long)i;
		}
	}
	return -1;
}

long fw_fill_cut(const struct fw_fill_site *site, const char *c, size_t n)
{
	return site->brace ? cut_brace(c, n) : cut_python(site, c, n);
}

char *fw_fill_apply(const struct fw_fill_site *site, const char *src, size_t len,
		    const char *c, size_t n, size_t *outlen)
{
	int nl = site->brace ? (n > 0 && c[n - 1] != '\n' && site->a < site->b)
			     : (n == 0 || c[n - 1] != '\n');
	size_t total = site->a + n + (size_t)nl + (len - site->b);
	char *out = malloc(total + 1);

	if (!out)
		return NULL;
	memcpy(out, src, site->a);
	memcpy(out + site->a, c, n);
	if (nl)
		out[site->a + n] = '\n';
	memcpy(out + site->a + n + nl, src + site->b, len - site->b);
	out[total] = '\0';
	*outlen = total;
	return out;
}

/* ---- seeds and ids ------------------------------------------------------------ */

uint64_t fw_rollout_seed(uint64_t base, const char *task_id, size_t n, int sample)
{
	char buf[64];
	int k = snprintf(buf, sizeof buf, "%llu/%d/", (unsigned long long)base, sample);
	uint64_t h = fw_hash64(buf, (size_t)k) ^ (fw_hash64(task_id, n) * 0x9e3779b97f4a7c15ull);

	/* a final mix so that nearby samples get unrelated streams */
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h ? h : 1;
}

void fw_rollout_id(char out[17], const char *task_id, size_t n, const char *policy,
		   uint64_t seed, int sample)
{
	struct fw_buf b = { 0 };
	uint64_t h;

	if (fw_buf_append(&b, task_id, n) || fw_buf_printf(&b, "\n%s\n%llu\n%d", policy,
							      (unsigned long long)seed, sample))
		h = fw_hash64(task_id, n) ^ (uint64_t)sample;
	else
		h = fw_hash64(b.p, b.n);
	fw_buf_free(&b);
	snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* ---- patches ------------------------------------------------------------------ */

static int git_fail(char *err, size_t errlen, const char *what)
{
	const git_error *e = git_error_last();

	fw_seterr(err, errlen, "%s: %s", what, e && e->message ? e->message : "libgit2 error");
	return -1;
}

int fw_file_patch(const char *path, const char *old, size_t oldlen, const char *new_,
		  size_t newlen, char **patch, char *err, size_t errlen)
{
	git_patch *p = NULL;
	git_buf b = { 0 };
	git_diff_options o;
	int rc = -1;

	*patch = NULL;
	git_libgit2_init();
	git_diff_options_init(&o, GIT_DIFF_OPTIONS_VERSION);
	/* text that is not UTF-8 goes as a binary patch: the patch is record
	 * text, and must still apply */
	if (!fw_utf8_valid((const uint8_t *)old, oldlen) ||
	    !fw_utf8_valid((const uint8_t *)new_, newlen))
		o.flags |= GIT_DIFF_FORCE_BINARY | GIT_DIFF_SHOW_BINARY;
	if (oldlen == newlen && !memcmp(old, new_, oldlen)) {
		*patch = strdup("");
		rc = *patch ? 0 : -1;
		goto out;
	}
	if (git_patch_from_buffers(&p, old, oldlen, path, new_, newlen, path, &o)) {
		git_fail(err, errlen, path);
		goto out;
	}
	if (git_patch_to_buf(&b, p)) {
		git_fail(err, errlen, path);
		goto out;
	}
	if (!(*patch = strndup(b.ptr ? b.ptr : "", b.size))) {
		fw_seterr(err, errlen, "out of memory");
		goto out;
	}
	rc = 0;
out:
	git_buf_dispose(&b);
	git_patch_free(p);
	git_libgit2_shutdown();
	return rc;
}

int fw_task_for_policy(struct fw_buf *out, struct fw_mpv task)
{
	static const char *const keep[] = { "kind", "id", "v", "strategy", "lang", "prompt",
					    "targets", "test_cmd", "report", "f2p", "p2p",
					    "xfail", "split" };
	enum { NKEEP = sizeof keep / sizeof keep[0] };
	struct fw_mpv v[NKEEP];
	msgpack_packer pk;
	size_t n = 0;
	int has[NKEEP];

	for (size_t i = 0; i < NKEEP; i++)
		n += has[i] = fw_mp_get(task, keep[i], &v[i]) == 1;
	fw_buf_packer(&pk, out);
	if (msgpack_pack_map(&pk, n))
		return -1;
	for (size_t i = 0; i < NKEEP; i++) {
		if (!has[i])
			continue;
		if (msgpack_pack_str(&pk, strlen(keep[i])) ||
		    msgpack_pack_str_body(&pk, keep[i], strlen(keep[i])) ||
		    fw_buf_append(out, v[i].p, v[i].n))
			return -1;
	}
	return 0;
}

char *fw_head_tail(const char *s, size_t n, size_t head, size_t tail, size_t *outlen)
{
	struct fw_buf b = { 0 };

	if (n <= head + tail) {
		if (fw_buf_append(&b, s, n) || fw_buf_append(&b, "", 1))
			goto oom;
	} else if (fw_buf_append(&b, s, head) ||
		   fw_buf_printf(&b, "\n[... %zu bytes cut ...]\n", n - head - tail) ||
		   fw_buf_append(&b, s + n - tail, tail) || fw_buf_append(&b, "", 1)) {
		goto oom;
	}
	*outlen = b.n - 1;
	return (char *)b.p;
oom:
	fw_buf_free(&b);
	return NULL;
}

