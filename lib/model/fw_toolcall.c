/*
 * fw_toolcall.c — tools in the chat templates, and tool calls parsed from
 * replies.  See fw_toolcall.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fw_mp.h"
#include "fw_toolcall.h"

static const char qwen_head[] =
	"# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
	"You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char qwen_tail[] =
	"\n</tools>\n\nFor each function call, return a json object with function name and "
	"arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
	"<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
static const char llama_head[] =
	"Given the following functions, please respond with a JSON for a function call with "
	"its proper arguments that best answers the given prompt.\n\nRespond in the format "
	"{\"name\": function name, \"parameters\": dictionary of argument name and its value}."
	"Do not use variables.\n\n";
static const char llama_env[] = "Environment: ipython\n\n";

static int app(struct fw_buf *b, const char *s, size_t n)
{
	return fw_buf_append(b, s, n);
}

static int apps(struct fw_buf *b, const char *s)
{
	return fw_buf_append(b, s, strlen(s));
}

int fw_tools_render(const struct fw_tok *t, enum fw_chat_template tmpl, const char *tools_json,
		    size_t len, const struct fw_chat_turn *turns, size_t nturns,
		    struct fw_tok_ids *out, char *err, size_t errlen)
{
	json_error_t je;
	json_t *tools = json_loadb(tools_json, len, JSON_REJECT_DUPLICATES, &je), *x;
	struct fw_chat_turn *tt = calloc(nturns + 1, sizeof *tt);
	struct fw_buf sys = { 0 }, usr = { 0 };
	size_t i, n = 0;
	int rc = -1, has_sys = nturns && turns[0].role && !strcmp(turns[0].role, "system");

	if (!json_is_array(tools)) {
		snprintf(err, errlen, "the tools are not a JSON array (%s)",
			 tools ? "another value" : je.text);
		goto out;
	}
	if (!tt)
		goto oom;
	/* the system turn: its own text, then (Qwen) the tools */
	if (tmpl == FW_CHAT_LLAMA3 && apps(&sys, llama_env))
		goto oom;
	if (has_sys && app(&sys, turns[0].text ? turns[0].text : "", turns[0].len))
		goto oom;
	if (tmpl == FW_CHAT_CHATML) {
		if ((sys.n && apps(&sys, "\n\n")) || apps(&sys, qwen_head))
			goto oom;
		json_array_foreach(tools, i, x) {
			/* tojson: Python's separators, keys in their order */
			char *s = json_dumps(x, JSON_PRESERVE_ORDER);
			if (!s || apps(&sys, "\n") || apps(&sys, s)) {
				free(s);
				goto oom;
			}
			free(s);
		}
		if (apps(&sys, qwen_tail))
			goto oom;
	}
	tt[n] = has_sys ? turns[0] : (struct fw_chat_turn){ 0 };
	tt[n].role = "system";
	tt[n].text = (const char *)sys.p;
	tt[n++].len = sys.n;
	int first_user = 1;
	for (i = has_sys; i < nturns; i++) {
		tt[n] = turns[i];
		if (tmpl == FW_CHAT_LLAMA3 && first_user && turns[i].role &&
		    !strcmp(turns[i].role, "user")) {
			size_t k;
			first_user = 0;
			if (apps(&usr, llama_head))
				goto oom;
			json_array_foreach(tools, k, x) {
				char *s = json_dumps(x, JSON_PRESERVE_ORDER | JSON_INDENT(4));
				if (!s || apps(&usr, s) || apps(&usr, "\n\n")) {
					free(s);
					goto oom;
				}
				free(s);
			}
			if (app(&usr, turns[i].text ? turns[i].text : "", turns[i].len))
				goto oom;
			tt[n].text = (const char *)usr.p;
			tt[n].len = usr.n;
		}
		n++;
	}
	rc = fw_chat_render(t, tmpl, tt, n, 1, out, err, errlen);
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
out:
	json_decref(tools);
	fw_buf_free(&sys);
	fw_buf_free(&usr);
	free(tt);
	return rc;
}

