/*
 * fw_sandbox_net.c — the network watch: every direct network attempt from
 * the sandbox is recorded, and refused.
 *
 * The sandbox's network namespace holds only loopback, so a connection to
 * anything else fails (ENETUNREACH) — but nobody hears of it; only the
 * proxy sees requests.  To see the rest, the child that becomes bwrap
 * installs a seccomp filter before execve (inherited by bwrap and all it
 * starts) that hands connect(2), sendmsg(2), sendmmsg(2), and sendto(2)
 * with an address, to the caller as a user notification
 * (seccomp_unotify(2)).  The caller reads the destination from the
 * process's memory and answers:
 *
 *   - AF_UNIX, netlink, AF_UNSPEC, and the sandbox's loopback (127.0.0.0/8,
 *     ::1, and 0.0.0.0 and ::, which mean loopback to connect): carry on
 *     (SECCOMP_USER_NOTIF_FLAG_CONTINUE), so the proxy relay, test servers
 *     on loopback and bwrap's own netlink setup work as before;
 *   - any other address, or another family (vsock, ...): a "net-denied"
 *     event, and the call fails with ENETUNREACH without running — what the
 *     kernel answers there anyway.
 *
 * The same filter refuses outright, and the caller records as events:
 * every call of another architecture (the i386 interface, int $0x80) and
 * every x32 call ("syscall-denied", ENOSYS), io_uring (an io_uring connect
 * would bypass connect(2); ENOSYS), and sockets of any family but AF_UNIX,
 * AF_INET, AF_INET6 and routing netlink ("net-denied" "socket vsock",
 * EAFNOSUPPORT).  Where no listener can be had, a plain filter refuses the
 * same calls unrecorded.
 *
 * Names.  The sandbox has no resolv.conf, so resolvers ask 127.0.0.1:53
 * (Go's also [::1]:53), where nothing inside can listen: port 53 needs a
 * capability the sandbox lacks.  On the first call bound for port 53 of
 * the loopback, the watch binds UDP sockets on that port in the sandbox's
 * network namespace, entered from a short-lived clone of the caller.  Each
 * query that arrives is a "net-denied" event "dns NAME TYPE" (repeats of
 * the same question within a second, the resolver's retries, once) and is
 * answered REFUSED, so a lookup fails as fast as before and with the same
 * "temporary failure in name resolution".  Queries for the sandbox's own
 * host name and for localhost are answered but not recorded.
 *
 * The watch records; the namespace enforces.  A continued call runs as the
 * process asked, so a thread that rewrites the address between the look
 * and the call goes unrecorded, and is refused by the namespace all the
 * same.
 */
#include "fw_base.h"
#include "fw_sandbox_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/nsfs.h>
#include <linux/seccomp.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Linux 6.6: wake the supervisor on the notifying task's CPU, and let it
 * answer there (older kernels refuse the ioctl; it only saves time) */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

/* The name bwrap gives the sandbox (build_argv's --hostname). */
#define OWN_HOSTNAME "sandbox"
/* Details kept per notification (sendmmsg may name many destinations). */
#define PENDING 8
/* A DNS question seen again within this many seconds is a retry. */
#define DNS_REPEAT_S 1.0

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the filter ---------------------------------------------------------------- */

#if defined(__x86_64__)
#define WATCH 1
#define X32_BIT 0x40000000u
#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#ifndef __NR_io_uring_register
#define __NR_io_uring_register 427
#endif

/* Jump targets, and the instruction count.  The last two returns differ
 * between the watched filter (the caller hears of the call and refuses
 * it) and the plain one (the kernel refuses it unheard). */
enum { L_ALLOW = 23, L_NOTIFY = 24, L_DENY = 25, L_SOCK = 26, NFILTER = 27 };

#define LD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
/* at instruction pc: if A op k go to t, else to f (absolute indices) */
#define JOP(op, pc, k, t, f) BPF_JUMP(BPF_JMP | (op) | BPF_K, (k), (t) - (pc) - 1, (f) - (pc) - 1)
#define JEQ(pc, k, t, f) JOP(BPF_JEQ, pc, k, t, f)
#define JGE(pc, k, t, f) JOP(BPF_JGE, pc, k, t, f)
#define JGT(pc, k, t, f) JOP(BPF_JGT, pc, k, t, f)
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
#define ARG_LO(i) (offsetof(struct seccomp_data, args) + (i) * sizeof(__u64))
#define ARG_HI(i) (ARG_LO(i) + 4) /* x86_64 is little-endian */

/*
 * Every other architecture's calls (i386 through int $0x80, which the
 * x86_64 kernel serves with its own table) and every x32 call are
 * refused: none of them is looked at again below.  io_uring is refused
 * (a ring's CONNECT or SENDMSG never passes through connect(2)); socket(2)
 * and socketpair(2) only make AF_UNIX, AF_INET, AF_INET6 and routing
 * netlink sockets.  NETLINK_ROUTE stays: bwrap brings up the loopback
 * with it, and glibc's getifaddrs(3) (so getaddrinfo with AI_ADDRCONFIG)
 * and ip(8) read addresses through it; it sees only the sandbox's own
 * network namespace.  Other netlink protocols (sock_diag, audit, uevent,
 * netfilter, generic...), packet, vsock (which has no namespace and faces
 * the hypervisor) and the rest are refused.
 */
