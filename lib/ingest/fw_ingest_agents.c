/*
 * fw_ingest_agents.c — agent scaffolds that save a whole run as one JSON
 * document: mini-swe-agent trajectories and OpenHands event streams.
 *
 * mini-swe-agent keeps the chat it had with the model (Chat Completions
 * messages); a text-based agent acts by writing exactly one ```bash block,
 * and the next user message carries the command's output.  That block is
 * made a call (the text stays as the model wrote it) and the output its tool
 * turn, so these runs have the same shape as tool-calling ones.
 *
 * OpenHands logs events: actions (of the user, the agent or the
 * environment) and observations, each observation naming the action that
 * caused it.  Agent actions become calls; the function-calling metadata, when
 * present, gives the call id, the tool name, the model's own arguments and the
 * model response the call came from (calls of one response share a turn).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_ingest.h"
#include "fw_ingest_int.h"

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

/* The file's base name without the extensions in exts (the first that
 * fits), as meta.source_id. */
static void source_id_from_name(json_t *traj, const char *name, const char *const *exts)
{
	if (!name)
		return;
	const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
	size_t n = strlen(base);
	for (; *exts; exts++) {
		size_t k = strlen(*exts);
		if (n > k && !strcmp(base + n - k, *exts)) {
			n -= k;
			break;
		}
	}
	if (n)
		json_object_set_new(json_object_get(traj, "meta"), "source_id", json_stringn(base, n));
}

static void meta_set(json_t *traj, const char *key, const json_t *v)
{
	if (v && !json_is_null(v))
		json_object_set(json_object_get(traj, "meta"), key, (json_t *)v);
}

/* ---- mini-swe-agent ------------------------------------------------------------ */

/* The command of the single ```bash block in s, as mini-swe-agent finds it
 * (the block opens with ```bash, blanks and a line break; it closes at the
 * first line break followed by ```).  Returns a malloc'd copy, or NULL when
 * there is no such block or more than one (the agent then answers with a
 * format error, not a command). */
static char *bash_block(const char *s)
{
	const char *p = s, *cmd = NULL;
	size_t cmdlen = 0;
	int n = 0;

	while ((p = strstr(p, "```bash"))) {
		const char *q = p + 7, *start = NULL;
		while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r' || *q == '\f' || *q == '\v') {
			if (*q == '\n')
				start = q + 1;
			q++;
		}
		if (!start) {
			p += 7;
			continue;
		}
		/* the lazy match may end at the newline the blanks were cut at */
		const char *end = strstr(start - 1, "\n```");
		if (!end || end < start - 1) {
			p += 7;
			continue;
		}
		if (end < start)
			end = start; /* an empty command */
		if (!n) {
			cmd = start;
			cmdlen = (size_t)(end - start);
		}
		n++;
		p = end + 4;
	}
	return n == 1 ? strndup(cmd, cmdlen) : NULL;
}

