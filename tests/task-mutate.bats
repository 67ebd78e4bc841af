#!/usr/bin/env bats
# task-mutate: git repositories in, validated task records out.

bats_require_minimum_version 1.5.0

PYTEST='python3 -m pytest -q -p no:cacheprovider --junitxml=$FW_REPORT'
MINI='python3 run_tests.py'

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  T="$BATS_TEST_TMPDIR"
  SAMPLES="$BATS_TEST_DIRNAME/../samples/repos"
  export TMPDIR="$T/tmp"
  mkdir -p "$TMPDIR"
}

# commit DIR: make DIR a git repository with one reproducible commit
commit() { "$BATS_TEST_DIRNAME/../samples/repos/commit.sh" "$1"; }

sample() { # sample NAME: a committed copy of samples/repos/NAME in $T/NAME
  cp -r "$SAMPLES/$1" "$T/$1"
  commit "$T/$1"
}

# A small Python package whose functions each provoke one outcome, with a
# fast TAP runner (one process, no pytest).
mini() {
  local d="$T/mini"
  mkdir -p "$d/mini" "$d/tests"
  cat > "$d/mini/__init__.py" <<'EOF'
"""A mini package: the one name it re-exports must exist at import."""
from .core import add  # noqa: F401
EOF
  cat > "$d/mini/core.py" <<'EOF'
"""Core helpers of the mini package."""


def add(a, b):
    """Sum of a and b."""
    total = a + b
    return total


def untested(x):
    """Nothing tests this one."""
    y = x * 2
    return y


def _shift(x):
    offset = 1
    return x + offset


def bump(x):
    """x plus one."""
    return _shift(x)


def only_doc():
    """Has a docstring and nothing else."""


def double(x):
    """Twice x."""
    result = x * 2
    return result


def clamp(x, lo, hi):
    """Limit x to [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
EOF
  cat > "$d/mini/legacy.py" <<'EOF'
"""The old name of clamp, kept as a copy for old callers."""


def clamp_old(x, lo, hi):
    """Limit x to [lo, hi] (old name)."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
EOF
  cat > "$d/mini/extra.py" <<'EOF'
"""Optional extras."""


def triple(x):
    """Three times x."""
    value = x * 3
    return value
EOF
  : > "$d/tests/__init__.py"
  cat > "$d/tests/test_core.py" <<'EOF'
import os

from mini import core


def test_add():
    assert core.add(2, 3) == 5


def test_bump():
    assert core.bump(1) == 2


def test_double_once():
    # checks only on the first run in a checkout
    marker = ".double-checked"
    if os.path.exists(marker):
        return
    open(marker, "w").close()
    assert core.double(2) == 4


def test_clamp():
    assert core.clamp(5, 0, 3) == 3
EOF
  cat > "$d/tests/test_extra.py" <<'EOF'
from mini import extra


def test_triple():
    assert extra.triple(2) == 6
EOF
  cat > "$d/run_tests.py" <<'EOF'
"""Runs tests/test_*.py in one process and prints TAP."""
import importlib
import pathlib
import sys

sys.path.insert(0, ".")
results = []
for path in sorted(pathlib.Path("tests").glob("test_*.py")):
    try:
        mod = importlib.import_module("tests." + path.stem)
    except Exception:
        results.append((False, path.stem + " (import)"))
        continue
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
EOF
  if [ "${1:-}" = with-retry ]; then
    cat >> "$d/mini/core.py" <<'EOF'


def ready():
    """True once the service is up."""
    state = "up"
    return state == "up"
EOF
    cat > "$d/tests/test_ready.py" <<'EOF'
import time

from mini import core


def test_ready_eventually():
    while True:
        try:
            if core.ready():
                return
        except Exception:
            time.sleep(0.01)
EOF
  fi
  if [ "${1:-}" = with-flaky ]; then
    cat > "$d/tests/test_flaky.py" <<'EOF'
import os


def test_fails_on_a_fresh_checkout():
    marker = ".ran-before"
    fresh = not os.path.exists(marker)
    open(marker, "w").close()
    assert not fresh
EOF
  fi
  commit "$d"
}

# json FILE: the records as JSON Lines
json() { rec json "$1"; }

