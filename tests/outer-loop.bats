#!/usr/bin/env bats
# pipelines/outer-loop.sh: feedback logs to SFT data, eval candidates and a report.

bats_require_minimum_version 1.5.0

setup_file() {
  export LC_ALL=C
  R="$BATS_TEST_DIRNAME/.."
  mkdir -p "$BATS_FILE_TMPDIR/tmp"
  # the status kept for the first test, which shows stderr when it is not 0
  rc=0
  TMPDIR="$BATS_FILE_TMPDIR/tmp" "$R/pipelines/outer-loop.sh" -o "$BATS_FILE_TMPDIR/out" \
    --private-eval "$R/samples/evals/private-eval.jsonl" --paired-by .meta.item \
    "$R/samples/feedback" > "$BATS_FILE_TMPDIR/stdout" 2> "$BATS_FILE_TMPDIR/stderr" || rc=$?
  echo $rc > "$BATS_FILE_TMPDIR/rc"
}

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  R="$BATS_TEST_DIRNAME/.."
  O="$BATS_FILE_TMPDIR/out"
  T="$BATS_TEST_TMPDIR"
}

@test "the pipeline runs on the samples, quiet on stdout, and leaves no work files" {
  [ "$(cat "$BATS_FILE_TMPDIR/rc")" = 0 ] || { cat "$BATS_FILE_TMPDIR/stderr"; return 1; }
  [ ! -s "$BATS_FILE_TMPDIR/stdout" ]
  [ -z "$(ls -A "$BATS_FILE_TMPDIR/tmp")" ]
  for f in traj.msgpack sft.msgpack eval-candidates.msgpack report.txt report.msgpack \
    orphans.msgpack ingest.log decontam.log runs.msgpack; do
    [ -s "$O/$f" ] || { echo "missing $f"; return 1; }
  done
  run -0 cat "$BATS_FILE_TMPDIR/stderr"
  assert_line --regexp '^outer-loop: ingested 351 trajectories from [0-9]+ logs \(13 orphan feedback events\); [0-9]+ rated after dedup$'
  assert_line --regexp '^outer-loop: decontam: sft: dropped [1-9][0-9]* of [0-9]+ records sharing a 13-gram with .*private-eval.jsonl$'
}

