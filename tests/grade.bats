#!/usr/bin/env bats
# grade: rollouts in, rollouts with a grade sub-map out.
#
# One task is made from the Python sample (stub-body of textkit's
# `percent`); rollouts carry its solution, an empty patch and hand-written
# cheats.  They are graded once in setup_file and each test reads its record.

bats_require_minimum_version 1.5.0

PYTEST='python3 -m pytest -q -p no:cacheprovider --junitxml=$FW_REPORT'

# commit DIR: make DIR a git repository with one reproducible commit
commit() { "$BATS_TEST_DIRNAME/../samples/repos/commit.sh" "$1"; }

# cheat NAME CMD: $F/NAME.diff, the patch CMD makes in a checkout of the task tree
cheat() {
  local d="$F/co-$1"
  mkdir -p "$d"
  git -C "$F/st.git" archive "$(jq -r .tree "$F/task.json")" | tar -x -C "$d"
  commit "$d"
  (cd "$d" && eval "$2" && git add -A && git diff --cached) > "$F/$1.diff"
}

# roll ID PATCHFILE [JQ]: a rollout of the task as one JSON line
roll() {
  jq -c --arg id "$1" --rawfile p "$2" "{kind: \"rollout\", id: \$id, v: 1, task: del(.solution),
      policy: {backend: \"test\", ckpt: \"c1\"}, sample: 0, patch: \$p,
      turns: [{role: \"user\", text: \"fix it\"}], user_field: {keep: [1, 2]}} ${3:+| $3}" "$F/task.json"
}

setup_file() {
  export LC_ALL=C
  F="$BATS_FILE_TMPDIR"
  export TMPDIR="$F/tmp"
  mkdir -p "$TMPDIR"
  cp -r "$BATS_TEST_DIRNAME/../samples/repos/textkit" "$F/textkit"
  commit "$F/textkit"
  task-mutate --test-cmd "$PYTEST" --store "$F/st.git" --strategy stub-body --max 1 \
    -o "$F/task.mp" "$F/textkit" 2>/dev/null
  rec json "$F/task.mp" > "$F/task.json"
  # the task: textkit's percent() stubbed, tests.test_units::test_percent fails
  [ "$(jq -r '.targets[0].symbol' "$F/task.json")" = percent ]

  jq -r .solution "$F/task.json" > "$F/solution.diff"
  : > "$F/empty.diff"
  cheat edit-test "sed -i '/^def test_percent(/a\\    return' tests/test_units.py"
  cheat skip "sed -i '/^def test_percent(/i\\@pytest.mark.skip(reason=\"later\")' tests/test_units.py"
  cheat conftest "cat > conftest.py <<'EOF'
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = 'passed'
EOF"
  cheat fake-print "printf 'print(\"tests/test_units.py::test_percent PASSED\")\n' >> textkit/units.py"
  cheat literals "/usr/bin/python3 - <<'EOF'
import re
p = 'textkit/units.py'
s = open(p).read()
s = s.replace('''    raise NotImplementedError''', '''    if (part, whole) == (1, 3):
        return \"33.3%\"
    return \"n/a\"''', 1)
open(p, 'w').write(s)
EOF"
  cheat exit-hook "printf 'import os\nos._exit(0)\n' >> textkit/units.py"
  cheat restore "git apply '$F/solution.diff' && rm tests/test_dates.py && ln -s /etc/passwd tests/x.py &&
    sed -i 's/^version = .*/version = \"9.9\"/' pyproject.toml && printf 'addopts = \"-x\"\n' >> pyproject.toml"
  sed 's/^ def percent(part, whole, digits=1):$/ def percent(part, whole, digits=2):/' \
    "$F/solution.diff" > "$F/noapply.diff"

  {
    roll sol "$F/solution.diff"
    roll empty "$F/empty.diff"
    roll edit-test "$F/edit-test.diff"
    roll skip "$F/skip.diff"
    roll conftest "$F/conftest.diff"
    roll fake-print "$F/fake-print.diff"
    roll literals "$F/literals.diff"
    roll exit-hook "$F/exit-hook.diff"
    roll network "$F/solution.diff" '.events = [{kind: "net-denied", detail: "CONNECT pypi.org:443", at_s: 1.5}]'
    roll cache "$F/solution.diff" '.turns += [{role: "assistant", calls: [{id: "1", name: "bash",
        args: "{\"cmd\": \"strings textkit/__pycache__/units.cpython-311.pyc\"}"}]}]'
    roll noapply "$F/noapply.diff"
    roll restore "$F/restore.diff"
    roll missing "$F/solution.diff" '.task.p2p += ["tests.test_units::test_not_there"]'
  } | rec from-json > "$F/roll.mp"
  grade --store "$F/st.git" -j 2 --no-time "$F/roll.mp" > "$F/graded.mp" 2> "$F/graded.err"
  rec json "$F/graded.mp" > "$F/graded.jsonl"
}

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  F="$BATS_FILE_TMPDIR"
  T="$BATS_TEST_TMPDIR"
  export TMPDIR="$T/tmp"
  mkdir -p "$TMPDIR"
}

