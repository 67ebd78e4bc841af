/*
 * fw_sandbox.h — the clean room: run one untrusted command under bubblewrap.
 *
 * A run gets new user, pid, ipc, uts, cgroup and network namespaces, every
 * capability dropped and nested user namespaces disabled.  Its root is
 * read-only: /usr (and the /bin, /sbin, /lib* links) bound from the host,
 * from /etc only copies of what programs need (loader cache, passwd, group,
 * hosts, nsswitch.conf, time zone, CA certificates, alternatives, Debian's
 * python config; never shadow or /etc/ssl/private), a fresh /proc and a
 * minimal /dev.  Writable: the workspace at FW_SANDBOX_WORKDIR (nosuid,
 * nodev), and a private /tmp.  The command's uid 0 is the caller's uid on
 * the host — except when the caller is root: then bwrap and the command
 * run as an unprivileged host uid (opts.uid, 65534 by default), which
 * owns the workspace during the run, and the caller takes it back after.
 * After every run, set-user-ID and set-group-ID bits are cleared on every
 * workspace file, at any depth.  Read-only binds are read as the
 * command's uid.  The environment is cleared to PATH, HOME=/tmp, LANG,
 * TZ=UTC, PYTHONHASHSEED=0, PYTHONDONTWRITEBYTECODE=1, TMPDIR plus the
 * caller's additions.
 *
 * Limits, on by default (FW_SANDBOX_LIMIT_*): setrlimit in the child
 * before exec (CPU, file size, open files; address space and processes
 * where no cgroup caps them); memory and processes through cgroups where
 * the machine offers writable ones (v1 or v2), which also measure the
 * run's CPU time and peak memory.  A wall-clock timeout sends
 * SIGTERM to every process of the sandbox, then SIGKILL to its pid-namespace
 * init after a grace period, which ends the whole tree.  stdout and stderr
 * are captured through pipes up to a cap; the rest is drained and dropped
 * and the capture is marked truncated.
 *
 * Network: none by default (the net namespace holds only loopback).  With
 * an allow list, a filtering HTTP/HTTPS (CONNECT) proxy (fw_proxy.h) runs
 * in the caller on a Unix socket bound into the sandbox; a relay inside
 * (socat) listens on 127.0.0.1:FW_SANDBOX_PROXY_PORT and http_proxy /
 * https_proxy point at it.  Every request the proxy sees is an event,
 * "net-allowed" or "net-denied".  Direct attempts that bypass the proxy are
 * watched with seccomp user notification (fw_sandbox_net.c): connect(),
 * sendto(), sendmsg() and sendmmsg() to anything but the sandbox's own
 * loopback fail with ENETUNREACH and are "net-denied" events ("connect
 * tcp 1.1.1.1:80"), and DNS queries, answered REFUSED, are events too
 * ("dns example.com A").  Where the kernel cannot do this, such attempts
 * still fail but are not recorded, and every run says so in a "net-watch"
 * event.  The same filter refuses, and the watch records, what could get
 * round the namespace or the watch: every call of another architecture
 * (i386) and of x32 and io_uring ("syscall-denied"), and sockets of any
 * family but AF_UNIX, AF_INET, AF_INET6 and routing netlink ("net-denied"
 * "socket vsock").
 *
 * Needs bwrap(1) on PATH (Debian bubblewrap), and socat(1) for allow lists.
 */
#ifndef FW_SANDBOX_H
#define FW_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

/* Where the workspace appears inside the sandbox (read-write). */
#define FW_SANDBOX_WORKDIR "/work"
/* The sandbox's PATH (a caller's PATH=... in opts.env replaces it). */
#define FW_SANDBOX_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
/* Loopback port of the in-sandbox proxy relay when hosts are allowed. */
#define FW_SANDBOX_PROXY_PORT 3128
/* Default capture cap per stream (stdout, stderr), bytes. */
#define FW_SANDBOX_OUTPUT_CAP (1u << 20)
/* Default grace between SIGTERM and SIGKILL on timeout, seconds. */
#define FW_SANDBOX_GRACE 0.5
/*
 * The limits every run gets unless its caller says otherwise: every
 * untrusted command — fw-run, grade's suites, rollout's exec and agent
 * episodes, task-mutate's checks — is bounded by the same set.
 */
