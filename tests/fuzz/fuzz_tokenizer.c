/*
 * libFuzzer target for the tokenizer: any bytes must load as a
 * tokenizer.json or fail cleanly, and any bytes must encode and decode back
 * to themselves (decode(encode(x)) == x), with a byte-level BPE that splits
 * with Llama 3's regex and merges, with and without special-token matching,
 * and with the byte tokenizer; chat rendering of turns cut from the input
 * must not fail; NFC must be idempotent and encode with FW_TOK_NORMALIZE
 * must give back the NFC form; any msgpack value given as a record's turns[]
 * renders or fails with a message.  The first input byte picks the case.  Built and run by
 * `make fuzz`.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "fw_mp.h"
#include "fw_tok.h"
#include "fw_tok_nfc.h"

static const char pretok[] =
	"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
	"\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| "
	"?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
	"\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_"
	"space\":false,\"trim_offsets\":true,\"use_regex\":false}]}";

/* A BPE whose merges join every pair of ASCII letters and digits, their
 * doubles, and a leading space ("Ġ"), so merging runs deep on text. */
static struct fw_tok *make_bpe(void)
{
	json_t *vocab = json_object(), *merges = json_array();
	int id = 0, nprinted = 0;
	char s[16];

	for (int b = 0; b < 256; b++) {
		int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
		int cp = printable ? b : 256 + nprinted++;
		if (cp < 0x80) {
			s[0] = (char)cp;
			s[1] = 0;
		} else {
			s[0] = (char)(0xc0 | cp >> 6);
			s[1] = (char)(0x80 | (cp & 0x3f));
			s[2] = 0;
		}
		json_object_set_new(vocab, s, json_integer(id++));
	}
	const char *alpha = "etaoinshrdlu0123456789 ";
	for (const char *a = alpha; *a; a++)
		for (const char *b = alpha; *b; b++) {
			char x[8], y[8], xy[16];
			snprintf(x, sizeof x, "%s", *a == ' ' ? "\xc4\xa0" : (char[]){ *a, 0 });
			snprintf(y, sizeof y, "%s", *b == ' ' ? "\xc4\xa0" : (char[]){ *b, 0 });
			snprintf(xy, sizeof xy, "%s%s", x, y);
			if (!json_object_get(vocab, xy))
				json_object_set_new(vocab, xy, json_integer(id++));
			char m[24];
			snprintf(m, sizeof m, "%s %s", x, y);
			json_array_append_new(merges, json_string(m));
		}
	/* doubles of the first pairs: "et et", "et ta", ... */
	const char *two[] = { "et", "ta", "ao", "on", "ns", "sh", NULL };
	for (int i = 0; two[i]; i++)
		for (int j = 0; two[j]; j++) {
			char xy[16], m[24];
			snprintf(xy, sizeof xy, "%s%s", two[i], two[j]);
			if (!json_object_get(vocab, xy))
				json_object_set_new(vocab, xy, json_integer(id++));
			snprintf(m, sizeof m, "%s %s", two[i], two[j]);
			json_array_append_new(merges, json_string(m));
		}
	json_t *added = json_pack("[{s:i,s:s,s:b},{s:i,s:s,s:b}]", "id", id, "content",
				  "<|im_end|>", "special", 1, "id", id + 1, "content", "<tool>",
				  "special", 0);
	json_t *root = json_pack("{s:o,s:o,s:{s:s},s:{s:s,s:o,s:o}}", "added_tokens", added,
				 "pre_tokenizer", json_loads(pretok, 0, NULL), "normalizer",
				 "type", "NFC", "model", "type", "BPE", "vocab", vocab, "merges",
				 merges);
	char *text = json_dumps(root, 0);
	struct fw_tok *t = text ? fw_tok_load_mem(text, strlen(text), "fuzz", NULL, 0) : NULL;
	free(text);
	json_decref(root);
	if (!t)
		abort();
	return t;
}

