/*
 * fw_sandbox.c — the clean room: bubblewrap, rlimits, per-run cgroups
 * (memory, pids, CPU accounting), a wall-clock timeout over the whole tree,
 * capped output, and the proxy.
 *
 * Shape of a run:
 *
 *   caller ── fork ── child: rlimits, join cgroups, execve(bwrap, env)
 *                        bwrap (monitor, outside) ── init (pid 1) ── CMD (pid 2)
 *
 * bwrap reports the init's pid and the pid-namespace inode on the JSON
 * status pipe and, at the end, the exit code.  The caller polls stdout,
 * stderr, the status pipe and a pidfd of bwrap; on timeout it sends
 * SIGTERM to every process in that pid namespace, then SIGKILL to the
 * init, whose death takes every process of the namespace with it.
 */
#include "fw_base.h"
#include "fw_sandbox.h"
#include "fw_proxy.h"
#include "fw_sandbox_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SANDBOX_PATH FW_SANDBOX_PATH
#define PROXY_SOCK_INSIDE "/run/fw-proxy.sock"
#define STATUS_FD 3
/* A run pinned at its process limit this long is a fork bomb. */
#define PROCS_PINNED_S 1.0
#define PROCS_POLL_S 0.2

static const char *cause_names[] = {
	"ok", "timeout", "cpu", "memory", "fsize", "procs", "killed",
};

const char *fw_sandbox_cause_name(enum fw_sandbox_cause c)
{
	if ((unsigned)c < sizeof cause_names / sizeof cause_names[0])
		return cause_names[c];
	return "killed";
}

void fw_sandbox_opts_init(struct fw_sandbox_opts *o)
{
	memset(o, 0, sizeof *o);
	o->grace_s = FW_SANDBOX_GRACE;
	o->uid = FW_SANDBOX_UID;
	o->gid = FW_SANDBOX_GID;
	o->timeout_s = FW_SANDBOX_LIMIT_TIMEOUT;
	o->cpu_s = FW_SANDBOX_LIMIT_CPU;
	o->mem_bytes = FW_SANDBOX_LIMIT_MEM;
	o->procs = FW_SANDBOX_LIMIT_PROCS;
	o->fsize_bytes = FW_SANDBOX_LIMIT_FSIZE;
	o->nofile = FW_SANDBOX_LIMIT_NOFILE;
	o->output_cap = FW_SANDBOX_OUTPUT_CAP;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void fw_sandbox_result_free(struct fw_sandbox_result *res)
{
	if (!res)
		return;
	free(res->out.data);
	free(res->err.data);
	for (size_t i = 0; i < res->nevents; i++) {
		free(res->events[i].kind);
		free(res->events[i].detail);
	}
	free(res->events);
	memset(res, 0, sizeof *res);
}

static int add_event(struct fw_sandbox_result *res, const char *kind,
		     double at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int add_event(struct fw_sandbox_result *res, const char *kind,
		     double at, const char *fmt, ...)
{
	struct fw_sandbox_event *ev;
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	ev = realloc(res->events, (res->nevents + 1) * sizeof *ev);
	if (!ev)
		return -1;
	res->events = ev;
	ev += res->nevents;
	ev->kind = strdup(kind);
	ev->detail = strdup(buf);
	ev->at_s = at;
	if (!ev->kind || !ev->detail) {
		free(ev->kind);
		free(ev->detail);
		return -1;
	}
	res->nevents++;
	return 0;
}

/* Put the events in the order they happened (the proxy's and the network
 * watch's are added at the end of the run); ties keep their order. */
static void sort_events(struct fw_sandbox_result *res)
{
	for (size_t i = 1; i < res->nevents; i++) {
		struct fw_sandbox_event e = res->events[i];
		size_t j = i;
		for (; j > 0 && res->events[j - 1].at_s > e.at_s; j--)
			res->events[j] = res->events[j - 1];
		res->events[j] = e;
	}
}

/* ---- argv and environment builders ---------------------------------------- */

struct strv {
	char **v;
	size_t n, cap;
	int oom;
};

static void sv_push(struct strv *s, const char *str)
{
	char *d;

	if (s->oom)
		return;
	if (s->n + 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		char **v = realloc(s->v, cap * sizeof *v);
		if (!v) {
			s->oom = 1;
			return;
		}
		s->v = v;
		s->cap = cap;
	}
	d = strdup(str);
	if (!d) {
		s->oom = 1;
		return;
	}
	s->v[s->n++] = d;
	s->v[s->n] = NULL;
}

static void sv_pushf(struct strv *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void sv_pushf(struct strv *s, const char *fmt, ...)
{
	char buf[PATH_MAX + 64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	sv_push(s, buf);
}

static void sv_free(struct strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof *s);
}

/* Set NAME=VALUE in env, replacing an earlier NAME. */
static void env_set(struct strv *env, const char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);

	for (size_t i = 0; i < env->n; i++) {
		if (strncmp(env->v[i], kv, klen) == 0 && env->v[i][klen] == '=') {
			char *d = strdup(kv);
			if (!d) {
				env->oom = 1;
				return;
			}
			free(env->v[i]);
			env->v[i] = d;
			return;
		}
	}
	sv_push(env, kv);
}

/*
 * The pieces of /etc a test suite needs: the dynamic loader's cache, name
 * databases, the time zone, CA certificates, the alternatives symlinks
 * (/usr/bin/python3 may point through them), Debian's python config.
 * Files are copied into the sandbox's root (bwrap --file) and symlinks
 * recreated, which costs no mount; only the directories are bound.  Every
 * mount costs bwrap about half a millisecond, which is why /etc is not
 * bound piecemeal.  Never /etc as a whole: uid 0 inside owns what root
 * owns outside, /etc/shadow and /etc/ssl/private included.
 */
#define MAX_FILES 32

struct files {
	int fd[MAX_FILES];
	int n;
};

static const char *etc_paths[] = {
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/passwd", "/etc/group",
	"/etc/nsswitch.conf", "/etc/hosts", "/etc/localtime", "/etc/timezone",
	"/etc/gitconfig", "/etc/protocols", "/etc/services", "/etc/os-release",
	"/etc/debian_version", "/etc/mime.types", "/etc/ssl/openssl.cnf",
	"/etc/alternatives", "/etc/ssl/certs", "/etc/pki/tls/certs", "/etc/python3",
	NULL,
};

static void bind_one(struct strv *a, struct files *f, const char *path);

/* A directory of a few small regular files is cheaper recreated than
 * mounted.  Returns 1 when done, 0 when the directory should be bound. */
static int copy_dir(struct strv *a, struct files *f, const char *path)
{
	char names[8][256], sub[PATH_MAX];
	struct dirent *e;
	struct stat st;
	int n = 0, ok = 1;
	DIR *d = opendir(path);

	if (!d)
		return 0;
	while (ok && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(sub, sizeof sub, "%s/%.255s", path, e->d_name);
		if (n == 8 || lstat(sub, &st) != 0 || !S_ISREG(st.st_mode) ||
		    st.st_size > 65536 || !(st.st_mode & S_IROTH))
			ok = 0;
		else
			snprintf(names[n++], sizeof names[0], "%.255s", e->d_name);
	}
	closedir(d);
	if (!ok || f->n + n > MAX_FILES)
		return 0;
	sv_push(a, "--dir");
	sv_push(a, path);
	for (int i = 0; i < n; i++) {
		snprintf(sub, sizeof sub, "%s/%s", path, names[i]);
		bind_one(a, f, sub);
	}
	return 1;
}

/* Bind path the way the host has it: a symlink stays a symlink (merged
 * /usr), a directory is bound read-only, absence is fine.  With f (under
 * /etc), a directory that copy_dir() takes is copied instead, and a regular
 * file is given as a copy; with f NULL (a top-level system path) a regular
 * file is left out. */
static void bind_one(struct strv *a, struct files *f, const char *path)
{
	char target[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (lstat(path, &st) != 0)
		return;
	if (S_ISLNK(st.st_mode)) {
		n = readlink(path, target, sizeof target - 1);
		if (n <= 0)
			return;
		target[n] = 0;
		sv_push(a, "--symlink");
		sv_push(a, target);
		sv_push(a, path);
	} else if (S_ISDIR(st.st_mode)) {
		if (f && copy_dir(a, f, path))
			return;
		sv_push(a, "--ro-bind");
		sv_push(a, path);
		sv_push(a, path);
	} else if (f && S_ISREG(st.st_mode) && f->n < MAX_FILES) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return;
		f->fd[f->n] = fd;
		sv_push(a, "--perms");
		sv_push(a, "0644");
		sv_push(a, "--file");
		/* the child puts the n-th file at descriptor STATUS_FD + 1 + n */
		sv_pushf(a, "%d", STATUS_FD + 1 + f->n);
		sv_push(a, path);
		f->n++;
	}
}

static void bind_etc(struct strv *a, struct files *f)
{
	DIR *d;
	struct dirent *e;

	for (const char **p = etc_paths; *p; p++)
		bind_one(a, f, *p);
	/* Debian's per-version python config: /etc/python3.11 and kin */
	d = opendir("/etc");
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "python3.", 8) == 0) {
			char path[300];
			snprintf(path, sizeof path, "/etc/%.250s", e->d_name);
			bind_one(a, f, path);
		}
	}
	closedir(d);
}

