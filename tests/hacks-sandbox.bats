#!/usr/bin/env bats
# The clean room's escapes of issue 16 (cases 3, 4 and 5), each tried as an
# attacker would, from tests/hacks/sandbox-*: each must stay contained.

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  T="$BATS_TEST_TMPDIR"
  H="$BATS_TEST_DIRNAME/hacks"
  WS="$T/ws"
  mkdir -p "$WS"
}

# field NAME: one field of the JSON result in $output
field() { printf '%s\n' "$output" | jq -r ".$1"; }

# events: "KIND DETAIL" per line, from the JSON result in $output
events() { printf '%s\n' "$output" | jq -r '.events[] | "\(.kind) \(.detail)"'; }

# --- case 3: a set-user-ID-root program outliving the run ---

@test "a set-user-ID copy of id 300 directories deep does not outlive the run" {
  cp "$H/sandbox-03-setuid-deep/attack.py" "$WS/"
  run --separate-stderr fw-run --workspace "$WS" -- /usr/bin/python3 attack.py
  assert_success
  assert_equal "$(field stdout)" 0o4755
  deep=$(printf 'd/%.0s' $(seq 300))id
  # the event names the file (a long path by its end)
  events | grep -qE "^setid set-ID bits cleared on .*d/d/d/id$"
  [ -f "$WS/$deep" ]
  [ -z "$(find "$WS" -perm /6000)" ]
  # run as another user, it is that user: no euid=0
  if [ "$(id -u)" = 0 ]; then
    run setpriv --reuid=65534 --regid=65534 --clear-groups "$WS/$deep" -u
    assert_output 65534
  fi
}

@test "while it runs, what the command writes belongs to an unprivileged uid on the host" {
  [ "$(id -u)" = 0 ] || skip "the caller is not root: the command has the caller's uid"
  fw-run --workspace "$WS" -- sh -c '
    cp /usr/bin/id made && chmod 4755 made && mkdir dir && sleep 3.738' > "$T/out" &
  pid=$!
  for _ in $(seq 100); do [ -d "$WS/dir" ] && break; sleep 0.1; done
  owner=$(stat -c %u "$WS/made")
  # the suite runs in parallel: other tests' sleeps are left out by their args
  procs=$(ps -o uid=,args= -C sleep | grep ' sleep 3\.738$')
  wait "$pid"
  assert_equal "$owner" 65534
  [[ "$procs" =~ ^\ *65534\ sleep\ 3.738$ ]]
  # afterwards the caller holds the workspace again, the bit is gone
  assert_equal "$(stat -c %u "$WS/made")" 0
  [ -z "$(find "$WS" -perm /6000)" ]
}

@test "the unprivileged uid may open its own stdout, stderr and stdin again by name" {
  # pytest --junitxml=/dev/fd/3 opens the report pipe by name: a pipe is
  # mode 0600 to the uid that made it, so the run's ends must be its own
  run --separate-stderr fw-run --workspace "$WS" -- sh -c \
    'echo out > /dev/stdout && echo err > /dev/fd/2 && cat /dev/stdin && echo done'
  assert_success
  assert_equal "$(field exit)" 0
  assert_equal "$(field stdout)" "out
done"
  assert_equal "$(field stderr)" err
}

@test "the workspace is mounted nosuid and nodev inside" {
  run --separate-stderr fw-run --workspace "$WS" -- sh -c 'grep " /work " /proc/self/mountinfo'
  assert_success
  opts=$(field stdout | awk '{ print $6 }')
  [[ ",$opts," == *,nosuid,* ]]
  [[ ",$opts," == *,nodev,* ]]
}

@test "a workspace under a directory only root may search still works, and goes back to its owner" {
  [ "$(id -u)" = 0 ] || skip "the caller is not root"
  mkdir -m 700 "$T/private"
  mkdir "$T/private/ws"
  echo data > "$T/private/ws/in"
  run --separate-stderr fw-run --workspace "$T/private/ws" -- sh -c 'cat in; echo out > out'
  assert_success
  assert_equal "$(field stdout)" data
  assert_equal "$(stat -c %u:%g "$T/private/ws/out" "$T/private/ws")" "0:0
0:0"
}

# --- case 4: the seccomp filter's holes ---

@test "other architectures, x32, io_uring and socket families beyond unix and inet are refused and recorded" {
  command -v cc >/dev/null || skip "no C compiler"
  cc -O -o "$T/calls" "$H/sandbox-04-seccomp/calls.c"
  # i386 calls only where this kernel serves int $0x80 from 64-bit code
  i386=
  if "$T/calls" int80 2>/dev/null; then i386=i386; fi
  run --separate-stderr fw-run --ro-bind "$T/calls:/tmp/calls" -- /tmp/calls $i386
  assert_success
  want='x32 getpid: Function not implemented
io_uring_setup: Function not implemented
socket vsock: Address family not supported by protocol
socket packet: Address family not supported by protocol
socket netlink sock_diag: Address family not supported by protocol
socket netlink route: ok
socket inet: ok
socket inet6: ok
socket unix: ok'
  [ -z "$i386" ] || want="i386 socket vsock: Function not implemented
$want"
  assert_equal "$(field stdout)" "$want"
  want='syscall-denied x32 syscall 39
syscall-denied io_uring_setup
net-denied socket vsock
net-denied socket packet
net-denied socket netlink 4'
  [ -z "$i386" ] || want="syscall-denied i386 syscall 359
$want"
  assert_equal "$(events)" "$want"
}

@test "routing netlink still works inside: ip(8) lists the sandbox's own loopback only" {
  command -v ip >/dev/null || skip "no ip(8)"
  run --separate-stderr fw-run -- ip -o link
  assert_success
  assert_equal "$(field stdout | awk '{ print $2 }')" "lo:"
}

# --- case 5: limits where tests run ---

@test "a command given no limits runs under the default ones" {
  run --separate-stderr fw-run -- bash -c 'ulimit -t; ulimit -f; ulimit -n'
  assert_success
  # CPU seconds; 1 GiB in bash's 1024-byte blocks; open files
  assert_equal "$(field stdout)" "600
1048576
1024"
  # memory: a cgroup where the machine has one, else the address space
  if [ "$(field cgroup)" = false ]; then
    run --separate-stderr fw-run -- bash -c 'ulimit -v'
    assert_equal "$(field stdout)" 4194304
  fi
}

@test "an allocation beyond the memory limit is killed and reported" {
  run -1 --separate-stderr fw-run --mem 64 \
    --ro-bind "$H/sandbox-05-limits/alloc.py:/tmp/alloc.py" -- /usr/bin/python3 /tmp/alloc.py
  assert_equal "$(field cause)" memory
  [[ "$(field stdout)" != *survived* ]]
}

@test "a fork bomb under the default process limit is contained and named" {
  run -1 --separate-stderr fw-run -- bash -c ':(){ :|:& };:; sleep 30'
  assert_equal "$(field cause)" procs
  awk -v w="$(field wall_s)" 'BEGIN { exit !(w < 15) }'
  [[ "$(events)" == *"limit process limit 512"* ]]
}

@test "a file beyond the size cap is refused" {
  run -1 --separate-stderr fw-run --workspace "$WS" --fsize 1 -- \
    sh -c 'head -c 4194304 /dev/zero > big'
  assert_equal "$(field cause)" fsize
  [ "$(stat -c %s "$WS/big")" -le 1048576 ]
}