@test "sft holds only thumbs-up and eval candidates only thumbs-down trajectories" {
  rec json "$O/sft.msgpack" > "$T/sft"
  rec json "$O/eval-candidates.msgpack" > "$T/ev"
  [ "$(wc -l < "$T/sft")" -gt 100 ] && [ "$(wc -l < "$T/ev")" -gt 100 ]
  run -0 jq -s 'all(.[]; (.feedback | length) > 0 and all(.feedback[]; .rating > 0))' "$T/sft"
  assert_output true
  run -0 jq -s 'all(.[]; any(.feedback[]; .rating < 0))' "$T/ev"
  assert_output true
  # every rated trajectory is in one of them, or was dropped by decontamination
  jq -r .id "$T/sft" "$T/ev" | sort > "$T/out-ids"
  [ -z "$(sort "$T/out-ids" | uniq -d)" ]
  kept=$(wc -l < "$T/out-ids")
  dropped=$(sed -n 's/.*decontam: [a-z-]*: dropped \([0-9]*\) of.*/\1/p' "$BATS_FILE_TMPDIR/stderr" | paste -sd+ | bc)
  [ $((kept + dropped)) -eq "$(rec count "$O/traj.msgpack")" ]
  # decontam.log explains every drop
  [ "$(grep -c ': dropped: shares "' "$O/decontam.log")" -eq "$dropped" ]
}

@test "no output shares a 13-gram with the private eval split" {
  for f in sft eval-candidates; do
    rec json "$O/$f.msgpack" | "${PYTHON:-/usr/bin/python3}" "$R/tests/ref/decontam.py" \
      "$R/samples/evals/private-eval.jsonl" > "$T/$f"
    [ ! -s "$T/$f" ] || { echo "$f is contaminated:"; cat "$T/$f"; return 1; }
  done
  # while the unfiltered trajectories are not clean: the check has teeth
  rec json "$O/traj.msgpack" | "${PYTHON:-/usr/bin/python3}" "$R/tests/ref/decontam.py" \
    "$R/samples/evals/private-eval.jsonl" | grep -q .
}

@test "no planted secret survives anywhere in the outputs" {
  tail -n +2 "$R/samples/feedback/planted-secrets.tsv" | cut -f2 > "$T/secrets"
  [ "$(wc -l < "$T/secrets")" -ge 80 ]
  run ! grep -a -l -F -f "$T/secrets" "$O"/*
  grep -a -q '<REDACTED:' "$O/traj.msgpack"
}

@test "one trajectory per conversation after the filter" {
  run -0 bash -c "rec json '$O/traj.msgpack' | jq -s '(map(.turns) | unique | length) == length'"
  assert_output true
}

@test "the report names ckpt-b preferred over ckpt-a and gives no verdict between b and c" {
  run -0 cat "$O/report.txt"
  assert_line --regexp '^ckpt-a vs ckpt-b: .*: ckpt-b preferred over ckpt-a$'
  assert_line --regexp '^ckpt-b vs ckpt-c: .*: no verdict \(about [0-9]+ votes per arm needed\)$'
  assert_line --regexp '^loop/repetition +[0-9]+ '
  run -0 bash -c "rec json '$O/report.msgpack' | jq -r 'select(.report == \"pair\" and .a == \"ckpt-a\" and .b == \"ckpt-b\") | .preferred'"
  assert_output ckpt-b
}

@test "runs.msgpack has a run record per stage whose counts match the files" {
  rec json "$O/runs.msgpack" > "$T/runs"
  run -0 jq -r '"\(.kind) \(.stage) \(.status)"' "$T/runs"
  assert_output - <<'OUT'
run ingest ok
run filter ok
run report ok
run sft ok
run eval-candidates ok
OUT
  [ "$(jq -r 'select(.stage == "filter") | .out' "$T/runs")" -eq "$(rec count "$O/traj.msgpack")" ]
  [ "$(jq -r 'select(.stage == "sft") | .out' "$T/runs")" -eq "$(rec count "$O/sft.msgpack")" ]
  [ "$(jq -r 'select(.stage == "eval-candidates") | .out' "$T/runs")" -eq "$(rec count "$O/eval-candidates.msgpack")" ]
  [ "$(jq -r .id "$T/runs" | sort -u | wc -l)" -eq 5 ]
}

@test "bad usage exits 2; a missing private eval split or no logs exits 1" {
  run -2 "$R/pipelines/outer-loop.sh"
  run -2 "$R/pipelines/outer-loop.sh" --bogus "$R/samples/feedback"
  run -1 "$R/pipelines/outer-loop.sh" -o "$T/o" --private-eval "$T/nope" "$R/samples/feedback"
  assert_output --partial "cannot read the private eval split"
  mkdir "$T/empty"
  run -1 "$R/pipelines/outer-loop.sh" -o "$T/o" "$T/empty"
  assert_output --partial "no trajectory logs"
  [ ! -e "$T/o/sft.msgpack" ]
}

@test "a log fb-ingest cannot read is skipped with a warning; the rest goes on" {
  echo '{"neither": "a log", "nor": "feedback"}' > "$T/odd.jsonl"
  run -0 --separate-stderr "$R/pipelines/outer-loop.sh" -o "$T/o" "$T/odd.jsonl" \
    "$R/samples/feedback/anthropic.jsonl" "$R/samples/feedback/feedback-external.jsonl"
  [[ "$stderr" == *"outer-loop: warning: fb-ingest: $T/odd.jsonl: unknown format: "* ]]
  run -0 bash -c "rec json '$T/o/runs.msgpack' | jq -r 'select(.stage == \"ingest\") | .status'"
  assert_output partial
  [ "$(rec count "$T/o/traj.msgpack")" -ge 40 ]
}

@test "without a private eval split it warns that nothing is decontaminated" {
  run -0 --separate-stderr "$R/pipelines/outer-loop.sh" -o "$T/o" "$R/samples/feedback/openai-chat.jsonl" \
    "$R/samples/feedback/feedback-external.jsonl"
  [[ "$stderr" == *"outer-loop: warning: no --private-eval: outputs are not decontaminated"* ]]
  [ "$(rec count "$T/o/sft.msgpack" "$T/o/eval-candidates.msgpack")" -gt 50 ]
}
