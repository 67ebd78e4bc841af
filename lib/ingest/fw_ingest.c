/*
 * fw_ingest.c — format detection, content ids, redaction of traj records,
 * times, and the shared turn builders (fw_ingest_int.h).  The converters
 * live in fw_ingest_fmt.c (one function per format), Claude Code sessions
 * in fw_ingest_claude.c, feedback in fw_ingest_fb.c.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fw_ingest.h"
#include "fw_ingest_int.h"
#include "fw_mp.h"

static const char *fmt_names[FW_FMT_N] = {
	[FW_FMT_UNKNOWN] = "unknown",
	[FW_FMT_OPENAI_CHAT] = "openai-chat",
	[FW_FMT_OPENAI_RESPONSES] = "openai-responses",
	[FW_FMT_ANTHROPIC] = "anthropic",
	[FW_FMT_CLAUDE_CODE] = "claude-code",
	[FW_FMT_SHAREGPT] = "sharegpt",
	[FW_FMT_SWE_AGENT] = "swe-agent",
	[FW_FMT_MINI_SWE_AGENT] = "mini-swe-agent",
	[FW_FMT_OPENHANDS] = "openhands",
	[FW_FMT_CODEX] = "codex",
	[FW_FMT_OTEL] = "otel",
	[FW_FMT_FLYWHEEL] = "flywheel",
};

const char *fw_fmt_name(enum fw_fmt f)
{
	if ((int)f < 0 || f >= FW_FMT_N)
		return "unknown";
	return fmt_names[f];
}

enum fw_fmt fw_fmt_from_name(const char *name)
{
	for (int i = 1; i < FW_FMT_N; i++)
		if (!strcmp(name, fmt_names[i]))
			return (enum fw_fmt)i;
	return FW_FMT_UNKNOWN;
}

/* ---- detection ------------------------------------------------------------ */

static int has(const json_t *o, const char *k)
{
	return json_object_get(o, k) != NULL;
}

static int is_type(const json_t *o, const char *k, const char *want)
{
	const char *s = fw_ing_str(o, k);
	return s && !strcmp(s, want);
}

/* Looks through message contents for block or role evidence: returns +1
 * for Anthropic, -1 for OpenAI, 0 when nothing tells them apart. */
static int messages_lean(const json_t *msgs)
{
	size_t i, j;
	json_t *m, *b;

	json_array_foreach(msgs, i, m) {
		const char *role = fw_ing_str(m, "role");
		if (role && (!strcmp(role, "tool") || !strcmp(role, "system") ||
			     !strcmp(role, "developer") || !strcmp(role, "function")))
			return -1;
		if (has(m, "tool_calls") || has(m, "function_call") || has(m, "tool_call_id"))
			return -1;
		json_t *c = json_object_get(m, "content");
		if (!json_is_array(c))
			continue;
		json_array_foreach(c, j, b) {
			const char *t = fw_ing_str(b, "type");
			if (!t)
				continue;
			if (!strcmp(t, "tool_use") || !strcmp(t, "tool_result") ||
			    !strcmp(t, "thinking") || !strcmp(t, "redacted_thinking"))
				return 1;
			if (!strcmp(t, "image_url") || !strcmp(t, "input_audio"))
				return -1;
		}
	}
	return 0;
}

/* Whether o is an OpenHands event: an action or an observation. */
static int openhands_event(const json_t *o)
{
	return json_is_object(o) && (fw_ing_str(o, "action") || fw_ing_str(o, "observation")) &&
	       (has(o, "source") || has(o, "id"));
}

