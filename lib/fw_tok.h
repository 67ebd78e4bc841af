/*
 * fw_tok.h — tokenizers and chat templates.
 *
 * Two tokenizers behind one type:
 *
 *  - the byte tokenizer for tiny from-scratch models: ids 0..255 are the
 *    bytes themselves, followed by the special tokens below (vocabulary
 *    size FW_TOK_BYTE_VOCAB).  It is saved as a Hugging Face tokenizer.json
 *    (a byte-level BPE with no merges), so every checkpoint directory has
 *    one and other tools read it as they read any other;
 *
 *  - tokenizer.json byte-level BPE as GPT-2, Llama 3 and Qwen2/Qwen3 ship
 *    it: vocab, merges ("a b" strings or ["a", "b"] pairs), the
 *    pre-tokenizer split regex (PCRE2, UTF and UCP), added and special
 *    tokens matched before splitting, ignore_merges (Llama 3).  Accepted:
 *    model BPE without dropout, byte fallback or subword affixes;
 *    pre_tokenizer ByteLevel (add_prefix_space false), Split (Regex or
 *    String, behavior Isolated, not inverted), Digits, or a Sequence of
 *    these ending in ByteLevel; normalizer none or NFC; decoder none or
 *    ByteLevel; added tokens without single_word, lstrip or rstrip.
 *    Anything else is refused with an error naming it.
 *
 * decode(encode(x)) == x for every byte string x, valid UTF-8 or not: bytes
 * that are not valid UTF-8 never match the split regex and are encoded as
 * pieces of their own.  A tokenizer.json "NFC" normalizer (Qwen2, Qwen3) is
 * applied only with FW_TOK_NORMALIZE: it changes no text already in NFC,
 * and left off it keeps the round trip exact for every input.
 *
 * Chat templates render turns into token ids plus a parallel mask that is 1
 * on the tokens a policy produced (assistant content and its end token) and
 * 0 elsewhere (headers, system, user, tool output, hints).  ChatML is
 * Qwen2.5's template without its default system prompt and without Qwen3's
 * <think> blocks; Llama 3 is Llama 3.0's (3.1 adds a dated system preamble).
 *
 * Thread safety: a struct fw_tok may be shared by threads; encode guards its
 * cache with a mutex.  Buffers (struct fw_tok_ids) are per caller.
 */
#ifndef FW_TOK_H
#define FW_TOK_H

#include <stddef.h>
#include <stdint.h>

/* Byte tokenizer ids: 0..255 are bytes, then these special tokens. */
enum {
	FW_TOK_BYTE_ENDOFTEXT = 256,     /* <|endoftext|>       */
	FW_TOK_BYTE_IM_START = 257,      /* <|im_start|>        */
	FW_TOK_BYTE_IM_END = 258,        /* <|im_end|>          */
	FW_TOK_BYTE_BEGIN_OF_TEXT = 259, /* <|begin_of_text|>   */
	FW_TOK_BYTE_START_HEADER = 260,  /* <|start_header_id|> */
	FW_TOK_BYTE_END_HEADER = 261,    /* <|end_header_id|>   */
	FW_TOK_BYTE_EOT = 262,           /* <|eot_id|>          */
	FW_TOK_BYTE_PAD = 263,           /* <|pad|>             */
	FW_TOK_BYTE_VOCAB = 264          /* vocabulary size     */
};

/* encode flags */
#define FW_TOK_SPECIAL 0x1 /* match special added tokens in the text      */
#define FW_TOK_ADD_BOS 0x2 /* prepend the BOS token (if the tokenizer has one) */
#define FW_TOK_NORMALIZE 0x4 /* apply the tokenizer's NFC normalizer, if any */

/* decode flags */
#define FW_TOK_SKIP_SPECIAL 0x1 /* leave special tokens out of the text */

struct fw_tok;

/*
 * A growable id buffer with a parallel mask; encode and the chat renderer
 * append to it.  Zero-initialise (`struct fw_tok_ids b = {0};`), reuse across
 * calls (set n = 0 to empty it), release with fw_tok_ids_release().
 * ids[i] is a token id; mask[i] is 0 or 1.
 */
struct fw_tok_ids {
	int32_t *ids;
	uint8_t *mask;
	size_t n, cap;
};

/* Frees the arrays of b and zeroes it; b itself is the caller's.  NULL-safe. */
void fw_tok_ids_release(struct fw_tok_ids *b);