/* Find an executable on the caller's PATH; 0 and the path in out, or -1. */
static int find_exe(const char *name, char *out, size_t outlen)
{
	const char *path = getenv("PATH");
	const char *p, *q;

	if (!path || !*path)
		path = SANDBOX_PATH;
	for (p = path; *p; p = *q ? q + 1 : q) {
		q = strchr(p, ':');
		if (!q)
			q = p + strlen(p);
		if (q == p)
			continue;
		if ((size_t)snprintf(out, outlen, "%.*s/%s", (int)(q - p), p, name) >= outlen)
			continue;
		if (access(out, X_OK) == 0)
			return 0;
	}
	return -1;
}

/* ---- cgroups: memory limit and accounting -------------------------------------- */

/*
 * A run gets cgroups of its own where the machine lets us make them: with
 * cgroup v1, one under the memory controller (when a memory limit is
 * asked), one under pids (when a process limit is asked) and one under
 * cpuacct (for CPU time of the whole tree, which bwrap's exit status
 * cannot carry); with cgroup v2, one directory for all three, each limit
 * set where its controller is enabled.
 *
 * The pids cgroup matters: the sandbox's uid 0 is the host's root, and
 * the kernel never applies RLIMIT_NPROC to root's processes.
 */
struct cgroup {
	char mem[PATH_MAX - 64];  /* memory cgroup, "" when none */
	char pids[PATH_MAX - 64]; /* pids cgroup, "" when none */
	char cpu[PATH_MAX - 64];  /* accounting cgroup, "" when none */
	int v2;                   /* v2: all three are one directory */
};

enum { CG_MEM = 1, CG_PIDS = 2 };

/* Where this process sits in the hierarchy holding controller ctl (v1), or
 * in the unified hierarchy (ctl NULL).  Writes the directory; 0 or -1. */
static int cgroup_self(const char *ctl, char *out, size_t outlen)
{
	char line[4096], cgpath[PATH_MAX] = "", mnt[PATH_MAX] = "", mroot[PATH_MAX] = "";
	int found = 0;
	FILE *f;

	f = fopen("/proc/self/cgroup", "r");
	if (!f)
		return -1;
	while (!found && fgets(line, sizeof line, f)) {
		/* "ID:CONTROLLERS:PATH"; v2 is "0::PATH" */
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		char *tok, *save = NULL;
		if (!c2)
			continue;
		line[strcspn(line, "\n")] = 0;
		*c2 = 0;
		if (!ctl) {
			if (c1 == line + 1 && line[0] == '0' && c2 == c1 + 1) {
				snprintf(cgpath, sizeof cgpath, "%s", c2 + 1);
				found = 1;
			}
			continue;
		}
		for (tok = strtok_r(c1 + 1, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			if (strcmp(tok, ctl) == 0) {
				snprintf(cgpath, sizeof cgpath, "%s", c2 + 1);
				found = 1;
			}
	}
	fclose(f);
	if (!found)
		return -1;

	f = fopen("/proc/self/mountinfo", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f)) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS... - FSTYPE SOURCE SUPEROPTS */
		char root[PATH_MAX], mp[PATH_MAX], fstype[64], super[1024];
		char *dash = strstr(line, " - "), *tok, *save = NULL;
		int match = 0;
		if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", root, mp) != 2)
			continue;
		if (sscanf(dash + 3, "%63s %*s %1023s", fstype, super) != 2)
			continue;
		if (!ctl)
			match = strcmp(fstype, "cgroup2") == 0;
		else if (strcmp(fstype, "cgroup") == 0)
			for (tok = strtok_r(super, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				match |= strcmp(tok, ctl) == 0;
		if (match && !*mnt) {
			snprintf(mnt, sizeof mnt, "%s", mp);
			snprintf(mroot, sizeof mroot, "%s", root);
		}
	}
	fclose(f);
	if (!*mnt)
		return -1;
	{
		const char *rel = cgpath;
		size_t rl = strlen(mroot);
		/* a container may see its own cgroup as the mount's root */
		if (strcmp(mroot, "/") != 0 && strncmp(rel, mroot, rl) == 0)
			rel += rl;
		if (strcmp(rel, "/") == 0)
			rel = "";
		if ((size_t)snprintf(out, outlen, "%s%s", mnt, rel) >= outlen)
			return -1;
	}
	return access(out, W_OK) == 0 ? 0 : -1;
}

static int write_file(const char *dir, const char *name, const char *val)
{
	char path[PATH_MAX + 64];
	int fd, rc = 0;
	size_t n = strlen(val);

	snprintf(path, sizeof path, "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (write(fd, val, n) != (ssize_t)n)
		rc = -1;
	close(fd);
	return rc;
}

/* Read "key N" from a flat-keyed cgroup file (key NULL: the first number
 * of the file); -1 when absent. */
static long long read_key(const char *dir, const char *name, const char *key)
{
	char path[PATH_MAX + 64], line[256];
	long long v = -1;
	size_t kl = key ? strlen(key) : 0;
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f)) {
		if (!key) {
			v = atoll(line);
			break;
		}
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
			v = atoll(line + kl + 1);
	}
	fclose(f);
	return v;
}

/* The inode of our pid namespace, which names our runs' cgroups. */
static unsigned long self_pidns(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long)st.st_ino : 0;
}

/* Kill every process in a cgroup directory. */
static void kill_cgroup(const char *dir)
{
	char path[PATH_MAX + 16], line[32];
	FILE *f;

	snprintf(path, sizeof path, "%s/cgroup.procs", dir);
	if (!(f = fopen(path, "r")))
		return;
	while (fgets(line, sizeof line, f)) {
		int pid = atoi(line);
		if (pid > 1)
			kill(pid, SIGKILL);
	}
	fclose(f);
}

/*
 * Clean up after runs of dead processes.  A caller killed mid-run cannot,
 * and its sandbox may even live on: bwrap arms its own death-with-parent
 * only after it has forked, so a caller killed in that instant leaves an
 * orphaned sandbox with no timeout over it.  Every process of a run is in
 * the run's cgroups and cannot leave them, so kill what is still there and
 * remove the directory (or leave it to the next sweep while it empties).
 */
static void sweep(const char *base)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d = opendir(base);

	if (!d)
		return;
	while ((e = readdir(d))) {
		int pid;
		unsigned long ns;
		/* only runs of callers in our pid namespace: a pid means
		 * nothing in another */
		if (sscanf(e->d_name, "fw-sandbox-%lu-%d-", &ns, &pid) != 2 ||
		    ns != self_pidns() || pid == getpid())
			continue;
		if (kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		if ((size_t)snprintf(path, sizeof path, "%s/%s", base, e->d_name) >= sizeof path)
			continue;
		if (rmdir(path) != 0 && errno == EBUSY) {
			kill_cgroup(path);
			rmdir(path);
		}
	}
	closedir(d);
}

static int make_child(const char *base, char *out, size_t outlen)
{
	static unsigned seq;

	/* every run sweeps up after dead callers' runs: a readdir of a few
	 * entries */
	sweep(base);

	if ((size_t)snprintf(out, outlen, "%s/fw-sandbox-%lu-%d-%u", base, self_pidns(),
			     (int)getpid(),
			     __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED)) >= outlen ||
	    mkdir(out, 0755) != 0) {
		out[0] = 0;
		return -1;
	}
	return 0;
}

/* Set one limit in a fresh v1 child of controller ctl's hierarchy; the
 * directory goes to out, "" when it cannot be made. */
static void v1_limit(const char *ctl, const char *file, const char *val, char *out,
		     size_t outlen)
{
	char base[PATH_MAX - 128];

	out[0] = 0;
	if (cgroup_self(ctl, base, sizeof base) != 0 || make_child(base, out, outlen) != 0)
		return;
	if (write_file(out, file, val) != 0) {
		rmdir(out);
		out[0] = 0;
	}
}

/* Make the run's cgroups for a memory limit of bytes and a process limit
 * of procs (0: none).  Returns the limits in force (CG_MEM | CG_PIDS);
 * why says what could not be had. */
