/*
 * fw_safetensors.c — safetensors reader (mapped, validated) and writer.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>

#include "fw_base.h"
#include "fw_safetensors.h"

/* Refuse headers beyond this (the format's own reader uses 100 MB). */
#define MAX_HEADER (100u << 20)

/* ---- scalar conversions -------------------------------------------------- */

float fw_bf16_to_f32(uint16_t h)
{
	uint32_t x = (uint32_t)h << 16;
	float f;

	memcpy(&f, &x, 4);
	return f;
}

uint16_t fw_f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40);
	return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

float fw_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
	float f;

	if (e == 0) {
		f = ldexpf((float)m, -24);
		return sign ? -f : f;
	}
	if (e == 31)
		x = sign | 0x7f800000u | (m << 13);
	else
		x = sign | ((e - 15 + 127) << 23) | (m << 13);
	memcpy(&f, &x, 4);
	return f;
}

uint16_t fw_f32_to_f16(float f)
{
	uint32_t x, sign, mant, h, rem;
	int32_t e;

	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000;
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00);
	e = (int32_t)((x >> 23) & 0xff) - 127 + 15;
	mant = x & 0x7fffff;
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00);
	if (e <= 0) {
		if (e < -10)
			return (uint16_t)sign;
		uint32_t shift = (uint32_t)(14 - e), mid = 1u << (shift - 1);

		mant |= 0x800000;
		h = mant >> shift;
		rem = mant & ((1u << shift) - 1);
		if (rem > mid || (rem == mid && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	h = ((uint32_t)e << 10) | (mant >> 13);
	rem = mant & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++; /* a carry into the exponent rounds up correctly */
	return (uint16_t)(sign | h);
}

const char *fw_dtype_name(enum fw_dtype d)
{
	switch (d) {
	case FW_F32: return "F32";
	case FW_BF16: return "BF16";
	case FW_F16: return "F16";
	default: return "?";
	}
}

int fw_dtype_parse(const char *s, enum fw_dtype *d)
{
	if (!strcasecmp(s, "f32") || !strcmp(s, "float32"))
		*d = FW_F32;
	else if (!strcasecmp(s, "bf16") || !strcmp(s, "bfloat16"))
		*d = FW_BF16;
	else if (!strcasecmp(s, "f16") || !strcmp(s, "float16"))
		*d = FW_F16;
	else
		return -1;
	return 0;
}

/* Element size of a safetensors dtype name, 0 when unknown. */
static int dtype_size(const char *s, enum fw_dtype *d)
{
	static const struct { const char *n; int sz; enum fw_dtype d; } tab[] = {
		{ "F32", 4, FW_F32 }, { "BF16", 2, FW_BF16 }, { "F16", 2, FW_F16 },
		{ "F64", 8, FW_DTYPE_OTHER }, { "I64", 8, FW_DTYPE_OTHER },
		{ "U64", 8, FW_DTYPE_OTHER }, { "I32", 4, FW_DTYPE_OTHER },
		{ "U32", 4, FW_DTYPE_OTHER }, { "I16", 2, FW_DTYPE_OTHER },
		{ "U16", 2, FW_DTYPE_OTHER }, { "I8", 1, FW_DTYPE_OTHER },
		{ "U8", 1, FW_DTYPE_OTHER }, { "BOOL", 1, FW_DTYPE_OTHER },
		{ "F8_E4M3", 1, FW_DTYPE_OTHER }, { "F8_E5M2", 1, FW_DTYPE_OTHER },
	};

	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (!strcmp(s, tab[i].n)) {
			*d = tab[i].d;
			return tab[i].sz;
		}
	*d = FW_DTYPE_OTHER;
	return 0;
}

/* ---- reading ------------------------------------------------------------ */

void fw_st_free(struct fw_st *st)
{
	if (!st)
		return;
	for (int i = 0; i < st->n; i++)
		free(st->t[i].name);
	free(st->t);
	if (st->map)
		munmap(st->map, st->maplen);
	free(st->path);
	free(st);
}

static int parse_entry(struct fw_st *st, struct fw_st_tensor *t,
		       const char *name, json_t *v, const uint8_t *data,
		       uint64_t datalen, char *err, size_t errlen)
{
	json_t *dt = json_object_get(v, "dtype");
	json_t *sh = json_object_get(v, "shape");
	json_t *off = json_object_get(v, "data_offsets");
	int sz;

	if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(sh) ||
	    !json_is_array(off) || json_array_size(off) != 2) {
		fw_seterr(err, errlen, "%s: tensor '%s': entry lacks dtype, shape "
		       "or data_offsets", st->path, name);
		return -1;
	}
	snprintf(t->dtype_name, sizeof(t->dtype_name), "%s", json_string_value(dt));
	sz = dtype_size(json_string_value(dt), &t->dtype);
	if (json_array_size(sh) > FW_ST_MAXDIM) {
		fw_seterr(err, errlen, "%s: tensor '%s': %zu dimensions (at most %d)",
		       st->path, name, json_array_size(sh), FW_ST_MAXDIM);
		return -1;
	}
	t->ndim = (int)json_array_size(sh);
	t->numel = 1;
	for (int d = 0; d < t->ndim; d++) {
		json_t *x = json_array_get(sh, d);

		if (!json_is_integer(x) || json_integer_value(x) < 0 ||
		    json_integer_value(x) > ((int64_t)1 << 40)) {
			fw_seterr(err, errlen, "%s: tensor '%s': bad shape", st->path, name);
			return -1;
		}
		t->shape[d] = json_integer_value(x);
		if (t->shape[d] && t->numel > ((int64_t)1 << 48) / t->shape[d]) {
			fw_seterr(err, errlen, "%s: tensor '%s': shape too large", st->path, name);
			return -1;
		}
		t->numel *= t->shape[d];
	}
	json_t *b = json_array_get(off, 0), *e = json_array_get(off, 1);
	if (!json_is_integer(b) || !json_is_integer(e) ||
	    json_integer_value(b) < 0 || json_integer_value(e) < json_integer_value(b) ||
	    (uint64_t)json_integer_value(e) > datalen) {
		fw_seterr(err, errlen, "%s: tensor '%s': data_offsets outside the "
		       "file's %llu data bytes (truncated file?)", st->path, name,
		       (unsigned long long)datalen);
		return -1;
	}
	t->data = data + json_integer_value(b);
	t->nbytes = (size_t)(json_integer_value(e) - json_integer_value(b));
	if (sz && (uint64_t)t->numel * sz != t->nbytes) {
		fw_seterr(err, errlen, "%s: tensor '%s': %zu data bytes for %lld "
		       "elements of %s", st->path, name, t->nbytes,
		       (long long)t->numel, t->dtype_name);
		return -1;
	}
	t->name = strdup(name);
	return t->name ? 0 : -1;
}

struct fw_st *fw_st_from_memory(const void *p, size_t len, const char *name,
				char *err, size_t errlen)
{
	const uint8_t *buf = p;
	struct fw_st *st = calloc(1, sizeof(*st));
	uint64_t hlen = 0;
	json_t *root = NULL;
	json_error_t je;

	if (!st || !(st->path = strdup(name))) {
		fw_seterr(err, errlen, "%s: out of memory", name);
		free(st);
		return NULL;
	}
	if (len < 8) {
		fw_seterr(err, errlen, "%s: not a safetensors file (%zu bytes)", name, len);
		goto fail;
	}
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | buf[i];
	if (hlen > MAX_HEADER || hlen > len - 8) {
		fw_seterr(err, errlen, "%s: header length %llu does not fit the "
		       "file's %zu bytes", name, (unsigned long long)hlen, len);
		goto fail;
	}
	root = json_loadb((const char *)buf + 8, hlen, JSON_REJECT_DUPLICATES, &je);
	if (!root || !json_is_object(root)) {
		fw_seterr(err, errlen, "%s: header is not a JSON object: %s", name,
		       root ? "wrong type" : je.text);
		goto fail;
	}
	st->t = calloc(json_object_size(root) + 1, sizeof(*st->t));
	if (!st->t)
		goto fail;
	const char *key;
	json_t *v;
	json_object_foreach(root, key, v) {
		if (!strcmp(key, "__metadata__"))
			continue;
		if (parse_entry(st, &st->t[st->n], key, v, buf + 8 + hlen,
				len - 8 - hlen, err, errlen))
			goto fail;
		st->n++;
	}
	json_decref(root);
	return st;
fail:
	json_decref(root);
	fw_st_free(st);
	return NULL;
}

struct fw_st *fw_st_open(const char *path, char *err, size_t errlen)
{
	struct stat sb;
	struct fw_st *st;
	void *map;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		fw_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		fw_seterr(err, errlen, "%s: not a regular file", path);
		close(fd);
		return NULL;
	}
	if (sb.st_size == 0) {
		close(fd);
		return fw_st_from_memory("", 0, path, err, errlen);
	}
	map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		fw_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	st = fw_st_from_memory(map, (size_t)sb.st_size, path, err, errlen);
	if (!st) {
		munmap(map, (size_t)sb.st_size);
		return NULL;
	}
	st->map = map;
	st->maplen = (size_t)sb.st_size;
	return st;
}