static const struct sock_filter filter[NFILTER] = {
	/* 0 */ LD(offsetof(struct seccomp_data, arch)),
	/* 1 */ JEQ(1, AUDIT_ARCH_X86_64, 2, L_DENY),
	/* 2 */ LD(offsetof(struct seccomp_data, nr)),
	/* 3 */ JGE(3, X32_BIT, L_DENY, 4),
	/* 4 */ JEQ(4, __NR_connect, L_NOTIFY, 5),
	/* 5 */ JEQ(5, __NR_sendmsg, L_NOTIFY, 6),
	/* 6 */ JEQ(6, __NR_sendmmsg, L_NOTIFY, 7),
	/* 7 */ JEQ(7, __NR_sendto, 17, 8),
	/* 8 */ JEQ(8, __NR_socket, 12, 9),
	/* 9 */ JEQ(9, __NR_socketpair, 12, 10),
	/* 10 */ JGE(10, __NR_io_uring_setup, 11, L_ALLOW),
	/* 11 */ JGT(11, __NR_io_uring_register, L_ALLOW, L_DENY),
	/* socket(2), socketpair(2): the family, then netlink's protocol */
	/* 12 */ LD(ARG_LO(0)),
	/* 13 */ JEQ(13, AF_UNIX, L_ALLOW, 14),
	/* 14 */ JEQ(14, AF_INET, L_ALLOW, 15),
	/* 15 */ JEQ(15, AF_INET6, L_ALLOW, 16),
	/* 16 */ JEQ(16, AF_NETLINK, 21, L_SOCK),
	/* sendto with no address (send(2)) goes where connect said */
	/* 17 */ LD(ARG_LO(4)),
	/* 18 */ JEQ(18, 0, 19, L_NOTIFY),
	/* 19 */ LD(ARG_HI(4)),
	/* 20 */ JEQ(20, 0, L_ALLOW, L_NOTIFY),
	/* 21 */ LD(ARG_LO(2)),
	/* 22 */ JEQ(22, NETLINK_ROUTE, L_ALLOW, L_SOCK),
	/* 23 */ RET(SECCOMP_RET_ALLOW),
	/* 24 */ RET(SECCOMP_RET_USER_NOTIF),
	/* 25 */ RET(SECCOMP_RET_USER_NOTIF),
	/* 26 */ RET(SECCOMP_RET_USER_NOTIF),
};

/* The filter without a listener: the same refusals, unrecorded, and the
 * calls that name a destination left to the namespace. */
static void plain_filter(struct sock_filter *f)
{
	memcpy(f, filter, sizeof filter);
	f[L_NOTIFY] = (struct sock_filter)RET(SECCOMP_RET_ALLOW);
	f[L_DENY] = (struct sock_filter)RET(SECCOMP_RET_ERRNO | ENOSYS);
	f[L_SOCK] = (struct sock_filter)RET(SECCOMP_RET_ERRNO | EAFNOSUPPORT);
}
#else
#define WATCH 0
#endif

unsigned fw_nw_filter_verdict(uint32_t arch, int nr, const uint64_t args[6], int watched)
{
#if WATCH
	struct sock_filter f[NFILTER];
	struct seccomp_data d = { .nr = nr, .arch = arch };
	uint32_t acc = 0;

	memcpy(d.args, args, sizeof d.args);
	if (watched)
		memcpy(f, filter, sizeof filter);
	else
		plain_filter(f);
	/* the few classic BPF forms the filter uses */
	for (unsigned pc = 0; pc < NFILTER; pc++) {
		const struct sock_filter *i = &f[pc];
		int jump = -1;
		switch (i->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			memcpy(&acc, (const char *)&d + i->k, sizeof acc);
			break;
		case BPF_JMP | BPF_JEQ | BPF_K: jump = acc == i->k; break;
		case BPF_JMP | BPF_JGE | BPF_K: jump = acc >= i->k; break;
		case BPF_JMP | BPF_JGT | BPF_K: jump = acc > i->k; break;
		case BPF_RET | BPF_K: return i->k;
		default: return SECCOMP_RET_KILL_PROCESS;
		}
		if (jump >= 0)
			pc += jump ? i->jt : i->jf;
	}
	return SECCOMP_RET_KILL_PROCESS;
#else
	(void)arch, (void)nr, (void)args, (void)watched;
	return SECCOMP_RET_ALLOW;
#endif
}

/* Send n bytes on a stream socket; a peer that is gone is an error, not
 * a SIGPIPE. */
