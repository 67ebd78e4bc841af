/*
 * test_tok.c — the byte tokenizer, tokenizer.json BPE loading and merging,
 * added tokens, errors, and the chat templates.
 *
 * BPE expectations are worked out by hand from small vocabularies built
 * here; exactness against a real vocabulary and encoder is tests/tok.bats.
 */
#include "test.h"

#include "fw_json.h"
#include "fw_mp.h"
#include "fw_tok.h"
#include "fw_tok_nfc.h"

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/test_tok.XXXXXX";

static void rm_tmpdir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		printf("# cannot remove %s\n", tmpdir);
}

static const char *tmp_path(const char *name)
{
	static char buf[256];
	static int made;

	if (!made) {
		if (!mkdtemp(tmpdir))
			abort();
		made = 1;
		atexit(rm_tmpdir);
	}
	snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
	return buf;
}

/* The spelling of byte b in GPT-2's byte-level alphabet, as UTF-8. */
static void spell_byte(int b, char *out)
{
	int n = 0, cp;

	for (int c = 0; c < 256; c++) {
		int printable = (c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || c >= 0xae;
		if (c == b) {
			cp = printable ? c : 256 + n;
			break;
		}
		if (!printable)
			n++;
	}
	if (cp < 0x80) {
		out[0] = (char)cp;
		out[1] = 0;
	} else {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		out[2] = 0;
	}
}

/*
 * Builds a tokenizer.json: the 256 byte tokens (id = byte), then extra
 * tokens (ids 256...), merges (as "a b" strings, or pairs when pairs is
 * set), added tokens "content:special" (ids after the extras), and the
 * pre_tokenizer given as JSON text (NULL: GPT-2's ByteLevel with regex).
 * Returns JSON text the caller frees.
 */
static char *make_json(const char **extra, const char **merges, int pairs, const char **added,
		       const char *pretok, int ignore_merges)
{
	json_t *vocab = json_object(), *m = json_array(), *add = json_array();
	char s[8];
	int id = 0;

	for (int b = 0; b < 256; b++) {
		spell_byte(b, s);
		json_object_set_new(vocab, s, json_integer(id++));
	}
	for (; extra && *extra; extra++)
		json_object_set_new(vocab, *extra, json_integer(id++));
	for (; merges && *merges; merges++) {
		if (pairs) {
			const char *sp = strchr(*merges, ' ');
			json_array_append_new(m, json_pack("[s%,s]", *merges, (size_t)(sp - *merges),
							   sp + 1));
		} else {
			json_array_append_new(m, json_string(*merges));
		}
	}
	for (; added && *added; added++) {
		const char *colon = strrchr(*added, ':');
		json_array_append_new(add, json_pack("{s:i,s:s%,s:b,s:b,s:b,s:b,s:b}", "id", id++,
						     "content", *added, (size_t)(colon - *added),
						     "single_word", 0, "lstrip", 0, "rstrip", 0,
						     "normalized", 0, "special",
						     strcmp(colon + 1, "1") == 0));
	}
	json_error_t je;
	json_t *pre = json_loads(pretok ? pretok
					: "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
					  "\"trim_offsets\":true,\"use_regex\":true}",
				 0, &je);
	json_t *root = json_pack("{s:o,s:o,s:n,s:{s:s},s:{s:s,s:n,s:b,s:o,s:o}}", "added_tokens",
				 add, "pre_tokenizer", pre, "normalizer", "decoder", "type",
				 "ByteLevel", "model", "type", "BPE", "dropout", "ignore_merges",
				 ignore_merges, "vocab", vocab, "merges", m);
	char *text = json_dumps(root, 0);
	json_decref(root);
	return text;
}

static struct fw_tok *make_tok(const char **extra, const char **merges, int pairs,
			       const char **added, const char *pretok, int ignore_merges)
{
	char err[512] = "";
	char *js = make_json(extra, merges, pairs, added, pretok, ignore_merges);
	struct fw_tok *t = fw_tok_load_mem(js, strlen(js), "fixture.json", err, sizeof err);
	if (!t)
		printf("# load: %s\n", err);
	free(js);
	return t;
}

/* Encodes s and compares the ids with want (terminated by -1). */
static int enc_is(const struct fw_tok *t, const char *s, unsigned flags, const int32_t *want)
{
	struct fw_tok_ids b = { 0 };
	int ok = fw_tok_encode(t, s, strlen(s), flags, 0, &b) == 0;
	size_t n = 0;

	while (want[n] >= 0)
		n++;
	ok = ok && b.n == n && (n == 0 || memcmp(b.ids, want, n * sizeof *want) == 0);
	if (!ok) {
		printf("# encode \"%s\":", s);
		for (size_t i = 0; i < b.n; i++)
			printf(" %d", (int)b.ids[i]);
		printf("\n");
	}
	fw_tok_ids_release(&b);
	return ok;
}

static int roundtrips(const struct fw_tok *t, const void *s, size_t n, unsigned flags)
{
	struct fw_tok_ids b = { 0 };
	size_t dn = 0;
	char err[128];
	char *d = NULL;
	int ok = fw_tok_encode(t, s, n, flags, 0, &b) == 0 &&
		 (d = fw_tok_decode(t, b.ids, b.n, 0, &dn, err, sizeof err)) && dn == n &&
		 memcmp(d, s, n) == 0;
	free(d);
	fw_tok_ids_release(&b);
	return ok;
}

/* ---- byte tokenizer ------------------------------------------------------ */

TEST(byte_ids_are_bytes_then_specials)
{
	struct fw_tok *t = fw_tok_new_byte();
	CHECK(t);
	CHECK_EQ_INT(fw_tok_vocab_size(t), FW_TOK_BYTE_VOCAB);
	CHECK_EQ_INT(fw_tok_id(t, "<|endoftext|>"), FW_TOK_BYTE_ENDOFTEXT);
	CHECK_EQ_INT(fw_tok_id(t, "<|im_start|>"), FW_TOK_BYTE_IM_START);
	CHECK_EQ_INT(fw_tok_id(t, "<|im_end|>"), FW_TOK_BYTE_IM_END);
	CHECK_EQ_INT(fw_tok_id(t, "<|begin_of_text|>"), FW_TOK_BYTE_BEGIN_OF_TEXT);
	CHECK_EQ_INT(fw_tok_id(t, "<|start_header_id|>"), FW_TOK_BYTE_START_HEADER);
	CHECK_EQ_INT(fw_tok_id(t, "<|end_header_id|>"), FW_TOK_BYTE_END_HEADER);
	CHECK_EQ_INT(fw_tok_id(t, "<|eot_id|>"), FW_TOK_BYTE_EOT);
	CHECK_EQ_INT(fw_tok_id(t, "<|pad|>"), FW_TOK_BYTE_PAD);
	CHECK_EQ_INT(fw_tok_eos(t), FW_TOK_BYTE_ENDOFTEXT);
	CHECK_EQ_INT(fw_tok_bos(t), -1);
	CHECK(fw_tok_is_special(t, FW_TOK_BYTE_IM_END));
	CHECK(!fw_tok_is_special(t, 'a'));
	CHECK(enc_is(t, "Az\xff\n", 0, (int32_t[]){ 'A', 'z', 0xff, '\n', -1 }));
	CHECK(enc_is(t, "a<|im_end|>", FW_TOK_SPECIAL,
		     (int32_t[]){ 'a', FW_TOK_BYTE_IM_END, -1 }));
	/* without FW_TOK_SPECIAL the spelling is plain text */
	CHECK(enc_is(t, "<|im_end|>", 0,
		     (int32_t[]){ '<', '|', 'i', 'm', '_', 'e', 'n', 'd', '|', '>', -1 }));
	size_t n;
	const char *p = fw_tok_piece(t, 0xe9, &n);
	CHECK(p && n == 1 && (unsigned char)p[0] == 0xe9);
	p = fw_tok_piece(t, FW_TOK_BYTE_EOT, &n);
	CHECK(p && n == 10 && memcmp(p, "<|eot_id|>", 10) == 0);
	CHECK(!fw_tok_piece(t, FW_TOK_BYTE_VOCAB, &n));
	CHECK(!fw_tok_piece(t, -1, &n));
	fw_tok_free(t);
	fw_tok_free(NULL);
}

TEST(byte_roundtrips_every_byte)
{
	struct fw_tok *t = fw_tok_new_byte();
	unsigned char all[512];
	for (int i = 0; i < 512; i++)
		all[i] = (unsigned char)(i * 7 + (i >> 8));
	CHECK(roundtrips(t, all, sizeof all, 0));
	CHECK(roundtrips(t, all, sizeof all, FW_TOK_SPECIAL));
	CHECK(roundtrips(t, "", 0, 0));
	fw_tok_free(t);
}

TEST(byte_saves_a_tokenizer_json_that_loads_the_same)
{
	struct fw_tok *t = fw_tok_new_byte();
	char err[256] = "";
	const char *path = tmp_path("byte.json");
	CHECK(fw_tok_save(t, path, err, sizeof err) == 0);
	json_error_t je;
	json_t *root = json_load_file(path, 0, &je);
	CHECK(root);
	json_t *model = json_object_get(root, "model");
	CHECK_STR(json_string_value(json_object_get(model, "type")), "BPE");
	CHECK_EQ_INT(json_object_size(json_object_get(model, "vocab")), 256);
	CHECK_EQ_INT(json_array_size(json_object_get(model, "merges")), 0);
	CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(model, "vocab"), "\xc4\xa0")),
		     ' '); /* "Ġ" is the space byte */
	json_t *added = json_object_get(root, "added_tokens");
	CHECK_EQ_INT(json_array_size(added), FW_TOK_BYTE_VOCAB - 256);
	CHECK_STR(json_string_value(json_object_get(json_array_get(added, 2), "content")),
		  "<|im_end|>");
	CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(added, 2), "id")),
		     FW_TOK_BYTE_IM_END);
	json_decref(root);

	struct fw_tok *u = fw_tok_load(path, err, sizeof err);
	CHECK(u);
	if (u) {
		CHECK_EQ_INT(fw_tok_vocab_size(u), FW_TOK_BYTE_VOCAB);
		CHECK(enc_is(u, "hi<|eot_id|>", FW_TOK_SPECIAL,
			     (int32_t[]){ 'h', 'i', FW_TOK_BYTE_EOT, -1 }));
		/* saving a loaded tokenizer writes the same bytes */
		const char *p2 = tmp_path("byte2.json");
		CHECK(fw_tok_save(u, p2, err, sizeof err) == 0);
		char cmd[600];
		snprintf(cmd, sizeof cmd, "cmp -s %s/byte.json %s", tmpdir, p2);
		CHECK(system(cmd) == 0);
	}
	fw_tok_free(u);
	fw_tok_free(t);
}

