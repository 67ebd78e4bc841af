/* Unit tests for the sandbox's network watch (fw_sandbox_net.c): how a
 * destination is judged and how a DNS question is read, then real runs
 * under bubblewrap whose direct attempts must come back as events. */
#include "test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "fw_sandbox.h"
#include "fw_sandbox_int.h"

static enum fw_nw_verdict v4(const char *ip, int port, char *out, size_t outlen)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };

	inet_pton(AF_INET, ip, &a.sin_addr);
	return fw_nw_classify((struct sockaddr *)&a, sizeof a, out, outlen);
}

static enum fw_nw_verdict v6(const char *ip, int port, char *out, size_t outlen)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons(port) };

	inet_pton(AF_INET6, ip, &a.sin6_addr);
	return fw_nw_classify((struct sockaddr *)&a, sizeof a, out, outlen);
}

TEST(ipv4_outside_the_sandbox_is_denied_and_named)
{
	char s[128];

	CHECK_EQ_INT(v4("1.1.1.1", 80, s, sizeof s), FW_NW_DENY);
	CHECK_STR(s, "1.1.1.1:80");
	CHECK_EQ_INT(v4("10.0.0.1", 5432, s, sizeof s), FW_NW_DENY);
	CHECK_EQ_INT(v4("255.255.255.255", 67, s, sizeof s), FW_NW_DENY);
	CHECK_EQ_INT(v4("224.0.0.251", 5353, s, sizeof s), FW_NW_DENY);
	/* a public resolver is a destination like any other */
	CHECK_EQ_INT(v4("8.8.8.8", 53, s, sizeof s), FW_NW_DENY);
	CHECK_STR(s, "8.8.8.8:53");
}

TEST(ipv4_loopback_and_any_pass_and_port_53_there_is_dns)
{
	char s[128];

	CHECK_EQ_INT(v4("127.0.0.1", 8080, s, sizeof s), FW_NW_PASS);
	CHECK_EQ_INT(v4("127.255.0.9", 1, s, sizeof s), FW_NW_PASS);
	/* connect to 0.0.0.0 reaches the local host */
	CHECK_EQ_INT(v4("0.0.0.0", 80, s, sizeof s), FW_NW_PASS);
	CHECK_EQ_INT(v4("127.0.0.1", 53, s, sizeof s), FW_NW_DNS);
	CHECK_STR(s, "127.0.0.1:53");
	CHECK_EQ_INT(v4("127.0.0.53", 53, s, sizeof s), FW_NW_DNS);
}

TEST(ipv6_is_judged_like_ipv4_mapped_forms_included)
{
	char s[128];

	CHECK_EQ_INT(v6("2606:4700::1111", 443, s, sizeof s), FW_NW_DENY);
	CHECK_STR(s, "[2606:4700::1111]:443");
	CHECK_EQ_INT(v6("fe80::1", 22, s, sizeof s), FW_NW_DENY);
	CHECK_EQ_INT(v6("::1", 80, s, sizeof s), FW_NW_PASS);
	CHECK_EQ_INT(v6("::", 80, s, sizeof s), FW_NW_PASS);
	CHECK_EQ_INT(v6("::1", 53, s, sizeof s), FW_NW_DNS);
	CHECK_EQ_INT(v6("::ffff:93.184.216.34", 80, s, sizeof s), FW_NW_DENY);
	CHECK_STR(s, "93.184.216.34:80");
	CHECK_EQ_INT(v6("::ffff:127.0.0.1", 80, s, sizeof s), FW_NW_PASS);
}

TEST(local_families_pass_and_others_are_denied)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX, .sun_path = "/run/x.sock" };
	struct sockaddr_vm vm = { .svm_family = AF_VSOCK, .svm_cid = 2, .svm_port = 1024 };
	struct sockaddr sa = { .sa_family = AF_UNSPEC };
	struct sockaddr other = { .sa_family = 42 };
	char s[128];

	CHECK_EQ_INT(fw_nw_classify((struct sockaddr *)&un, sizeof un, s, sizeof s), FW_NW_PASS);
	CHECK_EQ_INT(fw_nw_classify(&sa, sizeof sa, s, sizeof s), FW_NW_PASS);
	CHECK_EQ_INT(fw_nw_classify((struct sockaddr *)&vm, sizeof vm, s, sizeof s), FW_NW_DENY);
	CHECK_STR(s, "vsock 2:1024");
	CHECK_EQ_INT(fw_nw_classify(&other, sizeof other, s, sizeof s), FW_NW_DENY);
	CHECK_STR(s, "family 42");
}