static void roundtrip(const struct fw_tok *t, const uint8_t *d, size_t n, unsigned flags)
{
	struct fw_tok_ids b = { 0 };
	size_t dn = 0;

	if (fw_tok_encode(t, d, n, flags, 0, &b) < 0)
		abort();
	char *out = fw_tok_decode(t, b.ids, b.n, 0, &dn, NULL, 0);
	if (!out || dn != n || memcmp(out, d, n) != 0)
		abort();
	free(out);
	fw_tok_ids_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	static struct fw_tok *bpe, *byte;
	char err[256];

	if (!bpe) {
		bpe = make_bpe();
		byte = fw_tok_new_byte();
		if (!byte)
			abort();
	}
	if (n == 0)
		return 0;
	uint8_t mode = d[0];
	d++, n--;
	switch (mode % 6) {
	case 0: { /* the input is a tokenizer.json */
		struct fw_tok *t = fw_tok_load_mem((const char *)d, n, "fuzz.json", err, sizeof err);
		if (t) {
			struct fw_tok_ids b = { 0 };
			fw_tok_encode(t, "Hello, world!\n\n  x = 12345", 26, FW_TOK_SPECIAL, 0, &b);
			char *out = fw_tok_decode(t, b.ids, b.n, 0, NULL, NULL, 0);
			free(out);
			fw_tok_ids_release(&b);
			fw_tok_free(t);
		} else if (!memchr(err, 0, sizeof err)) {
			abort();
		}
		break;
	}
	case 1:
		roundtrip(bpe, d, n, mode & 4 ? FW_TOK_SPECIAL : 0);
		break;
	case 2:
		roundtrip(byte, d, n, mode & 4 ? FW_TOK_SPECIAL : 0);
		break;
	case 3: { /* turns cut at NUL bytes, roles in turn */
		static const char *roles[] = { "system", "user", "assistant", "tool" };
		struct fw_chat_turn turns[8];
		size_t k = 0, start = 0;
		for (size_t i = 0; i <= n && k < 8; i++)
			if (i == n || d[i] == 0) {
				turns[k] = (struct fw_chat_turn){ roles[((mode >> 2) + k) & 3],
								  (const char *)d + start, i - start,
								  NULL, 0, NULL, 0 };
				k++;
				start = i + 1;
			}
		struct fw_tok_ids b = { 0 };
		if (fw_chat_render(byte, mode & 0x80 ? FW_CHAT_LLAMA3 : FW_CHAT_CHATML, turns, k,
				   mode & 0x20, &b, err, sizeof err) < 0)
			abort();
		if (b.n == 0)
			abort();
		fw_tok_ids_release(&b);
		break;
	}
	case 4: { /* NFC is idempotent; normalized encoding decodes to it */
		size_t n1, n2;
		char *a = fw_tok_nfc(d, n, &n1), *b2 = a ? fw_tok_nfc(a, n1, &n2) : NULL;
		if (!a || !b2 || n1 != n2 || memcmp(a, b2, n1) != 0)
			abort();
		if (!fw_tok_nfc_needed(d, n) && (n1 != n || memcmp(a, d, n) != 0))
			abort();
		struct fw_tok_ids ids = { 0 };
		if (fw_tok_encode(bpe, d, n, FW_TOK_NORMALIZE, 0, &ids) < 0)
			abort();
		char *out = fw_tok_decode(bpe, ids.ids, ids.n, 0, &n2, NULL, 0);
		if (!out || n2 != n1 || memcmp(out, a, n1) != 0)
			abort();
		free(out);
		free(a);
		free(b2);
		fw_tok_ids_release(&ids);
		break;
	}
	case 5: { /* msgpack turns[] */
		uint64_t need;
		const char *why;
		ssize_t len = fw_mp_scan(d, n, FW_MP_MAX_DEPTH, &need, &why);
		if (len <= 0)
			break;
		struct fw_mpv v = { d, (size_t)len };
		struct fw_tok_ids b = { 0 };
		err[0] = 0;
		if (fw_chat_render_mp(byte, mode & 0x80 ? FW_CHAT_LLAMA3 : FW_CHAT_CHATML, &v,
				      mode & 0x40, &b, err, sizeof err) < 0 && !err[0])
			abort();
		fw_tok_ids_release(&b);
		break;
	}
	}
	return 0;
}