TEST(save_reports_an_unwritable_path)
{
	struct fw_tok *t = fw_tok_new_byte();
	char err[256] = "";
	CHECK(fw_tok_save(t, "/nonexistent-dir/tokenizer.json", err, sizeof err) == -1);
	CHECK(strstr(err, "/nonexistent-dir/tokenizer.json"));
	fw_tok_free(t);
}

/* ---- BPE --------------------------------------------------------------------- */

/* ids of the extras below: 256 "he", 257 "Ġt", 258 "Ġthe", 259 "Ġh" */
static const char *the_extra[] = { "he", "\xc4\xa0t", "\xc4\xa0the", "\xc4\xa0h", NULL };
static const char *the_merges[] = { "h e", "\xc4\xa0 t", "\xc4\xa0t he", NULL };

TEST(bpe_merges_by_rank_in_both_merge_forms)
{
	for (int pairs = 0; pairs < 2; pairs++) {
		struct fw_tok *t = make_tok(the_extra, the_merges, pairs, NULL, NULL, 0);
		CHECK(t);
		if (!t)
			continue;
		/* "the" -> t,he (no "t he" merge); " the" -> Ġ,t,he -> Ġt,he -> Ġthe */
		CHECK(enc_is(t, "the the", 0, (int32_t[]){ 't', 256, 258, -1 }));
		/* " thee": pieces " thee" -> Ġ t h e e -> Ġ t he e -> Ġt he e -> Ġthe e */
		CHECK(enc_is(t, " thee", 0, (int32_t[]){ 258, 'e', -1 }));
		/* "Ġh" is in the vocab but no merge makes it */
		CHECK(enc_is(t, " h", 0, (int32_t[]){ ' ', 'h', -1 }));
		CHECK_EQ_INT(fw_tok_id(t, "\xc4\xa0the"), 258);
		size_t n;
		const char *p = fw_tok_piece(t, 258, &n);
		CHECK(p && n == 4 && memcmp(p, " the", 4) == 0);
		fw_tok_free(t);
	}
}