enum fw_fmt fw_ingest_detect_json(const json_t *doc)
{
	static const char *const codex_types[] = {"session_meta", "response_item", "turn_context",
						  "event_msg", "compacted", NULL};
	if (!json_is_object(doc))
		return FW_FMT_UNKNOWN;
	if (json_is_array(json_object_get(doc, "resourceSpans")))
		return FW_FMT_OTEL;
	const char *type = fw_ing_str(doc, "type");
	if (type && json_is_object(json_object_get(doc, "payload")) && has(doc, "timestamp"))
		for (const char *const *t = codex_types; *t; t++)
			if (!strcmp(type, *t))
				return FW_FMT_CODEX;
	const json_t *hist = json_object_get(doc, "history");
	if (json_is_array(hist) && openhands_event(json_array_get(hist, 0)))
		return FW_FMT_OPENHANDS;
	if (json_is_array(json_object_get(doc, "messages")) &&
	    (has(doc, "trajectory_format") || has(json_object_get(doc, "info"), "mini_version")))
		return FW_FMT_MINI_SWE_AGENT;
	if (json_is_array(json_object_get(doc, "trajectory")) ||
	    (json_is_array(json_object_get(doc, "history")) && has(doc, "info")))
		return FW_FMT_SWE_AGENT;
	if (json_is_array(json_object_get(doc, "conversations")) ||
	    json_is_array(json_object_get(doc, "conversation")))
		return FW_FMT_SHAREGPT;
	if ((has(doc, "uuid") && (has(doc, "parentUuid") || has(doc, "sessionId"))) ||
	    (is_type(doc, "type", "summary") && has(doc, "leafUuid")) ||
	    is_type(doc, "type", "file-history-snapshot") ||
	    ((is_type(doc, "type", "ai-title") || is_type(doc, "type", "custom-title") ||
	      is_type(doc, "type", "queue-operation")) && has(doc, "sessionId")))
		return FW_FMT_CLAUDE_CODE;
	if (is_type(doc, "object", "response") ||
	    (has(doc, "output") && has(doc, "input") && !has(doc, "messages")))
		return FW_FMT_OPENAI_RESPONSES;

	const json_t *req = json_object_get(doc, "request");
	const json_t *msgs = json_object_get(doc, "messages");
	if (!msgs && json_is_object(req))
		msgs = json_object_get(req, "messages");
	if (!json_is_array(msgs))
		return FW_FMT_UNKNOWN;
	/* a logged request and its reply: the reply's shape says whose API it is */
	const json_t *resp = json_object_get(doc, "response");
	if (json_is_object(resp)) {
		if (has(resp, "choices") || is_type(resp, "object", "chat.completion"))
			return FW_FMT_OPENAI_CHAT;
		if (is_type(resp, "type", "message") || json_is_array(json_object_get(resp, "content")) ||
		    has(resp, "stop_reason"))
			return FW_FMT_ANTHROPIC;
	}
	if (is_type(doc, "object", "chat.completion") || has(doc, "choices"))
		return FW_FMT_OPENAI_CHAT;
	if (is_type(doc, "type", "message") || has(doc, "stop_reason"))
		return FW_FMT_ANTHROPIC;
	int lean = messages_lean(msgs);
	if (lean > 0)
		return FW_FMT_ANTHROPIC;
	if (lean < 0)
		return FW_FMT_OPENAI_CHAT;
	if (has(doc, "system") || (json_is_object(req) && has(req, "system")))
		return FW_FMT_ANTHROPIC;
	return FW_FMT_OPENAI_CHAT;
}

/* The format of a file that is a JSON array whose first element is e: a
 * list of documents of some format, of mini-swe-agent messages, or of
 * OpenHands events. */
static enum fw_fmt detect_element(const json_t *e)
{
	enum fw_fmt f = fw_ingest_detect_json(e);

	if (f != FW_FMT_UNKNOWN)
		return f;
	if (openhands_event(e))
		return FW_FMT_OPENHANDS;
	if (fw_ing_str(e, "role") && (has(e, "content") || has(e, "tool_calls")))
		return FW_FMT_MINI_SWE_AGENT;
	return FW_FMT_UNKNOWN;
}

/* Describes what a document looked like, for "unknown format: ...". */
static void describe(const json_t *doc, char *why, size_t whylen)
{
	const char *k;
	json_t *v;
	size_t used = 0, shown = 0;

	if (!json_is_object(doc)) {
		snprintf(why, whylen, "a JSON %s, not an object", fw_ing_type_name(doc));
		return;
	}
	used = (size_t)snprintf(why, whylen, "a JSON object with keys");
	json_object_foreach((json_t *)doc, k, v) {
		if (used >= whylen)
			break;
		if (shown == 6) {
			snprintf(why + used, whylen - used, ", ...");
			break;
		}
		used += (size_t)snprintf(why + used, whylen - used, "%s '%.32s'", shown ? "," : "", k);
		shown++;
	}
	if (!shown)
		snprintf(why, whylen, "an empty JSON object");
}

