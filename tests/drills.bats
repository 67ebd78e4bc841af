#!/usr/bin/env bats
# samples/drills/gen.py: the drills repository and the bootstrap corpus,
# with its notes about earlier attempts, kept apart.

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  ROOT="$BATS_TEST_DIRNAME/.."
  PY=/usr/bin/python3
  [ -x "$PY" ] || PY=python3
  T="$BATS_TEST_TMPDIR"
}

# check.py REPO CORPUS: every docstring, body and name of REPO's drills
# against every one of CORPUS (prompts, notes and completions); prints the
# counts and exits 1 on a shared one.
check() {
  "$PY" - "$1" "$2" <<'EOF'
import glob, json, re, sys
docs, exprs, names = set(), set(), set()
for p in glob.glob(sys.argv[1] + "/drills/set_*.py"):
    for m in re.finditer(r'def (\w+)\(x\):\n    """(.*)"""\n    return (.*)\n', open(p).read()):
        names.add(m[1]); docs.add(m[2]); exprs.add(m[3])
shared, notes, demos, n = 0, 0, 0, 0
for line in open(sys.argv[2]):
    r = json.loads(line)
    t = r["prompt"] + r["completion"]
    n += 1
    notes += "\nHint: " in r["prompt"]
    demos += "a correct solution looked like this:" in r["prompt"]
    for d in re.findall(r'"""(.*)"""', t):
        shared += d in docs
    for e in re.findall(r"^    return (.*)$", t, re.M) + re.findall(r"^    print\((.*)\)$", t, re.M):
        shared += e in exprs
    for w in re.findall(r"\b([a-z]+)\(", t):
        shared += w in names
print(f"{len(docs)} repository drills, {n} corpus records, {notes} with a note, "
      f"{demos} with a correct body in it, {shared} shared")
sys.exit(1 if shared or len(docs) != 320 else 0)
EOF
}

@test "the bootstrap corpus, notes included, holds no drill of the repository: no docstring, body or name" {
  "$PY" "$ROOT/samples/drills/gen.py" repo "$T/repo"
  "$PY" "$ROOT/samples/drills/gen.py" corpus > "$T/corpus.jsonl"
  run -0 check "$T/repo" "$T/corpus.jsonl"
  assert_output "320 repository drills, 2880 corpus records, 960 with a note, 477 with a correct body in it, 0 shared"
  # the check finds a repository drill where one is put
  body=$(sed -n 's/^    return \(.*\)$/\1/p' "$T/repo/drills/set_03.py" | head -1)
  jq -nc --arg b "    return $body" '{prompt: "\n\ndef f(x):\n    \"\"\"Return x.\"\"\"\n", completion: ($b + "\n")}' >> "$T/corpus.jsonl"
  run -1 check "$T/repo" "$T/corpus.jsonl"
  assert_output --partial ", 1 shared"
}

@test "a note names the failing test and what the body did, as grade and teach give it, then the corrected body" {
  "$PY" "$ROOT/samples/drills/gen.py" corpus > "$T/corpus.jsonl"
  # every noted record: the prompt ends with a hint in teach's form, and
  # the completion returns (never prints)
  run -0 jq -r 'select(.prompt | test("\nHint: ")) |
    [(.prompt | test("\n\nHint: test drills::[a-z]+: fail: [a-z]+\\(-?[0-9]+\\) returned [^\n]+, expected [^\n]+\n(a correct solution looked like this:\n    return [^\n]+\n)?$")),
     (.completion | test("^    return [^\n]+\n$"))] | @tsv' "$T/corpus.jsonl"
  [ "$(printf '%s\n' "$output" | sort | uniq -c | awk '{$1=$1; print}')" = "960 true true" ]
  # a note that shows a correct body is followed by that body
  run -0 jq -r 'select(.prompt | test("looked like this")) |
    (.prompt | capture("looked like this:\n(?<b>[^\n]+)\n$").b + "\n") == .completion' "$T/corpus.jsonl"
  [ "$(printf '%s\n' "$output" | sort -u)" = true ]
}