TEST(bpe_lower_rank_wins_wherever_it_is)
{
	/* 256 "bc", 257 "ab": "b c" has the lower rank, so "abc" -> a,bc */
	const char *extra[] = { "bc", "ab", NULL };
	const char *merges[] = { "b c", "a b", NULL };
	struct fw_tok *t = make_tok(extra, merges, 0, NULL, NULL, 0);
	CHECK(t && enc_is(t, "abc", 0, (int32_t[]){ 'a', 256, -1 }));
	CHECK(t && enc_is(t, "abab", 0, (int32_t[]){ 257, 257, -1 }));
	fw_tok_free(t);
	/* the same merges in the other order: "abc" -> ab,c */
	const char *merges2[] = { "a b", "b c", NULL };
	t = make_tok(extra, merges2, 0, NULL, NULL, 0);
	CHECK(t && enc_is(t, "abc", 0, (int32_t[]){ 257, 'c', -1 }));
	/* equal pairs merge leftmost first: "aaa" with "a a" -> aa,a */
	fw_tok_free(t);
	const char *extra3[] = { "aa", NULL };
	const char *merges3[] = { "a a", NULL };
	t = make_tok(extra3, merges3, 0, NULL, NULL, 0);
	CHECK(t && enc_is(t, "aaa", 0, (int32_t[]){ 256, 'a', -1 }));
	CHECK(t && enc_is(t, "aaaa", 0, (int32_t[]){ 256, 256, -1 }));
	fw_tok_free(t);
}

TEST(bpe_ignore_merges_takes_whole_pieces_from_the_vocab)
{
	const char *extra[] = { "xyz", "xy", NULL };
	const char *merges[] = { "x y", NULL };
	struct fw_tok *t = make_tok(extra, merges, 0, NULL, NULL, 0);
	CHECK(t && enc_is(t, "xyz", 0, (int32_t[]){ 257, 'z', -1 }));
	fw_tok_free(t);
	t = make_tok(extra, merges, 0, NULL, NULL, 1);
	CHECK(t && enc_is(t, "xyz", 0, (int32_t[]){ 256, -1 }));
	CHECK(t && enc_is(t, "xyzz", 0, (int32_t[]){ 257, 'z', 'z', -1 }));
	fw_tok_free(t);
}

TEST(bpe_never_merges_across_pieces)
{
	/* GPT-2's regex splits "a b" into "a", " b": no "a Ġ" merge applies */
	const char *extra[] = { "a\xc4\xa0", NULL };
	const char *merges[] = { "a \xc4\xa0", NULL };
	struct fw_tok *t = make_tok(extra, merges, 0, NULL, NULL, 0);
	CHECK(t && enc_is(t, "a b", 0, (int32_t[]){ 'a', ' ', 'b', -1 }));
	fw_tok_free(t);
	/* with no regex (ByteLevel use_regex false) the whole text is one piece */
	t = make_tok(extra, merges, 0, NULL,
		     "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}", 0);
	CHECK(t && enc_is(t, "a b", 0, (int32_t[]){ 256, 'b', -1 }));
	fw_tok_free(t);
}

static const char llama3_pretok[] =
	"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
	"\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| "
	"?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
	"\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_"
	"space\":false,\"trim_offsets\":true,\"use_regex\":false}]}";

TEST(split_regex_from_a_sequence_pre_tokenizer)
{
	/* 256 "12", 257 "123", 258 "34", 259 "45", 260 "ĊĊ", 261 "'S" */
	const char *extra[] = { "12", "123", "34", "45", "\xc4\x8a\xc4\x8a", "'S", NULL };
	const char *merges[] = { "1 2", "12 3", "3 4", "4 5", "\xc4\x8a \xc4\x8a", "' S", NULL };
	struct fw_tok *t = make_tok(extra, merges, 0, NULL, llama3_pretok, 0);
	CHECK(t);
	if (!t)
		return;
	/* \p{N}{1,3}: "12345" is "123" + "45" */
	CHECK(enc_is(t, "12345", 0, (int32_t[]){ 257, 259, -1 }));
	/* "\n\n" is one piece (\s*[\r\n]+) */
	CHECK(enc_is(t, "\n\nx", 0, (int32_t[]){ 260, 'x', -1 }));
	/* case-insensitive contractions: "'S" is a piece, merged */
	CHECK(enc_is(t, "IT'S", 0, (int32_t[]){ 'I', 'T', 261, -1 }));
	fw_tok_free(t);
}

TEST(digits_pre_tokenizer_splits_numbers)
{
	/* 256 "12", 257 "a1" */
	const char *extra[] = { "12", "a1", NULL };
	const char *merges[] = { "a 1", "1 2", NULL };
	const char *seq = "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\","
			  "\"individual_digits\":%s},{\"type\":\"ByteLevel\",\"add_prefix_space\":"
			  "false,\"use_regex\":false}]}";
	char pre[256];
	snprintf(pre, sizeof pre, seq, "false");
	struct fw_tok *t = make_tok(extra, merges, 0, NULL, pre, 0);
	CHECK(t && enc_is(t, "a12", 0, (int32_t[]){ 'a', 256, -1 }));
	fw_tok_free(t);
	snprintf(pre, sizeof pre, seq, "true");
	t = make_tok(extra, merges, 0, NULL, pre, 0);
	CHECK(t && enc_is(t, "a12", 0, (int32_t[]){ 'a', '1', '2', -1 }));
	fw_tok_free(t);
	/* without the split, "a 1" has the lower rank and merges first */
	t = make_tok(extra, merges, 0, NULL,
		     "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}", 0);
	CHECK(t && enc_is(t, "a12", 0, (int32_t[]){ 257, '2', -1 }));
	fw_tok_free(t);
}

