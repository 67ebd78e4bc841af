/*
 * fw_policy_agent.c — agent episodes of the builtin policy: a chat in which
 * the model's fenced bash blocks run in the clean room.  See fw_policy.h.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fw_env.h"
#include <jansson.h>

#include "fw_agent_tools.h"
#include "fw_mp.h"
#include "fw_policy.h"
#include "fw_toolcall.h"
#include "fw_rollout.h"
#include "fw_store.h"
#include "fw_workspace.h"

const char fw_agent_system[] =
	"You are working in a git repository, the current directory.  Reply with one "
	"fenced ```bash block; it is run and its exit status and output come back.  "
	"When the task is done, reply with:\n```bash\nsubmit\n```";

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void fw_agent_result_release(struct fw_agent_result *r)
{
	if (!r)
		return;
	fw_buf_free(&r->turns);
	fw_buf_free(&r->events);
	free(r->patch);
	memset(r, 0, sizeof *r);
}

/* A turn of the chat as the episode keeps it. */
struct turn {
	const char *role;
	char *text;
	size_t len;
	int32_t *tok;
	float *lp;
	size_t nt;
	int exit;
	char *calls;   /* assistant, with tools: JSON array of {id, name, args} */
	char *call_id; /* tool, with tools: the call it answers */
	int is_error;
};

static void pack_s(msgpack_packer *pk, const char *s, size_t n)
{
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

/* Packs s as record text: what is not UTF-8 becomes U+FFFD. */
static void pack_text(msgpack_packer *pk, const char *s)
{
	size_t n;
	char *f = fw_utf8_fix(s, strlen(s), &n);

	pack_s(pk, f ? f : "", f ? n : 0);
	free(f);
}

/* The first ```bash or ```sh block of text: *cmd and *n, or 0 when none. */
static int find_block(const char *text, size_t len, const char **cmd, size_t *n)
{
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *f = memmem(p, (size_t)(end - p), "```", 3);
		if (!f)
			return 0;
		const char *q = f + 3, *nl = memchr(q, '\n', (size_t)(end - q));
		if (!nl)
			return 0;
		size_t tl = (size_t)(nl - q);
		if ((tl == 4 && !memcmp(q, "bash", 4)) || (tl == 2 && !memcmp(q, "sh", 2))) {
			const char *b = nl + 1, *e = memmem(b, (size_t)(end - b), "```", 3);
			if (!e)
				e = end; /* an unclosed block runs to the end of the reply */
			*cmd = b;
			*n = (size_t)(e - b);
			return 1;
		}
		p = nl + 1;
	}
	return 0;
}

static int is_submit(const char *c, size_t n)
{
	while (n && (*c == ' ' || *c == '\t' || *c == '\n'))
		c++, n--;
	while (n && (c[n - 1] == ' ' || c[n - 1] == '\t' || c[n - 1] == '\n'))
		n--;
	return n == 6 && !memcmp(c, "submit", 6);
}

static int add_turn(struct turn **v, size_t *n, size_t *cap, const char *role, const char *text,
		    size_t len)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct turn *t = realloc(*v, nc * sizeof *t);
		if (!t)
			return -1;
		*v = t;
		*cap = nc;
	}
	struct turn *t = &(*v)[*n];
	memset(t, 0, sizeof *t);
	t->role = role;
	if (!(t->text = malloc(len + 1)))
		return -1;
	memcpy(t->text, text, len);
	t->text[len] = '\0';
	t->len = len;
	(*n)++;
	return 0;
}

/*
 * Runs argv in the workspace ws under o's clean room for at most left
 * seconds (stdin from stdin_path, or none) and appends its events to pk.
 * The observation (how it stopped, its exit status, the head and tail of
 * its output) goes to *obs (malloc'd, UTF-8), its exit status to *exitc
 * and 1 to *failed when it did not end with status 0; with plain, the
 * observation of a command that ended with status 0 is its stdout alone
 * (a defined tool's result).  Returns 0, or -1 with err filled.
 */
