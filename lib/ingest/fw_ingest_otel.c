/*
 * fw_ingest_otel.c — agent trajectories rebuilt from OpenTelemetry traces
 * that follow the GenAI semantic conventions, in the OTLP JSON encoding.
 *
 * An agent run is an invoke_agent span; under it, one chat span per model
 * call (gen_ai.input.messages: the history the model was sent;
 * gen_ai.output.messages: what it answered) and one execute_tool span per
 * tool call (gen_ai.tool.call.id, .arguments, .result).  Instrumentations
 * often record on invoke_agent only the first input and the last output, so
 * the turns are rebuilt from the chat spans: the first one's whole input,
 * then for each chat the input messages that are new since the one before
 * (tool results, a user's reply) and its output.  A call whose result no
 * chat input shows is answered from its execute_tool span.
 *
 * OTLP JSON: {resourceSpans: [{resource: {attributes}, scopeSpans: [{scope,
 * spans: [{traceId, spanId, parentSpanId, name, startTimeUnixNano,
 * attributes: [{key, value: {stringValue | intValue | ...}}], status}]}]}]};
 * 64-bit integers are strings.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_ingest.h"
#include "fw_ingest_int.h"

/* An OTLP AnyValue as plain JSON; a new reference (null when empty). */
static json_t *any_value(const json_t *v, int depth)
{
	const json_t *x;
	size_t i;
	json_t *e;

	if (depth > 16 || !json_is_object(v))
		return json_null();
	if ((x = json_object_get(v, "stringValue")))
		return json_incref((json_t *)x);
	if ((x = json_object_get(v, "boolValue")))
		return json_incref((json_t *)x);
	if ((x = json_object_get(v, "intValue"))) {
		if (json_is_string(x))
			return json_integer((json_int_t)strtoll(json_string_value(x), NULL, 10));
		return json_incref((json_t *)x);
	}
	if ((x = json_object_get(v, "doubleValue")))
		return json_incref((json_t *)x);
	if ((x = json_object_get(v, "bytesValue")))
		return json_incref((json_t *)x);
	if ((x = json_object_get(v, "arrayValue"))) {
		json_t *a = json_array();
		json_array_foreach(json_object_get(x, "values"), i, e)
			json_array_append_new(a, any_value(e, depth + 1));
		return a;
	}
	if ((x = json_object_get(v, "kvlistValue"))) {
		json_t *o = json_object();
		json_array_foreach(json_object_get(x, "values"), i, e) {
			const char *k = fw_ing_str(e, "key");
			if (k)
				json_object_set_new(o, k, any_value(json_object_get(e, "value"), depth + 1));
		}
		return o;
	}
	return json_null();
}

/* A list of OTLP key-values as one JSON object; a new reference. */
static json_t *attrs_of(const json_t *kvs)
{
	json_t *o = json_object(), *e;
	size_t i;

	json_array_foreach(kvs, i, e) {
		const char *k = fw_ing_str(e, "key");
		if (k && o)
			json_object_set_new(o, k, any_value(json_object_get(e, "value"), 0));
	}
	return o;
}

/* An attribute holding messages: JSON text or already structured.  A new
 * reference, or NULL when absent or not JSON. */
static json_t *messages_attr(const json_t *attrs, const char *key)
{
	const json_t *v = json_object_get(attrs, key);
	json_error_t je;

	if (json_is_string(v))
		return json_loadb(json_string_value(v), json_string_length(v), JSON_ALLOW_NUL, &je);
	return v && !json_is_null(v) ? json_incref((json_t *)v) : NULL;
}

/* The operation of a span: gen_ai.operation.name, else the first word of
 * its name ("chat gpt-4o" -> "chat"). */
static void op_of(const json_t *span, char *out, size_t outlen)
{
	const char *op = fw_ing_str(json_object_get(span, "attrs"), "gen_ai.operation.name");
	const char *name = fw_ing_str(span, "name");

	if (op)
		snprintf(out, outlen, "%s", op);
	else if (name)
		snprintf(out, outlen, "%.*s", (int)strcspn(name, " "), name);
	else
		out[0] = 0;
}

