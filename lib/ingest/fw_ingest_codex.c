/*
 * fw_ingest_codex.c — OpenAI Codex CLI rollouts to a traj.
 *
 * A rollout (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl) is one line per
 * item, {timestamp, type, payload}: session_meta first, then response_item
 * (the Responses API items the model saw and wrote), turn_context (the model
 * and policies of each turn), event_msg (what the interface showed: it
 * repeats the messages, and carries token counts) and compacted (a summary
 * that replaced the history).  The turns come from the response items only,
 * so nothing is counted twice.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_ingest.h"
#include "fw_ingest_int.h"

/* The assistant turn an item belongs to: the last turn when it is an
 * assistant turn and (for text and reasoning) holds nothing else yet; a
 * new one otherwise.  Calls join the assistant turn they follow. */
static json_t *assistant(json_t *traj, int for_call)
{
	json_t *t = fw_ing_turn_last(traj);
	const char *role = fw_ing_str(t, "role");

	if (t && role && !strcmp(role, "assistant") &&
	    (for_call || (!json_string_length(json_object_get(t, "text")) &&
			  !json_object_get(t, "calls"))))
		return t;
	return fw_ing_turn_add(traj, "assistant");
}

static void meta_str(json_t *meta, const char *key, const json_t *v)
{
	if (json_is_string(v) && json_string_length(v) && !json_object_get(meta, key))
		json_object_set_new(meta, key, json_string(json_string_value(v)));
}

static void meta_add(json_t *meta, const char *key, const char *sub)
{
	json_t *o = json_object_get(meta, key);

	if (!o) {
		o = json_object();
		if (!o || json_object_set_new(meta, key, o))
			return;
	}
	json_object_set_new(o, sub, json_integer(json_integer_value(json_object_get(o, sub)) + 1));
}

static void tag(json_t *traj, const char *name)
{
	json_t *tags = json_object_get(traj, "tags"), *t;
	size_t i;

	json_array_foreach(tags, i, t)
		if (!strcmp(json_string_value(t), name))
			return;
	json_array_append_new(tags, json_string(name));
}

/* One response item.  Returns 0, 1 when it is malformed (why set), -1 when
 * memory runs out. */
static int item(json_t *traj, const json_t *p, char *why, size_t whylen)
{
	const char *type = fw_ing_str(p, "type");
	json_t *meta = json_object_get(traj, "meta"), *t;

	if (!type)
		return snprintf(why, whylen, "'payload.type' is missing"), 1;
	if (!strcmp(type, "message")) {
		const char *role = fw_ing_str(p, "role");
		if (!role)
			return snprintf(why, whylen, "'payload.role' is missing"), 1;
		if (!strcmp(role, "assistant"))
			t = assistant(traj, 0);
		else
			t = fw_ing_turn_add(traj, !strcmp(role, "user") ? "user" : "system");
		return t && !fw_ing_append_content(t, "text", json_object_get(p, "content")) ? 0 : -1;
	}
	if (!strcmp(type, "reasoning")) {
		t = assistant(traj, 0);
		if (!t || fw_ing_append_content(t, "thinking", json_object_get(p, "summary")))
			return -1;
		/* raw reasoning text, where the provider returns it */
		size_t i;
		json_t *c;
		json_array_foreach(json_object_get(p, "content"), i, c) {
			const char *ct = fw_ing_str(c, "type");
			const json_t *txt = json_object_get(c, "text");
			if (ct && !strcmp(ct, "reasoning_text") && fw_ing_append_content(t, "thinking", txt))
				return -1;
		}
		return 0;
	}
	if (!strcmp(type, "function_call") || !strcmp(type, "custom_tool_call")) {
		int fc = type[0] == 'f';
		const json_t *args = json_object_get(p, fc ? "arguments" : "input");
		if (!json_is_string(args))
			return snprintf(why, whylen, "'payload.%s' is %s, not string", fc ? "arguments" : "input",
					fw_ing_type_name(args)), 1;
		t = assistant(traj, 1);
		return t && !fw_ing_turn_call(t, fw_ing_str(p, "call_id"), fw_ing_str(p, "name"), args) ? 0 : -1;
	}
	if (!strcmp(type, "local_shell_call")) {
		const char *id = fw_ing_str(p, "call_id");
		t = assistant(traj, 1);
		return t && !fw_ing_turn_call(t, id ? id : fw_ing_str(p, "id"), "local_shell",
					      json_object_get(p, "action")) ? 0 : -1;
	}
	if (!strcmp(type, "function_call_output") || !strcmp(type, "custom_tool_call_output")) {
		const json_t *out = json_object_get(p, "output");
		int is_error = 0;
		if (json_is_object(out)) {
			/* older rollouts: {content, success} */
			is_error = json_is_false(json_object_get(out, "success"));
			out = json_object_get(out, "content");
		}
		size_t n;
		char *s = fw_ing_content_text(out, &n);
		t = s ? fw_ing_tool_turn(traj, fw_ing_str(p, "call_id"), s, n, is_error) : NULL;
		free(s);
		return t ? 0 : -1;
	}
	if (!strcmp(type, "ghost_snapshot"))
		return 0; /* the harness's undo point, not seen by the model */
	if (!strcmp(type, "compaction") || !strcmp(type, "compaction_summary")) {
		tag(traj, "compacted");
		return 0;
	}
	meta_add(meta, "unknown_items", type);
	return 0;
}

