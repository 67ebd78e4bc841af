/*
 * fw_ingest.h — product logs and feedback events to `traj` records.
 *
 * Format detection, one converter per log format (each builds the common
 * traj record of flywheel-records(5) as a jansson object), reading a whole
 * log file into trajectories, content ids, redaction of a record's text,
 * and the feedback table that joins ratings to trajectories.  fb-ingest(1)
 * is the loop around these.
 *
 * A traj built here looks like
 *
 *   {kind: "traj", v: 1, id, source, model, created?,
 *    turns: [{role, text, thinking?, signatures?, calls?: [{id, name, args}],
 *             call_id?, is_error?}],
 *    usage: {input_tokens, output_tokens}, feedback: [], tags: [],
 *    meta: {source_id, file, line, ...}}
 *
 * role is system, user, assistant or tool; tool turns carry call_id and
 * is_error; args is JSON text (compact when the source gave valid JSON);
 * signatures holds the signature of each signed thinking block, in order;
 * created and feedback `at` are RFC 3339 UTC ("2026-11-02T08:00:00Z") and
 * are left out when the log does not say.
 */
#ifndef FW_INGEST_H
#define FW_INGEST_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "fw_redact.h"

enum fw_fmt {
	FW_FMT_UNKNOWN = 0,
	FW_FMT_OPENAI_CHAT,      /* Chat Completions: messages, tool_calls */
	FW_FMT_OPENAI_RESPONSES, /* Responses: input/output items */
	FW_FMT_ANTHROPIC,        /* Messages API: content blocks */
	FW_FMT_CLAUDE_CODE,      /* session JSONL: uuid/parentUuid events */
	FW_FMT_SHAREGPT,         /* conversations: from/value */
	FW_FMT_SWE_AGENT,        /* .traj: history, trajectory, info */
	FW_FMT_MINI_SWE_AGENT,   /* .traj.json: messages (+ info), or a bare list */
	FW_FMT_OPENHANDS,        /* event stream: action/observation events */
	FW_FMT_CODEX,            /* Codex CLI rollout: {timestamp, type, payload} */
	FW_FMT_OTEL,             /* OTLP JSON traces with GenAI spans */
	FW_FMT_FLYWHEEL,         /* msgpack traj records (zstd or not) */
	FW_FMT_N
};

/* Name of a format ("openai-chat", "openai-responses", "anthropic",
 * "claude-code", "sharegpt", "swe-agent", "mini-swe-agent", "openhands",
 * "codex", "otel", "flywheel"; "unknown").  Cannot fail. */
const char *fw_fmt_name(enum fw_fmt f);

/* The format called name, or FW_FMT_UNKNOWN. */
enum fw_fmt fw_fmt_from_name(const char *name);

/*
 * Detects the format of a file from its first n bytes at p (a few kB are
 * enough; a cut final line is fine).  Msgpack maps and the zstd magic are
 * flywheel; otherwise the first JSON value that parses (a line, or the whole
 * prefix for a pretty-printed document) is classified by its keys.  Returns
 * the format, or FW_FMT_UNKNOWN with what was seen in why (for "unknown
 * format: WHY").  Never reads past p[n-1]; cannot fail otherwise.
 */
enum fw_fmt fw_ingest_detect(const void *p, size_t n, char *why, size_t whylen);

/* Classifies one parsed log document by its keys; FW_FMT_UNKNOWN when no
 * format fits.  Cannot fail. */
enum fw_fmt fw_ingest_detect_json(const json_t *doc);

/*
 * Converts one log document of format f to a traj object without id:
 * an object for openai-chat, openai-responses, anthropic, sharegpt and
 * swe-agent; for mini-swe-agent and openhands also the bare array (of
 * messages, of events) such files hold.  name is the file's name, used as
 * the source id where the format has none (a SWE-agent .traj is named after
 * its instance); it may be NULL.  Fields the converter does not know, where
 * a typo would lose content (a message's "contents"), are listed as
 * "PATH.KEY" strings in the traj's "_unknown" array, which
 * fw_ingest_file() takes out and reports.  Returns a new reference the
 * caller releases with json_decref(), or NULL with the reason in err
 * ("'messages' is object, not array").
 */
