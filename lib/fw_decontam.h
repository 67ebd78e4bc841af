/*
 * fw_decontam.h — n-gram decontamination: does a text share a run of N
 * words with any text of a reference set (an eval split)?
 *
 * Words are maximal runs of ASCII letters and digits and of non-ASCII
 * bytes (UTF-8 letters); everything else separates them, and ASCII letters
 * are compared lowercased.  So "Fix the bug: parse_amount('1,234.50')" has
 * the words fix the bug parse amount 1 234 50.  An n-gram is N consecutive
 * words; a reference text of fewer than N words contributes nothing.
 * N-grams are kept as 64-bit hashes (a false match needs a hash collision,
 * about one in 10^19 per comparison).
 */
#ifndef FW_DECONTAM_H
#define FW_DECONTAM_H

#include <stddef.h>
#include <stdint.h>
#include "fw_mp.h"

#define FW_DECONTAM_N 13

struct fw_decontam;

/* Where a checked text first shares an n-gram with the reference set. */
struct fw_decontam_hit {
	uint64_t src;     /* the src number given when the reference was added */
	const char *text; /* the checked text (points into the checked record) */
	size_t start, end; /* byte span of the shared n-gram in text */
};

/* A new, empty reference set of n-grams of n words (n >= 1; 13 is the
 * usual choice).  Returns NULL when memory runs out or n is 0.  Caller frees
 * with fw_decontam_free(). */
struct fw_decontam *fw_decontam_new(unsigned n);

/* Frees d.  fw_decontam_free(NULL) does nothing. */
void fw_decontam_free(struct fw_decontam *d);

/* Adds every n-gram of text s[0..len) to the set, remembering src (any
 * number the caller uses to name the text, such as a record index) for the
 * first text that brings each n-gram.  Returns the number of n-grams in the
 * text (0 when it has fewer than n words), or -1 when memory runs out. */
int64_t fw_decontam_add(struct fw_decontam *d, const char *s, size_t len, uint64_t src);

/*
 * Adds the texts of a reference record: the strings at .prompt, .text,
 * .question, .problem_statement, .task.prompt, and the .text of every turn
 * in .turns whose role is "user".  A record with none of these fields adds
 * all of its string values.  Returns the number of n-grams added, or -1
 * when memory runs out.
 */
int64_t fw_decontam_add_record(struct fw_decontam *d, struct fw_mpv rec, uint64_t src);

/* Number of distinct n-grams in the set.  Cannot fail. */
size_t fw_decontam_size(const struct fw_decontam *d);

/* 1 when s[0..len) shares an n-gram with the set (the first one found is
 * described in *hit, whose text is s), 0 when not.  Cannot fail. */
int fw_decontam_check(const struct fw_decontam *d, const char *s, size_t len,
		      struct fw_decontam_hit *hit);

/* Same over every string value of rec, at any depth (keys are not text).
 * Returns 1 with *hit filled, or 0.  Cannot fail. */
int fw_decontam_check_record(const struct fw_decontam *d, struct fw_mpv rec,
			     struct fw_decontam_hit *hit);

/* Appends the normalized words of s[0..len), separated by single spaces, to
 * out (for messages).  Returns 0 or -1 when memory runs out. */
int fw_decontam_words(struct fw_buf *out, const char *s, size_t len);

#endif