TEST(short_addresses_are_left_to_the_kernel)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(80) };
	char s[128];

	inet_pton(AF_INET, "1.1.1.1", &a.sin_addr);
	/* the kernel answers EINVAL to these itself */
	CHECK_EQ_INT(fw_nw_classify((struct sockaddr *)&a, 8, s, sizeof s), FW_NW_PASS);
	CHECK_EQ_INT(fw_nw_classify((struct sockaddr *)&a, 1, s, sizeof s), FW_NW_PASS);
	CHECK_EQ_INT(fw_nw_classify((struct sockaddr *)&a, 0, s, sizeof s), FW_NW_PASS);
	CHECK_EQ_INT(fw_nw_classify((struct sockaddr *)&a, sizeof a, s, 4), FW_NW_DENY);
	CHECK_STR(s, "1.1");
}

/* A query as glibc's res_mkquery writes it: id, RD, one question. */
static size_t query(unsigned char *q, const char *name, unsigned type)
{
	size_t n = 0;
	const char *p = name;

	memcpy(q, "\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00", 12);
	n = 12;
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);
		q[n++] = (unsigned char)l;
		memcpy(q + n, p, l);
		n += l;
		p += l + (dot != NULL);
	}
	q[n++] = 0;
	q[n++] = (unsigned char)(type >> 8);
	q[n++] = (unsigned char)type;
	q[n++] = 0;
	q[n++] = 1;
	return n;
}

TEST(dns_question_gives_name_and_type)
{
	unsigned char q[512];
	char name[256], type[16];
	size_t end = 0, n;

	n = query(q, "pypi.org", 1);
	CHECK_EQ_INT(fw_nw_dns_question(q, n, name, sizeof name, type, sizeof type, &end), 0);
	CHECK_STR(name, "pypi.org");
	CHECK_STR(type, "A");
	CHECK_EQ_INT(end, n);
	n = query(q, "Files.PythonHosted.ORG", 28);
	CHECK_EQ_INT(fw_nw_dns_question(q, n, name, sizeof name, type, sizeof type, &end), 0);
	CHECK_STR(name, "files.pythonhosted.org");
	CHECK_STR(type, "AAAA");
	n = query(q, "_http._tcp.example.com", 33);
	CHECK_EQ_INT(fw_nw_dns_question(q, n, name, sizeof name, type, sizeof type, &end), 0);
	CHECK_STR(name, "_http._tcp.example.com");
	CHECK_STR(type, "SRV");
	n = query(q, "x.example", 4242);
	CHECK_EQ_INT(fw_nw_dns_question(q, n, name, sizeof name, type, sizeof type, &end), 0);
	CHECK_STR(type, "TYPE4242");
	n = query(q, "", 2);
	CHECK_EQ_INT(fw_nw_dns_question(q, n, name, sizeof name, type, sizeof type, &end), 0);
	CHECK_STR(name, ".");
	CHECK_STR(type, "NS");
}

TEST(dns_question_masks_odd_bytes_and_cuts_long_names)
{
	unsigned char q[512];
	char name[256], small[8], type[16];
	size_t end, n;

	n = query(q, "a b\x01.example", 1);
	CHECK_EQ_INT(fw_nw_dns_question(q, n, name, sizeof name, type, sizeof type, &end), 0);
	CHECK_STR(name, "a?b?.example");
	n = query(q, "abcdefghij.example", 1);
	CHECK_EQ_INT(fw_nw_dns_question(q, n, small, sizeof small, type, sizeof type, &end), 0);
	CHECK_STR(small, "abcdefg");
}

