/* Unit tests for fw_sandbox (the clean room) and fw_proxy (its network
 * filter).  They run real bubblewrap; the proxy tests speak HTTP over the
 * proxy's Unix socket to a listener on 127.0.0.1. */
#include "test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fw_proxy.h"
#include "fw_sandbox.h"

static int run(struct fw_sandbox_opts *o, struct fw_sandbox_result *r, const char *script)
{
	char *argv[] = { "sh", "-c", (char *)script, NULL };
	char err[256] = "";
	int rc = fw_sandbox_run(o, argv, r, err, sizeof err);

	if (rc != 0)
		printf("# fw_sandbox_run: %s\n", err);
	return rc;
}

TEST(cause_names_are_stable)
{
	CHECK_STR(fw_sandbox_cause_name(FW_SANDBOX_OK), "ok");
	CHECK_STR(fw_sandbox_cause_name(FW_SANDBOX_TIMEOUT), "timeout");
	CHECK_STR(fw_sandbox_cause_name(FW_SANDBOX_CPU), "cpu");
	CHECK_STR(fw_sandbox_cause_name(FW_SANDBOX_MEMORY), "memory");
	CHECK_STR(fw_sandbox_cause_name(FW_SANDBOX_FSIZE), "fsize");
	CHECK_STR(fw_sandbox_cause_name(FW_SANDBOX_PROCS), "procs");
	CHECK_STR(fw_sandbox_cause_name(FW_SANDBOX_KILLED), "killed");
	CHECK_STR(fw_sandbox_cause_name((enum fw_sandbox_cause)99), "killed");
}

TEST(opts_init_sets_documented_defaults)
{
	struct fw_sandbox_opts o;

	memset(&o, 0xff, sizeof o);
	fw_sandbox_opts_init(&o);
	CHECK(o.workspace == NULL && o.allow == NULL && o.env == NULL);
	CHECK(o.rw_binds == NULL && o.root == NULL && o.ro_binds == NULL);
	CHECK_EQ_INT(o.nofile, 1024);
	CHECK_EQ_INT(o.output_cap, FW_SANDBOX_OUTPUT_CAP);
	CHECK_NEAR(o.grace_s, FW_SANDBOX_GRACE, 1e-12);
	/* every run is bounded unless its caller says otherwise */
	CHECK_NEAR(o.timeout_s, 600, 0);
	CHECK_EQ_INT(o.cpu_s, 600);
	CHECK(o.mem_bytes == 4ull << 30);
	CHECK_EQ_INT(o.procs, 512);
	CHECK(o.fsize_bytes == 1ull << 30);
	CHECK_EQ_INT(o.uid, 65534);
	CHECK_EQ_INT(o.gid, 65534);
}

TEST(result_free_of_null_and_empty_is_safe)
{
	struct fw_sandbox_result r = { 0 };

	fw_sandbox_result_free(NULL);
	fw_sandbox_result_free(&r);
	CHECK(r.out.data == NULL);
}

TEST(allow_list_matching)
{
	const char *allow[] = { "pypi.org", "files.example.com:8443", "*.github.com",
				"127.0.0.1:*", "[::1]:9000", NULL };

	CHECK_EQ_INT(fw_proxy_allowed(allow, "pypi.org", 443), 1);
	CHECK_EQ_INT(fw_proxy_allowed(allow, "PyPI.org", 80), 1);
	CHECK_EQ_INT(fw_proxy_allowed(allow, "pypi.org", 8080), 0);
	CHECK_EQ_INT(fw_proxy_allowed(allow, "evil-pypi.org", 443), 0);
	CHECK_EQ_INT(fw_proxy_allowed(allow, "pypi.org.evil", 443), 0);
	CHECK_EQ_INT(fw_proxy_allowed(allow, "files.example.com", 8443), 1);
	CHECK_EQ_INT(fw_proxy_allowed(allow, "files.example.com", 443), 0);
	CHECK_EQ_INT(fw_proxy_allowed(allow, "api.github.com", 443), 1);
	CHECK_EQ_INT(fw_proxy_allowed(allow, "github.com", 443), 0);
	CHECK_EQ_INT(fw_proxy_allowed(allow, "xgithub.com", 443), 0);
	CHECK_EQ_INT(fw_proxy_allowed(allow, "127.0.0.1", 5), 1);
	CHECK_EQ_INT(fw_proxy_allowed(allow, "127.0.0.2", 80), 0);
	CHECK_EQ_INT(fw_proxy_allowed(allow, "::1", 9000), 1);
	CHECK_EQ_INT(fw_proxy_allowed(allow, "::1", 9001), 0);
	CHECK_EQ_INT(fw_proxy_allowed(NULL, "pypi.org", 443), 0);
}