@test "--help prints the usage on stdout and exits 0" {
  run --separate-stderr task-mutate --help
  assert_success
  [ -z "$stderr" ]
  # word for word the SYNOPSIS of task-mutate(1)
  load usage
  usage_is_synopsis task-mutate
}

@test "a bad option, strategy or missing --test-cmd is a usage error (exit 2)" {
  run -2 --separate-stderr task-mutate --bogus x
  run -2 --separate-stderr task-mutate --test-cmd true --strategy shuffle x
  [[ "$stderr" == *"unknown strategy 'shuffle'"* ]]
  run -2 --separate-stderr task-mutate x
  [[ "$stderr" == *"--test-cmd is required"* ]]
  run -2 --separate-stderr task-mutate --test-cmd true --split train=x x
  run -2 --separate-stderr task-mutate --test-cmd true --shard 3/2 x
  [ -z "$output" ]
}

@test "stub-body tasks from the Python sample carry every field of a task record" {
  sample textkit
  run --separate-stderr task-mutate --test-cmd "$PYTEST" --store "$T/st.git" \
    --strategy stub-body --max 3 -j 2 -o "$T/t.mp" "$T/textkit"
  assert_success
  [ -z "$output" ]
  [[ "$stderr" == *"task-mutate: candidates 3, validated 3, rejected 0: "* ]]
  [ "$(rec count "$T/t.mp")" = 3 ]
  json "$T/t.mp" > "$T/t.jsonl"
  # every field the record schema names, with the right types
  run jq -e -s 'all(.[]; .kind == "task" and .v == 1 and (.id | test("^[0-9a-f]{16}$"))
      and .strategy == "stub-body" and (.base | length) == 40 and (.orig_tree | length) == 40
      and (.tree | length) == 40 and .tree != .orig_tree and (.f2p | length) > 0
      and (.p2p | length) > 30 and .xfail == [] and (.split | IN("train", "eval", "private"))
      and .test_cmd == "python3 -m pytest -q -p no:cacheprovider --junitxml=$FW_REPORT"
      and (.targets[0] | (.lang == "python" and .start < .end and (.path | startswith("textkit/"))))
      and (.targets[0].symbol as $s | .prompt | contains($s)) and (.solution | startswith("diff --git")))' "$T/t.jsonl"
  assert_success
  # f2p and p2p are disjoint
  run jq -e -s 'all(.[]; (.f2p - .p2p) == .f2p)' "$T/t.jsonl"
  assert_success
}

@test "the solution applied to the task tree gives back the original tree" {
  mini
  task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" --strategy stub-body \
    --strategy delete-feature --strategy delete-file "$T/mini" > "$T/t.mp" 2>/dev/null
  [ "$(json "$T/t.mp" | jq -r .strategy | sort -u | tr '\n' ' ')" = "delete-feature delete-file stub-body " ]
  json "$T/t.mp" | while read -r line; do
    tree=$(jq -r .tree <<<"$line"); orig=$(jq -r .orig_tree <<<"$line")
    rm -rf "$T/w" && mkdir "$T/w"
    git -C "$T/st.git" archive "$tree" | tar -x -C "$T/w"
    jq -r .solution <<<"$line" > "$T/fix.diff"
    (cd "$T/w" && git init -q && git apply "$T/fix.diff" && git add -A &&
      [ "$(git write-tree)" = "$orig" ])
    # the statement shows no line the solution adds
    jq -r .prompt <<<"$line" > "$T/prompt"
    ! grep -F -x -f <(sed -n 's/^+\([^+].*[a-z].*\)$/\1/p' "$T/fix.diff") "$T/prompt"
  done
}

@test "graded as rollouts, a task's solution resolves it and an empty patch does not" {
  command -v grade || skip "grade is not built"
  mini
  task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" --strategy delete-feature \
    --strategy delete-file -o "$T/t.mp" "$T/mini" 2>/dev/null
  json "$T/t.mp" | jq -c '{kind: "rollout", id: ("s" + .id), v: 1, task: del(.solution), patch: .solution},
                           {kind: "rollout", id: ("e" + .id), v: 1, task: del(.solution), patch: ""}' |
    rec from-json > "$T/r.mp"
  run --separate-stderr grade -o "$T/g.mp" "$T/r.mp"
  assert_success
  run jq -r -s -c 'map([.id[0:1], .grade.resolved, .grade.f2p_pass == .grade.f2p_total]) | sort | .[]' \
    <(json "$T/g.mp")
  assert_output - <<'EOF'
["e",false,false]
["e",false,false]
["s",true,true]
["s",true,true]
EOF
}