/* Key sniffing for a document too big for the bytes we have. */
static enum fw_fmt sniff_keys(const char *s, size_t n)
{
	static const struct { const char *key; enum fw_fmt f; } keys[] = {
		{"\"resourceSpans\"", FW_FMT_OTEL}, {"\"trajectory_format\"", FW_FMT_MINI_SWE_AGENT},
		{"\"tool_call_metadata\"", FW_FMT_OPENHANDS},
		{"\"trajectory\"", FW_FMT_SWE_AGENT}, {"\"history\"", FW_FMT_SWE_AGENT},
		{"\"conversations\"", FW_FMT_SHAREGPT}, {"\"parentUuid\"", FW_FMT_CLAUDE_CODE},
	};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (memmem(s, n, keys[i].key, strlen(keys[i].key)))
			return keys[i].f;
	/* OpenHands events without function-calling metadata */
	if (memmem(s, n, "\"source\"", 8) &&
	    (memmem(s, n, "\"action\"", 8) || memmem(s, n, "\"observation\"", 13)))
		return FW_FMT_OPENHANDS;
	return FW_FMT_UNKNOWN;
}

enum fw_fmt fw_ingest_detect(const void *p, size_t n, char *why, size_t whylen)
{
	const unsigned char *u = p;
	const char *s = p;
	size_t i = 0;
	json_error_t je;
	char first[128] = "";

	snprintf(why, whylen, "empty input");
	if (n >= 4 && u[0] == 0x28 && u[1] == 0xb5 && u[2] == 0x2f && u[3] == 0xfd)
		return FW_FMT_FLYWHEEL;
	if (n >= 3 && u[0] == 0xef && u[1] == 0xbb && u[2] == 0xbf)
		i = 3; /* UTF-8 byte order mark */
	while (i < n && isspace(u[i]))
		i++;
	if (i == n)
		return FW_FMT_UNKNOWN;
	if ((u[i] >= 0x80 && u[i] <= 0x8f) || u[i] == 0xde || u[i] == 0xdf)
		return FW_FMT_FLYWHEEL;
	if (u[i] != '{' && u[i] != '[') {
		snprintf(why, whylen, "neither JSON nor msgpack (first byte 0x%02x)", u[i]);
		return FW_FMT_UNKNOWN;
	}

	/* JSON Lines: the first few complete lines, one value each */
	size_t at = i;
	for (int line = 0; line < 8 && at < n; line++) {
		const char *nl = memchr(s + at, '\n', n - at);
		if (!nl)
			break;
		json_t *doc = json_loadb(s + at, (size_t)(nl - (s + at)), JSON_ALLOW_NUL, &je);
		at = (size_t)(nl - s) + 1;
		if (!doc) {
			if (!first[0])
				snprintf(first, sizeof first, "%.100s", je.text);
			continue;
		}
		enum fw_fmt f;
		if (json_is_array(doc) && json_array_size(doc) > 0) {
			json_t *e = json_incref(json_array_get(doc, 0));
			json_decref(doc);
			doc = e;
			f = detect_element(doc);
		} else {
			f = fw_ingest_detect_json(doc);
		}
		if (f == FW_FMT_UNKNOWN)
			describe(doc, why, whylen);
		json_decref(doc);
		if (f != FW_FMT_UNKNOWN || (line == 0 && !first[0]))
			return f;
	}

	/* one document, maybe pretty-printed, maybe an array of records */
	size_t body = i + (u[i] == '[');
	while (body < n && (isspace(u[body]) || u[body] == ','))
		body++;
	json_t *doc = json_loadb(s + body, n - body, JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL, &je);
	if (doc) {
		enum fw_fmt f = u[i] == '[' ? detect_element(doc) : fw_ingest_detect_json(doc);
		if (f == FW_FMT_UNKNOWN)
			describe(doc, why, whylen);
		json_decref(doc);
		return f;
	}
	enum fw_fmt f = sniff_keys(s + i, n - i);
	if (f == FW_FMT_UNKNOWN)
		snprintf(why, whylen, "no JSON value parses: %s", first[0] ? first : je.text);
	return f;
}

/* ---- times ---------------------------------------------------------------- */

