/*
 * fw_env_oci.c — an OCI image layout unpacked into a rootfs tree, offline:
 * the index, the manifest and each layer read from blobs/sha256/ with
 * their digests and sizes checked, the layers (tar, or tar+gzip) applied
 * in order with their whiteouts.  See fw_env.h.
 *
 * Every path is walked one component at a time from the root with
 * O_NOFOLLOW, so that neither a ".." nor a symbolic link an earlier entry
 * made can lead a write out of the tree.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "fw_base.h"
#include "fw_env.h"

#define MEDIA_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MEDIA_INDEX "application/vnd.oci.image.index.v1+json"
#define DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

/* ---- blobs ---------------------------------------------------------------- */

/* The path of the blob a descriptor d names, checked: its digest
 * "sha256:" and 64 lowercase hex digits, the file's size the descriptor's
 * and its SHA-256 the digest.  Returns 0, or -1 with err. */
static int blob_path(const char *layout, const json_t *d, char *path, size_t pathlen, char *err,
		     size_t errlen)
{
	const char *dg = json_string_value(json_object_get(d, "digest"));
	json_t *sz = json_object_get(d, "size");
	unsigned char md[32];
	unsigned int mdl = 0;
	char hex[65];

	if (!dg || strncmp(dg, "sha256:", 7) || strlen(dg) != 71 ||
	    strspn(dg + 7, "0123456789abcdef") != 64) {
		fw_seterr(err, errlen, "digest '%.80s' is not sha256: and 64 lowercase hex digits",
		       dg ? dg : "");
		return -1;
	}
	if (!json_is_integer(sz) || json_integer_value(sz) < 0) {
		fw_seterr(err, errlen, "%s: the descriptor has no size", dg);
		return -1;
	}
	snprintf(path, pathlen, "%s/blobs/sha256/%s", layout, dg + 7);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fw_seterr(err, errlen, "%s: blobs/sha256/%s: %s", dg, dg + 7, strerror(errno));
		return -1;
	}
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	char buf[65536];
	size_t n;
	long long total = 0;
	int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) {
		ok = EVP_DigestUpdate(ctx, buf, n);
		total += (long long)n;
	}
	ok = ok && !ferror(f) && EVP_DigestFinal_ex(ctx, md, &mdl);
	EVP_MD_CTX_free(ctx);
	fclose(f);
	if (!ok) {
		fw_seterr(err, errlen, "%s: cannot read or hash the blob", dg);
		return -1;
	}
	if (total != json_integer_value(sz)) {
		fw_seterr(err, errlen, "%s: the blob has %lld bytes, the descriptor says %lld", dg, total,
		       (long long)json_integer_value(sz));
		return -1;
	}
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	if (strcmp(hex, dg + 7)) {
		fw_seterr(err, errlen, "%s: the blob's sha256 is %s", dg, hex);
		return -1;
	}
	return 0;
}

/* The JSON of the blob descriptor d names (checked). */
static json_t *blob_json(const char *layout, const json_t *d, char *err, size_t errlen)
{
	char path[4400];
	json_error_t je;

	if (blob_path(layout, d, path, sizeof path, err, errlen))
		return NULL;
	json_t *j = json_load_file(path, 0, &je);
	if (!j)
		fw_seterr(err, errlen, "%s: line %d, column %d: %s",
		       json_string_value(json_object_get(d, "digest")), je.line, je.column, je.text);
	return j;
}

/* ---- a stream of layer bytes ---------------------------------------------- */

struct src {
	FILE *f;
	z_stream z;
	int gz, zinit, eof;
	unsigned char in[65536];
};

/* Reads exactly n bytes into p (p NULL: skips them).  Returns 0, or -1
 * at a short or corrupt stream. */