@test "the store is a bare repository that keeps every task tree under a ref" {
  mini
  task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" --strategy delete-feature \
    "$T/mini" > "$T/t.mp" 2>/dev/null
  id=$(rec get .id "$T/t.mp" | tr -d '"')
  tree=$(rec get .tree "$T/t.mp" | tr -d '"')
  [ "$(git -C "$T/st.git" rev-parse --is-bare-repository)" = true ]
  [ "$(git -C "$T/st.git" rev-parse "refs/flywheel/tasks/$id")" = "$tree" ]
  [ "$(git -C "$T/st.git" cat-file -t "$tree")" = tree ]
  # the temporary workspaces are gone
  [ -z "$(ls -A "$TMPDIR")" ]
}

@test "stub-body works on the C sample with a TAP report" {
  sample tally
  run --separate-stderr task-mutate --test-cmd 'make -s test' --report tap --store "$T/st.git" \
    --strategy stub-body --max 2 -o "$T/t.mp" "$T/tally"
  assert_success
  [ -z "$output" ]
  run jq -e -s 'length == 2 and all(.[]; .report == "tap" and .targets[0].lang == "c"
      and (.f2p | length) > 0 and (.solution | contains("-\tabort(); /* not implemented */")))' \
    <(json "$T/t.mp")
  assert_success
}

@test "every rejection reason is counted, and -v says which candidate and why" {
  mini with-retry
  run --separate-stderr task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" \
    --timeout 2 -j 2 -v "$T/mini"
  assert_success
  echo "$stderr" > "$T/err"
  assert_equal "$(tail -1 "$T/err")" \
    "task-mutate: candidates 24, validated 9, rejected 15: nothing-to-remove 1, leak 5, broken 2, timeout 2, no-f2p 3, empty-patch-passes 2"
  grep -F 'stub-body mini/core.py:only_doc: nothing-to-remove' "$T/err"
  grep -F 'stub-body mini/core.py:untested: no-f2p' "$T/err"
  grep -F 'stub-body mini/core.py:clamp: leak: the removed code is still in the tree' "$T/err"
  grep -F 'stub-body mini/core.py:ready: timeout: timeout after' "$T/err"
  grep -F 'stub-body mini/core.py:double: empty-patch-passes' "$T/err"
  grep -F 'delete-function mini/core.py:add: broken' "$T/err"
  grep -F 'delete-file mini/core.py: broken' "$T/err"
  grep -F 'delete-file mini/legacy.py: leak' "$T/err"
  grep -F 'delete-function mini/core.py:ready: timeout' "$T/err"
}

@test "delete-function, delete-feature and delete-file tasks name what was removed" {
  mini
  task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" "$T/mini" > "$T/t.mp" 2>/dev/null
  json "$T/t.mp" > "$T/t.jsonl"
  run jq -r -s -c 'map([.strategy, (.targets | map(.symbol) | join(",")), (.f2p | join(","))]) | sort | .[]' "$T/t.jsonl"
  assert_output - <<'EOF'
["delete-feature","bump,_shift","test_core::test_bump"]
["delete-file",",triple","test_extra::test_triple"]
["delete-function","_shift","test_core::test_bump"]
["delete-function","bump","test_core::test_bump"]
["delete-function","triple","test_extra::test_triple"]
["stub-body","_shift","test_core::test_bump"]
["stub-body","add","test_core::test_add"]
["stub-body","bump","test_core::test_bump"]
["stub-body","triple","test_extra::test_triple"]
EOF
  run jq -r 'select(.strategy == "delete-feature") | .prompt' "$T/t.jsonl"
  assert_output --partial 'The python function `bump` and the private helpers only it used (`_shift`) have been removed from `mini/core.py`.'
  assert_output --partial '    x plus one.'
  refute_output --partial 'offset'
  run jq -r 'select(.strategy == "delete-file") | .prompt' "$T/t.jsonl"
  assert_output --partial 'The python file `mini/extra.py` has been removed. Write it again; it defined `triple`.'
}