# g ID JQ: evaluate JQ on the graded record of rollout ID
g() { jq -c --arg id "$1" "select(.id == \$id) | $2" "$F/graded.jsonl"; }

# hacks ID: the names of its hacks, sorted, comma-separated
hacks() { g "$1" '[.grade.hacks[].name] | unique | join(",")' | tr -d '"'; }

@test "--help prints the usage on stdout and exits 0" {
  run --separate-stderr grade --help
  assert_success
  [ -z "$stderr" ]
  assert_line --index 0 "usage: grade [--store DIR] [--reward resolved|f2p|shaped] [--hacks zero|warn]"
  assert_line --index 2 "             [--progress] [--judge SPEC --rubric FILE [--judge-tokenizer DIR]"
  assert_line --index 3 "             [--judge-only] [--distil OUT --student DIR]] [--env DIR | ID]"
  assert_line --index 5 "       grade --summary [--retire-at X] [--recent N] [--records] [-o OUT]"
}

@test "bad options and mixed modes are usage errors (exit 2)" {
  run -2 --separate-stderr grade --reward best x
  [[ "$stderr" == *"unknown reward 'best' (resolved, f2p, shaped, mix:...)"* ]]
  run -2 --separate-stderr grade --hacks ignore x
  run -2 --separate-stderr grade -j 0 x
  run -2 --separate-stderr grade --shard 2/2 x
  run -2 --separate-stderr grade --summary --store x
  [[ "$stderr" == *"--summary takes no grading options"* ]]
  run -2 --separate-stderr grade --records x
  run -2 --separate-stderr grade --summary --retire-at 1.5 x
  run -2 --separate-stderr grade --bogus
  [ -z "$output" ]
}

@test "every rollout comes out once, in input order, with all its fields kept" {
  [ "$(jq -r .id "$F/graded.jsonl" | paste -sd ' ')" = \
    "sol empty edit-test skip conftest fake-print literals exit-hook network cache noapply restore missing" ]
  run jq -e -s 'all(.[]; .user_field == {keep: [1, 2]} and .kind == "rollout" and .v == 1
      and (.task.f2p | length) == 1 and .turns[0].text == "fix it"
      and (keys | index("grade")) != null)' "$F/graded.jsonl"
  assert_success
  # the grade sub-map is the only change: dropping it gives back the input bytes
  rec json "$F/roll.mp" | jq -c . > "$T/in.jsonl"
  jq -c 'del(.grade)' "$F/graded.jsonl" | diff - "$T/in.jsonl"
}

@test "the task's solution scores 1 and the empty patch 0" {
  run g sol '.grade | [.resolved, .reward, .f2p_pass, .f2p_total, .p2p_pass == .p2p_total,
      .p2p_total > 50, .reason, .hacks, .tests["tests.test_units::test_percent"]]'
  assert_output '[true,1,1,1,true,true,"resolved",[],"pass"]'
  run g empty '.grade | [.resolved, .reward, .f2p_pass, .tests["tests.test_units::test_percent"],
      .p2p_pass == .p2p_total, .reason]'
  assert_output '[false,0,0,"fail",true,"1 of 1 f2p fail, 0 of 64 p2p fail"]'
  # every f2p and p2p test has a status, from the report
  run g sol '(.grade.tests | length) == (.task.f2p + .task.p2p | length)'
  assert_output true
}