static int fmt_epoch(long long t, char *out, size_t outlen)
{
	struct tm tm;
	time_t tt = (time_t)t;

	if (!gmtime_r(&tt, &tm) || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 1)
		return -1;
	strftime(out, outlen, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return 0;
}

int fw_ingest_time(const json_t *v, char *out, size_t outlen)
{
	out[0] = 0;
	if (json_is_integer(v) || json_is_real(v)) {
		double d = json_number_value(v);
		if (d > 1e12)
			d /= 1000; /* milliseconds */
		if (d < 0 || d > 253402300799.0)
			return -1;
		return fmt_epoch((long long)d, out, outlen);
	}
	const char *s = json_string_value(v);
	if (!s)
		return -1;
	size_t nd = strspn(s, "0123456789");
	if (nd >= 9 && nd <= 13 && !s[nd]) {
		/* Unix time written as text, as CSV files have it */
		json_t *num = json_integer((json_int_t)strtoll(s, NULL, 10));
		int rc = fw_ingest_time(num, out, outlen);
		json_decref(num);
		return rc;
	}
	int Y, M, D, h = 0, m = 0, sec = 0, used = 0;
	if (sscanf(s, "%4d-%2d-%2d%n", &Y, &M, &D, &used) != 3 || used != 10)
		return -1;
	const char *p = s + used;
	if (*p == 'T' || *p == ' ') {
		int u2 = 0;
		if (sscanf(p + 1, "%2d:%2d:%2d%n", &h, &m, &sec, &u2) != 3 || u2 != 8)
			return -1;
		p += 1 + u2;
		if (*p == '.' || *p == ',')
			for (p++; isdigit((unsigned char)*p); p++)
				;
	}
	long off = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh, om = 0, u3 = 0;
		if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &u3) == 2 && u3 == 5)
			;
		else if (sscanf(p + 1, "%2d%2d%n", &oh, &om, &u3) == 2 && u3 == 4)
			;
		else
			return -1;
		off = (oh * 3600L + om * 60L) * (*p == '-' ? -1 : 1);
		p += 1 + u3;
	}
	if (*p || M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60)
		return -1;
	struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D,
			.tm_hour = h, .tm_min = m, .tm_sec = sec};
	return fmt_epoch((long long)timegm(&tm) - off, out, outlen);
}

/* ---- ids and redaction ------------------------------------------------------ */

/* The turns of traj without their thinking signatures: a signature proves
 * where a block came from but is not part of the conversation.  A new
 * reference, or NULL when memory runs out. */
static json_t *turns_for_id(const json_t *traj)
{
	json_t *turns = json_object_get(traj, "turns"), *t;
	json_t *out = json_array();
	size_t i;

	json_array_foreach(turns, i, t) {
		json_t *c = json_is_object(t) && json_object_get(t, "signatures")
				    ? json_copy(t) : json_incref(t);
		if (!c || json_array_append_new(out, c)) {
			json_decref(out);
			return NULL;
		}
		if (json_is_object(c))
			json_object_del(c, "signatures");
	}
	return out;
}

int fw_ingest_set_id(json_t *traj)
{
	json_t *c = json_object();
	json_t *turns = turns_for_id(traj);
	char hex[17];

	if (!c || !turns) {
		json_decref(c);
		json_decref(turns);
		return -1;
	}
	json_object_set(c, "model", json_object_get(traj, "model"));
	json_object_set_new(c, "turns", turns);
	char *s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	json_decref(c);
	if (!s)
		return -1;
	snprintf(hex, sizeof hex, "%016llx", (unsigned long long)fw_hash64(s, strlen(s)));
	free(s);
	return json_object_set_new(traj, "id", json_string(hex));
}

/* Redacts string field key of o in place; returns replacements or -1. */
static long redact_field(json_t *o, const char *key, struct fw_redact *r,
			 struct fw_redact_counts *c)
{
	json_t *v = json_object_get(o, key);
	struct fw_redact_counts before = *c;
	size_t n;
	long k = 0;

