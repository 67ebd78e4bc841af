#!/usr/bin/env bats
# fb-report: failure categories of thumbs-down trajectories and A/B verdicts.

bats_require_minimum_version 1.5.0

setup_file() {
  export LC_ALL=C
  S="$BATS_TEST_DIRNAME/../samples/feedback"
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
  FIX="$BATS_TEST_DIRNAME/fixtures/fb-report"
  REF="$BATS_TEST_DIRNAME/ref"
  PY=${PYTHON:-/usr/bin/python3}
  TRAJ="$BATS_FILE_TMPDIR/traj.msgpack"
  JSONL="$BATS_FILE_TMPDIR/traj.jsonl"
  T="$BATS_TEST_TMPDIR"
  rec from-json "$FIX/cats.jsonl" > "$T/cats.msgpack"
}

# category records of fb-report --records as "NAME COUNT EXTERNAL INTERNAL EXAMPLES..."
cats() {
  fb-report --records "$@" | rec json |
    jq -r 'select(.report == "category") | "\(.category): \(.count) \(.external) \(.internal) \(.examples | join(" "))"'
}

@test "each rule puts a thumbs-down trajectory in its category; tags count too; the rest is other" {
  run -0 cats "$T/cats.msgpack"
  assert_output - <<'OUT'
tool error: 3 1 2 tool-error tool-error-text timeout
other: 2 2 0 fixed-later follow-up
refusal: 2 2 0 refusal tagged
failing tests: 1 1 1 failing
loop/repetition: 1 1 0 loop
sidechain: 1 1 0 tagged
timeout: 1 0 1 timeout
user correction: 1 1 0 correction
very long: 1 1 0 long
OUT
}

@test "the table shows counts, shares and examples, external and internal side by side" {
  run -0 --separate-stderr fb-report "$T/cats.msgpack"
  [ -z "$stderr" ]
  assert_line --index 0 "13 trajectories, 13 votes, 11 thumbs-down trajectories (external 9, internal 3)"
  assert_line "tool error              3   27.3%  1 (11.1%)       2 (66.7%)       tool-error tool-error-text timeout"
  assert_line "m                     1     13    7.7%  [1.4%, 33.3%]          3"
}

@test "the failure categories of the samples differ by checkpoint as the logs do" {
  for m in ckpt-a ckpt-b ckpt-c; do
    traj-filter -e ".model == \"$m\"" "$TRAJ" | cats > "$T/$m"
  done
  # ckpt-a loops and hits tool errors, ckpt-b times out, ckpt-c refuses and rambles
  grep -q '^loop/repetition: ' "$T/ckpt-a"; ! grep -q '^loop/repetition: ' "$T/ckpt-c"
  grep -q '^timeout: ' "$T/ckpt-b"; ! grep -q '^timeout: ' "$T/ckpt-a"
  grep -q '^refusal: ' "$T/ckpt-c"; ! grep -q '^refusal: ' "$T/ckpt-b"
  head -2 "$T/ckpt-c" | grep -q '^refusal: '
  grep -q '^very long: ' "$T/ckpt-c"
}