static int parse(const char *head, struct fw_proxy_req *rq, char *out, size_t cap,
		 size_t *outlen, const char **why)
{
	return fw_proxy_parse(head, strlen(head), rq, out, cap, outlen, why);
}

TEST(proxy_parses_connect_and_absolute_http)
{
	struct fw_proxy_req rq;
	char out[512];
	size_t n;
	const char *why;

	CHECK_EQ_INT(parse("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org\r\n\r\n", &rq, out,
			   sizeof out, &n, &why), 0);
	CHECK_EQ_INT(rq.tunnel, 1);
	CHECK_STR(rq.host, "pypi.org");
	CHECK_EQ_INT(rq.port, 443);
	CHECK_STR(rq.desc, "CONNECT pypi.org:443");
	CHECK_EQ_INT(n, 0);

	CHECK_EQ_INT(parse("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", &rq, out, sizeof out, &n,
			   &why), 0);
	CHECK_STR(rq.host, "::1");
	CHECK_EQ_INT(rq.port, 8443);

	CHECK_EQ_INT(parse("GET http://Example.com?q=1 HTTP/1.0\r\nProxy-Connection: x\r\n"
			   "Accept: */*\r\nconnection: keep-alive\r\n\r\n",
			   &rq, out, sizeof out, &n, &why), 0);
	CHECK_EQ_INT(rq.tunnel, 0);
	CHECK_STR(rq.host, "Example.com");
	CHECK_EQ_INT(rq.port, 80);
	out[n] = 0;
	CHECK_STR(out, "GET /?q=1 HTTP/1.0\r\nAccept: */*\r\nConnection: close\r\n\r\n");
}

TEST(proxy_rejects_malformed_heads)
{
	static const char *bad[] = {
		"CONNECT pypi.org:443 HTTP/1.1\r\n",           /* no blank line */
		"GET /local HTTP/1.1\r\n\r\n",                /* origin form */
		"GET https://x.org/ HTTP/1.1\r\n\r\n",        /* https without CONNECT */
		"CONNECT pypi.org:0 HTTP/1.1\r\n\r\n",
		"CONNECT pypi.org:65536 HTTP/1.1\r\n\r\n",
		"CONNECT pypi.org:44a HTTP/1.1\r\n\r\n",
		"CONNECT :443 HTTP/1.1\r\n\r\n",
		"CONNECT pypi.org/x:443 HTTP/1.1\r\n\r\n",
		"CONNECT [::1 HTTP/1.1\r\n\r\n",
		"GET http://a b/ HTTP/1.1\r\n\r\n",
		"get http://x.org/ HTTP/1.1\r\n\r\n",
		"GET http://x.org/\r\n\r\n",
		"\r\n\r\n",
		NULL,
	};
	struct fw_proxy_req rq;
	char out[512];
	size_t n;
	const char *why = NULL;

	for (const char **b = bad; *b; b++) {
		int rc = parse(*b, &rq, out, sizeof out, &n, &why);
		if (rc != -1)
			printf("# accepted: %s\n", *b);
		CHECK_EQ_INT(rc, -1);
		CHECK(why != NULL && *why);
	}
	/* the rewritten head must fit the caller's buffer */
	CHECK_EQ_INT(parse("GET http://x.org/ HTTP/1.1\r\nA: b\r\n\r\n", &rq, out, 20, &n, &why),
		     -1);
}