TEST(split_on_a_literal_string)
{
	/* 256 "a." : merged without the split, kept apart with it */
	const char *extra[] = { "a.", NULL };
	const char *merges[] = { "a .", NULL };
	struct fw_tok *t = make_tok(extra, merges, 0, NULL,
				    "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
				    "\"pattern\":{\"String\":\".\"},\"behavior\":\"Isolated\"},"
				    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
				    "\"use_regex\":false}]}",
				    0);
	CHECK(t && enc_is(t, "a.a", 0, (int32_t[]){ 'a', '.', 'a', -1 }));
	fw_tok_free(t);
	t = make_tok(extra, merges, 0, NULL,
		     "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}", 0);
	CHECK(t && enc_is(t, "a.a", 0, (int32_t[]){ 256, 'a', -1 }));
	fw_tok_free(t);
}

TEST(split_pieces_unicode_letters_and_invalid_utf8)
{
	/* "ĠÃ©" spells " é" (bytes 20 c3 a9); 256 "Ã©", 257 "ĠÃ©" */
	const char *extra[] = { "\xc3\x83\xc2\xa9", "\xc4\xa0\xc3\x83\xc2\xa9", NULL };
	const char *merges[] = { "\xc3\x83 \xc2\xa9", "\xc4\xa0 \xc3\x83\xc2\xa9", NULL };
	struct fw_tok *t = make_tok(extra, merges, 0, NULL, NULL, 0);
	CHECK(t);
	if (!t)
		return;
	/* é is a letter (\p{L}, UCP): " é" is one piece */
	CHECK(enc_is(t, " \xc3\xa9", 0, (int32_t[]){ 257, -1 }));
	/* a stray continuation byte matches nothing and is a piece of its own */
	CHECK(enc_is(t, "\xa9 \xc3\xa9\xc3", 0, (int32_t[]){ 0xa9, 257, 0xc3, -1 }));
	unsigned char junk[4096];
	uint32_t x = 12345;
	for (size_t i = 0; i < sizeof junk; i++) {
		x = x * 1103515245u + 12345u;
		junk[i] = (unsigned char)(x >> 16);
	}
	CHECK(roundtrips(t, junk, sizeof junk, 0));
	CHECK(roundtrips(t, junk, sizeof junk, FW_TOK_SPECIAL));
	/* long runs take the uncached path */
	memset(junk, ' ', sizeof junk);
	CHECK(roundtrips(t, junk, sizeof junk, 0));
	fw_tok_free(t);
}

TEST(added_tokens_leftmost_longest_special_only_on_request)
{
	/* ids: 256 <s> special, 257 <s>x plain, 258 [X] plain */
	const char *added[] = { "<s>:1", "<s>x:0", "[X]:0", NULL };
	struct fw_tok *t = make_tok(NULL, NULL, 0, added, NULL, 0);
	CHECK(t);
	if (!t)
		return;
	CHECK_EQ_INT(fw_tok_vocab_size(t), 259);
	CHECK(fw_tok_is_special(t, 256));
	CHECK(!fw_tok_is_special(t, 257));
	/* a plain added token is always matched; a special one only on request */
	CHECK(enc_is(t, "a[X]b", 0, (int32_t[]){ 'a', 258, 'b', -1 }));
	CHECK(enc_is(t, "<s>y", FW_TOK_SPECIAL, (int32_t[]){ 256, 'y', -1 }));
	CHECK(enc_is(t, "<s>y", 0, (int32_t[]){ '<', 's', '>', 'y', -1 }));
	CHECK(enc_is(t, "<s>x", FW_TOK_SPECIAL, (int32_t[]){ 257, -1 }));
	CHECK(enc_is(t, "<s>x", 0, (int32_t[]){ 257, -1 }));
	struct fw_tok_ids b = { 0 };
	CHECK(fw_tok_encode(t, "a<s>", 4, FW_TOK_SPECIAL, 1, &b) == 0);
	CHECK(b.n == 2 && b.mask[0] == 1 && b.mask[1] == 1);
	size_t n;
	char err[128];
	char *d = fw_tok_decode(t, b.ids, b.n, FW_TOK_SKIP_SPECIAL, &n, err, sizeof err);
	CHECK(d && n == 1 && strcmp(d, "a") == 0);
	free(d);
	int32_t bad[] = { 'a', 9999 };
	d = fw_tok_decode(t, bad, 2, 0, &n, err, sizeof err);
	CHECK(!d && strstr(err, "9999"));
	fw_tok_ids_release(&b);
	fw_tok_free(t);
}

TEST(bos_from_template_processing)
{
	const char *js =
		"{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]},"
		"\"added_tokens\":[{\"id\":0,\"content\":\"<|begin_of_text|>\",\"special\":true}],"
		"\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false},"
		"\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":"
		"{\"id\":\"<|begin_of_text|>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\"}}]}}";
	char *full = make_json(NULL, NULL, 0, (const char *[]){ "<|begin_of_text|>:1", NULL },
			       NULL, 0);
	json_t *root = json_loads(full, 0, NULL);
	json_t *post = json_loads(strstr(js, "{\"type\":\"TemplateProcessing\""),
				  JSON_DISABLE_EOF_CHECK, NULL);
	CHECK(root && post);
	json_object_set_new(root, "post_processor", post);
	char *text = json_dumps(root, 0);
	char err[256] = "";
	struct fw_tok *t = fw_tok_load_mem(text, strlen(text), "x.json", err, sizeof err);
	CHECK(t);
	if (t) {
		CHECK_EQ_INT(fw_tok_bos(t), 256);
		CHECK(enc_is(t, "a", FW_TOK_ADD_BOS, (int32_t[]){ 256, 'a', -1 }));
		CHECK(enc_is(t, "a", 0, (int32_t[]){ 'a', -1 }));
	}
	fw_tok_free(t);
	free(text);
	free(full);
	json_decref(root);
}

/* ---- errors ------------------------------------------------------------------ */

/* Loads the fixture with key (a dotted path of one or two levels) replaced
 * by the JSON value val; returns 1 when loading fails with want in err. */