TEST(dns_question_refuses_what_is_no_query)
{
	unsigned char q[512];
	char name[256], type[16];
	size_t end, n = query(q, "pypi.org", 1);

	/* cut anywhere */
	for (size_t k = 0; k < n; k++)
		CHECK(fw_nw_dns_question(q, k, name, sizeof name, type, sizeof type, &end) < 0);
	/* a response */
	q[2] |= 0x80;
	CHECK(fw_nw_dns_question(q, n, name, sizeof name, type, sizeof type, &end) < 0);
	q[2] &= 0x7f;
	/* no question */
	q[5] = 0;
	CHECK(fw_nw_dns_question(q, n, name, sizeof name, type, sizeof type, &end) < 0);
	q[5] = 1;
	/* a compression pointer where a label should be */
	q[12] = 0xc0;
	CHECK(fw_nw_dns_question(q, n, name, sizeof name, type, sizeof type, &end) < 0);
}

/* ---- the filter ------------------------------------------------------------ */

#if defined(__x86_64__)
static unsigned verdict(uint32_t arch, int nr, uint64_t a0, uint64_t a2, int watched)
{
	uint64_t args[6] = { a0, 0, a2, 0, 0, 0 };

	return fw_nw_filter_verdict(arch, nr, args, watched);
}

TEST(every_i386_and_x32_call_is_refused_before_any_other_look)
{
	/* i386 socketcall (102), socket (359), connect (362), getpid (20) */
	static const int i386[] = { 102, 359, 362, 20, 0 };

	for (int w = 0; w < 2; w++) {
		for (size_t k = 0; k < sizeof i386 / sizeof i386[0]; k++) {
			unsigned v = verdict(AUDIT_ARCH_I386, i386[k], AF_VSOCK, 0, w);
			CHECK_EQ_INT(v, w ? SECCOMP_RET_USER_NOTIF : (SECCOMP_RET_ERRNO | ENOSYS));
		}
		CHECK_EQ_INT(verdict(AUDIT_ARCH_X86_64, 0x40000000 | __NR_connect, 0, 0, w),
			     w ? SECCOMP_RET_USER_NOTIF : (SECCOMP_RET_ERRNO | ENOSYS));
		CHECK_EQ_INT(verdict(AUDIT_ARCH_X86_64, 0x40000000 | __NR_getpid, 0, 0, w),
			     w ? SECCOMP_RET_USER_NOTIF : (SECCOMP_RET_ERRNO | ENOSYS));
	}
	CHECK_EQ_INT(verdict(AUDIT_ARCH_X86_64, __NR_getpid, 0, 0, 1), SECCOMP_RET_ALLOW);
}

TEST(io_uring_is_refused_and_its_neighbours_run)
{
	for (int nr = __NR_io_uring_setup; nr <= __NR_io_uring_setup + 2; nr++) {
		CHECK_EQ_INT(verdict(AUDIT_ARCH_X86_64, nr, 0, 0, 1), SECCOMP_RET_USER_NOTIF);
		CHECK_EQ_INT(verdict(AUDIT_ARCH_X86_64, nr, 0, 0, 0), SECCOMP_RET_ERRNO | ENOSYS);
	}
	CHECK_EQ_INT(verdict(AUDIT_ARCH_X86_64, __NR_io_uring_setup - 1, 0, 0, 1),
		     SECCOMP_RET_ALLOW);
	CHECK_EQ_INT(verdict(AUDIT_ARCH_X86_64, __NR_io_uring_setup + 3, 0, 0, 1),
		     SECCOMP_RET_ALLOW);
}