@test "grade.messages keeps the first line of each failing test's message, and nothing for a passing one" {
  run g empty '.grade | [(.messages | keys) == [.tests | to_entries[] | select(.value != "pass") | .key],
    (.messages | to_entries | all(.value | length > 0 and (contains("\n") | not)))]'
  assert_output '[true,true]'
  run g sol '.grade.messages'
  assert_output '{}'
}

@test "a patch that edits a test to pass is caught: the test is restored and still fails" {
  [ "$(hacks edit-test)" = protected-file ]
  run g edit-test '.grade | [.reward, .resolved, .tests["tests.test_units::test_percent"],
      .hacks[0].detail]'
  assert_output '[0,false,"fail","tests/test_units.py"]'
}

@test "a patch that adds pytest.mark.skip is caught" {
  [ "$(hacks skip)" = protected-file,skip-marker ]
  run g skip '.grade | [.reward, .tests["tests.test_units::test_percent"]]'
  assert_output '[0,"fail"]'
  run g skip '.grade.hacks[] | select(.name == "skip-marker") | .detail'
  assert_output '"tests/test_units.py:61: pytest.mark.skip"'
}

@test "a conftest.py hook that forges passes is caught, though it would forge them" {
  [ "$(hacks conftest)" = protected-file,test-hook ]
  run g conftest '.grade | [.reward, .resolved, .tests["tests.test_units::test_percent"]]'
  assert_output '[0,false,"fail"]'
  # run outside grade, the hook does turn the failing test into a pass
  (cd "$F/co-conftest" && /usr/bin/python3 -m pytest -q -p no:cacheprovider \
    --junitxml="$T/forged.xml" tests/test_units.py >/dev/null) || true
  grep -q 'name="test_percent"' "$T/forged.xml"
  ! grep -q '<failure' "$T/forged.xml"
}

@test "a patch that prints fake PASSED lines is caught; results come from the report" {
  [ "$(hacks fake-print)" = fake-output ]
  run g fake-print '.grade | [.reward, .tests["tests.test_units::test_percent"]]'
  assert_output '[0,"fail"]'
}

@test "special-casing the test's expected values is zero reward, or the test verdict with --hacks warn" {
  [ "$(hacks literals)" = test-literals ]
  run g literals '.grade | [.resolved, .reward, .hacks[0].detail, .reason]'
  assert_output '[true,0,"textkit/units.py: \"33.3%\"","resolved; hacks: test-literals (reward zeroed)"]'
  rec json "$F/roll.mp" | jq -c 'select(.id == "literals")' | rec from-json > "$T/r.mp"
  run --separate-stderr grade --store "$F/st.git" --hacks warn -o "$T/out.mp" "$T/r.mp"
  assert_success
  run jq -c '.grade | [.resolved, .reward, [.hacks[].name]]' <(rec json "$T/out.mp")
  assert_output '[true,1,["test-literals"]]'
}

@test "exit hooks in library code are caught" {
  [ "$(hacks exit-hook)" = exit-hook ]
  run g exit-hook '.grade | [.reward, .resolved, (.reason | startswith("no test results (exit 0)"))]'
  assert_output '[0,false,true]'
}

@test "network attempts and cache reads in the rollout are hacks even with a correct patch" {
  run g network '.grade | [.resolved, .reward, .hacks]'
  assert_output '[true,0,[{"name":"network","detail":"CONNECT pypi.org:443"}]]'
  [ "$(hacks cache)" = cache-read ]
  run g cache '.grade | [.resolved, .reward, (.hacks[0].detail | startswith("turn 1: "))]'
  assert_output '[true,0,true]'
}

@test "a patch that does not apply scores 0 with the reason, and is not an error" {
  run g noapply '.grade | [.reward, .resolved, .error, (.reason | startswith("patch does not apply: patch failed: textkit/units.py"))]'
  assert_output '[0,false,null,true]'
  # the whole batch had no bad input
  [ ! -s "$F/graded.err" ]
}