static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	char *c = p;

	while (n) {
		ssize_t k = read(fd, c, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

int fw_nw_plain(void)
{
#if WATCH
	struct sock_filter f[NFILTER];
	struct sock_fprog prog = { .len = NFILTER, .filter = f };

	plain_filter(f);
	/* prctl(2), not seccomp(2): a kernel or a parent filter may refuse
	 * the newer call; no_new_privs, which an unprivileged filter needs,
	 * bwrap sets inside anyway */
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0 &&
	    (errno != EACCES || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	     prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0))
		return -1;
#endif
	return 0;
}

int fw_nw_child(int sock)
{
	int32_t msg;
	char ack = 0;
#if WATCH
	struct sock_fprog prog = { .len = NFILTER, .filter = (struct sock_filter *)filter };
	long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			  SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);

	/* without CAP_SYS_ADMIN a filter needs no_new_privs (bwrap sets it
	 * inside anyway) */
	if (fd < 0 && errno == EACCES && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0)
		fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			     SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	msg = fd >= 0 ? (int32_t)fd : -errno;
	/* unwatched, the refusals hold all the same */
	if (fd < 0 && fw_nw_plain() != 0)
		return -1;
#else
	long fd = -1;
	msg = -EOPNOTSUPP;
#endif
	/* read(2), and send(2) without an address, are not filtered: the
	 * handshake cannot wait on a listener nobody holds yet */
	if (write_all(sock, &msg, sizeof msg) != 0)
		return -1;
	if (fd >= 0) {
		if (read_all(sock, &ack, 1) != 0 || ack != 1)
			return -1;
		close((int)fd);
	}
	close(sock);
	return 0;
}

/* ---- the watch ------------------------------------------------------------------ */

struct fw_nw {
	int lfd;               /* the seccomp listener; -1 once every user is gone */
	int dns4, dns6;        /* the DNS sockets in the sandbox; -1 when none */
	int dns_state;         /* 0 not yet, 1 bound, -1 failed (dns_why) */
	char dns_why[160];
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	size_t reqsz, respsz;
	struct fw_nw_event *ev;
	size_t nev, cap, more;
	struct { uint64_t h; double at; } recent[16];
	unsigned nrecent;
};

static void record(struct fw_nw *w, double at, const char *kind, const char *detail)
{
	struct fw_nw_event *e;
	char *d;

	if (w->nev >= FW_NW_MAX_EVENTS) {
		w->more++;
		return;
	}
	if (w->nev == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 16;
		e = realloc(w->ev, cap * sizeof *e);
		if (!e) {
			w->more++;
			return;
		}
		w->ev = e;
		w->cap = cap;
	}
	if (!(d = strdup(detail))) {
		w->more++;
		return;
	}
	w->ev[w->nev++] = (struct fw_nw_event){ kind, d, at };
}

static struct fw_nw *nw_new(int lfd)
{
	struct seccomp_notif_sizes sz = { 0 };
	struct fw_nw *w = calloc(1, sizeof *w);

	if (!w)
		return NULL;
	w->lfd = lfd;
	w->dns4 = w->dns6 = -1;
	ioctl(lfd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
	/* the kernel's structures may be larger than the headers' */
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) != 0)
		memset(&sz, 0, sizeof sz);
	w->reqsz = sz.seccomp_notif > sizeof *w->req ? sz.seccomp_notif : sizeof *w->req;
	w->respsz = sz.seccomp_notif_resp > sizeof *w->resp ? sz.seccomp_notif_resp
							     : sizeof *w->resp;
	w->req = calloc(1, w->reqsz);
	w->resp = calloc(1, w->respsz);
	if (!w->req || !w->resp) {
		free(w->req);
		free(w->resp);
		free(w);
		return NULL;
	}
	return w;
}

int fw_nw_start(int sock, int pidfd, struct fw_nw **out, char *why, size_t whylen)
{
	int32_t msg;
	int lfd = -1, e = 0;
	char ack;
	struct fw_nw *w = NULL;

	*out = NULL;
	if (read_all(sock, &msg, sizeof msg) != 0) {
		fw_seterr(why, whylen, "the sandbox's child ended before handing over the network watch");
		return 2;
	}
	if (msg < 0) {
		fw_seterr(why, whylen, "seccomp user notification unavailable: %s", strerror(-msg));
		return 1;
	}
	if (pidfd < 0) {
		e = ENOSYS;
	} else if ((lfd = (int)syscall(SYS_pidfd_getfd, pidfd, msg, 0)) < 0) {
		e = errno;
	} else if (!(w = nw_new(lfd))) {
		close(lfd);
		e = ENOMEM;
	}
	ack = w != NULL;
	if (write_all(sock, &ack, 1) != 0 && w) {
		/* the child is gone: nothing to watch, nothing learnt */
		fw_nw_free(w);
		fw_seterr(why, whylen, "the sandbox's child ended during the network watch's hand-over");
		return 2;
	}
	if (!w) {
		fw_seterr(why, whylen, "cannot take the network watch's listener: %s", strerror(e));
		return -1;
	}
	*out = w;
	return 0;
}

static pthread_mutex_t off_mu = PTHREAD_MUTEX_INITIALIZER;
static int off = !WATCH;
static char off_why[200] = "not implemented on this architecture";

