#!/usr/bin/env bats
# rollout against an agent that attacks the host: what the sandbox wrote is
# read as regular files below the workspace, through no link, never
# through the workspace's own git, within stated limits.  Each test runs
# one attack of tests/hacks/rollout-*/ (issue 16, cases 1, 2, 5, 6, 11, 15
# and 16) on a stub-body task of
# samples/repos/textkit.

bats_require_minimum_version 1.5.0

PYTEST='python3 -m pytest -q -p no:cacheprovider --junitxml=$FW_REPORT'

setup_file() {
  export LC_ALL=C
  F="$BATS_FILE_TMPDIR"
  export TMPDIR="$F/tmp"
  mkdir -p "$TMPDIR"
  cp -r "$BATS_TEST_DIRNAME/../samples/repos/textkit" "$F/textkit"
  "$BATS_TEST_DIRNAME/../samples/repos/commit.sh" "$F/textkit"
  task-mutate --test-cmd "$PYTEST" --store "$F/st.git" --strategy stub-body --max 1 \
    -o "$F/task.mp" "$F/textkit" 2>/dev/null
  # the attacks, outside the sandbox's own work directory (where binding
  # them would make mount points in the workspace)
  cp -r "$BATS_TEST_DIRNAME/hacks" "$F/hacks"
  # the task tree, checked out, for git apply
  mkdir "$F/tree"
  git --git-dir="$F/st.git" archive "$(rec json "$F/task.mp" | jq -r .tree)" |
    tar -x -C "$F/tree"
}

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  F="$BATS_FILE_TMPDIR"
  T="$BATS_TEST_TMPDIR"
  H="$F/hacks"
  export TMPDIR="$T/tmp"
  mkdir -p "$TMPDIR"
}

@test "an agent that points the workspace's git at the host's repository gets an empty patch, not the solution" {
  run --separate-stderr rollout --policy "exec:$H/rollout-01-worktree/agent $F/textkit" \
    --timeout 60 -o "$T/r.mp" "$F/task.mp"
  assert_success
  run jq -c '[.stop, .patch]' <(rec json "$T/r.mp")
  assert_output '["exit",""]'
}

@test "an agent that points the workspace's git at a host directory leaks none of its files" {
  mkdir "$T/secret"
  echo 'TOPSECRET-1' > "$T/secret/secret.txt"
  run --separate-stderr rollout --policy "exec:$H/rollout-01-worktree/agent $T/secret" \
    --timeout 60 -o "$T/r.mp" "$F/task.mp"
  assert_success
  run jq -r .patch <(rec json "$T/r.mp")
  assert_output ''
  ! grep -q TOPSECRET "$T/r.mp"
}

@test "an agent that sets the workspace git's fsmonitor, hooks, include, worktree, alternates and a nested .git file gets its own edit as the patch, and nothing runs on the host" {
  mkdir -p "$T/h"
  cp -r "$F/textkit" "$T/h/repo"
  printf '[core]\n\tfsmonitor = touch %s/ran-include\n' "$T/h" > "$T/h/included.config"
  run --separate-stderr rollout --policy "exec:$H/rollout-01-git-config/agent $T/h" \
    --timeout 60 -o "$T/r.mp" "$F/task.mp"
  assert_success
  rec json "$T/r.mp" | jq -r .patch > "$T/p"
  # the two edits, and no other file
  run sh -c "grep '^diff --git' '$T/p'"
  assert_output $'diff --git a/README.md b/README.md\ndiff --git a/sub/x b/sub/x'
  grep -qx '+# an edit' "$T/p"
  [ ! -e "$T/h/ran-fsmonitor" ] && [ ! -e "$T/h/ran-hook" ] && [ ! -e "$T/h/ran-include" ]
}

@test "the task an agent is given holds no host path and no solution" {
  printf '#!/bin/sh\ncat "$FW_TASK_FILE"; echo; printf "%%s\\n" "$FW_TASK"\n' > "$T/show"
  chmod +x "$T/show"
  rollout --policy "exec:$T/show" --timeout 60 "$F/task.mp" | rec json > "$T/r.jsonl"
  jq -r .output.stdout "$T/r.jsonl" > "$T/seen"
  # the file and the variable agree, and keep the fields that state the problem
  [ "$(sed -n 1p "$T/seen")" = "$(sed -n 2p "$T/seen")" ]
  run jq -c 'keys' <(sed -n 1p "$T/seen")
  assert_output '["f2p","id","kind","lang","p2p","prompt","report","split","strategy","targets","test_cmd","v","xfail"]'
  # the record itself still carries the task whole (but its solution)
  run jq -c '[.task.repo == $repo, (.task | has("store")), (.task | has("solution"))]' \
    --arg repo "$F/textkit" "$T/r.jsonl"
  assert_output '[true,true,false]'
  ! grep -q -e "$F" -e st.git "$T/seen"
}