TEST(runs_a_command_and_captures_both_streams)
{
	struct fw_sandbox_opts o;
	struct fw_sandbox_result r;

	fw_sandbox_opts_init(&o);
	o.timeout_s = 20;
	if (run(&o, &r, "echo out; echo err >&2; exit 7") != 0) {
		CHECK(0);
		return;
	}
	CHECK_EQ_INT(r.cause, FW_SANDBOX_OK);
	CHECK_EQ_INT(r.exit_code, 7);
	CHECK_EQ_INT(r.signal, 0);
	CHECK_STR(r.out.data, "out\n");
	CHECK_STR(r.err.data, "err\n");
	CHECK_EQ_INT(r.out.total, 4);
	CHECK(!r.out.truncated);
	CHECK(r.wall_s > 0 && r.wall_s < 20);
	fw_sandbox_result_free(&r);
}

TEST(environment_is_the_fixed_list_plus_additions)
{
	const char *env[] = { "EXTRA=1", "TZ=Europe/Paris", NULL };
	struct fw_sandbox_opts o;
	struct fw_sandbox_result r;

	setenv("FW_TEST_OUTSIDE", "leak", 1);
	fw_sandbox_opts_init(&o);
	o.env = env;
	if (run(&o, &r, "env | sort") != 0) {
		CHECK(0);
		return;
	}
	CHECK_STR(r.out.data, "EXTRA=1\nHOME=/tmp\nLANG=C.UTF-8\n"
		  "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin\n"
		  "PWD=/tmp\nPYTHONDONTWRITEBYTECODE=1\nPYTHONHASHSEED=0\nTMPDIR=/tmp\n"
		  "TZ=Europe/Paris\n");
	fw_sandbox_result_free(&r);
}

TEST(output_cap_keeps_the_head_and_counts_the_rest)
{
	struct fw_sandbox_opts o;
	struct fw_sandbox_result r;

	fw_sandbox_opts_init(&o);
	o.output_cap = 10;
	if (run(&o, &r, "printf 0123456789abcdef; printf 12345 >&2") != 0) {
		CHECK(0);
		return;
	}
	CHECK_STR(r.out.data, "0123456789");
	CHECK_EQ_INT(r.out.len, 10);
	CHECK_EQ_INT(r.out.total, 16);
	CHECK(r.out.truncated);
	CHECK_STR(r.err.data, "12345");
	CHECK(!r.err.truncated);
	fw_sandbox_result_free(&r);
}

TEST(stdin_comes_from_a_file_or_dev_null)
{
	char path[] = "/tmp/fw-test-stdin-XXXXXX";
	int fd = mkstemp(path);
	struct fw_sandbox_opts o;
	struct fw_sandbox_result r;

	CHECK(fd >= 0);
	CHECK(write(fd, "line\n", 5) == 5);
	close(fd);
	fw_sandbox_opts_init(&o);
	o.stdin_path = path;
	if (run(&o, &r, "cat") == 0) {
		CHECK_STR(r.out.data, "line\n");
		fw_sandbox_result_free(&r);
	}
	o.stdin_path = NULL;
	if (run(&o, &r, "cat; echo end") == 0) {
		CHECK_STR(r.out.data, "end\n");
		fw_sandbox_result_free(&r);
	}
	unlink(path);
}

TEST(workspace_and_read_only_binds)
{
	char ws[] = "/tmp/fw-test-ws-XXXXXX", ro[] = "/tmp/fw-test-ro-XXXXXX";
	char bind[128], file[160];
	const char *binds[] = { bind, NULL };
	struct fw_sandbox_opts o;
	struct fw_sandbox_result r;
	FILE *f;

	CHECK(mkdtemp(ws) && mkdtemp(ro));
	/* a bind is read as the sandbox's uid (nobody, when root runs
	 * this): what others may not read stays unread */
	CHECK(chmod(ro, 0755) == 0);
	snprintf(file, sizeof file, "%s/data", ro);
	f = fopen(file, "w");
	fputs("ro-data\n", f);
	fclose(f);
	snprintf(bind, sizeof bind, "%s:/data", ro);
	fw_sandbox_opts_init(&o);
	o.workspace = ws;
	o.ro_binds = binds;
	if (run(&o, &r, "cat /data/data; echo w > /work/f; echo x > /data/data || echo refused") == 0) {
		CHECK_STR(r.out.data, "ro-data\nrefused\n");
		fw_sandbox_result_free(&r);
	}
	snprintf(file, sizeof file, "%s/f", ws);
	CHECK(access(file, F_OK) == 0);
	unlink(file);
	snprintf(file, sizeof file, "%s/data", ro);
	unlink(file);
	rmdir(ws);
	rmdir(ro);
}