int fw_nw_enabled(char *why, size_t whylen)
{
	int on;

	pthread_mutex_lock(&off_mu);
	on = !off;
	if (!on)
		fw_seterr(why, whylen, "%s", off_why);
	pthread_mutex_unlock(&off_mu);
	return on;
}

void fw_nw_disable(const char *why)
{
	pthread_mutex_lock(&off_mu);
	if (!off)
		fw_seterr(off_why, sizeof off_why, "%s", why);
	off = 1;
	pthread_mutex_unlock(&off_mu);
}

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int probe_ok;
static char probe_why[200];

static void probe(void)
{
	int sv[2], pidfd, st;
	struct fw_nw *w = NULL;
	pid_t pid;

	if (!fw_nw_enabled(probe_why, sizeof probe_why))
		return;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		fw_seterr(probe_why, sizeof probe_why, "socketpair: %s", strerror(errno));
		return;
	}
	pid = fork();
	if (pid < 0) {
		fw_seterr(probe_why, sizeof probe_why, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return;
	}
	if (pid == 0) {
		close(sv[0]);
		_exit(fw_nw_child(sv[1]) == 0 ? 0 : 1);
	}
	close(sv[1]);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	probe_ok = fw_nw_start(sv[0], pidfd, &w, probe_why, sizeof probe_why) == 0;
	if (!probe_ok)
		fw_nw_disable(probe_why);
	fw_nw_free(w);
	if (pidfd >= 0)
		close(pidfd);
	close(sv[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
}

int fw_nw_probe(char *why, size_t whylen)
{
	pthread_once(&probe_once, probe);
	if (!probe_ok)
		fw_seterr(why, whylen, "%s", probe_why);
	return probe_ok;
}

void fw_nw_free(struct fw_nw *w)
{
	if (!w)
		return;
	if (w->lfd >= 0)
		close(w->lfd);
	if (w->dns4 >= 0)
		close(w->dns4);
	if (w->dns6 >= 0)
		close(w->dns6);
	for (size_t i = 0; i < w->nev; i++)
		free(w->ev[i].detail);
	free(w->ev);
	free(w->req);
	free(w->resp);
	free(w);
}

int fw_nw_take(struct fw_nw *w, struct fw_nw_event **ev, size_t *n, size_t *more)
{
	*ev = w->ev;
	*n = w->nev;
	*more = w->more;
	w->ev = NULL;
	w->nev = w->cap = 0;
	w->more = 0;
	return 0;
}

int fw_nw_pollfds(const struct fw_nw *w, struct pollfd *pf)
{
	int n = 0;

	if (w->lfd >= 0)
		pf[n++] = (struct pollfd){ w->lfd, POLLIN, 0 };
	if (w->dns4 >= 0)
		pf[n++] = (struct pollfd){ w->dns4, POLLIN, 0 };
	if (w->dns6 >= 0)
		pf[n++] = (struct pollfd){ w->dns6, POLLIN, 0 };
	return n;
}

/* ---- judging a destination ---------------------------------------------------------- */

static int v4_local(uint32_t a)
{
	return (a >> 24) == 127 || a == 0;
}

enum fw_nw_verdict fw_nw_classify(const struct sockaddr *sa, size_t len, char *out,
				  size_t outlen)
{
	char ip[INET6_ADDRSTRLEN];
	sa_family_t fam;
	int local, port;

	fw_seterr(out, outlen, "%s", "");
	if (len < sizeof fam)
		return FW_NW_PASS;
	memcpy(&fam, sa, sizeof fam);
	if (fam == AF_UNIX || fam == AF_NETLINK || fam == AF_UNSPEC)
		return FW_NW_PASS;
	if (fam == AF_INET) {
		struct sockaddr_in in;
		uint32_t a;
		/* shorter: the kernel refuses it with EINVAL */
		if (len < sizeof in)
			return FW_NW_PASS;
		memcpy(&in, sa, sizeof in);
		a = ntohl(in.sin_addr.s_addr);
		port = ntohs(in.sin_port);
		inet_ntop(AF_INET, &in.sin_addr, ip, sizeof ip);
		fw_seterr(out, outlen, "%s:%d", ip, port);
		local = v4_local(a);
	} else if (fam == AF_INET6) {
		struct sockaddr_in6 in6;
		/* the RFC 2133 form has no scope id */
		if (len < 24)
			return FW_NW_PASS;
		memset(&in6, 0, sizeof in6);
		memcpy(&in6, sa, len < sizeof in6 ? len : sizeof in6);
		port = ntohs(in6.sin6_port);
		if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
			uint32_t a;
			memcpy(&a, &in6.sin6_addr.s6_addr[12], 4);
			inet_ntop(AF_INET, &a, ip, sizeof ip);
			fw_seterr(out, outlen, "%s:%d", ip, port);
			local = v4_local(ntohl(a));
		} else {
			inet_ntop(AF_INET6, &in6.sin6_addr, ip, sizeof ip);
			fw_seterr(out, outlen, "[%s]:%d", ip, port);
			local = IN6_IS_ADDR_LOOPBACK(&in6.sin6_addr) ||
				IN6_IS_ADDR_UNSPECIFIED(&in6.sin6_addr);
		}
	} else if (fam == AF_VSOCK) {
		struct sockaddr_vm vm;
		if (len < sizeof vm)
			return FW_NW_PASS;
		memcpy(&vm, sa, sizeof vm);
		/* vsock is not namespaced: it may reach the host */
		fw_seterr(out, outlen, "vsock %u:%u", vm.svm_cid, vm.svm_port);
		return FW_NW_DENY;
	} else {
		fw_seterr(out, outlen, "family %u", (unsigned)fam);
		return FW_NW_DENY;
	}
	if (!local)
		return FW_NW_DENY;
	return port == 53 ? FW_NW_DNS : FW_NW_PASS;
}

void fw_nw_family(int family, int protocol, char *out, size_t outlen)
{
	static const struct { int f; const char *s; } names[] = {
		{ AF_UNIX, "unix" }, { AF_INET, "inet" }, { AF_INET6, "inet6" },
		{ AF_PACKET, "packet" }, { AF_VSOCK, "vsock" }, { AF_BLUETOOTH, "bluetooth" },
		{ AF_CAN, "can" }, { AF_TIPC, "tipc" }, { AF_ALG, "alg" }, { AF_XDP, "xdp" },
		{ AF_RDS, "rds" }, { AF_KCM, "kcm" }, { AF_QIPCRTR, "qipcrtr" },
		{ AF_SMC, "smc" }, { AF_KEY, "key" }, { AF_LLC, "llc" }, { AF_X25, "x25" },
		{ AF_AX25, "ax25" }, { AF_APPLETALK, "appletalk" }, { AF_IPX, "ipx" },
	};

	if (family == AF_NETLINK) {
		fw_seterr(out, outlen, "netlink %d", protocol);
		return;
	}
	for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
		if (names[k].f == family) {
			fw_seterr(out, outlen, "%s", names[k].s);
			return;
		}
	fw_seterr(out, outlen, "family %d", family);
}

/* len bytes at addr in the memory of process (thread) pid into buf. */
static int peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };

	return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)len ? 0 : -1;
}