@test "a .git link to a host directory makes the host neither read nor remove a file there" {
  mkdir "$T/host"
  printf '{"messages": [{"role": "user", "content": "HOSTTRAJ"}]}\n' > "$T/host/fw-traj"
  run --separate-stderr rollout --policy "exec:$H/rollout-02-git-link/agent $T/host" \
    --timeout 60 -o "$T/r.mp" "$F/task.mp"
  [ -f "$T/host/fw-traj" ]
  assert_success
  ! grep -q HOSTTRAJ "$T/r.mp"
  run jq -r .traj_error <(rec json "$T/r.mp")
  assert_output '$FW_TRAJ is not a regular file in the workspace'
  # the links are in the patch as links, not as what they point at
  rec json "$T/r.mp" | jq -r .patch > "$T/p"
  run grep -c '^new file mode 120000' "$T/p"
  assert_output 2
  grep -qx "+$T/host/fw-traj" "$T/p"
}

@test "an exec agent runs under the clean room's limits: file size, CPU and memory" {
  run --separate-stderr rollout --policy "exec:$H/rollout-05-limits/agent" --timeout 60 \
    -o "$T/r.mp" "$F/task.mp"
  assert_success
  out=$(rec json "$T/r.mp" | jq -r .output.stdout)
  lim() { printf '%s\n' "$out" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
  [[ "$(lim fsize)" =~ ^[0-9]+$ ]]
  [[ "$(lim cpu)" =~ ^[0-9]+$ ]]
  # memory: a cgroup where the machine gives one, else the address space
  [ "$(fw-run -- true | jq -r .cgroup)" = true ] || [[ "$(lim as)" =~ ^[0-9]+$ ]]
}

@test "an 8 GiB \$FW_TRAJ is not read: traj_error names the limit and the host stays small" {
  local time=()
  [ -x /usr/bin/time ] && time=(/usr/bin/time -f %M -o "$T/rss")
  run --separate-stderr "${time[@]}" rollout --policy "exec:$H/rollout-06-traj-size/agent" \
    --timeout 60 -o "$T/r.mp" "$F/task.mp"
  assert_success
  run jq -r .traj_error <(rec json "$T/r.mp")
  assert_output '$FW_TRAJ is over the 16777216-byte limit'
  # kilobytes of the host process at its largest
  [ ! -f "$T/rss" ] || [ "$(cat "$T/rss")" -lt 200000 ]
}

@test "the workspace's git attributes and configuration do not change the patch: a Python edit is a text diff" {
  run --separate-stderr rollout --policy "exec:$H/rollout-11-attributes/agent" \
    --timeout 60 -o "$T/r.mp" "$F/task.mp"
  assert_success
  rec json "$T/r.mp" | jq -r .patch > "$T/p"
  grep -qx -- '-    raise NotImplementedError' "$T/p"
  grep -qx -- '+    return None  # hack 11' "$T/p"
  grep -q '^diff --git a/textkit/.*\.py b/textkit/' "$T/p"
  grep -qE '^index [0-9a-f]{7}\.\.[0-9a-f]{7} 100644$' "$T/p"
  ! grep -q -e 'GIT binary patch' -e '^Binary files' "$T/p"
}

@test "input that is not records stops rollout with one diagnostic at its position, the records before it written" {
  cat "$F/task.mp" "$H/rollout-15-not-records/tail.json" > "$T/in"
  run -1 --separate-stderr rollout --policy exec:true --timeout 60 -o "$T/r.mp" "$T/in"
  [ "$(printf '%s\n' "$stderr" | wc -l)" = 1 ]
  [[ "$stderr" == "rollout: $T/in: record 2 (byte $(wc -c < "$F/task.mp")): "* ]]
  [ "$(rec count "$T/r.mp")" = 1 ]
  run jq -r '[.kind, .stop] | join(" ")' <(rec json "$T/r.mp")
  assert_output 'rollout exit'
}

@test "bytes that are not UTF-8 from an agent give records rec json takes and a patch that applies byte for byte" {
  run --separate-stderr rollout --policy "exec:$H/rollout-16-invalid-utf8/agent" \
    --timeout 60 -o "$T/r.mp" "$F/task.mp"
  assert_success
  rec json "$T/r.mp" > "$T/r.jsonl"
  run jq -j '.output.stdout, .output.stderr, .turns[1].text' "$T/r.jsonl"
  assert_output - <<'EOF'
out �� caf�
err �� ���
café
EOF
  jq -r .patch "$T/r.jsonl" > "$T/p"
  run grep -c '^GIT binary patch' "$T/p"
  assert_output 2
  cp -r "$F/tree" "$T/tree"
  git -C "$T/tree" init -q
  git -C "$T/tree" apply "$T/p"
  printf 'caf\351 cr\350me\n' | cmp - "$T/tree/latin1.txt"
  { cat "$F/tree/README.md"; printf 'na\357ve \377\n'; } | cmp - "$T/tree/README.md"
}