@test "the same seed gives the same tasks whatever -j, another seed another order" {
  mini
  for j in 1 2; do
    task-mutate --test-cmd "$MINI" --report tap --store "$T/st$j.git" --seed 5 -j $j --max 4 \
      --strategy stub-body --strategy delete-function "$T/mini" 2>/dev/null | rec json | jq -c 'del(.store)' > "$T/j$j"
  done
  [ "$(wc -l < "$T/j1")" = 4 ]
  cmp "$T/j1" "$T/j2"
  task-mutate --test-cmd "$MINI" --report tap --store "$T/st1.git" --seed 6 -j 2 --max 4 \
    --strategy stub-body --strategy delete-function "$T/mini" 2>/dev/null | rec json | jq -c 'del(.store)' > "$T/j3"
  ! cmp -s "$T/j1" "$T/j3"
}

@test "--shard K/N splits the candidates into disjoint parts that cover them all" {
  mini
  task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" --strategy stub-body \
    "$T/mini" 2>/dev/null | rec json | jq -r .id | sort > "$T/all"
  for k in 0 1 2; do
    task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" --strategy stub-body \
      --shard $k/3 "$T/mini" 2>/dev/null | rec json | jq -r .id
  done | sort > "$T/parts"
  [ "$(wc -l < "$T/all")" = 4 ]
  diff "$T/all" "$T/parts"
}

@test "--split puts tasks in the named splits, --max caps the count" {
  mini
  run --separate-stderr task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" \
    --split train=0,eval=0,private=1 --max 2 -o "$T/t.mp" "$T/mini"
  assert_success
  [[ "$stderr" == *"validated 2,"* ]]
  [ "$(json "$T/t.mp" | jq -r .split | sort -u)" = private ]
}

@test "repositories may come from the repo fields of records" {
  mini
  printf '{"repo":"%s"}\n' "$T/mini" | rec from-json > "$T/in.mp"
  run --separate-stderr task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" \
    --strategy delete-feature "$T/in.mp"
  assert_success
  [[ "$stderr" == *"validated 1,"* ]]
}

@test "a record's test_cmd and report fields stand in for --test-cmd and --report" {
  mini
  printf '{"repo":"%s","test_cmd":"%s","report":"tap"}\n{"repo":"%s"}\n' "$T/mini" "$MINI" "$T/mini" |
    rec from-json > "$T/in.mp"
  run -1 --separate-stderr task-mutate --store "$T/st.git" --strategy delete-feature \
    -o "$T/t.mp" - < "$T/in.mp"
  [[ "$stderr" == *"mini: no test command (--test-cmd, or a test_cmd field)"* ]]
  [[ "$stderr" == *"validated 1,"* ]]
  [ "$(rec get .test_cmd "$T/t.mp")" = "python3 run_tests.py" ]
  [ "$(rec get .report "$T/t.mp")" = tap ]
}

@test "JavaScript functions become tasks" {
  command -v node || skip "node is not installed"
  d="$T/js"; mkdir -p "$d/lib" "$d/test"
  cat > "$d/lib/text.js" <<'EOF'
// Title Case every word.
function titleCase(s) {
  return s.split(" ").map((w) => w[0].toUpperCase() + w.slice(1)).join(" ");
}

function reverse(s) {
  return s.split("").reverse().join("");
}

module.exports = { titleCase, reverse };
EOF
  cat > "$d/test/run.js" <<'EOF'
const t = require("../lib/text.js");
const cases = [
  ["title case", () => t.titleCase("hello big world") === "Hello Big World"],
  ["reverse", () => t.reverse("abc") === "cba"],
];
console.log(`1..${cases.length}`);
cases.forEach(([name, f], i) => {
  let ok = false;
  try { ok = f(); } catch (e) { ok = false; }
  console.log(`${ok ? "ok" : "not ok"} ${i + 1} - ${name}`);
});
EOF
  commit "$d"
  run --separate-stderr task-mutate --test-cmd 'node test/run.js' --report tap --store "$T/st.git" \
    --strategy stub-body --lang javascript -o "$T/t.mp" "$d"
  assert_success
  run jq -r -s -c 'map([.targets[0].symbol, .targets[0].lang, .f2p[0]]) | sort | .[]' <(json "$T/t.mp")
  assert_output - <<'EOF'
["reverse","javascript","reverse"]
["titleCase","javascript","title case"]
EOF
}

