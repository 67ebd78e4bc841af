/*
 * tok-encode — the C side of the tokenizer exactness check.
 *
 *   tok-encode TOKENIZER.json < FILELIST > IDS
 *	encodes each file named on stdin (one path a line) and writes one line
 *	per file: its ids separated by spaces, or "skip" when the file is not
 *	valid UTF-8 (the peer cannot read those); checks that the ids decode
 *	to the file's bytes; prints files, bytes, tokens and MB/s on stderr.
 *   tok-encode --roundtrip TOKENIZER.json FILE...
 *	checks decode(encode(x)) == x on arbitrary bytes, with and without
 *	special-token matching.
 *   tok-encode --byte-json FILE
 *	saves the byte tokenizer as tokenizer.json to FILE.
 *   tok-encode --nfc FILE
 *	writes the NFC form of FILE's bytes to stdout.
 *   tok-encode [-n] TOKENIZER.json < FILELIST
 *	-n applies the tokenizer's NFC normalizer (and checks the ids
 *	decode to the normalized text).
 *   tok-encode --chat chatml|llama3 TOKENIZER.json < CONVERSATIONS
 *	renders each conversation of a JSON array of [{role, content}...]
 *	with the generation prompt and writes one line of ids for each.
 *
 * Built by tests/tok.bats against libflywheel.a:
 *   cc -Ilib tests/ref/tok-encode.c build/libflywheel.a -ljansson -lpcre2-8 -lpthread
 * Exit 0 when every check holds, 1 otherwise, 2 on usage.
 */
#include "fw_tok.h"
#include "fw_tok_nfc.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0;

	*n = 0;
	if (!f)
		return NULL;
	for (;;) {
		if (*n == cap) {
			cap = cap ? cap * 2 : 65536;
			char *nb = realloc(buf, cap);
			if (!nb)
				break;
			buf = nb;
		}
		size_t r = fread(buf + *n, 1, cap - *n, f);
		*n += r;
		if (!r)
			break;
	}
	fclose(f);
	return buf;
}

static int valid_utf8(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned c = s[i];
		int len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
		if (!len || c > 0xf4 || i + (size_t)len > n)
			return 0;
		unsigned long cp = c & (0x7f >> len);
		for (int k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += (size_t)len;
	}
	return 1;
}

static int roundtrip(struct fw_tok *t, const char *path, const char *buf, size_t n,
		     unsigned flags)
{
	struct fw_tok_ids ids = { 0 };
	char err[256];
	size_t dn = 0;
	int ok = 0;

	if (fw_tok_encode(t, buf, n, flags, 0, &ids) < 0) {
		fprintf(stderr, "tok-encode: %s: cannot encode\n", path);
		return 0;
	}
	char *d = fw_tok_decode(t, ids.ids, ids.n, 0, &dn, err, sizeof err);
	if (!d)
		fprintf(stderr, "tok-encode: %s: %s\n", path, err);
	else if (dn != n || memcmp(d, buf, n) != 0)
		fprintf(stderr, "tok-encode: %s: decode(encode(x)) differs from x\n", path);
	else
		ok = 1;
	free(d);
	fw_tok_ids_release(&ids);
	return ok;
}

static int chat(struct fw_tok *t, const char *tmpl)
{
	json_error_t je;
	json_t *all = json_loadf(stdin, 0, &je), *conv;
	struct fw_tok_ids ids = { 0 };
	char err[256];
	size_t i;

	if (!json_is_array(all)) {
		fprintf(stderr, "tok-encode: stdin: line %d: %s\n", je.line,
			all ? "not an array" : je.text);
		json_decref(all);
		return 1;
	}
	json_array_foreach(all, i, conv) {
		size_t n = json_array_size(conv), j;
		struct fw_chat_turn *turns = calloc(n ? n : 1, sizeof *turns);
		json_t *m;
		json_array_foreach(conv, j, m) {
			json_t *c = json_object_get(m, "content");
			turns[j].role = json_string_value(json_object_get(m, "role"));
			turns[j].text = json_string_value(c);
			turns[j].len = json_string_length(c);
		}
		ids.n = 0;
		if (fw_chat_render(t, strcmp(tmpl, "llama3") == 0 ? FW_CHAT_LLAMA3 : FW_CHAT_CHATML,
				   turns, n, 1, &ids, err, sizeof err) < 0) {
			fprintf(stderr, "tok-encode: conversation %zu: %s\n", i, err);
			free(turns);
			json_decref(all);
			return 1;
		}
		for (j = 0; j < ids.n; j++)
			printf(j ? " %d" : "%d", (int)ids.ids[j]);
		putchar('\n');
		free(turns);
	}
	fw_tok_ids_release(&ids);
	json_decref(all);
	return 0;
}