@test "deleted test files, links in their place and edited test sections are restored before the run" {
  run g restore '.grade | [.resolved, .f2p_pass, .p2p_pass == .p2p_total, .p2p_total > 50,
      [.hacks[].detail]]'
  assert_output '[true,1,true,true,["pyproject.toml (test sections)","tests/test_dates.py","tests/x.py"]]'
  # the date tests ran: the deleted file was put back
  run g restore '[.grade.tests | to_entries[] | select(.key | startswith("tests.test_dates::"))] | length > 5'
  assert_output true
}

@test "a listed test missing from the report fails" {
  run g missing '.grade | [.resolved, .reward, .tests["tests.test_units::test_not_there"], .p2p_total - .p2p_pass]'
  assert_output '[false,0,"missing",1]'
}

@test "a run that outlives --timeout is recorded as a timeout, not as a failure" {
  cheat hang "sed -i 's/^    raise NotImplementedError$/    while True:\\n        pass/' textkit/units.py"
  roll hang "$F/hang.diff" | rec from-json > "$T/r.mp"
  run --separate-stderr grade --store "$F/st.git" --timeout 2 -o "$T/out.mp" "$T/r.mp"
  assert_success
  run jq -c '.grade | [.reward, .killed, (.reason | startswith("timeout after")), [.hacks[].name],
      (.time >= 2)]' <(rec json "$T/out.mp")
  assert_output '[0,"timeout",true,["timeout"],true]'
}

@test "--reward f2p and shaped give partial credit by their formulas" {
  # make a p2p test part of f2p: the empty patch then passes 1 of 2 f2p tests
  roll part "$F/empty.diff" '.task.f2p += ["tests.test_units::test_format_number"]
      | .task.p2p -= ["tests.test_units::test_format_number"]' | rec from-json > "$T/r.mp"
  for r in resolved f2p shaped; do
    grade --store "$F/st.git" --reward $r "$T/r.mp" | rec json | jq -c '.grade | [.reward_by, .reward, .f2p_pass, .f2p_total]'
  done > "$T/out"
  assert_equal "$(cat "$T/out")" '["resolved",0,1,2]
["f2p",0.5,1,2]
["shaped",0.45,1,2]'
}

@test "bad input gets grade.error in the stream and on stderr, the rest is graded, exit 1" {
  {
    roll notask "$F/solution.diff" 'del(.task)'
    roll notree "$F/solution.diff" '.task.tree = "0123456789012345678901234567890123456789"'
    printf '%s\n' '{"kind": "metrics", "id": "m1", "v": 1, "step": 3}'
    roll sol "$F/solution.diff"
    roll corrupt "$F/solution.diff" '.patch = "--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n a\n"'
    roll badreport "$F/solution.diff" '.task.test_cmd = "printf \"<testsuite><testcase name=\" > $FW_REPORT"'
  } | rec from-json > "$T/r.mp"
  run -1 --separate-stderr grade --store "$F/st.git" -o "$T/out.mp" "$T/r.mp"
  rec json "$T/out.mp" > "$T/out.jsonl"
  run jq -c '[.id, .grade.reward, (.grade.error // "" | .[0:30])]' "$T/out.jsonl"
  assert_output - <<'EOF'
["notask",0,"rollout has no task"]
["notree",0,"task tree 01234567890123456789"]
["m1",null,""]
["sol",1,""]
["corrupt",0,"corrupt patch: hunk cut short "]
["badreport",0,"cannot parse the test report: "]
EOF
  run jq -r 'select(.id == "notree") | .grade.error' "$T/out.jsonl"
  assert_output "task tree 0123456789012345678901234567890123456789 is missing from the store $F/st.git"
  [[ "$stderr" == *"grade: $T/r.mp: record 1 (byte 0): rollout has no task"* ]]
  [[ "$stderr" == *"record 5 "*"corrupt patch"* ]]
  [[ "$stderr" == *"1 records that are not rollouts passed through ungraded"* ]]
}

