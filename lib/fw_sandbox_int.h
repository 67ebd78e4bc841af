/*
 * fw_sandbox_int.h — the network watch, shared by fw_sandbox.c and
 * fw_sandbox_net.c (not part of the library's interface; prefix fw_nw_).
 *
 * The watch records every direct network attempt of a sandboxed process —
 * one that does not go through the proxy — and refuses it.  See
 * fw_sandbox_net.c for how.  A run uses it in three steps:
 *
 *   parent, before fork   fw_nw_enabled(): not found unworkable before?
 *   child, before execve  fw_nw_child(sock): install the filter and hand
 *                         its listener to the parent
 *   parent, after fork    fw_nw_start(sock, pidfd): take the listener; then
 *                         poll fw_nw_pollfds() and call fw_nw_service()
 *                         until bwrap has ended; fw_nw_free() at the end
 *
 * What fails on one run is remembered (fw_nw_disable) and later runs of
 * the process go unwatched at once.
 */
#ifndef FW_SANDBOX_INT_H
#define FW_SANDBOX_INT_H

#include <poll.h>
#include <stddef.h>
#include <sys/socket.h>

/* Most "net-denied" events one run records; later ones are counted. */
#define FW_NW_MAX_EVENTS 256
/* Most descriptors fw_nw_pollfds() adds. */
#define FW_NW_MAXFDS 3

struct fw_nw;

/* One recorded attempt. */
struct fw_nw_event {
	char *detail; /* "connect tcp 1.1.1.1:80", "dns example.com A", owned */
	double at;    /* CLOCK_MONOTONIC seconds */
};

/*
 * Whether runs should try to watch: 1, or 0 with the reason in why
 * (whylen bytes) when this architecture has no filter or an earlier run
 * found the watch unworkable.  Costs nothing.  Thread-safe.
 */
int fw_nw_enabled(char *why, size_t whylen);

/* Remember that the watch cannot work here, for why (later runs of this
 * process skip it).  Thread-safe. */
void fw_nw_disable(const char *why);

/*
 * Whether this machine can watch, found by trying: a forked child installs
 * the filter and the caller takes its listener (a fork, once per process;
 * runs find out on their own, this is for reports).  Returns 1, or 0 with
 * the reason in why.  Thread-safe.
 */
int fw_nw_probe(char *why, size_t whylen);

/*
 * In the forked child, before execve: install the seccomp filter and tell
 * the parent the listener's descriptor number over sock (a connected
 * stream socket), wait for the parent to have taken it, then close both.
 * Only async-signal-safe calls.  Returns 0 when the child may go on —
 * watched, or not watched because the filter could not be installed (the
 * parent is told why) — and -1 when it must exit (the parent could not
 * take the listener, or sock failed).
 */
int fw_nw_child(int sock);

/*
 * In the parent, after fork: read the child's answer on sock and take its
 * listener through pidfd (a pidfd of the child).  Returns 0 with *out set
 * (free with fw_nw_free); 1 when the child could not install the filter
 * and runs unwatched; 2 when the child ended before answering; -1 when
 * the listener could not be taken and the child was told to exit.  The
 * reason is in why for 1 and -1.
 */
int fw_nw_start(int sock, int pidfd, struct fw_nw **out, char *why, size_t whylen);

/* Add the descriptors to poll (POLLIN) to pf (room for FW_NW_MAXFDS);
 * returns how many. */
int fw_nw_pollfds(const struct fw_nw *w, struct pollfd *pf);

/* Handle what the n entries of pf that fw_nw_pollfds() filled report:
 * answer notifications, read DNS queries.  Cannot fail (what cannot be
 * handled is let through to the kernel, which refuses it). */
void fw_nw_service(struct fw_nw *w, const struct pollfd *pf, int n);

/*
 * Move the recorded attempts to the caller: *ev gets *n events (caller
 * frees each detail and the array with free()); *more gets how many were
 * not recorded past FW_NW_MAX_EVENTS.  Returns 0, or -1 out of memory.
 */
int fw_nw_take(struct fw_nw *w, struct fw_nw_event **ev, size_t *n, size_t *more);

/* Close the listener and the DNS sockets, free w.  NULL does nothing. */
void fw_nw_free(struct fw_nw *w);

/* ---- pure helpers, exposed for the unit tests ---- */

/* What to do with a destination address. */
enum fw_nw_verdict {
	FW_NW_PASS = 0, /* not a network destination, or the sandbox's loopback */
	FW_NW_DENY,     /* outside the sandbox: record and refuse */
	FW_NW_DNS,      /* port 53 of the loopback: a resolver looking for a server */
};

/*
 * Classify the len bytes of sa (a sockaddr as a process passed it) and
 * write its printable form to out (outlen bytes): "1.1.1.1:80",
 * "[2001:db8::1]:443", "vsock 2:1024", "family 42".  AF_UNIX, AF_NETLINK
 * and AF_UNSPEC, a short or empty address pass (the kernel judges them);
 * IPv4 127.0.0.0/8 and 0.0.0.0, IPv6 ::1 and :: (and their v4-mapped
 * forms) are loopback.  Cannot fail.
 */
enum fw_nw_verdict fw_nw_classify(const struct sockaddr *sa, size_t len, char *out,
				  size_t outlen);

/*
 * Read the first question of a DNS query (n bytes at p): its name into
 * name (dotted, lowercase, bytes outside [a-z0-9-_.] as '?'; "." for the
 * root), its type's name into type ("A", "AAAA", ..., "TYPE99"), and the
 * offset just past the question into *end.  Returns 0, or -1 when p is not
 * a query with a question.
 */
int fw_nw_dns_question(const unsigned char *p, size_t n, char *name, size_t namelen,
		       char *type, size_t typelen, size_t *end);

#endif