# Go and TypeScript: the fixture repositories under tests/fixtures/repos.
GOTEST='go test -vet=off -json ./... >"$FW_REPORT"'
TSTEST='tsc -p . >/dev/null; node --test --test-reporter=junit --test-reporter-destination="$FW_REPORT" dist/test/'

fixture() { # fixture NAME: a committed copy of tests/fixtures/repos/NAME in $T/NAME
  cp -r "$BATS_TEST_DIRNAME/fixtures/repos/$1" "$T/$1"
  commit "$T/$1"
}

need_go() { command -v go >/dev/null || skip "go is not installed (Debian golang-go)"; }

need_ts() {
  command -v tsc >/dev/null || skip "tsc is not installed (Debian node-typescript)"
  node -e 'process.exit(require("node:test/reporters").junit ? 0 : 1)' 2>/dev/null ||
    skip "node has no junit test reporter (Node.js 20.13 or later)"
}

# graded FILE: grade each task of FILE with its solution ("s") and with an
# empty patch ("e"); prints [s|e, resolved, f2p all pass] sorted
graded() {
  json "$1" | jq -c '{kind: "rollout", id: ("s" + .id), v: 1, task: del(.solution), patch: .solution},
                     {kind: "rollout", id: ("e" + .id), v: 1, task: del(.solution), patch: ""}' |
    rec from-json > "$T/r.mp"
  grade -o "$T/g.mp" "$T/r.mp" || return 1
  jq -r -s -c 'map([.id[0:1], .grade.resolved, .grade.f2p_pass == .grade.f2p_total]) | sort | .[]' \
    <(json "$T/g.mp")
}

@test "Go: delete-feature tasks from go test -json results fail with the mutation, pass with the solution" {
  need_go
  fixture gokit
  run --separate-stderr task-mutate --report gotest --test-cmd "$GOTEST" --store "$T/st.git" \
    --strategy delete-feature -j 2 -o "$T/t.mp" "$T/gokit"
  assert_success
  [[ "$stderr" == *"task-mutate: candidates 2, validated 2, rejected 0: "* ]]
  # the function goes with the private helper only it uses; the package no
  # longer compiles, so every test of it fails, and the others pass
  run jq -r -s -c 'sort_by(.targets[0].symbol) | .[] | [[.targets[].symbol], .lang, .report, .f2p, (.p2p | length)]' \
    <(json "$T/t.mp")
  assert_output - <<'EOF'
[["IsPalindrome","letters"],"go","gotest",["example.org/gokit/strutil::TestCapitalize","example.org/gokit/strutil::TestIsPalindrome","example.org/gokit/strutil::TestIsPalindrome/not","example.org/gokit/strutil::TestIsPalindrome/phrase","example.org/gokit/strutil::TestReverse","example.org/gokit/strutil::TestTruncate"],8]
[["Median","sortedCopy"],"go","gotest",["example.org/gokit/mathx::TestClamp","example.org/gokit/mathx::TestGCD","example.org/gokit/mathx::TestIsPrime","example.org/gokit/mathx::TestLCM","example.org/gokit/mathx::TestMedian"],9]
EOF
  command -v grade >/dev/null || skip "grade is not built"
  run graded "$T/t.mp"
  assert_success
  assert_output - <<'EOF'
["e",false,false]
["e",false,false]
["s",true,true]
["s",true,true]
EOF
}

@test "Go: a stubbed body panics with not implemented and fails the tests that call it" {
  need_go
  fixture gokit
  run --separate-stderr task-mutate --report gotest --test-cmd "$GOTEST" --store "$T/st.git" \
    --strategy stub-body --max 2 -j 2 -o "$T/t.mp" "$T/gokit"
  assert_success
  [[ "$stderr" == *"validated 2,"* ]]
  json "$T/t.mp" | while read -r line; do
    path=$(jq -r '.targets[0].path' <<<"$line"); tree=$(jq -r .tree <<<"$line")
    git -C "$T/st.git" show "$tree:$path" | grep -q 'panic("not implemented")'
    jq -e '.targets[0].symbol as $s | .lang == "go" and (.f2p | length) > 0
           and (.f2p | all(startswith("example.org/gokit/")))
           and (.prompt | test("func (\\([^)]*\\) )?" + $s + "\\("))' <<<"$line"
  done
}

