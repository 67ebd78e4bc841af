/*
 * fw_ingest_int.h — helpers shared by the fw_ingest*.c files (not part of
 * the library's interface; prefix fw_ing_).  All of them take and return jansson objects;
 * "borrowed" results are owned by the object they came from.
 */
#ifndef FW_INGEST_INT_H
#define FW_INGEST_INT_H

#include <jansson.h>
#include <stddef.h>

#include "fw_ingest.h"

/* A new traj object with every field in schema order (id "" until
 * fw_ingest_set_id()).  NULL when memory runs out. */
json_t *fw_ing_traj_new(const char *source);

/* Appends a turn {role, text: ""} to traj; returns it (borrowed) or NULL. */
json_t *fw_ing_turn_add(json_t *traj, const char *role);

/* The last turn of traj (borrowed), or NULL. */
json_t *fw_ing_turn_last(json_t *traj);

/* Appends s[0..n) to the turn's field key (text or thinking), after a
 * newline when the field is not empty.  Returns 0 or -1. */
int fw_ing_turn_append(json_t *turn, const char *key, const char *s, size_t n);

/* Appends a call {id, name, args} to the turn; args is a JSON string (kept,
 * compacted when it parses as JSON) or any other JSON value (dumped
 * compact).  Returns 0 or -1. */
int fw_ing_turn_call(json_t *turn, const char *id, const char *name, const json_t *args);

/* Appends a tool turn answering call_id.  Returns it (borrowed) or NULL. */
json_t *fw_ing_tool_turn(json_t *traj, const char *call_id, const char *text, size_t n,
		      int is_error);

/* Text of message content: a string; an array of parts whose text is
 * joined with newlines ("text", "input_text", "output_text", "refusal",
 * "summary_text"; images as "[image]"); null as "".  Returns a malloc'd
 * NUL-terminated string (length in *n) or NULL when memory runs out. */
char *fw_ing_content_text(const json_t *content, size_t *n);

/* String field k of o, or NULL when absent or not a string. */
const char *fw_ing_str(const json_t *o, const char *k);

/* Field k of o if it has type t (or is absent: then *out = NULL) and
 * returns 0; -1 with "'PATH' is TYPE, not WANT" in err otherwise.  path
 * names the field in the message. */
int fw_ing_field(const json_t *o, const char *k, json_type t, const char *path, const json_t **out,
	      char *err, size_t errlen);

/* Name of a jansson type for messages ("object", "array", ...). */
const char *fw_ing_type_name(const json_t *v);

/* Sets traj.created from v when v is a time (see fw_ingest_time()). */
void fw_ing_set_created(json_t *traj, const json_t *v);

/* Sets traj.usage to {input_tokens, output_tokens} from v's fields in and
 * out (either may be missing). */
void fw_ing_set_usage(json_t *traj, const json_t *v, const char *in, const char *out);

/* Copies the members of object md (when an object) into traj.meta, never
 * overwriting a key already there. */
void fw_ing_meta_merge(json_t *traj, const json_t *md);

/* Converts Anthropic-style messages (role + string or content blocks) and
 * appends their turns to traj.  Returns 0, or -1 with err set. */
int fw_ing_anthropic_messages(json_t *traj, const json_t *msgs, const char *path, char *err,
			   size_t errlen);

/* Notes each key of object o that is not in known (NULL-terminated) as
 * "PATH.KEY" in traj's "_unknown" array (once each), for fb-ingest to warn
 * about: a misspelt field would otherwise lose content without a word.
 * Nothing happens when memory runs out. */
void fw_ing_check_keys(json_t *traj, const json_t *o, const char *path,
		       const char *const *known);

/* Appends the signature sig (a string; anything else is ignored) of a
 * thinking block to the turn's signatures array.  Returns 0 or -1. */
int fw_ing_turn_signature(json_t *turn, const json_t *sig);

/* Converts one Chat Completions message m (path names it in errors) and
 * appends its turns to traj.  *legacy holds the id of a pending legacy
 * function_call (malloc'd; the caller frees it after the last message).
 * Returns 0, or -1 with err set. */
int fw_ing_chat_message(json_t *traj, const json_t *m, const char *path, char **legacy,
			char *err, size_t errlen);

/* Appends the text of content (see fw_ing_content_text()) to field key of
 * turn.  Returns 0 or -1. */
int fw_ing_append_content(json_t *turn, const char *key, const json_t *content);

/* fw_ingest_convert() for mini-swe-agent and OpenHands (fw_ingest_agents.c). */
json_t *fw_ing_conv_agent(enum fw_fmt f, const json_t *doc, const char *name, char *err,
			  size_t errlen);

#endif
