/* Unit tests for the sandbox's network watch (fw_sandbox_net.c): how a
 * destination is judged and how a DNS question is read, then real runs
 * under bubblewrap whose direct attempts must come back as events. */
#include "test.h"

#include <arpa/inet.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <sys/socket.h>
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
