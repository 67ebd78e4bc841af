/*
 * fw_serve.h — checkpoints behind an OpenAI-compatible HTTP API, without
 * the HTTP transport: serve(1) receives a request with the HTTP library it
 * loads, hands method, path, Authorization header and body to
 * fw_serve_handle, and sends back the reply it gets (a body, or a stream of
 * server-sent events to read piece by piece).
 *
 * A server holds checkpoints by name.  Each has one decoding thread (its
 * engine) and one decoding state of max_seqs sequences: requests become
 * jobs in a queue; the engine admits queued jobs while sequences are free,
 * prefills each (taking the prompt prefix a live sequence already holds),
 * then draws one token for every live sequence and runs one batched step
 * for all of them (fw_gen_step_first), so concurrent requests decode
 * together.  Endpoints: POST /v1/completions, /v1/chat/completions,
 * /tokenize; GET /v1/models, /v1/models/ID, /health, /metrics (Prometheus
 * text format).  serve(1) documents the fields.
 *
 * Thread safety: fw_serve_handle, fw_serve_stream_read and
 * fw_serve_stream_free may be called from any number of threads at once;
 * fw_serve_add and fw_serve_stop from one thread, before and after them.
 */
#ifndef FW_SERVE_H
#define FW_SERVE_H

#include <stddef.h>
#include <sys/types.h>

struct fw_serve;
struct fw_serve_stream;

/* A new server with no checkpoint.  api_key (copied; NULL for none) is the
 * key every request but /health and /metrics must carry as
 * "Authorization: Bearer KEY".  Returns the server (fw_serve_free), or
 * NULL with err filled (out of memory). */
struct fw_serve *fw_serve_new(const char *api_key, char *err, size_t errlen);

/* Loads the checkpoint in dir (on the selected device, fw_dev_select) as
 * model name (the caller keeps name and dir alive), with a decoding state
 * of max_seqs sequences (1 to 1024) of the model's whole context, and
 * starts its engine.  Returns 0, or -1 with err filled (bad checkpoint,
 * out of memory, no thread). */
int fw_serve_add(struct fw_serve *s, const char *name, const char *dir, int max_seqs,
		 char *err, size_t errlen);

/* Stops every engine and waits for it: queued and running jobs are not
 * decoded further (a connection waiting on one is not woken: the HTTP
 * side ends first or exits).  Cannot fail; a second call does nothing. */
void fw_serve_stop(struct fw_serve *s);

/* fw_serve_stop, then frees the server and its models.  Only once no
 * request or stream is in flight.  fw_serve_free(NULL) does nothing. */
void fw_serve_free(struct fw_serve *s);

/* One HTTP request as received. */
struct fw_serve_request {
	const char *method;   /* "GET", "POST", ... */
	const char *url;      /* the path, e.g. "/v1/completions" */
	const char *auth;     /* the Authorization header, or NULL */
	const char *body;     /* n bytes (a POST's body), or NULL */
	size_t n;
	int too_big;          /* the body was over the caller's limit */
};

/* The reply to one request.  Exactly one of body and stream is set. */
struct fw_serve_reply {
	unsigned status;            /* HTTP status */
	const char *ctype;          /* Content-Type (static) */
	char *body;                 /* len bytes (malloc), or NULL */
	size_t len;
	struct fw_serve_stream *stream; /* server-sent events, or NULL */
};

/* Answers rq: checks its key, routes it, and for a completion queues the
 * job and waits until it is decoded (a streamed one: until it is queued;
 * its events come from r->stream).  Every answer, errors included, is
 * counted by status for /metrics.  Returns 0 with r filled (release it
 * with fw_serve_reply_release, or take r->stream and free it with
 * fw_serve_stream_free), or -1 when out of memory for the reply (r
 * empty: drop the connection). */
int fw_serve_handle(struct fw_serve *s, const struct fw_serve_request *rq,
		    struct fw_serve_reply *r);

/* Frees r's body (not its stream).  NULL does nothing. */
void fw_serve_reply_release(struct fw_serve_reply *r);

/* 1 when path answers without the API key (/health, /metrics), else 0. */
int fw_serve_open_path(const char *url);

/* Copies up to max bytes of the stream's events into buf, waiting until
 * the engine has decoded something to send.  Returns the bytes copied,
 * 0 at the end of the stream (after "data: [DONE]"). Cannot fail. */
size_t fw_serve_stream_read(struct fw_serve_stream *st, char *buf, size_t max);

/* Ends st (finished, or the client went): a job still decoding is
 * cancelled and its sequences are freed at the engine's next step.
 * fw_serve_stream_free(NULL) does nothing. */
void fw_serve_stream_free(struct fw_serve_stream *st);

#endif