static json_t *conv_mini(const json_t *doc, const char *name, char *err, size_t errlen)
{
	static const char *const top_keys[] = {"info", "messages", "trajectory_format", NULL};
	static const char *const exts[] = {".traj.json", ".json", NULL};
	const json_t *msgs = doc, *info = NULL;
	char *legacy = NULL, pending[32] = "";
	json_t *m;
	size_t i;
	int step = 0;

	if (json_is_object(doc)) {
		if (fw_ing_field(doc, "messages", JSON_ARRAY, "messages", &msgs, err, errlen) ||
		    fw_ing_field(doc, "info", JSON_OBJECT, "info", &info, err, errlen))
			return NULL;
		if (!msgs) {
			snprintf(err, errlen, "'messages' is missing");
			return NULL;
		}
	}
	json_t *traj = fw_ing_traj_new("mini-swe-agent");
	if (!traj)
		return NULL;
	if (json_is_object(doc))
		fw_ing_check_keys(traj, doc, "", top_keys);
	json_array_foreach(msgs, i, m) {
		char path[48];
		snprintf(path, sizeof path, "messages[%zu]", i);
		const char *role = fw_ing_str(m, "role");
		if (role && !strcmp(role, "user") && pending[0]) {
			/* the output of the command the last assistant turn ran */
			size_t n;
			char *s = fw_ing_content_text(json_object_get(m, "content"), &n);
			json_t *t = s ? fw_ing_tool_turn(traj, pending, s, n, 0) : NULL;
			free(s);
			if (!t)
				goto fail;
			pending[0] = 0;
			continue;
		}
		pending[0] = 0;
		if (fw_ing_chat_message(traj, m, path, &legacy, err, errlen))
			goto fail;
		if (!strcmp(role, "assistant") && !json_object_get(m, "tool_calls")) {
			json_t *t = fw_ing_turn_last(traj);
			char *cmd = bash_block(fw_ing_str(t, "text"));
			if (cmd) {
				json_t *args = json_pack("{ss}", "command", cmd);
				snprintf(pending, sizeof pending, "step-%d", step++);
				int rc = !args || fw_ing_turn_call(t, pending, "bash", args);
				json_decref(args);
				free(cmd);
				if (rc)
					goto fail;
			}
		}
	}
	free(legacy);
	const json_t *model = json_object_get(json_object_get(json_object_get(info, "config"), "model"),
					      "model_name");
	if (json_is_string(model))
		json_object_set_new(traj, "model", json_string(json_string_value(model)));
	source_id_from_name(traj, name, exts);
	meta_set(traj, "exit_status", json_object_get(info, "exit_status"));
	meta_set(traj, "agent_version", json_object_get(info, "mini_version"));
	meta_set(traj, "cost", json_object_get(json_object_get(info, "model_stats"), "instance_cost"));
	meta_set(traj, "trajectory_format", json_object_get(doc, "trajectory_format"));
	return traj;
fail:
	free(legacy);
	json_decref(traj);
	return NULL;
}

/* ---- OpenHands ------------------------------------------------------------------ */

/* Actions that are bookkeeping, not a turn of the conversation. */
static const char *const oh_skip[] = {"change_agent_state", "recall", "null", "condensation",
				      "condensation_request", "reject", "pause", "resume", NULL};

static int in_list(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(s, *list))
			return 1;
	return 0;
}

/* The arguments the model wrote for call id in a function-calling model
 * response (choices[0].message.tool_calls[].function.arguments), or NULL. */
static const json_t *oh_model_args(const json_t *resp, const char *id)
{
	const json_t *msg = json_object_get(json_array_get(json_object_get(resp, "choices"), 0),
					    "message");
	size_t i;
	json_t *c;

	json_array_foreach(json_object_get(msg, "tool_calls"), i, c)
		if (id && fw_ing_str(c, "id") && !strcmp(fw_ing_str(c, "id"), id))
			return json_object_get(json_object_get(c, "function"), "arguments");
	return NULL;
}

/* A thought is a string, or {default, reasoning_content} in later versions. */
static const json_t *oh_thought(const json_t *args)
{
	const json_t *t = json_object_get(args, "thought");

	return json_is_object(t) ? json_object_get(t, "default") : t;
}

static void count(json_t *traj, const char *key)
{
	json_t *meta = json_object_get(traj, "meta");
	json_object_set_new(meta, key, json_integer(json_integer_value(json_object_get(meta, key)) + 1));
}