const struct fw_st_tensor *fw_st_find(const struct fw_st *st, const char *name)
{
	for (int i = 0; i < st->n; i++)
		if (!strcmp(st->t[i].name, name))
			return &st->t[i];
	return NULL;
}

int fw_st_read_f32(const struct fw_st *st, const struct fw_st_tensor *t,
		   float *out, char *err, size_t errlen)
{
	const uint8_t *p = t->data;

	switch (t->dtype) {
	case FW_F32:
		memcpy(out, p, t->nbytes);
		return 0;
	case FW_BF16:
		for (int64_t i = 0; i < t->numel; i++)
			out[i] = fw_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
		return 0;
	case FW_F16:
		for (int64_t i = 0; i < t->numel; i++)
			out[i] = fw_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
		return 0;
	default:
		fw_seterr(err, errlen, "%s: tensor '%s': unsupported dtype %s "
		       "(F32, BF16, F16 are)", st->path, t->name, t->dtype_name);
		return -1;
	}
}

void fw_st_drop(const struct fw_st *st, const struct fw_st_tensor *t)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t b, e;

	if (!st->map || !t->nbytes)
		return;
	/* Whole pages inside the tensor only: neighbours keep theirs. */
	b = ((uintptr_t)t->data + pg - 1) & ~(uintptr_t)(pg - 1);
	e = ((uintptr_t)t->data + t->nbytes) & ~(uintptr_t)(pg - 1);
	if (e > b)
		madvise((void *)b, e - b, MADV_DONTNEED);
}