static int load_fails(const char *key, const char *val, const char *want)
{
	char *full = make_json(the_extra, the_merges, 0, NULL, NULL, 0);
	json_t *root = json_loads(full, 0, NULL);
	json_t *v = json_loads(val, JSON_DECODE_ANY, NULL);
	const char *dot = strchr(key, '.');
	if (dot) {
		char k1[64];
		snprintf(k1, sizeof k1, "%.*s", (int)(dot - key), key);
		json_object_set_new(json_object_get(root, k1), dot + 1, v);
	} else {
		json_object_set_new(root, key, v);
	}
	char *text = json_dumps(root, 0);
	char err[512] = "";
	struct fw_tok *t = fw_tok_load_mem(text, strlen(text), "bad/tokenizer.json", err,
					   sizeof err);
	int ok = !t && strstr(err, want) && strncmp(err, "bad/tokenizer.json: ", 20) == 0;
	if (!ok)
		printf("# %s=%s: got \"%s\", want \"%s\"\n", key, val, err, want);
	fw_tok_free(t);
	free(text);
	free(full);
	json_decref(root);
	return ok;
}

TEST(unsupported_tokenizers_are_named)
{
	CHECK(load_fails("model.type", "\"WordPiece\"", "model type 'WordPiece' is not supported"));
	CHECK(load_fails("model.byte_fallback", "true", "byte_fallback is not supported"));
	CHECK(load_fails("model.dropout", "0.1", "dropout is not supported"));
	CHECK(load_fails("model.continuing_subword_prefix", "\"##\"",
			 "continuing_subword_prefix is not supported"));
	CHECK(load_fails("pre_tokenizer", "{\"type\":\"Metaspace\"}",
			 "pre_tokenizer type 'Metaspace' is not supported"));
	CHECK(load_fails("pre_tokenizer", "{\"type\":\"ByteLevel\",\"add_prefix_space\":true}",
			 "add_prefix_space is not supported"));
	CHECK(load_fails("pre_tokenizer",
			 "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"x\"},\"behavior\":\"Removed\"}",
			 "Split behavior 'Removed' is not supported"));
	CHECK(load_fails("pre_tokenizer",
			 "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
			 "{\"Regex\":\"(\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\"}]}",
			 "cannot compile split pattern"));
	CHECK(load_fails("pre_tokenizer", "null", "pre_tokenizer: missing"));
	CHECK(load_fails("normalizer", "{\"type\":\"Lowercase\"}",
			 "normalizer type 'Lowercase' is not supported"));
	CHECK(load_fails("decoder", "{\"type\":\"Metaspace\"}",
			 "decoder type 'Metaspace' is not supported"));
	CHECK(load_fails("model.merges", "[\"h e\", \"q z\"]", "merges[1]: 'qz' is not in the vocab"));
	CHECK(load_fails("model.merges", "[\"h e x\"]", "is not two tokens"));
	CHECK(load_fails("model.merges", "[3]", "merges[0] is neither"));
	CHECK(load_fails("model.vocab", "{\"a\": 0}", "vocab has no token for byte 0x00"));
	CHECK(load_fails("model.vocab", "{\"a\": -1}", "vocab entry 'a' has no valid id"));
	CHECK(load_fails("added_tokens", "[{\"id\":300,\"content\":\"<m>\",\"lstrip\":true}]",
			 "added token '<m>': lstrip is not supported"));
	CHECK(load_fails("added_tokens", "[{\"content\":\"<m>\"}]", "added_tokens[0]: no valid id"));
	CHECK(load_fails("model", "[]", "no model object"));

	char err[256] = "";
	CHECK(!fw_tok_load_mem("{\"model\": ", 10, "t.json", err, sizeof err));
	CHECK(strncmp(err, "t.json: line 1 column", 21) == 0);
	CHECK(!fw_tok_load("/nonexistent/tokenizer.json", err, sizeof err));
	CHECK(strstr(err, "/nonexistent/tokenizer.json: No such file"));
	/* NFC is accepted, and not applied unless asked for */
	char *full = make_json(the_extra, the_merges, 0, NULL, NULL, 0);
	json_t *root = json_loads(full, 0, NULL);
	json_object_set_new(root, "normalizer", json_pack("{s:s}", "type", "NFC"));
	char *text = json_dumps(root, 0);
	struct fw_tok *t = fw_tok_load_mem(text, strlen(text), "nfc.json", err, sizeof err);
	CHECK(t && roundtrips(t, "e\xcc\x81", 3, 0)); /* decomposed é stays decomposed */
	fw_tok_free(t);
	free(text);
	free(full);
	json_decref(root);
}

static int nfc_is(const char *in, const char *want)
{
	size_t n;
	char *out = fw_tok_nfc(in, strlen(in), &n);
	int ok = out && n == strlen(want) && memcmp(out, want, n) == 0;
	if (!ok) {
		printf("# nfc(");
		for (const char *p = in; *p; p++)
			printf("%02x", (unsigned char)*p);
		printf(") =");
		for (size_t i = 0; out && i < n; i++)
			printf(" %02x", (unsigned char)out[i]);
		printf("\n");
	}
	free(out);
	return ok;
}