json_t *fw_ingest_codex_session(const json_t *lines, long *at, char *err, size_t errlen)
{
	json_t *traj = fw_ing_traj_new("codex"), *l;
	json_t *usage = NULL;
	size_t i;
	char why[200];

	*at = 0;
	snprintf(err, errlen, "out of memory");
	if (!traj)
		return NULL;
	json_t *meta = json_object_get(traj, "meta");
	json_array_foreach(lines, i, l) {
		const char *type = fw_ing_str(l, "type");
		const json_t *p = json_object_get(l, "payload");
		*at = (long)json_integer_value(json_object_get(l, "_line"));
		if (!type) {
			snprintf(err, errlen, "'type' is missing");
			goto fail;
		}
		int known = !strcmp(type, "session_meta") || !strcmp(type, "response_item") ||
			    !strcmp(type, "turn_context") || !strcmp(type, "event_msg") ||
			    !strcmp(type, "compacted");
		if (!known) {
			/* a newer Codex: keep the line as it was, it may matter */
			json_t *keep = json_object_get(meta, "unknown");
			if (!keep) {
				keep = json_array();
				if (!keep || json_object_set_new(meta, "unknown", keep))
					goto fail;
			}
			json_t *c = json_copy((json_t *)l);
			if (!c)
				goto fail;
			json_object_del(c, "_line"); /* ours, absent outside a file */
			if (json_object_set_new(c, "line", json_integer(*at)) ||
			    json_array_append_new(keep, c))
				goto fail;
			continue;
		}
		if (!json_is_object(p)) {
			snprintf(err, errlen, "'payload' is %s, not object", fw_ing_type_name(p));
			goto fail;
		}
		if (!strcmp(type, "session_meta")) {
			json_t *had = json_object_get(meta, "source_id");
			meta_str(meta, "source_id", json_object_get(p, "id"));
			if (!had)
				fw_ing_set_created(traj, json_object_get(p, "timestamp"));
			meta_str(meta, "cwd", json_object_get(p, "cwd"));
			meta_str(meta, "client_version", json_object_get(p, "cli_version"));
			meta_str(meta, "originator", json_object_get(p, "originator"));
			meta_str(meta, "model_provider", json_object_get(p, "model_provider"));
			meta_str(meta, "git_branch", json_object_get(json_object_get(p, "git"), "branch"));
			meta_str(meta, "git_commit", json_object_get(json_object_get(p, "git"), "commit_hash"));
			const json_t *bi = json_object_get(p, "base_instructions");
			const json_t *text = json_is_object(bi) ? json_object_get(bi, "text") : bi;
			if (json_is_string(text) && json_string_length(text) &&
			    !json_array_size(json_object_get(traj, "turns"))) {
				json_t *t = fw_ing_turn_add(traj, "system");
				if (!t || fw_ing_append_content(t, "text", text))
					goto fail;
			}
		} else if (!strcmp(type, "turn_context")) {
			const json_t *model = json_object_get(p, "model");
			if (json_is_string(model) && !json_string_length(json_object_get(traj, "model")))
				json_object_set_new(traj, "model", json_string(json_string_value(model)));
			meta_str(meta, "cwd", json_object_get(p, "cwd"));
			meta_str(meta, "effort", json_object_get(p, "effort"));
			meta_str(meta, "approval_policy", json_object_get(p, "approval_policy"));
		} else if (!strcmp(type, "event_msg")) {
			const char *et = fw_ing_str(p, "type");
			const json_t *tu = json_object_get(json_object_get(p, "info"), "total_token_usage");
			if (et && !strcmp(et, "token_count") && json_is_object(tu))
				usage = (json_t *)tu; /* running totals: the last one counts */
		} else if (!strcmp(type, "compacted")) {
			const json_t *msg = json_object_get(p, "message");
			if (!json_is_string(msg)) {
				snprintf(err, errlen, "'payload.message' is %s, not string", fw_ing_type_name(msg));
				goto fail;
			}
			/* the summary the model wrote in place of the history */
			json_t *t = fw_ing_turn_add(traj, "assistant");
			if (!t || fw_ing_append_content(t, "text", msg))
				goto fail;
			tag(traj, "compacted");
		} else {
			int rc = item(traj, p, why, sizeof why);
			if (rc < 0)
				goto fail;
			if (rc > 0) {
				snprintf(err, errlen, "%s", why);
				goto fail;
			}
		}
	}
	*at = 0;
	if (!json_array_size(json_object_get(traj, "turns"))) {
		snprintf(err, errlen, "no response items: the rollout holds no conversation");
		*at = (long)json_integer_value(json_object_get(json_array_get(lines, 0), "_line"));
		goto fail;
	}
	if (usage)
		fw_ing_set_usage(traj, usage, "input_tokens", "output_tokens");
	return traj;
fail:
	json_decref(traj);
	return NULL;
}
