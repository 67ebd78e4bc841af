/*
 * fw-run — run one command in the clean room and print what happened.
 *
 * The result is one JSON object on stdout (or, with --msgpack, one
 * msgpack record of kind "sandbox").  See fw-run(1).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fw_cli.h"
#include "fw_json.h"
#include "fw_mp.h"
#include "fw_sandbox.h"

#define MAX_LIST 64

static const char usage_text[] =
	"usage: fw-run [--workspace DIR] [--timeout S] [--grace S] [--mem MB] [--cpu S]\n"
	"              [--procs N] [--fsize MB] [--output-cap BYTES] [--allow HOST[:PORT]]...\n"
	"              [--ro-bind SRC[:DST]]... [--env NAME=VALUE]... [--stdin FILE]\n"
	"              [--no-cgroup] [--msgpack] -- CMD [ARG...]\n"
	"       fw-run --check\n"
	"       fw-run -h | --help | --version\n";

static const struct fw_opt_doc options[] = {
	{ "--workspace DIR", "bind DIR read-write as the command's working directory" },
	{ "--timeout S", "wall-clock limit in seconds (fractions allowed)" },
	{ "--grace S", "seconds between SIGTERM and SIGKILL at the timeout" },
	{ "--mem MB", "memory limit of the whole tree in MiB (or K, M, G)" },
	{ "--cpu S", "CPU seconds per process" },
	{ "--procs N", "processes (threads included) the sandbox may hold at once" },
	{ "--fsize MB", "largest file a process may write, in MiB" },
	{ "--output-cap BYTES", "bytes of standard output, and of standard error, kept (default 1M)" },
	{ "--allow HOST[:PORT]", "let the command reach HOST (through the filtering proxy)" },
	{ "--ro-bind SRC[:DST]", "bind a host path read-only at DST (default SRC)" },
	{ "--env NAME=VALUE", "add a variable, or replace a default one" },
	{ "--stdin FILE", "standard input of the command" },
	{ "--no-cgroup", "make no cgroups" },
	{ "--msgpack", "write the result as one msgpack record" },
	{ "--check", "check that the clean room works on this machine" },
	{ "-h, --help", "print this help and exit" },
	{ "--version", "print the version and exit" },
	{ NULL, NULL },
};

/* Captured bytes go out as a string when they are UTF-8, as bin otherwise
 * (JSON shows bin as {"$bin": BASE64}). */
static int pack_bytes(msgpack_packer *pk, const char *p, size_t n)
{
	if (!p)
		p = "";
	if (fw_utf8_valid((const uint8_t *)p, n))
		return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, p, n);
	return msgpack_pack_bin(pk, n) || msgpack_pack_bin_body(pk, p, n);
}

static int pack_result(struct fw_buf *b, const struct fw_sandbox_result *r)
{
	msgpack_packer pk;
	int e = 0;

	fw_buf_packer(&pk, b);
	e |= msgpack_pack_map(&pk, 16);
	e |= fw_pack_cstr(&pk, "kind") || fw_pack_cstr(&pk, "sandbox");
	e |= fw_pack_cstr(&pk, "v") || msgpack_pack_int(&pk, 1);
	e |= fw_pack_cstr(&pk, "cause") || fw_pack_cstr(&pk, fw_sandbox_cause_name(r->cause));
	e |= fw_pack_cstr(&pk, "exit");
	e |= r->exit_code >= 0 ? msgpack_pack_int(&pk, r->exit_code) : msgpack_pack_nil(&pk);
	e |= fw_pack_cstr(&pk, "signal") || msgpack_pack_int(&pk, r->signal);
	e |= fw_pack_cstr(&pk, "wall_s") || msgpack_pack_double(&pk, r->wall_s);
	e |= fw_pack_cstr(&pk, "cpu_s") || msgpack_pack_double(&pk, r->cpu_s);
	e |= fw_pack_cstr(&pk, "max_rss") || msgpack_pack_uint64(&pk, r->max_rss);
	e |= fw_pack_cstr(&pk, "cgroup") ||
	     (r->cgroup ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk));
	e |= fw_pack_cstr(&pk, "stdout") || pack_bytes(&pk, r->out.data, r->out.len);
	e |= fw_pack_cstr(&pk, "stdout_bytes") || msgpack_pack_uint64(&pk, r->out.total);
	e |= fw_pack_cstr(&pk, "stdout_truncated") ||
	     (r->out.truncated ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk));
	e |= fw_pack_cstr(&pk, "stderr") || pack_bytes(&pk, r->err.data, r->err.len);
	e |= fw_pack_cstr(&pk, "stderr_bytes") || msgpack_pack_uint64(&pk, r->err.total);
	e |= fw_pack_cstr(&pk, "stderr_truncated") ||
	     (r->err.truncated ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk));
	e |= fw_pack_cstr(&pk, "events") || msgpack_pack_array(&pk, r->nevents);
	for (size_t i = 0; i < r->nevents; i++) {
		e |= msgpack_pack_map(&pk, 3);
		e |= fw_pack_cstr(&pk, "kind") || fw_pack_cstr(&pk, r->events[i].kind);
		e |= fw_pack_cstr(&pk, "detail") || fw_pack_cstr(&pk, r->events[i].detail);
		e |= fw_pack_cstr(&pk, "at_s") || msgpack_pack_double(&pk, r->events[i].at_s);
	}
	return e ? -1 : 0;
}