TEST(read_write_binds_lie_inside_the_workspace)
{
	char ws[] = "/tmp/fw-test-ws-XXXXXX", out[] = "/tmp/fw-test-out-XXXXXX";
	char bind[128], file[160], err[256] = "";
	const char *binds[] = { bind, NULL };
	char *argv[] = { "sh", "-c", "echo made > /env/f", NULL };
	struct fw_sandbox_opts o;
	struct fw_sandbox_result r;

	CHECK(mkdtemp(ws) && mkdtemp(out));
	snprintf(file, sizeof file, "%s/env", ws);
	CHECK(mkdir(file, 0755) == 0);
	/* a directory of the workspace, writable at /env */
	snprintf(bind, sizeof bind, "%s/env:/env", ws);
	fw_sandbox_opts_init(&o);
	o.workspace = ws;
	o.rw_binds = binds;
	if (fw_sandbox_run(&o, argv, &r, err, sizeof err) == 0) {
		CHECK_EQ_INT(r.exit_code, 0);
		fw_sandbox_result_free(&r);
	} else {
		printf("# fw_sandbox_run: %s\n", err);
		CHECK(0);
	}
	snprintf(file, sizeof file, "%s/env/f", ws);
	struct stat st;
	CHECK(stat(file, &st) == 0 && st.st_uid == geteuid());
	unlink(file);
	snprintf(file, sizeof file, "%s/env", ws);
	rmdir(file);
	/* one outside it is refused before anything runs */
	snprintf(bind, sizeof bind, "%s:/env", out);
	CHECK(fw_sandbox_run(&o, argv, &r, err, sizeof err) == -1);
	CHECK(strstr(err, "not inside the workspace") != NULL);
	fw_sandbox_result_free(&r);
	rmdir(ws);
	rmdir(out);
}

TEST(setup_errors_return_minus_one_with_a_message)
{
	const char *bad_bind[] = { "/no/such/dir", NULL };
	const char *bad_env[] = { "NOEQUALS", NULL };
	char *argv[] = { "true", NULL }, *none[] = { NULL };
	struct fw_sandbox_opts o;
	struct fw_sandbox_result r;
	char err[256] = "";

	fw_sandbox_opts_init(&o);
	o.workspace = "/no/such/workspace";
	CHECK_EQ_INT(fw_sandbox_run(&o, argv, &r, err, sizeof err), -1);
	CHECK(strstr(err, "/no/such/workspace") != NULL);
	CHECK(r.out.data == NULL && r.nevents == 0);
	fw_sandbox_result_free(&r);

	fw_sandbox_opts_init(&o);
	o.ro_binds = bad_bind;
	CHECK_EQ_INT(fw_sandbox_run(&o, argv, &r, err, sizeof err), -1);
	CHECK(strstr(err, "/no/such/dir") != NULL);

	fw_sandbox_opts_init(&o);
	o.env = bad_env;
	CHECK_EQ_INT(fw_sandbox_run(&o, argv, &r, err, sizeof err), -1);
	CHECK(strstr(err, "NOEQUALS") != NULL);

	/* a failure bwrap reports is a setup failure too, not a run */
	fw_sandbox_opts_init(&o);
	o.cwd = "/no/such/dir/inside";
	err[0] = 0;
	CHECK_EQ_INT(fw_sandbox_run(&o, argv, &r, err, sizeof err), -1);
	CHECK(strstr(err, "bwrap: ") == err && strstr(err, "/no/such/dir/inside"));
	CHECK(strchr(err, '\n') == NULL);

	fw_sandbox_opts_init(&o);
	CHECK_EQ_INT(fw_sandbox_run(&o, none, &r, err, sizeof err), -1);
	CHECK_EQ_INT(fw_sandbox_run(&o, argv, &r, NULL, 0), 0);
	fw_sandbox_result_free(&r);
}