static int run_obs(const struct fw_agent_opts *o, const char *ws, char *const *argv,
		   const char *stdin_path, int plain, double left, double t0, msgpack_packer *pk, int *nev,
		   char **obs_out, size_t *obs_len, int *exitc, int *failed, char *err, size_t errlen)
{
	struct fw_sandbox_opts so;
	struct fw_sandbox_result res;

	fw_sandbox_opts_init(&so);
	so.workspace = ws;
	so.ro_binds = o->mounts;
	so.allow = o->allow;
	so.stdin_path = stdin_path;
	so.timeout_s = o->step_timeout_s > 0 && o->step_timeout_s < left ? o->step_timeout_s : left;
	so.procs = 256;
	const char *eb[66], *evars[1 + FW_ENV_MAXVARS];
	if (fw_env_apply(o->env, &so, eb, 66, evars, 1 + FW_ENV_MAXVARS)) {
		snprintf(err, errlen, "too many mounts");
		return -1;
	}
	if (fw_sandbox_run(&so, argv, &res, err, errlen))
		return -1;
	for (size_t i = 0; i < res.nevents; i++) {
		msgpack_pack_map(pk, 3);
		pack_s(pk, "kind", 4);
		pack_s(pk, res.events[i].kind, strlen(res.events[i].kind));
		pack_s(pk, "detail", 6);
		/* a detail may quote what the command sent */
		pack_text(pk, res.events[i].detail ? res.events[i].detail : "");
		pack_s(pk, "at", 2);
		msgpack_pack_double(pk, now() - t0);
		(*nev)++;
	}
	struct fw_buf obs = { 0 };
	size_t on, en, fl;
	char *oh = fw_head_tail(res.out.data ? res.out.data : "", res.out.len, o->obs_head,
				o->obs_tail, &on);
	char *eh = fw_head_tail(res.err.data ? res.err.data : "", res.err.len, o->obs_head,
				o->obs_tail, &en);
	int bad = !oh || !eh;
	*failed = res.cause != FW_SANDBOX_OK || res.exit_code != 0;
	if (plain && !*failed) {
		en = 0;
		goto body;
	}
	if (res.cause != FW_SANDBOX_OK)
		bad |= fw_buf_printf(&obs, "stopped: %s\n", fw_sandbox_cause_name(res.cause));
	bad |= fw_buf_printf(&obs, "exit: %d\n", res.exit_code);
body:
	if (!bad && on)
		bad |= fw_buf_append(&obs, oh, on);
	if (!bad && en)
		bad |= fw_buf_printf(&obs, "%sstderr:\n", on && oh[on - 1] != '\n' ? "\n" : "") ||
		       fw_buf_append(&obs, eh, en);
	*exitc = res.exit_code;
	free(oh);
	free(eh);
	fw_sandbox_result_free(&res);
	*obs_out = bad ? NULL : fw_utf8_fix((const char *)obs.p, obs.n, &fl);
	*obs_len = fl;
	fw_buf_free(&obs);
	if (!*obs_out) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* The chat so far as the API's messages: assistant turns with their
 * tool_calls, tool turns with the id of the call they answer. */
static json_t *api_messages(const struct turn *tv, size_t nt)
{
	json_t *msgs = json_array();

	for (size_t i = 0; msgs && i < nt; i++) {
		const struct turn *t = &tv[i];
		json_t *m = json_pack("{s:s,s:s%}", "role", t->role, "content", t->text, t->len);
		if (m && t->calls) {
			json_error_t je;
			json_t *cs = json_loads(t->calls, 0, &je), *c, *tcs = json_array();
			size_t k;
			json_array_foreach(cs, k, c)
			{
				json_array_append_new(tcs, json_pack("{s:O,s:s,s:{s:O,s:O}}", "id",
								     json_object_get(c, "id"), "type",
								     "function", "function", "name",
								     json_object_get(c, "name"), "arguments",
								     json_object_get(c, "args")));
			}
			json_decref(cs);
			json_object_set_new(m, "tool_calls", tcs);
		}
		if (m && t->call_id)
			json_object_set_new(m, "tool_call_id", json_string(t->call_id));
		if (!m || json_array_append_new(msgs, m)) {
			json_decref(msgs);
			msgs = NULL;
		}
	}
	return msgs;
}

/* The calls a builtin policy wrote under tmpl, as the JSON array of
 * {id, name, args} with ids "call_TURN_K"; NULL when there are none or
 * memory runs out (*oom set). */
static char *parse_calls(int tmpl, const char *text, size_t len, size_t turn, int *oom)
{
	struct fw_toolcalls tc = { 0 };
	char *out = NULL;
	int n = fw_toolcall_parse((enum fw_chat_template)tmpl, text, len, &tc);

	*oom = n < 0;
	if (n > 0) {
		json_t *a = json_array();
		for (size_t k = 0; a && k < tc.n; k++) {
			char id[48];
			snprintf(id, sizeof id, "call_%zu_%zu", turn, k);
			json_array_append_new(a, json_pack("{s:s,s:s,s:s}", "id", id, "name",
							   tc.v[k].name, "args", tc.v[k].args));
		}
		out = a ? json_dumps(a, JSON_COMPACT) : NULL;
		json_decref(a);
		*oom = !out;
	}
	fw_toolcalls_release(&tc);
	return out;
}

/* Packs the JSON array of calls as [{id, name, args}]. */
static void pack_calls(msgpack_packer *pk, const char *calls)
{
	json_error_t je;
	json_t *a = json_loads(calls, 0, &je), *c;
	size_t k;

	msgpack_pack_array(pk, json_array_size(a));
	json_array_foreach(a, k, c)
	{
		msgpack_pack_map(pk, 3);
		pack_s(pk, "id", 2);
		pack_text(pk, json_string_value(json_object_get(c, "id")) ?: "");
		pack_s(pk, "name", 4);
		pack_text(pk, json_string_value(json_object_get(c, "name")) ?: "");
		pack_s(pk, "args", 4);
		pack_text(pk, json_string_value(json_object_get(c, "args")) ?: "{}");
	}
	json_decref(a);
}

/* One episode; with shared, sequence seq of that decoding state, whose
 * prefix (the first render, the same for every sample) sample 0 has
 * prefilled for all. */
static int episode(struct fw_builtin *b, const struct fw_agent_opts *o, struct fw_store *s,
		   const char *tree_hex, const char *prompt, size_t plen, uint64_t seed,
		   struct fw_gen *shared, int seq, struct fw_agent_result *r, char *err,
		   size_t errlen)
{
	const char *tmp = o->tmpdir ? o->tmpdir : getenv("TMPDIR");
	char top[PATH_MAX], ws[PATH_MAX + 8], host[PATH_MAX + 8];
	struct fw_strlist unread = { 0 };
	struct turn *tv = NULL;
	size_t nt = 0, cap = 0;
	struct fw_chat_turn *ct = NULL;
	struct fw_tok_ids ids = { 0 };
	struct fw_gen *g = NULL;
	float *scratch = NULL;
	int rc = -1, V = b ? b->m->cfg.vocab : 0, maxT = b ? b->m->cfg.max_pos : 0, used = 0;
	int tmpl = b ? fw_chat_detect(b->t) : 0;
	uint64_t rng = seed ? seed : 1;
	struct fw_tok_ids fed = { 0 }; /* the ids in the cache */
	double t0 = now();
	msgpack_packer pk;
	int nev = 0;
	struct fw_buf ev = { 0 };

	memset(r, 0, sizeof *r);
	if (tmpl < 0) {
		snprintf(err, errlen, "the tokenizer has no chat template tokens");
		return -1;
	}
	snprintf(top, sizeof top, "%s/fw-agent-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(top)) {
		snprintf(err, errlen, "%s: %s", top, strerror(errno));
		return -1;
	}
	snprintf(ws, sizeof ws, "%s/ws", top);
	snprintf(host, sizeof host, "%s/host", top);
	if (fw_workspace_create(s, tree_hex, ws, NULL, NULL, err, errlen))
		goto out;
	if (!b && !o->http) {
		snprintf(err, errlen, "no policy");
		goto out;
	}
	if (shared)
		g = shared;
	else if (b && !(g = fw_gen_new(b->m, 1, maxT, err, errlen)))
		goto out;
	if (b && !(scratch = malloc(sizeof(float) * 2 * (size_t)V)))
		goto oom;
	const char *sys = o->tools ? fw_agent_system_tools : fw_agent_system;
	if (add_turn(&tv, &nt, &cap, "system", sys, strlen(sys)) ||
	    add_turn(&tv, &nt, &cap, "user", prompt, plen))
		goto oom;
	fw_buf_packer(&pk, &ev);
	for (;;) {
		int ended = 0;
		if (!b) {
			struct fw_completion c;
			uint64_t sd = fw_rollout_seed(seed, "", 0, (int)nt);
			int hr;
			if (o->tools) {
				/* a server that calls tools: the whole chat each
				 * time, in the API's shape, and the tools declared */
				json_t *msgs = api_messages(tv, nt);
				if (!msgs) {
					snprintf(err, errlen, "a message is not valid UTF-8");
					goto out;
				}
				hr = fw_http_chat_msgs(o->http, msgs, fw_toolset_json(o->toolset), sd, &o->s,
						       o->max_tokens - used, &c, err, errlen);
			} else {
				/* a server: the whole chat each time, tool output
				 * as user turns (what OpenAI-compatible servers
				 * take) */
				const char **roles = calloc(nt, sizeof *roles),
					   **texts = calloc(nt, sizeof *texts);
				size_t *lens = calloc(nt, sizeof *lens);
				if (!roles || !texts || !lens) {
					free(roles);
					free(texts);
					free(lens);
					goto oom;
				}
				for (size_t i = 0; i < nt; i++) {
					roles[i] = strcmp(tv[i].role, "tool") ? tv[i].role : "user";
					texts[i] = tv[i].text;
					lens[i] = tv[i].len;
				}
				hr = fw_http_chat(o->http, roles, texts, lens, nt, sd, &o->s,
						  o->max_tokens - used, &c, err, errlen);
				free(roles);
				free(texts);
				free(lens);
			}
			if (hr)
				goto out;
			ended = !strcmp(c.stop, "eos");
			used += c.n ? c.n : 1;
			if (add_turn(&tv, &nt, &cap, "assistant", c.text, c.len)) {
				fw_completion_release(&c);
				goto oom;
			}
			/* the reply's calls (NULL without tools) */
			tv[nt - 1].calls = c.calls;
			c.calls = NULL;
			tv[nt - 1].tok = c.tokens;
			tv[nt - 1].lp = c.logprobs;
			tv[nt - 1].nt = c.tokens ? (size_t)c.n : 0;
			if (!c.tokens) {
				free(c.logprobs);
				tv[nt - 1].lp = NULL;
			}
			free(c.text);
			goto reply;
		}
		/* render the chat so far and feed what the cache lacks */
		free(ct);
		if (!(ct = calloc(nt, sizeof *ct)))
			goto oom;
		for (size_t i = 0; i < nt; i++) {
			ct[i].role = tv[i].role;
			ct[i].text = tv[i].text;
			ct[i].len = tv[i].len;
			ct[i].tokens = tv[i].tok;
			ct[i].ntokens = tv[i].nt;
		}
		ids.n = 0;
		if (o->tools ? fw_tools_render(b->t, (enum fw_chat_template)tmpl,
					       fw_toolset_json(o->toolset),
					       strlen(fw_toolset_json(o->toolset)), ct, nt, &ids, err,
					       errlen)
			     : fw_chat_render(b->t, (enum fw_chat_template)tmpl, ct, nt, 1, &ids, err,
					      errlen))
			goto out;
		if (ids.n >= (size_t)maxT) {
			r->stop = "context";
			break;
		}
		/* the render keeps what the cache holds, unless a template
		 * re-tokenizes across a boundary: then start the cache over */
		size_t same = 0;
		while (same < fed.n && same < ids.n && fed.ids[same] == ids.ids[same])
			same++;
		if (fed.n == 0 && shared && seq > 0) {
			/* sample 0 prefilled this prefix into every sequence */
		} else if (same < fed.n && shared) {
			/* starting over would reset the other samples */
			snprintf(err, errlen, "the chat template changed the tokens of earlier turns");
			goto out;
		} else if (same < fed.n || fed.n == 0) {
			if (fw_gen_prefill(g, ids.ids, (int)ids.n, err, errlen))
				goto out;
		} else if (ids.n > fed.n &&
			   fw_gen_append(g, seq, ids.ids + fed.n, (int)(ids.n - fed.n), err, errlen)) {
			goto out;
		}
		fed.n = 0;
		for (size_t i = 0; i < ids.n; i++)
			if (fw_tok_ids_push(&fed, ids.ids[i], 0))
				goto oom;
		size_t consumed = fed.n;
		/* one reply */
		struct fw_buf txt = { 0 };
		int32_t *tok = malloc(sizeof(int32_t) * (size_t)maxT);
		float *lp = malloc(sizeof(float) * (size_t)maxT);
		size_t n = 0;
		if (!tok || !lp) {
			free(tok);
			free(lp);
			goto oom;
		}
		while (!ended && used < o->max_tokens && consumed + n < (size_t)maxT) {
			int32_t id = fw_sample(fw_gen_logits(g) + (size_t)seq * V, V, &o->s, &rng,
					       scratch, &lp[n]);
			tok[n++] = id;
			used++;
			int stop = 0;
			for (int k = 0; k < b->nstop; k++)
				stop |= b->stop[k] == id;
			if (stop) {
				ended = 1;
				break;
			}
			if (!fw_tok_is_special(b->t, id)) {
				size_t pn;
				const char *pc = fw_tok_piece(b->t, id, &pn);
				if (pc && fw_buf_append(&txt, pc, pn)) {
					fw_buf_free(&txt);
					free(tok);
					free(lp);
					goto oom;
				}
			}
			if (consumed + n < (size_t)maxT && used < o->max_tokens &&
			    (fw_tok_ids_push(&fed, id, 0) ||
			     fw_gen_append(g, seq, &id, 1, err, errlen))) {
				fw_buf_free(&txt);
				free(tok);
				free(lp);
				goto out;
			}
		}
		size_t fl;
		char *fixed = fw_utf8_fix(txt.p ? (const char *)txt.p : "", txt.n, &fl);
		fw_buf_free(&txt);
		if (!fixed || add_turn(&tv, &nt, &cap, "assistant", fixed, fl)) {
			free(fixed);
			free(tok);
			free(lp);
			goto oom;
		}
		free(fixed);
		tv[nt - 1].tok = tok;
		tv[nt - 1].lp = lp;
		tv[nt - 1].nt = n;
		if (o->tools) {
			int oom;
			tv[nt - 1].calls = parse_calls(tmpl, tv[nt - 1].text, tv[nt - 1].len, nt - 1, &oom);
			if (oom)
				goto oom;
		}
reply:;
		const char *cmd;
		size_t cn;
		if (!ended && used >= o->max_tokens) {
			r->stop = "max-tokens";
			break;
		}
		if (!ended) {
			r->stop = "context";
			break;
		}
		if (o->tools) {
			/* each call of the reply in order, each answered by a
			 * tool turn; a reply without calls ends the episode */
			json_error_t je;
			json_t *cs = tv[nt - 1].calls ? json_loads(tv[nt - 1].calls, 0, &je) : NULL, *c;
			size_t k, ncalls = json_array_size(cs);
			const char *why = ncalls ? NULL : "no-action";
			for (k = 0; k < ncalls && !why; k++) {
				c = json_array_get(cs, k);
				const char *cname = json_string_value(json_object_get(c, "name")),
					   *cargs = json_string_value(json_object_get(c, "args")),
					   *cid = json_string_value(json_object_get(c, "id"));
				struct fw_tool_cmd tc;
				double left = o->timeout_s - (now() - t0);
				char *obs = NULL;
				size_t ol = 0;
				int exitc = -1, failed = 1;
				if (fw_tool_cmd(o->toolset, cname ? cname : "", cargs, top, &tc, err,
						errlen)) {
					json_decref(cs);
					goto out;
				}
				if (tc.submit) {
					why = "submit";
				} else if (r->steps >= o->max_steps) {
					why = "max-steps";
				} else if (left <= 0) {
					why = "timeout";
				} else if (tc.error) {
					r->steps++;
					obs = strdup(tc.error);
					ol = obs ? strlen(obs) : 0;
				} else {
					if (run_obs(o, ws, tc.argv, tc.stdin_path, tc.program, left, t0, &pk, &nev, &obs,
						    &ol, &exitc, &failed, err, errlen)) {
						fw_tool_cmd_release(&tc);
						json_decref(cs);
						goto out;
					}
					r->steps++;
				}
				fw_tool_cmd_release(&tc);
				if (why)
					break;
				if (!obs || add_turn(&tv, &nt, &cap, "tool", obs, ol)) {
					free(obs);
					json_decref(cs);
					goto oom;
				}
				free(obs);
				tv[nt - 1].exit = exitc;
				tv[nt - 1].is_error = failed;
				if (!(tv[nt - 1].call_id = strdup(cid ? cid : ""))) {
					json_decref(cs);
					goto oom;
				}
			}
			json_decref(cs);
			if (!why && now() - t0 >= o->timeout_s)
				why = "timeout";
			if (why) {
				r->stop = why;
				break;
			}
			continue;
		}
		if (!find_block(tv[nt - 1].text, tv[nt - 1].len, &cmd, &cn)) {
			r->stop = "no-action";
			break;
		}
		if (is_submit(cmd, cn)) {
			r->stop = "submit";
			break;
		}
		if (r->steps >= o->max_steps) {
			r->stop = "max-steps";
			break;
		}
		double left = o->timeout_s - (now() - t0);
		if (left <= 0) {
			r->stop = "timeout";
			break;
		}
		/* run the block */
		char *script = strndup(cmd, cn), *obs = NULL;
		char *argv[] = { "bash", "-c", script, NULL };
		size_t ol;
		int exitc, failed;
		if (!script)
			goto oom;
		int ran = run_obs(o, ws, argv, NULL, 0, left, t0, &pk, &nev, &obs, &ol, &exitc, &failed,
				  err, errlen);
		free(script);
		if (ran)
			goto out;
		r->steps++;
		if (add_turn(&tv, &nt, &cap, "tool", obs, ol)) {
			free(obs);
			goto oom;
		}
		free(obs);
		tv[nt - 1].exit = exitc;
		if (now() - t0 >= o->timeout_s) {
			r->stop = "timeout";
			break;
		}
	}
	if (fw_workspace_diff(s, tree_hex, ws, host, &r->patch, &unread, err, errlen))
		goto out;
	for (size_t i = 0; i < unread.n; i++) {
		msgpack_pack_map(&pk, 3);
		pack_s(&pk, "kind", 4);
		pack_s(&pk, "left-out", 8);
		pack_s(&pk, "detail", 6);
		pack_text(&pk, unread.v[i]);
		pack_s(&pk, "at", 2);
		msgpack_pack_double(&pk, now() - t0);
		nev++;
	}
	fw_buf_packer(&pk, &r->turns);
	msgpack_pack_array(&pk, nt);
	for (size_t i = 0; i < nt; i++) {
		struct turn *t = &tv[i];
		/* a server that gives no ids leaves a reply without tokens */
		int asst = !strcmp(t->role, "assistant") && t->tok, tool = !strcmp(t->role, "tool");
		int calls = t->calls != NULL, answer = tool && t->call_id;
		msgpack_pack_map(&pk, 2 + 2 * asst + tool + calls + 2 * answer);
		pack_s(&pk, "role", 4);
		pack_s(&pk, t->role, strlen(t->role));
		pack_s(&pk, "text", 4);
		pack_s(&pk, t->text, t->len);
		if (asst) {
			pack_s(&pk, "tokens", 6);
			msgpack_pack_array(&pk, t->nt);
			for (size_t k = 0; k < t->nt; k++)
				msgpack_pack_int32(&pk, t->tok[k]);
			pack_s(&pk, "logprobs", 8);
			msgpack_pack_array(&pk, t->nt);
			for (size_t k = 0; k < t->nt; k++)
				msgpack_pack_float(&pk, t->lp[k]);
		}
		if (tool) {
			pack_s(&pk, "exit", 4);
			msgpack_pack_int(&pk, t->exit);
		}
		if (calls) {
			pack_s(&pk, "calls", 5);
			pack_calls(&pk, t->calls);
		}
		if (answer) {
			pack_s(&pk, "call_id", 7);
			pack_text(&pk, t->call_id);
			pack_s(&pk, "is_error", 8);
			t->is_error ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
		}
	}
	fw_buf_packer(&pk, &r->events);
	msgpack_pack_array(&pk, (size_t)nev);
	if (ev.failed)
		r->events.failed = 1;
	fw_buf_append(&r->events, ev.p, ev.n);
	/* memory ran out somewhere in the packing: no record with a hole */
	if (r->turns.failed || r->events.failed)
		goto oom;
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
out:
	for (size_t i = 0; i < nt; i++) {
		free(tv[i].text);
		free(tv[i].tok);
		free(tv[i].lp);
		free(tv[i].calls);
		free(tv[i].call_id);
	}
	free(tv);
	free(ct);
	free(scratch);
	fw_buf_free(&ev);
	fw_strlist_release(&unread);
	fw_tok_ids_release(&ids);
	fw_tok_ids_release(&fed);
	if (!shared)
		fw_gen_free(g);
	if (rc)
		fw_agent_result_release(r);
	fw_rmtree(top);
	return rc;
}

int fw_agent_episode(struct fw_builtin *b, const struct fw_agent_opts *o, struct fw_store *s,
		     const char *tree_hex, const char *prompt, size_t plen, uint64_t seed,
		     struct fw_agent_result *r, char *err, size_t errlen)
{
	return episode(b, o, s, tree_hex, prompt, plen, seed, NULL, 0, r, err, errlen);
}

int fw_agent_group(struct fw_builtin *b, const struct fw_agent_opts *o, struct fw_store *s,
		   const char *tree_hex, const char *prompt, size_t plen, int K,
		   const uint64_t *seeds, struct fw_agent_result *r, char *err, size_t errlen)
{
	struct fw_gen *g = fw_gen_new(b->m, K, b->m->cfg.max_pos, err, errlen);
	int rc = 0;

	memset(r, 0, sizeof(*r) * (size_t)K);
	if (!g)
		return -1;
	for (int k = 0; k < K && !rc; k++)
		rc = episode(b, o, s, tree_hex, prompt, plen, seeds[k], g, k, &r[k], err, errlen);
	if (rc)
		for (int k = 0; k < K; k++)
			fw_agent_result_release(&r[k]);
	fw_gen_free(g);
	return rc;
}