/* Parses a size in MB (a plain number, or with a K/M/G suffix taken as
 * bytes in 1024s) into bytes. */
static int parse_mb(const char *s, uint64_t *out)
{
	size_t n = strlen(s);

	if (n && strchr("KkMmGg", s[n - 1]))
		return fw_parse_u64(s, out, 1);
	if (fw_parse_u64(s, out, 0) != 0 || *out > (UINT64_MAX >> 20))
		return -1;
	*out <<= 20;
	return 0;
}

/* --check: can the clean room run here, and what enforces its limits? */
static int check_machine(struct fw_sandbox_opts *o)
{
	char *argv[] = { "true", NULL }, err[512], why[256];
	struct fw_sandbox_result r;
	int pids_cg = 1, watch;

	if (fw_sandbox_available(err, sizeof err) != 0) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	o->mem_bytes = 256u << 20;
	o->procs = 64;
	o->timeout_s = 30;
	if (fw_sandbox_run(o, argv, &r, err, sizeof err) != 0) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	for (size_t i = 0; i < r.nevents; i++)
		if (strstr(r.events[i].detail, "pids cgroup unavailable"))
			pids_cg = 0;
	puts("the clean room works");
	printf("memory limit: %s\n", r.cgroup ? "memory cgroup" : "address-space rlimit only");
	printf("process limit: %s\n", pids_cg ? "pids cgroup" : "rlimit and watchdog");
	printf("cpu and memory accounting: %s\n", r.cpu_s >= 0 ? "cgroup" : "none");
	printf("allow lists: %s\n", access("/usr/bin/socat", X_OK) == 0 ? "socat found"
		: "need socat(1)");
	watch = fw_sandbox_net_watch(why, sizeof why);
	printf("direct network attempts: %s%s%s\n",
	       watch ? "refused and recorded (seccomp user notification)"
		     : "refused, not recorded (", watch ? "" : why, watch ? "" : ")");
	fw_sandbox_result_free(&r);
	return fw_close_stdout() ? FW_EXIT_DATA : FW_EXIT_OK;
}

