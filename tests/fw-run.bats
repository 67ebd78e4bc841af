#!/usr/bin/env bats
# fw-run and the clean room: isolation, limits, capture, the network filter.

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  T="$BATS_TEST_TMPDIR"
  WS="$T/ws"
  mkdir -p "$WS"
}

teardown() {
  if [ -n "${SRV_PID:-}" ]; then kill "$SRV_PID" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true; fi
}

# field NAME: one field of the JSON result in $output
field() { printf '%s\n' "$output" | jq -r ".$1"; }

# serve $T/srv on a free loopback port of the host; sets PORT and SRV_PID
serve() {
  mkdir -p "$T/srv"
  echo "hello from the host" > "$T/srv/file.txt"
  PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  (cd "$T/srv" && exec /usr/bin/python3 -m http.server --bind 127.0.0.1 "$PORT") >"$T/srv.log" 2>&1 &
  SRV_PID=$!
  for _ in $(seq 50); do
    curl -s --noproxy "*" "http://127.0.0.1:$PORT/file.txt" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

@test "a command runs and its status and output come back as one JSON object" {
  run --separate-stderr fw-run -- sh -c 'echo out; echo err >&2; exit 0'
  assert_success
  [ -z "$stderr" ]
  [ "$(field cause)" = ok ]
  [ "$(field exit)" = 0 ]
  [ "$(field stdout)" = out ]
  [ "$(field stderr)" = err ]
  [ "$(field stdout_truncated)" = false ]
  [ "$(printf '%s\n' "$output" | wc -l)" -eq 1 ]
}

@test "a failing command makes fw-run exit 1 and reports its exit status" {
  run -1 --separate-stderr fw-run -- sh -c 'exit 3'
  [ "$(field cause)" = ok ]
  [ "$(field exit)" = 3 ]
  [ "$(field signal)" = 0 ]
}

@test "a command missing inside the sandbox exits 127" {
  run -1 --separate-stderr fw-run -- no-such-command-here
  [ "$(field exit)" = 127 ]
}

@test "the workspace is read-write at /work and is the working directory" {
  echo data > "$WS/in.txt"
  run --separate-stderr fw-run --workspace "$WS" -- sh -c 'pwd; cat in.txt; echo made > out.txt'
  assert_success
  [ "$(field stdout)" = "$(printf '/work\ndata')" ]
  [ "$(cat "$WS/out.txt")" = made ]
}

@test "writes outside the workspace fail: /, /etc, /usr and bound host paths" {
  run -1 --separate-stderr fw-run --workspace "$WS" --ro-bind "$T:/host" -- sh -c '
    for f in /x /etc/x /usr/x /usr/local/x /host/x /work/../x; do
      if touch "$f" 2>/dev/null; then echo "wrote $f"; fi
    done
    touch /tmp/x && echo tmp-ok
    exit 1'
  [ "$(field stdout)" = tmp-ok ]
  [ ! -e "$T/x" ]
  [ ! -e /usr/x ]
}

@test "no set-ID program the command makes outlives the run" {
  run --separate-stderr fw-run --workspace "$WS" -- sh -c '
    mkdir -p d/e && cp /bin/true suid && cp /bin/true d/e/sgid &&
    chmod 4755 suid && chmod 2755 d/e/sgid && ln -s /usr/bin/passwd link'
  assert_success
  [ "$(stat -c %a "$WS/suid")" = 755 ]
  [ "$(stat -c %a "$WS/d/e/sgid")" = 755 ]
  run jq -r '.events[] | select(.kind == "setid") | .detail' <<<"$output"
  assert_line "set-ID bits cleared on suid"
  assert_line "set-ID bits cleared on d/e/sgid"
}

@test "the host's home and the caller's files are not visible" {
  run --separate-stderr fw-run -- sh -c 'ls -A /root 2>&1; ls / | tr "\n" " "'
  assert_success
  [[ "$(field stdout)" == *"No such file or directory"* ]]
  for d in root home work srv opt var; do
    [[ " $(field stdout | tail -1)" != *" $d "* ]]
  done
}

@test "secrets root owns on the host stay out: /etc/shadow, /etc/ssl/private" {
  run -1 --separate-stderr fw-run -- sh -c '
    for f in /etc/shadow /etc/gshadow /etc/ssl/private /etc/sudoers; do
      [ -e "$f" ] && echo "present $f"
    done
    exit 1'
  [ -z "$(field stdout)" ]
}

@test "killing fw-run takes the whole sandbox down with it" {
  fw-run -- sh -c 'sleep 734 & sleep 735' > /dev/null &
  pid=$!
  for _ in $(seq 50); do pgrep -f '^sleep 735' >/dev/null && break; sleep 0.1; done
  pgrep -f '^sleep 735'
  kill -9 "$pid"
  wait "$pid" || true
  for _ in $(seq 50); do pgrep -f '^sleep 73[45]' >/dev/null || break; sleep 0.1; done
  ! pgrep -f '^sleep 73[45]'
}

@test "no sandbox outlives a caller killed at any instant of its start" {
  for d in 0 0.001 0.002 0.004 0.006 0.008 0.01 0.015 0.02 0.03 0.05; do
    fw-run -- sleep 739 > /dev/null &
    pid=$!
    sleep "$d"
    kill -9 "$pid"
    wait "$pid" || true
  done
  # a sandbox orphaned in bwrap's own start-up is swept by the next run
  fw-run -- true > /dev/null
  for _ in $(seq 30); do pgrep -f '^(sleep|fw-run --) 739' >/dev/null || break; sleep 0.1; done
  ! pgrep -f '^sleep 739'
  # nor does the caller's child, at any step before it becomes bwrap
  ! pgrep -f '^fw-run -- sleep 739'
}

@test "capabilities are gone: no remount, no mount, no new user namespace" {
  run -1 --separate-stderr fw-run -- sh -c '
    grep -E "^Cap(Eff|Prm|Bnd):" /proc/self/status
    mount -o remount,rw / 2>/dev/null && echo remounted-root
    mount -o remount,rw /usr 2>/dev/null && echo remounted-usr
    mount -t tmpfs none /tmp 2>/dev/null && echo mounted
    unshare -U true 2>/dev/null && echo new-userns
    exit 1'
  out=$(field stdout)
  [ "$(printf '%s\n' "$out" | grep -c ':	0000000000000000$')" -eq 3 ]
  [[ "$out" != *remounted* ]]
  [[ "$out" != *mounted* ]]
  [[ "$out" != *new-userns* ]]
}

@test "host sysctls cannot be written by uid 0 inside" {
  # writes back the value it reads, so a broken sandbox changes nothing
  run -1 --separate-stderr fw-run -- sh -c '
    v=$(cat /proc/sys/vm/swappiness)
    (echo "$v" > /proc/sys/vm/swappiness) 2>/dev/null && echo wrote-sysctl
    exit 1'
  [[ "$(field stdout)" != *wrote-sysctl* ]]
}

@test "the environment is cleared to the fixed list plus --env" {
  FW_SECRET_OUTSIDE=leak run --separate-stderr fw-run --env FOO=bar --env LANG=C -- env
  assert_success
  env_out=$(field stdout)
  [[ "$env_out" != *FW_SECRET_OUTSIDE* ]]
  [[ "$env_out" == *"TZ=UTC"* ]]
  [[ "$env_out" == *"PYTHONHASHSEED=0"* ]]
  [[ "$env_out" == *"PYTHONDONTWRITEBYTECODE=1"* ]]
  [[ "$env_out" == *"FOO=bar"* ]]
  [ "$(printf '%s\n' "$env_out" | grep -c '^LANG=')" -eq 1 ]
  [[ "$env_out" == *"LANG=C"$'\n'* ]] || [[ "$env_out" == *"LANG=C" ]]
}

@test "no network by default: only loopback, and the host's loopback is out of reach" {
  serve
  run -1 --separate-stderr fw-run -- sh -c '
    tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "
    env | grep -i proxy
    curl -sS -m 5 "http://127.0.0.1:'"$PORT"'/file.txt"'
  [ "$(field stdout)" = lo ]
  [[ "$(field stderr)" == *"Failed to connect"* || "$(field stderr)" == *"Couldn't connect"* ]]
  [ "$(field events)" = "[]" ]
}

@test "--allow opens one host and port through the proxy; others are denied and recorded" {
  serve
  run --separate-stderr fw-run --allow "127.0.0.1:$PORT" -- sh -c '
    curl -sS -m 5 --noproxy "" "http://127.0.0.1:'"$PORT"'/file.txt"
    curl -sS -m 5 --noproxy "" -o /dev/null -w "%{http_code}\n" "http://127.0.0.1:'"$((PORT + 1))"'/x"
    curl -sS -m 5 --noproxy "" -p "https://example.com/" 2>&1 | sed "s/^/tunnel: /"'
  assert_success
  out=$(field stdout)
  [[ "$out" == *"hello from the host"* ]]
  [[ "$out" == *403* ]]
  [[ "$out" == *"tunnel: "*"403"* ]]
  run jq -r '.events[] | "\(.kind) \(.detail)"' <<<"$output"
  assert_line "net-allowed GET http://127.0.0.1:$PORT/file.txt"
  assert_line "net-denied GET http://127.0.0.1:$((PORT + 1))/x"
  assert_line "net-denied CONNECT example.com:443"
}

@test "HTTPS_PROXY carries a CONNECT tunnel to an allowed host" {
  serve
  run --separate-stderr fw-run --allow "127.0.0.1:$PORT" -- \
    curl -sS -m 5 --noproxy "" -p "http://127.0.0.1:$PORT/file.txt"
  assert_success
  [ "$(field stdout)" = "hello from the host" ]
  [ "$(jq -r '.events[0].detail' <<<"$output")" = "CONNECT 127.0.0.1:$PORT" ]
}

# cc_helper NAME: compile the C program on stdin to $T/NAME (skips without cc)
cc_helper() {
  command -v cc >/dev/null || skip "no C compiler"
  cat > "$T/$1.c"
  cc -O -o "$T/$1" "$T/$1.c"
}

@test "direct connections that bypass the proxy are refused and recorded" {
  run --separate-stderr fw-run -- /usr/bin/python3 -c '
import socket
for addr in [("192.0.2.1", 80), ("2001:db8::1", 443)]:
    try:
        socket.create_connection(addr, timeout=5)
    except OSError as e:
        print(addr[0], e.errno == 101)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", ("198.51.100.7", 123))
except OSError as e:
    print("udp", e.errno == 101)'
  assert_success
  [ "$(field stdout)" = $'192.0.2.1 True\n2001:db8::1 True\nudp True' ]
  run jq -r '.events[] | "\(.kind) \(.detail)"' <<<"$output"
  assert_output - <<'EOF'
net-denied connect tcp 192.0.2.1:80
net-denied connect tcp [2001:db8::1]:443
net-denied sendto udp 198.51.100.7:123
EOF
}

@test "every call that names a destination is watched: sendmsg, sendmmsg; io_uring is refused and recorded" {
  cc_helper netcalls <<'EOF'
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct sockaddr_in at(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static void show(const char *what, long rc)
{
	printf("%s: %s\n", what, rc < 0 ? strerror(errno) : "ok");
}

int main(void)
{
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = at("192.0.2.2", 123), b = at("192.0.2.3", 123),
			   c = at("192.0.2.4", 123), lo = at("127.0.0.1", 9);
	struct iovec iov = { "x", 1 };
	struct msghdr mh = { .msg_name = &a, .msg_namelen = sizeof a, .msg_iov = &iov,
			     .msg_iovlen = 1 };
	struct mmsghdr mm[2] = { { .msg_hdr = mh }, { .msg_hdr = mh } };
	char params[120] = { 0 };

	show("sendmsg", sendmsg(u, &mh, 0));
	mm[0].msg_hdr.msg_name = &b;
	mm[1].msg_hdr.msg_name = &c;
	show("sendmmsg", sendmmsg(u, mm, 2, 0));
	mh.msg_name = &lo;
	show("sendmsg to loopback", sendmsg(u, &mh, 0));
	show("io_uring_setup", syscall(__NR_io_uring_setup, 1, params));
	return 0;
}
EOF
  run --separate-stderr fw-run --ro-bind "$T/netcalls:/tmp/netcalls" -- /tmp/netcalls
  assert_success
  assert_equal "$(field stdout)" "$(printf '%s\n' 'sendmsg: Network is unreachable' \
    'sendmmsg: Network is unreachable' 'sendmsg to loopback: ok' \
    'io_uring_setup: Function not implemented')"
  run jq -r '.events[] | "\(.kind) \(.detail)"' <<<"$output"
  assert_output - <<'EOF'
net-denied sendmsg udp 192.0.2.2:123
net-denied sendmmsg udp 192.0.2.3:123
net-denied sendmmsg udp 192.0.2.4:123
syscall-denied io_uring_setup
EOF
}

@test "a name lookup fails at once, as before, and each name asked is recorded" {
  run --separate-stderr fw-run -- sh -c '
    /usr/bin/python3 -c "
import socket
try:
    socket.getaddrinfo(\"pypi.org\", 443)
except socket.gaierror as e:
    print(e.errno == socket.EAI_AGAIN)"
    getent hosts sandbox || echo "own name: not found"
    getent hosts localhost >/dev/null && echo "localhost: from /etc/hosts"'
  assert_success
  [ "$(field stdout)" = $'True\nown name: not found\nlocalhost: from /etc/hosts' ]
  awk -v w="$(field wall_s)" 'BEGIN { exit !(w < 5) }'
  # the resolver's retries of one question are one event; the sandbox's
  # own host name is no network attempt
  run jq -r '[.events[] | "\(.kind) \(.detail)"] | sort | .[]' <<<"$output"
  assert_output - <<'EOF'
net-denied dns pypi.org A
net-denied dns pypi.org AAAA
EOF
}

@test "loopback stays open and unrecorded: a server inside, TCP and UDP, IPv4 and IPv6" {
  run --separate-stderr fw-run --timeout 30 -- /usr/bin/python3 -c '
import socket, threading
for fam, host in [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")]:
    srv = socket.socket(fam, socket.SOCK_STREAM)
    srv.bind((host, 0)); srv.listen()
    threading.Thread(target=lambda: srv.accept()[0].sendall(b"hi"), daemon=True).start()
    c = socket.create_connection((host, srv.getsockname()[1]))
    print(c.recv(2).decode())
    u = socket.socket(fam, socket.SOCK_DGRAM); u.bind((host, 0))
    socket.socket(fam, socket.SOCK_DGRAM).sendto(b"udp", (host, u.getsockname()[1]))
    print(u.recv(3).decode())'
  assert_success
  [ "$(field stdout)" = $'hi\nudp\nhi\nudp' ]
  [ "$(field events)" = "[]" ]
}

@test "with --allow, the proxy works and a direct attempt beside it is still recorded" {
  serve
  run --separate-stderr fw-run --allow "127.0.0.1:$PORT" -- sh -c '
    curl -sS -m 5 --noproxy "" "http://127.0.0.1:'"$PORT"'/file.txt"
    curl -sS -m 5 --noproxy "*" "http://192.0.2.9:8080/" 2>/dev/null || echo "direct: refused"'
  assert_success
  [ "$(field stdout)" = $'hello from the host\ndirect: refused' ]
  run jq -r '.events[] | "\(.kind) \(.detail)"' <<<"$output"
  assert_output - <<EOF
net-allowed GET http://127.0.0.1:$PORT/file.txt
net-denied connect tcp 192.0.2.9:8080
EOF
}

@test "without seccomp user notification, attempts still fail and every run says they go unrecorded" {
  cc_helper noseccomp <<'EOF'
/* Run a command where seccomp(2) fails with EINVAL, as on a kernel
 * without user notification. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_seccomp, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { 4, f };

	if (argc < 2 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		return 125;
	execvp(argv[1], argv + 1);
	return 127;
}
EOF
  run -1 --separate-stderr "$T/noseccomp" fw-run -- /usr/bin/python3 -c '
import socket
socket.create_connection(("192.0.2.1", 80), timeout=5)'
  [[ "$(field stderr)" == *"Network is unreachable"* ]]
  run jq -r '.events[] | "\(.kind) \(.detail)"' <<<"$output"
  assert_output "net-watch direct network attempts are refused but not recorded: seccomp user notification unavailable: Invalid argument"
  run --separate-stderr "$T/noseccomp" fw-run --check
  assert_success
  assert_line "direct network attempts: refused, not recorded (seccomp user notification unavailable: Invalid argument)"
}

@test "a wall-clock timeout kills a process that ignores SIGTERM, and its children" {
  run -1 --separate-stderr fw-run --timeout 0.5 --grace 0.2 -- \
    sh -c 'trap "" TERM; sleep 731 & while :; do :; done'
  [ "$(field cause)" = timeout ]
  [ "$(field signal)" = 9 ]
  awk -v w="$(field wall_s)" 'BEGIN { exit !(w >= 0.5 && w < 10) }'
  ! pgrep -f '^sleep 731'
}

@test "background processes do not outlive the command" {
  run --separate-stderr fw-run -- sh -c 'sleep 736 >/dev/null 2>&1 </dev/null & echo started'
  assert_success
  [ "$(field stdout)" = started ]
  ! pgrep -f '^sleep 736'
}

@test "a process that obeys SIGTERM ends at the timeout with SIGTERM" {
  run -1 --separate-stderr fw-run --timeout 0.3 -- sleep 30
  [ "$(field cause)" = timeout ]
  [ "$(field signal)" = 15 ]
}

@test "an endless loop ends at the CPU limit" {
  run -1 --separate-stderr fw-run --cpu 1 --timeout 20 -- sh -c 'while :; do :; done'
  [ "$(field cause)" = cpu ]
  # CPU time, not wall time: a loaded machine stretches the latter
  awk -v c="$(field cpu_s)" 'BEGIN { exit !(c == -1 || (c >= 0.5 && c < 3)) }'
}

@test "a 10 GB write ends at the file-size limit" {
  run -1 --separate-stderr fw-run --workspace "$WS" --fsize 4 --timeout 20 -- \
    dd if=/dev/zero of=big bs=1M count=10240
  [ "$(field cause)" = fsize ]
  [ "$(stat -c %s "$WS/big")" -le $((4 * 1024 * 1024)) ]
}

@test "a fork bomb ends at the process limit" {
  run -1 --separate-stderr fw-run --procs 40 --timeout 20 -- sh -c 'while :; do sleep 732 & done'
  [ "$(field cause)" = procs ]
  awk -v w="$(field wall_s)" 'BEGIN { exit !(w < 10) }'
  ! pgrep -f '^sleep 732'
}

@test "the classic bash fork bomb is stopped at the process limit" {
  run -1 --separate-stderr fw-run --procs 30 --timeout 20 -- bash -c ':(){ :|:& };:; sleep 30'
  [ "$(field cause)" = procs ]
  awk -v w="$(field wall_s)" 'BEGIN { exit !(w < 10) }'
  [[ "$(jq -r '.events[].detail' <<<"$output")" == *"process limit 30"* ]]
}

@test "the process limit holds for uid 0 inside" {
  run -1 --separate-stderr fw-run --procs 20 --timeout 20 -- /usr/bin/python3 -c '
import os, sys, time
n = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(10)
            os._exit(0)
        n += 1
except BlockingIOError:
    print(n)
    sys.exit(1)
print("unlimited", n)'
  [ "$(field cause)" = procs ]
  [ "$(field stdout)" -lt 20 ]
}

@test "an allocation beyond --mem ends with cause memory" {
  run -1 --separate-stderr fw-run --mem 64 --timeout 20 -- \
    /usr/bin/python3 -c 'x = bytearray(512 << 20); x[::4096] = b"x" * len(x[::4096]); print("survived")'
  [ "$(field cause)" = memory ]
  [[ "$(field stdout)" != *survived* ]]
}

@test "a child killed for memory is an event; the command that survives it ends ok" {
  run --separate-stderr fw-run --mem 64 --timeout 20 -- \
    sh -c '/usr/bin/python3 -c "x = bytearray(512 << 20); x[::4096] = b\"x\" * len(x[::4096])"; echo child $?'
  assert_success
  [ "$(field cause)" = ok ]
  [[ "$(field stdout)" == "child "* ]]
  [ "$(field stdout)" != "child 0" ]
  if [ "$(field cgroup)" = true ]; then
    [[ "$(jq -r '.events[].detail' <<<"$output")" == *"memory cgroup killed"* ]]
  fi
}

@test "output beyond the cap is drained, counted and marked truncated" {
  run --separate-stderr fw-run --output-cap 1000 -- sh -c 'yes | head -c 5000000'
  assert_success
  [ "$(field 'stdout | length')" -eq 1000 ]
  [ "$(field stdout_bytes)" -eq 5000000 ]
  [ "$(field stdout_truncated)" = true ]
}

@test "--msgpack writes one sandbox record that rec reads" {
  command -v rec >/dev/null || skip "rec not built"
  fw-run --msgpack -- echo hi > "$T/r.mp"
  run rec json "$T/r.mp"
  assert_success
  [ "$(jq -r '.kind + " " + .stdout' <<<"$output")" = "sandbox hi" ]
}

@test "usage errors exit 2, --help exits 0 on stdout" {
  run -2 --separate-stderr fw-run
  [[ "$stderr" == *"no command"* ]]
  run -2 --separate-stderr fw-run --mem lots -- true
  [[ "$stderr" == *"bad --mem 'lots'"* ]]
  run -2 --separate-stderr fw-run --bogus -- true
  [[ "$stderr" == "fw-run: unknown option '--bogus'"* ]]
  run -2 --separate-stderr fw-run --timeout
  [[ "$stderr" == "fw-run: option '--timeout' needs a value"* ]]
  run -0 --separate-stderr fw-run --help
  [[ "$output" == usage:* ]]
  [ -z "$stderr" ]
}

@test "--check says the clean room works and what enforces the limits" {
  run --separate-stderr fw-run --check
  assert_success
  assert_line --index 0 "the clean room works"
  assert_line --regexp '^memory limit: (memory cgroup|address-space rlimit only)$'
  assert_line --regexp '^process limit: (pids cgroup|rlimit and watchdog)$'
  assert_line --regexp '^direct network attempts: (refused and recorded \(seccomp user notification\)|refused, not recorded \(.+\))$'
  run --separate-stderr fw-run --check --no-cgroup
  assert_line "memory limit: address-space rlimit only"
  assert_line "process limit: rlimit and watchdog"
}

@test "a missing workspace is a runtime error naming it" {
  run -1 --separate-stderr fw-run --workspace "$T/nope" -- true
  [ "$stderr" = "fw-run: workspace '$T/nope': No such file or directory" ]
  [ -z "$output" ]
}

@test "the sample repositories' suites pass inside the clean room" {
  cp -r "$BATS_TEST_DIRNAME/../samples/repos/textkit" "$T/py"
  run --separate-stderr fw-run --workspace "$T/py" --timeout 120 --mem 1024 --procs 256 -- \
    python3 -m pytest -q -p no:cacheprovider
  assert_success
  [[ "$(field stdout)" == *" passed"* ]]
  [ ! -e "$T/py/__pycache__" ]
  cp -r "$BATS_TEST_DIRNAME/../samples/repos/tally" "$T/c"
  run --separate-stderr fw-run --workspace "$T/c" --timeout 120 --procs 256 -- make -s test
  assert_success
  [[ "$(field stdout)" == *"ok "* ]]
  [[ "$(field stdout)" != *"not ok"* ]]
}

@test "without cgroups, memory is capped by address space and still named" {
  run -1 --separate-stderr fw-run --no-cgroup --mem 128 --timeout 20 -- \
    /usr/bin/python3 -c 'x = bytearray(512 << 20)'
  [ "$(field cause)" = memory ]
  [ "$(field cgroup)" = false ]
  [ "$(field cpu_s)" = -1 ]
  [[ "$(field stderr)" == *MemoryError* ]]
  [ "$(jq -r '.events[0].kind' <<<"$output")" = cgroup ]
}

@test "without cgroups, a run seen above the process limit is killed" {
  run -1 --separate-stderr fw-run --no-cgroup --procs 20 --timeout 20 -- /usr/bin/python3 -c '
import os, time
for _ in range(60):
    if os.fork() == 0:
        time.sleep(10)
        os._exit(0)
time.sleep(10)'
  [ "$(field cause)" = procs ]
  awk -v w="$(field wall_s)" 'BEGIN { exit !(w < 10) }'
}

@test "the usage and the man page synopsis agree word for word" {
  load usage
  usage_is_synopsis fw-run
}