static int space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Adds the call in JSON text s[0..n) to out when it is an object with a
 * string "name" and an object (or absent) argkey.  Returns 1 when added, 0
 * when s is not a call, -1 when out of memory. */
static int add_call(struct fw_toolcalls *out, const char *s, size_t n, const char *argkey,
		    const char *argkey2)
{
	json_error_t je;
	json_t *v = json_loadb(s, n, 0, &je), *name, *args;
	int rc = 0;

	name = json_object_get(v, "name");
	args = json_object_get(v, argkey);
	if (!args && argkey2)
		args = json_object_get(v, argkey2);
	if (json_is_object(v) && json_is_string(name) && (!args || json_is_object(args))) {
		struct fw_toolcall *nv = realloc(out->v, sizeof *nv * (out->n + 1));
		char *a = args ? json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER)
			       : strdup("{}");
		char *nm = strdup(json_string_value(name));
		if (!nv || !a || !nm) {
			if (nv)
				out->v = nv;
			free(a);
			free(nm);
			rc = -1;
		} else {
			out->v = nv;
			out->v[out->n].name = nm;
			out->v[out->n++].args = a;
			rc = 1;
		}
	}
	json_decref(v);
	return rc;
}

int fw_toolcall_parse(enum fw_chat_template tmpl, const char *text, size_t len,
		      struct fw_toolcalls *out)
{
	static const char open[] = "<tool_call>", close[] = "</tool_call>";
	size_t b = 0, e = len;

	memset(out, 0, sizeof *out);
	while (b < e && space(text[b]))
		b++;
	while (e > b && space(text[e - 1]))
		e--;
	out->content_len = len;
	if (tmpl == FW_CHAT_LLAMA3) {
		if (b < e && text[b] == '{') {
			int rc = add_call(out, text + b, e - b, "parameters", "arguments");
			if (rc < 0) {
				fw_toolcalls_release(out);
				return -1;
			}
			if (rc)
				out->content_len = 0;
		}
		return (int)out->n;
	}
	const char *first = memmem(text, len, open, sizeof open - 1), *p = first;
	while (p) {
		const char *q = p + sizeof open - 1;
		const char *end = memmem(q, len - (size_t)(q - text), close, sizeof close - 1);
		/* the last block may lack its closing tag: the reply stopped there */
		size_t n = end ? (size_t)(end - q) : len - (size_t)(q - text);
		int rc = add_call(out, q, n, "arguments", "parameters");
		if (rc <= 0) {
			/* not a call: the whole reply is text */
			fw_toolcalls_release(out);
			memset(out, 0, sizeof *out);
			out->content_len = len;
			return rc < 0 ? -1 : 0;
		}
		if (!end)
			break;
		q = end + sizeof close - 1;
		p = memmem(q, len - (size_t)(q - text), open, sizeof open - 1);
	}
	if (out->n) {
		size_t c = (size_t)(first - text), i = 0;
		while (i < c && space(text[i]))
			i++;
		out->content_len = i == c ? 0 : c;
	}
	return (int)out->n;
}

void fw_toolcalls_release(struct fw_toolcalls *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].name);
		free(c->v[i].args);
	}
	free(c->v);
	memset(c, 0, sizeof *c);
}

const char *fw_toolcall_marker(enum fw_chat_template tmpl)
{
	return tmpl == FW_CHAT_LLAMA3 ? NULL : "<tool_call>";
}

char *fw_toolcall_prefix(enum fw_chat_template tmpl, const char *name)
{
	char *s = NULL;
	json_t *j = name ? json_string(name) : NULL;
	char *q = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
	const char *argkey = tmpl == FW_CHAT_LLAMA3 ? "parameters" : "arguments";
	const char *open = tmpl == FW_CHAT_LLAMA3 ? "" : "<tool_call>\n";
	int rc;

	json_decref(j);
	if (name && !q)
		return NULL;
	/* a named call is written up to its arguments' value; any call up to
	 * the name's opening quote */
	rc = name ? asprintf(&s, "%s{\"name\": %s, \"%s\": ", open, q, argkey)
		  : asprintf(&s, "%s{\"name\": \"", open);
	free(q);
	return rc < 0 ? NULL : s;
}
