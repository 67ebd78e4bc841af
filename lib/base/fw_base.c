/*
 * fw_base.c — the base layer (see fw_base.h).
 */
#include "fw_base.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- error buffer -------------------------------------------------------- */

void fw_vseterr(char *err, size_t errlen, const char *fmt, va_list ap)
{
	int e = errno;

	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
	errno = e;
}

void fw_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fw_vseterr(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- hashing and random numbers ----------------------------------------- */

uint64_t fw_hash64(const void *p, size_t n)
{
	const uint8_t *s = p;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

uint64_t fw_mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t fw_rand64(uint64_t *state)
{
	uint64_t z = *state;

	*state += 0x9e3779b97f4a7c15ULL;
	return fw_mix64(z);
}

/* ---- string lists ---------------------------------------------------------- */

int fw_strlist_add(struct fw_strlist *l, const char *s)
{
	assert(l && s);
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char **v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	char *c = strdup(s);
	if (!c)
		return -1;
	l->v[l->n++] = c;
	return 0;
}

void fw_strlist_release(struct fw_strlist *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof *l);
}

/* ---- string interner ------------------------------------------------------- */

/* The slot of s[0..n): the one holding it, or the empty one where it would
 * go.  t->nslot is not 0. */
static size_t intern_slot(const struct fw_intern *t, const char *s, size_t n)
{
	size_t mask = t->nslot - 1, h = fw_hash64(s, n) & mask;

	for (; t->slot[h]; h = (h + 1) & mask) {
		const char *x = t->v[t->slot[h] - 1];
		if (strlen(x) == n && memcmp(x, s, n) == 0)
			break;
	}
	return h;
}

long fw_intern_find(const struct fw_intern *t, const char *s, size_t n)
{
	if (!t->nslot)
		return -1;
	size_t h = intern_slot(t, s, n);
	return t->slot[h] ? (long)t->slot[h] - 1 : -1;
}

long fw_intern_add(struct fw_intern *t, const char *s, size_t n)
{
	/* at most half full, so a probe always ends at an empty slot */
	if ((t->n + 1) * 2 > t->nslot) {
		size_t ns = t->nslot ? 2 * t->nslot : 64;
		uint32_t *sl = calloc(ns, sizeof *sl);
		if (!sl)
			return -1;
		for (size_t i = 0; i < t->n; i++) {
			size_t h = fw_hash64(t->v[i], strlen(t->v[i])) & (ns - 1);
			while (sl[h])
				h = (h + 1) & (ns - 1);
			sl[h] = (uint32_t)i + 1;
		}
		free(t->slot);
		t->slot = sl;
		t->nslot = ns;
	}
	size_t h = intern_slot(t, s, n);
	if (t->slot[h])
		return (long)t->slot[h] - 1;
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 32;
		char **v = realloc(t->v, cap * sizeof *v);
		if (!v)
			return -1;
		t->v = v;
		t->cap = cap;
	}
	char *c = strndup(s, n);
	if (!c)
		return -1;
	t->v[t->n] = c;
	t->slot[h] = (uint32_t)t->n + 1;
	return (long)t->n++;
}

void fw_intern_release(struct fw_intern *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i]);
	free(t->v);
	free(t->slot);
	memset(t, 0, sizeof *t);
}

/* ---- files ------------------------------------------------------------------ */