TEST(nfc_composes_reorders_and_keeps_invalid_bytes)
{
	CHECK(nfc_is("plain ASCII", "plain ASCII"));
	CHECK(nfc_is("e\xcc\x81", "\xc3\xa9"));                 /* e + acute -> U+00E9 */
	CHECK(nfc_is("\xe2\x84\xab", "\xc3\x85"));                /* Angstrom sign -> U+00C5 */
	CHECK(nfc_is("\xe1\x84\x80\xe1\x85\xa1", "\xea\xb0\x80")); /* jamo -> U+AC00 */
	CHECK(nfc_is("\xea\xb0\x80\xe1\x86\xa8", "\xea\xb0\x81")); /* LV + T -> LVT */
	CHECK(nfc_is("\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc"));  /* excluded U+0958 */
	/* marks of classes 230 then 220 are reordered, then both compose */
	CHECK(nfc_is("a\xcc\x82\xcc\xa3", "\xe1\xba\xad"));
	/* a mark of the same class blocks the second one */
	CHECK(nfc_is("a\xcc\x81\xcc\x81", "\xc3\xa1\xcc\x81"));
	/* invalid bytes stay and block composition */
	CHECK(nfc_is("e\xff\xcc\x81", "e\xff\xcc\x81"));
	CHECK(nfc_is("\xcc\x81" "e", "\xcc\x81" "e"));
	CHECK(!fw_tok_nfc_needed("caf\xc3\xa9 ok", 9));
	CHECK(fw_tok_nfc_needed("e\xcc\x81", 3));

	/* FW_TOK_NORMALIZE applies a tokenizer.json NFC normalizer */
	char *full = make_json(NULL, NULL, 0, NULL, NULL, 0);
	json_t *root = json_loads(full, 0, NULL);
	json_object_set_new(root, "normalizer", json_pack("{s:s}", "type", "NFC"));
	char *text = json_dumps(root, 0);
	char err[128] = "";
	struct fw_tok *t = fw_tok_load_mem(text, strlen(text), "nfc.json", err, sizeof err);
	CHECK(t);
	if (t) {
		CHECK(enc_is(t, "e\xcc\x81", 0, (int32_t[]){ 'e', 0xcc, 0x81, -1 }));
		CHECK(enc_is(t, "e\xcc\x81", FW_TOK_NORMALIZE, (int32_t[]){ 0xc3, 0xa9, -1 }));
	}
	fw_tok_free(t);
	/* without an NFC normalizer the flag changes nothing */
	t = fw_tok_new_byte();
	CHECK(enc_is(t, "e\xcc\x81", FW_TOK_NORMALIZE, (int32_t[]){ 'e', 0xcc, 0x81, -1 }));
	fw_tok_free(t);
	free(text);
	free(full);
	json_decref(root);
}

/* ---- threads ------------------------------------------------------------------- */

struct job {
	const struct fw_tok *t;
	int ok;
};

static void *encode_many(void *arg)
{
	struct job *j = arg;
	j->ok = 1;
	for (int i = 0; i < 2000; i++) {
		char s[64];
		int n = snprintf(s, sizeof s, "the thee %d the%d the", i, i % 97);
		j->ok &= roundtrips(j->t, s, (size_t)n, 0);
		j->ok &= enc_is(j->t, " the", 0, (int32_t[]){ 258, -1 });
	}
	return NULL;
}

