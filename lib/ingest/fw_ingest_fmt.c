/*
 * fw_ingest_fmt.c — one converter per log format, from a parsed document to
 * a traj object (see fw_ingest.h for the record, fw_ingest(1) for the
 * mapping table).  Each converter checks the types of the fields it reads
 * and names the first wrong one in err.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_ingest.h"
#include "fw_ingest_int.h"

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

/* The first of keys that o has, or NULL. */
static const json_t *first_of(const json_t *o, const char *const *keys)
{
	for (; *keys; keys++) {
		const json_t *v = json_object_get(o, *keys);
		if (v && !json_is_null(v))
			return v;
	}
	return NULL;
}

static void set_str(json_t *traj, const char *key, const json_t *v)
{
	if (json_is_string(v))
		json_object_set_new(traj, key, json_string(json_string_value(v)));
}

static void set_source_id(json_t *traj, const json_t *v)
{
	if (json_is_string(v) && json_string_length(v))
		json_object_set_new(json_object_get(traj, "meta"), "source_id",
				    json_string(json_string_value(v)));
}

int fw_ing_append_content(json_t *turn, const char *key, const json_t *content)
{
	size_t n;
	char *s = fw_ing_content_text(content, &n);

	if (!s)
		return -1;
	int rc = fw_ing_turn_append(turn, key, s, n);
	free(s);
	return rc;
}

/* ---- OpenAI Chat Completions ------------------------------------------------- */

/* The fields of a Chat Completions message (and what servers and agents
 * add to it: reasoning of vLLM and DeepSeek, mini-swe-agent's extra). */
static const char *const chat_keys[] = {
	"role", "content", "name", "tool_calls", "tool_call_id", "function_call", "refusal",
	"audio", "annotations", "reasoning_content", "reasoning", "extra", "id", "type",
	"timestamp", "metadata", NULL,
};

int fw_ing_chat_message(json_t *traj, const json_t *m, const char *path, char **legacy,
			char *err, size_t errlen)
{
	const char *role = fw_ing_str(m, "role");
	const json_t *calls, *fc;
	json_t *t;
	size_t i;
	json_t *c;

	if (!m)
		return ERR("'%s' is missing", path);
	if (!json_is_object(m))
		return ERR("'%s' is %s, not object", path, fw_ing_type_name(m));
	if (!role)
		return ERR("'%s.role' is missing", path);
	char gpath[80];
	snprintf(gpath, sizeof gpath, "%.*s[]", (int)strcspn(path, "["), path);
	fw_ing_check_keys(traj, m, gpath, chat_keys);
	if (!strcmp(role, "system") || !strcmp(role, "developer") || !strcmp(role, "user")) {
		t = fw_ing_turn_add(traj, role[0] == 'u' ? "user" : "system");
		return t && !fw_ing_append_content(t, "text", json_object_get(m, "content")) ? 0 : -1;
	}
	if (!strcmp(role, "assistant")) {
		t = fw_ing_turn_add(traj, "assistant");
		if (!t || fw_ing_append_content(t, "text", json_object_get(m, "content")))
			return -1;
		const json_t *rsn = json_object_get(m, "reasoning_content");
		if (!json_is_string(rsn))
			rsn = json_object_get(m, "reasoning");
		if (json_is_string(rsn) && fw_ing_append_content(t, "thinking", rsn))
			return -1;
		if (fw_ing_str(m, "refusal"))
			fw_ing_turn_append(t, "text", fw_ing_str(m, "refusal"), strlen(fw_ing_str(m, "refusal")));
		if (fw_ing_field(m, "tool_calls", JSON_ARRAY, "tool_calls", &calls, err, errlen))
			return -1;
		json_array_foreach(calls, i, c) {
			const json_t *f = json_object_get(c, "function");
			if (!json_is_object(f))
				return ERR("'%s.tool_calls[%zu].function' is %s, not object", path, i,
					   fw_ing_type_name(f));
			if (fw_ing_turn_call(t, fw_ing_str(c, "id"), fw_ing_str(f, "name"),
					  json_object_get(f, "arguments")))
				return -1;
		}
		fc = json_object_get(m, "function_call");
		if (json_is_object(fc)) {
			/* legacy function calling: the next "function" message answers */
			char id[32];
			snprintf(id, sizeof id, "fc_%zu", json_array_size(json_object_get(traj, "turns")) - 1);
			free(*legacy);
			*legacy = strdup(id);
			if (fw_ing_turn_call(t, id, fw_ing_str(fc, "name"), json_object_get(fc, "arguments")))
				return -1;
		}
		return 0;
	}
	if (!strcmp(role, "tool") || !strcmp(role, "function")) {
		size_t n;
		const char *id = !strcmp(role, "tool") ? fw_ing_str(m, "tool_call_id") : *legacy;
		char *s = fw_ing_content_text(json_object_get(m, "content"), &n);
		if (!s)
			return -1;
		t = fw_ing_tool_turn(traj, id, s, n, 0);
		free(s);
		return t ? 0 : -1;
	}
	return ERR("'%s.role' is '%.40s', not system, user, assistant or tool", path, role);
}

