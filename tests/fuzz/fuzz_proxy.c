/*
 * libFuzzer target for the clean room's proxy: the request head a sandboxed
 * command sends is hostile input.  Any bytes must parse or be refused with a
 * reason; an accepted head must name a plain host (no spaces, slashes or
 * control bytes) and a port in 1..65535, and a plain-HTTP head must be
 * rewritten to an origin-form request line ending in "Connection: close".
 * Each accepted target also goes through the allow-list matcher.  Built by
 * `make fuzz`.
 */
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fw_proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *allow[] = { "pypi.org", "*.example.com:8443", "127.0.0.1:*", NULL };
	struct fw_proxy_req rq;
	char out[4096];
	size_t outlen = 1;
	const char *why = NULL;

	if (fw_proxy_parse((const char *)data, size, &rq, out, sizeof out, &outlen, &why) != 0) {
		if (!why || !*why)
			__builtin_trap();
		return 0;
	}
	if (!rq.host[0] || rq.port < 1 || rq.port > 65535 || outlen > sizeof out)
		__builtin_trap();
	for (const char *h = rq.host; *h; h++)
		if ((unsigned char)*h <= ' ' || *h == '/' || *h == '@' || *h == '#')
			__builtin_trap();
	if (!memchr(rq.desc, 0, sizeof rq.desc))
		__builtin_trap();
	if (rq.tunnel) {
		if (outlen != 0 || strncmp(rq.desc, "CONNECT ", 8) != 0)
			__builtin_trap();
	} else {
		const char *sp = memchr(out, ' ', outlen);
		if (!sp || sp[1] != '/' || outlen < 21 ||
		    memcmp(out + outlen - 21, "Connection: close\r\n\r\n", 21) != 0)
			__builtin_trap();
	}
	(void)fw_proxy_allowed(allow, rq.host, rq.port);
	return 0;
}
