#!/usr/bin/env bats
# Task environments: a repository whose tests need a package that is not
# on the system.  samples/repos/greeter imports greetlib, which only its
# environment holds: a venv made here, offline, with
# `/usr/bin/python3 -m venv` and `pip install --no-index` from the copy in
# the repository's vendor/ (or by fw-env build from its flywheel.env).

bats_require_minimum_version 1.5.0

PYTEST='python3 -m pytest -q -p no:cacheprovider --junitxml=$FW_REPORT'

commit() { "$BATS_TEST_DIRNAME/../samples/repos/commit.sh" "$1"; }
json() { rec json "$1"; }

# roll ID PATCHFILE: a rollout of the task in $F/task.json as one JSON line
roll() {
  jq -c --arg id "$1" --rawfile p "$2" '{kind: "rollout", id: $id, v: 1, task: del(.solution),
      policy: {backend: "test", ckpt: "c1"}, sample: 0, patch: $p,
      turns: [{role: "user", text: "fix it"}]}' "$F/task.json"
}

setup_file() {
  export LC_ALL=C
  F="$BATS_FILE_TMPDIR"
  export TMPDIR="$F/tmp"
  mkdir -p "$TMPDIR"
  # the repository without its recipe: its environment comes from --env
  cp -r "$BATS_TEST_DIRNAME/../samples/repos/greeter" "$F/greeter"
  rm "$F/greeter/flywheel.env"
  commit "$F/greeter"
  # the venv, offline; pytest comes from the system's site directory
  cp -r "$F/greeter/vendor/greetlib" "$F/greetlib-src"
  /usr/bin/python3 -m venv --system-site-packages "$F/venv"
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$F/venv/bin/pip" install -q --no-index \
    --no-build-isolation "$F/greetlib-src"
  task-mutate --test-cmd "$PYTEST" --store "$F/st.git" --env-store "$F/envs" \
    --env "$F/venv" --strategy stub-body -o "$F/tasks.mp" "$F/greeter" 2> "$F/mutate.err"
  json "$F/tasks.mp" | jq -s -c 'map(select(.targets[0].symbol == "farewell"))[0]' \
    > "$F/task.json"
}

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  F="$BATS_FILE_TMPDIR"
  T="$BATS_TEST_TMPDIR"
  export TMPDIR="$F/tmp"
}

@test "an environment's id is its git tree id, and its kind follows from its files" {
  run fw-env id "$F/venv"
  assert_success
  # the peer: git names the same files (empty directories left out)
  git init -q "$T/g"
  git -C "$T/g" --work-tree="$F/venv" add -Af .
  assert_output "$(git -C "$T/g" --work-tree="$F/venv" write-tree)	venv"
  # git's order (a directory sorts as if its name ended in /), modes, links
  mkdir -p "$T/odd/lib/deep" "$T/odd/lib.d" "$T/odd/empty"
  echo a > "$T/odd/lib.txt"; echo b > "$T/odd/lib-x"; echo c > "$T/odd/lib/deep/f"
  echo d > "$T/odd/lib.d/g"; printf '#!/bin/sh
' > "$T/odd/run"; chmod 755 "$T/odd/run"
  ln -s lib/deep/f "$T/odd/link"
  git init -q "$T/g2"
  git -C "$T/g2" --work-tree="$T/odd" add -Af .
  [ "$(fw-env id "$T/odd" | cut -f1)" = "$(git -C "$T/g2" --work-tree="$T/odd" write-tree)" ]
  mkdir -p "$T/prefix/bin" "$T/root/etc" "$T/root/usr/bin"
  printf '#!/bin/sh\n' > "$T/prefix/bin/tool"
  ln -s /usr/bin/dash "$T/root/usr/bin/sh"
  run fw-env id "$T/prefix"
  assert_output --regexp '^[0-9a-f]{40}	prefix$'
  run fw-env id "$T/root"
  assert_output --regexp '^[0-9a-f]{40}	rootfs$'
  # a different byte is a different id
  before=$(fw-env id "$T/prefix")
  chmod +x "$T/prefix/bin/tool"
  [ "$(fw-env id "$T/prefix")" != "$before" ]
  mkfifo "$T/prefix/fifo"
  run -1 fw-env id "$T/prefix"
  assert_output --partial "fifo: not a file, directory or link"
}

@test "task-mutate --env stores the environment once and names it in every task" {
  id=$(fw-env id "$F/venv" | cut -f1)
  grep -F "greeter: candidates 3, validated 3" "$F/mutate.err"
  run jq -s -e --arg id "$id" 'length == 3 and all(.[]; .env == $id and (.f2p | length) > 0)' \
    <(json "$F/tasks.mp")
  assert_success
  # stored under its id, files without write bits
  [ -f "$F/envs/$id/pyvenv.cfg" ]
  [ -z "$(find "$F/envs/$id" -type f -perm /222)" ]
  [ "$(fw-env path --env-store "$F/envs" "$id")" = "$F/envs/$id" ]
  [ "$(ls "$F/envs")" = "$id" ]
}