static int src_read(struct src *s, void *p, size_t n)
{
	unsigned char sink[8192];

	while (n) {
		unsigned char *dst = p ? p : sink;
		size_t want = p ? n : (n < sizeof sink ? n : sizeof sink), got;
		if (!s->gz) {
			got = fread(dst, 1, want, s->f);
			if (got == 0)
				return -1;
		} else {
			s->z.next_out = dst;
			s->z.avail_out = (uInt)want;
			while (s->z.avail_out == want) {
				if (s->z.avail_in == 0) {
					size_t r = fread(s->in, 1, sizeof s->in, s->f);
					if (r == 0)
						return -1;
					s->z.next_in = s->in;
					s->z.avail_in = (uInt)r;
				}
				int zr = inflate(&s->z, Z_NO_FLUSH);
				if (zr == Z_STREAM_END && s->z.avail_out == want)
					return -1;
				if (zr != Z_OK && zr != Z_STREAM_END)
					return -1;
				if (zr == Z_STREAM_END)
					break;
			}
			got = want - s->z.avail_out;
		}
		if (p)
			p = (char *)p + got;
		n -= got;
	}
	return 0;
}

/* ---- the tree ------------------------------------------------------------- */

/* Splits rel (a tar member name) into checked components in out ("a/b/c",
 * no "." or empty parts, no leading slash).  Returns 0, or -1 when it
 * has a ".." or is empty. */
static int clean_path(const char *rel, char *out, size_t outlen)
{
	size_t o = 0;

	while (*rel) {
		while (*rel == '/')
			rel++;
		const char *e = strchr(rel, '/');
		size_t n = e ? (size_t)(e - rel) : strlen(rel);
		if (n == 2 && !memcmp(rel, "..", 2))
			return -1;
		if (n && !(n == 1 && *rel == '.')) {
			if (o + n + 2 > outlen)
				return -1;
			if (o)
				out[o++] = '/';
			memcpy(out + o, rel, n);
			o += n;
		}
		rel += n;
	}
	out[o] = '\0';
	return o ? 0 : -1;
}

/* Opens the directory of path's parent under root (each component a real
 * directory, made 0755 when missing); *base points at the last
 * component.  Returns the directory's fd, or -1 (errno set; ELOOP or
 * ENOTDIR for a component that is a link or a file). */
static int open_parent(int root, const char *path, const char **base)
{
	int fd = dup(root);
	const char *p = path;

	for (;;) {
		const char *e = strchr(p, '/');
		if (!e) {
			*base = p;
			return fd;
		}
		char comp[256];
		size_t n = (size_t)(e - p);
		if (n >= sizeof comp) {
			close(fd);
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		if (mkdirat(fd, comp, 0755) && errno != EEXIST) {
			close(fd);
			return -1;
		}
		int nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if (nfd < 0)
			return -1;
		fd = nfd;
		p = e + 1;
	}
}

/* Removes name in dir fd, whatever it is (a directory with all it holds). */
static int remove_at(int fd, const char *name)
{
	struct stat st;

	if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(fd, name, 0);
	int d = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0)
		return -1;
	fchmod(d, 0700);
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", d);
	char real[4096];
	ssize_t n = readlink(path, real, sizeof real - 1);
	close(d);
	if (n <= 0)
		return -1;
	real[n] = '\0';
	return fw_rmtree(real);
}

/* The paths the layer being applied has written, for its opaque
 * directories: those keep what this layer put in them. */
struct written {
	char **v;
	size_t n, cap;
};

static int written_add(struct written *w, const char *p)
{
	if (w->n == w->cap) {
		size_t nc = w->cap ? 2 * w->cap : 64;
		char **v = realloc(w->v, nc * sizeof *v);
		if (!v)
			return -1;
		w->v = v;
		w->cap = nc;
	}
	return (w->v[w->n] = strdup(p)) ? (w->n++, 0) : -1;
}

static void written_free(struct written *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->v[i]);
	free(w->v);
	memset(w, 0, sizeof *w);
}