@test "TypeScript: tasks from tsc and node --test's JUnit report fail with the mutation, pass with the solution" {
  need_ts
  fixture tskit
  run --separate-stderr task-mutate --test-cmd "$TSTEST" --store "$T/st.git" \
    --strategy delete-feature -j 2 -o "$T/t.mp" "$T/tskit"
  assert_success
  [[ "$stderr" == *"task-mutate: candidates 2, validated 2, rejected 0: "* ]]
  run jq -r -s -c 'sort_by(.targets[0].symbol) | .[] | [[.targets[].symbol], .lang, .f2p, (.p2p | length)]' \
    <(json "$T/t.mp")
  assert_output - <<'EOF'
[["mean","total"],"typescript",["test::mean of values, NaN of none"],10]
[["slugify","stripAccents"],"typescript",["test::slugify drops accents and punctuation"],10]
EOF
  command -v grade >/dev/null || skip "grade is not built"
  run graded "$T/t.mp"
  assert_success
  assert_output - <<'EOF'
["e",false,false]
["e",false,false]
["s",true,true]
["s",true,true]
EOF
}

@test "TypeScript: a stubbed method throws not implemented; the solution restores the tree" {
  need_ts
  fixture tskit
  run --separate-stderr task-mutate --test-cmd "$TSTEST" --store "$T/st.git" \
    --strategy stub-body --max 2 -j 2 -o "$T/t.mp" "$T/tskit"
  assert_success
  [[ "$stderr" == *"validated 2,"* ]]
  json "$T/t.mp" | while read -r line; do
    path=$(jq -r '.targets[0].path' <<<"$line"); tree=$(jq -r .tree <<<"$line")
    orig=$(jq -r .orig_tree <<<"$line")
    git -C "$T/st.git" show "$tree:$path" | grep -q 'throw new Error("not implemented");'
    jq -e '.lang == "typescript" and (.f2p | length) > 0 and (.f2p | all(startswith("test::")))' <<<"$line"
    rm -rf "$T/w" && mkdir "$T/w"
    git -C "$T/st.git" archive "$tree" | tar -x -C "$T/w"
    jq -r .solution <<<"$line" > "$T/fix.diff"
    (cd "$T/w" && git init -q && git apply "$T/fix.diff" && git add -A &&
      [ "$(git write-tree)" = "$orig" ])
  done
}

@test "--report gotest reads the report file; a line that is no test2json event leaves no results" {
  mini
  run -1 --separate-stderr task-mutate --report gotest --test-cmd 'echo "{oops" >"$FW_REPORT"' \
    --store "$T/st.git" "$T/mini"
  [[ "$stderr" == *"no tests found: exit 0, line 1: not a go test -json event"* ]]
  run -2 --separate-stderr task-mutate --report junitxml --test-cmd true "$T/mini"
  [[ "$stderr" == *"unknown report format 'junitxml' (junit, tap, gotest)"* ]]
}