static json_t *conv_openai_chat(const json_t *doc, char *err, size_t errlen)
{
	const json_t *req = json_object_get(doc, "request");
	const json_t *resp = json_object_get(doc, "response");
	const json_t *msgs = json_object_get(doc, "messages");
	const json_t *choices = json_object_get(doc, "choices");
	const char *mpath = "messages";
	char *legacy = NULL;
	json_t *m;
	size_t i;
	char path[64];

	if (!json_is_object(req))
		req = NULL;
	if (!json_is_object(resp))
		resp = NULL;
	if (!msgs && req) {
		msgs = json_object_get(req, "messages");
		mpath = "request.messages";
	}
	if (!json_is_array(msgs)) {
		if (msgs)
			snprintf(err, errlen, "'%s' is %s, not array", mpath, fw_ing_type_name(msgs));
		else
			snprintf(err, errlen, "'%s' is missing", mpath);
		return NULL;
	}
	if (!choices && resp)
		choices = json_object_get(resp, "choices");
	if (resp && !choices) {
		/* a logged reply that holds no choice would silently shorten the
		 * trajectory by its most important turn */
		snprintf(err, errlen, "'response.choices' is missing: the reply is not understood%s",
			 json_object_get(resp, "content") ? " (an Anthropic reply? --format anthropic)" : "");
		return NULL;
	}
	if (choices && !json_is_array(choices)) {
		snprintf(err, errlen, "'choices' is %s, not array", fw_ing_type_name(choices));
		return NULL;
	}
	json_t *traj = fw_ing_traj_new("openai-chat");
	if (!traj)
		return NULL;
	json_array_foreach(msgs, i, m) {
		snprintf(path, sizeof path, "%s[%zu]", mpath, i);
		if (fw_ing_chat_message(traj, m, path, &legacy, err, errlen))
			goto fail;
	}
	if (json_array_size(choices)) {
		const json_t *ch = json_array_get(choices, 0);
		if (fw_ing_chat_message(traj, json_object_get(ch, "message"), "choices[0].message",
					&legacy, err, errlen))
			goto fail;
		if (fw_ing_str(ch, "finish_reason"))
			json_object_set_new(json_object_get(traj, "meta"), "stop",
					    json_string(fw_ing_str(ch, "finish_reason")));
	}
	static const char *const model_keys[] = {"model", NULL};
	const json_t *model = first_of(doc, model_keys);
	if (!model && resp)
		model = json_object_get(resp, "model");
	if (!model && req)
		model = json_object_get(req, "model");
	set_str(traj, "model", model);
	static const char *const time_keys[] = {"created", "created_at", "timestamp", NULL};
	const json_t *tm = first_of(doc, time_keys);
	fw_ing_set_created(traj, tm ? tm : resp ? json_object_get(resp, "created") : NULL);
	const json_t *usage = json_object_get(doc, "usage");
	fw_ing_set_usage(traj, usage ? usage : resp ? json_object_get(resp, "usage") : NULL,
		      "prompt_tokens", "completion_tokens");
	const json_t *id = json_object_get(doc, "id");
	set_source_id(traj, id ? id : resp ? json_object_get(resp, "id") : NULL);
	const json_t *md = json_object_get(doc, "metadata");
	fw_ing_meta_merge(traj, md ? md : req ? json_object_get(req, "metadata") : NULL);
	free(legacy);
	return traj;
fail:
	free(legacy);
	json_decref(traj);
	return NULL;
}