@test "in the task's environment the solution scores 1 and the empty patch 0" {
  jq -r .solution "$F/task.json" > "$T/solution.diff"
  : > "$T/empty.diff"
  { roll sol "$T/solution.diff"; roll empty "$T/empty.diff"; } | rec from-json > "$T/r.mp"
  run --separate-stderr grade --no-time --env-store "$F/envs" -o "$T/g.mp" "$T/r.mp"
  assert_success
  run jq -r -c '[.id, .grade.reward, .grade.f2p_pass, .grade.f2p_total]' <(json "$T/g.mp")
  assert_output - <<'EOF'
["sol",1,2,2]
["empty",0,0,2]
EOF
}

@test "a new module shadowing a package of the environment is out of the patch's scope" {
  printf '%s\n' 'diff --git a/greetlib.py b/greetlib.py' 'new file mode 100644' \
    '--- /dev/null' '+++ b/greetlib.py' '@@ -0,0 +1 @@' '+__version__ = "1.0"' > "$T/shadow.diff"
  roll shadow "$T/shadow.diff" | rec from-json > "$T/r.mp"
  run --separate-stderr grade --no-time --env-store "$F/envs" -o "$T/g.mp" "$T/r.mp"
  assert_success
  run jq -r '.grade.hacks[] | select(.name == "patch-scope") | .detail' <(json "$T/g.mp")
  assert_output "greetlib.py: shadows an installed package"
}

@test "grade names an environment missing from the env store, and scores 0" {
  jq -r .solution "$F/task.json" > "$T/solution.diff"
  roll sol "$T/solution.diff" | rec from-json > "$T/r.mp"
  mkdir "$T/elsewhere"
  id=$(jq -r .env "$F/task.json")
  run -1 --separate-stderr grade --no-time --env-store "$T/elsewhere" -o "$T/g.mp" "$T/r.mp"
  [[ "$stderr" == *"environment $id is missing from the env store $T/elsewhere"* ]]
  run jq -r -c '[.grade.reward, (.grade.error | startswith("environment '"$id"' is missing"))]' \
    <(json "$T/g.mp")
  assert_output '[0,true]'
  # $FW_ENV_STORE names the store as --env-store does
  FW_ENV_STORE="$F/envs" run --separate-stderr grade --no-time "$T/r.mp"
  assert_success
}

@test "without its environment the suite cannot run: task-mutate refuses and -v shows why" {
  run -1 --separate-stderr task-mutate --test-cmd "$PYTEST" --store "$T/st.git" \
    --strategy stub-body -v "$F/greeter"
  [ -z "$output" ]
  [[ "$stderr" == *"greeter: no test passes on the original: 1 of 1 tests fail or error"* ]]
  # the test command's own account, from -v
  [[ "$stderr" == *"greeter: | E   ModuleNotFoundError: No module named 'greetlib'"* ]]
  [[ "$stderr" == *"greeter: | "*"1 error during collection"* ]]
  # the summary names the reason for the repository
  echo "$stderr" | grep -Fx "task-mutate: $F/greeter: not used: no-passing-test (no test passes on the original: 1 of 1 tests fail or error, 0 flaky)"
  # without -v, no output of the test command
  run -1 --separate-stderr task-mutate --test-cmd "$PYTEST" --store "$T/st.git" \
    --strategy stub-body "$F/greeter"
  [[ "$stderr" != *"ModuleNotFoundError"* ]]
}

@test "task-mutate refuses an --env that is neither a directory nor a stored id" {
  run -1 --separate-stderr task-mutate --test-cmd "$PYTEST" --store "$T/st.git" \
    --env-store "$T/envs" --env 0123456789abcdef0123456789abcdef01234567 "$F/greeter"
  [[ "$stderr" == *"environment 0123456789abcdef0123456789abcdef01234567 is missing from the env store $T/envs"* ]]
  run -1 --separate-stderr task-mutate --test-cmd "$PYTEST" --store "$T/st.git" \
    --env "$T/nowhere" "$F/greeter"
  [[ "$stderr" == *"environment '$T/nowhere': No such file or directory"* ]]
}

