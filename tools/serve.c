/*
 * serve — flywheel checkpoints behind an OpenAI-compatible HTTP API
 * (libmicrohttpd).  See serve(1).
 *
 * The API itself (routing, requests, the batching engine, answers,
 * server-sent events, metrics) is fw_serve's; serve receives requests
 * with libmicrohttpd and sends fw_serve's replies back.  libmicrohttpd is
 * loaded at run time (dlopen), so that the other tools, which all link
 * the same libraries, do not depend on it.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fw_cli.h"
#include "fw_serve.h"
#include "kernels_dev.h"

#if !__has_include(<microhttpd.h>)
/* Built where libmicrohttpd-dev is missing: the tool says so. */
int main(void)
{
	fw_cli_init("serve");
	fw_warn("built without libmicrohttpd (install libmicrohttpd-dev and rebuild)");
	return FW_EXIT_DATA;
}
#else
#include <microhttpd.h>

static const char usage_text[] =
	"usage: serve --ckpt NAME=DIR ... [--host ADDR] [--port P] [--max-body BYTES]\n"
	"             [--api-key KEY] [--max-seqs N] [--device cpu|cuda[:N]]\n"
	"       serve -h | --help | --version\n";

static const struct fw_opt_doc options[] = {
	{ "--ckpt NAME=DIR", "a checkpoint and its model name (repeat for more)" },
	{ "--host ADDR", "the IPv4 address to listen on (default 127.0.0.1)" },
	{ "--port P", "the port" },
	{ "--max-body BYTES", "the largest request body accepted" },
	{ "--api-key KEY", "answer /v1/* and /tokenize only with this bearer key" },
	{ "--max-seqs N", "sequences each checkpoint decodes at once (default 16, 1 to 1024)" },
	{ "--device cpu|cuda[:N]", "where the checkpoints run (default FW_DEVICE, else a GPU when there is one)" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

static struct {
	struct MHD_Daemon *(*start_daemon)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
					   MHD_AccessHandlerCallback, void *, ...);
	void (*stop_daemon)(struct MHD_Daemon *);
	const union MHD_DaemonInfo *(*get_daemon_info)(struct MHD_Daemon *,
							enum MHD_DaemonInfoType, ...);
	struct MHD_Response *(*create_response_from_buffer)(size_t, void *,
							     enum MHD_ResponseMemoryMode);
	struct MHD_Response *(*create_response_from_callback)(uint64_t, size_t,
							      MHD_ContentReaderCallback, void *,
							      MHD_ContentReaderFreeCallback);
	enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
	enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int,
					  struct MHD_Response *);
	void (*destroy_response)(struct MHD_Response *);
	const char *(*lookup_connection_value)(struct MHD_Connection *, enum MHD_ValueKind,
					       const char *);
} mhd;

static int load_mhd(void)
{
	static const char *const names[] = { "libmicrohttpd.so.12", "libmicrohttpd.so" };
	void *h = NULL;

	for (size_t i = 0; !h && i < sizeof names / sizeof names[0]; i++)
		h = dlopen(names[i], RTLD_NOW);
	if (!h) {
		fw_warn("cannot load libmicrohttpd: %s", dlerror());
		return -1;
	}
	*(void **)&mhd.start_daemon = dlsym(h, "MHD_start_daemon");
	*(void **)&mhd.stop_daemon = dlsym(h, "MHD_stop_daemon");
	*(void **)&mhd.get_daemon_info = dlsym(h, "MHD_get_daemon_info");
	*(void **)&mhd.create_response_from_buffer = dlsym(h, "MHD_create_response_from_buffer");
	*(void **)&mhd.create_response_from_callback =
		dlsym(h, "MHD_create_response_from_callback");
	*(void **)&mhd.add_response_header = dlsym(h, "MHD_add_response_header");
	*(void **)&mhd.queue_response = dlsym(h, "MHD_queue_response");
	*(void **)&mhd.destroy_response = dlsym(h, "MHD_destroy_response");
	*(void **)&mhd.lookup_connection_value = dlsym(h, "MHD_lookup_connection_value");
	if (!mhd.start_daemon || !mhd.stop_daemon || !mhd.get_daemon_info ||
	    !mhd.create_response_from_buffer || !mhd.create_response_from_callback ||
	    !mhd.add_response_header || !mhd.queue_response || !mhd.destroy_response ||
	    !mhd.lookup_connection_value) {
		fw_warn("libmicrohttpd lacks a function serve needs");
		return -1;
	}
	return 0;
}