/* ---- OpenAI Responses ----------------------------------------------------------- */

/* The assistant turn an output item belongs to: the last turn when it is an
 * assistant turn still open for this kind of item, else a new one. */
static json_t *open_assistant(json_t *traj, int for_call)
{
	json_t *t = fw_ing_turn_last(traj);
	const char *role = fw_ing_str(t, "role");

	if (t && role && !strcmp(role, "assistant")) {
		if (for_call)
			return t;
		/* a message or reasoning opens a new turn unless the last one only
		 * holds reasoning so far */
		if (!json_string_length(json_object_get(t, "text")) && !json_object_get(t, "calls"))
			return t;
	}
	return fw_ing_turn_add(traj, "assistant");
}

static int responses_items(json_t *traj, const json_t *items, const char *what, long *unknown,
			   char *err, size_t errlen)
{
	size_t i;
	json_t *it;
	json_t *t;

	if (json_is_string(items)) {
		t = fw_ing_turn_add(traj, "user");
		return t && !fw_ing_append_content(t, "text", items) ? 0 : -1;
	}
	if (!items || json_is_null(items))
		return 0;
	if (!json_is_array(items))
		return ERR("'%s' is %s, not array", what, fw_ing_type_name(items));
	json_array_foreach(items, i, it) {
		if (!json_is_object(it))
			return ERR("'%s[%zu]' is %s, not object", what, i, fw_ing_type_name(it));
		const char *type = fw_ing_str(it, "type");
		const char *role = fw_ing_str(it, "role");
		if ((!type || !strcmp(type, "message")) && role) {
			if (!strcmp(role, "assistant"))
				t = open_assistant(traj, 0);
			else
				t = fw_ing_turn_add(traj, !strcmp(role, "user") ? "user" : "system");
			if (!t || fw_ing_append_content(t, "text", json_object_get(it, "content")))
				return -1;
		} else if (type && !strcmp(type, "reasoning")) {
			t = open_assistant(traj, 0);
			if (!t || fw_ing_append_content(t, "thinking", json_object_get(it, "summary")))
				return -1;
		} else if (type && (!strcmp(type, "function_call") || !strcmp(type, "custom_tool_call"))) {
			t = open_assistant(traj, 1);
			const json_t *args = json_object_get(it, type[0] == 'f' ? "arguments" : "input");
			if (!t || fw_ing_turn_call(t, fw_ing_str(it, "call_id"), fw_ing_str(it, "name"), args))
				return -1;
		} else if (type && (!strcmp(type, "function_call_output") ||
				    !strcmp(type, "custom_tool_call_output"))) {
			size_t n;
			char *s = fw_ing_content_text(json_object_get(it, "output"), &n);
			if (!s)
				return -1;
			t = fw_ing_tool_turn(traj, fw_ing_str(it, "call_id"), s, n, 0);
			free(s);
			if (!t)
				return -1;
		} else {
			(*unknown)++;
		}
	}
	return 0;
}