json_t *fw_ingest_convert(enum fw_fmt f, const json_t *doc, const char *name, char *err,
			  size_t errlen);

/*
 * Converts the lines of one Codex CLI rollout (an array of {timestamp,
 * type, payload} objects in file order, one session) to a traj:
 * response_item payloads make the turns, session_meta and turn_context the
 * model and meta, event_msg token counts the usage; a compacted summary is
 * an assistant turn and tags the record "compacted".  Lines of a type it
 * does not know are kept whole in meta.unknown.  A line may carry "_line",
 * its line number in the file: *at is then set to the line an error is
 * about (0 when none).  Returns a new reference or NULL with err set.
 */
json_t *fw_ingest_codex_session(const json_t *lines, long *at, char *err, size_t errlen);

/*
 * Rebuilds agent trajectories from OpenTelemetry GenAI spans.  docs is an
 * array of OTLP JSON export documents ({resourceSpans: [{scopeSpans:
 * [{spans}]}]}).  Each top-level invoke_agent span is one trajectory (a
 * trace without one is one trajectory); its turns come from the chat spans
 * under it in start order (gen_ai.input.messages / gen_ai.output.messages,
 * messages already seen in an earlier chat are not repeated), and a call no
 * chat answers gets its tool turn from the execute_tool span with that
 * gen_ai.tool.call.id.  fn is called once per trajectory in order of its
 * first span, with the traj (fn owns it) and err NULL, or with traj NULL
 * and the reason in err.  Returns the number of trajectories, or -1 when
 * memory runs out or fn returns non-zero.
 */
long fw_ingest_otel(const json_t *docs, int (*fn)(void *ctx, json_t *traj, const char *err),
		    void *ctx);

/*
 * Converts the events of one Claude Code session (an array of event
 * objects in file order) to a traj: the main thread is the chain of
 * parentUuid links ending at the last event that is not in a side chain;
 * consecutive events of one assistant message are merged; side-chain events
 * are left out and tagged "sidechain"; events on abandoned branches are
 * left out and counted in meta.dropped_events; isMeta user events and
 * assistant events Claude Code made up itself (model "<synthetic>", such as
 * API error notices) are left out and counted in meta.meta_events and
 * meta.synthetic_events; system events of subtype api_error are counted in
 * meta.api_errors; the latest ai-title or custom-title is meta.title.
 * Thinking blocks keep their signature (turn signatures[]).  Returns a new
 * reference or NULL with err set.
 */
json_t *fw_ingest_claude_session(const json_t *events, char *err, size_t errlen);

/* Where fw_ingest_file() hands what it reads; f is the file's format.
 * Each callback returns 0 to go on or non-zero to stop reading. */
struct fw_ingest_sink {
	/* One trajectory, without id unless it came as a flywheel record; the
	 * callee owns the reference.  line is where it starts (1-based; the
	 * record number for flywheel input). */
	int (*traj)(void *ctx, enum fw_fmt f, json_t *traj, long line);
	/* A flywheel record of another kind, as bytes to pass through.  May
	 * be NULL: such records are then dropped. */
	int (*raw)(void *ctx, const void *p, size_t n);
	/* A line or document that could not be used: where is "line N" or
	 * "record N (byte B)", why the reason. */
	int (*bad)(void *ctx, enum fw_fmt f, const char *where, const char *why);
	void *ctx;
};

/* Something read and used but worth saying, for fw_ingest_file_ex(): an
 * unknown field ("line N", "unknown field 'messages[].contents' is
 * ignored"), once per field and file.  ctx is the sink's.  Returning
 * non-zero stops reading. */
typedef int (*fw_ingest_warn_fn)(void *ctx, enum fw_fmt f, const char *where, const char *msg);