#define FW_SANDBOX_LIMIT_TIMEOUT 600.0      /* wall clock, seconds */
#define FW_SANDBOX_LIMIT_CPU 600L           /* CPU seconds per process */
#define FW_SANDBOX_LIMIT_MEM (4ull << 30)   /* memory of the tree, bytes */
#define FW_SANDBOX_LIMIT_PROCS 512L         /* processes and threads at once */
#define FW_SANDBOX_LIMIT_FSIZE (1ull << 30) /* bytes per file written */
#define FW_SANDBOX_LIMIT_NOFILE 1024L       /* open files per process */
/* Default host uid and gid of the command when the caller is root
 * (nobody, nogroup). */
#define FW_SANDBOX_UID 65534
#define FW_SANDBOX_GID 65534

/* Why a run ended.  Exactly one cause per run. */
enum fw_sandbox_cause {
	FW_SANDBOX_OK = 0,  /* the command ended on its own (any exit status) */
	FW_SANDBOX_TIMEOUT, /* the wall-clock timeout killed the tree */
	FW_SANDBOX_CPU,     /* the CPU-time limit (SIGXCPU, or SIGKILL at hard) */
	FW_SANDBOX_MEMORY,  /* the memory limit: the command failed after a
			     * cgroup OOM kill, or after a failed allocation
			     * under the address-space limit */
	FW_SANDBOX_FSIZE,   /* the file-size limit (SIGXFSZ / EFBIG) */
	FW_SANDBOX_PROCS,   /* the process limit (fork failed with EAGAIN, or
			     * the run sat at the limit for a second, or went
			     * over a limit nothing enforced) */
	FW_SANDBOX_KILLED,  /* killed by some other signal */
};

/*
 * What the caller asks for.  Start from fw_sandbox_opts_init(), then set
 * fields.  Every pointer is borrowed for the duration of fw_sandbox_run().
 * A limit of 0 means "no limit"; the defaults are the FW_SANDBOX_LIMIT_*
 * values above, so that a caller that sets none still runs bounded.
 */
struct fw_sandbox_opts {
	/* Host directory bound read-write at FW_SANDBOX_WORKDIR; NULL for
	 * none (then the command starts in /tmp). */
	const char *workspace;
	/* Working directory inside the sandbox; NULL: FW_SANDBOX_WORKDIR
	 * with a workspace, /tmp without. */
	const char *cwd;
	/* Extra read-only binds, NULL-terminated, each "SRC" (same path
	 * inside) or "SRC:DST"; NULL for none.  A missing SRC is an error. */
	const char *const *ro_binds;
	/* Extra read-write binds, NULL-terminated "SRC:DST"; NULL for none.
	 * Each SRC must lie inside the workspace, which is handed to the
	 * command's uid (and cleared of set-ID bits) with everything in it. */
	const char *const *rw_binds;
	/* A directory tree to use as the sandbox's root (an unpacked OCI
	 * image rootfs) in place of the host's /usr, /bin, /lib* and the
	 * pieces of /etc: each of its top-level entries but proc, dev, sys,
	 * tmp and run is bound read-only (links recreated); NULL for the
	 * host's system.  /proc, /dev, /tmp and the workspace are as ever. */
	const char *root;
	/* Extra environment, NULL-terminated "NAME=VALUE"; overrides the
	 * defaults of the same name; NULL for none. */
	const char *const *env;
	/* Host file to read as stdin; NULL: none (an empty pipe, so the
	 * first read is end of file). */
	const char *stdin_path;

	double timeout_s;     /* wall clock, seconds (default 600) */
	double grace_s;       /* SIGTERM → SIGKILL, seconds (default 0.5) */
	long cpu_s;           /* RLIMIT_CPU, seconds (default 600) */
	uint64_t mem_bytes;   /* bytes of the whole tree: a memory cgroup
			       * where there is one, else RLIMIT_AS per
			       * process (default 4 GiB) */
	long procs;           /* processes (threads) alive at once: a pids
			       * cgroup where there is one, else
			       * RLIMIT_NPROC and a watchdog (default 512) */
	uint64_t fsize_bytes; /* RLIMIT_FSIZE, bytes per file written
			       * (default 1 GiB) */
	long nofile;          /* RLIMIT_NOFILE (default 1024) */
	size_t output_cap;    /* bytes kept per stream (default and 0:
			       * FW_SANDBOX_OUTPUT_CAP, 1 MiB) */

	/* Hosts reachable through the proxy, NULL-terminated "HOST" or
	 * "HOST:PORT" (HOST may be "*.domain"; without a port, 80 and 443);
	 * NULL or empty: no network at all. */
	const char *const *allow;

	/* When the caller is root: the host uid and gid the command runs as
	 * (default FW_SANDBOX_UID, FW_SANDBOX_GID); the workspace belongs to
	 * them during the run and to the caller again after it.  0 is
	 * refused.  Ignored for other callers: the command has theirs. */
	unsigned uid, gid;