/* A copy of descriptor fd of thread tid, or -1. */
static int steal_fd(pid_t tid, int fd)
{
	char path[64], line[128];
	int pfd, s;
	pid_t tgid = tid;
	FILE *f;

	pfd = (int)syscall(SYS_pidfd_open, tid, 0);
	if (pfd < 0 && errno == EINVAL) {
		/* a thread other than the leader: take its process */
		snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
		if ((f = fopen(path, "re"))) {
			while (fgets(line, sizeof line, f))
				if (sscanf(line, "Tgid: %d", &tgid) == 1)
					break;
			fclose(f);
		}
		pfd = (int)syscall(SYS_pidfd_open, tgid, 0);
	}
	if (pfd < 0)
		return -1;
	s = (int)syscall(SYS_pidfd_getfd, pfd, fd, 0);
	close(pfd);
	return s;
}

/* The transport of socket fd of tid: "tcp", "udp", ...; "" when unknown. */
static const char *transport(pid_t tid, int fd)
{
	int s = steal_fd(tid, fd), type = -1, proto = -1;
	socklen_t l = sizeof type;

	if (s < 0)
		return "";
	if (getsockopt(s, SOL_SOCKET, SO_TYPE, &type, &l) != 0)
		type = -1;
	l = sizeof proto;
	if (getsockopt(s, SOL_SOCKET, SO_PROTOCOL, &proto, &l) != 0)
		proto = -1;
	close(s);
	switch (type) {
	case SOCK_STREAM:
		return proto == IPPROTO_MPTCP ? "mptcp" : proto == IPPROTO_SCTP ? "sctp" : "tcp";
	case SOCK_DGRAM:
		return proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6 ? "icmp"
			: proto == IPPROTO_UDPLITE ? "udplite" : "udp";
	case SOCK_SEQPACKET:
		return "seqpacket";
	case SOCK_RAW:
		return "raw";
	default:
		return "";
	}
}

/* ---- the DNS sockets ---------------------------------------------------------------- */

struct stub_arg {
	const char *netns; /* /proc/TID/ns/net */
	int fd4, fd6, err;
};

/*
 * In a clone of the caller that shares its memory and descriptor table
 * (the caller waits, CLONE_VFORK): enter the sandbox's network namespace —
 * through its user namespace when the caller is not root — and bind UDP
 * port 53 there, on every IPv4 loopback address and on ::1.
 */
