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
#include <stdint.h>
#include <sys/socket.h>

/* Most "net-denied" events one run records; later ones are counted. */
#define FW_NW_MAX_EVENTS 256
/* Most descriptors fw_nw_pollfds() adds. */
#define FW_NW_MAXFDS 3

struct fw_nw;

/* One recorded attempt. */
struct fw_nw_event {
	const char *kind; /* "net-denied" or "syscall-denied", static */
	char *detail; /* "connect tcp 1.1.1.1:80", "dns example.com A",
		       * "socket vsock", "i386 syscall 102", owned */
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
 * watched, or not watched because no listener could be had (the parent is
 * told why; fw_nw_plain's filter is installed instead) — and -1 when it
 * must exit (neither filter could be installed, the parent could not take
 * the listener, or sock failed).
 */
int fw_nw_child(int sock);

/*
 * In a forked child that will not be watched, before execve: install the
 * same refusals as fw_nw_child's filter (other architectures, x32,
 * io_uring, socket families), which the kernel then answers unrecorded;
 * connect(2) and the sends are left to the network namespace.  Only
 * async-signal-safe calls.  Returns 0 (also where this architecture has
 * no filter), or -1 with errno when the filter cannot be installed.
 */
int fw_nw_plain(void);

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
 * What the filter answers a call of architecture arch (AUDIT_ARCH_*),
 * number nr (the x32 bit included) and arguments args: the SECCOMP_RET_*
 * action of the watched filter (watched 1) or of fw_nw_plain's (0),
 * found by running the filter's program.  SECCOMP_RET_ALLOW where this
 * architecture has no filter.  Cannot fail.
 */
unsigned fw_nw_filter_verdict(uint32_t arch, int nr, const uint64_t args[6], int watched);

/*
 * The printable name of socket family (and, for netlink, protocol) into
 * out (outlen bytes): "vsock", "packet", "netlink 4", "family 99".
 * Cannot fail.
 */
void fw_nw_family(int family, int protocol, char *out, size_t outlen);

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