/* Appends one id with mask value mask (0 or 1).  Returns 0, or -1 when out
 * of memory (b unchanged). */
int fw_tok_ids_push(struct fw_tok_ids *b, int32_t id, int mask);

/*
 * fw_tok_new_byte: a new byte tokenizer (ids documented above).
 * Returns a tokenizer the caller frees with fw_tok_free(), or NULL when out
 * of memory.
 */
struct fw_tok *fw_tok_new_byte(void);

/*
 * fw_tok_load: reads a Hugging Face tokenizer.json from path.
 * err (errlen bytes, may be NULL) receives "PATH: what is unsupported or
 * malformed" on failure.  Returns a tokenizer the caller frees with
 * fw_tok_free(), or NULL on failure.
 */
struct fw_tok *fw_tok_load(const char *path, char *err, size_t errlen);

/*
 * fw_tok_load_mem: as fw_tok_load, from len bytes of JSON text in memory;
 * name stands for the file in error messages.
 */
struct fw_tok *fw_tok_load_mem(const char *json, size_t len, const char *name,
			       char *err, size_t errlen);

/* Frees t.  fw_tok_free(NULL) does nothing. */
void fw_tok_free(struct fw_tok *t);

/*
 * fw_tok_save: writes t as tokenizer.json to path (a temp file renamed into
 * place).  A loaded tokenizer is written back byte for byte as it was read.
 * Returns 0, or -1 with err filled ("PATH: reason", errno kept).
 */
int fw_tok_save(const struct fw_tok *t, const char *path, char *err, size_t errlen);

/* Number of ids (largest id + 1, added tokens included).  Cannot fail. */
int32_t fw_tok_vocab_size(const struct fw_tok *t);

/*
 * fw_tok_id: id of the token whose text is the NUL-terminated s, in the
 * tokenizer's own spelling for vocabulary entries (byte-level alphabet, e.g.
 * "Ġthe") or literally for added tokens ("<|im_end|>").  Returns -1 if none.
 */
int32_t fw_tok_id(const struct fw_tok *t, const char *s);

/* BOS and EOS ids, or -1 when the tokenizer has none.  Cannot fail.
 * BOS comes from a TemplateProcessing post-processor (Llama 3); EOS, the end
 * of a document, is <|endoftext|> or else <|end_of_text|>.  The end of a
 * chat turn is fw_chat_end(). */
int32_t fw_tok_bos(const struct fw_tok *t);
int32_t fw_tok_eos(const struct fw_tok *t);

/* 1 if id is a special added token, else 0 (also for ids out of range). */
int fw_tok_is_special(const struct fw_tok *t, int32_t id);

/*
 * fw_tok_encode: appends the ids of len bytes of text to out, each with mask
 * value mask (0 or 1).  flags: FW_TOK_SPECIAL matches special added tokens
 * in the text (without it their spelling is encoded as plain text);
 * FW_TOK_ADD_BOS prepends fw_tok_bos() when there is one; FW_TOK_NORMALIZE
 * puts the text between added tokens in NFC first when the tokenizer.json
 * has an NFC normalizer (the ids then decode to the normalized text, as with
 * the reference library).  Non-special added tokens are always matched.
 * (Hugging Face's encode matches special tokens too by default: pass
 * FW_TOK_SPECIAL for the same ids.)  Returns 0, or -1 when out of memory (out keeps
 * what it had, possibly with more capacity).
 */
int fw_tok_encode(const struct fw_tok *t, const void *text, size_t len, unsigned flags,
		  int mask, struct fw_tok_ids *out);

/*
 * fw_tok_piece: the bytes token id decodes to, *len set to their count.
 * The bytes belong to t and live as long as it; not NUL-terminated.
 * Returns NULL for an id out of range.
 */
const char *fw_tok_piece(const struct fw_tok *t, int32_t id, size_t *len);

/*
 * fw_tok_decode: the bytes of n ids, NUL-terminated (the NUL not counted in
 * *outlen), in a buffer the caller frees with free().  flags:
 * FW_TOK_SKIP_SPECIAL.  Returns the buffer, or NULL when an id is out of
 * range (err names it) or out of memory.
 */
char *fw_tok_decode(const struct fw_tok *t, const int32_t *ids, size_t n, unsigned flags,
		    size_t *outlen, char *err, size_t errlen);

/* ---- chat templates ---------------------------------------------------- */

