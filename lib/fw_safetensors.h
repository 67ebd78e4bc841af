/*
 * fw_safetensors.h — reading and writing safetensors files, the weight
 * format of the Hugging Face ecosystem.
 *
 * A file is an 8-byte little-endian header length n, n bytes of JSON
 * mapping each tensor name to {"dtype", "shape", "data_offsets": [begin,
 * end]} (offsets relative to the end of the header; an optional
 * "__metadata__" map of strings), then the tensor bytes.  Reading maps the
 * file and checks every entry against the file's size before anything is
 * used, so a broken file gives an error naming the file and the tensor and
 * never a crash.  F32, BF16 and F16 tensors convert to f32; other dtypes
 * are listed but refused by fw_st_read_f32().
 */
#ifndef FW_SAFETENSORS_H
#define FW_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

enum fw_dtype { FW_F32, FW_BF16, FW_F16, FW_DTYPE_OTHER };

#define FW_ST_MAXDIM 8

/* One tensor of an open file.  data points into the file's mapping. */
struct fw_st_tensor {
	char *name;
	enum fw_dtype dtype;
	char dtype_name[16];      /* as the header spells it: "F32", "I64" ... */
	int ndim;
	int64_t shape[FW_ST_MAXDIM];
	int64_t numel;
	const uint8_t *data;
	size_t nbytes;
};

struct fw_st {
	char *path;               /* the file name used in errors */
	int n;                    /* number of tensors */
	struct fw_st_tensor *t;   /* n tensors, in header order */
	void *map;                /* the file mapping, or NULL for memory */
	size_t maplen;
};

/* Opens and validates the safetensors file at path (mapped read-only).
 * Returns a handle the caller frees with fw_st_free(), or NULL with err
 * ("PATH: reason" or "PATH: tensor 'NAME': reason") filled. */
struct fw_st *fw_st_open(const char *path, char *err, size_t errlen);

/* As fw_st_open, over a whole file image of len bytes in memory that the
 * caller keeps alive while the handle is used.  name stands for the file
 * in errors.  Returns a handle (fw_st_free) or NULL with err filled. */
struct fw_st *fw_st_from_memory(const void *p, size_t len, const char *name,
				char *err, size_t errlen);

/* Frees a handle and unmaps its file.  fw_st_free(NULL) does nothing. */
void fw_st_free(struct fw_st *st);

/* Returns the tensor called name, or NULL. */
const struct fw_st_tensor *fw_st_find(const struct fw_st *st,
				      const char *name);

/* Converts tensor t to f32 into out (t->numel floats).  Returns 0, or -1
 * with err filled when the dtype is not F32, BF16 or F16. */
int fw_st_read_f32(const struct fw_st *st, const struct fw_st_tensor *t,
		   float *out, char *err, size_t errlen);

/* Tells the system the file pages holding t are no longer needed, so a
 * loader's peak memory is its own copy plus one tensor rather than plus the
 * whole file.  The bytes stay readable (the pages come back from the file).
 * Does nothing for handles over memory.  Cannot fail. */
void fw_st_drop(const struct fw_st *st, const struct fw_st_tensor *t);

/* A tensor to write: name, shape, and numel f32 values. */
struct fw_st_out {
	const char *name;
	int ndim;
	int64_t shape[FW_ST_MAXDIM];
	const float *data;
};

/* Writes n tensors to path as dtype (f32 values rounded to nearest even
 * for BF16 and F16), in the given order, with an optional "__metadata__"
 * {"format": "pt"}.  Writes path.tmp and renames it over path.  Returns 0,
 * or -1 with err filled (errno kept). */
int fw_st_write(const char *path, const struct fw_st_out *t, int n,
		enum fw_dtype dtype, char *err, size_t errlen);

/* Name of a dtype as safetensors spells it ("F32", "BF16", "F16"). */
const char *fw_dtype_name(enum fw_dtype d);

/* Parses "f32"/"F32"/"float32", "bf16"/"bfloat16", "f16"/"float16".
 * Returns 0 and sets *d, or -1. */
int fw_dtype_parse(const char *s, enum fw_dtype *d);

/* Scalar conversions, round to nearest even (NaN stays NaN). */
float fw_bf16_to_f32(uint16_t h);
uint16_t fw_f32_to_bf16(float f);
float fw_f16_to_f32(uint16_t h);
uint16_t fw_f32_to_f16(float f);

#endif