@test "fw-env build runs a repository's flywheel.env in the clean room; task-mutate finds what it built" {
  cp -r "$BATS_TEST_DIRNAME/../samples/repos/greeter" "$T/greeter"
  commit "$T/greeter"
  run --separate-stderr fw-env build --env-store "$T/envs" --store "$T/st.git" "$T/greeter"
  assert_success
  id=$output
  [ -f "$T/envs/$id/pyvenv.cfg" ]
  [ "$(fw-env id "$T/envs/$id" | cut -f1)" = "$id" ]
  # the venv was made where it is mounted
  grep -qx "command = /usr/bin/python3 -m venv --system-site-packages /env" "$T/envs/$id/pyvenv.cfg"
  # no --env: the recipe's environment, found by the recipe's blob id
  run --separate-stderr task-mutate --test-cmd "$PYTEST" --store "$T/st.git" \
    --env-store "$T/envs" --strategy stub-body --max 1 -o "$T/t.mp" "$T/greeter"
  assert_success
  [ "$(json "$T/t.mp" | jq -r .env)" = "$id" ]
  # an env store that has not built it: refused, with the reason
  run -1 --separate-stderr task-mutate --test-cmd "$PYTEST" --store "$T/st.git" \
    --env-store "$T/other" --strategy stub-body "$T/greeter"
  [[ "$stderr" == *"greeter: not used: env-missing (the env store $T/other holds no environment built from its flywheel.env"* ]]
}

@test "fw-env build has no network unless --allow names a host, and shows a failed recipe's output" {
  mkdir -p "$T/net"
  cat > "$T/net/flywheel.env" <<'EOF'
echo fetching the index
python3 -c 'import urllib.request; urllib.request.urlopen("http://index.example/simple/", timeout=5)'
EOF
  commit "$T/net"
  run -1 --separate-stderr fw-env build --env-store "$T/envs" --store "$T/st.git" "$T/net"
  [ -z "$output" ]
  [[ "$stderr" == *"net: the recipe failed (exit 1)"* ]]
  [[ "$stderr" == *"| fetching the index"* ]]
  [[ "$stderr" == *"| urllib.error.URLError"* ]]
  [ ! -d "$T/envs" ] || [ -z "$(ls "$T/envs")" ]
  # allowed: the request goes to the proxy, which cannot resolve the host
  run -1 --separate-stderr fw-env build --env-store "$T/envs" --store "$T/st.git" \
    --allow index.example "$T/net"
  [[ "$stderr" == *"net-allowed: "*"index.example"* ]]
}

@test "rollout finds the task's environment by its id, or says it is missing" {
  cat > "$T/agent" <<'EOF'
#!/bin/sh
python3 -c 'import greetlib, sys; print(greetlib.__version__, sys.prefix)' > found.txt
EOF
  chmod +x "$T/agent"
  jq -c . "$F/task.json" | rec from-json > "$T/t.mp"
  run --separate-stderr rollout --policy "exec:$T/agent" --env-store "$F/envs" --timeout 60 \
    -o "$T/r.mp" "$T/t.mp"
  assert_success
  [[ "$(json "$T/r.mp" | jq -r .patch)" == *"+1.0 /env"* ]]
  run -1 --separate-stderr rollout --policy "exec:$T/agent" --env-store "$T/none" \
    -o "$T/r.mp" "$T/t.mp"
  [[ "$stderr" == *"is missing from the env store $T/none"* ]]
}

@test "a rootfs environment is the sandbox's root in place of the system" {
  # a root of its own: dash as /bin/sh with its C library, a marker in /etc
  R="$T/rootfs"
  mkdir -p "$R/usr/bin" "$R/etc" "$R/usr/lib"
  cp /usr/bin/dash "$R/usr/bin/sh"
  for lib in $(ldd /usr/bin/dash | grep -o '/[^ ]*'); do
    mkdir -p "$R/usr$(dirname "$lib")"
    cp -L "$lib" "$R/usr$lib"
  done
  ln -s usr/bin "$R/bin"
  for d in lib lib64; do [ -d "$R/usr/$d" ] && ln -sfn "usr/$d" "$R/$d"; done
  echo "the image's own" > "$R/etc/marker"
  jq -c . "$F/task.json" | rec from-json > "$T/t.mp"
  run --separate-stderr rollout --policy 'exec:read l < /etc/marker; echo "$l" > seen.txt; [ -e /usr/bin/python3 ] || echo none > python.txt' \
    --env "$R" --timeout 60 -o "$T/r.mp" "$T/t.mp"
  assert_success
  json "$T/r.mp" | jq -r .patch > "$T/p"
  grep -qx "+the image's own" "$T/p"
  grep -qx "+none" "$T/p"
}

@test "fw-env --help prints the usage of fw-env(1) on stdout; bad use exits 2" {
  run --separate-stderr fw-env --help
  assert_success
  [ -z "$stderr" ]
  load usage
  usage_is_synopsis fw-env
  run -2 --separate-stderr fw-env frobnicate x
  [[ "$stderr" == *"unknown command 'frobnicate' (id, add, build, path)"* ]]
  run -2 --separate-stderr fw-env add --allow pypi.org "$F/venv"
  [[ "$stderr" == *"--allow, --timeout and -v go with build"* ]]
  run -2 --separate-stderr fw-env id
  [[ "$stderr" == *"want one operand"* ]]
  run -1 --separate-stderr fw-env path --env-store "$T/e" 0123456789abcdef0123456789abcdef01234567
  [[ "$stderr" == *"is missing from the env store $T/e"* ]]
}
