/*
 * fw_toolcall.h — function calling in the chat templates of the model
 * families flywheel serves: tools rendered into the prompt as the model was
 * trained to read them, and tool calls parsed back out of what it wrote.
 *
 * Qwen (ChatML): the tools go into the system turn, one JSON object a line
 * between <tools> and </tools> with the instructions of Qwen2.5's template;
 * a call is <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>,
 * one block per call, after any text.
 * Llama 3: the tools go into the first user turn (Llama 3.1's template with
 * tools in the user message), each as indented JSON, and the system turn
 * gets "Environment: ipython"; a call is the whole reply, one JSON object
 * {"name": ..., "parameters": {...}} (or "arguments").
 *
 * Tools are given as the OpenAI API has them: a JSON array of
 * {"type": "function", "function": {"name", "description", "parameters"}}.
 */
#ifndef FW_TOOLCALL_H
#define FW_TOOLCALL_H

#include <stddef.h>

#include "fw_tok.h"

/*
 * Renders turns[0..nturns) as fw_chat_render() does, with add_generation
 * prompt, and with tools (tools_json, len bytes: the JSON array above)
 * placed where template tmpl puts them: a system turn is added first when
 * the chat has none.  Returns 0, or -1 with err filled (tools_json is not
 * such an array, t lacks a template token, out of memory).
 */
int fw_tools_render(const struct fw_tok *t, enum fw_chat_template tmpl, const char *tools_json,
		    size_t len, const struct fw_chat_turn *turns, size_t nturns,
		    struct fw_tok_ids *out, char *err, size_t errlen);

/* One parsed call: name and arguments as compact JSON text (an object),
 * both NUL-terminated and owned by the list. */
struct fw_toolcall {
	char *name;
	char *args;
};

/* The calls in a reply.  Release with fw_toolcalls_release(). */
struct fw_toolcalls {
	struct fw_toolcall *v;
	size_t n;
	size_t content_len; /* bytes of the reply before its first call (0
			     * when they are all white space; all of it
			     * when there is no call) */
};

/*
 * Parses the tool calls of a reply, text[0..len), written under template
 * tmpl.  A block or object that is not a JSON object with a string "name"
 * is not a call: the reply is then text.  out is overwritten.  Returns the
 * number of calls (0: the reply is text), or -1 when out of memory.
 */
int fw_toolcall_parse(enum fw_chat_template tmpl, const char *text, size_t len,
		      struct fw_toolcalls *out);

/* Frees what c holds and zeroes it.  NULL does nothing. */
void fw_toolcalls_release(struct fw_toolcalls *c);

/* The text that starts a call under tmpl, where a streaming server holds
 * back what follows: "<tool_call>" for ChatML; NULL for Llama 3, whose call
 * is a reply that starts with '{'.  Static. */
const char *fw_toolcall_marker(enum fw_chat_template tmpl);

/* The start of a call to put after the generation prompt so that the reply
 * is one: of the function name (NUL-terminated), or of any function when
 * name is NULL.  Returns a string the caller frees, or NULL when out of
 * memory. */
char *fw_toolcall_prefix(enum fw_chat_template tmpl, const char *name);

#endif
