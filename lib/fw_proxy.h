/*
 * fw_proxy.h — a filtering HTTP/HTTPS proxy on a Unix socket.
 *
 * The clean room's only way out.  A sandbox has no network interface but
 * loopback; a relay inside forwards 127.0.0.1:3128 to this proxy's Unix
 * socket, bound into the sandbox.  The proxy serves two request forms:
 * "CONNECT host:port" (HTTPS and any TLS: bytes relayed both ways once the
 * tunnel is up) and plain HTTP with an absolute URI ("GET http://host:port/
 * path", forwarded in origin form with "Connection: close").  A request
 * whose host and port are not on the allow list is answered 403 and
 * recorded as a "net-denied" event; an allowed one as "net-allowed".
 *
 * Allow-list entries: "host" (ports 80 and 443), "host:port", "host:*",
 * "*.domain" (any subdomain, not the domain itself) with the same port
 * forms.  Hosts compare case-insensitively; IP literals compare as text.
 *
 * The proxy runs in its own thread from fw_proxy_new() to fw_proxy_free().
 */
#ifndef FW_PROXY_H
#define FW_PROXY_H

#include <stddef.h>

struct fw_proxy;

/* One request the proxy saw. */
struct fw_proxy_event {
	int allowed;   /* 1 allowed, 0 denied */
	char *request; /* "CONNECT host:port" or "GET http://host:port/...",
			* at most 200 bytes, owned */
	double at;     /* CLOCK_MONOTONIC seconds */
};

/* A request head, understood. */
struct fw_proxy_req {
	int tunnel;      /* 1 for CONNECT, 0 for plain HTTP */
	char host[256];  /* the target host, without brackets */
	int port;        /* 1..65535; 443 / 80 when the request names none */
	char desc[512];  /* "CONNECT host:port" or "GET http://host:port/path" */
};

/*
 * Understand one request head: head[0..n) is the request line and headers
 * through the blank line ("\r\n\r\n" ends it).  Fills rq.  For plain HTTP,
 * writes the head to send upstream into out (cap bytes): the request line
 * in origin form, hop-by-hop headers dropped, "Connection: close" added;
 * *outlen is its length (0 for CONNECT).  Returns 0, or -1 with a reason
 * in *why (a static string).  Cannot fail otherwise; reads nothing past n.
 */
int fw_proxy_parse(const char *head, size_t n, struct fw_proxy_req *rq, char *out,
		   size_t cap, size_t *outlen, const char **why);

/*
 * Whether host:port (port 1..65535) is on allow (NULL-terminated entries as
 * described above; NULL allows nothing).  Returns 1 or 0.  Cannot fail.
 */
int fw_proxy_allowed(const char *const *allow, const char *host, int port);

/*
 * Listen on a new Unix socket at sock_path (must not exist; at most 107
 * bytes) and serve requests in a background thread, filtered by allow
 * (copied).  Returns the proxy (free with fw_proxy_free), or NULL with a
 * message in err.
 */
struct fw_proxy *fw_proxy_new(const char *sock_path, const char *const *allow,
			      char *err, size_t errlen);

/*
 * Stop serving: close every connection, join the thread, unlink the socket,
 * and release the proxy.  NULL does nothing.
 */
void fw_proxy_free(struct fw_proxy *p);

/*
 * Move the events recorded so far to the caller: *ev gets an array of *n
 * events (caller frees each request and the array with free()).  Returns 0,
 * or -1 when out of memory (events kept).
 */
int fw_proxy_take_events(struct fw_proxy *p, struct fw_proxy_event **ev,
			 size_t *n);

#endif