static int cgroup_make(struct cgroup *cg, uint64_t bytes, long procs, char *why,
		       size_t whylen)
{
	char base[PATH_MAX - 128], mval[32], pval[32];
	int got = 0;

	cg->mem[0] = cg->pids[0] = cg->cpu[0] = 0;
	cg->v2 = 0;
	snprintf(mval, sizeof mval, "%llu", (unsigned long long)bytes);
	snprintf(pval, sizeof pval, "%ld", procs);
	if (cgroup_self("cpuacct", base, sizeof base) == 0 ||
	    cgroup_self("memory", base, sizeof base) == 0 ||
	    cgroup_self("pids", base, sizeof base) == 0) {
		if (bytes) {
			v1_limit("memory", "memory.limit_in_bytes", mval, cg->mem, sizeof cg->mem);
			/* memsw exists only with swap accounting */
			if (cg->mem[0])
				write_file(cg->mem, "memory.memsw.limit_in_bytes", mval);
		}
		if (procs > 0)
			v1_limit("pids", "pids.max", pval, cg->pids, sizeof cg->pids);
		if (cgroup_self("cpuacct", base, sizeof base) == 0)
			make_child(base, cg->cpu, sizeof cg->cpu);
	} else if (cgroup_self(NULL, base, sizeof base) == 0 &&
		   make_child(base, cg->cpu, sizeof cg->cpu) == 0) {
		cg->v2 = 1;
		if (bytes && write_file(cg->cpu, "memory.max", mval) == 0) {
			write_file(cg->cpu, "memory.swap.max", "0");
			snprintf(cg->mem, sizeof cg->mem, "%s", cg->cpu);
		}
		if (procs > 0 && write_file(cg->cpu, "pids.max", pval) == 0)
			snprintf(cg->pids, sizeof cg->pids, "%s", cg->cpu);
	}
	got = (cg->mem[0] ? CG_MEM : 0) | (cg->pids[0] ? CG_PIDS : 0);
	if (bytes && !(got & CG_MEM))
		fw_seterr(why, whylen, "no writable memory cgroup");
	else if (procs > 0 && !(got & CG_PIDS))
		fw_seterr(why, whylen, "no writable pids cgroup");
	return got;
}

/* Processes (threads) in the run's pids cgroup, or -1. */
static long cgroup_pids(const struct cgroup *cg)
{
	return cg->pids[0] ? (long)read_key(cg->pids, "pids.current", NULL) : -1;
}

/* Forks refused at the pids limit, or -1. */
static long long cgroup_fork_fails(const struct cgroup *cg)
{
	return cg->pids[0] ? read_key(cg->pids, "pids.events", "max") : -1;
}

static long long cgroup_oom_kills(const struct cgroup *cg)
{
	if (!cg->mem[0])
		return -1;
	return read_key(cg->mem, cg->v2 ? "memory.events" : "memory.oom_control", "oom_kill");
}

/* CPU seconds used by the run's tree, or -1 when not accounted. */
static double cgroup_cpu(const struct cgroup *cg)
{
	long long v;

	if (!cg->cpu[0])
		return -1;
	if (cg->v2) {
		v = read_key(cg->cpu, "cpu.stat", "usage_usec");
		return v < 0 ? -1 : v * 1e-6;
	}
	v = read_key(cg->cpu, "cpuacct.usage", NULL);
	return v < 0 ? -1 : v * 1e-9;
}

/* Peak memory of the run's tree in bytes, or 0 when not accounted. */
static uint64_t cgroup_peak(const struct cgroup *cg)
{
	long long v;

	if (!cg->mem[0])
		return 0;
	v = read_key(cg->mem, cg->v2 ? "memory.peak" : "memory.max_usage_in_bytes", NULL);
	return v < 0 ? 0 : (uint64_t)v;
}

static void rm_cgroup(char *dir)
{
	if (!dir[0])
		return;
	/* the namespace's last processes can take a moment to be released */
	for (useconds_t us = 100, waited = 0; waited < 2000000; waited += us) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			break;
		usleep(us);
		if (us < 20000)
			us *= 2;
	}
	dir[0] = 0;
}

static void cgroup_remove(struct cgroup *cg)
{
	if (cg->v2)
		cg->mem[0] = cg->pids[0] = 0; /* the same directory */
	rm_cgroup(cg->mem);
	rm_cgroup(cg->pids);
	rm_cgroup(cg->cpu);
}

/* ---- the process tree ---------------------------------------------------------- */

/* Signal every process whose pid namespace is ns; returns how many
 * processes (threads counted) are in it. */
static long ns_signal(ino_t ns, int sig)
{
	char path[300];
	struct dirent *e;
	struct stat st;
	long count = 0;
	DIR *d;

	if (!ns)
		return 0;
	d = opendir("/proc");
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/ns/pid", e->d_name);
		if (stat(path, &st) != 0 || st.st_ino != ns)
			continue;
		if (sig)
			kill(atoi(e->d_name), sig);
		else {
			/* count threads: RLIMIT_NPROC counts them too */
			char tp[300];
			DIR *t;
			struct dirent *te;
			snprintf(tp, sizeof tp, "/proc/%s/task", e->d_name);
			t = opendir(tp);
			if (!t)
				continue;
			while ((te = readdir(t)))
				if (te->d_name[0] != '.')
					count++;
			closedir(t);
		}
	}
	closedir(d);
	return count;
}

/* ---- the workspace's owner and set-ID bits ------------------------------------ */

/*
 * When the caller is root, the command runs as an unprivileged uid of the
 * host (opts.uid, opts.gid), so nothing it does can make a file root owns
 * — nor a set-user-ID-root program.  Before the run the workspace is
 * handed to that uid (WALK_GIVE); after it, handed back to the caller
 * (WALK_TAKE: chown(2) by root clears set-ID bits of regular files, and
 * the callers' libgit2 opens only repositories its own user owns).  Every
 * run, root or not, then clears set-user-ID and set-group-ID bits on
 * every regular file left (WALK_TAKE with no owner change), recording the
 * first few.  Nothing of the sandbox runs during either walk, so nothing
 * moves a file between the look and the change.
 *
 * The walk has no depth limit and holds one directory open at a time: each
 * level keeps the names of its subdirectories, and the walk climbs back
 * through "..", checked against the inode it left.  Symlinks are never
 * followed; other file systems than the workspace's are not entered.
 */
enum walk_mode { WALK_GIVE, WALK_TAKE };

struct walk {
	enum walk_mode mode;
	int chown;                 /* change owners (uid, gid below) */
	uid_t uid, from;           /* the new owner; TAKE: only entries of from */
	gid_t gid;
	dev_t dev;
	struct fw_sandbox_result *res;
	double at;
	int cleared;               /* set-ID bits cleared so far */
	int failed;                /* GIVE: an entry could not be handed over */
};

struct level {
	char **names;              /* subdirectories still to enter, owned */
	size_t n, next;
	dev_t dev;
	ino_t ino;
	size_t rel_len;            /* length of the path below the top */
};

/* Apply the walk to entry name of directory fd whose status is st. */
static void walk_entry(struct walk *w, int fd, const char *name, const struct stat *st,
		       const char *rel)
{
	if (w->mode == WALK_TAKE && S_ISREG(st->st_mode) && (st->st_mode & (S_ISUID | S_ISGID))) {
		mode_t keep = st->st_mode & 07777 & ~(mode_t)(S_ISUID | S_ISGID);
		size_t rl = strlen(rel);
		/* a long path by its end, which names the file */
		if (fchmodat(fd, name, keep, 0) == 0 && w->cleared++ < 8 && w->res)
			add_event(w->res, "setid", w->at, "set-ID bits cleared on %s%s%s%.200s",
				  rl > 240 ? "..." : "", rl > 240 ? rel + rl - 240 : rel,
				  rl ? "/" : "", name);
	}
	if (!w->chown)
		return;
	if (w->mode == WALK_GIVE ? (st->st_uid != w->uid || st->st_gid != w->gid)
				 : st->st_uid == w->from) {
		if (fchownat(fd, name, w->uid, w->gid, AT_SYMLINK_NOFOLLOW) != 0 &&
		    w->mode == WALK_GIVE)
			w->failed = 1;
	}
}

/* Read the entries of directory fd: apply the walk to each, and collect
 * the names of subdirectories on the same device.  0, or -1 (errno). */
static int walk_dir(struct walk *w, int fd, struct level *lv, const char *rel)
{
	struct dirent *e;
	size_t cap = 0;
	int dfd = dup(fd);
	DIR *d;

	if (dfd < 0 || !(d = fdopendir(dfd))) {
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	while ((e = readdir(d))) {
		struct stat st;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_dev != w->dev)
			continue;
		walk_entry(w, fd, e->d_name, &st, rel);
		if (!S_ISDIR(st.st_mode))
			continue;
		if (lv->n == cap) {
			size_t nc = cap ? 2 * cap : 8;
			char **v = realloc(lv->names, nc * sizeof *v);
			if (!v)
				goto oom;
			lv->names = v;
			cap = nc;
		}
		if (!(lv->names[lv->n] = strdup(e->d_name)))
			goto oom;
		lv->n++;
	}
	closedir(d);
	return 0;
oom:
	closedir(d);
	errno = ENOMEM;
	return -1;
}