/* 1 when p was written by this layer, 2 when something under p was. */
static int written_has(const struct written *w, const char *p)
{
	size_t n = strlen(p);
	int r = 0;

	for (size_t i = 0; i < w->n; i++) {
		if (!strcmp(w->v[i], p))
			return 1;
		if (!strncmp(w->v[i], p, n) && w->v[i][n] == '/')
			r = 2;
	}
	return r;
}

/* Empties directory dir (path rel) of what earlier layers put there. */
static int make_opaque(int root, const char *rel, const struct written *w)
{
	const char *base;
	char child[8192];
	int pfd = open_parent(root, rel, &base);
	if (pfd < 0)
		return -1;
	int fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(pfd);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	DIR *d = fdopendir(fd);
	struct dirent *de;
	struct fw_strlist names = { 0 };
	if (!d) {
		close(fd);
		return -1;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			fw_strlist_add(&names, de->d_name);
	int rc = 0;
	for (size_t i = 0; i < names.n && !rc; i++) {
		snprintf(child, sizeof child, "%s/%s", rel, names.v[i]);
		int h = written_has(w, child);
		if (h == 0)
			rc = remove_at(dirfd(d), names.v[i]);
		else if (h == 2)
			rc = make_opaque(root, child, w);
	}
	fw_strlist_release(&names);
	closedir(d);
	return rc;
}

/* Parses an octal (or base-256) tar number field. */
static long long tar_num(const unsigned char *p, size_t n)
{
	long long v = 0;

	if (p[0] & 0x80) {
		for (size_t i = 1; i < n; i++)
			v = (v << 8) | p[i];
		return v;
	}
	for (size_t i = 0; i < n && p[i]; i++) {
		if (p[i] == ' ')
			continue;
		if (p[i] < '0' || p[i] > '7')
			return -1;
		v = v * 8 + (p[i] - '0');
	}
	return v;
}

/* The value of key in pax extended header records buf (n bytes) into out,
 * or leaves out alone. */
static void pax_get(const char *buf, size_t n, const char *key, char *out, size_t outlen)
{
	size_t kl = strlen(key), off = 0;

	while (off < n) {
		char *sp;
		long len = strtol(buf + off, &sp, 10);
		if (len <= 0 || (size_t)len > n - off || *sp != ' ')
			return;
		const char *kv = sp + 1, *end = buf + off + len - 1; /* at the '\n' */
		if ((size_t)(end - kv) > kl && !memcmp(kv, key, kl) && kv[kl] == '=') {
			size_t vl = (size_t)(end - kv - (long)kl - 1);
			if (vl < outlen) {
				memcpy(out, kv + kl + 1, vl);
				out[vl] = '\0';
			}
		}
		off += (size_t)len;
	}
}

/* Applies one layer read from s onto the tree at root; layer k (from 1)
 * for messages. */
static int apply_layer(int root, struct src *s, int k, char *err, size_t errlen)
{
	unsigned char h[512];
	char name[4096], link[4096], longname[4096] = "", longlink[4096] = "", rel[4096];
	struct written w = { 0 };
	int rc = -1, zeros = 0;

	for (;;) {
		if (src_read(s, h, 512)) {
			if (zeros)
				break; /* one zero block and then the end: tolerated */
			fw_seterr(err, errlen, "layer %d: the tar ends inside a member", k);
			goto out;
		}
		int zero = 1;
		for (int i = 0; i < 512 && zero; i++)
			zero = !h[i];
		if (zero) {
			if (++zeros == 2)
				break;
			continue;
		}
		zeros = 0;
		long long size = tar_num(h + 124, 12), mode = tar_num(h + 100, 8);
		if (size < 0 || mode < 0) {
			fw_seterr(err, errlen, "layer %d: a tar header that does not parse", k);
			goto out;
		}
		char type = (char)h[156];
		size_t pad = (size_t)((512 - size % 512) % 512);
		if (type == 'L' || type == 'K' || type == 'x' || type == 'g') {
			/* a name, link or pax header for the next member */
			if (size > 65536) {
				fw_seterr(err, errlen, "layer %d: a %c header of %lld bytes", k, type, size);
				goto out;
			}
			char *buf = malloc((size_t)size + 1);
			if (!buf || src_read(s, buf, (size_t)size) || src_read(s, NULL, pad)) {
				free(buf);
				fw_seterr(err, errlen, "layer %d: the tar ends inside a member", k);
				goto out;
			}
			buf[size] = '\0';
			if (type == 'L')
				snprintf(longname, sizeof longname, "%s", buf);
			else if (type == 'K')
				snprintf(longlink, sizeof longlink, "%s", buf);
			else if (type == 'x') {
				pax_get(buf, (size_t)size, "path", longname, sizeof longname);
				pax_get(buf, (size_t)size, "linkpath", longlink, sizeof longlink);
			}
			free(buf);
			continue;
		}
		if (*longname) {
			snprintf(name, sizeof name, "%s", longname);
		} else if (!memcmp(h + 257, "ustar", 5) && h[345]) {
			snprintf(name, sizeof name, "%.155s/%.100s", (const char *)h + 345,
				 (const char *)h);
		} else {
			snprintf(name, sizeof name, "%.100s", (const char *)h);
		}
		if (*longlink)
			snprintf(link, sizeof link, "%s", longlink);
		else
			snprintf(link, sizeof link, "%.100s", (const char *)h + 157);
		longname[0] = longlink[0] = '\0';
		if (clean_path(name, rel, sizeof rel)) {
			if (strspn(name, "./") == strlen(name)) {
				/* the root itself ("./"): nothing to make */
				if (src_read(s, NULL, (size_t)size + pad))
					goto short_tar;
				continue;
			}
			fw_seterr(err, errlen, "layer %d: '%.200s': a path that leaves the root", k, name);
			goto out;
		}
		const char *base;
		int pfd = open_parent(root, rel, &base);
		if (pfd < 0) {
			fw_seterr(err, errlen, "layer %d: '%.200s': %s", k, name,
			       errno == ELOOP || errno == ENOTDIR
				       ? "a path through a symbolic link or a file"
				       : strerror(errno));
			goto out;
		}
		int bad = 0;
		mode_t perm = (mode_t)(mode & 0777); /* set-ID and sticky bits dropped */
		if (!strcmp(base, ".wh..wh..opq")) {
			/* an opaque directory: what lower layers put in the parent
			 * is gone */
			char dir[4096];
			if (base == rel) {
				fw_seterr(err, errlen, "layer %d: an opaque whiteout of the root", k);
				close(pfd);
				goto out;
			}
			snprintf(dir, sizeof dir, "%.*s", (int)(base - rel - 1), rel);
			bad = make_opaque(root, dir, &w);
		} else if (!strncmp(base, ".wh.", 4)) {
			char gone[4096];
			snprintf(gone, sizeof gone, "%.*s%s", (int)(base - rel), rel, base + 4);
			if (!base[4] || !strcmp(base + 4, ".") || !strcmp(base + 4, "..")) {
				fw_seterr(err, errlen, "layer %d: '%.200s': a whiteout of nothing", k, name);
				close(pfd);
				goto out;
			}
			if (!written_has(&w, gone))
				bad = remove_at(pfd, base + 4);
		} else if (type == '5') {
			struct stat st;
			if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
				bad = remove_at(pfd, base);
			if (!bad && mkdirat(pfd, base, perm | 0700) && errno != EEXIST)
				bad = -1;
			if (!bad)
				bad = fchmodat(pfd, base, perm | 0700, AT_SYMLINK_NOFOLLOW) &&
				      errno != EOPNOTSUPP;
			bad = bad ? -1 : written_add(&w, rel);
		} else if (type == '0' || type == '\0' || type == '7') {
			bad = remove_at(pfd, base);
			int fd = bad ? -1
				     : openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
							     O_CLOEXEC, 0600);
			char buf[65536];
			long long left = size;
			bad = fd < 0;
			while (!bad && left > 0) {
				size_t n = left < (long long)sizeof buf ? (size_t)left : sizeof buf;
				if (src_read(s, buf, n)) {
					close(fd);
					close(pfd);
					goto short_tar;
				}
				bad = write(fd, buf, n) != (ssize_t)n;
				left -= (long long)n;
			}
			if (fd >= 0) {
				bad |= fchmod(fd, perm | 0600) != 0;
				bad |= close(fd) != 0;
			}
			size = 0;
			bad = bad ? -1 : written_add(&w, rel);
		} else if (type == '2') {
			bad = remove_at(pfd, base) || symlinkat(link, pfd, base) ? -1 : written_add(&w, rel);
		} else if (type == '1') {
			/* a hard link: to a file of the tree, walked as safely */
			char trel[4096];
			const char *tbase;
			int tfd;
			if (clean_path(link, trel, sizeof trel)) {
				fw_seterr(err, errlen, "layer %d: '%.200s': a link out of the root", k, name);
				close(pfd);
				goto out;
			}
			if ((tfd = open_parent(root, trel, &tbase)) < 0) {
				bad = -1;
			} else {
				bad = remove_at(pfd, base) || linkat(tfd, tbase, pfd, base, 0)
					      ? -1
					      : written_add(&w, rel);
				close(tfd);
			}
		}
		/* character and block devices and FIFOs ('3', '4', '6') are not
		 * kept: an environment holds files, links and directories */
		close(pfd);
		if (bad) {
			fw_seterr(err, errlen, "layer %d: '%.200s': %s", k, name,
			       errno ? strerror(errno) : "cannot be written");
			goto out;
		}
		if (src_read(s, NULL, (size_t)size + pad))
			goto short_tar;
	}
	rc = 0;
	goto out;
short_tar:
	fw_seterr(err, errlen, "layer %d: the tar ends inside a member", k);
out:
	written_free(&w);
	return rc;
}