/*
 * Reads the log at path ("-": standard input), detects its format from the
 * first 64 kB unless force is not FW_FMT_UNKNOWN, stores it in *fmt, and
 * hands each trajectory to sink in file order.  JSON Lines are read a line
 * at a time, a Codex rollout a session at a time; a Claude Code file
 * (sessions grouped by sessionId), an OTLP trace file, a single document (a
 * SWE-agent .traj, a JSON array) and a pipe are held whole.
 * Returns 0 when the file was read to its end or the sink stopped; 1 when
 * the format is unknown ("unknown format: WHAT WAS SEEN" in err; an empty
 * file is 0); -1 when it cannot be read (message in err).
 */
int fw_ingest_file(const char *path, enum fw_fmt force, const struct fw_ingest_sink *sink,
		   enum fw_fmt *fmt, char *err, size_t errlen);

/* fw_ingest_file() that also hands warnings to warn (NULL: dropped, as
 * fw_ingest_file() does).  Same returns. */
int fw_ingest_file_ex(const char *path, enum fw_fmt force, const struct fw_ingest_sink *sink,
		      fw_ingest_warn_fn warn, enum fw_fmt *fmt, char *err, size_t errlen);

/*
 * Sets traj's "id" to its content id: 16 hex digits of fw_hash64() over
 * the canonical JSON (sorted keys, compact) of its model and turns, so the
 * same conversation gets the same id whatever file, position or format
 * detail it came from.  Returns 0, or -1 when memory runs out.
 */
int fw_ingest_set_id(json_t *traj);

/*
 * Redacts traj in place: turn text, thinking, call arguments, feedback
 * comments (also the top-level comment of a feedback record) and every
 * string in meta but source_id and file.  Adds this record's counts to meta.redactions ({rule: n}, only
 * rules that fired) and to *total (may be NULL).  Returns the number of
 * replacements, or -1 when memory runs out.
 */
long fw_ingest_redact(json_t *traj, struct fw_redact *r, struct fw_redact_counts *total);

/*
 * Normalises a time to RFC 3339 UTC seconds in out (at least 21 bytes):
 * Unix seconds or milliseconds as a JSON number or a string of digits, or
 * a string in ISO 8601 form ("2026-11-02T08:00:00.123+01:00",
 * "2026-11-02 08:00:00", "...Z").
 * Returns 0, or -1 when v is none of these (out is then "").
 */
int fw_ingest_time(const json_t *v, char *out, size_t outlen);

/* ---- feedback ------------------------------------------------------------- */

/* Called for each line that cannot be used: file, 1-based line, reason.
 * Returning non-zero stops the load (--strict). */
typedef int (*fw_bad_line_fn)(void *ctx, const char *file, long line, const char *why);

struct fw_feedback_stats {
	unsigned long events;     /* usable events read */
	unsigned long superseded; /* replaced by a later vote of the same user */
	unsigned long neutral;    /* middle of a 1-5 scale: neither up nor down */
	unsigned long bad;        /* lines that could not be used */
	unsigned long joined;     /* events attached to a trajectory */
};

struct fw_feedback;

/* How numeric ratings read: auto (decided per file, see
 * fw_feedback_load()), thumbs (+1/1 up, -1/0 down), stars (1-5: 4-5 up,
 * 1-2 down, 3 neutral) or score (the sign: above 0 up, below down, 0
 * neutral).  Words and booleans read the same on every scale. */
enum fw_rating_scale { FW_SCALE_AUTO = 0, FW_SCALE_THUMBS, FW_SCALE_STARS, FW_SCALE_SCORE };

/* "auto", "thumbs", "stars", "score".  Cannot fail. */
const char *fw_rating_scale_name(enum fw_rating_scale s);

/* The scale called name, or FW_SCALE_AUTO for any other name. */
enum fw_rating_scale fw_rating_scale_from_name(const char *name);

/* Reads every later file on scale s (FW_SCALE_AUTO: decide per file).
 * Cannot fail. */
void fw_feedback_set_scale(struct fw_feedback *fb, enum fw_rating_scale s);

/* The scale the last loaded file was read on, with the reason in why
 * ("a rating of 5 at line 3").  Cannot fail. */
enum fw_rating_scale fw_feedback_scale(const struct fw_feedback *fb, char *why, size_t whylen);