enum fw_chat_template {
	FW_CHAT_CHATML, /* Qwen: <|im_start|>role\n...<|im_end|>\n               */
	FW_CHAT_LLAMA3  /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
};

/* A tool call of an assistant turn, rendered as text.  args is rewritten
 * as the templates' tojson writes it (Python's json.dumps: ", " and ": "
 * between items, keys kept in order); text that is not JSON, or has a
 * float in it, is used as it is.  NULL renders as {}. */
struct fw_chat_call {
	const char *name; /* NUL-terminated                                */
	const char *args; /* NUL-terminated JSON text (an object), or NULL   */
};

/*
 * One turn.  role: "system", "user", "assistant", "tool" (a tool result) or
 * any other name, rendered as given.  text/len: the content bytes (text may
 * be NULL when len is 0).  calls/ncalls: tool calls of an assistant turn.
 * tokens/ntokens: for an assistant turn, the ids the policy actually
 * sampled; when given they are used verbatim instead of encoding text and
 * calls (and the end token is added unless they already end with it).
 * Only "assistant" turns are masked 1.
 */
struct fw_chat_turn {
	const char *role;
	const char *text;
	size_t len;
	const struct fw_chat_call *calls;
	size_t ncalls;
	const int32_t *tokens;
	size_t ntokens;
};

/*
 * fw_chat_detect: the template t's special tokens call for: FW_CHAT_CHATML
 * when it has <|im_start|>, FW_CHAT_LLAMA3 when it has <|start_header_id|>,
 * else -1.  The byte tokenizer has both and answers FW_CHAT_CHATML.
 */
int fw_chat_detect(const struct fw_tok *t);

/*
 * fw_chat_end: the id that ends an assistant turn under tmpl (<|im_end|> or
 * <|eot_id|>), where sampling stops; -1 when t lacks it.
 */
int32_t fw_chat_end(const struct fw_tok *t, enum fw_chat_template tmpl);

/*
 * fw_chat_render: appends turns[0..nturns) rendered with template tmpl to
 * out, mask 1 on assistant content and its end token, 0 elsewhere.  With
 * add_generation_prompt, ends with the header of a new assistant turn (mask
 * 0), ready for sampling.  Content is encoded without matching special
 * tokens, so a turn cannot forge a header.  The text between two special
 * tokens is encoded as one string, so the ids are those a template engine
 * followed by the tokenizer gives; a token that straddles the header and the
 * content of an assistant turn (a newline merged into "\n\n") is masked 1.
 *
 * ChatML:  <|im_start|>ROLE\nTEXT<|im_end|>\n; a tool turn is rendered as
 *          a user turn holding <tool_response>\nTEXT\n</tool_response>;
 *          each call appends \n<tool_call>\n{"name": NAME, "arguments": ARGS}
 *          \n</tool_call> to the assistant text (Qwen2.5's template).
 * Llama 3: <|begin_of_text|> first, then
 *          <|start_header_id|>ROLE<|end_header_id|>\n\nTEXT<|eot_id|> with
 *          TEXT trimmed of surrounding whitespace; a tool turn has role
 *          "ipython"; a call is {"name": NAME, "parameters": ARGS}.
 *
 * Returns 0, or -1 with err filled when t lacks a token the template needs
 * (err names it) or out of memory; out may then hold a partial rendering.
 */
int fw_chat_render(const struct fw_tok *t, enum fw_chat_template tmpl,
		   const struct fw_chat_turn *turns, size_t nturns, int add_generation_prompt,
		   struct fw_tok_ids *out, char *err, size_t errlen);

/*
 * fw_chat_render_mp: fw_chat_render() over the turns[] array of a traj or
 * rollout record (flywheel-records(5)), a msgpack array viewed by *turns.
 * Each turn is a map: role (str, required), text (str or nil), calls[]
 * ({name, args}; args is JSON text, or a value written as JSON),
 * tokens[] (ints: used for an assistant turn when not empty).  Other keys
 * are ignored.  Returns 0, or -1 with err filled ("turn N: reason", N from
 * 0) when a turn is malformed, t lacks a template token, or memory runs out.
 */
struct fw_mpv;
int fw_chat_render_mp(const struct fw_tok *t, enum fw_chat_template tmpl,
		      const struct fw_mpv *turns, int add_generation_prompt,
		      struct fw_tok_ids *out, char *err, size_t errlen);

#endif
