/*
 * libFuzzer target for the safetensors reader: any bytes must open or fail
 * with a message naming the file; whatever opens must only describe bytes
 * inside the input, and every F32 / BF16 / F16 tensor must convert.  The
 * input is copied to a buffer of exactly its size so ASan sees any read past
 * the end.  Built by `make fuzz`.
 */
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fw_safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1);
	char err[256] = "";
	struct fw_st *st;

	memcpy(copy, data, size);
	st = fw_st_from_memory(copy, size, "f.safetensors", err, sizeof(err));
	if (!st) {
		if (strncmp(err, "f.safetensors: ", 15) != 0)
			__builtin_trap();
		free(copy);
		return 0;
	}
	for (int i = 0; i < st->n; i++) {
		const struct fw_st_tensor *t = &st->t[i];

		if (t->data < copy || t->data + t->nbytes > copy + size)
			__builtin_trap();
		if (fw_st_find(st, t->name) == NULL)
			__builtin_trap();
		if (t->dtype != FW_DTYPE_OTHER && t->numel <= (1 << 20)) {
			float *out = malloc(sizeof(float) * (t->numel ? t->numel : 1));

			if (fw_st_read_f32(st, t, out, err, sizeof(err)))
				__builtin_trap();
			free(out);
		}
	}
	fw_st_free(st);
	free(copy);
	return 0;
}