/* ---- writing -------------------------------------------------------------- */

static int64_t numel_of(const struct fw_st_out *t)
{
	int64_t n = 1;

	for (int d = 0; d < t->ndim; d++)
		n *= t->shape[d];
	return n;
}

int fw_st_write(const char *path, const struct fw_st_out *t, int n,
		enum fw_dtype dtype, char *err, size_t errlen)
{
	int esz = dtype == FW_F32 ? 4 : 2;
	json_t *root = json_object(), *meta = json_object();
	char *hdr = NULL, *tmp = NULL;
	FILE *f = NULL;
	uint64_t off = 0;
	int rc = -1;

	if (!root || !meta)
		goto oom;
	json_object_set_new(meta, "format", json_string("pt"));
	json_object_set_new(root, "__metadata__", meta);
	meta = NULL;
	for (int i = 0; i < n; i++) {
		json_t *e = json_object(), *sh = json_array();
		uint64_t nb = (uint64_t)numel_of(&t[i]) * esz;

		for (int d = 0; d < t[i].ndim; d++)
			json_array_append_new(sh, json_integer(t[i].shape[d]));
		json_object_set_new(e, "dtype", json_string(fw_dtype_name(dtype)));
		json_object_set_new(e, "shape", sh);
		json_object_set_new(e, "data_offsets",
				    json_pack("[II]", (json_int_t)off, (json_int_t)(off + nb)));
		json_object_set_new(root, t[i].name, e);
		off += nb;
	}
	hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!hdr || asprintf(&tmp, "%s.tmp", path) < 0) {
		tmp = NULL;
		goto oom;
	}
	size_t hl = strlen(hdr), pad = (8 - hl % 8) % 8;
	uint8_t len8[8];
	uint64_t total = hl + pad;

	for (int i = 0; i < 8; i++)
		len8[i] = (uint8_t)(total >> (8 * i));
	if (!(f = fopen(tmp, "wb")))
		goto ioerr;
	if (fwrite(len8, 8, 1, f) != 1 || fwrite(hdr, 1, hl, f) != hl ||
	    fwrite("        ", 1, pad, f) != pad)
		goto ioerr;
	for (int i = 0; i < n; i++) {
		int64_t ne = numel_of(&t[i]);

		if (dtype == FW_F32) {
			if (ne && fwrite(t[i].data, 4, (size_t)ne, f) != (size_t)ne)
				goto ioerr;
			continue;
		}
		uint16_t buf[4096];
		for (int64_t j = 0; j < ne; j += 4096) {
			int64_t k, m = ne - j < 4096 ? ne - j : 4096;

			for (k = 0; k < m; k++)
				buf[k] = dtype == FW_BF16 ? fw_f32_to_bf16(t[i].data[j + k])
							  : fw_f32_to_f16(t[i].data[j + k]);
			if (fwrite(buf, 2, (size_t)m, f) != (size_t)m)
				goto ioerr;
		}
	}
	if (fflush(f) || fsync(fileno(f)))
		goto ioerr;
	if (fclose(f)) {
		f = NULL;
		goto ioerr;
	}
	f = NULL;
	if (rename(tmp, path))
		goto ioerr;
	rc = 0;
	goto out;
oom:
	fw_seterr(err, errlen, "%s: out of memory", path);
	goto out;
ioerr:
	fw_seterr(err, errlen, "%s: %s", path, strerror(errno));
	if (f)
		fclose(f);
	if (tmp)
		unlink(tmp);
out:
	json_decref(meta);
	json_decref(root);
	free(hdr);
	free(tmp);
	return rc;
}
