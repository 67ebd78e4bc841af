/*
 * Case 4 of issue 16: calls the seccomp filter must refuse and record.
 * With the argument "int80", only whether this kernel serves i386 calls
 * from 64-bit code (exit 0; SIGSEGV where IA32 emulation is off).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

static void show(const char *what, long rc)
{
	printf("%s: %s\n", what, rc < 0 ? strerror(errno) : "ok");
}

/* An i386 system call through int $0x80, served by the kernel's 32-bit
 * table; its seccomp arch is AUDIT_ARCH_I386. */
static long int80(long nr, long a, long b, long c)
{
	long rc;

	__asm__ volatile("int $0x80" : "=a"(rc) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
	if (rc < 0 && rc > -4096) {
		errno = (int)-rc;
		return -1;
	}
	return rc;
}

int main(int argc, char **argv)
{
	char params[120] = { 0 };

	if (argc > 1 && strcmp(argv[1], "int80") == 0)
		return int80(20, 0, 0, 0) > 0 ? 0 : 1; /* i386 getpid */
	if (argc > 1 && strcmp(argv[1], "i386") == 0)
		/* i386 socket(2) is 359 */
		show("i386 socket vsock", int80(359, AF_VSOCK, SOCK_STREAM, 0));
	show("x32 getpid", syscall(0x40000000 | __NR_getpid));
	show("io_uring_setup", syscall(__NR_io_uring_setup, 1, params));
	show("socket vsock", socket(AF_VSOCK, SOCK_STREAM, 0));
	show("socket packet", socket(AF_PACKET, SOCK_RAW, 0));
	show("socket netlink sock_diag", socket(AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG));
	show("socket netlink route", socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE));
	show("socket inet", socket(AF_INET, SOCK_STREAM, 0));
	show("socket inet6", socket(AF_INET6, SOCK_DGRAM, 0));
	show("socket unix", socket(AF_UNIX, SOCK_STREAM, 0));
	return 0;
}