static struct fw_serve *srv;
static size_t max_body = 8u << 20;
static volatile sig_atomic_t stop;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	size_t n = fw_serve_stream_read(cls, buf, max);

	(void)pos;
	return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls)
{
	fw_serve_stream_free(cls);
}

/* Queues fw_serve's reply r on c (r's body or stream goes to the
 * response). */
static enum MHD_Result send_reply(struct MHD_Connection *c, struct fw_serve_reply *r)
{
	struct MHD_Response *resp;
	enum MHD_Result rc;

	if (r->stream) {
		resp = mhd.create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read,
							 r->stream, stream_free);
		if (!resp) {
			fw_serve_stream_free(r->stream);
			return MHD_NO;
		}
		mhd.add_response_header(resp, "Cache-Control", "no-cache");
	} else {
		resp = mhd.create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
		if (!resp) {
			fw_serve_reply_release(r);
			return MHD_NO;
		}
	}
	mhd.add_response_header(resp, "Content-Type", r->ctype);
	rc = mhd.queue_response(c, r->status, resp);
	mhd.destroy_response(resp);
	return rc;
}

/* A request body being received. */
struct req {
	char *p;
	size_t n;
	int too_big;
};

static enum MHD_Result handler(void *cls, struct MHD_Connection *con, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **state)
{
	struct req *r = *state;
	struct fw_serve_request rq = { method, url, NULL, NULL, 0, 0 };
	struct fw_serve_reply rep;

	(void)cls;
	(void)version;
	if (!strcmp(method, "POST")) {
		/* the body comes in pieces, then a last call without one */
		if (!r) {
			if (!(r = calloc(1, sizeof *r)))
				return MHD_NO;
			*state = r;
			return MHD_YES;
		}
		if (*upload_size) {
			if (r->n + *upload_size > max_body) {
				r->too_big = 1;
			} else {
				char *p = realloc(r->p, r->n + *upload_size + 1);
				if (!p)
					return MHD_NO;
				memcpy(p + r->n, upload, *upload_size);
				r->p = p;
				r->n += *upload_size;
			}
			*upload_size = 0;
			return MHD_YES;
		}
		rq.body = r->p;
		rq.n = r->n;
		rq.too_big = r->too_big;
	}
	rq.auth = mhd.lookup_connection_value(con, MHD_HEADER_KIND, "Authorization");
	if (fw_serve_handle(srv, &rq, &rep))
		return MHD_NO;
	return send_reply(con, &rep);
}

static void done(void *cls, struct MHD_Connection *con, void **state,
		 enum MHD_RequestTerminationCode toe)
{
	struct req *r = *state;