	/* 1: make no cgroups (a batch scheduler's cgroup may be off limits);
	 * memory is then capped by address space only, processes by a
	 * watchdog, and cpu_s / max_rss are not measured.  Default 0. */
	int no_cgroup;
};

/* One thing worth recording that happened during a run. */
struct fw_sandbox_event {
	char *kind;   /* "net-denied", "net-allowed", "limit", "cgroup",
		       * "setid" (set-ID bits cleared on a workspace file),
		       * "net-watch" (direct attempts cannot be recorded) */
	char *detail; /* e.g. "CONNECT evil.example:443", owned */
	double at_s;  /* seconds since the run started */
};

/* One captured stream. */
struct fw_sandbox_output {
	char *data;      /* the first `len` bytes, NUL-terminated, owned */
	size_t len;      /* bytes kept (<= output_cap) */
	uint64_t total;  /* bytes the command wrote in all */
	int truncated;   /* 1 when total > len: the rest was dropped */
};

/*
 * What happened.  Filled by fw_sandbox_run(); release with
 * fw_sandbox_result_free().
 */
struct fw_sandbox_result {
	enum fw_sandbox_cause cause;
	int exit_code;   /* the command's exit status, or -1 when signalled */
	int signal;      /* the terminating signal, or 0; as in sh(1), a
			  * status above 128 reads as signal status-128 */
	double wall_s;   /* wall-clock seconds, start to end */
	double cpu_s;    /* CPU seconds of the whole tree, from the run's
			  * cgroup; -1 when the machine offers none */
	uint64_t max_rss; /* peak memory of the whole tree in bytes, from the
			   * memory cgroup; 0 when there is none */
	int cgroup;      /* 1 when a memory cgroup enforced mem_bytes */
	struct fw_sandbox_output out, err;
	struct fw_sandbox_event *events; /* owned array */
	size_t nevents;
};

/*
 * Set *o to the defaults: no workspace, no network, the
 * FW_SANDBOX_LIMIT_* values (600 s of wall clock, 600 CPU seconds per process, 4 GiB of
 * memory, 512 processes, 1 GiB per file, 1024 open files), grace 0.5 s,
 * output cap FW_SANDBOX_OUTPUT_CAP, uid and gid FW_SANDBOX_UID,
 * FW_SANDBOX_GID.  Cannot fail.
 */
void fw_sandbox_opts_init(struct fw_sandbox_opts *o);

/*
 * Run argv (argv[0] looked up on the sandbox's PATH; NULL-terminated) in
 * the clean room described by o and wait for it to end.  res is
 * overwritten; on success it owns memory the caller releases with
 * fw_sandbox_result_free().
 *
 * Returns 0 when the command ran — whatever its exit status or cause —
 * and -1 when the sandbox could not be set up (bwrap missing, workspace
 * missing, a bind source missing, proxy or pipe failure, argv empty, or
 * bwrap's own setup failing, e.g. on a cwd that does not exist inside),
 * with a message in err (errlen bytes, may be 0) and res left empty (safe
 * to free).  A command that bwrap cannot exec inside is a run: exit code
 * 127 with bwrap's message in res->err.
 *
 * Thread-safe: runs share nothing but the process's SIGCHLD disposition,
 * which is left untouched (the child is reaped with waitpid on its pid).
 * The sandbox dies with the calling thread.  Each run also removes the
 * cgroups left by runs of callers that died, killing any sandbox still in
 * them (one orphaned in the instant bwrap was starting it).
 */
int fw_sandbox_run(const struct fw_sandbox_opts *o, char *const argv[],
		   struct fw_sandbox_result *res, char *err, size_t errlen);

/* Release what res owns and zero it; NULL does nothing. */
void fw_sandbox_result_free(struct fw_sandbox_result *res);

/* "ok", "timeout", "cpu", "memory", "fsize", "procs", "killed"; never NULL. */
const char *fw_sandbox_cause_name(enum fw_sandbox_cause c);

/*
 * Check that the clean room can work on this machine: bwrap present and
 * able to create the namespaces.  Returns 0, or -1 with the reason in err.
 */
int fw_sandbox_available(char *err, size_t errlen);

/*
 * Whether runs on this machine record direct network attempts (seccomp
 * user notification and pidfd_getfd(2) work here).  Returns 1, or 0 with
 * the reason in why (whylen bytes).  Checked once per process.
 */
int fw_sandbox_net_watch(char *why, size_t whylen);

#endif