static void level_free(struct level *lv)
{
	for (size_t i = 0; i < lv->n; i++)
		free(lv->names[i]);
	free(lv->names);
	memset(lv, 0, sizeof *lv);
}

/* Walk the tree at path (the top included).  Returns 0, or -1 with errno
 * when a directory could not be read or climbed back from. */
static int walk_tree(struct walk *w, const char *path)
{
	struct level *stack = NULL;
	size_t depth = 0, cap = 0;
	char rel[PATH_MAX] = "";
	struct stat st;
	int fd, rc = -1, saved = 0;

	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0)
		goto out;
	w->dev = st.st_dev;
	/* the top: its owner, never set-ID bits (a directory) */
	if (w->chown && (w->mode == WALK_GIVE ? (st.st_uid != w->uid || st.st_gid != w->gid)
					      : st.st_uid == w->from) &&
	    fchown(fd, w->uid, w->gid) != 0 && w->mode == WALK_GIVE)
		w->failed = 1;
	for (;;) {
		struct level *lv;
		if (depth == cap) {
			size_t nc = cap ? 2 * cap : 16;
			struct level *v = realloc(stack, nc * sizeof *v);
			if (!v) {
				errno = ENOMEM;
				goto out;
			}
			stack = v;
			cap = nc;
		}
		lv = &stack[depth++];
		memset(lv, 0, sizeof *lv);
		lv->dev = st.st_dev;
		lv->ino = st.st_ino;
		lv->rel_len = strlen(rel);
		if (walk_dir(w, fd, lv, rel) != 0)
			goto out;
		/* the next subdirectory to enter, climbing back as levels end */
		for (;;) {
			int sub;
			lv = &stack[depth - 1];
			rel[lv->rel_len] = 0;
			if (lv->next < lv->n) {
				const char *name = lv->names[lv->next++];
				sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (sub < 0 || fstat(sub, &st) != 0 || st.st_dev != w->dev) {
					if (sub >= 0)
						close(sub);
					continue;
				}
				if (lv->rel_len + strlen(name) + 2 < sizeof rel)
					snprintf(rel + lv->rel_len, sizeof rel - lv->rel_len, "%s%s",
						 lv->rel_len ? "/" : "", name);
				close(fd);
				fd = sub;
				break;
			}
			level_free(lv);
			if (--depth == 0) {
				rc = 0;
				goto out;
			}
			sub = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			close(fd);
			fd = sub;
			if (fd < 0 || fstat(fd, &st) != 0 || st.st_ino != stack[depth - 1].ino ||
			    st.st_dev != stack[depth - 1].dev) {
				errno = ESTALE;
				goto out;
			}
		}
	}
out:
	saved = errno;
	if (fd >= 0)
		close(fd);
	while (depth > 0)
		level_free(&stack[--depth]);
	free(stack);
	errno = saved;
	return rc;
}

/* ---- capture --------------------------------------------------------------- */

struct capture {
	int fd;
	size_t cap;
	struct fw_sandbox_output *o;
};

/* Read what is there; 1 at EOF, 0 otherwise, -1 out of memory. */
static int capture_read(struct capture *c)
{
	char buf[65536];
	ssize_t n = read(c->fd, buf, sizeof buf);

	if (n < 0)
		return (errno == EINTR || errno == EAGAIN) ? 0 : 1;
	if (n == 0)
		return 1;
	c->o->total += (uint64_t)n;
	if (c->o->len < c->cap) {
		size_t keep = c->cap - c->o->len;
		char *d;
		if (keep > (size_t)n)
			keep = (size_t)n;
		d = realloc(c->o->data, c->o->len + keep + 1);
		if (!d)
			return -1;
		memcpy(d + c->o->len, buf, keep);
		c->o->len += keep;
		d[c->o->len] = 0;
		c->o->data = d;
	}
	c->o->truncated = c->o->total > c->o->len;
	return 0;
}

/* ---- the run --------------------------------------------------------------- */

static int valid_env(const char *kv)
{
	const char *eq = strchr(kv, '=');
	return eq && eq != kv;
}

/* The shell prologue that starts the proxy relay inside the sandbox, waits
 * (at most ~2 s) until it listens on 127.0.0.1 — read from /proc/net/tcp
 * with shell builtins, no process per look — then runs the command. */
static const char relay_script[] =
	"(exec socat TCP-LISTEN:%d,bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:%s"
	" </dev/null >/dev/null 2>&1 &)\n"
	"ready() {\n"
	"  while read -r _ l _ s _; do\n"
	"    [ \"$l $s\" = \"0100007F:%04X 0A\" ] && return 0\n"
	"  done </proc/net/tcp\n"
	"  return 1\n"
	"}\n"
	"i=0\n"
	"until ready; do i=$((i+1)); [ $i -gt 1000 ] && break; sleep 0.002; done\n"
	"exec \"$@\"\n";

/*
 * When the command runs as the sandbox's uid, bwrap runs as that uid too
 * and can reach no path that root alone may search (a workspace under a
 * mktemp(1) directory, say).  So the caller makes a stage: a directory
 * under /tmp that others may search but not read, holding one empty
 * mount point per source; the child, still root, in a mount namespace of
 * its own, binds each source on its mount point, and bwrap binds from
 * there.  Nothing of this is visible outside the child's namespace.
 */
#define STAGE_MAX (2 + 64 + 32) /* workspace, proxy, binds, an image root's entries */

struct stage {
	int drop;                 /* run as uid, gid (the caller is root) */
	uid_t uid;
	gid_t gid;
	char dir[64];             /* "" when sources are bound directly */
	char *src[STAGE_MAX];     /* the child binds src[i] on dst[i] */
	char *dst[STAGE_MAX];
	int isdir[STAGE_MAX];
	int n;
};

/* The path bwrap should bind for host path src: src itself, or a fresh
 * mount point of the stage (in out).  0, or -1 with a message. */