@test "the rules find the scenario of every sample trajectory, and nothing in the successful ones" {
  # the answer key fb-ingest's tests use names each trajectory's scenario
  KEY="$BATS_TEST_DIRNAME/fixtures/ingest/sample-turns.jsonl"
  [ -s "$KEY" ]
  for pair in loop:loop/repetition tool_error:'tool error' failing_tests:'failing tests' \
    timeout:timeout refusal:refusal correction:'user correction' long:'very long' success:; do
    s=${pair%%:*} want=${pair#*:}
    jq -c --slurpfile key <(jq -c --arg s "$s" 'select(.scenario == $s) | .source_id' "$KEY") \
      'select(.meta.source_id as $id | $key | index($id)) | .feedback = [{"rating": -1, "user": "x"}]' \
      "$JSONL" | rec from-json > "$T/$s"
    n=$(rec count "$T/$s")
    [ "$n" -ge 10 ]
    fb-report --records "$T/$s" | rec json > "$T/$s.json"
    [ -n "$want" ] || continue
    got=$(jq -r --arg c "$want" 'select(.report == "category" and .category == $c) | .count' "$T/$s.json")
    [ "$got" = "$n" ] || { echo "$s: $want found in ${got:-0} of $n"; return 1; }
  done
  # successful trajectories meet no rule: they are other, or only their tags
  run -0 jq -r 'select(.report == "category") | .category' "$T/success.json"
  assert_output - <<'OUT'
other
sidechain
OUT
  [ "$(jq -s 'map(select(.report == "category") | .count) | add' "$T/success.json")" -eq "$(rec count "$T/success")" ]
}

@test "thumbs-down counts agree with jq on the samples" {
  run -0 bash -c "fb-report --records '$TRAJ' | rec json | jq -c 'select(.report == \"summary\") | [.trajectories, .votes, .down, .down_external, .down_internal]'"
  want=$(jq -s -c '[length, ([.[].feedback[] | select(.rating != 0)] | length),
    ([.[] | select(any(.feedback[]; .rating < 0))] | length),
    ([.[] | select(any(.feedback[]; .rating < 0 and .origin != "internal"))] | length),
    ([.[] | select(any(.feedback[]; .rating < 0 and .origin == "internal"))] | length)]' "$JSONL")
  assert_output "$want"
}

@test "rates, Wilson intervals and McNemar tests agree with SciPy" {
  fb-report --records --paired-by .meta.item "$TRAJ" | rec json | jq -r '
    if .report == "arm" then "arm \(.arm) \(.up) \(.votes) \(.lo) \(.hi)"
    elif .report == "pair" then "pair \(.a) \(.b) \(.pairs) \(.a_only) \(.b_only) \(.mcnemar_p)"
    else empty end' |
    awk '$1 == "arm" { $5 = sprintf("%.6f", $5); $6 = sprintf("%.6f", $6) }
         $1 == "pair" { $7 = sprintf("%.6g", $7) } { print }' > "$T/ours"
  "$PY" "$REF/fbreport.py" .model .meta.item < "$JSONL" > "$T/peer"
  [ "$(wc -l < "$T/peer")" -eq 6 ]
  diff "$T/ours" "$T/peer"
}

@test "A/B: B is preferred over A only when the bootstrap interval excludes zero" {
  run -0 --separate-stderr fb-report --paired-by .meta.item "$TRAJ"
  assert_line --regexp '^ckpt-a vs ckpt-b: \+[0-9.]+% \[\+[0-9.]+%, \+[0-9.]+%\], [0-9]+ users; .*: ckpt-b preferred over ckpt-a$'
  assert_line --regexp '^ckpt-b vs ckpt-c: -[0-9.]+% \[-[0-9.]+%, \+[0-9.]+%\], .*: no verdict \(about [0-9]+ votes per arm needed\)$'
  fb-report --records "$TRAJ" | rec json | jq -c 'select(.report == "pair")' > "$T/pairs"
  # the verdict follows the interval, in every pair
  run -0 jq -r 'if .lo > 0 then (.verdict == "b" and .preferred == .b)
    elif .hi < 0 then (.verdict == "a" and .preferred == .a)
    else (.verdict == "none" and .preferred == null and .n_needed > 0) end' "$T/pairs"
  refute_output --partial false
}

@test "with several pairs each interval is widened so that all of them hold together (Bonferroni)" {
  run -0 bash -c "fb-report --records '$TRAJ' | rec json | jq -r 'select(.report == \"summary\") | .level * 1e6 | round'"
  assert_output 983333
  run -0 fb-report "$TRAJ"
  assert_line "A/B: rate(B) - rate(A), bootstrap 98.33% over users (95% for the 3 pairs together), 2000 resamples, seed 0"
  # two arms: one pair, a plain 95% interval
  traj-filter -e '.model != "ckpt-c"' "$TRAJ" > "$T/ab"
  run -0 fb-report "$T/ab"
  assert_line "A/B: rate(B) - rate(A), bootstrap 95% over users, 2000 resamples, seed 0"
  wide=$(fb-report --records "$TRAJ" | rec json | jq -c 'select(.report == "pair" and .b == "ckpt-b") | .hi - .lo')
  narrow=$(fb-report --records "$T/ab" | rec json | jq -c 'select(.report == "pair") | .hi - .lo')
  [ "$(echo "$wide > $narrow" | bc -l)" = 1 ]
}

@test "the bootstrap is reproducible for a seed and resamples users, not votes" {
  a=$(fb-report --records --seed 5 "$TRAJ" | md5sum)
  b=$(fb-report --records --seed 5 "$TRAJ" | md5sum)
  c=$(fb-report --records --seed 6 "$TRAJ" | md5sum)
  [ "$a" = "$b" ] && [ "$a" != "$c" ]
  # one user casting every vote: a single cluster, an interval of no width,
  # and no verdict from so few users
  jq -c '.feedback |= map(.user = "same")' "$JSONL" | rec from-json > "$T/one"
  run -0 bash -c "fb-report --records '$T/one' | rec json | jq -c 'select(.report == \"pair\") | [.lo == .diff, .hi == .diff, .verdict]' | sort -u"
  assert_output '[true,true,"none"]'
}

@test "--by groups by any path; a missing value is its own arm" {
  run -0 bash -c "fb-report --records --by .source '$TRAJ' | rec json | jq -r 'select(.report == \"arm\") | .arm' | tr '\n' ' '"
  assert_output "anthropic claude-code openai-chat openai-responses sharegpt swe-agent "
  run -0 bash -c "fb-report --records --by .meta.nope '$TRAJ' | rec json | jq -r 'select(.report == \"arm\") | .arm'"
  assert_output "(none)"
}

@test "--records writes metrics records with kind, v and a content id" {
  run -0 bash -c "fb-report --records '$T/cats.msgpack' | rec json | jq -c '[.kind, .v, (.id | length), .report]' | sort | uniq -c | awk '{print \$1, \$2}'"
  assert_output - <<'OUT'
1 ["metrics",1,16,"arm"]
9 ["metrics",1,16,"category"]
1 ["metrics",1,16,"summary"]
OUT
  a=$(fb-report --records "$T/cats.msgpack" | rec get .id | md5sum)
  b=$(fb-report --records "$T/cats.msgpack" | rec get .id | md5sum)
  [ "$a" = "$b" ]
}

@test "a wrong field type names the field and the record, exit 1" {
  printf '{"kind":"traj","id":"a","feedback":[]}\n{"kind":"traj","id":"b","feedback":"up"}\n' | rec from-json > "$T/bad"
  run -1 --separate-stderr fb-report "$T/bad"
  assert_equal "$stderr" "fb-report: $T/bad: record 2 (byte 26): field 'feedback' is str, not array"
  run -0 --separate-stderr fb-report --skip-bad "$T/bad"
  assert_line --index 0 "1 trajectories, 0 votes, 0 thumbs-down trajectories (external 0, internal 0)"
  printf '{"kind":"traj","id":"c","feedback":[{"rating":1},{"rating":true}]}\n' | rec from-json > "$T/bad2"
  run -1 --separate-stderr fb-report "$T/bad2"
  assert_equal "$stderr" "fb-report: $T/bad2: record 1 (byte 0): field 'feedback[1].rating' is bool, not a number"
}

@test "--help, --version and bad options" {
  run -0 fb-report --help
  assert_line --index 0 "usage: fb-report [--by PATH] [--paired-by PATH] [--records] [--seed S]"
  run -0 fb-report --version
  assert_output --partial "fb-report (flywheel)"
  run -2 fb-report --bogus
  run -2 fb-report --by 'a]'
  run -2 fb-report --resamples 3
}

@test "JSON Lines given for records is one error that names rec from-json" {
  run -1 --separate-stderr fb-report --skip-bad "$FIX/cats.jsonl"
  assert_equal "$stderr" "fb-report: $FIX/cats.jsonl: record 1 (byte 0): this looks like JSON; convert it with \`rec from-json\`"
}

@test "the usage and the man page synopsis agree word for word" {
  load usage
  usage_is_synopsis fb-report
}

@test "--shard K/N reports on one shard's records, --progress draws plain lines off a terminal" {
  run -0 --separate-stderr fb-report --records --shard 1/3 "$BATS_FILE_TMPDIR/traj.msgpack"
  n=$(rec count --shard 1/3 "$BATS_FILE_TMPDIR/traj.msgpack")
  [ "$(fb-report --records --shard 1/3 "$BATS_FILE_TMPDIR/traj.msgpack" | rec json |
       jq -r 'select(.report == "summary") | .trajectories')" = "$n" ]
  run -0 --separate-stderr fb-report --progress "$BATS_FILE_TMPDIR/traj.msgpack"
  [[ "$stderr" != *$'\r'* ]]
  [[ "$stderr" == "fb-report: "*" records, "*", 100%" ]]
  run -2 fb-report --shard 1
}