static json_t *conv_openai_responses(const json_t *doc, char *err, size_t errlen)
{
	json_t *traj = fw_ing_traj_new("openai-responses");
	long unknown = 0;

	if (!traj)
		return NULL;
	const json_t *ins = json_object_get(doc, "instructions");
	if (json_is_string(ins) && json_string_length(ins)) {
		json_t *t = fw_ing_turn_add(traj, "system");
		if (!t || fw_ing_append_content(t, "text", ins))
			goto fail;
	}
	if (responses_items(traj, json_object_get(doc, "input"), "input", &unknown, err, errlen) ||
	    responses_items(traj, json_object_get(doc, "output"), "output", &unknown, err, errlen))
		goto fail;
	set_str(traj, "model", json_object_get(doc, "model"));
	fw_ing_set_created(traj, json_object_get(doc, "created_at"));
	fw_ing_set_usage(traj, json_object_get(doc, "usage"), "input_tokens", "output_tokens");
	set_source_id(traj, json_object_get(doc, "id"));
	fw_ing_meta_merge(traj, json_object_get(doc, "metadata"));
	if (unknown)
		json_object_set_new(json_object_get(traj, "meta"), "unknown_items", json_integer(unknown));
	return traj;
fail:
	json_decref(traj);
	return NULL;
}

/* ---- Anthropic Messages ------------------------------------------------------------ */

static int anthropic_blocks_assistant(json_t *t, const json_t *content, const char *path,
				      char *err, size_t errlen)
{
	size_t i;
	json_t *b;

	if (json_is_string(content))
		return fw_ing_append_content(t, "text", content);
	if (!json_is_array(content))
		return ERR("'%s.content' is %s, not array", path, fw_ing_type_name(content));
	json_array_foreach(content, i, b) {
		const char *type = fw_ing_str(b, "type");
		if (!type)
			return ERR("'%s.content[%zu].type' is missing", path, i);
		if (!strcmp(type, "text")) {
			if (fw_ing_append_content(t, "text", json_object_get(b, "text")))
				return -1;
		} else if (!strcmp(type, "thinking")) {
			if (fw_ing_append_content(t, "thinking", json_object_get(b, "thinking")) ||
			    fw_ing_turn_signature(t, json_object_get(b, "signature")))
				return -1;
		} else if (!strcmp(type, "tool_use") || !strcmp(type, "server_tool_use")) {
			const json_t *in = json_object_get(b, "input");
			if (in && !json_is_object(in))
				return ERR("'%s.content[%zu].input' is %s, not object", path, i,
					   fw_ing_type_name(in));
			if (fw_ing_turn_call(t, fw_ing_str(b, "id"), fw_ing_str(b, "name"), in))
				return -1;
		}
	}
	return 0;
}

int fw_ing_anthropic_messages(json_t *traj, const json_t *msgs, const char *mpath, char *err,
			   size_t errlen)
{
	size_t i, j;
	json_t *m, *b;
	char path[64];

	if (!json_is_array(msgs))
		return msgs ? ERR("'%s' is %s, not array", mpath, fw_ing_type_name(msgs))
			    : ERR("'%s' is missing", mpath);
	json_array_foreach(msgs, i, m) {
		snprintf(path, sizeof path, "%s[%zu]", mpath, i);
		const char *role = fw_ing_str(m, "role");
		const json_t *content = json_object_get(m, "content");
		static const char *const msg_keys[] = {
			"role", "content", "id", "type", "model", "stop_reason", "stop_sequence",
			"usage", "container", "context_management", NULL,
		};
		if (!json_is_object(m))
			return ERR("'%s' is %s, not object", path, fw_ing_type_name(m));
		if (!role)
			return ERR("'%s.role' is missing", path);
		char gpath[80];
		snprintf(gpath, sizeof gpath, "%s[]", mpath);
		fw_ing_check_keys(traj, m, gpath, msg_keys);
		if (!strcmp(role, "assistant")) {
			json_t *t = fw_ing_turn_add(traj, "assistant");
			if (!t || anthropic_blocks_assistant(t, content, path, err, errlen))
				return -1;
			continue;
		}
		if (strcmp(role, "user"))
			return ERR("'%s.role' is '%.40s', not user or assistant", path, role);
		if (json_is_string(content)) {
			json_t *t = fw_ing_turn_add(traj, "user");
			if (!t || fw_ing_append_content(t, "text", content))
				return -1;
			continue;
		}
		if (!json_is_array(content))
			return ERR("'%s.content' is %s, not array", path, fw_ing_type_name(content));
		json_t *user = NULL; /* the user turn this message's text goes to */
		json_array_foreach(content, j, b) {
			const char *type = fw_ing_str(b, "type");
			if (type && !strcmp(type, "tool_result")) {
				size_t n;
				char *s = fw_ing_content_text(json_object_get(b, "content"), &n);
				if (!s)
					return -1;
				json_t *t = fw_ing_tool_turn(traj, fw_ing_str(b, "tool_use_id"), s, n,
							  json_is_true(json_object_get(b, "is_error")));
				free(s);
				if (!t)
					return -1;
				user = NULL;
				continue;
			}
			if (!user) {
				user = fw_ing_turn_add(traj, "user");
				if (!user)
					return -1;
			}
			json_t *one = json_array();
			json_array_append(one, b);
			int rc = fw_ing_append_content(user, "text", one);
			json_decref(one);
			if (rc)
				return -1;
		}
	}
	return 0;
}

