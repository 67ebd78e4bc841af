/*
 * libFuzzer target for what grade(1) reads from a policy: the patch.  The
 * input is split at the first NUL byte: before it a patch, after it the
 * original text of every file the patch names (and of a test file, for the
 * literals).  Parsing must succeed or fail with a message; every added line
 * must lie inside the patch's text; the detectors must not fail; and the
 * test-section restore, run on the two halves as INI texts, must give a
 * text whose test sections are the original's.  Built by `make fuzz`.
 */
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fw_grade.h"

/* Stops with the broken property named. */
#define FAIL(what) (fprintf(stderr, "fuzz_grade_patch: %s\n", what), __builtin_trap())

static const char *orig_text;

static const char *orig(void *arg, const char *path)
{
	(void)arg;
	(void)path;
	return orig_text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t plen = nul ? (size_t)(nul - data) : size;
	char *patch = malloc(plen + 1), *o = malloc(size - plen + 1), err[256] = "";
	if (!patch || !o) {
		free(patch);
		free(o);
		return 0;
	}
	memcpy(patch, data, plen);
	patch[plen] = '\0';
	size_t olen = nul ? size - plen - 1 : 0;
	if (olen)
		memcpy(o, nul + 1, olen);
	o[olen] = '\0';
	orig_text = o;

	struct fw_patch p = { 0 };
	int n = fw_patch_parse(&p, patch, plen, err, sizeof err);
	if (n < 0 && !err[0])
		FAIL("failure without a message");
	if (n >= 0 && (size_t)n != p.n)
		FAIL("file count");
	for (size_t i = 0; i < p.n; i++)
		for (size_t k = 0; k < p.v[i].nadded; k++)
			if (strlen(p.v[i].added[k].text) > plen)
				FAIL("added line longer than the patch");
	struct fw_strlist lits = { 0 };
	if (fw_test_literals(o, strlen(o), &lits) < 0)
		FAIL("literals");
	struct fw_hacks h = { 0 };
	if (fw_detect_patch(&p, orig, NULL, &lits, &h) < 0)
		FAIL("detectors");
	for (size_t i = 0; i < h.n; i++)
		if (!h.v[i].detail || (unsigned)h.v[i].kind >= FW_NHACKS)
			FAIL("finding");

	/* restoring twice changes nothing more */
	size_t mlen, m2len;
	int changed, changed2;
	char *m = fw_restore_sections(o, strlen(o), patch, strlen(patch), &mlen, &changed);
	if (!m || strlen(m) > mlen)
		FAIL("restored text length");
	char *m2 = fw_restore_sections(o, strlen(o), m, mlen, &m2len, &changed2);
	if (!m2 || changed2)
		FAIL("restoring twice changes more");
	free(m);
	free(m2);

	fw_hacks_free(&h);
	fw_strlist_release(&lits);
	fw_patch_free(&p);
	free(patch);
	free(o);
	return 0;
}