	if (!json_is_string(v) || json_string_length(v) == 0)
		return 0;
	char *p = fw_redact_str(r, json_string_value(v), json_string_length(v), &n, c);
	if (!p)
		return -1;
	for (int i = 0; i < FW_RD_NRULES; i++)
		k += (long)(c->n[i] - before.n[i]);
	if (k > 0 && json_object_set_new(o, key, json_stringn_nocheck(p, n))) {
		free(p);
		return -1;
	}
	free(p);
	return k;
}

/* Redacts every string inside v (an object or array from a log's metadata),
 * recursively.  Returns replacements or -1. */
static long redact_tree(json_t *v, struct fw_redact *r, struct fw_redact_counts *c, int depth)
{
	const char *k;
	json_t *x;
	size_t i;
	long n = 0, m;

	if (depth > 32)
		return 0;
	if (json_is_object(v)) {
		json_object_foreach(v, k, x) {
			if (depth == 0 && (!strcmp(k, "source_id") || !strcmp(k, "file") ||
					   !strcmp(k, "redactions")))
				continue; /* ours: ids and positions, not log content */
			if (json_is_string(x))
				m = redact_field(v, k, r, c);
			else
				m = redact_tree(x, r, c, depth + 1);
			if (m < 0)
				return -1;
			n += m;
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x) {
			if (json_is_string(x)) {
				json_t *one = json_pack("{sO}", "s", x);
				if (!one || (m = redact_field(one, "s", r, c)) < 0) {
					json_decref(one);
					return -1;
				}
				if (m)
					json_array_set(v, i, json_object_get(one, "s"));
				json_decref(one);
			} else if ((m = redact_tree(x, r, c, depth + 1)) < 0) {
				return -1;
			}
			n += m;
		}
	}
	return n;
}

long fw_ingest_redact(json_t *traj, struct fw_redact *r, struct fw_redact_counts *total)
{
	struct fw_redact_counts c;
	size_t i, j;
	json_t *t, *call, *fb;
	long k = 0, x;

	memset(&c, 0, sizeof c);
	json_array_foreach(json_object_get(traj, "turns"), i, t) {
		if ((x = redact_field(t, "text", r, &c)) < 0)
			return -1;
		k += x;
		/* signed thinking is replayed to the API as it is: a changed
		 * byte voids the signature */
		if (!json_array_size(json_object_get(t, "signatures"))) {
			if ((x = redact_field(t, "thinking", r, &c)) < 0)
				return -1;
			k += x;
		}
		json_array_foreach(json_object_get(t, "calls"), j, call) {
			if ((x = redact_field(call, "args", r, &c)) < 0)
				return -1;
			k += x;
		}
	}
	json_array_foreach(json_object_get(traj, "feedback"), i, fb) {
		if ((x = redact_field(fb, "comment", r, &c)) < 0)
			return -1;
		k += x;
	}
	/* a feedback record (an orphan) carries its comment at the top */
	if ((x = redact_field(traj, "comment", r, &c)) < 0)
		return -1;
	k += x;
	/* metadata copied from the log (user ids, paths, headers) */
	if ((x = redact_tree(json_object_get(traj, "meta"), r, &c, 0)) < 0)
		return -1;
	k += x;
	if (k == 0)
		return 0;
	json_t *meta = json_object_get(traj, "meta");
	if (!json_is_object(meta)) {
		meta = json_object();
		if (!meta || json_object_set_new(traj, "meta", meta))
			return -1;
	}
	json_t *counts = json_object_get(meta, "redactions");
	if (!json_is_object(counts)) {
		counts = json_object();
		if (!counts || json_object_set_new(meta, "redactions", counts))
			return -1;
	}
	for (int rule = 0; rule < FW_RD_NRULES; rule++) {
		if (!c.n[rule])
			continue;
		const char *name = fw_redact_rule_name(rule);
		json_int_t had = json_integer_value(json_object_get(counts, name));
		json_object_set_new(counts, name, json_integer(had + (json_int_t)c.n[rule]));
		if (total)
			total->n[rule] += c.n[rule];
	}
	return k;
}

/* ---- helpers shared by the converters ------------------------------------------ */

const char *fw_ing_type_name(const json_t *v)
{
	if (!v)
		return "missing";
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "object";
	case JSON_ARRAY: return "array";
	case JSON_STRING: return "string";
	case JSON_INTEGER: return "integer";
	case JSON_REAL: return "number";
	case JSON_TRUE:
	case JSON_FALSE: return "boolean";
	default: return "null";
	}
}