static int stub_main(void *p)
{
	struct stub_arg *a = p;
	struct sockaddr_in s4 = { .sin_family = AF_INET, .sin_port = htons(53) };
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(53),
				   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int one = 1, nfd = open(a->netns, O_RDONLY | O_CLOEXEC);

	if (nfd < 0) {
		a->err = errno;
		return 1;
	}
	if (setns(nfd, CLONE_NEWNET) != 0) {
		int ufd = ioctl(nfd, NS_GET_USERNS);
		if (ufd < 0 || setns(ufd, CLONE_NEWUSER) != 0 || setns(nfd, CLONE_NEWNET) != 0) {
			a->err = errno;
			if (ufd >= 0)
				close(ufd);
			close(nfd);
			return 1;
		}
		close(ufd);
	}
	close(nfd);
	a->fd4 = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (a->fd4 < 0 || setsockopt(a->fd4, IPPROTO_IP, IP_PKTINFO, &one, sizeof one) != 0 ||
	    bind(a->fd4, (struct sockaddr *)&s4, sizeof s4) != 0) {
		a->err = errno;
		if (a->fd4 >= 0)
			close(a->fd4);
		a->fd4 = -1;
		return 1;
	}
	/* IPv6 may be off in the namespace: then there is no ::1 to ask */
	a->fd6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (a->fd6 >= 0 &&
	    (setsockopt(a->fd6, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0 ||
	     setsockopt(a->fd6, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one) != 0 ||
	     bind(a->fd6, (struct sockaddr *)&s6, sizeof s6) != 0)) {
		close(a->fd6);
		a->fd6 = -1;
	}
	return 0;
}

/* Bind the DNS sockets in the network namespace of tid, once per run.
 * Returns 0, or -1 with the reason in w->dns_why. */
static int dns_bind(struct fw_nw *w, pid_t tid)
{
	enum { STACK = 64 * 1024 };
	char path[64];
	struct stat a, b;
	struct stub_arg arg = { path, -1, -1, 0 };
	char *stack;
	pid_t c;
	int st;

	if (w->dns_state)
		return w->dns_state > 0 ? 0 : -1;
	snprintf(path, sizeof path, "/proc/%d/ns/net", (int)tid);
	if (stat(path, &a) != 0 || stat("/proc/self/ns/net", &b) != 0) {
		fw_seterr(w->dns_why, sizeof w->dns_why, "%s: %s", path, strerror(errno));
		return -1; /* tid is gone: maybe the next caller will do */
	}
	/* never bind port 53 of the caller's own network */
	if (a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
		fw_seterr(w->dns_why, sizeof w->dns_why, "the caller's own network namespace");
		return -1;
	}
	if (!(stack = malloc(STACK))) {
		fw_seterr(w->dns_why, sizeof w->dns_why, "out of memory");
		return -1;
	}
	c = clone(stub_main, stack + STACK, CLONE_VM | CLONE_FILES | CLONE_VFORK | SIGCHLD, &arg);
	if (c < 0)
		arg.err = errno;
	else
		while (waitpid(c, &st, 0) < 0 && errno == EINTR)
			;
	free(stack);
	if (arg.fd4 < 0) {
		w->dns_state = -1;
		fw_seterr(w->dns_why, sizeof w->dns_why, "cannot bind port 53 in the sandbox: %s",
		       strerror(arg.err ? arg.err : EIO));
		return -1;
	}
	w->dns4 = arg.fd4;
	w->dns6 = arg.fd6;
	w->dns_state = 1;
	return 0;
}

int fw_nw_dns_question(const unsigned char *p, size_t n, char *name, size_t namelen,
		       char *type, size_t typelen, size_t *end)
{
	static const struct { unsigned t; const char *s; } types[] = {
		{ 1, "A" }, { 2, "NS" }, { 5, "CNAME" }, { 6, "SOA" }, { 12, "PTR" },
		{ 15, "MX" }, { 16, "TXT" }, { 28, "AAAA" }, { 33, "SRV" }, { 35, "NAPTR" },
		{ 43, "DS" }, { 48, "DNSKEY" }, { 64, "SVCB" }, { 65, "HTTPS" }, { 255, "ANY" },
	};
	size_t i = 12, o = 0;
	unsigned t;

	if (namelen < 2 || n < 12 || (p[2] & 0x80) || ((p[4] << 8) | p[5]) == 0)
		return -1;
	for (;;) {
		unsigned l;
		if (i >= n)
			return -1;
		l = p[i++];
		if (l == 0)
			break;
		/* a query's question is never compressed */
		if (l > 63 || i + l > n)
			return -1;
		if (o && o + 1 < namelen)
			name[o++] = '.';
		for (unsigned k = 0; k < l; k++) {
			int ch = tolower(p[i + k]);
			if (!(isalnum(ch) || ch == '-' || ch == '_'))
				ch = '?';
			if (o + 1 < namelen)
				name[o++] = (char)ch;
		}
		i += l;
	}
	if (o == 0)
		name[o++] = '.';
	name[o] = 0;
	if (i + 4 > n)
		return -1;
	t = (unsigned)(p[i] << 8 | p[i + 1]);
	i += 4;
	fw_seterr(type, typelen, "TYPE%u", t);
	for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
		if (types[k].t == t)
			fw_seterr(type, typelen, "%s", types[k].s);
	*end = i;
	return 0;
}

/* A retry of a question asked less than DNS_REPEAT_S ago?  Notes it. */
static int dns_repeat(struct fw_nw *w, const char *name, const char *type, double t)
{
	uint64_t h = 1469598103934665603ull;

	for (const char *s = name; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	h = (h ^ ' ') * 1099511628211ull;
	for (const char *s = type; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	for (unsigned k = 0; k < 16; k++)
		if (w->recent[k].h == h && t - w->recent[k].at < DNS_REPEAT_S)
			return 1;
	w->recent[w->nrecent++ % 16].h = h;
	w->recent[(w->nrecent - 1) % 16].at = t;
	return 0;
}

/* Names that never leave the machine: the sandbox's own host name, and
 * localhost and its subdomains (RFC 6761), which /etc/hosts may not cover
 * for every type. */
static int own_name(const char *name)
{
	size_t n = strlen(name);

	return strcmp(name, OWN_HOSTNAME) == 0 || strcmp(name, "localhost") == 0 ||
	       (n > 10 && strcmp(name + n - 10, ".localhost") == 0);
}

/* Read what queries wait on a DNS socket; record each, answer REFUSED. */
static void dns_serve(struct fw_nw *w, int fd)
{
	for (int k = 0; k < 64; k++) {
		unsigned char buf[1500];
		struct sockaddr_in6 from; /* big enough for either family */
		union { char c[CMSG_SPACE(sizeof(struct in6_pktinfo))]; struct cmsghdr h; } cbuf;
		struct iovec iov = { buf, sizeof buf };
		struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof from,
				     .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = cbuf.c, .msg_controllen = sizeof cbuf };
		char name[256], type[16], detail[300];
		size_t end;
		ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);
		double t = now();

		if (n < 0)
			return;
		if (fw_nw_dns_question(buf, (size_t)n, name, sizeof name, type, sizeof type,
				       &end) != 0) {
			snprintf(detail, sizeof detail, "dns: a malformed query of %zd bytes", n);
			record(w, t, "net-denied", detail);
			continue;
		}
		if (!own_name(name) && !dns_repeat(w, name, type, t)) {
			snprintf(detail, sizeof detail, "dns %s %s", name, type);
			record(w, t, "net-denied", detail);
		}
		/* the question back, QR set, opcode and RD kept, RCODE 5
		 * (REFUSED): the resolver gives up on this server at once */
		buf[2] = (unsigned char)(0x80 | (buf[2] & 0x79));
		buf[3] = 5;
		buf[4] = 0;
		buf[5] = 1;
		memset(buf + 6, 0, 6);
		iov.iov_len = end;
		/* the received packet info, sent back, answers from the
		 * address asked (a resolver drops answers from another); for
		 * IPv4 without the interface, whose primary address would
		 * win over 127.0.0.53 */
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
				struct in_pktinfo pi;
				memcpy(&pi, CMSG_DATA(c), sizeof pi);
				pi.ipi_spec_dst = pi.ipi_addr;
				pi.ipi_ifindex = 0;
				memcpy(CMSG_DATA(c), &pi, sizeof pi);
			}
		}
		mh.msg_flags = 0;
		sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	}
}

