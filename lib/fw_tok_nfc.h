/*
 * fw_tok_nfc.h — Unicode NFC (Unicode 14.0) of UTF-8 text, for tokenizers
 * whose tokenizer.json asks for it (see fw_tok.h).
 */
#ifndef FW_TOK_NFC_H
#define FW_TOK_NFC_H

#include <stddef.h>

/*
 * fw_tok_nfc: the Unicode NFC form (Unicode 14.0) of n bytes of text, in a
 * NUL-terminated buffer the caller frees with free(); *outlen gets its
 * length.  Bytes that are not valid UTF-8 are kept and compose with
 * nothing.  Returns NULL when out of memory.
 */
char *fw_tok_nfc(const void *text, size_t n, size_t *outlen);

/* fw_tok_nfc_needed: 0 when fw_tok_nfc() would return text unchanged for
 * certain (no code point of U+0300 or above), else 1.  Cannot fail. */
int fw_tok_nfc_needed(const void *text, size_t n);

#endif