TEST(timeout_kills_the_tree_and_says_so)
{
	struct fw_sandbox_opts o;
	struct fw_sandbox_result r;

	fw_sandbox_opts_init(&o);
	o.timeout_s = 0.3;
	o.grace_s = 0.1;
	if (run(&o, &r, "trap '' TERM; sleep 100 & while :; do :; done") != 0) {
		CHECK(0);
		return;
	}
	CHECK_EQ_INT(r.cause, FW_SANDBOX_TIMEOUT);
	CHECK_EQ_INT(r.signal, 9);
	CHECK_EQ_INT(r.exit_code, -1);
	CHECK(r.wall_s >= 0.3 && r.wall_s < 10);
	CHECK(r.nevents >= 1 && strcmp(r.events[0].kind, "limit") == 0);
	fw_sandbox_result_free(&r);
}

TEST(file_size_limit_is_the_cause)
{
	struct fw_sandbox_opts o;
	struct fw_sandbox_result r;

	fw_sandbox_opts_init(&o);
	o.fsize_bytes = 1 << 20;
	if (run(&o, &r, "head -c 5000000 /dev/zero > /tmp/big") != 0) {
		CHECK(0);
		return;
	}
	CHECK_EQ_INT(r.cause, FW_SANDBOX_FSIZE);
	fw_sandbox_result_free(&r);
}

static void *run_thread(void *arg)
{
	long i = (long)arg;
	char script[64], want[32];
	struct fw_sandbox_opts o;
	struct fw_sandbox_result r;
	int *ok = malloc(sizeof *ok);

	snprintf(script, sizeof script, "echo run-%ld", i);
	snprintf(want, sizeof want, "run-%ld\n", i);
	fw_sandbox_opts_init(&o);
	o.timeout_s = 20;
	*ok = run(&o, &r, script) == 0 && r.out.data && strcmp(r.out.data, want) == 0 &&
	      r.cause == FW_SANDBOX_OK;
	if (*ok)
		fw_sandbox_result_free(&r);
	return ok;
}

TEST(runs_in_parallel_threads_do_not_mix)
{
	pthread_t th[4];

	for (long i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, run_thread, (void *)i);
	for (int i = 0; i < 4; i++) {
		int *ok;
		pthread_join(th[i], (void **)&ok);
		CHECK(*ok);
		free(ok);
	}
}

/* ---- the proxy, spoken to directly ---------------------------------------- */

static int unix_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static size_t read_all(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	ssize_t k;

	while (n + 1 < cap && (k = read(fd, buf + n, cap - 1 - n)) > 0)
		n += (size_t)k;
	buf[n] = 0;
	return n;
}

TEST(proxy_denies_and_records_hosts_off_the_list)
{
	char dir[] = "/tmp/fw-test-proxy-XXXXXX", sock[96], buf[1024], err[256];
	const char *allow[] = { "allowed.example:443", NULL };
	struct fw_proxy_event *ev = NULL;
	struct fw_proxy *p;
	size_t n = 0;
	int fd;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(sock, sizeof sock, "%s/p.sock", dir);
	p = fw_proxy_new(sock, allow, err, sizeof err);
	CHECK(p != NULL);
	if (!p)
		return;
	fd = unix_connect(sock);
	CHECK(fd >= 0);
	CHECK(write(fd, "CONNECT evil.example:443 HTTP/1.1\r\nHost: x\r\n\r\n", 46) == 46);
	read_all(fd, buf, sizeof buf);
	close(fd);
	CHECK(strncmp(buf, "HTTP/1.1 403 ", 13) == 0);
	CHECK(strstr(buf, "evil.example:443") != NULL);

	fd = unix_connect(sock);
	CHECK(write(fd, "GET /relative HTTP/1.1\r\n\r\n", 26) == 26);
	read_all(fd, buf, sizeof buf);
	close(fd);
	CHECK(strncmp(buf, "HTTP/1.1 400 ", 13) == 0);

	CHECK_EQ_INT(fw_proxy_take_events(p, &ev, &n), 0);
	CHECK_EQ_INT(n, 1);
	if (n == 1) {
		CHECK_EQ_INT(ev[0].allowed, 0);
		CHECK_STR(ev[0].request, "CONNECT evil.example:443");
		free(ev[0].request);
	}
	free(ev);
	fw_proxy_free(p);
	CHECK(access(sock, F_OK) != 0);
	rmdir(dir);
}