TEST(encode_is_safe_from_threads)
{
	struct fw_tok *t = make_tok(the_extra, the_merges, 0, NULL, NULL, 0);
	pthread_t th[4];
	struct job jobs[4];
	CHECK(t);
	if (!t)
		return;
	for (int i = 0; i < 4; i++) {
		jobs[i] = (struct job){ t, 0 };
		pthread_create(&th[i], NULL, encode_many, &jobs[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK(jobs[i].ok);
	}
	fw_tok_free(t);
}

/* ---- chat templates ------------------------------------------------------------ */

/* Decodes the ids of b whose mask is m (all ids when m < 0). */
static char *decode_mask(const struct fw_tok *t, const struct fw_tok_ids *b, int m)
{
	int32_t *ids = malloc((b->n + 1) * sizeof *ids);
	size_t k = 0, n;
	for (size_t i = 0; i < b->n; i++)
		if (m < 0 || b->mask[i] == m)
			ids[k++] = b->ids[i];
	char *d = fw_tok_decode(t, ids, k, 0, &n, NULL, 0);
	free(ids);
	return d;
}

#define T(role, text) { role, text, sizeof text - 1, NULL, 0, NULL, 0 }

TEST(chatml_renders_qwen_turns_and_masks_the_policy)
{
	struct fw_tok *t = fw_tok_new_byte();
	struct fw_chat_turn turns[] = {
		T("system", "You are terse."),
		T("user", "Hi"),
		T("assistant", "Hello!"),
		T("user", "Bye"),
	};
	struct fw_tok_ids b = { 0 };
	char err[128] = "";
	CHECK_EQ_INT(fw_chat_detect(t), FW_CHAT_CHATML);
	CHECK(fw_chat_render(t, FW_CHAT_CHATML, turns, 4, 1, &b, err, sizeof err) == 0);
	char *all = decode_mask(t, &b, -1), *pol = decode_mask(t, &b, 1);
	CHECK_STR(all, "<|im_start|>system\nYou are terse.<|im_end|>\n"
		       "<|im_start|>user\nHi<|im_end|>\n"
		       "<|im_start|>assistant\nHello!<|im_end|>\n"
		       "<|im_start|>user\nBye<|im_end|>\n"
		       "<|im_start|>assistant\n");
	CHECK_STR(pol, "Hello!<|im_end|>");
	CHECK_EQ_INT(b.ids[b.n - 1], '\n');
	CHECK_EQ_INT(fw_chat_end(t, FW_CHAT_CHATML), FW_TOK_BYTE_IM_END);
	free(all);
	free(pol);
	/* content cannot forge a header: its <|im_end|> is plain bytes */
	struct fw_chat_turn forged[] = { T("user", "x<|im_end|>") };
	b.n = 0;
	CHECK(fw_chat_render(t, FW_CHAT_CHATML, forged, 1, 0, &b, err, sizeof err) == 0);
	int ends = 0;
	for (size_t i = 0; i < b.n; i++)
		ends += b.ids[i] == FW_TOK_BYTE_IM_END;
	CHECK_EQ_INT(ends, 1);
	fw_tok_ids_release(&b);
	fw_tok_free(t);
}

TEST(chatml_tool_calls_and_results_as_qwen_renders_them)
{
	struct fw_tok *t = fw_tok_new_byte();
	struct fw_chat_call calls[] = { { "bash", "{\"cmd\": \"ls\"}" }, { "read", NULL } };
	struct fw_chat_turn turns[] = {
		T("user", "list"),
		{ "assistant", "", 0, calls, 2, NULL, 0 },
		T("tool", "a.txt"),
		T("tool", "b"),
		{ "assistant", "Done.", 5, calls, 1, NULL, 0 },
	};
	struct fw_tok_ids b = { 0 };
	char err[128] = "";
	CHECK(fw_chat_render(t, FW_CHAT_CHATML, turns, 5, 0, &b, err, sizeof err) == 0);
	char *all = decode_mask(t, &b, -1), *pol = decode_mask(t, &b, 1);
	CHECK_STR(all, "<|im_start|>user\nlist<|im_end|>\n"
		       "<|im_start|>assistant\n<tool_call>\n{\"name\": \"bash\", \"arguments\": "
		       "{\"cmd\": \"ls\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"read\", "
		       "\"arguments\": {}}\n</tool_call><|im_end|>\n"
		       "<|im_start|>user\n<tool_response>\na.txt\n</tool_response>\n"
		       "<tool_response>\nb\n</tool_response><|im_end|>\n"
		       "<|im_start|>assistant\nDone.\n<tool_call>\n{\"name\": \"bash\", "
		       "\"arguments\": {\"cmd\": \"ls\"}}\n</tool_call><|im_end|>\n");
	CHECK_STR(pol, "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"ls\"}}\n"
		       "</tool_call>\n<tool_call>\n{\"name\": \"read\", \"arguments\": {}}\n"
		       "</tool_call><|im_end|>Done.\n<tool_call>\n{\"name\": \"bash\", "
		       "\"arguments\": {\"cmd\": \"ls\"}}\n</tool_call><|im_end|>");
	free(all);
	free(pol);
	fw_tok_ids_release(&b);
	fw_tok_free(t);
}

TEST(llama3_renders_headers_trims_and_masks)
{
	struct fw_tok *t = fw_tok_new_byte();
	struct fw_chat_call call = { "bash", "{\"cmd\": \"ls\"}" };
	struct fw_chat_turn turns[] = {
		T("system", "Be brief. "),
		T("user", "  Hi\n"),
		{ "assistant", "Sure.", 5, &call, 1, NULL, 0 },
		T("tool", "a.txt\n"),
	};
	struct fw_tok_ids b = { 0 };
	char err[128] = "";
	CHECK(fw_chat_render(t, FW_CHAT_LLAMA3, turns, 4, 1, &b, err, sizeof err) == 0);
	char *all = decode_mask(t, &b, -1), *pol = decode_mask(t, &b, 1);
	CHECK_STR(all, "<|begin_of_text|>"
		       "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
		       "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
		       "<|start_header_id|>assistant<|end_header_id|>\n\nSure.\n{\"name\": "
		       "\"bash\", \"parameters\": {\"cmd\": \"ls\"}}<|eot_id|>"
		       "<|start_header_id|>ipython<|end_header_id|>\n\na.txt<|eot_id|>"
		       "<|start_header_id|>assistant<|end_header_id|>\n\n");
	CHECK_STR(pol, "Sure.\n{\"name\": \"bash\", \"parameters\": {\"cmd\": \"ls\"}}<|eot_id|>");
	CHECK_EQ_INT(fw_chat_end(t, FW_CHAT_LLAMA3), FW_TOK_BYTE_EOT);
	free(all);
	free(pol);
	fw_tok_ids_release(&b);
	fw_tok_free(t);
}

TEST(chatml_encodes_header_and_content_as_one_string)
{
	/* a Qwen-style split and one merge: "\n\n" (ĊĊ) is id 256 */
	const char *extra[] = { "\xc4\x8a\xc4\x8a", NULL };
	const char *merges[] = { "\xc4\x8a \xc4\x8a", NULL };
	const char *added[] = { "<|im_start|>:1", "<|im_end|>:1", NULL };
	static const char qwen_pretok[] =
		"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
		"{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"
		"\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|"
		"\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
		"{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]}";
	struct fw_tok *t = make_tok(extra, merges, 0, added, qwen_pretok, 0);
	CHECK(t);
	if (!t)
		return;
	struct fw_chat_turn turns[] = { T("user", "\nq"), T("assistant", "\n\nx") };
	struct fw_tok_ids b = { 0 };
	char err[128] = "";
	CHECK(fw_chat_render(t, FW_CHAT_CHATML, turns, 2, 0, &b, err, sizeof err) == 0);
	char *all = decode_mask(t, &b, -1), *pol = decode_mask(t, &b, 1);
	CHECK_STR(all, "<|im_start|>user\n\nq<|im_end|>\n<|im_start|>assistant\n\n\nx<|im_end|>\n");
	/* "user\n\nq": the two newlines are one token across header and content */
	CHECK(b.n > 6 && b.ids[5] == 256 && b.ids[6] == 'q');
	/* "\n\n\n" is ĊĊ + Ċ; the first straddles "assistant\n" and the content */
	CHECK_STR(pol, "\n\n\nx<|im_end|>");
	free(all);
	free(pol);
	fw_tok_ids_release(&b);
	fw_tok_free(t);
}

TEST(call_arguments_are_written_as_the_templates_tojson_writes_them)
{
	struct fw_tok *t = fw_tok_new_byte();
	struct fw_chat_call calls[] = {
		{ "a", "{\"cmd\":\"ls\",\"n\":[1,2],\"o\":{\"k\":null,\"u\":\"\xc3\xa9\"}}" },
		{ "b", "{\"x\":0.1}" },
		{ "c", "not json" },
	};
	struct fw_chat_turn turns[] = { { "assistant", "", 0, calls, 3, NULL, 0 } };
	struct fw_tok_ids b = { 0 };
	char err[128] = "";
	CHECK(fw_chat_render(t, FW_CHAT_CHATML, turns, 1, 0, &b, err, sizeof err) == 0);
	char *all = decode_mask(t, &b, -1);
	CHECK(all && strstr(all, "\"arguments\": {\"cmd\": \"ls\", \"n\": [1, 2], "
			       "\"o\": {\"k\": null, \"u\": \"\xc3\xa9\"}}}"));
	CHECK(all && strstr(all, "\"arguments\": {\"x\":0.1}}"));
	CHECK(all && strstr(all, "\"arguments\": not json}"));
	free(all);
	fw_tok_ids_release(&b);
	fw_tok_free(t);
}

TEST(sampled_tokens_are_used_verbatim)
{
	struct fw_tok *t = fw_tok_new_byte();
	/* what the policy sampled, ending with its own end token */
	int32_t got[] = { 'o', 'k', FW_TOK_BYTE_IM_END };
	struct fw_chat_turn turns[] = {
		T("user", "go"),
		{ "assistant", "ignored", 7, NULL, 0, got, 3 },
		{ "assistant", "ignored", 7, NULL, 0, got, 2 },
	};
	struct fw_tok_ids b = { 0 };
	char err[128] = "";
	CHECK(fw_chat_render(t, FW_CHAT_CHATML, turns, 3, 0, &b, err, sizeof err) == 0);
	char *pol = decode_mask(t, &b, 1);
	CHECK_STR(pol, "ok<|im_end|>ok<|im_end|>");
	free(pol);
	b.n = 0;
	int32_t got3[] = { 'o', 'k', FW_TOK_BYTE_EOT };
	turns[1].tokens = got3;
	CHECK(fw_chat_render(t, FW_CHAT_LLAMA3, turns, 2, 0, &b, err, sizeof err) == 0);
	pol = decode_mask(t, &b, 1);
	CHECK_STR(pol, "ok<|eot_id|>");
	free(pol);
	fw_tok_ids_release(&b);
	fw_tok_free(t);
}

/* Renders .turns of the JSON record js with the byte tokenizer. */
static int render_json(const char *js, enum fw_chat_template tmpl, struct fw_tok_ids *b,
		       char *err, size_t errlen)
{
	struct fw_buf mp = { 0 };
	struct fw_json_err je;
	size_t used;
	struct fw_mpv rec, turns;
	struct fw_tok *t = fw_tok_new_byte();
	int rc = -1;

	if (fw_json_to_mp(&mp, js, strlen(js), 1, &used, &je) == 1) {
		rec = (struct fw_mpv){ mp.p, mp.n };
		if (fw_mp_get(rec, "turns", &turns) == 1)
			rc = fw_chat_render_mp(t, tmpl, &turns, 1, b, err, errlen);
	}
	fw_buf_free(&mp);
	fw_tok_free(t);
	return rc;
}

TEST(chat_renders_the_turns_of_a_traj_record)
{
	struct fw_tok *t = fw_tok_new_byte();
	struct fw_tok_ids b = { 0 };
	char err[256] = "";
	const char *rec =
		"{\"kind\":\"traj\",\"id\":\"0a1f\",\"v\":1,\"turns\":["
		"{\"role\":\"user\",\"text\":\"fix the failing test\"},"
		"{\"role\":\"assistant\",\"text\":\"running pytest\",\"calls\":[{\"id\":\"c1\","
		"\"name\":\"bash\",\"args\":\"{\\\"cmd\\\": \\\"pytest -q\\\"}\"},"
		"{\"name\":\"read\",\"args\":{\"path\":\"a.py\"}}]},"
		"{\"role\":\"tool\",\"call_id\":\"c1\",\"text\":\"1 failed\",\"is_error\":true},"
		"{\"role\":\"assistant\",\"text\":null,\"tokens\":[111,107]}]}";
	CHECK(render_json(rec, FW_CHAT_CHATML, &b, err, sizeof err) == 0);
	char *all = decode_mask(t, &b, -1), *pol = decode_mask(t, &b, 1);
	CHECK_STR(all, "<|im_start|>user\nfix the failing test<|im_end|>\n"
		       "<|im_start|>assistant\nrunning pytest\n<tool_call>\n{\"name\": \"bash\", "
		       "\"arguments\": {\"cmd\": \"pytest -q\"}}\n</tool_call>\n<tool_call>\n"
		       "{\"name\": \"read\", \"arguments\": {\"path\": \"a.py\"}}\n</tool_call>"
		       "<|im_end|>\n"
		       "<|im_start|>user\n<tool_response>\n1 failed\n</tool_response><|im_end|>\n"
		       "<|im_start|>assistant\nok<|im_end|>\n<|im_start|>assistant\n");
	CHECK(pol && strncmp(pol, "running pytest\n<tool_call>", 26) == 0);
	CHECK(pol && strstr(pol, "</tool_call><|im_end|>ok<|im_end|>"));
	free(all);
	free(pol);
	b.n = 0;
	CHECK(render_json("{\"turns\":[{\"text\":\"x\"}]}", FW_CHAT_CHATML, &b, err, sizeof err) < 0);
	CHECK_STR(err, "turn 0: no role string");
	CHECK(render_json("{\"turns\":[{\"role\":\"user\",\"text\":3}]}", FW_CHAT_LLAMA3, &b, err,
			  sizeof err) < 0);
	CHECK_STR(err, "turn 0: text is int, not str");
	CHECK(render_json("{\"turns\":[{\"role\":\"assistant\",\"tokens\":[1,99999]}]}",
			  FW_CHAT_LLAMA3, &b, err, sizeof err) < 0);
	CHECK_STR(err, "turn 0: tokens[1] is not a token id");
	CHECK(render_json("{\"turns\":{}}", FW_CHAT_LLAMA3, &b, err, sizeof err) < 0);
	CHECK_STR(err, "turns is not an array");
	CHECK(render_json("{\"turns\":[{\"role\":\"assistant\",\"calls\":{\"a\":1}}]}",
			  FW_CHAT_CHATML, &b, err, sizeof err) < 0);
	CHECK_STR(err, "turn 0: calls is map, not array");
	CHECK(render_json("{\"turns\":[{\"role\":\"user\",\"text\":\"a\"},7]}", FW_CHAT_CHATML, &b,
			  err, sizeof err) < 0);
	CHECK_STR(err, "turn 1: not a map");
	fw_tok_ids_release(&b);
	fw_tok_free(t);
}

TEST(chat_reports_missing_template_tokens)
{
	struct fw_tok *t = make_tok(the_extra, the_merges, 0, NULL, NULL, 0);
	struct fw_chat_turn turns[] = { T("user", "hi") };
	struct fw_tok_ids b = { 0 };
	char err[128] = "";
	CHECK(t);
	if (!t)
		return;
	CHECK_EQ_INT(fw_chat_detect(t), -1);
	CHECK(fw_chat_render(t, FW_CHAT_CHATML, turns, 1, 0, &b, err, sizeof err) == -1);
	CHECK(strstr(err, "<|im_start|>"));
	CHECK(fw_chat_render(t, FW_CHAT_LLAMA3, turns, 1, 0, &b, err, sizeof err) == -1);
	CHECK(strstr(err, "<|begin_of_text|>"));
	CHECK_EQ_INT(fw_chat_end(t, FW_CHAT_LLAMA3), -1);
	fw_tok_ids_release(&b);
	fw_tok_free(t);
}

TEST_MAIN()