static long long start_ns(const json_t *span)
{
	const json_t *v = json_object_get(span, "startTimeUnixNano");

	if (json_is_string(v))
		return strtoll(json_string_value(v), NULL, 10);
	return (long long)json_number_value(v);
}

/* A tool result or argument value as text: strings as they are, anything
 * else as compact JSON.  malloc'd, or NULL when memory runs out. */
static char *as_text(const json_t *v)
{
	if (!v || json_is_null(v))
		return strdup("");
	if (json_is_string(v))
		return strndup(json_string_value(v), json_string_length(v));
	return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* Appends the turns of one GenAI message {role, parts}.  0 or -1 (err). */
static int add_message(json_t *traj, const json_t *m, char *err, size_t errlen)
{
	static const char *const keys[] = {"role", "parts", "finish_reason", "name", NULL};
	const char *role = fw_ing_str(m, "role");
	const json_t *parts = json_object_get(m, "parts");
	json_t *t = NULL, *p;
	size_t i;

	if (!json_is_object(m))
		return snprintf(err, errlen, "a message is %s, not object", fw_ing_type_name(m)), -1;
	fw_ing_check_keys(traj, m, "messages[]", keys);
	if (!role)
		return snprintf(err, errlen, "a message has no 'role'"), -1;
	if (!json_is_array(parts))
		return snprintf(err, errlen, "'parts' of a %s message is %s, not array", role,
				fw_ing_type_name(parts)), -1;
	const char *trole = !strcmp(role, "assistant") ? "assistant" : !strcmp(role, "system") ? "system"
			    : "user";
	json_array_foreach(parts, i, p) {
		const char *type = fw_ing_str(p, "type");
		if (type && !strcmp(type, "tool_call_response")) {
			char *s = as_text(json_object_get(p, "response"));
			json_t *tt = s ? fw_ing_tool_turn(traj, fw_ing_str(p, "id"), s, strlen(s), 0) : NULL;
			free(s);
			if (!tt)
				return -1;
			t = NULL; /* text after a result opens a new turn */
			continue;
		}
		if (!strcmp(role, "tool"))
			continue; /* a tool message holds results only */
		if (!t && !(t = fw_ing_turn_add(traj, trole)))
			return -1;
		if (type && (!strcmp(type, "text") || !strcmp(type, "reasoning"))) {
			const json_t *c = json_object_get(p, "content");
			if (json_is_string(c) &&
			    fw_ing_turn_append(t, type[0] == 't' ? "text" : "thinking", json_string_value(c),
					       json_string_length(c)))
				return -1;
		} else if (type && (!strcmp(type, "tool_call") || !strcmp(type, "function_call"))) {
			if (fw_ing_turn_call(t, fw_ing_str(p, "id"), fw_ing_str(p, "name"),
					     json_object_get(p, "arguments")))
				return -1;
		} else if (type && (!strcmp(type, "blob") || !strcmp(type, "uri") || !strcmp(type, "file"))) {
			const char *mod = fw_ing_str(p, "modality");
			const char *s = mod && !strcmp(mod, "image") ? "[image]" : "[file]";
			if (fw_ing_turn_append(t, "text", s, strlen(s)))
				return -1;
		}
	}
	return 0;
}

/* Appends messages[from..to) of a messages attribute.  0 or -1 (err). */
static int add_messages(json_t *traj, const json_t *msgs, size_t from, size_t to, const char *what,
			char *err, size_t errlen)
{
	size_t i;
	json_t *m;
	char why[200];

	if (!json_is_array(msgs))
		return snprintf(err, errlen, "'%s' is %s, not an array of messages", what,
				fw_ing_type_name(msgs)), -1;
	json_array_foreach(msgs, i, m) {
		if (i < from || i >= to)
			continue;
		if (add_message(traj, m, why, sizeof why))
			return snprintf(err, errlen, "%s[%zu]: %s", what, i, why), -1;
	}
	return 0;
}

/* Whether a tool turn answers call id anywhere in traj. */
static int answered(const json_t *traj, const char *id)
{
	size_t i;
	json_t *t;

	json_array_foreach(json_object_get(traj, "turns"), i, t) {
		const char *c = fw_ing_str(t, "call_id");
		if (c && !strcmp(c, id))
			return 1;
	}
	return 0;
}

/* Answers from execute_tool spans (tools: call id -> span) the calls no
 * chat input answered, right after the turn that made them. */
static int answer_from_tools(json_t *traj, const json_t *tools)
{
	json_t *turns = json_object_get(traj, "turns");

	for (size_t i = 0; i < json_array_size(turns); i++) {
		json_t *t = json_array_get(turns, i), *c;
		size_t j, at = i + 1;
		while (at < json_array_size(turns) &&
		       !strcmp(fw_ing_str(json_array_get(turns, at), "role"), "tool"))
			at++;
		json_array_foreach(json_object_get(t, "calls"), j, c) {
			const char *id = fw_ing_str(c, "id");
			const json_t *span = id ? json_object_get(tools, id) : NULL;
			if (!span || answered(traj, id))
				continue;
			const json_t *attrs = json_object_get(span, "attrs");
			char *s = as_text(json_object_get(attrs, "gen_ai.tool.call.result"));
			const json_t *code = json_object_get(json_object_get(span, "status"), "code");
			int err = json_integer_value(code) == 2 ||
				  (json_is_string(code) && !strcmp(json_string_value(code), "STATUS_CODE_ERROR"));
			json_t *tt = json_object();
			if (!s || !tt) {
				free(s);
				json_decref(tt);
				return -1;
			}
			json_object_set_new(tt, "role", json_string("tool"));
			json_object_set_new(tt, "text", json_string(s));
			json_object_set_new(tt, "call_id", json_string(id));
			json_object_set_new(tt, "is_error", json_boolean(err));
			free(s);
			if (json_array_insert_new(turns, at++, tt))
				return -1;
		}
		i = at - 1;
	}
	return 0;
}

/* One agent run: spans (sorted by start) of one group. */
static json_t *rebuild(const json_t *spans, const char *trace, char *err, size_t errlen)
{
	json_t *traj = fw_ing_traj_new("otel"), *tools = json_object(), *sp;
	const json_t *agent = NULL;
	size_t i, seen = 0;
	int chats = 0;
	json_int_t in = 0, out = 0;
	int have_usage = 0;
	char op[64];

	snprintf(err, errlen, "out of memory");
	if (!traj || !tools)
		goto fail;
	json_t *meta = json_object_get(traj, "meta");
	json_array_foreach(spans, i, sp) {
		const json_t *a = json_object_get(sp, "attrs");
		op_of(sp, op, sizeof op);
		if (!strcmp(op, "invoke_agent") && !agent)
			agent = sp;
		if (!strcmp(op, "execute_tool") && fw_ing_str(a, "gen_ai.tool.call.id"))
			json_object_set(tools, fw_ing_str(a, "gen_ai.tool.call.id"), sp);
		const char *conv = fw_ing_str(a, "gen_ai.conversation.id");
		if (conv && !json_object_get(meta, "source_id"))
			json_object_set_new(meta, "source_id", json_string(conv));
		if (strcmp(op, "chat") && strcmp(op, "text_completion") && strcmp(op, "generate_content"))
			continue;
		json_t *msgs_in = messages_attr(a, "gen_ai.input.messages");
		json_t *msgs_out = messages_attr(a, "gen_ai.output.messages");
		if (!msgs_in && !msgs_out)
			continue;
		if (!chats++) {
			json_t *sys = messages_attr(a, "gen_ai.system_instructions");
			if (json_is_array(sys)) {
				json_t *m = json_pack("{sssO}", "role", "system", "parts", sys);
				int rc = !m || add_message(traj, m, err, errlen);
				json_decref(m);
				if (rc) {
					json_decref(sys);
					json_decref(msgs_in);
					json_decref(msgs_out);
					goto fail;
				}
			}
			json_decref(sys);
		}
		size_t nin = json_array_size(msgs_in);
		/* of several choices, the first is the one the agent went on with */
		int rc = (msgs_in && (nin > seen || !json_is_array(msgs_in)) &&
			  add_messages(traj, msgs_in, seen, nin, "gen_ai.input.messages", err, errlen)) ||
			 (msgs_out && add_messages(traj, msgs_out, 0, 1, "gen_ai.output.messages", err,
						   errlen));
		json_decref(msgs_in);
		json_decref(msgs_out);
		if (rc)
			goto fail;
		if (nin >= seen)
			seen = nin + 1; /* the answer comes back in the next input */
		const json_t *ui = json_object_get(a, "gen_ai.usage.input_tokens");
		const json_t *uo = json_object_get(a, "gen_ai.usage.output_tokens");
		if (json_is_integer(ui) || json_is_integer(uo))
			have_usage = 1;
		in += json_integer_value(ui);
		out += json_integer_value(uo);
		const char *model = fw_ing_str(a, "gen_ai.response.model");
		if (!model)
			model = fw_ing_str(a, "gen_ai.request.model");
		if (model && !json_string_length(json_object_get(traj, "model")))
			json_object_set_new(traj, "model", json_string(model));
	}
	const json_t *aa = json_object_get(agent, "attrs");
	if (!chats && agent) {
		/* no chat recorded its messages: what the agent span says */
		json_t *msgs_in = messages_attr(aa, "gen_ai.input.messages");
		json_t *msgs_out = messages_attr(aa, "gen_ai.output.messages");
		int rc = (msgs_in && add_messages(traj, msgs_in, 0, json_array_size(msgs_in),
						  "gen_ai.input.messages", err, errlen)) ||
			 (msgs_out && add_messages(traj, msgs_out, 0, 1, "gen_ai.output.messages", err,
						   errlen));
		json_decref(msgs_in);
		json_decref(msgs_out);
		if (rc)
			goto fail;
	}
	if (!json_array_size(json_object_get(traj, "turns"))) {
		snprintf(err, errlen, "trace %.40s: no span holds gen_ai.input.messages or "
			 "gen_ai.output.messages (was message content captured?)", trace);
		goto fail;
	}
	if (answer_from_tools(traj, tools))
		goto fail;
	if (!json_string_length(json_object_get(traj, "model"))) {
		const char *model = fw_ing_str(aa, "gen_ai.response.model");
		if (!model)
			model = fw_ing_str(aa, "gen_ai.request.model");
		if (model)
			json_object_set_new(traj, "model", json_string(model));
	}
	if (!have_usage && (json_object_get(aa, "gen_ai.usage.input_tokens") ||
			    json_object_get(aa, "gen_ai.usage.output_tokens"))) {
		have_usage = 1;
		in = json_integer_value(json_object_get(aa, "gen_ai.usage.input_tokens"));
		out = json_integer_value(json_object_get(aa, "gen_ai.usage.output_tokens"));
	}
	if (have_usage) {
		json_object_set_new(json_object_get(traj, "usage"), "input_tokens", json_integer(in));
		json_object_set_new(json_object_get(traj, "usage"), "output_tokens", json_integer(out));
	}
	long long ns = start_ns(json_array_get(spans, 0));
	if (ns > 0) {
		json_t *sec = json_integer((json_int_t)(ns / 1000000000LL));
		fw_ing_set_created(traj, sec);
		json_decref(sec);
	}
	if (!json_object_get(meta, "source_id"))
		json_object_set_new(meta, "source_id", json_string(trace));
	json_object_set_new(meta, "trace_id", json_string(trace));
	const char *an = fw_ing_str(aa, "gen_ai.agent.name");
	if (an)
		json_object_set_new(meta, "agent_name", json_string(an));
	const char *svc = fw_ing_str(json_object_get(json_array_get(spans, 0), "resource"), "service.name");
	if (svc)
		json_object_set_new(meta, "service", json_string(svc));
	json_decref(tools);
	return traj;
fail:
	json_decref(tools);
	json_decref(traj);
	return NULL;
}

static int by_start(const void *a, const void *b)
{
	long long x = start_ns(*(json_t *const *)a), y = start_ns(*(json_t *const *)b);
	return (x > y) - (x < y);
}

long fw_ingest_otel(const json_t *docs, int (*fn)(void *ctx, json_t *traj, const char *err),
		    void *ctx)
{
	json_t *spans = json_array(), *index = json_object(), *groups = json_object();
	json_t *order = json_array();
	size_t i, j, k, l;
	json_t *d, *rs, *ss, *sp;
	long n = -1;
	char op[64], key[160], err[320];

	if (!spans || !index || !groups || !order)
		goto done;
	/* every span, flattened, with its attributes as an object */
	json_array_foreach(docs, i, d) {
		json_array_foreach(json_object_get(d, "resourceSpans"), j, rs) {
			json_t *res = attrs_of(json_object_get(json_object_get(rs, "resource"), "attributes"));
			const json_t *scopes = json_object_get(rs, "scopeSpans");
			if (!scopes)
				scopes = json_object_get(rs, "instrumentationLibrarySpans");
			json_array_foreach(scopes, k, ss) {
				json_array_foreach(json_object_get(ss, "spans"), l, sp) {
					const char *tid = fw_ing_str(sp, "traceId"), *sid = fw_ing_str(sp, "spanId");
					if (!json_is_object(sp) || !tid || !sid)
						continue;
					json_t *s = json_copy(sp);
					json_object_set_new(s, "attrs", attrs_of(json_object_get(sp, "attributes")));
					json_object_set(s, "resource", res);
					snprintf(key, sizeof key, "%.64s/%.32s", tid, sid);
					json_object_set_new(index, key, json_integer((json_int_t)json_array_size(spans)));
					json_array_append_new(spans, s);
				}
			}
			json_decref(res);
		}
	}
	/* each span goes to its topmost invoke_agent ancestor, else its trace */
	json_array_foreach(spans, i, sp) {
		const char *tid = fw_ing_str(sp, "traceId");
		const json_t *cur = sp, *top = NULL;
		for (int hops = 0; cur && hops < 256; hops++) {
			op_of(cur, op, sizeof op);
			if (!strcmp(op, "invoke_agent"))
				top = cur;
			const char *par = fw_ing_str(cur, "parentSpanId");
			if (!par || !*par)
				break;
			snprintf(key, sizeof key, "%.64s/%.32s", tid, par);
			json_t *pi = json_object_get(index, key);
			cur = pi ? json_array_get(spans, (size_t)json_integer_value(pi)) : NULL;
		}
		snprintf(key, sizeof key, "%.64s/%.32s", tid, top ? fw_ing_str(top, "spanId") : "");
		json_t *g = json_object_get(groups, key);
		if (!g) {
			g = json_array();
			if (!g || json_object_set_new(groups, key, g) ||
			    json_array_append_new(order, json_string(key)))
				goto done;
		}
		json_array_append(g, sp);
	}
	n = 0;
	/* groups in order of their first span */
	size_t ng = json_array_size(order);
	json_t **firsts = calloc(ng ? ng : 1, sizeof *firsts);
	if (!firsts) {
		n = -1;
		goto done;
	}
	json_array_foreach(order, i, d) {
		json_t *g = json_object_get(groups, json_string_value(d));
		size_t m = json_array_size(g);
		json_t **v = malloc((m ? m : 1) * sizeof *v);
		if (!v) {
			free(firsts);
			n = -1;
			goto done;
		}
		for (j = 0; j < m; j++)
			v[j] = json_incref(json_array_get(g, j));
		qsort(v, m, sizeof *v, by_start);
		json_array_clear(g);
		for (j = 0; j < m; j++)
			json_array_append_new(g, v[j]);
		free(v);
		json_t *head = json_object();
		json_object_set_new(head, "startTimeUnixNano",
				    json_integer((json_int_t)start_ns(json_array_get(g, 0))));
		json_object_set(head, "key", d);
		firsts[i] = head;
	}
	qsort(firsts, ng, sizeof *firsts, by_start);
	for (i = 0; i < ng; i++) {
		const char *gk = fw_ing_str(firsts[i], "key");
		json_t *g = json_object_get(groups, gk);
		char trace[80];
		snprintf(trace, sizeof trace, "%.*s", (int)strcspn(gk, "/"), gk);
		json_t *traj = rebuild(g, trace, err, sizeof err);
		n++;
		if (fn(ctx, traj, traj ? NULL : err)) {
			n = -1;
			break;
		}
	}
	for (i = 0; i < ng; i++)
		json_decref(firsts[i]);
	free(firsts);
done:
	json_decref(spans);
	json_decref(index);
	json_decref(groups);
	json_decref(order);
	return n;
}
