#!/usr/bin/env bats
# make demo's first stages and its switches, end to end on the samples
# (tests/demo.bats holds the loop at reduced size: apart, so that the two
# files run side by side).

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  ROOT="$BATS_TEST_DIRNAME/.."
}

@test "the demo's first stages: outer loop, tasks from the sample repositories, grading, clean room" {
  run --separate-stderr env FW_BIN="$BIN_DIR" DEMO_UPTO=4 "$ROOT/pipelines/demo.sh" "$BATS_TEST_TMPDIR/out"
  assert_success
  O="$BATS_TEST_TMPDIR/out"
  # outer loop: verdict and data sets
  assert_line --partial "ckpt-b preferred over ckpt-a"
  [ "$(rec count "$O/outer-loop/sft.msgpack")" -gt 50 ]
  # tasks from both sample repositories
  [ "$(rec get .repo "$O/tasks.msgpack" | grep -c textkit)" -gt 0 ]
  [ "$(rec get .repo "$O/tasks.msgpack" | grep -c tally)" -gt 0 ]
  # one task from the billing sample's history, shown as a policy sees it:
  # the commit message, the context bundle at /context, the failing tests
  [ "$(rec json "$O/tasks.msgpack" | jq -r 'select(.strategy == "history") | .split')" = private ]
  assert_line --regexp "^a task from the billing sample's history \(commit [0-9a-f]{7}, 2024-[0-9-]{5}T[0-9:]{8}Z\), as a policy sees it:$"
  assert_line "        Fix the nightly import crash"
  assert_line "    - /context/nightly-import.log (log)"
  assert_line "    - /context/ops-thread.txt (chat)"
  assert_line --partial "    These tests fail now and must pass:"
  # each solution earns 1, each empty patch 0
  n=$(rec count "$O/tasks.msgpack")
  [ "$(rec json "$O/graded.msgpack" | jq -c 'select(.policy.backend=="oracle" and .grade.reward==1)' | wc -l)" = "$n" ]
  [ "$(rec json "$O/graded.msgpack" | jq -c 'select(.policy.backend=="empty" and .grade.reward==0)' | wc -l)" = "$n" ]
  # the clean room held
  assert_line --partial "network: blocked"
  assert_line --partial "host home: hidden"
  assert_line --partial "stopped after stage 4"
}

@test "the demo without teach (DEMO_ABLATE=teach), and DEMO_ABLATE and DEMO_MODEL checked" {
  run env FW_BIN="$BIN_DIR" DEMO_ABLATE=grade "$ROOT/pipelines/demo.sh" "$BATS_TEST_TMPDIR/x"
  assert_failure 2
  run env FW_BIN="$BIN_DIR" DEMO_MODEL=/nonexistent.json "$ROOT/pipelines/demo.sh" "$BATS_TEST_TMPDIR/x"
  assert_failure 2
  assert_output --partial "DEMO_MODEL"
  O="$BATS_TEST_TMPDIR/ablate-teach"
  run --separate-stderr env FW_BIN="$BIN_DIR" FW_RUNS="$BATS_TEST_TMPDIR/runs.mp" \
    DEMO_ABLATE=teach DEMO_QUICK=1 DEMO_DRILLS_MAX=24 \
    DEMO_MODEL="$ROOT/samples/models/drills-small.json" DEMO_SFT_STEPS=20 DEMO_ITERS=1 \
    DEMO_TASKS=6 DEMO_SAMPLES=2 DEMO_EVAL_SAMPLES=1 "$ROOT/pipelines/demo.sh" "$O"
  assert_success
  assert_line --partial "rollout -> grade -> (no teach) train-step -> eval"
  [ "$(rec json "$O/iter-1/taught.msgpack" | jq -s '[.[] | select(.teach != null)] | length')" = 0 ]
  [ "$(rec json "$O/iter-1/metrics.msgpack" | jq -s '[.[].loss_distill] | add')" = 0 ]
  [ "$(jq -r .ablate "$O/summary.json")" = teach ]
  # the run is in the runs log make status reads: the demo's own stages,
  # the inner loop's, one run id, the closing record with the demo's log
  run -0 "$ROOT/pipelines/status.sh" --runs "$BATS_TEST_TMPDIR/runs.mp"
  assert_line --regexp "^[0-9-]{10} [0-9:]{8}  demo +ok +exit 0 +.* run demo-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}  on "
  assert_line --regexp "^    ok +[0-9.]+ (s|min).* [0-9]+ records +task-mutate$"
  assert_line --regexp "^    ok .*  train-step$"
  assert_line --regexp "^    ok .*  rollout$"
  assert_line --regexp "^    ok .*  eval$"
  assert_line "    log: $O/demo.log"
  assert_line "FAILED: none in the runs shown."
  [ "$(rec json "$BATS_TEST_TMPDIR/runs.mp" | jq -r .run | sort -u | wc -l)" = 1 ]
}

@test "a demo that fails is recorded failed, with the stage that failed; FW_RUNS= records nothing" {
  # the tools, but an fb-ingest that fails as a damaged install would
  mkdir "$BATS_TEST_TMPDIR/bin"
  for t in "$BIN_DIR"/*; do ln -s "$t" "$BATS_TEST_TMPDIR/bin/"; done
  rm "$BATS_TEST_TMPDIR/bin/fb-ingest"
  printf '#!/bin/sh\necho "fb-ingest: cannot run" >&2\nexit 3\n' > "$BATS_TEST_TMPDIR/bin/fb-ingest"
  chmod +x "$BATS_TEST_TMPDIR/bin/fb-ingest"
  run --separate-stderr env FW_BIN="$BATS_TEST_TMPDIR/bin" FW_RUNS="$BATS_TEST_TMPDIR/runs.mp" \
    DEMO_UPTO=1 "$ROOT/pipelines/demo.sh" "$BATS_TEST_TMPDIR/out"
  assert_failure 1
  run -0 "$ROOT/pipelines/status.sh" --runs "$BATS_TEST_TMPDIR/runs.mp"
  assert_line --regexp "^[0-9-]{10} [0-9:]{8}  demo +FAILED +exit 1 +"
  assert_line --regexp "^    FAILED .* exit 1 +outer-loop.sh$"
  assert_line "FAILED (1 in the runs shown)"
  assert_line "      run $(rec json "$BATS_TEST_TMPDIR/runs.mp" | jq -r .run | sort -u)  log: $BATS_TEST_TMPDIR/out/demo.log"
  run --separate-stderr env FW_BIN="$BATS_TEST_TMPDIR/bin" FW_RUNS= FW_STATE="$BATS_TEST_TMPDIR/state" \
    DEMO_UPTO=1 "$ROOT/pipelines/demo.sh" "$BATS_TEST_TMPDIR/out2"
  assert_failure 1
  [ ! -e "$BATS_TEST_TMPDIR/state" ]
}