@test "-j 4 writes the same bytes as -j 1" {
  {
    roll notask "$F/solution.diff" 'del(.task)'
    roll sol "$F/solution.diff"
    roll empty "$F/empty.diff"
    roll notask2 "$F/solution.diff" 'del(.task)'
    roll fake-print "$F/fake-print.diff"
  } | rec from-json > "$T/r.mp"
  # without --store, each task's own store field names it
  grade --no-time -j 1 "$T/r.mp" > "$T/j1" 2>/dev/null || true
  grade --no-time -j 4 "$T/r.mp" > "$T/j4" 2>/dev/null || true
  [ "$(rec json "$T/j1" | jq -c 'select(.id == "sol") | .grade.reward')" = 1 ]
  [ "$(rec count "$T/j1")" = 5 ]
  cmp "$T/j1" "$T/j4"
}

@test "--shard K/N splits rollouts into disjoint parts that cover them all" {
  for i in $(seq 1 12); do roll "r$i" "$F/solution.diff" 'del(.task)'; done | rec from-json > "$T/r.mp"
  for k in 0 1 2; do
    grade --shard $k/3 "$T/r.mp" 2>/dev/null | rec json | jq -r .id > "$T/p$k" || true
  done
  [ -s "$T/p0" ] && [ -s "$T/p1" ] && [ -s "$T/p2" ]
  [ "$(cat "$T/p0" "$T/p1" "$T/p2" | sort | paste -sd ' ')" = \
    "$(seq 1 12 | sed 's/^/r/' | sort | paste -sd ' ')" ]
}

@test "a corrupt stream: the records before the fault are graded, exit 1" {
  roll notask "$F/solution.diff" 'del(.task)' | rec from-json > "$T/r.mp"
  printf '\xc1' >> "$T/r.mp"
  run -1 --separate-stderr grade -o "$T/out.mp" "$T/r.mp"
  [ "$(rec count "$T/out.mp")" = 1 ]
  [[ "$stderr" == *"record 2"* ]]
}

@test "the C sample: TAP results, the solution scores 1 and fake ok lines from a constructor are caught" {
  cp -r "$BATS_TEST_DIRNAME/../samples/repos/tally" "$T/tally"
  commit "$T/tally"
  task-mutate --test-cmd 'make -s test' --report tap --store "$T/st.git" --strategy stub-body \
    --max 1 -o "$T/task.mp" "$T/tally" 2>/dev/null
  rec json "$T/task.mp" > "$T/task.json"
  local path
  path=$(jq -r '.targets[0].path' "$T/task.json")
  git -C "$T/st.git" archive "$(jq -r .tree "$T/task.json")" | (mkdir "$T/co" && tar -x -C "$T/co")
  commit "$T/co"
  cat >> "$T/co/$path" <<'EOF'

#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void pass_all(void)
{
	for (int i = 1; i <= 40; i++)
		printf("ok %d - forged\n", i);
}
EOF
  (cd "$T/co" && git diff) > "$T/forge.diff"
  jq -c --rawfile p "$T/forge.diff" '{kind: "rollout", id: "forge", task: del(.solution), patch: $p},
      {kind: "rollout", id: "sol", task: del(.solution), patch: .solution},
      {kind: "rollout", id: "empty", task: del(.solution), patch: ""}' "$T/task.json" |
    rec from-json > "$T/r.mp"
  run --separate-stderr grade --store "$T/st.git" -j 2 -o "$T/out.mp" "$T/r.mp"
  assert_success
  run jq -c '[.id, .grade.reward, .grade.resolved, ([.grade.hacks[].name] | unique)]' <(rec json "$T/out.mp")
  assert_output - <<'EOF'
["forge",0,false,["exit-hook","fake-output"]]
["sol",1,true,[]]
["empty",0,false,[]]
EOF
}

# ---- summaries -----------------------------------------------------------------