int main(int argc, char **argv)
{
	char err[512], line[4096];
	int rt = argc > 1 && strcmp(argv[1], "--roundtrip") == 0;
	int ch = argc == 4 && strcmp(argv[1], "--chat") == 0;
	unsigned flags = 0;

	if (argc == 3 && strcmp(argv[1], "--byte-json") == 0) {
		struct fw_tok *t = fw_tok_new_byte();
		if (!t || fw_tok_save(t, argv[2], err, sizeof err) < 0) {
			fprintf(stderr, "tok-encode: %s\n", t ? err : "out of memory");
			fw_tok_free(t);
			return 1;
		}
		fw_tok_free(t);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "--nfc") == 0) {
		size_t n, nn;
		char *buf = slurp(argv[2], &n), *norm = buf ? fw_tok_nfc(buf, n, &nn) : NULL;
		if (!norm) {
			fprintf(stderr, "tok-encode: %s: cannot read\n", argv[2]);
			return 1;
		}
		fwrite(norm, 1, nn, stdout);
		free(buf);
		free(norm);
		return fflush(stdout) != 0;
	}
	if (argc == 3 && strcmp(argv[1], "-n") == 0) {
		flags = FW_TOK_NORMALIZE;
		argv++;
		argc--;
	}

	if (ch) {
		struct fw_tok *t = fw_tok_load(argv[3], err, sizeof err);
		if (!t) {
			fprintf(stderr, "tok-encode: %s\n", err);
			return 1;
		}
		int rc = chat(t, argv[2]);
		fw_tok_free(t);
		return rc;
	}

	if (argc < 2 + rt || (!rt && argc != 2)) {
		fputs("usage: tok-encode [-n] TOKENIZER.json < FILELIST\n"
		      "       tok-encode --nfc FILE\n"
		      "       tok-encode --byte-json FILE\n"
		      "       tok-encode --roundtrip TOKENIZER.json FILE...\n"
		      "       tok-encode --chat chatml|llama3 TOKENIZER.json < CONVERSATIONS\n",
		      stderr);
		return 2;
	}
	struct fw_tok *t = strcmp(argv[1 + rt], "byte") == 0 ? fw_tok_new_byte()
							     : fw_tok_load(argv[1 + rt], err, sizeof err);
	if (!t) {
		fprintf(stderr, "tok-encode: %s\n", err);
		return 1;
	}
	int bad = 0;
	if (rt) {
		for (int i = 3; i < argc; i++) {
			size_t n;
			char *buf = slurp(argv[i], &n);
			if (!buf) {
				fprintf(stderr, "tok-encode: %s: cannot read\n", argv[i]);
				bad = 1;
				continue;
			}
			bad |= !roundtrip(t, argv[i], buf, n, 0);
			bad |= !roundtrip(t, argv[i], buf, n, FW_TOK_SPECIAL);
			free(buf);
		}
		fw_tok_free(t);
		return bad;
	}
	struct fw_tok_ids ids = { 0 };
	size_t nfiles = 0, nbytes = 0, ntok = 0;
	double secs = 0;
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (!*line)
			continue;
		size_t n;
		char *buf = slurp(line, &n);
		if (!buf) {
			fprintf(stderr, "tok-encode: %s: cannot read\n", line);
			bad = 1;
			continue;
		}
		if (!valid_utf8((unsigned char *)buf, n)) {
			puts("skip");
			free(buf);
			continue;
		}
		struct timespec a, b;
		ids.n = 0;
		clock_gettime(CLOCK_MONOTONIC, &a);
		int rc = fw_tok_encode(t, buf, n, flags, 0, &ids);
		clock_gettime(CLOCK_MONOTONIC, &b);
		secs += (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
		if (rc < 0) {
			fprintf(stderr, "tok-encode: %s: cannot encode\n", line);
			bad = 1;
		}
		for (size_t i = 0; i < ids.n; i++)
			printf(i ? " %d" : "%d", (int)ids.ids[i]);
		putchar('\n');
		if (flags) {
			size_t nn;
			char *norm = fw_tok_nfc(buf, n, &nn);
			bad |= !norm || !roundtrip(t, line, norm, nn, flags);
			free(norm);
		} else {
			bad |= !roundtrip(t, line, buf, n, 0);
		}
		nfiles++;
		nbytes += n;
		ntok += ids.n;
		free(buf);
	}
	fprintf(stderr, "tok-encode: %zu files, %zu bytes, %zu tokens, %.1f MB/s\n", nfiles,
		nbytes, ntok, secs > 0 ? (double)nbytes / secs / 1e6 : 0.0);
	fw_tok_ids_release(&ids);
	fw_tok_free(t);
	if (fflush(stdout) || ferror(stdout))
		bad = 1;
	return bad;
}