/* Whether doc is itself a Messages API response (type "message", role
 * "assistant"), whose content is the last assistant turn. */
static int is_assistant_response(const json_t *doc)
{
	const char *role = fw_ing_str(doc, "role"), *type = fw_ing_str(doc, "type");

	return (role && !strcmp(role, "assistant")) || (type && !strcmp(type, "message"));
}

static json_t *conv_anthropic(const json_t *doc, char *err, size_t errlen)
{
	const json_t *req = json_object_get(doc, "request");
	const json_t *resp = json_object_get(doc, "response");
	const char *mpath = "messages";

	if (!json_is_object(req))
		req = doc;
	else
		mpath = "request.messages";
	if (!json_is_object(resp))
		resp = doc;
	json_t *traj = fw_ing_traj_new("anthropic");
	if (!traj)
		return NULL;
	const json_t *sys = json_object_get(req, "system");
	if (!sys)
		sys = json_object_get(doc, "system");
	if (json_is_string(sys) || json_is_array(sys)) {
		json_t *t = fw_ing_turn_add(traj, "system");
		if (!t || fw_ing_append_content(t, "text", sys))
			goto fail;
	}
	const json_t *msgs = json_object_get(req, "messages");
	if (!msgs)
		msgs = json_object_get(doc, "messages");
	if (fw_ing_anthropic_messages(traj, msgs, mpath, err, errlen))
		goto fail;
	/* the response, when the log line holds it next to the request */
	const json_t *rc = json_object_get(resp, "content");
	if (resp != doc && !rc) {
		snprintf(err, errlen, "'response.content' is missing: the reply is not understood%s",
			 json_object_get(resp, "choices") ? " (an OpenAI reply? --format openai-chat)" : "");
		goto fail;
	}
	if (rc && (is_assistant_response(resp) || resp != doc)) {
		json_t *t = fw_ing_turn_add(traj, "assistant");
		if (!t || anthropic_blocks_assistant(t, rc, "content", err, errlen))
			goto fail;
	}
	const json_t *model = json_object_get(resp, "model");
	set_str(traj, "model", model ? model : json_object_get(req, "model"));
	static const char *const time_keys[] = {"created_at", "created", "timestamp", NULL};
	fw_ing_set_created(traj, first_of(doc, time_keys));
	fw_ing_set_usage(traj, json_object_get(resp, "usage"), "input_tokens", "output_tokens");
	set_source_id(traj, json_object_get(resp, "id"));
	if (fw_ing_str(resp, "stop_reason"))
		json_object_set_new(json_object_get(traj, "meta"), "stop",
				    json_string(fw_ing_str(resp, "stop_reason")));
	fw_ing_meta_merge(traj, json_object_get(doc, "metadata"));
	return traj;
fail:
	json_decref(traj);
	return NULL;
}

