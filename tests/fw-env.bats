#!/usr/bin/env bats
# fw-env and task environments: a repository whose tests need a package
# that is not on the system.  samples/repos/greeter imports greetlib, which only its
# environment holds: a venv made here, offline, with
# `/usr/bin/python3 -m venv` and `pip install --no-index` from the copy in
# the repository's vendor/ (or by fw-env build from its flywheel.env).
#
# The OCI tests make an image layout here from local files: a base layer
# (gzipped) of dash as /bin/sh and the system's python3 with its C library
# and just the stdlib modules a TAP runner imports, and a top layer (plain
# tar) with a package, shapes, that only the image holds, and whiteouts.
# The image is the sandbox's root: the system's /usr is not there at all.

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
  image
}

# image: the repository geo, whose tests import shapes, and the OCI
# layout $F/oci of an image that holds shapes and a python to run them
image() {
  local G="$F/geo" R="$F/base"
  mkdir -p "$G/geo" "$G/tests"
  echo '"""Areas, computed with the shapes package of the image."""' > "$G/geo/__init__.py"
  cat > "$G/geo/area.py" <<'PY'
"""Areas."""
import shapes


def square(side):
    """The area of a square."""
    result = shapes.scale(side, side)
    return result


def rectangle(w, h):
    """The area of a w by h rectangle."""
    result = shapes.scale(w, h)
    return result
PY
  : > "$G/tests/__init__.py"
  cat > "$G/tests/test_area.py" <<'PY'
from geo import area


def test_square():
    assert area.square(3) == 9


def test_rectangle():
    assert area.rectangle(2, 5) == 10
PY
  cat > "$G/run_tests.py" <<'PY'
"""Runs tests/test_*.py in one process and prints TAP."""
import importlib
import pathlib
import sys

sys.path.insert(0, ".")
results = []
for path in sorted(pathlib.Path("tests").glob("test_*.py")):
    mod = importlib.import_module("tests." + path.stem)
    for name in sorted(n for n in dir(mod) if n.startswith("test_")):
        try:
            getattr(mod, name)()
            ok = True
        except Exception:
            ok = False
        results.append((ok, path.stem + "::" + name))
print("1..%d" % len(results))
for i, (ok, name) in enumerate(results, 1):
    print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
PY
  commit "$G"
  # the stdlib files the runner imports, from a run here with shapes beside it
  mkdir -p "$F/shapes/shapes"
  printf 'def scale(a, b):\n    return a * b\n' > "$F/shapes/shapes/__init__.py"
  (cd "$G" && PYTHONPATH="$F/shapes" /usr/bin/python3 -c 'import runpy, sys
sys.argv = ["run_tests.py"]
runpy.run_path("run_tests.py", run_name="__main__")
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None)
    if f and f.startswith("/usr/lib/python3"):
        print(f, file=sys.stderr)' 2> "$F/mods.txt" > /dev/null)
  mkdir -p "$R/usr/bin" "$R/etc" "$R/opt/data"
  cp /usr/bin/dash "$R/usr/bin/sh"
  cp -L /usr/bin/python3 "$R/usr/bin/python3"
  for lib in $(for b in /usr/bin/dash /usr/bin/python3; do ldd "$b"; done | grep -o '/[^ ]*' | sort -u); do
    mkdir -p "$R/usr$(dirname "$lib")"
    cp -L "$lib" "$R/usr$lib"
  done
  while read -r f; do
    mkdir -p "$R$(dirname "$f")"
    cp -L "$f" "$R$f"
  done < "$F/mods.txt"
  ln -s usr/bin "$R/bin"
  for d in lib lib64; do [ -d "$R/usr/$d" ] && ln -sfn "usr/$d" "$R/$d"; done
  echo hello > "$R/etc/motd"
  echo old > "$R/opt/data/old.txt"
  tar -C "$R" -czf "$F/base.tar.gz" .
  "$BATS_TEST_DIRNAME/fixtures/oci-layer.py" "$F/top.tar" \
    dir:usr/lib/python3/dist-packages/shapes \
    'file:usr/lib/python3/dist-packages/shapes/__init__.py:def scale(a, b):\n    return a * b\n' \
    'file:etc/image-release:geo 1\n' file:etc/.wh.motd \
    'file:opt/data/new.txt:new\n' file:opt/data/.wh..wh..opq \
    'suid:usr/bin/suid:#!/bin/sh\n' chr:usr/share/null fifo:usr/share/fifo \
    hard:usr/bin/python3.11:usr/bin/python3
  "$BATS_TEST_DIRNAME/fixtures/oci-layout.sh" "$F/oci" "$F/base.tar.gz" "$F/top.tar"
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

@test "fw-env import applies an OCI image's layers in order, whiteouts too, into an environment named by its content" {
  run --separate-stderr fw-env import --env-store "$T/envs" "$F/oci"
  assert_success
  id=$output
  E="$T/envs/$id"
  [ "$(fw-env id "$E")" = "$id	rootfs" ]
  # the top layer's whiteouts: etc/motd gone, opt/data made opaque
  [ ! -e "$E/etc/motd" ] && [ -f "$E/etc/image-release" ]
  [ "$(ls "$E/opt/data")" = new.txt ]
  # no set-ID bit, no device node, no FIFO; a hard link to the file it names
  [ "$(stat -c %a "$E/usr/bin/suid")" = 555 ]
  [ -z "$(ls "$E/usr/share")" ]
  cmp "$E/usr/bin/python3.11" /usr/bin/python3
  # the same image again: the same id, stored once
  run --separate-stderr fw-env import --env-store "$T/envs" "$F/oci"
  assert_output "$id"
  [ "$(ls "$T/envs" | grep -c .)" = 1 ]
}

# rollout_of PATCHFILE ID: a rollout of the task in $T/task1.json
rollout_of() {
  jq -c --arg id "$2" --rawfile p "$1" '{kind: "rollout", id: $id, v: 1, task: del(.solution),
      policy: {backend: "test", ckpt: "c1"}, sample: 0, patch: $p,
      turns: [{role: "user", text: "fix it"}]}' "$T/task1.json"
}