static int stage_add(struct stage *sg, const char *src, char *out, size_t outlen,
		     char *err, size_t errlen)
{
	struct stat st;
	int fd;

	if (!sg->dir[0]) {
		snprintf(out, outlen, "%s", src);
		return 0;
	}
	if (sg->n == STAGE_MAX) {
		fw_seterr(err, errlen, "too many binds");
		return -1;
	}
	if (stat(src, &st) != 0) {
		fw_seterr(err, errlen, "'%s': %s", src, strerror(errno));
		return -1;
	}
	snprintf(out, outlen, "%s/%d", sg->dir, sg->n);
	sg->isdir[sg->n] = S_ISDIR(st.st_mode);
	if (sg->isdir[sg->n] ? mkdir(out, 0700) != 0
			     : (fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0 ||
				       close(fd) != 0) {
		fw_seterr(err, errlen, "cannot create %s: %s", out, strerror(errno));
		return -1;
	}
	sg->src[sg->n] = strdup(src);
	sg->dst[sg->n] = strdup(out);
	sg->n++;
	if (!sg->src[sg->n - 1] || !sg->dst[sg->n - 1]) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* Remove the stage's mount points and the stage. */
static void stage_free(struct stage *sg)
{
	for (int i = 0; i < sg->n; i++) {
		if (sg->dst[i])
			(sg->isdir[i] ? rmdir : unlink)(sg->dst[i]);
		free(sg->src[i]);
		free(sg->dst[i]);
	}
	sg->n = 0;
	if (sg->dir[0])
		rmdir(sg->dir);
	sg->dir[0] = 0;
}

/* The top-level entries of an image's root as the sandbox's system:
 * links recreated, directories and files bound read-only, the
 * directories the sandbox makes itself left out. */
static int bind_root(struct strv *a, const char *root, struct stage *sg, char *err,
		     size_t errlen)
{
	static const char *own[] = { "proc", "dev", "sys", "tmp", "run", NULL };
	char p[PATH_MAX], path[PATH_MAX], target[PATH_MAX];
	struct dirent *e;
	struct stat st;
	DIR *d = opendir(root);
	int rc = 0;

	if (!d) {
		fw_seterr(err, errlen, "root '%s': %s", root, strerror(errno));
		return -1;
	}
	while (rc == 0 && (e = readdir(d))) {
		const char **q = own;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		while (*q && strcmp(*q, e->d_name))
			q++;
		if (*q || !strcmp(e->d_name, FW_SANDBOX_WORKDIR + 1))
			continue;
		snprintf(p, sizeof p, "%s/%.255s", root, e->d_name);
		if (lstat(p, &st) != 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(p, target, sizeof target - 1);
			if (n <= 0)
				continue;
			target[n] = 0;
			sv_push(a, "--symlink");
			sv_push(a, target);
			sv_pushf(a, "/%.255s", e->d_name);
		} else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
			rc = stage_add(sg, p, path, sizeof path, err, errlen);
			sv_push(a, "--ro-bind");
			sv_push(a, path);
			sv_pushf(a, "/%.255s", e->d_name);
		}
	}
	closedir(d);
	return rc;
}

static int build_argv(const struct fw_sandbox_opts *o, char *const argv[],
		      const char *proxy_sock, struct strv *a, struct files *f,
		      struct stage *sg, char *err, size_t errlen)
{
	static const char *sys[] = { "/usr", "/bin", "/sbin", "/lib", "/lib32",
				     "/lib64", "/libx32", NULL };
	const char *cwd;
	char script[1024], path[PATH_MAX];

	sv_push(a, "bwrap");
	sv_push(a, "--unshare-user");
	if (sg->drop) {
		/* uid 0 inside, as when root ran bwrap itself: the sandbox's
		 * uid outside */
		sv_push(a, "--uid");
		sv_push(a, "0");
		sv_push(a, "--gid");
		sv_push(a, "0");
	}
	sv_push(a, "--unshare-pid");
	sv_push(a, "--unshare-ipc");
	sv_push(a, "--unshare-uts");
	sv_push(a, "--unshare-net");
	sv_push(a, "--unshare-cgroup-try");
	/* a nested user namespace would hand the command capabilities again */
	sv_push(a, "--disable-userns");
	sv_push(a, "--cap-drop");
	sv_push(a, "ALL");
	sv_push(a, "--die-with-parent");
	sv_push(a, "--new-session");
	sv_push(a, "--hostname");
	sv_push(a, "sandbox");
	if (o->root) {
		if (bind_root(a, o->root, sg, err, errlen) != 0)
			return -1;
	} else {
		for (const char **p = sys; *p; p++)
			bind_one(a, NULL, *p);
		bind_etc(a, f);
	}
	sv_push(a, "--proc");
	sv_push(a, "/proc");
	/* The sandbox's uid 0 is the host's root, and the kernel lets that
	 * uid write sysctls by file mode alone, capabilities or not
	 * (kernel.core_pattern would run a host program as root).  bwrap
	 * leaves /proc/sys writable here because the directory itself is
	 * not, so cover it with the host's, read-only. */
	sv_push(a, "--ro-bind");
	sv_push(a, "/proc/sys");
	sv_push(a, "/proc/sys");
	sv_push(a, "--ro-bind-try");
	sv_push(a, "/proc/sysrq-trigger");
	sv_push(a, "/proc/sysrq-trigger");
	sv_push(a, "--dev");
	sv_push(a, "/dev");
	sv_push(a, "--tmpfs");
	sv_push(a, "/tmp");
	if (o->workspace) {
		if (stage_add(sg, o->workspace, path, sizeof path, err, errlen) != 0)
			return -1;
		sv_push(a, "--bind");
		sv_push(a, path);
		sv_push(a, FW_SANDBOX_WORKDIR);
	}
	for (const char *const *b = o->rw_binds; b && *b; b++) {
		const char *colon = strchr(*b, ':');
		char src[PATH_MAX], *rsrc, *rws;
		size_t sl = colon ? (size_t)(colon - *b) : 0;
		int inside;
		if (!o->workspace || sl == 0 || sl >= sizeof src || colon[1] != '/') {
			fw_seterr(err, errlen, "bad read-write bind '%s'", *b);
			return -1;
		}
		memcpy(src, *b, sl);
		src[sl] = 0;
		/* inside the workspace, so that its walks cover it */
		rsrc = realpath(src, NULL);
		rws = realpath(o->workspace, NULL);
		inside = rsrc && rws && strncmp(rsrc, rws, strlen(rws)) == 0 &&
			 rsrc[strlen(rws)] == '/';
		free(rsrc);
		free(rws);
		if (!inside) {
			fw_seterr(err, errlen, "read-write bind '%s': not inside the workspace", src);
			return -1;
		}
		if (stage_add(sg, src, path, sizeof path, err, errlen) != 0)
			return -1;
		sv_push(a, "--bind");
		sv_push(a, path);
		sv_push(a, colon + 1);
	}
	for (const char *const *b = o->ro_binds; b && *b; b++) {
		const char *colon = strchr(*b, ':');
		char src[PATH_MAX];
		struct stat st;
		size_t sl = colon ? (size_t)(colon - *b) : strlen(*b);
		if (sl == 0 || sl >= sizeof src || (colon && colon[1] != '/')) {
			fw_seterr(err, errlen, "bad read-only bind '%s'", *b);
			return -1;
		}
		memcpy(src, *b, sl);
		src[sl] = 0;
		if (stat(src, &st) != 0) {
			fw_seterr(err, errlen, "read-only bind '%s': %s", src, strerror(errno));
			return -1;
		}
		if (stage_add(sg, src, path, sizeof path, err, errlen) != 0)
			return -1;
		sv_push(a, "--ro-bind");
		sv_push(a, path);
		sv_push(a, colon ? colon + 1 : src);
	}
	if (proxy_sock) {
		sv_push(a, "--bind");
		sv_push(a, proxy_sock);
		sv_push(a, PROXY_SOCK_INSIDE);
	}
	/* bwrap's root is a tmpfs: read-only too, so that only the
	 * workspace and /tmp take writes */
	sv_push(a, "--remount-ro");
	sv_push(a, "/");
	cwd = o->cwd ? o->cwd : o->workspace ? FW_SANDBOX_WORKDIR : "/tmp";
	sv_push(a, "--chdir");
	sv_push(a, cwd);
	sv_push(a, "--json-status-fd");
	sv_pushf(a, "%d", STATUS_FD);
	sv_push(a, "--");
	if (proxy_sock) {
		snprintf(script, sizeof script, relay_script, FW_SANDBOX_PROXY_PORT,
			 PROXY_SOCK_INSIDE, FW_SANDBOX_PROXY_PORT);
		sv_push(a, "/bin/sh");
		sv_push(a, "-c");
		sv_push(a, script);
		sv_push(a, "fw-sandbox");
	}
	for (char *const *p = argv; *p; p++)
		sv_push(a, *p);
	if (a->oom) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

static int build_env(const struct fw_sandbox_opts *o, int proxy, struct strv *e,
		     char *err, size_t errlen)
{
	char buf[128];

	sv_push(e, "PATH=" SANDBOX_PATH);
	sv_push(e, "HOME=/tmp");
	sv_push(e, "LANG=C.UTF-8");
	sv_push(e, "TZ=UTC");
	sv_push(e, "PYTHONHASHSEED=0");
	sv_push(e, "PYTHONDONTWRITEBYTECODE=1");
	sv_push(e, "TMPDIR=/tmp");
	if (proxy) {
		static const char *names[] = { "http_proxy", "HTTP_PROXY",
					       "https_proxy", "HTTPS_PROXY", NULL };
		for (const char **n = names; *n; n++) {
			snprintf(buf, sizeof buf, "%s=http://127.0.0.1:%d", *n,
				 FW_SANDBOX_PROXY_PORT);
			sv_push(e, buf);
		}
		/* the sandbox's own loopback stays direct: tests serve on it */
		sv_push(e, "no_proxy=localhost,127.0.0.1,::1");
		sv_push(e, "NO_PROXY=localhost,127.0.0.1,::1");
	}
	for (const char *const *p = o->env; p && *p; p++) {
		if (!valid_env(*p)) {
			fw_seterr(err, errlen, "bad environment entry '%s'", *p);
			return -1;
		}
		env_set(e, *p);
	}
	if (e->oom) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

static void set_limit(int res, rlim_t soft, rlim_t hard)
{
	struct rlimit rl = { soft, hard };

	setrlimit(res, &rl);
}

/* In the forked child: say why on fd (its stderr pipe) and end with
 * status 126, which the caller reads as a sandbox not set up. */
static void child_fail(int fd, const char *msg)
{
	if (write(fd, msg, strlen(msg)) < 0)
		_exit(126);
	_exit(126);
}

/* In the forked child: only async-signal-safe calls until execve. */
static void child(const struct fw_sandbox_opts *o, const char *bwrap,
		  char **argv, char **envp, int in, int out, int errfd, int st,
		  const struct files *f, const struct cgroup *cg, int use_as, pid_t parent,
		  int nwsock, const struct stage *sg)
{
	int fds[4 + MAX_FILES] = { in, out, errfd, st }, n = 4 + f->n;

	/* bwrap's --die-with-parent arms itself only once bwrap runs: a
	 * caller killed before that would leave the sandbox orphaned with no
	 * one to enforce its timeout.  Arm it here (it survives execve) and
	 * check that the caller is still there. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(126);
	/* then the network watch: its filter covers bwrap and all it
	 * starts */
	if (nwsock >= 0 ? fw_nw_child(nwsock) != 0 : fw_nw_plain() != 0)
		child_fail(errfd, "fw-sandbox: cannot install the seccomp filter\n");
	for (int i = 0; i < f->n; i++)
		fds[4 + i] = f->fd[i];
	/* move every end above the targets so that dup2 into 0..n-1 cannot
	 * clobber one still to be placed */
	for (int i = 0; i < n; i++) {
		fds[i] = fcntl(fds[i], F_DUPFD, n + 8);
		if (fds[i] < 0)
			_exit(126);
	}
	for (int i = 0; i < n; i++)
		if (dup2(fds[i], i) < 0)
			_exit(126);
	syscall(SYS_close_range, (unsigned)n, ~0U, 0);

	/* join the run's cgroups ("0" is the writer itself); bwrap and all
	 * it starts inherit them */
	if (cg->v2) {
		if (cg->cpu[0] && write_file(cg->cpu, "cgroup.procs", "0") != 0)
			_exit(126);
	} else if ((cg->mem[0] && write_file(cg->mem, "cgroup.procs", "0") != 0) ||
		   (cg->pids[0] && write_file(cg->pids, "cgroup.procs", "0") != 0) ||
		   (cg->cpu[0] && write_file(cg->cpu, "cgroup.procs", "0") != 0)) {
		_exit(126);
	}
	/* the stage's binds, then the sandbox's uid (setgroups first: root's
	 * groups would go along); a change of credentials clears the
	 * parent-death signal, so it is armed again */
	if (sg->n) {
		if (unshare(CLONE_NEWNS) != 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
			child_fail(2, "fw-sandbox: cannot make the stage's mount namespace\n");
		for (int i = 0; i < sg->n; i++)
			if (mount(sg->src[i], sg->dst[i], NULL, MS_BIND | MS_REC, NULL) != 0)
				child_fail(2, "fw-sandbox: cannot bind a source on the stage\n");
	}
	if (sg->drop) {
		if (setgroups(0, NULL) != 0 || setresgid(sg->gid, sg->gid, sg->gid) != 0 ||
		    setresuid(sg->uid, sg->uid, sg->uid) != 0)
			child_fail(2, "fw-sandbox: cannot take the sandbox's uid\n");
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
			_exit(126);
	}
	if (o->cpu_s > 0)
		set_limit(RLIMIT_CPU, (rlim_t)o->cpu_s, (rlim_t)o->cpu_s + 1);
	if (o->mem_bytes > 0 && use_as)
		set_limit(RLIMIT_AS, o->mem_bytes, o->mem_bytes);
	/* RLIMIT_NPROC counts every process of the uid on the host, other
	 * runs' too: only where no pids cgroup counts this run's */
	if (o->procs > 0 && !cg->pids[0])
		set_limit(RLIMIT_NPROC, (rlim_t)o->procs, (rlim_t)o->procs);
	if (o->fsize_bytes > 0)
		set_limit(RLIMIT_FSIZE, o->fsize_bytes, o->fsize_bytes);
	if (o->nofile > 0)
		set_limit(RLIMIT_NOFILE, (rlim_t)o->nofile, (rlim_t)o->nofile);
	set_limit(RLIMIT_CORE, 0, 0);
	/* the caller may block or ignore signals; the command starts clean */
	{
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		for (int s = 1; s < NSIG; s++)
			if (s != SIGKILL && s != SIGSTOP)
				signal(s, SIG_DFL);
	}
	execve(bwrap, argv, envp);
	_exit(127);
}

/* Pull "key": N out of bwrap's JSON status text; 0 and *v, or -1. */
static int json_num(const char *s, const char *key, long long *v)
{
	const char *p = strstr(s, key);

	if (!p)
		return -1;
	p += strlen(key);
	while (*p == '"' || *p == ':' || *p == ' ')
		p++;
	if (*p < '0' || *p > '9')
		return -1;
	*v = atoll(p);
	return 0;
}

/* Does the captured stderr carry a typical message of this failure? */
static int err_says(const struct fw_sandbox_result *res, const char *const *pats)
{
	if (!res->err.data)
		return 0;
	for (; *pats; pats++)
		if (strstr(res->err.data, *pats))
			return 1;
	return 0;
}

static void classify(const struct fw_sandbox_opts *o, struct fw_sandbox_result *res,
		     long long oom_kills, long long fork_fails)
{
	static const char *mem_msgs[] = { "MemoryError", "Cannot allocate memory",
					  "out of memory", "bad_alloc", "Out of memory", NULL };
	static const char *fsize_msgs[] = { "File too large", NULL };
	static const char *proc_msgs[] = { "Resource temporarily unavailable",
					   "fork: retry", "Cannot fork", "can't fork", NULL };
	int failed = res->signal != 0 || res->exit_code != 0;

	if (res->cause != FW_SANDBOX_OK)
		return;
	if (oom_kills > 0 && failed)
		res->cause = FW_SANDBOX_MEMORY;
	else if (res->signal == SIGXCPU ||
		 (o->cpu_s > 0 && res->signal == SIGKILL && res->cpu_s >= o->cpu_s))
		res->cause = FW_SANDBOX_CPU;
	else if (res->signal == SIGXFSZ ||
		 (o->fsize_bytes > 0 && failed && err_says(res, fsize_msgs)))
		res->cause = FW_SANDBOX_FSIZE;
	/* the messages count only where no cgroup tells: every run has
	 * limits, and a suite's own failure may well print them */
	else if (o->mem_bytes > 0 && !res->cgroup && failed && err_says(res, mem_msgs))
		res->cause = FW_SANDBOX_MEMORY;
	else if (o->procs > 0 && failed &&
		 (fork_fails > 0 || (fork_fails < 0 && err_says(res, proc_msgs))))
		res->cause = FW_SANDBOX_PROCS;
	else if (res->signal)
		res->cause = FW_SANDBOX_KILLED;
}

int fw_sandbox_run(const struct fw_sandbox_opts *o, char *const argv[],
		   struct fw_sandbox_result *res, char *err, size_t errlen)
{
	struct strv a = { 0 }, env = { 0 };
	struct cgroup cg = { .mem = "", .pids = "", .cpu = "" };
	struct fw_proxy *proxy = NULL;
	char bwrap[PATH_MAX], tmpdir[64] = "", sock[96] = "", why[256] = "";
	char status[4096] = "";
	int pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	int pst[2] = { -1, -1 }, in = -1, pidfd = -1, rc = -1, use_as = 1;
	int nws[2] = { -1, -1 };
	struct fw_nw *nw = NULL;
	char nwhy[256] = "";
	size_t stlen = 0;
	pid_t pid = -1, self;
	double t0 = now(), kill_at = 0, pinned_since = 0, next_count = 0;
	long long init_pid = 0, pidns = 0, exit_code = -1, oom_kills = -1, fails_at_pin = 0;
	int reported = 0, cgot = 0, timed_out = 0, bomb = 0, killed_hard = 0, reaped = 0, wstatus = 0;
	struct rusage ru;
	struct capture cap[2];
	struct files files = { .n = 0 };
	struct stage sg = { .drop = geteuid() == 0, .uid = o->uid, .gid = o->gid };
	int given = 0;

	memset(res, 0, sizeof *res);
	res->exit_code = -1;
	if (!argv || !argv[0]) {
		fw_seterr(err, errlen, "no command");
		return -1;
	}
	if (o->workspace) {
		struct stat st;
		if (stat(o->workspace, &st) != 0) {
			fw_seterr(err, errlen, "workspace '%s': %s", o->workspace, strerror(errno));
			return -1;
		}
		if (!S_ISDIR(st.st_mode)) {
			fw_seterr(err, errlen, "workspace '%s': not a directory", o->workspace);
			return -1;
		}
	}
	if (find_exe("bwrap", bwrap, sizeof bwrap) != 0) {
		fw_seterr(err, errlen, "bwrap not found on PATH (install bubblewrap)");
		return -1;
	}
	if (sg.drop && (o->uid == 0 || o->gid == 0)) {
		fw_seterr(err, errlen, "the sandbox's uid and gid must not be 0");
		return -1;
	}
	if (sg.drop) {
		/* /tmp, not TMPDIR: every uid may search it */
		snprintf(sg.dir, sizeof sg.dir, "/tmp/fw-sb-XXXXXX");
		if (!mkdtemp(sg.dir)) {
			fw_seterr(err, errlen, "cannot create %s: %s", sg.dir, strerror(errno));
			sg.dir[0] = 0;
			goto out;
		}
		if (chmod(sg.dir, 0711) != 0) {
			fw_seterr(err, errlen, "%s: %s", sg.dir, strerror(errno));
			goto out;
		}
	}
	if (o->workspace && sg.drop) {
		struct walk w = { .mode = WALK_GIVE, .chown = 1, .uid = o->uid, .gid = o->gid };
		given = 1;
		if (walk_tree(&w, o->workspace) != 0 || w.failed) {
			fw_seterr(err, errlen, "workspace '%s': cannot hand it to uid %u: %s",
			       o->workspace, o->uid, w.failed ? "chown failed" : strerror(errno));
			goto out;
		}
	}
	if (o->allow && o->allow[0]) {
		char socat[PATH_MAX];
		const char *tmp = getenv("TMPDIR");
		if (find_exe("socat", socat, sizeof socat) != 0 &&
		    access("/usr/bin/socat", X_OK) != 0) {
			fw_seterr(err, errlen, "socat not found (needed for --allow)");
			return -1;
		}
		if (!tmp || strlen(tmp) > 40)
			tmp = "/tmp";
		snprintf(tmpdir, sizeof tmpdir, "%s/fw-sb-XXXXXX", tmp);
		if (sg.drop) {
			/* the stage: the sandbox's uid reaches it */
			snprintf(sock, sizeof sock, "%s/proxy.sock", sg.dir);
			tmpdir[0] = 0;
		} else if (!mkdtemp(tmpdir)) {
			fw_seterr(err, errlen, "cannot create %s: %s", tmpdir, strerror(errno));
			tmpdir[0] = 0;
			goto out;
		} else {
			snprintf(sock, sizeof sock, "%s/proxy.sock", tmpdir);
		}
		proxy = fw_proxy_new(sock, o->allow, err, errlen);
		if (!proxy)
			goto out;
		if (sg.drop && chown(sock, o->uid, o->gid) != 0) {
			fw_seterr(err, errlen, "%s: %s", sock, strerror(errno));
			goto out;
		}
	}
	if (build_argv(o, argv, proxy ? sock : NULL, &a, &files, &sg, err, errlen) != 0 ||
	    build_env(o, proxy != NULL, &env, err, errlen) != 0)
		goto out;

	if (o->no_cgroup)
		snprintf(why, sizeof why, "cgroups turned off");
	else
		cgot = cgroup_make(&cg, o->mem_bytes, o->procs, why, sizeof why);
	if (cgot & CG_MEM) {
		res->cgroup = 1;
		/* the cgroup caps resident memory; an address-space cap on
		 * top breaks runtimes that reserve large mappings */
		use_as = 0;
	} else if (o->mem_bytes > 0) {
		add_event(res, "cgroup", 0, "memory cgroup unavailable (%s): "
			  "address-space limit only", why);
	}
	if (o->procs > 0 && !(cgot & CG_PIDS))
		add_event(res, "cgroup", 0, "pids cgroup unavailable (%s): a run above "
			  "the process limit is killed when seen",
			  o->no_cgroup ? "cgroups turned off" : "no writable pids cgroup");

	if (o->stdin_path) {
		in = open(o->stdin_path, O_RDONLY | O_CLOEXEC);
		if (in < 0) {
			fw_seterr(err, errlen, "stdin '%s': %s", o->stdin_path, strerror(errno));
			goto out;
		}
	} else {
		/* an empty pipe, not the host's /dev/null: stdin reads EOF
		 * however the host's /dev is kept */
		int p[2];
		if (pipe2(p, O_CLOEXEC) != 0) {
			fw_seterr(err, errlen, "pipe: %s", strerror(errno));
			goto out;
		}
		close(p[1]);
		in = p[0];
	}
	if (pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC) || pipe2(pst, O_CLOEXEC)) {
		fw_seterr(err, errlen, "pipe: %s", strerror(errno));
		goto out;
	}
	/* the run's ends of its pipes belong to the uid it runs as: a pipe
	 * is mode 0600 to its creator, and a command that opens its own
	 * stdout again by name (/dev/fd/1, /dev/stdout, $FW_REPORT at
	 * /dev/fd/3) would be refused */
	if (sg.drop && (fchown(pout[1], o->uid, o->gid) != 0 ||
			fchown(perr[1], o->uid, o->gid) != 0 ||
			(!o->stdin_path && fchown(in, o->uid, o->gid) != 0))) {
		fw_seterr(err, errlen, "pipe: fchown to uid %u: %s", (unsigned)o->uid, strerror(errno));
		goto out;
	}
	if (!fw_nw_enabled(nwhy, sizeof nwhy))
		add_event(res, "net-watch", 0, "direct network attempts are refused but not "
			  "recorded: %s", nwhy);
	else if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, nws) != 0) {
		fw_seterr(err, errlen, "socketpair: %s", strerror(errno));
		goto out;
	}

	self = getpid();
	for (;;) {
		int k;
		t0 = now();
		pid = fork();
		if (pid < 0) {
			fw_seterr(err, errlen, "fork: %s", strerror(errno));
			goto out;
		}
		if (pid == 0) {
			/* the parent's end: a read of the handshake must see
			 * the parent go */
			if (nws[0] >= 0)
				close(nws[0]);
			child(o, bwrap, a.v, env.v, in, pout[1], perr[1], pst[1],
			      &files, &cg, use_as, self, nws[1], &sg);
		}
		pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
		if (nws[0] < 0)
			break;
		close(nws[1]);
		nws[1] = -1;
		k = fw_nw_start(nws[0], pidfd, &nw, nwhy, sizeof nwhy);
		close(nws[0]);
		nws[0] = -1;
		if (k == 0 || k == 2)
			break;
		/* this machine cannot watch: say so, here and in every later
		 * run of the process */
		fw_nw_disable(nwhy);
		add_event(res, "net-watch", 0, "direct network attempts are refused but not "
			  "recorded: %s", nwhy);
		if (k == 1)
			break;
		/* the child was told to exit before it did anything: again,
		 * unwatched */
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		if (pidfd >= 0)
			close(pidfd);
		pidfd = -1;
	}
	close(pout[1]);
	close(perr[1]);
	close(pst[1]);
	pout[1] = perr[1] = pst[1] = -1;

	{
		size_t outcap = o->output_cap ? o->output_cap : FW_SANDBOX_OUTPUT_CAP;
		cap[0] = (struct capture){ pout[0], outcap, &res->out };
		cap[1] = (struct capture){ perr[0], outcap, &res->err };
	}
	for (;;) {
		struct pollfd pf[4 + FW_NW_MAXFDS];
		int nf = 0, wait_ms = 100, ipo = -1, ipe = -1, ips = -1, ipp = -1, inw = 0, nnw = 0;
		double t = now() - t0;

		if (!reaped && !timed_out && !bomb && o->timeout_s > 0 && t >= o->timeout_s) {
			timed_out = 1;
			add_event(res, "limit", t, "wall-clock timeout after %.3g s", o->timeout_s);
			ns_signal((ino_t)pidns, SIGTERM);
			kill_at = t + (o->grace_s > 0 ? o->grace_s : 0);
		}
		if (!reaped && o->procs > 0 && !timed_out && !bomb && t >= next_count) {
			long n = (cgot & CG_PIDS) ? cgroup_pids(&cg) : ns_signal((ino_t)pidns, 0);
			next_count = t + PROCS_POLL_S;
			if (!(cgot & CG_PIDS) && n > o->procs) {
				/* nothing enforces the limit: stop the run now */
				bomb = 1;
				add_event(res, "limit", t, "%ld processes over the limit of %ld: "
					  "tree killed", n, o->procs);
				kill_at = t;
			} else if (n >= o->procs) {
				/* at the limit for a second while forks keep
				 * being refused: a fork bomb (a pool that just
				 * sits at the limit is left alone) */
				long long fails = cgroup_fork_fails(&cg);
				if (!pinned_since) {
					pinned_since = t;
					fails_at_pin = fails;
				} else if (t - pinned_since >= PROCS_PINNED_S &&
					   (fails < 0 || fails > fails_at_pin)) {
					bomb = 1;
					add_event(res, "limit", t, "process limit %ld held for %.1f s: "
						  "tree killed", o->procs, t - pinned_since);
					kill_at = t;
				}
			} else {
				pinned_since = 0;
			}
		}
		if (!reaped && (timed_out || bomb) && !killed_hard && t >= kill_at) {
			/* the init's death takes the namespace with it, and
			 * bwrap reports once the namespace is empty */
			killed_hard = 1;
			if (init_pid > 0)
				kill((pid_t)init_pid, SIGKILL);
			else
				kill(pid, SIGKILL);
		}
		if (!reaped && killed_hard == 1 && t >= kill_at + 2.0) {
			killed_hard = 2;
			kill(pid, SIGKILL);
		}

		if (pout[0] >= 0) { pf[nf] = (struct pollfd){ pout[0], POLLIN, 0 }; ipo = nf++; }
		if (perr[0] >= 0) { pf[nf] = (struct pollfd){ perr[0], POLLIN, 0 }; ipe = nf++; }
		if (pst[0] >= 0) { pf[nf] = (struct pollfd){ pst[0], POLLIN, 0 }; ips = nf++; }
		if (!reaped && pidfd >= 0) { pf[nf] = (struct pollfd){ pidfd, POLLIN, 0 }; ipp = nf++; }
		if (!reaped && nw) {
			inw = nf;
			nnw = fw_nw_pollfds(nw, pf + nf);
			nf += nnw;
		}
		if (reaped && nf == 0)
			break;
		if (o->timeout_s > 0 && !timed_out) {
			double left = o->timeout_s - t;
			wait_ms = left <= 0 ? 0 : left < 0.1 ? (int)(left * 1000) + 1 : 100;
		} else if ((timed_out || bomb) && !killed_hard) {
			wait_ms = (int)((kill_at - t) * 1000) + 1;
			if (wait_ms > 100)
				wait_ms = 100;
		}
		if (o->procs > 0 && wait_ms > (int)(PROCS_POLL_S * 1000))
			wait_ms = (int)(PROCS_POLL_S * 1000);
		if (poll(pf, nf, reaped ? 1000 : wait_ms) < 0 && errno != EINTR) {
			fw_seterr(err, errlen, "poll: %s", strerror(errno));
			break;
		}
		/* a watched process waits for its answer: serve it first */
		if (nnw)
			fw_nw_service(nw, pf + inw, nnw);
		for (int k = 0; k < 2; k++) {
			int ip = k ? ipe : ipo;
			if (ip >= 0 && pf[ip].revents) {
				int r = capture_read(&cap[k]);
				if (r != 0) {
					close(cap[k].fd);
					if (k)
						perr[0] = -1;
					else
						pout[0] = -1;
				}
			}
		}
		if (ips >= 0 && pf[ips].revents) {
			ssize_t n = read(pst[0], status + stlen, sizeof status - 1 - stlen);
			if (n > 0) {
				stlen += (size_t)n;
				status[stlen] = 0;
				if (!init_pid)
					json_num(status, "child-pid", &init_pid);
				if (!pidns)
					json_num(status, "pid-namespace", &pidns);
				json_num(status, "exit-code", &exit_code);
				/* a timeout that fired before the namespace existed */
				if (timed_out && pidns && !killed_hard)
					ns_signal((ino_t)pidns, SIGTERM);
			} else if (n == 0 || errno != EINTR) {
				close(pst[0]);
				pst[0] = -1;
			}
		}
		if ((ipp >= 0 && pf[ipp].revents) || (pidfd < 0 && !reaped)) {
			pid_t w = wait4(pid, &wstatus, pidfd < 0 ? WNOHANG : 0, &ru);
			if (w == pid) {
				reaped = 1;
				res->wall_s = now() - t0;
			}
		}
		/* once bwrap is gone nothing can hold the pipes but strays that
		 * escaped the namespace, which cannot happen; still, never hang */
		if (reaped && now() - t0 > res->wall_s + 2.0)
			break;
	}
	if (!reaped) {
		kill(pid, SIGKILL);
		wait4(pid, &wstatus, 0, &ru);
		res->wall_s = now() - t0;
	}
	pid = -1;

	res->cpu_s = cgroup_cpu(&cg);
	res->max_rss = cgroup_peak(&cg);
	reported = exit_code >= 0;
	if (exit_code < 0) {
		/* bwrap died before reporting: it failed to set up, or was
		 * killed by us */
		if (WIFEXITED(wstatus))
			exit_code = WEXITSTATUS(wstatus);
		else
			exit_code = 128 + WTERMSIG(wstatus);
	}
	/* bwrap reports a signalled command as 128+N, as sh does */
	if (exit_code > 128 && exit_code < 128 + NSIG) {
		res->signal = (int)exit_code - 128;
		res->exit_code = -1;
	} else {
		res->exit_code = (int)exit_code;
	}
	if (o->workspace) {
		struct walk w = { .mode = WALK_TAKE, .chown = given, .uid = geteuid(),
				  .gid = getegid(), .from = o->uid, .res = res, .at = res->wall_s };
		given = 0;
		if (walk_tree(&w, o->workspace) != 0)
			add_event(res, "setid", res->wall_s, "the workspace could not be walked "
				  "to the end: %s", strerror(errno));
	}
	/* bwrap reports no exit code when it failed itself: its exec of the
	 * command ("bwrap: execvp CMD: ...") reads as a shell's "command
	 * not found"; anything else is a sandbox that could not be set up
	 * (a working directory that does not exist inside, say), as is the
	 * failure of the child before bwrap ("fw-sandbox: ..., 126) */
	if (!reported && !timed_out && !bomb && res->err.data &&
	    ((res->exit_code == 1 && strncmp(res->err.data, "bwrap: ", 7) == 0) ||
	     (res->exit_code == 126 && strncmp(res->err.data, "fw-sandbox: ", 12) == 0))) {
		if (strncmp(res->err.data, "bwrap: execvp ", 14) == 0) {
			res->exit_code = 127;
		} else {
			fw_seterr(err, errlen, "%.*s", (int)strcspn(res->err.data, "\n"),
			       res->err.data);
			goto out;
		}
	}
	if (cg.mem[0])
		oom_kills = cgroup_oom_kills(&cg);
	if (timed_out)
		res->cause = FW_SANDBOX_TIMEOUT;
	else if (bomb)
		res->cause = FW_SANDBOX_PROCS;
	else
		classify(o, res, oom_kills, cgroup_fork_fails(&cg));
	/* recorded even when the command survived the loss of a child */
	if (oom_kills > 0)
		add_event(res, "limit", res->wall_s, "memory cgroup killed %lld process(es)",
			  oom_kills);
	rc = 0;
out:
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	if (pidfd >= 0)
		close(pidfd);
	for (int *p = (int[]){ pout[0], pout[1], perr[0], perr[1], pst[0], pst[1], in,
			       nws[0], nws[1] }, k = 0;
	     k < 9; k++)
		if (p[k] >= 0)
			close(p[k]);
	if (nw) {
		struct fw_nw_event *ev = NULL;
		size_t n = 0, more = 0;
		fw_nw_take(nw, &ev, &n, &more);
		for (size_t i = 0; i < n; i++) {
			if (rc == 0)
				add_event(res, ev[i].kind, ev[i].at - t0, "%s", ev[i].detail);
			free(ev[i].detail);
		}
		free(ev);
		if (rc == 0 && more)
			add_event(res, "net-denied", res->wall_s, "%zu more direct network "
				  "attempts not listed", more);
		fw_nw_free(nw);
	}
	for (int i = 0; i < files.n; i++)
		close(files.fd[i]);
	cgroup_remove(&cg);
	if (proxy) {
		struct fw_proxy_event *ev = NULL;
		size_t n = 0;
		if (fw_proxy_take_events(proxy, &ev, &n) == 0) {
			for (size_t i = 0; i < n; i++) {
				if (rc == 0)
					add_event(res, ev[i].allowed ? "net-allowed" : "net-denied",
						  ev[i].at - t0, "%s", ev[i].request);
				free(ev[i].request);
			}
			free(ev);
		}
		fw_proxy_free(proxy);
	}
	if (sock[0])
		unlink(sock);
	if (tmpdir[0])
		rmdir(tmpdir);
	if (given) {
		/* the run did not happen: the workspace goes back all the same */
		struct walk w = { .mode = WALK_TAKE, .chown = 1, .uid = geteuid(),
				  .gid = getegid(), .from = o->uid };
		walk_tree(&w, o->workspace);
	}
	stage_free(&sg);
	if (rc == 0)
		sort_events(res);
	sv_free(&a);
	sv_free(&env);
	if (rc != 0)
		fw_sandbox_result_free(res);
	return rc;
}

int fw_sandbox_available(char *err, size_t errlen)
{
	struct fw_sandbox_opts o;
	struct fw_sandbox_result r;
	char *argv[] = { "true", NULL };
	int rc;

	fw_sandbox_opts_init(&o);
	o.timeout_s = 10;
	if (fw_sandbox_run(&o, argv, &r, err, errlen) != 0)
		return -1;
	rc = r.exit_code == 0 ? 0 : -1;
	if (rc)
		fw_seterr(err, errlen, "bwrap cannot create the sandbox: %.200s",
		       r.err.data ? r.err.data : "no message");
	fw_sandbox_result_free(&r);
	return rc;
}

int fw_sandbox_net_watch(char *why, size_t whylen)
{
	return fw_nw_probe(why, whylen);
}