	(void)cls;
	(void)con;
	(void)toe;
	if (r) {
		free(r->p);
		free(r);
		*state = NULL;
	}
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int usage_error(const char *fmt, const char *arg)
{
	return fw_usage_error(usage_text, fmt, arg);
}

int main(int argc, char **argv)
{
	fw_cli_init("serve");
	fw_usage_init(usage_text, options);
	enum { O_CKPT = 256, O_HOST, O_PORT, O_MAX_BODY, O_API_KEY, O_MAX_SEQS, O_DEVICE, O_VERSION };
	static const struct option longopts[] = {
		{ "ckpt", required_argument, NULL, O_CKPT },
		{ "device", required_argument, NULL, O_DEVICE },
		{ "host", required_argument, NULL, O_HOST },
		{ "port", required_argument, NULL, O_PORT },
		{ "max-body", required_argument, NULL, O_MAX_BODY },
		{ "api-key", required_argument, NULL, O_API_KEY },
		{ "max-seqs", required_argument, NULL, O_MAX_SEQS },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	const char *host = "127.0.0.1", *device = NULL, *api_key = NULL;
	const char **names = calloc((size_t)argc, sizeof *names);
	const char **dirs = calloc((size_t)argc, sizeof *dirs);
	uint64_t port = 8000, u, seqs = 16;
	int ch, narms = 0;

	if (!names || !dirs)
		return FW_EXIT_DATA;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (ch) {
		case O_CKPT: {
			char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg || !eq[1])
				return usage_error("bad checkpoint '%s' (want NAME=DIR)", optarg);
			*eq = '\0';
			for (int i = 0; i < narms; i++)
				if (!strcmp(names[i], optarg))
					return usage_error("checkpoint name '%s' given twice", optarg);
			names[narms] = optarg;
			dirs[narms++] = eq + 1;
			break;
		}
		case O_HOST: host = optarg; break;
		case O_DEVICE: device = optarg; break;
		case O_PORT:
			if (fw_parse_u64(optarg, &port, 0) || port > 65535)
				return usage_error("bad port '%s'", optarg);
			break;
		case O_MAX_BODY:
			if (fw_parse_u64(optarg, &u, 1) || u < 1024)
				return usage_error("bad body size '%s'", optarg);
			max_body = (size_t)u;
			break;
		case O_API_KEY:
			if (!*optarg)
				return usage_error("%s", "an empty --api-key");
			api_key = optarg;
			break;
		case O_MAX_SEQS:
			if (fw_parse_u64(optarg, &seqs, 0) || seqs < 1 || seqs > 1024)
				return usage_error("bad sequence count '%s' (1 to 1024)", optarg);
			break;
		case 'h': fw_help(); return fw_close_stdout() ? FW_EXIT_DATA : 0;
		case O_VERSION: fw_print_version(); return fw_close_stdout() ? FW_EXIT_DATA : 0;
		default: fputs(usage_text, stderr); return FW_EXIT_USAGE;
		}
	}
	if (!narms)
		return usage_error("%s", "--ckpt is required");
	if (optind < argc)
		return usage_error("unexpected operand '%s'", argv[optind]);
	struct sockaddr_in sa = { 0 };
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return usage_error("bad host '%s' (an IPv4 address)", host);
	char err[1024];
	if (load_mhd())
		return FW_EXIT_DATA;
	if (fw_dev_select(device, err, sizeof err) < 0) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	if (!(srv = fw_serve_new(api_key, err, sizeof err))) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	for (int i = 0; i < narms; i++)
		if (fw_serve_add(srv, names[i], dirs[i], (int)seqs, err, sizeof err)) {
			fw_warn("%s", err);
			return FW_EXIT_DATA;
		}
	struct MHD_Daemon *d = mhd.start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG,
		0, NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, &sa,
		MHD_OPTION_NOTIFY_COMPLETED, done, NULL, MHD_OPTION_CONNECTION_TIMEOUT, 120u,
		MHD_OPTION_END);
	if (!d) {
		fw_warn("cannot listen on %s:%llu", host, (unsigned long long)port);
		return FW_EXIT_DATA;
	}
	const union MHD_DaemonInfo *info = mhd.get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	/* the address on stdout, so that a script that asked for port 0 learns
	 * the one it got */
	printf("http://%s:%u\n", host, info ? info->port : (unsigned)port);
	fflush(stdout);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	while (!stop)
		pause();
	/* the engines end first: a connection that waits on one is woken by
	 * stopping the daemon */
	fw_serve_stop(srv);
	_exit(fw_close_stdout() ? FW_EXIT_DATA : FW_EXIT_OK);
}
#endif