TEST(proxy_forwards_plain_http_in_origin_form_with_connection_close)
{
	char dir[] = "/tmp/fw-test-proxy-XXXXXX", sock[96], buf[2048], req[512], err[256];
	char allow_entry[64];
	const char *allow[] = { allow_entry, NULL };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof sa;
	struct fw_proxy *p;
	int lfd, fd, ufd, port;
	ssize_t k;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(lfd, 4) == 0);
	getsockname(lfd, (struct sockaddr *)&sa, &sl);
	port = ntohs(sa.sin_port);
	snprintf(allow_entry, sizeof allow_entry, "127.0.0.1:%d", port);

	CHECK(mkdtemp(dir) != NULL);
	snprintf(sock, sizeof sock, "%s/p.sock", dir);
	p = fw_proxy_new(sock, allow, err, sizeof err);
	CHECK(p != NULL);
	if (!p)
		return;
	fd = unix_connect(sock);
	snprintf(req, sizeof req,
		 "GET http://127.0.0.1:%d/a/b?q=1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
		 "Proxy-Connection: keep-alive\r\nX-Keep: yes\r\n\r\n", port, port);
	CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
	ufd = accept(lfd, NULL, NULL);
	CHECK(ufd >= 0);
	k = read(ufd, buf, sizeof buf - 1);
	buf[k > 0 ? k : 0] = 0;
	CHECK(strncmp(buf, "GET /a/b?q=1 HTTP/1.1\r\n", 23) == 0);
	CHECK(strstr(buf, "X-Keep: yes\r\n") != NULL);
	CHECK(strstr(buf, "Connection: close\r\n\r\n") != NULL);
	CHECK(strstr(buf, "Proxy-Connection") == NULL);
	CHECK(write(ufd, "HTTP/1.0 200 OK\r\n\r\nbody", 23) == 23);
	close(ufd);
	read_all(fd, buf, sizeof buf);
	CHECK_STR(buf, "HTTP/1.0 200 OK\r\n\r\nbody");
	close(fd);
	close(lfd);
	fw_proxy_free(p);
	rmdir(dir);
}

TEST(proxy_answers_502_when_an_allowed_upstream_refuses)
{
	char dir[] = "/tmp/fw-test-proxy-XXXXXX", sock[96], buf[1024], req[128], err[256];
	const char *allow[] = { "127.0.0.1:*", NULL };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof sa;
	struct fw_proxy_event *ev = NULL;
	struct fw_proxy *p;
	size_t n = 0;
	int fd, port;

	/* a port that was just free: nothing listens there */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	port = ntohs(sa.sin_port);
	close(fd);

	CHECK(mkdtemp(dir) != NULL);
	snprintf(sock, sizeof sock, "%s/p.sock", dir);
	p = fw_proxy_new(sock, allow, err, sizeof err);
	CHECK(p != NULL);
	if (!p)
		return;
	for (int k = 0; k < 2; k++) {
		fd = unix_connect(sock);
		snprintf(req, sizeof req, k ? "GET http://127.0.0.1:%d/ HTTP/1.1\r\n\r\n"
					    : "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", port);
		CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
		read_all(fd, buf, sizeof buf);
		close(fd);
		CHECK(strncmp(buf, "HTTP/1.1 502 ", 13) == 0);
	}
	fw_proxy_take_events(p, &ev, &n);
	CHECK_EQ_INT(n, 2);
	for (size_t i = 0; i < n; i++) {
		CHECK_EQ_INT(ev[i].allowed, 1);
		free(ev[i].request);
	}
	free(ev);
	fw_proxy_free(p);
	rmdir(dir);
}

TEST(sandbox_is_available_here)
{
	char err[256] = "";
	int rc = fw_sandbox_available(err, sizeof err);

	if (rc)
		printf("# %s\n", err);
	CHECK_EQ_INT(rc, 0);
}

TEST_MAIN()
