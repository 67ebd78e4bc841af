/*
 * fw_policy.h — the builtin policy: a flywheel checkpoint (fw_model.h and
 * its tokenizer.json) decoding completions in process.
 *
 * A prompt is prefilled once into a key-value cache shared by K samples
 * (a GRPO group); each sample then draws from its own random stream, so
 * sample i of a prompt is the same whatever K is.  Every token drawn is
 * kept with its log-prob under the model (temperature 1, no truncation),
 * the number training recomputes.
 *
 * Threading: a struct fw_builtin is used by one thread at a time; load
 * one per worker.
 */
#ifndef FW_POLICY_H
#define FW_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "fw_model.h"
#include "fw_tok.h"

struct fw_builtin {
	struct fw_model *m;
	struct fw_tok *t;
	int32_t stop[4]; /* ids that end a completion (end of text, of turn) */
	int nstop;
};

/* Loads the checkpoint in dir (config.json, model.safetensors,
 * tokenizer.json), and packs its matrices for decoding (fw_model_pack: a
 * second copy of them on a CPU with AVX-512), so the caller must not
 * change the model's weights.  Returns a policy the caller frees with
 * fw_builtin_free(), or NULL with err naming the file at fault (or out
 * of memory). */
struct fw_builtin *fw_builtin_load(const char *dir, char *err, size_t errlen);

/* Frees b.  fw_builtin_free(NULL) does nothing. */
void fw_builtin_free(struct fw_builtin *b);

/* Where the text of a completion ends: called with the text decoded so far
 * (n bytes); returns the bytes to keep when the end is in it, else -1. */
typedef long (*fw_cut_fn)(void *ctx, const char *text, size_t n);

/* One sample's completion.  Release with fw_completion_release(). */
struct fw_completion {
	int32_t *tokens;   /* every id drawn, the stopping one included */
	float *logprobs;   /* the log-prob of each, natural log */
	int n;
	char *text;        /* the bytes of tokens (special tokens left out),
			    * NUL-terminated */
	size_t len;
	long keep;         /* bytes of text the cut keeps, or -1 */
	const char *stop;  /* "stop" (the cut ended it), "eos" (an end
			    * token), "max-tokens"; static */
	char *calls;       /* a chat reply's tool calls as a JSON array of
			    * {id, name, args} (args: JSON text), or NULL */
};

/* Frees what c holds and zeroes it.  NULL does nothing. */
void fw_completion_release(struct fw_completion *c);

/*
 * Encodes prompt (len bytes; special tokens are not matched, a BOS is put
 * first when the tokenizer has one) and decodes K completions of at most
 * max_tokens tokens, sample k drawing under *s from seed seeds[k] (K
 * entries, nonzero).  A prompt too long for the model keeps its last
 * tokens, so that prompt and completion fit max_position_embeddings.  A
 * completion ends at one of b's end tokens, when cut (may be NULL; ctx is
 * its argument) finds its end, or after max_tokens.  prompt_ids (may be
 * NULL) receives the prompt's ids as prefilled.  out has K entries,
 * overwritten.  Returns 0, or -1 with err filled (out then empty).
 */
int fw_builtin_complete(struct fw_builtin *b, const char *prompt, size_t len, int K,
			const uint64_t *seeds, const struct fw_sampler *s, int max_tokens,
			fw_cut_fn cut, void *ctx, struct fw_tok_ids *prompt_ids,
			struct fw_completion *out, char *err, size_t errlen);



/* As fw_builtin_complete(), from prompt ids (n > 0) as they are: no BOS is
 * added, and a prompt too long keeps its last ids. */
int fw_builtin_complete_ids(struct fw_builtin *b, const int32_t *ids, size_t n, int K,
			    const uint64_t *seeds, const struct fw_sampler *s, int max_tokens,
			    struct fw_tok_ids *prompt_ids, struct fw_completion *out, char *err,
			    size_t errlen);

/* ---- exec: an external agent program in the clean room ------------------- */

#include "fw_sandbox.h"
#include "fw_mp.h"
#include "fw_workspace.h"

struct fw_env;
struct fw_store;

/* What an exec episode runs and with what limits.  Pointers are borrowed. */
struct fw_exec_opts {
	const char *cmd;                 /* shell command line (sh -c) */
	const char *const *mounts;       /* extra read-only binds, NULL-terminated, or NULL */
	const char *const *allow;        /* hosts reachable through the proxy, or NULL */
	double timeout_s;                /* wall clock of the whole episode */
	size_t output_cap;               /* bytes kept of stdout and of stderr */
	const char *tmpdir;              /* where workspaces are made; NULL: $TMPDIR or /tmp */
	const struct fw_env *env;        /* the task's environment (fw_env.h), or NULL */
};

/* Bytes of $FW_TRAJ the host reads at most: a bigger file is not read. */
#define FW_TRAJ_MAX (16u << 20)