/* The image manifest of the index at layout (one level of nested index:
 * the entry for linux on this machine's architecture, or the only one). */
static json_t *find_manifest(const char *layout, json_t *index, int depth, char *err,
			     size_t errlen)
{
	json_t *ms = json_object_get(index, "manifests"), *m, *pick = NULL;
	size_t i;
#if defined(__x86_64__)
	const char *arch = "amd64";
#elif defined(__aarch64__)
	const char *arch = "arm64";
#else
	const char *arch = "";
#endif

	if (!json_is_array(ms) || json_array_size(ms) == 0) {
		fw_seterr(err, errlen, "index.json: no 'manifests'");
		return NULL;
	}
	if (json_array_size(ms) == 1)
		pick = json_array_get(ms, 0);
	json_array_foreach(ms, i, m)
	{
		json_t *pf = json_object_get(m, "platform");
		const char *os = json_string_value(json_object_get(pf, "os")),
			   *ar = json_string_value(json_object_get(pf, "architecture"));
		if (!pick && os && ar && !strcmp(os, "linux") && !strcmp(ar, arch))
			pick = m;
	}
	if (!pick) {
		fw_seterr(err, errlen, "index.json: %zu manifests and none for linux/%s",
		       json_array_size(ms), arch);
		return NULL;
	}
	const char *mt = json_string_value(json_object_get(pick, "mediaType"));
	json_t *j = blob_json(layout, pick, err, errlen);
	if (!j)
		return NULL;
	if ((mt && !strcmp(mt, MEDIA_INDEX)) || json_object_get(j, "manifests")) {
		json_t *r = depth < 2 ? find_manifest(layout, j, depth + 1, err, errlen) : NULL;
		if (depth >= 2)
			fw_seterr(err, errlen, "index.json: indexes nested too deep");
		json_decref(j);
		return r;
	}
	if (mt && strcmp(mt, MEDIA_MANIFEST) && strcmp(mt, DOCKER_MANIFEST)) {
		fw_seterr(err, errlen, "index.json: a manifest of media type '%.100s'", mt);
		json_decref(j);
		return NULL;
	}
	return j;
}