const char *fw_ing_str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

int fw_ing_field(const json_t *o, const char *k, json_type t, const char *path, const json_t **out,
	      char *err, size_t errlen)
{
	const json_t *v = json_object_get(o, k);
	static const char *names[] = {"object", "array", "string", "integer", "number",
				      "boolean", "boolean", "null"};

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (json_typeof(v) != t) {
		snprintf(err, errlen, "'%s' is %s, not %s", path, fw_ing_type_name(v), names[t]);
		return -1;
	}
	*out = v;
	return 0;
}

json_t *fw_ing_traj_new(const char *source)
{
	json_t *t = json_object();

	if (!t)
		return NULL;
	json_object_set_new(t, "kind", json_string("traj"));
	json_object_set_new(t, "v", json_integer(1));
	json_object_set_new(t, "id", json_string(""));
	json_object_set_new(t, "source", json_string(source));
	json_object_set_new(t, "model", json_string(""));
	json_object_set_new(t, "turns", json_array());
	json_object_set_new(t, "usage", json_object());
	json_object_set_new(t, "feedback", json_array());
	json_object_set_new(t, "tags", json_array());
	json_object_set_new(t, "meta", json_object());
	if (json_object_size(t) != 10) {
		json_decref(t);
		return NULL;
	}
	return t;
}

json_t *fw_ing_turn_add(json_t *traj, const char *role)
{
	json_t *t = json_object();

	if (!t || json_object_set_new(t, "role", json_string(role)) ||
	    json_object_set_new(t, "text", json_string("")) ||
	    json_array_append_new(json_object_get(traj, "turns"), t))
		return NULL;
	return t;
}

json_t *fw_ing_turn_last(json_t *traj)
{
	json_t *turns = json_object_get(traj, "turns");
	size_t n = json_array_size(turns);

	return n ? json_array_get(turns, n - 1) : NULL;
}

int fw_ing_turn_append(json_t *turn, const char *key, const char *s, size_t n)
{
	json_t *old = json_object_get(turn, key);
	size_t on = json_string_length(old);

	if (n == 0)
		return 0;
	if (!on)
		return json_object_set_new(turn, key, json_stringn_nocheck(s, n));
	char *p = malloc(on + 1 + n);
	if (!p)
		return -1;
	memcpy(p, json_string_value(old), on);
	p[on] = '\n';
	memcpy(p + on + 1, s, n);
	int rc = json_object_set_new(turn, key, json_stringn_nocheck(p, on + 1 + n));
	free(p);
	return rc;
}

int fw_ing_turn_call(json_t *turn, const char *id, const char *name, const json_t *args)
{
	json_t *calls = json_object_get(turn, "calls");
	json_t *c = json_object();
	char *text = NULL;

	if (!calls) {
		calls = json_array();
		if (!calls || json_object_set_new(turn, "calls", calls))
			return -1;
	}
	if (json_is_string(args)) {
		json_error_t je;
		json_t *parsed = json_loadb(json_string_value(args), json_string_length(args),
					    JSON_ALLOW_NUL, &je);
		if (parsed && (json_is_object(parsed) || json_is_array(parsed)))
			text = json_dumps(parsed, JSON_COMPACT | JSON_PRESERVE_ORDER);
		json_decref(parsed);
		if (!text)
			text = strndup(json_string_value(args), json_string_length(args));
	} else if (args) {
		text = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
	} else {
		text = strdup("{}");
	}
	if (!c || !text) {
		json_decref(c);
		free(text);
		return -1;
	}
	json_object_set_new(c, "id", json_string(id ? id : ""));
	json_object_set_new(c, "name", json_string(name ? name : ""));
	json_object_set_new(c, "args", json_string_nocheck(text));
	free(text);
	return json_array_append_new(calls, c);
}

json_t *fw_ing_tool_turn(json_t *traj, const char *call_id, const char *text, size_t n, int is_error)
{
	json_t *t = fw_ing_turn_add(traj, "tool");

	if (!t)
		return NULL;
	json_object_set_new(t, "text", json_stringn_nocheck(text, n));
	json_object_set_new(t, "call_id", json_string(call_id ? call_id : ""));
	json_object_set_new(t, "is_error", json_boolean(is_error));
	return t;
}