static int oh_action(json_t *traj, const json_t *e, const char *path, json_t *calls, json_t *usage,
		     char **last_resp, char *err, size_t errlen)
{
	const char *action = fw_ing_str(e, "action");
	const char *source = fw_ing_str(e, "source");
	const json_t *args, *tcm;
	json_t *t;

	char why[160];
	if (fw_ing_field(e, "args", JSON_OBJECT, "args", &args, why, sizeof why) ||
	    fw_ing_field(e, "tool_call_metadata", JSON_OBJECT, "tool_call_metadata", &tcm, why,
			 sizeof why))
		return ERR("'%s.%s", path, why + 1);
	if (in_list(action, oh_skip))
		return 0;
	if (!strcmp(action, "system")) {
		t = fw_ing_turn_add(traj, "system");
		return t && !fw_ing_append_content(t, "text", json_object_get(args, "content")) ? 0 : -1;
	}
	if (!strcmp(action, "message")) {
		int user = source && !strcmp(source, "user");
		t = fw_ing_turn_add(traj, user ? "user" : "assistant");
		if (!t || fw_ing_append_content(t, "text", json_object_get(args, "content")))
			return -1;
		free(*last_resp);
		*last_resp = NULL;
		return 0;
	}
	if (source && strcmp(source, "agent")) {
		/* a command the user ran in the UI is not the model's */
		count(traj, "user_actions");
		return 0;
	}
	const json_t *resp = json_object_get(tcm, "model_response");
	const char *rid = fw_ing_str(resp, "id");
	t = fw_ing_turn_last(traj);
	if (!(t && rid && *last_resp && !strcmp(rid, *last_resp) &&
	      !strcmp(fw_ing_str(t, "role"), "assistant"))) {
		t = fw_ing_turn_add(traj, "assistant");
		if (!t)
			return -1;
		const json_t *th = oh_thought(args);
		if (json_is_string(th) && fw_ing_append_content(t, "text", th))
			return -1;
	}
	if (rid && (!*last_resp || strcmp(rid, *last_resp))) {
		free(*last_resp);
		*last_resp = strdup(rid);
		const char *model = fw_ing_str(resp, "model");
		if (model && !json_string_length(json_object_get(traj, "model")))
			json_object_set_new(traj, "model", json_string(model));
		const json_t *u = json_object_get(resp, "usage");
		json_object_set_new(usage, "in", json_integer(json_integer_value(json_object_get(usage, "in")) +
					json_integer_value(json_object_get(u, "prompt_tokens"))));
		json_object_set_new(usage, "out", json_integer(json_integer_value(json_object_get(usage, "out")) +
					json_integer_value(json_object_get(u, "completion_tokens"))));
		json_object_set_new(usage, "seen", json_true());
	}
	char idbuf[40];
	const char *cid = fw_ing_str(tcm, "tool_call_id");
	const char *name = fw_ing_str(tcm, "function_name");
	const json_t *a = oh_model_args(resp, cid);
	json_t *own = NULL;
	if (!cid) {
		snprintf(idbuf, sizeof idbuf, "event-%lld",
			 (long long)json_integer_value(json_object_get(e, "id")));
		cid = idbuf;
	}
	if (!a) {
		/* no model response logged: the action's own arguments, less the
		 * agent's bookkeeping */
		static const char *const drop[] = {"thought", "confirmation_state", "security_risk",
						   "is_confirmed", "blocking", "hidden", "is_static",
						   "cwd", "include_extra", "kernel_init_code", NULL};
		own = args ? json_deep_copy(args) : json_object();
		for (const char *const *d = drop; own && *d; d++)
			json_object_del(own, *d);
		a = own;
	}
	int rc = fw_ing_turn_call(t, cid, name ? name : action, a);
	json_decref(own);
	if (rc)
		return -1;
	char key[32];
	snprintf(key, sizeof key, "%lld", (long long)json_integer_value(json_object_get(e, "id")));
	return json_object_set_new(calls, key, json_string(cid));
}