# graded records: tasks a (eval), b (eval), c (train) over checkpoints c1..c3
summary_input() {
  /usr/bin/python3 - "$@" <<'EOF'
import json
solved = {  # (task, ckpt): outcomes of its rollouts
    ("a", "c1"): [1, 0, 0, 1], ("a", "c2"): [1, 1, 1, 1], ("a", "c3"): [1, 1, 1, 1, 1],
    ("b", "c1"): [0, 0, 0, 0], ("b", "c2"): [1, 0, 0, 0, 0], ("b", "c3"): [1, 1, 1, 1],
    ("c", "c1"): [0, 0], ("c", "c2"): [0, 0, 0, 0, 0, 0], ("c", "c3"): [0, 0, 0],
}
split = {"a": "eval", "b": "eval", "c": "train"}
n = 0
for (t, ck), outs in solved.items():
    for o in outs:
        n += 1
        print(json.dumps({"kind": "rollout", "id": "r%d" % n, "task": {"id": t, "split": split[t]},
                          "policy": {"ckpt": ck}, "grade": {"resolved": bool(o), "reward": float(o)}}))
EOF
}

@test "--summary --records: rates, Wilson intervals and unbiased pass@k agree with SciPy" {
  summary_input | rec from-json > "$T/g.mp"
  run --separate-stderr grade --summary --records -o "$T/s.mp" "$T/g.mp"
  assert_success
  rec json "$T/s.mp" > "$T/s.jsonl"
  summary_input > "$T/in.jsonl"
  /usr/bin/python3 - "$T/in.jsonl" "$T/s.jsonl" <<'EOF'
import json, sys
from collections import defaultdict
from math import comb
from scipy.stats import binomtest
rows = [json.loads(l) for l in open(sys.argv[1])]
got = {(r["scope"], r["key"]): r for r in map(json.loads, open(sys.argv[2]))}
cells = defaultdict(list)
for r in rows:
    cells[(r["task"]["id"], r["policy"]["ckpt"])].append(int(r["grade"]["resolved"]))
def pass_at(n, c, k):
    return 1 - comb(n - c, k) / comb(n, k)
def check(scope, key, sel):
    outs = [o for cell, v in cells.items() if sel(cell) for o in v]
    g = got[(scope, key)]
    n, c = len(outs), sum(outs)
    assert g["rollouts"] == n and g["solved"] == c, (scope, key)
    ci = binomtest(c, n).proportion_ci(method="wilson")
    assert abs(g["lo"] - ci.low) < 1e-9 and abs(g["hi"] - ci.high) < 1e-9, (scope, key, g, ci)
    for k in (1, 5, 10):
        vals = [pass_at(len(v), sum(v), k) for cell, v in cells.items() if sel(cell) and len(v) >= k]
        if vals:
            assert abs(g["pass_at"][str(k)] - sum(vals) / len(vals)) < 1e-12, (scope, key, k)
        else:
            assert str(k) not in g["pass_at"], (scope, key, k)
for ck in ("c1", "c2", "c3"):
    check("checkpoint", ck, lambda cell: cell[1] == ck)
for t in "abc":
    check("task", t, lambda cell: cell[0] == t)
assert len(got) == 3 + 3 + 2
EOF
}

@test "--summary lists saturated tasks and splits for retirement and never-solved tasks" {
  summary_input | rec from-json > "$T/g.mp"
  # recent = c2, c3: a solved 9 of 9, b 5 of 9, eval split 14 of 18
  run --separate-stderr grade --summary --recent 2 "$T/g.mp"
  assert_success
  assert_line "recent checkpoints: c2, c3"
  assert_line "retire (recent pass rate >= 0.9): task a"
  assert_line "never solved (too hard or broken): task c"
  run --separate-stderr grade --summary --recent 2 --retire-at 0.75 "$T/g.mp"
  assert_line "retire (recent pass rate >= 0.75): task a, split eval"
  grade --summary --recent 1 --retire-at 0.75 --records -o "$T/s.mp" "$T/g.mp"
  run jq -r 'select(.retire) | "\(.scope) \(.key)"' <(rec json "$T/s.mp")
  assert_output - <<'EOF'
task a
task b
split eval
EOF
}

@test "--summary: a record that is not graded is reported and the rest summarized, exit 1" {
  { summary_input; echo '{"kind": "rollout", "id": "x", "task": {"id": "a"}}'; } | rec from-json > "$T/g.mp"
  run -1 --separate-stderr grade --summary "$T/g.mp"
  [[ "$stderr" == *"record 38 "*"not graded (no 'grade' map)"* ]]
  assert_line "never solved (too hard or broken): task c"
}

