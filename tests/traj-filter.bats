#!/usr/bin/env bats
# traj-filter: select, dedupe, sample, split and decontaminate record streams.

bats_require_minimum_version 1.5.0

setup_file() {
  export LC_ALL=C
  S="$BATS_TEST_DIRNAME/../samples/feedback"
  # The sample trajectories, as fb-ingest writes them (redacted).
  fb-ingest -q --feedback "$S/feedback-external.jsonl" --feedback "$S/feedback-internal.csv" \
    "$S/openai-chat.jsonl" "$S/openai-responses.jsonl" "$S/anthropic.jsonl" \
    "$S"/claude-code/*.jsonl "$S/sharegpt.jsonl" "$S"/swe-agent/*.traj \
    > "$BATS_FILE_TMPDIR/traj.msgpack" 2>/dev/null || true
  rec json "$BATS_FILE_TMPDIR/traj.msgpack" > "$BATS_FILE_TMPDIR/traj.jsonl"
}

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  FIX="$BATS_TEST_DIRNAME/fixtures/filter"
  REF="$BATS_TEST_DIRNAME/ref"
  TRAJ="$BATS_FILE_TMPDIR/traj.msgpack"
  JSONL="$BATS_FILE_TMPDIR/traj.jsonl"
  T="$BATS_TEST_TMPDIR"
  rec from-json "$FIX/small.jsonl" > "$T/small.msgpack"
}

# ids selected by traj-filter EXPR and by jq 'select(JQ)' must be the same
same_as_jq() {
  traj-filter -e "$1" "$TRAJ" | rec get .id > "$T/ours"
  jq -r "select($2) | .id" "$JSONL" > "$T/jq"
  [ -s "$T/jq" ] || { echo "jq selected nothing for $2"; return 1; }
  diff "$T/ours" "$T/jq"
}

@test "the samples hold enough trajectories to test on" {
  run -0 rec count "$TRAJ"
  [ "$output" -ge 300 ]
}

@test "-e selects the same records as jq select() does" {
  same_as_jq '.model == "ckpt-a"' '.model == "ckpt-a"'
  same_as_jq 'any(.feedback, .rating < 0)' 'any(.feedback[]; .rating < 0)'
  same_as_jq 'all(.feedback, .rating > 0 and .origin == "external")' \
    'all(.feedback[]; .rating > 0 and .origin == "external")'
  same_as_jq 'len(.turns) > 10 and .turns[-1].role == "assistant"' \
    '(.turns | length) > 10 and .turns[-1].role == "assistant"'
  same_as_jq '.turns[-1].text =~ "(?i)sorry|not able"' '.turns[-1].text | test("sorry|not able"; "i")'
  same_as_jq 'count(.turns, .is_error) >= 2' '[.turns[] | select(.is_error)] | length >= 2'
  same_as_jq 'any(.turns, any(.calls, .name == "bash" and .args =~ "pytest"))' \
    'any(.turns[]; any(.calls[]?; .name == "bash" and (.args | test("pytest"))))'
  same_as_jq 'has(.meta.item) and .meta.line % 2 == 1' '(.meta | has("item")) and .meta.line % 2 == 1'
  same_as_jq 'not has(.usage) or .usage.output_tokens * 2 > 900' \
    '(has("usage") | not) or .usage.output_tokens * 2 > 900'
}

@test "selected records pass through byte for byte, unknown fields included" {
  traj-filter -e true "$TRAJ" > "$T/all"
  cmp "$T/all" "$TRAJ"
  traj-filter -e '.id == "t1"' "$T/small.msgpack" | rec json | head -1 > "$T/t1"
  head -1 "$FIX/small.jsonl" | rec from-json | rec json | cmp - "$T/t1"
}

@test "several -e must all hold, and --invert selects the rest" {
  run -0 bash -c "traj-filter -e '.model == \"ckpt-a\"' -e 'any(.feedback, .rating < 0)' '$TRAJ' | rec count"
  both=$output
  run -0 bash -c "jq -c 'select(.model == \"ckpt-a\" and any(.feedback[]; .rating < 0))' '$JSONL' | wc -l"
  [ "$both" -eq "$output" ]
  run -0 bash -c "traj-filter --invert -e '.model == \"ckpt-a\"' -e 'any(.feedback, .rating < 0)' '$TRAJ' | rec count"
  [ $((both + output)) -eq "$(rec count "$TRAJ")" ]
}

@test "a syntax error names the column, points at it, and exits 2 with nothing on stdout" {
  run -2 --separate-stderr traj-filter -e 'any(.feedback .rating < 0)' "$TRAJ"
  [ -z "$output" ]
  assert_equal "${stderr_lines[0]}" "traj-filter: -e 'any(.feedback .rating < 0)': column 15: expected ',', found '.rating'"
  assert_equal "${stderr_lines[2]}" "                ^"
  run -2 traj-filter -e '.a =~ "("' "$TRAJ"
  assert_output --partial "column 7: bad regex"
  run -2 traj-filter -e 'lenn(.turns)' "$TRAJ"
  assert_output --partial "column 1: unknown function 'lenn'"
}

@test "--dedup keeps the first record of each id; --dedup=PATH compares that value" {
  run -0 bash -c "traj-filter -q --dedup '$T/small.msgpack' | rec get .id | tr '\n' ' '"
  assert_output "t1 t2 t3 "
  run -0 --separate-stderr bash -c "traj-filter --dedup=.turns[0].text '$T/small.msgpack' | rec get .id | tr '\n' ' '"
  assert_output "t1 t1 t3 "
  assert_equal "$stderr" "traj-filter: dedup: dropped 1 duplicate"
  # records without the path are all kept
  run -0 bash -c "traj-filter --dedup=.feedback[0].user '$T/small.msgpack' | rec count"
  assert_output 4
  # the samples: every id once, as jq's unique_by says
  run -0 bash -c "cat '$TRAJ' '$TRAJ' | traj-filter -q --dedup | rec count"
  assert_output "$(jq -s 'unique_by(.id) | length' "$JSONL")"
}

@test "--sample N keeps N records in input order, the same for the same seed whatever the order" {
  traj-filter --sample 25 --seed 7 "$TRAJ" > "$T/a"
  traj-filter --sample 25 --seed 7 "$TRAJ" > "$T/b"
  cmp "$T/a" "$T/b"
  run -0 rec count "$T/a"
  assert_output 25
  # input order is kept: the sampled ids appear in the input in the same order
  rec get .id "$T/a" > "$T/ids"
  grep -Fx -f "$T/ids" <(rec get .id "$TRAJ") | diff - "$T/ids"
  # another seed, another sample
  traj-filter --sample 25 --seed 8 "$TRAJ" | cmp -s - "$T/a" && false
  # the sample depends on the records, not on their order
  rec json "$TRAJ" | tac | rec from-json | traj-filter --sample 25 --seed 7 | rec get .id | sort > "$T/rev"
  sort "$T/ids" | diff - "$T/rev"
  # more than there are: all of them
  run -0 bash -c "traj-filter --sample 100000 '$TRAJ' | rec count"
  assert_output "$(rec count "$TRAJ")"
}

@test "--sample FRACTION keeps about that share, reproducibly" {
  run -0 bash -c "traj-filter --sample 0.5 --seed 1 '$TRAJ' | rec count"
  [ "$output" -gt 130 ] && [ "$output" -lt 220 ]
  a=$(traj-filter --sample 0.5 --seed 1 "$TRAJ" | md5sum)
  b=$(traj-filter --sample 0.5 --seed 1 "$TRAJ" | md5sum)
  [ "$a" = "$b" ]
}

@test "--split writes PREFIX.NAME.msgpack by id hash: disjoint, complete, stable" {
  run -0 --separate-stderr traj-filter --split train=0.8,eval=0.2 -o "$T/s" "$TRAJ"
  [ -z "$output" ]
  [[ "$stderr" == *"traj-filter: split: train: "*" records"* ]]
  n=$(rec count "$TRAJ"); tr=$(rec count "$T/s.train.msgpack"); ev=$(rec count "$T/s.eval.msgpack")
  [ $((tr + ev)) -eq "$n" ]
  [ "$ev" -gt 40 ] && [ "$ev" -lt 110 ]
  rec get .id "$T/s.train.msgpack" | sort > "$T/train"
  rec get .id "$T/s.eval.msgpack" | sort > "$T/eval"
  [ -z "$(comm -12 "$T/train" "$T/eval")" ]
  # a record lands in the same split from any subset and in any order
  rec json "$TRAJ" | tac | rec from-json | traj-filter -e '.model != "ckpt-c"' --split train=0.8,eval=0.2 -o "$T/r" 2>/dev/null
  rec get .id "$T/r.eval.msgpack" | sort > "$T/eval2"
  [ -z "$(comm -13 "$T/eval" "$T/eval2")" ]
  [ -s "$T/eval2" ]
  # -z compresses each split
  traj-filter -q -z --split a=0.5,b=0.5 -o "$T/z" "$TRAJ"
  [ "$(rec count "$T/z.a.msgpack.zst" "$T/z.b.msgpack.zst")" -eq "$n" ]
}

@test "--split needs -o and fractions that add up to 1" {
  run -2 traj-filter --split train=0.9,eval=0.1 "$TRAJ"
  assert_output --partial "--split needs -o PREFIX"
  run -2 traj-filter --split train=0.9,eval=0.2 -o "$T/x" "$TRAJ"
  assert_output --partial "bad split 'train=0.9,eval=0.2'"
  run -2 traj-filter --split train=0.5,train=0.5 -o "$T/x" "$TRAJ"
  [ ! -e "$T/x.train.msgpack" ]
}

@test "--shard K/N partitions the input like rec does" {
  for k in 0 1 2; do traj-filter --shard $k/3 "$TRAJ" > "$T/p$k"; done
  [ "$(cat "$T"/p0 "$T"/p1 "$T"/p2 | rec count)" -eq "$(rec count "$TRAJ")" ]
  rec cat --shard 1/3 "$TRAJ" | cmp - "$T/p1"
}

@test "--decontam drops exactly the records sharing a 13-gram with the eval items, and says why" {
  run -0 --separate-stderr traj-filter --decontam "$FIX/private-eval.jsonl" -o "$T/kept" "$TRAJ"
  [ -z "$output" ]
  # the peer: an independent Python implementation of the same rule
  "${PYTHON:-/usr/bin/python3}" "$REF/decontam.py" "$FIX/private-eval.jsonl" < "$JSONL" | sort > "$T/peer"
  [ -s "$T/peer" ]
  rec get .id "$TRAJ" | sort > "$T/all"
  rec get .id "$T/kept" | sort > "$T/ours"
  comm -23 "$T/all" "$T/ours" | diff - "$T/peer"
  n=$(wc -l < "$T/peer")
  assert_equal "${stderr_lines[0]}" "traj-filter: decontam: $FIX/private-eval.jsonl: 3 texts, 36 13-grams (36 new)"
  [[ "$stderr" == *"decontam: dropped $n of $(rec count "$TRAJ") records sharing a 13-gram with $FIX/private-eval.jsonl"* ]]
  [[ "$stderr" == *"dropped: shares \"ci is red on main looks like next run skips the last day\" with $FIX/private-eval.jsonl record 1"* ]]
}

@test "--decontam reads plain text and record streams too" {
  printf 'Notes.\nCI is red on main. Looks like next_run skips the last day of February in leap years.\n' > "$T/eval.txt"
  run -0 --separate-stderr traj-filter --decontam "$T/eval.txt" "$TRAJ"
  [[ "$stderr" == *"with $T/eval.txt"* ]]
  rec from-json "$FIX/private-eval.jsonl" > "$T/eval.msgpack"
  a=$(traj-filter -q --decontam "$T/eval.msgpack" "$TRAJ" | md5sum)
  b=$(traj-filter -q --decontam "$FIX/private-eval.jsonl" "$TRAJ" | md5sum)
  [ "$a" = "$b" ]
  printf '{"prompt":"too short to match"}\n{"prompt":"also short"}\n' > "$T/short.jsonl"
  run -0 --separate-stderr traj-filter --decontam "$T/short.jsonl" -o "$T/all" "$TRAJ"
  [[ "$stderr" == *"traj-filter: decontam: $T/short.jsonl: 2 texts shorter than 13 words, not checked"* ]]
  cmp "$T/all" "$TRAJ"
  run -1 traj-filter --decontam "$T/missing" "$TRAJ"
  assert_output --partial "$T/missing: No such file or directory"
}

@test "bad input: good records before the fault are written, the fault is named, exit 1" {
  head -c $(( $(stat -c %s "$T/small.msgpack") - 5 )) "$T/small.msgpack" > "$T/cut"
  run -1 --separate-stderr bash -c "set -o pipefail; traj-filter -e true '$T/cut' | rec count"
  assert_output 3
  [[ "$stderr" == "traj-filter: $T/cut: record 4 "* ]]
}

@test "--help, --version and bad options" {
  run -0 traj-filter --help
  assert_line --index 0 --partial "usage: traj-filter [-e EXPR]... [--invert] [--dedup[=PATH]]"
  run -0 traj-filter --version
  assert_output --partial "traj-filter (flywheel)"
  run -2 traj-filter --bogus
  run -2 traj-filter --sample lots
  run -2 traj-filter --shard 3/3
}

@test "JSON Lines given for records is one error that names rec from-json" {
  run -1 --separate-stderr traj-filter --skip-bad "$FIX/small.jsonl"
  [ -z "$output" ]
  assert_equal "$stderr" "traj-filter: $FIX/small.jsonl: record 1 (byte 0): this looks like JSON; convert it with \`rec from-json\`"
}

@test "the usage and the man page synopsis agree word for word" {
  load usage
  usage_is_synopsis traj-filter
}

@test "--help lists the options one a line after the synopsis" {
  run -0 --separate-stderr traj-filter --help
  [ -z "$stderr" ]
  assert_line "options:"
  assert_line --regexp '^  --dedup\[=PATH\] +drop records whose id'
  assert_line --regexp '^  --version +print the version and exit$'
  # each option of the synopsis has its line
  for o in -e --invert --sample --seed --split --decontam --shard --created-after \
    --created-before -o -z -q -v --skip-bad --progress; do
    assert_line --regexp "^  $o( |,|\[)"
  done
}