int main(int argc, char **argv)
{
	enum { O_WS = 256, O_TIMEOUT, O_MEM, O_CPU, O_PROCS, O_FSIZE, O_CAP, O_ALLOW,
	       O_BIND, O_ENV, O_STDIN, O_MSGPACK, O_CHECK, O_VERSION, O_GRACE, O_NOCG };
	static const struct option longopts[] = {
		{ "workspace", required_argument, NULL, O_WS },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "grace", required_argument, NULL, O_GRACE },
		{ "mem", required_argument, NULL, O_MEM },
		{ "cpu", required_argument, NULL, O_CPU },
		{ "procs", required_argument, NULL, O_PROCS },
		{ "fsize", required_argument, NULL, O_FSIZE },
		{ "output-cap", required_argument, NULL, O_CAP },
		{ "allow", required_argument, NULL, O_ALLOW },
		{ "ro-bind", required_argument, NULL, O_BIND },
		{ "env", required_argument, NULL, O_ENV },
		{ "stdin", required_argument, NULL, O_STDIN },
		{ "msgpack", no_argument, NULL, O_MSGPACK },
		{ "no-cgroup", no_argument, NULL, O_NOCG },
		{ "check", no_argument, NULL, O_CHECK },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	const char *allow[MAX_LIST + 1] = { 0 }, *binds[MAX_LIST + 1] = { 0 };
	const char *env[MAX_LIST + 1] = { 0 };
	int nallow = 0, nbinds = 0, nenv = 0, msgpack = 0, check = 0, c, st;
	struct fw_sandbox_opts o;
	struct fw_sandbox_result r;
	struct fw_buf b = { 0 }, j = { 0 };
	char err[512];
	uint64_t u;
	double d;

	fw_cli_init("fw-run");
	fw_usage_init(usage_text, options);
	fw_sandbox_opts_init(&o);
	opterr = 0; /* diagnostics are ours, named "fw-run" */
	while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		switch (c) {
		case O_WS: o.workspace = optarg; break;
		case O_TIMEOUT:
		case O_GRACE:
			if (fw_parse_double(optarg, &d) != 0 || d < 0)
				return fw_usage_fail("bad seconds '%s'", optarg);
			*(c == O_TIMEOUT ? &o.timeout_s : &o.grace_s) = d;
			break;
		case O_MEM:
			if (parse_mb(optarg, &o.mem_bytes) != 0)
				return fw_usage_fail("bad --mem '%s'", optarg);
			break;
		case O_FSIZE:
			if (parse_mb(optarg, &o.fsize_bytes) != 0)
				return fw_usage_fail("bad --fsize '%s'", optarg);
			break;
		case O_CPU:
		case O_PROCS:
			if (fw_parse_u64(optarg, &u, 0) != 0 || u > 1u << 30)
				return fw_usage_fail("bad number '%s'", optarg);
			*(c == O_CPU ? &o.cpu_s : &o.procs) = (long)u;
			break;
		case O_CAP:
			if (fw_parse_u64(optarg, &u, 1) != 0 || u == 0 || u > (uint64_t)1 << 40)
				return fw_usage_fail("bad --output-cap '%s'", optarg);
			o.output_cap = (size_t)u;
			break;
		case O_ALLOW:
			if (nallow == MAX_LIST)
				return fw_usage_fail("too many --allow (at most 64): '%s'", optarg);
			allow[nallow++] = optarg;
			break;
		case O_BIND:
			if (nbinds == MAX_LIST)
				return fw_usage_fail("too many --ro-bind (at most 64): '%s'", optarg);
			binds[nbinds++] = optarg;
			break;
		case O_ENV:
			if (nenv == MAX_LIST || !strchr(optarg, '=') || optarg[0] == '=')
				return fw_usage_fail("bad --env '%s' (NAME=VALUE)", optarg);
			env[nenv++] = optarg;
			break;
		case O_STDIN: o.stdin_path = optarg; break;
		case O_MSGPACK: msgpack = 1; break;
		case O_NOCG: o.no_cgroup = 1; break;
		case O_CHECK: check = 1; break;
		case 'h': fw_help(); return FW_EXIT_OK;
		case O_VERSION: fw_print_version(); return FW_EXIT_OK;
		case ':': return fw_usage_fail("option '%s' needs a value", argv[optind - 1]);
		default: return fw_usage_fail("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (check)
		return check_machine(&o);
	if (optind >= argc)
		return fw_usage_fail("%s", "no command");
	o.allow = allow;
	o.ro_binds = binds;
	o.env = env;

	if (fw_sandbox_run(&o, argv + optind, &r, err, sizeof err) != 0) {
		fw_warn("%s", err);
		return FW_EXIT_DATA;
	}
	if (pack_result(&b, &r) != 0) {
		fw_warn("out of memory");
		fw_sandbox_result_free(&r);
		return FW_EXIT_DATA;
	}
	if (msgpack) {
		fwrite(b.p, 1, b.n, stdout);
	} else {
		struct fw_mpv v = { b.p, b.n };
		if (fw_json_from_mp(&j, v, err, sizeof err) != 0) {
			fw_warn("%s", err);
			fw_sandbox_result_free(&r);
			return FW_EXIT_DATA;
		}
		fwrite(j.p, 1, j.n, stdout);
		putchar('\n');
	}
	st = r.cause == FW_SANDBOX_OK && r.exit_code == 0 ? FW_EXIT_OK : FW_EXIT_DATA;
	fw_sandbox_result_free(&r);
	fw_buf_release(&b);
	fw_buf_release(&j);
	return fw_close_stdout() ? FW_EXIT_DATA : st;
}