char *fw_ing_content_text(const json_t *content, size_t *n)
{
	size_t i, len = 0, cap = 64;
	json_t *part;
	char *out = malloc(cap);

	if (!out)
		return NULL;
	out[0] = 0;
	if (json_is_string(content)) {
		*n = json_string_length(content);
		char *p = realloc(out, *n + 1);
		if (!p) {
			free(out);
			return NULL;
		}
		memcpy(p, json_string_value(content), *n + 1);
		return p;
	}
	json_array_foreach(content, i, part) {
		const char *s = NULL;
		size_t sn = 0;
		const char *type = fw_ing_str(part, "type");
		if (json_is_string(part)) {
			s = json_string_value(part);
			sn = json_string_length(part);
		} else if (type && (!strcmp(type, "refusal"))) {
			s = fw_ing_str(part, "refusal");
			sn = s ? strlen(s) : 0;
		} else if (type && (strstr(type, "image") || strstr(type, "audio") ||
				    !strcmp(type, "input_file") || !strcmp(type, "document"))) {
			s = "[image]";
			if (strstr(type, "audio"))
				s = "[audio]";
			else if (!strcmp(type, "input_file") || !strcmp(type, "document"))
				s = "[file]";
			sn = strlen(s);
		} else {
			json_t *t = json_object_get(part, "text");
			if (json_is_string(t)) {
				s = json_string_value(t);
				sn = json_string_length(t);
			}
		}
		if (!s)
			continue;
		if (len + sn + 2 > cap) {
			while (len + sn + 2 > cap)
				cap *= 2;
			char *p = realloc(out, cap);
			if (!p) {
				free(out);
				return NULL;
			}
			out = p;
		}
		if (len)
			out[len++] = '\n';
		memcpy(out + len, s, sn);
		len += sn;
		out[len] = 0;
	}
	*n = len;
	return out;
}

void fw_ing_set_created(json_t *traj, const json_t *v)
{
	char t[32];

	if (v && fw_ingest_time(v, t, sizeof t) == 0)
		json_object_set_new(traj, "created", json_string(t));
}

void fw_ing_set_usage(json_t *traj, const json_t *v, const char *in, const char *out)
{
	json_t *u = json_object_get(traj, "usage");
	json_t *a = json_object_get(v, in), *b = json_object_get(v, out);

	if (json_is_integer(a))
		json_object_set_new(u, "input_tokens", json_integer(json_integer_value(a)));
	if (json_is_integer(b))
		json_object_set_new(u, "output_tokens", json_integer(json_integer_value(b)));
}

void fw_ing_meta_merge(json_t *traj, const json_t *md)
{
	json_t *meta = json_object_get(traj, "meta");
	const char *k;
	json_t *v;

	if (!json_is_object(md))
		return;
	json_object_foreach((json_t *)md, k, v)
		if (!json_object_get(meta, k))
			json_object_set(meta, k, v);
}

void fw_ing_check_keys(json_t *traj, const json_t *o, const char *path,
		       const char *const *known)
{
	const char *k;
	json_t *v;

	if (!json_is_object(o))
		return;
	json_object_foreach((json_t *)o, k, v) {
		const char *const *p;
		for (p = known; *p && strcmp(*p, k); p++)
			;
		if (*p)
			continue;
		json_t *u = json_object_get(traj, "_unknown");
		if (!u) {
			u = json_array();
			if (!u || json_object_set_new(traj, "_unknown", u))
				return;
		}
		char name[160];
		snprintf(name, sizeof name, "%s%s%.100s", path, *path ? "." : "", k);
		size_t i;
		json_t *have;
		json_array_foreach(u, i, have)
			if (!strcmp(json_string_value(have), name))
				break;
		if (i == json_array_size(u))
			json_array_append_new(u, json_string(name));
	}
}

int fw_ing_turn_signature(json_t *turn, const json_t *sig)
{
	json_t *a = json_object_get(turn, "signatures");

	if (!json_is_string(sig) || !json_string_length(sig))
		return 0;
	if (!a) {
		a = json_array();
		if (!a || json_object_set_new(turn, "signatures", a))
			return -1;
	}
	return json_array_append(a, (json_t *)sig);
}