TEST(sockets_of_unix_inet_inet6_and_routing_netlink_only)
{
	static const int ok[] = { AF_UNIX, AF_INET, AF_INET6 };
	static const int no[] = { AF_VSOCK, AF_PACKET, AF_BLUETOOTH, AF_XDP, AF_ALG, AF_TIPC, 99 };

	for (int nr = __NR_socket; nr; nr = nr == __NR_socket ? __NR_socketpair : 0) {
		for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++)
			CHECK_EQ_INT(verdict(AUDIT_ARCH_X86_64, nr, ok[k], 0, 1), SECCOMP_RET_ALLOW);
		for (size_t k = 0; k < sizeof no / sizeof no[0]; k++) {
			CHECK_EQ_INT(verdict(AUDIT_ARCH_X86_64, nr, no[k], 0, 1),
				     SECCOMP_RET_USER_NOTIF);
			CHECK_EQ_INT(verdict(AUDIT_ARCH_X86_64, nr, no[k], 0, 0),
				     SECCOMP_RET_ERRNO | EAFNOSUPPORT);
		}
		CHECK_EQ_INT(verdict(AUDIT_ARCH_X86_64, nr, AF_NETLINK, NETLINK_ROUTE, 1),
			     SECCOMP_RET_ALLOW);
		CHECK_EQ_INT(verdict(AUDIT_ARCH_X86_64, nr, AF_NETLINK, NETLINK_SOCK_DIAG, 1),
			     SECCOMP_RET_USER_NOTIF);
		CHECK_EQ_INT(verdict(AUDIT_ARCH_X86_64, nr, AF_NETLINK, NETLINK_AUDIT, 0),
			     SECCOMP_RET_ERRNO | EAFNOSUPPORT);
	}
	/* the destination calls: watched, or left to the namespace */
	CHECK_EQ_INT(verdict(AUDIT_ARCH_X86_64, __NR_connect, 3, 0, 1), SECCOMP_RET_USER_NOTIF);
	CHECK_EQ_INT(verdict(AUDIT_ARCH_X86_64, __NR_connect, 3, 0, 0), SECCOMP_RET_ALLOW);
}
#endif

TEST(socket_families_have_names)
{
	char s[64];

	fw_nw_family(AF_VSOCK, 0, s, sizeof s);
	CHECK_STR(s, "vsock");
	fw_nw_family(AF_PACKET, 768, s, sizeof s);
	CHECK_STR(s, "packet");
	fw_nw_family(AF_NETLINK, NETLINK_SOCK_DIAG, s, sizeof s);
	CHECK_STR(s, "netlink 4");
	fw_nw_family(4242, 0, s, sizeof s);
	CHECK_STR(s, "family 4242");
}

/* ---- real runs ----------------------------------------------------------- */

static int has_event(const struct fw_sandbox_result *r, const char *kind, const char *detail)
{
	for (size_t i = 0; i < r->nevents; i++)
		if (!strcmp(r->events[i].kind, kind) && !strcmp(r->events[i].detail, detail))
			return 1;
	return 0;
}

TEST(a_run_records_a_direct_connect_and_a_lookup_in_time_order)
{
	struct fw_sandbox_opts o;
	struct fw_sandbox_result r;
	char err[256] = "", why[256];
	char *argv[] = { "/usr/bin/python3", "-c",
			 "import socket\n"
			 "try: socket.create_connection(('192.0.2.77', 443), timeout=5)\n"
			 "except OSError as e: print(e.errno)\n"
			 "try: socket.gethostbyname('unit.example')\n"
			 "except OSError as e: print('lookup failed')\n",
			 NULL };

	if (!fw_sandbox_net_watch(why, sizeof why)) {
		printf("# no network watch here: %s\n", why);
		return;
	}
	fw_sandbox_opts_init(&o);
	o.timeout_s = 30;
	CHECK_EQ_INT(fw_sandbox_run(&o, argv, &r, err, sizeof err), 0);
	CHECK_STR(r.out.data, "101\nlookup failed\n");
	CHECK(has_event(&r, "net-denied", "connect tcp 192.0.2.77:443"));
	CHECK(has_event(&r, "net-denied", "dns unit.example A"));
	for (size_t i = 1; i < r.nevents; i++)
		CHECK(r.events[i - 1].at_s <= r.events[i].at_s);
	fw_sandbox_result_free(&r);
}

TEST(the_watch_is_cached_and_says_yes_or_why_not)
{
	char a[256] = "", b[256] = "";
	int x = fw_sandbox_net_watch(a, sizeof a), y = fw_sandbox_net_watch(b, sizeof b);

	CHECK_EQ_INT(x, y);
	if (!x)
		CHECK(a[0] && !strcmp(a, b));
}

TEST_MAIN()