@test "in an image's root the tasks run: solutions score 1, empty patches 0; without the image refused" {
  id=$(fw-env import --env-store "$F/img-envs" "$F/oci")
  run --separate-stderr task-mutate --test-cmd 'python3 run_tests.py' --report tap \
    --store "$F/st.git" --env-store "$F/img-envs" --env "$id" --strategy stub-body -o "$T/t.mp" "$F/geo"
  assert_success
  run jq -s -c --arg id "$id" 'map([.env == $id, .targets[0].symbol, .f2p])' <(json "$T/t.mp")
  assert_output '[[true,"square",["test_area::test_square"]],[true,"rectangle",["test_area::test_rectangle"]]]'
  rec head -n 1 "$T/t.mp" | rec json > "$T/task1.json"
  jq -r .solution "$T/task1.json" > "$T/solution.diff"
  : > "$T/empty.diff"
  { rollout_of "$T/solution.diff" sol; rollout_of "$T/empty.diff" empty; } |
    rec from-json > "$T/r.mp"
  run --separate-stderr grade --no-time --env-store "$F/img-envs" -o "$T/g.mp" "$T/r.mp"
  assert_success
  run jq -r -c '[.id, .grade.reward, .grade.f2p_pass, .grade.f2p_total]' <(json "$T/g.mp")
  assert_output - <<'OUT'
["sol",1,1,1]
["empty",0,0,1]
OUT
  # in the image's root a policy finds the image's files and not the system's
  rec from-json < "$T/task1.json" > "$T/task1.mp"
  run --separate-stderr rollout --policy 'exec:read l < /etc/image-release; echo "$l" > seen.txt; [ -e /usr/bin/git ] || echo none >> seen.txt' \
    --env-store "$F/img-envs" --timeout 60 -o "$T/x.mp" "$T/task1.mp"
  assert_success
  run jq -r .patch <(json "$T/x.mp")
  assert_line '+geo 1'
  assert_line '+none'
  # on the system alone the suite cannot import shapes: refused, and -v says why
  run -1 --separate-stderr task-mutate --test-cmd 'python3 run_tests.py' --report tap \
    --store "$T/st.git" --strategy stub-body -v "$F/geo"
  [[ "$stderr" == *"geo: | ModuleNotFoundError: No module named 'shapes'"* ]]
  echo "$stderr" | grep -F "task-mutate: $F/geo: not used: no-tests"
}