int fw_env_oci_unpack(const char *layout, const char *dir, char *err, size_t errlen)
{
	char p[4400];
	json_error_t je;
	json_t *lay = NULL, *index = NULL, *man = NULL;
	int rc = -1, root = -1;

	snprintf(p, sizeof p, "%s/oci-layout", layout);
	if (!(lay = json_load_file(p, 0, &je))) {
		fw_seterr(err, errlen, "oci-layout: %s", je.line > 0 ? je.text : strerror(errno));
		goto out;
	}
	if (!json_is_string(json_object_get(lay, "imageLayoutVersion"))) {
		fw_seterr(err, errlen, "oci-layout: no 'imageLayoutVersion'");
		goto out;
	}
	snprintf(p, sizeof p, "%s/index.json", layout);
	if (!(index = json_load_file(p, 0, &je))) {
		if (je.line > 0)
			fw_seterr(err, errlen, "index.json: line %d, column %d: %s", je.line, je.column,
			       je.text);
		else
			fw_seterr(err, errlen, "index.json: %s", je.text);
		goto out;
	}
	if (!(man = find_manifest(layout, index, 0, err, errlen)))
		goto out;
	json_t *layers = json_object_get(man, "layers"), *l;
	size_t k;
	if (!json_is_array(layers) || json_array_size(layers) == 0) {
		fw_seterr(err, errlen, "the manifest has no 'layers'");
		goto out;
	}
	if (mkdir(dir, 0755) || (root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		fw_seterr(err, errlen, "%s: %s", dir, strerror(errno));
		goto out;
	}
	json_array_foreach(layers, k, l)
	{
		const char *mt = json_string_value(json_object_get(l, "mediaType"));
		char bp[4400], e2[512];
		int gz;
		if (!mt) {
			fw_seterr(err, errlen, "layer %zu: no 'mediaType'", k + 1);
			goto out;
		}
		size_t ml = strlen(mt);
		if (ml >= 5 && !strcmp(mt + ml - 5, ".gzip"))
			gz = 1;
		else if (ml >= 4 && !strcmp(mt + ml - 4, ".tar"))
			gz = 0;
		else if (ml >= 5 && !strcmp(mt + ml - 5, "+gzip"))
			gz = 1;
		else {
			fw_seterr(err, errlen, "layer %zu: media type '%.100s' (tar and tar+gzip only)",
			       k + 1, mt);
			goto out;
		}
		if (blob_path(layout, l, bp, sizeof bp, e2, sizeof e2)) {
			fw_seterr(err, errlen, "layer %zu: %s", k + 1, e2);
			goto out;
		}
		struct src *s = calloc(1, sizeof *s);
		if (!s || !(s->f = fopen(bp, "rb"))) {
			fw_seterr(err, errlen, "layer %zu: %s", k + 1, strerror(errno));
			free(s);
			goto out;
		}
		s->gz = gz;
		if (gz && inflateInit2(&s->z, 16 + MAX_WBITS) != Z_OK) {
			fw_seterr(err, errlen, "layer %zu: cannot start gzip", k + 1);
			fclose(s->f);
			free(s);
			goto out;
		}
		int ar = apply_layer(root, s, (int)k + 1, err, errlen);
		if (gz)
			inflateEnd(&s->z);
		fclose(s->f);
		free(s);
		if (ar)
			goto out;
	}
	rc = 0;
out:
	if (root >= 0)
		close(root);
	json_decref(lay);
	json_decref(index);
	json_decref(man);
	return rc;
}