@test "a dirty work tree is refused unless --allow-dirty, which uses HEAD" {
  mini
  echo "# local edit" >> "$T/mini/mini/core.py"
  run -1 --separate-stderr task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" \
    --strategy delete-feature "$T/mini"
  [ -z "$output" ]
  [[ "$stderr" == *"mini: work tree has uncommitted changes"* ]]
  run --separate-stderr task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" \
    --strategy delete-feature --allow-dirty -o "$T/t.mp" "$T/mini"
  assert_success
  [ "$(rec get .base "$T/t.mp" | tr -d '"')" = "$(git -C "$T/mini" rev-parse HEAD)" ]
}

@test "a directory that is not a git repository is an error, and the run goes on" {
  mini
  mkdir "$T/plain"
  run -1 --separate-stderr task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" \
    --strategy delete-feature "$T/plain" "$T/mini"
  [[ "$stderr" == *"plain: not a git repository"* ]]
  [[ "$stderr" == *"validated 1,"* ]]
  [ -n "$output" ]
}

@test "no tests found, and no test passing on the original, are errors" {
  mini
  run -1 --separate-stderr task-mutate --test-cmd 'true' --report tap --store "$T/st.git" "$T/mini"
  [[ "$stderr" == *"mini: no tests found: exit 0, no test results"* ]]
  run -1 --separate-stderr task-mutate --test-cmd 'echo "1..1"; echo "not ok 1 - x"' --report tap \
    --store "$T/st.git" "$T/mini"
  [[ "$stderr" == *"mini: no test passes on the original"* ]]
  [ -z "$output" ]
}

@test "a report planted as a link to a host file is not read" {
  mini
  run -1 --separate-stderr task-mutate --test-cmd 'ln -sf /etc/hostname "$FW_REPORT"' \
    --store "$T/st.git" "$T/mini"
  [[ "$stderr" == *"mini: no tests found: exit 0, the report is not a regular file"* ]]
  [ -z "$output" ]
}

@test "tests failing on the original are reported and left out of f2p and p2p" {
  mini
  cmd="$MINI; echo 'not ok 99 - needs a network'; echo 'not ok 98 - known bug # TODO'"
  run --separate-stderr task-mutate --test-cmd "$cmd" --report tap --store "$T/st.git" \
    --strategy delete-feature -o "$T/t.mp" "$T/mini"
  assert_success
  [[ "$stderr" == *"mini: 1 tests fail on the original and are excluded"* ]]
  json "$T/t.mp" | jq -e '(.f2p + .p2p) | index("needs a network") == null'
  # an expected failure stays one: in p2p, and listed in xfail
  json "$T/t.mp" | jq -e '.xfail == ["known bug"] and (.p2p | index("known bug")) != null'
}

@test "flaky tests (they differ between two runs of the original) are reported and excluded" {
  mini with-flaky
  run --separate-stderr task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" \
    --strategy delete-feature -o "$T/t.mp" "$T/mini"
  assert_success
  [[ "$stderr" == *"mini: 1 flaky tests (differ between two runs) are excluded"* ]]
  json "$T/t.mp" | jq -e '.p2p == ["test_core::test_add", "test_core::test_clamp", "test_core::test_double_once", "test_extra::test_triple"]'
}

@test "a run killed midway leaves no output file and a consistent store" {
  mini
  task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" -o "$T/t.mp" "$T/mini" 2>/dev/null &
  pid=$!
  for _ in $(seq 100); do
    [ -n "$(git -C "$T/st.git" for-each-ref refs/flywheel/tasks 2>/dev/null)" ] && break
    sleep 0.1
  done
  kill -9 $pid
  wait $pid || true
  [ ! -e "$T/t.mp" ]
  git -C "$T/st.git" fsck --no-dangling 2>&1 | grep -v '^notice' | { ! grep .; }
  # and the next run works with the same store
  run --separate-stderr task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" \
    --strategy delete-feature -o "$T/t.mp" "$T/mini"
  assert_success
  [ "$(rec count "$T/t.mp")" = 1 ]
}

@test "a run stopped by SIGTERM removes its workspaces" {
  mini
  task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" -j 2 -o "$T/t.mp" "$T/mini" 2>/dev/null &
  pid=$!
  for _ in $(seq 100); do
    [ -n "$(ls -A "$TMPDIR")" ] && break
    sleep 0.05
  done
  sleep 0.5
  [ -n "$(ls -A "$TMPDIR")" ]
  kill -TERM $pid
  st=0
  wait $pid || st=$?
  [ "$st" = 143 ]
  [ -z "$(ls -A "$TMPDIR")" ]
}

@test "-o names a FIFO: written in place, never replaced by a file" {
  mini
  mkfifo "$T/fifo"
  timeout 30 cat "$T/fifo" > "$T/got" &
  reader=$!
  run --separate-stderr task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" \
    --strategy delete-feature -o "$T/fifo" "$T/mini"
  assert_success
  wait $reader
  [ -p "$T/fifo" ]
  [ "$(rec count "$T/got")" = 1 ]
}

@test "compressed output with -z reads back" {
  mini
  run --separate-stderr task-mutate --test-cmd "$MINI" --report tap --store "$T/st.git" \
    --strategy delete-feature -z -o "$T/t.zst" "$T/mini"
  assert_success
  [ "$(head -c 4 "$T/t.zst" | od -An -tx1 | tr -d ' ')" = 28b52ffd ]
  [ "$(rec count "$T/t.zst")" = 1 ]
}

@test "an original suite that outlives --timeout is an error" {
  mini
  run -1 --separate-stderr task-mutate --test-cmd 'sleep 30' --report tap --timeout 1 \
    --store "$T/st.git" "$T/mini"
  [[ "$stderr" == *"mini: the original test suite did not finish: timeout after"* ]]
}

@test "without ctags the run stops with a clear error" {
  mini
  mkdir "$T/bin"
  for t in bwrap git sh python3 socat; do
    p=$(command -v $t) && ln -s "$p" "$T/bin/$t"
  done
  tm=$(command -v task-mutate)
  run -1 --separate-stderr env PATH="$T/bin" "$tm" --test-cmd "$MINI" --report tap \
    --store "$T/st.git" "$T/mini"
  [[ "$stderr" == *"ctags not found (install Universal Ctags"* ]]
}

# A C repository whose tests are one program: no argument runs every test
# in one process, --list names them, NAME runs one.
onebin() {
  local d="$T/onebin"
  mkdir -p "$d/src" "$d/tests"
  cat > "$d/src/calc.c" <<'EOF2'
/* calc.c: small integer helpers. */
#include "calc.h"

int calc_add(int a, int b)
{
	int s = a + b;
	return s;
}

int calc_max(int a, int b)
{
	if (a > b)
		return a;
	return b;
}
EOF2
  printf 'int calc_add(int a, int b);\nint calc_max(int a, int b);\n' > "$d/src/calc.h"
  cat > "$d/tests/run_tests.c" <<'EOF2'
#include <stdio.h>
#include <string.h>
#include "../src/calc.h"

static int t_add(void) { return calc_add(2, 3) == 5; }
static int t_max(void) { return calc_max(2, 7) == 7 && calc_max(7, 2) == 7; }

static const struct { const char *name; int (*fn)(void); } tests[] = {
	{ "add", t_add }, { "max", t_max },
};

int main(int argc, char **argv)
{
	int n = sizeof tests / sizeof tests[0], bad = 0;
	for (int i = 0; i < n; i++) {
		if (argc > 1 && !strcmp(argv[1], "--list")) {
			puts(tests[i].name);
			continue;
		}
		if (argc > 1 && strcmp(argv[1], tests[i].name))
			continue;
		bad += !tests[i].fn();
	}
	return bad != 0;
}
EOF2
  printf 'tests/run_tests: tests/run_tests.c src/calc.c src/calc.h\n\t$(CC) -o $@ tests/run_tests.c src/calc.c\n' \
    > "$d/Makefile"
  commit "$d"
}

@test "a C suite in one binary: as one process it reports nothing, a test per process in TAP makes tasks" {
  onebin
  run -1 --separate-stderr task-mutate --report tap --strategy stub-body --store "$T/st.git" \
    --test-cmd 'make -s tests/run_tests && ./tests/run_tests' "$T/onebin"
  [[ "$stderr" == *"onebin: no tests found: exit 0, no test results"* ]]
  # the test command of task-mutate(1), word for word
  run --separate-stderr task-mutate --report tap --strategy stub-body --store "$T/st.git" \
    -o "$T/c.mp" --test-cmd '
  make -s tests/run_tests || exit 1
  ./tests/run_tests --list > /tmp/names
  echo "1..$(wc -l < /tmp/names)"; i=0
  while read -r t; do i=$((i + 1))
    if ./tests/run_tests "$t" >/dev/null 2>&1
    then echo "ok $i - $t"; else echo "not ok $i - $t"; fi
  done < /tmp/names' "$T/onebin"
  assert_success
  run jq -r -s -c 'map([.targets[0].symbol, .f2p, .p2p]) | sort | .[]' <(json "$T/c.mp")
  assert_output - <<'EOF2'
["calc_add",["add"],["max"]]
["calc_max",["max"],["add"]]
EOF2
}

@test "the usage and the man page synopsis agree word for word" {
  load usage
  usage_is_synopsis task-mutate
}