@test "fw-env import refuses a layout with a wrong digest or size, a path out of the root or a bad index" {
  refused() {
    run -1 --separate-stderr fw-env import --env-store "$T/envs" "$T/bad"
    [[ "$stderr" == "fw-env: $T/bad: "*"$1"* ]] || { echo "$stderr"; return 1; }
    [ -z "$output" ] && [ -z "$(ls "$T/envs" 2>/dev/null)" ]
  }
  layout() { rm -rf "$T/bad"; "$BATS_TEST_DIRNAME/fixtures/oci-layout.sh" "$T/bad" "$@"; }
  "$BATS_TEST_DIRNAME/fixtures/oci-layer.py" "$T/one.tar" 'file:etc/ok:1'
  # a blob whose bytes are not its digest's
  layout "$T/one.tar"
  m=$(jq -r '.manifests[0].digest | ltrimstr("sha256:")' "$T/bad/index.json")
  l=$(jq -r '.layers[0].digest | ltrimstr("sha256:")' "$T/bad/blobs/sha256/$m")
  printf 'x' | dd of="$T/bad/blobs/sha256/$l" bs=1 seek=3 conv=notrunc 2>/dev/null
  refused "layer 1: sha256:$l: the blob's sha256 is "
  # a layer cut short: the size is not the descriptor's
  layout "$T/one.tar"
  truncate -s 1024 "$T/bad/blobs/sha256/$l"
  refused "layer 1: sha256:$l: the blob has 1024 bytes, the descriptor says"
  # members that leave the root: by "..", and through a link an earlier one made
  "$BATS_TEST_DIRNAME/fixtures/oci-layer.py" "$T/up.tar" 'file:etc/ok:1' 'file:../evil:x'
  layout "$T/up.tar"
  refused "layer 1: '../evil': a path that leaves the root"
  "$BATS_TEST_DIRNAME/fixtures/oci-layer.py" "$T/link.tar" "link:esc:$T" 'file:esc/evil:x'
  layout "$T/one.tar" "$T/link.tar"
  refused "layer 2: 'esc/evil': a path through a symbolic link or a file"
  [ ! -e "$T/evil" ]
  # an index that does not parse, a layout without oci-layout, a digest that is a path
  layout "$T/one.tar"
  printf '{"manifests": [}\n' > "$T/bad/index.json"
  refused "index.json: line 1, column 16: "
  layout "$T/one.tar"
  rm "$T/bad/oci-layout"
  refused "oci-layout: "
  layout "$T/one.tar"
  jq -c '.manifests[0].digest = "sha256:../../../etc/passwd"' "$T/bad/index.json" > "$T/i.json"
  mv "$T/i.json" "$T/bad/index.json"
  refused "digest 'sha256:../../../etc/passwd' is not sha256: and 64 lowercase hex digits"
}

@test "fw-env --help prints the usage of fw-env(1) on stdout; bad use exits 2" {
  run --separate-stderr fw-env --help
  assert_success
  [ -z "$stderr" ]
  load usage
  usage_is_synopsis fw-env
  run -2 --separate-stderr fw-env frobnicate x
  [[ "$stderr" == *"unknown command 'frobnicate' (id, add, build, import, path)"* ]]
  run -2 --separate-stderr fw-env add --allow pypi.org "$F/venv"
  [[ "$stderr" == *"--allow, --timeout and -v go with build"* ]]
  run -2 --separate-stderr fw-env id
  [[ "$stderr" == *"want one operand"* ]]
  run -1 --separate-stderr fw-env path --env-store "$T/e" 0123456789abcdef0123456789abcdef01234567
  [[ "$stderr" == *"is missing from the env store $T/e"* ]]
}