char *fw_read_file(const char *path, size_t max, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (max && n >= max)
			break;
		if (cap - n < 65536 + 1) {
			size_t nc = cap ? cap * 2 : 65536 + 1;
			char *nb = realloc(buf, nc);
			if (!nb) {
				free(buf);
				fclose(f);
				errno = ENOMEM;
				return NULL;
			}
			buf = nb;
			cap = nc;
		}
		size_t want = cap - n - 1;
		if (max && want > max - n)
			want = max - n;
		size_t k = fread(buf + n, 1, want, f);
		n += k;
		if (k == 0)
			break;
	}
	if (ferror(f)) {
		int e = errno ? errno : EIO;
		free(buf);
		fclose(f);
		errno = e;
		return NULL;
	}
	fclose(f);
	if (!buf && !(buf = malloc(1))) {
		errno = ENOMEM;
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

int fw_copy_file(const char *from, const char *to)
{
	FILE *a = fopen(from, "rb"), *b;
	char buf[65536];
	size_t n;
	int rc = 0, e = 0;

	if (!a)
		return -1;
	if (!(b = fopen(to, "wb"))) {
		e = errno;
		fclose(a);
		errno = e;
		return -1;
	}
	while ((n = fread(buf, 1, sizeof buf, a)) > 0)
		if (fwrite(buf, 1, n, b) != n) {
			rc = -1;
			e = errno;
		}
	if (ferror(a)) {
		rc = -1;
		e = errno ? errno : EIO;
	}
	fclose(a);
	if (fclose(b) && !rc) {
		rc = -1;
		e = errno;
	}
	if (rc)
		errno = e;
	return rc;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

int fw_rmtree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlink(path);
	return nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- durable writes ------------------------------------------------------- */

int fw_durable_sync(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	/* some file systems cannot sync a directory: nothing to wait for */
	if (rc < 0 && errno == EINVAL)
		rc = 0;
	close(fd);
	return rc;
}

int fw_durable_sync_dir(const char *dir, char *err, size_t errlen)
{
	DIR *dp = opendir(dir);
	struct dirent *e;
	char p[PATH_MAX + 260];
	struct stat sb;
	int rc = 0;

	if (!dp) {
		fw_seterr(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	while (rc == 0 && (e = readdir(dp))) {
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (e->d_name[0] == '.' || lstat(p, &sb) || !S_ISREG(sb.st_mode))
			continue;
		if (fw_durable_sync(p)) {
			fw_seterr(err, errlen, "%s: %s", p, strerror(errno));
			rc = -1;
		}
	}
	closedir(dp);
	if (rc == 0 && fw_durable_sync(dir)) {
		fw_seterr(err, errlen, "%s: %s", dir, strerror(errno));
		rc = -1;
	}
	return rc;
}

/* The directory that holds path (into out, PATH_MAX bytes). */
static void parent_of(const char *path, char *out)
{
	size_t n = strlen(path);

	while (n > 1 && path[n - 1] == '/')
		n--;
	while (n > 0 && path[n - 1] != '/')
		n--;
	if (n == 0)
		snprintf(out, PATH_MAX, ".");
	else
		snprintf(out, PATH_MAX, "%.*s", n > 1 ? (int)n - 1 : 1, path);
}

char *fw_durable_tmpdir(const char *final, char *err, size_t errlen)
{
	char *t;
	size_t n = strlen(final);

	while (n > 1 && final[n - 1] == '/')
		n--;
	if (asprintf(&t, "%.*s.tmp.%ld", (int)n, final, (long)getpid()) < 0) {
		fw_seterr(err, errlen, "out of memory");
		return NULL;
	}
	if (mkdir(t, 0777) && errno != EEXIST) {
		fw_seterr(err, errlen, "%s: %s", t, strerror(errno));
		free(t);
		return NULL;
	}
	return t;
}

int fw_durable_publish(const char *tmp, const char *final, char *err, size_t errlen)
{
	char up[PATH_MAX];

	if (fw_durable_sync_dir(tmp, err, errlen))
		goto fail;
	if (rename(tmp, final)) {
		fw_seterr(err, errlen, "%s: %s", final, strerror(errno));
		goto fail;
	}
	parent_of(final, up);
	if (fw_durable_sync(up)) {
		fw_seterr(err, errlen, "%s: %s", up, strerror(errno));
		return -1;
	}
	return 0;
fail:
	fw_rmtree(tmp);
	return -1;
}

/* ---- UTF-8 ------------------------------------------------------------------ */

size_t fw_utf8_check(const uint8_t *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		/* ASCII runs dominate real text: skip eight bytes at a time. */
		while (i + 8 <= n) {
			uint64_t w;
			memcpy(&w, s + i, 8);
			if (w & 0x8080808080808080ULL)
				break;
			i += 8;
		}
		if (i >= n)
			break;
		size_t k = fw_utf8_seq(s + i, n - i);
		if (!k)
			return i;
		i += k;
	}
	return n;
}

int fw_utf8_valid(const uint8_t *s, size_t n)
{
	return fw_utf8_check(s, n) == n;
}

size_t fw_utf8_seq(const uint8_t *s, size_t n)
{
	unsigned c = s[0], min;
	size_t len;

	assert(n > 0);
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, min = 0x10000;
	else
		return 0;
	if (n < len)
		return 0;
	unsigned cp = c & (0x3f >> (len - 1));
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

size_t fw_utf8_put(uint8_t *o, uint32_t cp)
{
	assert(cp <= 0x10ffff);
	if (cp < 0x80) {
		o[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (uint8_t)(0xc0 | cp >> 6);
		o[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (uint8_t)(0xe0 | cp >> 12);
		o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (uint8_t)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (uint8_t)(0xf0 | cp >> 18);
	o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (uint8_t)(0x80 | (cp & 0x3f));
	return 4;
}

size_t fw_utf8_count(const char *s, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += ((unsigned char)s[i] & 0xc0) != 0x80;
	return k;
}

size_t fw_utf8_fix_len(const char *s, size_t n)
{
	const uint8_t *u = (const uint8_t *)s;
	size_t out = 0;

	for (size_t i = 0; i < n;) {
		size_t k = fw_utf8_seq(u + i, n - i);
		out += k ? k : 3;
		i += k ? k : 1;
	}
	return out;
}

char *fw_utf8_fix(const char *s, size_t n, size_t *outlen)
{
	const uint8_t *u = (const uint8_t *)s;
	size_t out = fw_utf8_fix_len(s, n);
	char *f = malloc(out + 1), *o = f;
	if (!f)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t k = fw_utf8_seq(u + i, n - i);
		memcpy(o, k ? s + i : "\xef\xbf\xbd", k ? k : 3);
		o += k ? k : 3;
		i += k ? k : 1;
	}
	*o = '\0';
	*outlen = out;
	return f;
}