/* An empty feedback table; free with fw_feedback_free().  NULL when memory
 * runs out. */
struct fw_feedback *fw_feedback_new(void);

/* Frees fb; fw_feedback_free(NULL) does nothing. */
void fw_feedback_free(struct fw_feedback *fb);

/*
 * Reads feedback events from path: JSON Lines (one object per line) or CSV
 * with a header row (one record per line), told apart by the first
 * non-blank byte.  Fields are found by name (trace_id, trajectory_id,
 * conversation_id, ...; rating, vote, score, stars, ...; comment; user or
 * user_id; origin; at, time or timestamp).  Ratings become +1 or -1 with
 * the raw value kept: up/down, thumbs_up/thumbs_down, true/false, or a
 * number on the scale set with fw_feedback_set_scale(); unset, a file is
 * on stars when its rating column is called stars or a rating is 2..5, on
 * thumbs otherwise, and a file that has both negative numbers and stars is
 * refused (-1, EINVAL: one reading or the other turns votes upside down).
 * Neutral ratings are counted, not kept.  Origin is "external" unless the
 * event says "internal" (or "dogfood").  For each (trajectory, user) only
 * the latest event is kept.  Each unusable line goes to bad (which may
 * stop the load).  Returns 0; 1 when bad asked to stop; -1 when the file
 * cannot be read or is refused (errno kept, message in err).
 */
int fw_feedback_load(struct fw_feedback *fb, const char *path, fw_bad_line_fn bad, void *ctx,
		     char *err, size_t errlen);

/*
 * Moves the events naming key (a source trajectory id or a content id)
 * into traj's feedback array, keeping the latest per user there too.
 * Returns the number of events moved (0 when none), or -1 when memory runs
 * out.
 */
long fw_feedback_join(struct fw_feedback *fb, const char *key, json_t *traj);

/*
 * Hands each event never joined to fn as a new `feedback` record object
 * ({kind, v, id, trace, rating, raw, comment, user, origin, at, file,
 * line}) in load order (fn may be NULL to only count them), then forgets
 * them.  Returns how many, or -1 when fn returns non-zero or memory runs
 * out.  fn owns nothing it is given.
 */
long fw_feedback_orphans(struct fw_feedback *fb, int (*fn)(void *ctx, json_t *rec), void *ctx);

/* Running counts of fb.  Cannot fail. */
void fw_feedback_stats(const struct fw_feedback *fb, struct fw_feedback_stats *out);

/* ---- a run: what fb-ingest does around the converters ---------------------- */

struct fw_buf;

/* What a run counted, per format, for its summary. */
struct fw_ingest_tally {
	unsigned long recs[FW_FMT_N];    /* trajectories written */
	unsigned long dups[FW_FMT_N];    /* duplicates dropped */
	unsigned long bad[FW_FMT_N];     /* lines or records skipped */
	unsigned long files[FW_FMT_N];   /* logs read */
	unsigned long fb_bad;            /* feedback lines skipped */
	struct fw_redact_counts red;     /* replacements per rule */
};

/*
 * Finishes traj, read at line of file, for output: meta.file and
 * meta.line, the keys of meta (may be NULL) that its meta lacks, model
 * (when not NULL) for a record that names none, and the content id
 * (fw_ingest_set_id) when it has none, or anew when model was set, the
 * model being part of it.  Returns 0, or -1 when memory runs out.
 */
int fw_ingest_finish(json_t *traj, const char *file, long line, const char *model, json_t *meta);

/*
 * Appends the summary of a run to out, lines "PROG: ...": per format the
 * trajectories and files of t, the scale of each feedback file (the
 * strings of the array scales), fb's counts with orphans and t's skipped
 * lines, and the redactions per rule (or "redaction off" when not
 * redact).  Returns 0, or -1 when memory runs out.
 */
int fw_ingest_summary(struct fw_buf *out, const char *prog, const struct fw_ingest_tally *t,
		      const struct fw_feedback *fb, json_t *scales, long orphans, int redact);

#endif