/* What an exec episode left.  Release with fw_exec_result_release(). */
struct fw_exec_result {
	char *patch;                   /* the workspace against the task tree */
	struct fw_strlist left_out;    /* "PATH: why" for each file the
					* patch leaves out (fw_workspace_diff()) */
	struct fw_buf turns;           /* msgpack array of the turns of the
					* trajectory written to $FW_TRAJ, empty
					* when none was written or it did not read */
	char traj_error[256];          /* why $FW_TRAJ did not read, or "" */
	struct fw_sandbox_result run;  /* exit, cause, output, events */
	const char *stop;              /* "exit" (status 0), "crash" (another
					* status or a signal), "timeout",
					* "cpu", "memory", "fsize", "procs";
					* static */
};

/* Frees what r holds and zeroes it.  NULL does nothing. */
void fw_exec_result_release(struct fw_exec_result *r);

/*
 * One episode of the agent o->cmd on tree tree_hex of store s: the tree is
 * made a fresh workspace (fw_workspace.h), the agent runs in the sandbox
 * (fw_sandbox.h) in it with prompt (plen bytes) on stdin and in the
 * environment FW_TASK (the task as JSON, task_json; empty when longer than
 * 100000 bytes), FW_TASK_FILE (a file holding it), FW_SEED, FW_SAMPLE and
 * FW_TRAJ (files inside the workspace's .git directory, so that they are
 * no part of the patch); the first word of cmd, when it names an existing
 * file, is bound read-only at its own path.  task_json is given to the
 * agent as is: the caller leaves in it only what a policy may see
 * (fw_task_for_policy()).  After the run the patch is the diff of the
 * workspace against the task tree (fw_workspace_diff(), what it leaves
 * out in r->left_out), and a trajectory the agent wrote to $FW_TRAJ (any
 * format fb-ingest reads; a regular file reached through no link, at most
 * FW_TRAJ_MAX bytes) gives the turns.
 * The workspace is removed.  Returns 0 and fills *r (whatever the agent
 * did), or -1 with a message in err when the episode could not be set up
 * (the tree missing from the store, no sandbox).
 */
int fw_exec_episode(const struct fw_exec_opts *o, struct fw_store *s, const char *tree_hex,
		    const char *prompt, size_t plen, const char *task_json, uint64_t seed,
		    int sample, struct fw_exec_result *r, char *err, size_t errlen);

/* ---- agent: a model policy in a multi-turn shell episode ---------------- */

struct fw_http;
struct fw_toolset;

/* Limits and settings of an agent episode.  Pointers are borrowed. */
struct fw_agent_opts {
	struct fw_sampler s;
	int max_steps;             /* commands run at most */
	int max_tokens;            /* policy tokens at most, all turns together */
	double timeout_s;          /* wall clock of the whole episode */
	double step_timeout_s;     /* wall clock of one command (also capped by
				    * what is left of timeout_s) */
	size_t obs_head, obs_tail; /* bytes of a command's output kept from its
				    * start and from its end */
	struct fw_http *http;      /* with b NULL: the policy is this server
				    * (chat completions, the whole chat each
				    * turn, tool output sent as user turns) */
	const char *const *mounts; /* as fw_exec_opts */
	const char *const *allow;
	const char *tmpdir;
	const struct fw_env *env;  /* as fw_exec_opts */
	int tools;                 /* the policy calls tools (fw_agent_tools.h)
				    * instead of writing bash blocks */
	const struct fw_toolset *toolset; /* with tools: the builtin ones and
					   * those a file defines; NULL: the
					   * builtin ones */
};

/* What an agent episode left.  Release with fw_agent_result_release(). */
struct fw_agent_result {
	struct fw_buf turns;  /* msgpack array: system, user, then assistant
			       * turns {role, text, tokens, logprobs} and tool
			       * turns {role, text, exit} */
	struct fw_buf events; /* msgpack array of {kind, detail, at} */
	char *patch;
	int steps;            /* commands run */
	const char *stop;     /* "submit", "no-action" (a reply without a
			       * bash block), "max-steps", "max-tokens",
			       * "timeout", "context" (the model's context is
			       * full); static */
};

/* Frees what r holds and zeroes it.  NULL does nothing. */
void fw_agent_result_release(struct fw_agent_result *r);

/* The system prompt of agent episodes: the protocol the policy follows. */
extern const char fw_agent_system[];

/*
 * One agent episode of policy b (or, b NULL, the server o->http) on tree
 * tree_hex of store s, drawing from seed: the tree becomes a fresh workspace; the chat (b's template) holds
 * fw_agent_system and prompt (plen bytes); each reply's first fenced
 * ```bash (or ```sh) block is run in the sandbox in the workspace and its
 * exit status and output (head and tail) come back as a tool turn, decoded
 * on from the same key-value cache; the episode ends on a block that is
 * just `submit`, a reply without a block, or a limit of o.  The patch is
 * the workspace against the task tree (fw_workspace_diff()), and each file
 * it leaves out is a "left-out" event.  Returns 0 and fills *r, or -1
 * with a message in err when the episode could not be set up or the model
 * failed.
 */