/* ---- notifications ------------------------------------------------------------------ */

/* What one notification found. */
struct pending {
	const char *kind; /* "net-denied", "syscall-denied" */
	char d[PENDING][400];
	int n, deny;      /* deny: the errno to answer, 0 to let the call run */
	size_t extra;
};

static void pend(struct pending *pd, const char *op, const char *tp, const char *where,
		 const char *note)
{
	if (pd->n == PENDING) {
		pd->extra++;
		return;
	}
	snprintf(pd->d[pd->n++], sizeof pd->d[0], "%s%s%s %s%s", op, *tp ? " " : "", tp, where,
		 note);
}

/* Judge one destination (addr, len in the process's memory) of socket fd. */
static void examine(struct fw_nw *w, struct pending *pd, pid_t tid, const char *op, int fd,
		    uint64_t addr, uint64_t len)
{
	struct sockaddr_storage ss;
	char where[128], note[200];

	if (addr == 0 || len == 0)
		return;
	if (len > sizeof ss)
		len = sizeof ss;
	/* unreadable: the kernel answers EFAULT, or the namespace refuses */
	if (peek(tid, addr, &ss, (size_t)len) != 0)
		return;
	switch (fw_nw_classify((struct sockaddr *)&ss, (size_t)len, where, sizeof where)) {
	case FW_NW_PASS:
		return;
	case FW_NW_DENY:
		pd->deny = ENETUNREACH;
		pend(pd, op, transport(tid, fd), where, "");
		return;
	case FW_NW_DNS: {
		const char *tp = transport(tid, fd);
		/* nothing inside can listen on port 53: over TCP the kernel
		 * refuses the lookup itself; over UDP the DNS sockets hear it */
		if (strcmp(tp, "tcp") == 0) {
			pend(pd, op, tp, where, " (dns)");
		} else if (dns_bind(w, tid) != 0) {
			snprintf(note, sizeof note, " (dns; query not seen: %s)", w->dns_why);
			pend(pd, op, tp, where, note);
		}
		return;
	}
	}
}