/* ---- ShareGPT ---------------------------------------------------------------------- */

static int in_list(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(s, *list))
			return 1;
	return 0;
}

/* Adds the call(s) of a function_call message: a JSON object
 * {name, arguments} or an array of them. */
static int sharegpt_calls(json_t *traj, const json_t *value, json_t *pending, int *k)
{
	json_t *t = fw_ing_turn_last(traj);
	json_error_t je;
	json_t *v = NULL;
	size_t i;
	json_t *c;
	char id[32];

	if (!t || strcmp(fw_ing_str(t, "role"), "assistant"))
		t = fw_ing_turn_add(traj, "assistant");
	if (!t)
		return -1;
	if (json_is_string(value))
		v = json_loadb(json_string_value(value), json_string_length(value), JSON_ALLOW_NUL, &je);
	else
		v = json_incref((json_t *)value);
	if (!json_is_object(v) && !json_is_array(v)) {
		/* not JSON: keep the text as the arguments of an unnamed call */
		json_decref(v);
		snprintf(id, sizeof id, "call_%d", (*k)++);
		json_array_append_new(pending, json_string(id));
		return fw_ing_turn_call(t, id, "", value);
	}
	if (json_is_object(v)) {
		json_t *a = json_array();
		json_array_append(a, v);
		json_decref(v);
		v = a;
	}
	json_array_foreach(v, i, c) {
		static const char *const arg_keys[] = {"arguments", "parameters", "args", "input", NULL};
		snprintf(id, sizeof id, "call_%d", (*k)++);
		json_array_append_new(pending, json_string(id));
		if (fw_ing_turn_call(t, id, fw_ing_str(c, "name"), first_of(c, arg_keys))) {
			json_decref(v);
			return -1;
		}
	}
	json_decref(v);
	return 0;
}

static json_t *conv_sharegpt(const json_t *doc, char *err, size_t errlen)
{
	static const char *const user_from[] = {"human", "user", NULL};
	static const char *const asst_from[] = {"gpt", "assistant", "chatgpt", "model", "bard",
						"bing", NULL};
	static const char *const call_from[] = {"function_call", "tool_call", "tool_calls", NULL};
	static const char *const obs_from[] = {"observation", "tool", "function_response",
					       "tool_response", "function", "ipython", NULL};
	const json_t *conv = json_object_get(doc, "conversations");
	const char *cpath = "conversations";
	json_t *m;
	size_t i;
	int k = 0;

	if (!conv) {
		conv = json_object_get(doc, "conversation");
		cpath = "conversation";
	}
	if (!json_is_array(conv)) {
		if (conv)
			snprintf(err, errlen, "'%s' is %s, not array", cpath, fw_ing_type_name(conv));
		else
			snprintf(err, errlen, "'conversations' is missing");
		return NULL;
	}
	json_t *traj = fw_ing_traj_new("sharegpt");
	json_t *pending = json_array();
	if (!traj || !pending)
		goto fail;
	const json_t *sys = json_object_get(doc, "system");
	if (json_is_string(sys) && json_string_length(sys)) {
		json_t *t = fw_ing_turn_add(traj, "system");
		if (!t || fw_ing_append_content(t, "text", sys))
			goto fail;
	}
	json_array_foreach(conv, i, m) {
		static const char *const entry_keys[] = {"from", "value", "role", "content", "weight",
							 "name", "loss", NULL};
		char gpath[40];
		snprintf(gpath, sizeof gpath, "%s[]", cpath);
		fw_ing_check_keys(traj, m, gpath, entry_keys);
		const char *from = fw_ing_str(m, "from");
		const json_t *value = json_object_get(m, "value");
		if (!from)
			from = fw_ing_str(m, "role");
		if (!value)
			value = json_object_get(m, "content");
		if (!from) {
			snprintf(err, errlen, "'%s[%zu].from' is missing", cpath, i);
			goto fail;
		}
		json_t *t = NULL;
		if (!strcmp(from, "system")) {
			t = fw_ing_turn_add(traj, "system");
		} else if (in_list(from, user_from)) {
			t = fw_ing_turn_add(traj, "user");
		} else if (in_list(from, asst_from)) {
			t = fw_ing_turn_add(traj, "assistant");
		} else if (in_list(from, call_from)) {
			if (sharegpt_calls(traj, value, pending, &k))
				goto fail;
			continue;
		} else if (in_list(from, obs_from)) {
			size_t n;
			char *s = fw_ing_content_text(value, &n);
			/* calls are answered in the order they were made */
			const char *id = json_string_value(json_array_get(pending, 0));
			t = s ? fw_ing_tool_turn(traj, id, s, n, 0) : NULL;
			free(s);
			if (!t)
				goto fail;
			json_array_remove(pending, 0);
			continue;
		} else {
			snprintf(err, errlen, "'%s[%zu].from' is '%.40s': not a known speaker", cpath, i, from);
			goto fail;
		}
		if (!t || fw_ing_append_content(t, "text", value))
			goto fail;
	}
	json_decref(pending);
	set_str(traj, "model", json_object_get(doc, "model"));
	static const char *const time_keys[] = {"created", "created_at", "timestamp", NULL};
	fw_ing_set_created(traj, first_of(doc, time_keys));
	set_source_id(traj, json_object_get(doc, "id"));
	fw_ing_meta_merge(traj, json_object_get(doc, "metadata"));
	return traj;
fail:
	json_decref(pending);
	json_decref(traj);
	return NULL;
}