int fw_agent_episode(struct fw_builtin *b, const struct fw_agent_opts *o, struct fw_store *s,
		     const char *tree_hex, const char *prompt, size_t plen, uint64_t seed,
		     struct fw_agent_result *r, char *err, size_t errlen);

/*
 * K episodes of b on the same task, sample k drawing from seeds[k], that
 * share one key-value cache: the chat's prefix (system and problem
 * statement) is prefilled once for all, then each sample goes on in its
 * own sequence, one after the other.  r has K entries.  Returns 0 when
 * every episode ran, or -1 with err (r then empty).  The cache holds K
 * sequences of the model's whole context.
 */
int fw_agent_group(struct fw_builtin *b, const struct fw_agent_opts *o, struct fw_store *s,
		   const char *tree_hex, const char *prompt, size_t plen, int K,
		   const uint64_t *seeds, struct fw_agent_result *r, char *err, size_t errlen);

/* ---- http: an OpenAI-compatible server ------------------------------------ */

struct fw_http;

/*
 * A client of the OpenAI-compatible server at base (e.g.
 * "http://127.0.0.1:8000/v1"; requests go to BASE/completions).  model
 * (may be NULL: the server's default) is sent as "model"; the API key, when
 * key_env names a set environment variable, as a Bearer token.  Each
 * request may take timeout_s seconds; a refused connection, a timeout, 429
 * and 5xx answers (but 501) are retried retries times with doubling waits
 * from 0.25 s.  Returns a client (fw_http_free), or NULL with err filled.
 * A client is used by one thread at a time.
 *
 * The server's context (in tokens) is the max_model_len of the model's
 * entry in BASE/models, as vLLM and serve(1) report it, asked at the first
 * request; prompts are counted with the server's own tokenizer through
 * /tokenize at the server's root (BASE without its final /v1), as vLLM and
 * serve(1) answer it.  A server that reports neither gets every prompt as
 * it is, and its own answer decides.
 */
struct fw_http *fw_http_new(const char *base, const char *model, const char *key_env,
			    double timeout_s, int retries, char *err, size_t errlen);

/* Sets the server's context to n tokens, for a server that does not report
 * it (n <= 0: unknown, prompts go as they are).  Cannot fail. */
void fw_http_set_context(struct fw_http *h, long n);

/* Frees h.  fw_http_free(NULL) does nothing. */
void fw_http_free(struct fw_http *h);

/*
 * One completion of prompt (len bytes) by the server: max_tokens tokens
 * under *s from seed (sent as "seed", the 64 bits as a signed integer),
 * with log-probs.  out->text is the
 * completion; out->tokens are the ids when the server gives them
 * ("token_ids", as serve(1) does), else none; out->logprobs one per token
 * (or per text token the server lists); out->stop "eos" when the server
 * says "stop", else "max-tokens"; out->keep -1.  The prompt is fitted to the
 * server's context as fw_builtin_complete() fits its own: max_tokens at
 * most half the context, and a prompt too long keeps its last tokens after
 * the BOS (sent as token ids), so both policies see the same prompt.
 * Returns 0, or -1 with err
 * saying what went wrong (server down, HTTP status and message, an answer
 * that is not a completion).
 */
int fw_http_complete(struct fw_http *h, const char *prompt, size_t len, uint64_t seed,
		     const struct fw_sampler *s, int max_tokens, struct fw_completion *out,
		     char *err, size_t errlen);


/*
 * One chat completion: the n messages roles[i] / texts[i] (lens[i] bytes,
 * valid UTF-8) to BASE/chat/completions, otherwise as fw_http_complete(),
 * except that a chat is never cut: max_tokens is at most what the context
 * leaves after it, and a chat that fills the context is an error ("the
 * chat's N tokens fill the server's context of W").
 */
/*
 * As fw_http_chat, with the messages given as a JSON array in the API's
 * shape (msgs, taken: assistant messages may hold tool_calls, tool
 * messages a tool_call_id) and tools_json (a JSON array of tools, or
 * NULL) sent as "tools"; the reply's tool calls come back in out->calls,
 * and a reply that ends in calls ends as "eos".
 */
int fw_http_chat_msgs(struct fw_http *h, void *msgs, const char *tools_json, uint64_t seed,
		      const struct fw_sampler *s, int max_tokens, struct fw_completion *out,
		      char *err, size_t errlen);

int fw_http_chat(struct fw_http *h, const char *const *roles, const char *const *texts,
		 const size_t *lens, size_t n, uint64_t seed, const struct fw_sampler *s,
		 int max_tokens, struct fw_completion *out, char *err, size_t errlen);

#endif
