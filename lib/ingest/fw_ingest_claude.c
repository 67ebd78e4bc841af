/*
 * fw_ingest_claude.c — Claude Code session logs to a traj.
 *
 * A session file holds one event per line.  Events form a tree through
 * parentUuid: editing a message or retrying starts a new branch, and a
 * subagent's work hangs off the main thread as a side chain
 * (isSidechain: true).  The conversation a user saw is the chain from the
 * last main-thread event back to the root (across compaction boundaries,
 * which link back through logicalParentUuid).  Claude Code writes each content
 * block of an assistant message as its own event with the same message id;
 * those are merged back into one message, then converted like Anthropic
 * Messages.  What Claude Code itself put in the chain is left out and
 * counted: isMeta user events (command caveats, reminders), assistant
 * events it made up (model "<synthetic>": "API Error: ..." notices the model
 * never wrote) and system events (api_error retries, local commands).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_ingest.h"
#include "fw_ingest_int.h"

static int is_turn_event(const json_t *e)
{
	const char *type = fw_ing_str(e, "type");

	return type && (!strcmp(type, "user") || !strcmp(type, "assistant")) &&
	       json_is_object(json_object_get(e, "message"));
}

/* Indices of the main thread, root first, in a new array; *broken is set
 * when a parentUuid names an event that is not in the session. */
static json_t *main_thread(const json_t *events, const json_t *idx, size_t leaf, int *broken)
{
	json_t *chain = json_array();
	size_t n = json_array_size(events), steps = 0;
	long cur = (long)leaf;

	while (chain && cur >= 0 && steps++ <= n) {
		json_t *e = json_array_get(events, (size_t)cur);
		json_array_insert_new(chain, 0, json_integer(cur));
		const char *parent = fw_ing_str(e, "parentUuid");
		if (!parent) /* a compaction boundary links back logically */
			parent = fw_ing_str(e, "logicalParentUuid");
		if (!parent)
			break;
		json_t *pi = json_object_get(idx, parent);
		if (!pi) {
			*broken = 1;
			break;
		}
		cur = (long)json_integer_value(pi);
	}
	return chain;
}

