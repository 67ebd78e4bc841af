/*
 * libFuzzer target for the mutations (fw_mutate.h) on hostile source text:
 * the first byte picks the language, the next two the symbol's first and
 * last line, the rest is the file.  Stub and delete may decline (1), never
 * crash; what they make is NUL-terminated, as long as they say, and the
 * removed text is part of the input.  Built by `make fuzz`.
 */
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fw_mutate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	static const char *const paths[] = { "m.py", "m.c", "m.js", "m.ts", "m.go" };
	struct fw_symbol sym = { 0 };
	sym.path = (char *)paths[data[0] % 5];
	sym.name = "f";
	sym.lang = fw_lang_of_path(sym.path);
	sym.start = 1 + data[1] % 32;
	sym.end = sym.start + data[2] % 32;
	size_t len = size - 3;
	char *src = malloc(len + 1);
	if (!src)
		return 0;
	memcpy(src, data + 3, len);
	src[len] = '\0';
	struct fw_mutation m;
	if (fw_mutate_stub(&sym, src, len, &m) == 0) {
		if (strlen(m.data) > m.len || !m.removed ||
		    !memmem(src, len, m.removed, strlen(m.removed)))
			abort();
		char *p = fw_task_prompt(&m, NULL, 0);
		free(p);
		fw_mutation_release(&m);
	}
	if (fw_mutate_delete(FW_DELETE_FUNCTION, &sym, NULL, 0, src, len, &m) == 0) {
		if (strlen(m.data) > m.len || m.len > len)
			abort();
		fw_mutation_release(&m);
	}
	free(src);
	return 0;
}