/* ---- SWE-agent .traj ------------------------------------------------------------------- */

/* Adds an assistant turn for one SWE-agent action; the call is named after
 * the command's first word and its arguments are {"command": action}. */
static int swe_action(json_t *traj, const char *thought, const char *action, int step,
		      char *idbuf, size_t idlen)
{
	json_t *t = fw_ing_turn_add(traj, "assistant");
	char name[64];
	size_t n = 0;

	if (!t)
		return -1;
	if (thought && fw_ing_turn_append(t, "text", thought, strlen(thought)))
		return -1;
	idbuf[0] = 0;
	if (!action || !*action)
		return 0;
	while (action[n] && action[n] != ' ' && action[n] != '\n' && n < sizeof name - 1) {
		name[n] = action[n];
		n++;
	}
	name[n] = 0;
	snprintf(idbuf, idlen, "step-%d", step);
	json_t *args = json_pack("{ss}", "command", action);
	int rc = fw_ing_turn_call(t, idbuf, name, args);
	json_decref(args);
	return rc;
}

static json_t *conv_swe_agent(const json_t *doc, const char *name, char *err, size_t errlen)
{
	const json_t *hist, *steps;
	char pending[32] = "";
	int step = 0;
	size_t i;
	json_t *h;

	if (fw_ing_field(doc, "history", JSON_ARRAY, "history", &hist, err, errlen) ||
	    fw_ing_field(doc, "trajectory", JSON_ARRAY, "trajectory", &steps, err, errlen))
		return NULL;
	json_t *traj = fw_ing_traj_new("swe-agent");
	if (!traj)
		return NULL;
	if (json_array_size(hist)) {
		json_array_foreach(hist, i, h) {
			const char *role = fw_ing_str(h, "role");
			if (!role) {
				snprintf(err, errlen, "'history[%zu].role' is missing", i);
				goto fail;
			}
			const json_t *content = json_object_get(h, "content");
			if (!strcmp(role, "assistant")) {
				const char *thought = fw_ing_str(h, "thought");
				const char *action = fw_ing_str(h, "action");
				if (!thought && !action) {
					json_t *t = fw_ing_turn_add(traj, "assistant");
					if (!t || fw_ing_append_content(t, "text", content))
						goto fail;
					continue;
				}
				if (swe_action(traj, thought, action, step++, pending, sizeof pending))
					goto fail;
			} else if ((!strcmp(role, "user") || !strcmp(role, "tool")) && pending[0]) {
				size_t n;
				char *s = fw_ing_content_text(content, &n);
				json_t *t = s ? fw_ing_tool_turn(traj, pending, s, n, 0) : NULL;
				free(s);
				if (!t)
					goto fail;
				pending[0] = 0;
			} else {
				json_t *t = fw_ing_turn_add(traj, !strcmp(role, "system") ? "system" : "user");
				if (!t || fw_ing_append_content(t, "text", content))
					goto fail;
			}
		}
	} else {
		json_array_foreach(steps, i, h) {
			const char *obs = fw_ing_str(h, "observation");
			if (swe_action(traj, fw_ing_str(h, "thought"), fw_ing_str(h, "action"), step++, pending,
				       sizeof pending))
				goto fail;
			if (pending[0] && !fw_ing_tool_turn(traj, pending, obs ? obs : "", obs ? strlen(obs) : 0, 0))
				goto fail;
		}
	}

	/* the model and instance are in replay_config, a JSON string or object */
	const json_t *rc = json_object_get(doc, "replay_config");
	json_t *cfg = NULL;
	if (json_is_string(rc)) {
		json_error_t je;
		cfg = json_loads(json_string_value(rc), 0, &je);
	} else if (json_is_object(rc)) {
		cfg = json_incref((json_t *)rc);
	}
	const json_t *mod = json_object_get(json_object_get(cfg, "agent"), "model");
	const json_t *mname = json_object_get(mod, "name");
	set_str(traj, "model", mname ? mname : json_object_get(mod, "model_name"));
	const json_t *inst = json_object_get(json_object_get(cfg, "problem_statement"), "id");
	if (json_is_string(inst)) {
		set_source_id(traj, inst);
	} else if (name) {
		const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
		size_t n = strlen(base);
		if (n > 5 && !strcmp(base + n - 5, ".traj"))
			n -= 5;
		json_object_set_new(json_object_get(traj, "meta"), "source_id", json_stringn(base, n));
	}
	json_decref(cfg);
	const json_t *info = json_object_get(doc, "info");
	fw_ing_set_usage(traj, json_object_get(info, "model_stats"), "tokens_sent", "tokens_received");
	if (fw_ing_str(info, "exit_status"))
		json_object_set_new(json_object_get(traj, "meta"), "exit_status",
				    json_string(fw_ing_str(info, "exit_status")));
	return traj;
fail:
	json_decref(traj);
	return NULL;
}

json_t *fw_ingest_convert(enum fw_fmt f, const json_t *doc, const char *name, char *err,
			  size_t errlen)
{
	if (f == FW_FMT_MINI_SWE_AGENT || f == FW_FMT_OPENHANDS)
		return fw_ing_conv_agent(f, doc, name, err, errlen);
	if (!json_is_object(doc)) {
		snprintf(err, errlen, "a JSON %s, not an object", fw_ing_type_name(doc));
		return NULL;
	}
	snprintf(err, errlen, "out of memory");
	switch (f) {
	case FW_FMT_OPENAI_CHAT: return conv_openai_chat(doc, err, errlen);
	case FW_FMT_OPENAI_RESPONSES: return conv_openai_responses(doc, err, errlen);
	case FW_FMT_ANTHROPIC: return conv_anthropic(doc, err, errlen);
	case FW_FMT_SHAREGPT: return conv_sharegpt(doc, err, errlen);
	case FW_FMT_SWE_AGENT: return conv_swe_agent(doc, name, err, errlen);
	default:
		snprintf(err, errlen, "format %s is not converted one document at a time",
			 fw_fmt_name(f));
		return NULL;
	}
}