json_t *fw_ingest_claude_session(const json_t *events, char *err, size_t errlen)
{
	json_t *idx = json_object(), *onmain = json_object(), *msgs = json_array();
	json_t *usage = json_object(); /* message id -> usage of its last event */
	json_t *traj = NULL, *chain = NULL, *e, *v;
	long leaf = -1, nside = 0, dropped = 0, nmeta = 0, nsynth = 0, napi = 0;
	const char *ai_title = NULL, *custom_title = NULL;
	int broken = 0;
	size_t i;
	const char *k;

	snprintf(err, errlen, "out of memory");
	if (!idx || !onmain || !msgs || !usage)
		goto done;
	if (!json_is_array(events)) {
		snprintf(err, errlen, "session events are %s, not array", fw_ing_type_name(events));
		goto done;
	}
	json_array_foreach(events, i, e) {
		const char *uuid = fw_ing_str(e, "uuid");
		const char *type = fw_ing_str(e, "type");
		if (uuid)
			json_object_set_new(idx, uuid, json_integer((json_int_t)i));
		if (type && !strcmp(type, "ai-title") && fw_ing_str(e, "aiTitle"))
			ai_title = fw_ing_str(e, "aiTitle");
		if (type && !strcmp(type, "custom-title") && fw_ing_str(e, "customTitle"))
			custom_title = fw_ing_str(e, "customTitle");
		if (!is_turn_event(e))
			continue;
		if (json_is_true(json_object_get(e, "isSidechain")))
			nside++;
		else
			leaf = (long)i;
	}
	if (leaf < 0) {
		snprintf(err, errlen, "no user or assistant event outside side chains");
		goto done;
	}
	chain = main_thread(events, idx, (size_t)leaf, &broken);
	if (!chain)
		goto done;
	json_array_foreach(chain, i, v) {
		e = json_array_get(events, (size_t)json_integer_value(v));
		const char *uuid = fw_ing_str(e, "uuid");
		if (uuid)
			json_object_set_new(onmain, uuid, json_true());
	}
	json_array_foreach(events, i, e) {
		const char *uuid = fw_ing_str(e, "uuid");
		if (is_turn_event(e) && !json_is_true(json_object_get(e, "isSidechain")) &&
		    uuid && !json_object_get(onmain, uuid))
			dropped++;
	}

	/* messages along the main thread, assistant blocks merged by message id */
	const char *last_id = NULL;
	json_array_foreach(chain, i, v) {
		e = json_array_get(events, (size_t)json_integer_value(v));
		const char *type = fw_ing_str(e, "type"), *sub = fw_ing_str(e, "subtype");
		if (type && !strcmp(type, "system") && sub && !strcmp(sub, "api_error"))
			napi++;
		if (!is_turn_event(e))
			continue;
		if (json_is_true(json_object_get(e, "isMeta"))) {
			nmeta++;
			continue;
		}
		const json_t *m = json_object_get(e, "message");
		const char *emodel = fw_ing_str(m, "model");
		if ((emodel && !strcmp(emodel, "<synthetic>")) ||
		    json_is_true(json_object_get(e, "isApiErrorMessage"))) {
			nsynth++;
			last_id = NULL;
			continue;
		}
		const char *role = fw_ing_str(m, "role");
		const char *mid = fw_ing_str(m, "id");
		const json_t *content = json_object_get(m, "content");
		if (!role)
			role = fw_ing_str(e, "type");
		if (!strcmp(role, "assistant") && mid && json_is_object(json_object_get(m, "usage")))
			json_object_set(usage, mid, json_object_get(m, "usage"));
		json_t *prev = json_array_get(msgs, json_array_size(msgs) - 1);
		if (prev && mid && last_id && !strcmp(mid, last_id) && !strcmp(role, "assistant") &&
		    json_is_array(content) && json_is_array(json_object_get(prev, "content"))) {
			json_array_extend(json_object_get(prev, "content"), (json_t *)content);
			continue;
		}
		json_t *nm = json_pack("{sssO}", "role", role, "content",
				       content ? (json_t *)content : json_null());
		if (!nm)
			goto done;
		/* a later merge must not write into the event's own array */
		if (json_is_array(content))
			json_object_set_new(nm, "content", json_copy((json_t *)content));
		json_array_append_new(msgs, nm);
		last_id = !strcmp(role, "assistant") ? mid : NULL;
	}

	traj = fw_ing_traj_new("claude-code");
	if (!traj)
		goto done;
	if (fw_ing_anthropic_messages(traj, msgs, "message", err, errlen)) {
		json_decref(traj);
		traj = NULL;
		goto done;
	}
	json_t *first = json_array_get(events, (size_t)json_integer_value(json_array_get(chain, 0)));
	json_t *meta = json_object_get(traj, "meta");
	fw_ing_set_created(traj, json_object_get(first, "timestamp"));
	json_array_foreach(chain, i, v) {
		e = json_array_get(events, (size_t)json_integer_value(v));
		const char *model = fw_ing_str(json_object_get(e, "message"), "model");
		if (model && strcmp(model, "<synthetic>")) {
			json_object_set_new(traj, "model", json_string(model));
			break;
		}
	}
	json_int_t in = 0, out = 0;
	json_object_foreach(usage, k, v) {
		in += json_integer_value(json_object_get(v, "input_tokens"));
		out += json_integer_value(json_object_get(v, "output_tokens"));
	}
	if (json_object_size(usage)) {
		json_object_set_new(json_object_get(traj, "usage"), "input_tokens", json_integer(in));
		json_object_set_new(json_object_get(traj, "usage"), "output_tokens", json_integer(out));
	}
	if (fw_ing_str(first, "sessionId"))
		json_object_set_new(meta, "source_id", json_string(fw_ing_str(first, "sessionId")));
	if (fw_ing_str(first, "cwd"))
		json_object_set_new(meta, "cwd", json_string(fw_ing_str(first, "cwd")));
	if (fw_ing_str(first, "gitBranch"))
		json_object_set_new(meta, "git_branch", json_string(fw_ing_str(first, "gitBranch")));
	if (fw_ing_str(first, "version"))
		json_object_set_new(meta, "client_version", json_string(fw_ing_str(first, "version")));
	if (nside) {
		json_array_append_new(json_object_get(traj, "tags"), json_string("sidechain"));
		json_object_set_new(meta, "sidechain_events", json_integer(nside));
	}
	if (dropped)
		json_object_set_new(meta, "dropped_events", json_integer(dropped));
	if (nmeta)
		json_object_set_new(meta, "meta_events", json_integer(nmeta));
	if (nsynth)
		json_object_set_new(meta, "synthetic_events", json_integer(nsynth));
	if (napi)
		json_object_set_new(meta, "api_errors", json_integer(napi));
	if (custom_title || ai_title)
		json_object_set_new(meta, "title", json_string(custom_title ? custom_title : ai_title));
	if (broken)
		json_object_set_new(meta, "broken_chain", json_true());
done:
	json_decref(idx);
	json_decref(onmain);
	json_decref(msgs);
	json_decref(usage);
	json_decref(chain);
	return traj;
}