static void notification(struct fw_nw *w)
{
	struct seccomp_notif *rq = w->req;
	struct seccomp_notif_resp *rs = w->resp;
	struct pending pd;
	pid_t tid;
	uint64_t *a;
	double t;

	memset(rq, 0, w->reqsz);
	if (ioctl(w->lfd, SECCOMP_IOCTL_NOTIF_RECV, rq) != 0)
		return; /* ENOENT: the caller died meanwhile */
	t = now();
	tid = (pid_t)rq->pid;
	a = (uint64_t *)rq->data.args;
	memset(&pd, 0, sizeof pd);
	pd.kind = "net-denied";
	if (rq->data.arch != AUDIT_ARCH_X86_64 || (rq->data.nr & X32_BIT)) {
		pd.kind = "syscall-denied";
		pd.deny = ENOSYS;
		if (rq->data.arch != AUDIT_ARCH_X86_64)
			snprintf(pd.d[pd.n++], sizeof pd.d[0], "%s syscall %d",
				 rq->data.arch == AUDIT_ARCH_I386 ? "i386" : "foreign-arch",
				 rq->data.nr);
		else
			snprintf(pd.d[pd.n++], sizeof pd.d[0], "x32 syscall %d",
				 (int)(rq->data.nr & ~X32_BIT));
		goto answer;
	}
	switch (rq->data.nr) {
	case __NR_io_uring_setup:
	case __NR_io_uring_setup + 1:
	case __NR_io_uring_register:
		pd.kind = "syscall-denied";
		pd.deny = ENOSYS;
		snprintf(pd.d[pd.n++], sizeof pd.d[0], "%s",
			 rq->data.nr == __NR_io_uring_setup ? "io_uring_setup"
			 : rq->data.nr == __NR_io_uring_register ? "io_uring_register"
								 : "io_uring_enter");
		break;
	case __NR_socket:
	case __NR_socketpair: {
		char fam[64];
		pd.deny = EAFNOSUPPORT;
		fw_nw_family((int)a[0], (int)a[2], fam, sizeof fam);
		snprintf(pd.d[pd.n++], sizeof pd.d[0], "%s %s",
			 rq->data.nr == __NR_socket ? "socket" : "socketpair", fam);
		break;
	}
	case __NR_connect:
		examine(w, &pd, tid, "connect", (int)a[0], a[1], a[2]);
		break;
	case __NR_sendto:
		examine(w, &pd, tid, "sendto", (int)a[0], a[4], a[5]);
		break;
	case __NR_sendmsg: {
		struct msghdr mh;
		if (peek(tid, a[1], &mh, sizeof mh) == 0)
			examine(w, &pd, tid, "sendmsg", (int)a[0], (uintptr_t)mh.msg_name,
				mh.msg_namelen);
		break;
	}
	case __NR_sendmmsg: {
		/* the kernel sends at most UIO_MAXIOV of them */
		uint64_t vlen = a[2] > 1024 ? 1024 : a[2];
		for (uint64_t i = 0; i < vlen; i++) {
			struct mmsghdr mm;
			if (peek(tid, a[1] + i * sizeof mm, &mm, sizeof mm) != 0)
				break;
			examine(w, &pd, tid, "sendmmsg", (int)a[0], (uintptr_t)mm.msg_hdr.msg_name,
				mm.msg_hdr.msg_namelen);
		}
		break;
	}
	default:
		break;
	}
answer:
	/* what was read belongs to this call only if the caller is still in
	 * it (its pid could have been reused) */
	if (ioctl(w->lfd, SECCOMP_IOCTL_NOTIF_ID_VALID, &rq->id) == 0) {
		for (int i = 0; i < pd.n; i++)
			record(w, t, pd.kind, pd.d[i]);
		if (pd.extra) {
			char d[64];
			snprintf(d, sizeof d, "%zu more destinations of the same call", pd.extra);
			record(w, t, pd.kind, d);
		}
	}
	memset(rs, 0, w->respsz);
	rs->id = rq->id;
	if (pd.deny) {
		rs->error = -pd.deny;
	} else {
		rs->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	}
	ioctl(w->lfd, SECCOMP_IOCTL_NOTIF_SEND, rs);
}

void fw_nw_service(struct fw_nw *w, const struct pollfd *pf, int n)
{
	for (int i = 0; i < n; i++) {
		if (!pf[i].revents)
			continue;
		if (pf[i].fd == w->lfd) {
			if (pf[i].revents & POLLIN) {
				notification(w);
			} else if (pf[i].revents & (POLLHUP | POLLERR | POLLNVAL)) {
				/* every watched process has ended */
				close(w->lfd);
				w->lfd = -1;
			}
		} else if (pf[i].fd == w->dns4 || pf[i].fd == w->dns6) {
			dns_serve(w, pf[i].fd);
		}
	}
}