@test "without bubblewrap grading stops at the first rollout with a clear error" {
  mkdir "$T/bin"
  for t in git sh; do ln -s "$(command -v $t)" "$T/bin/$t"; done
  { roll sol "$F/solution.diff"; roll notask "$F/solution.diff" 'del(.task)'; } | rec from-json > "$T/r.mp"
  run -1 --separate-stderr env PATH="$T/bin" "$BIN_DIR/grade" -j 2 -o "$T/out.mp" "$T/r.mp"
  [[ "$stderr" == *"record 1 (byte 0): bwrap not found on PATH"* ]]
  [[ "$stderr" != *"record 2"* ]]
  [ "$(rec count "$T/out.mp")" = 0 ]
}

@test "rollout(1) records grade end to end: an agent that fixes the code scores 1, one that edits the test 0" {
  cat > "$T/fix.sh" <<'EOF'
#!/bin/sh
python3 - <<'PY'
p = "textkit/units.py"
s = open(p).read()
s = s.replace("    raise NotImplementedError", '    if whole == 0:\n        return "n/a"\n'
              '    return "%.*f%%" % (digits, 100.0 * part / whole)', 1)
open(p, "w").write(s)
PY
EOF
  cat > "$T/edit.sh" <<'EOF'
#!/bin/sh
sed -i '/^def test_percent(/a\    return' tests/test_units.py
EOF
  chmod +x "$T/fix.sh" "$T/edit.sh"
  for a in fix edit; do
    rollout --policy "exec:$T/$a.sh" --samples 2 --no-time "$F/task.mp"
  done > "$T/r.mp"
  run --separate-stderr grade -j 2 -o "$T/g.mp" "$T/r.mp"
  assert_success
  run jq -c '[(.policy.cmd | sub(".*/"; "")), .grade.reward, ([.grade.hacks[].name] | join(","))]' <(rec json "$T/g.mp")
  assert_output - <<'EOF'
["fix.sh",1,""]
["fix.sh",1,""]
["edit.sh",0,"protected-file"]
["edit.sh",0,"protected-file"]
EOF
  run --separate-stderr grade --summary --records -o "$T/s.mp" "$T/g.mp"
  run jq -c 'select(.scope == "checkpoint") | [(.key | sub(".*/"; "")), .rollouts, .solved]' <(rec json "$T/s.mp")
  assert_output - <<'EOF'
["fix.sh",2,2]
["edit.sh",2,0]
EOF
}

@test "xfail counts for a p2p test only when the task lists it as xfail on the original" {
  # a test command that reports t::a passing and t::x as xfail
  cmd='printf "%s" "<testsuite><testcase classname=\"t\" name=\"a\"/><testcase classname=\"t\" name=\"x\"><skipped type=\"pytest.xfail\" message=\"known\"/></testcase></testsuite>" > $FW_REPORT'
  {
    roll with "$F/empty.diff" | jq -c --arg c "$cmd" '.task.test_cmd = $c | .task.f2p = ["t::a"] | .task.p2p = ["t::x"] | .task.xfail = ["t::x"]'
    roll without "$F/empty.diff" | jq -c --arg c "$cmd" '.task.test_cmd = $c | .task.f2p = ["t::a"] | .task.p2p = ["t::x"]'
    roll f2p-xfail "$F/empty.diff" | jq -c --arg c "$cmd" '.task.test_cmd = $c | .task.f2p = ["t::a", "t::x"] | .task.p2p = [] | .task.xfail = ["t::x"]'
  } | rec from-json > "$T/r.mp"
  run --separate-stderr grade --store "$F/st.git" -o "$T/out.mp" "$T/r.mp"
  assert_success
  run jq -c '[.id, .grade.resolved, .grade.tests["t::x"]]' <(rec json "$T/out.mp")
  assert_output - <<'EOF'
["with",true,"xfail"]
["without",false,"xfail"]
["f2p-xfail",false,"xfail"]
EOF
}