static json_t *conv_openhands(const json_t *doc, const char *name, char *err, size_t errlen)
{
	static const char *const ev_keys[] = {
		"id", "timestamp", "source", "message", "cause", "action", "observation",
		"tool_call_metadata", "llm_metrics", "args", "content", "extras", "success",
		"timeout", NULL,
	};
	static const char *const exts[] = {".json", NULL};
	const json_t *events = doc;
	json_t *calls = json_object(), *usage = json_object(), *e;
	char *last_resp = NULL;
	size_t i;

	if (json_is_object(doc) &&
	    fw_ing_field(doc, "history", JSON_ARRAY, "history", &events, err, errlen))
		goto fail0;
	if (!events) {
		snprintf(err, errlen, "'history' is missing");
		goto fail0;
	}
	json_t *traj = fw_ing_traj_new("openhands");
	if (!traj || !calls || !usage)
		goto fail;
	json_array_foreach(events, i, e) {
		char path[48];
		snprintf(path, sizeof path, "[%zu]", i);
		if (!json_is_object(e)) {
			snprintf(err, errlen, "'%s' is %s, not object", path, fw_ing_type_name(e));
			goto fail;
		}
		fw_ing_check_keys(traj, e, "[]", ev_keys);
		if (i == 0 || !json_object_get(traj, "created"))
			fw_ing_set_created(traj, json_object_get(e, "timestamp"));
		if (fw_ing_str(e, "action")) {
			if (oh_action(traj, e, path, calls, usage, &last_resp, err, errlen))
				goto fail;
			continue;
		}
		const char *obs = fw_ing_str(e, "observation");
		if (!obs) {
			snprintf(err, errlen, "'%s' has neither 'action' nor 'observation'", path);
			goto fail;
		}
		/* the call it answers: the action it names as its cause */
		char key[32];
		snprintf(key, sizeof key, "%lld", (long long)json_integer_value(json_object_get(e, "cause")));
		const char *cid = json_string_value(json_object_get(calls, key));
		if (!cid) {
			if (strcmp(obs, "agent_state_changed") && strcmp(obs, "null") && strcmp(obs, "recall"))
				count(traj, "unlinked_observations");
			continue;
		}
		size_t n;
		char *s = fw_ing_content_text(json_object_get(e, "content"), &n);
		json_t *t = s ? fw_ing_tool_turn(traj, cid, s, n, !strcmp(obs, "error")) : NULL;
		free(s);
		if (!t)
			goto fail;
		json_object_del(calls, key); /* answered */
		free(last_resp);
		last_resp = NULL;
	}
	if (json_object_get(usage, "seen")) {
		json_object_set_new(json_object_get(traj, "usage"), "input_tokens",
				    json_integer(json_integer_value(json_object_get(usage, "in"))));
		json_object_set_new(json_object_get(traj, "usage"), "output_tokens",
				    json_integer(json_integer_value(json_object_get(usage, "out"))));
	}
	if (json_is_object(doc)) {
		/* an evaluation's output line: the instance and the configured model */
		const json_t *inst = json_object_get(doc, "instance_id");
		if (json_is_string(inst))
			json_object_set_new(json_object_get(traj, "meta"), "source_id",
					    json_string(json_string_value(inst)));
		const char *m = fw_ing_str(json_object_get(json_object_get(doc, "metadata"), "llm_config"),
					   "model");
		if (m && !json_string_length(json_object_get(traj, "model")))
			json_object_set_new(traj, "model", json_string(m));
	}
	if (!json_object_get(json_object_get(traj, "meta"), "source_id"))
		source_id_from_name(traj, name, exts);
	free(last_resp);
	json_decref(calls);
	json_decref(usage);
	return traj;
fail:
	json_decref(traj);
fail0:
	free(last_resp);
	json_decref(calls);
	json_decref(usage);
	return NULL;
}

json_t *fw_ing_conv_agent(enum fw_fmt f, const json_t *doc, const char *name, char *err,
			  size_t errlen)
{
	if (!json_is_object(doc) && !json_is_array(doc)) {
		snprintf(err, errlen, "a JSON %s, not an object or array", fw_ing_type_name(doc));
		return NULL;
	}
	snprintf(err, errlen, "out of memory");
	return f == FW_FMT_MINI_SWE_AGENT ? conv_mini(doc, name, err, errlen)
					  : conv_openhands(doc, name, err, errlen);
}