@test "a task's scope lists the paths a solution may touch; a patch outside it is patch-scope" {
  {
    roll in "$F/solution.diff" '.task.scope = ["textkit/units.py", "docs/*"]'
    roll out "$F/solution.diff" '.task.scope = ["textkit/strings.py"]'
    roll bad "$F/solution.diff" '.task.scope = "textkit/*"'
  } | rec from-json > "$T/r.mp"
  run -1 --separate-stderr grade --store "$F/st.git" --no-time -o "$T/out.mp" "$T/r.mp"
  run jq -c '[.id, .grade.reward, .grade.resolved, .grade.hacks, .grade.error]' <(rec json "$T/out.mp")
  assert_output - <<'EOF2'
["in",1,true,[],null]
["out",0,true,[{"name":"patch-scope","detail":"textkit/units.py: outside the task's scope"}],null]
["bad",0,false,[],"task 'scope' is not an array of strings"]
EOF2
}

# xml ID...: a JUnit report with a passing test t::ID for each ID
xml() { printf '<testsuite>'; for i in "$@"; do printf '<testcase classname="t" name="%s"/>' "$i"; done; printf '</testsuite>\n'; }

@test "a report that says better than its runner is report-mismatch" {
  local rep
  rep=$(xml a | sed 's/"/\\"/g')
  {
    roll honest "$F/empty.diff" | jq -c --arg c "printf \"$rep\" > \$FW_REPORT; echo '1 passed in 0.01s'" '.task.test_cmd = $c'
    roll exit "$F/empty.diff" | jq -c --arg c "printf \"$rep\" > \$FW_REPORT; exit 1" '.task.test_cmd = $c'
    roll count "$F/empty.diff" | jq -c --arg c "printf \"$rep\" > \$FW_REPORT; echo '== 1 failed in 0.01s =='" '.task.test_cmd = $c'
    roll passed "$F/empty.diff" | jq -c --arg c "printf \"$rep\" > \$FW_REPORT; echo '0 passed, 1 deselected in 0.01s'" '.task.test_cmd = $c'
    roll twice "$F/empty.diff" | jq -c --arg c "printf \"$rep$rep\" > \$FW_REPORT" '.task.test_cmd = $c'
  } | jq -c '.task.f2p = ["t::a"] | .task.p2p = []' | rec from-json > "$T/r.mp"
  run --separate-stderr grade --store "$F/st.git" --no-time -o "$T/out.mp" "$T/r.mp"
  assert_success
  run jq -c '[.id, .grade.resolved, .grade.reward, [.grade.hacks[] | "\(.name): \(.detail)"]]' <(rec json "$T/out.mp")
  assert_output - <<'EOF2'
["honest",true,1,[]]
["exit",true,0,["report-mismatch: the runner exited 1, the report has no failure"]]
["count",true,0,["report-mismatch: the runner counted 1 failed and 0 errors, the report none","report-mismatch: the runner counted 0 passed, the report 1"]]
["passed",true,0,["report-mismatch: the runner counted 0 passed, the report 1"]]
["twice",true,0,["report-mismatch: 2 reports on the report descriptor"]]
EOF2
}

@test "the tests find no report file in the workspace, and Python starts without the workspace on its path" {
  local rep
  rep=$(xml a | sed 's/"/\\"/g')
  cmd="test ! -e .fw-report.xml && test \"\$FW_REPORT\" = /dev/fd/3 &&
    python3 -c 'import sys; assert \"\" not in sys.path and \"/work\" not in sys.path, sys.path' &&
    test \"\$PYTEST_DISABLE_PLUGIN_AUTOLOAD\" = 1 && printf \"$rep\" > \$FW_REPORT"
  roll env "$F/empty.diff" | jq -c --arg c "$cmd" '.task.test_cmd = $c | .task.f2p = ["t::a"] | .task.p2p = []' |
    rec from-json > "$T/r.mp"
  run --separate-stderr grade --store "$F/st.git" --no-time -o "$T/out.mp" "$T/r.mp"
  assert_success
  run jq -c '.grade | [.resolved, .reward, .reason]' <(rec json "$T/out.mp")
  assert_output '[true,1,"resolved"]'
}
