#!/usr/bin/env bats
# make demo's pipeline, end to end on the samples, at reduced size.

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
  # each solution earns 1, each empty patch 0
  n=$(rec count "$O/tasks.msgpack")
  [ "$(rec json "$O/graded.msgpack" | jq -c 'select(.policy.backend=="oracle" and .grade.reward==1)' | wc -l)" = "$n" ]
  [ "$(rec json "$O/graded.msgpack" | jq -c 'select(.policy.backend=="empty" and .grade.reward==0)' | wc -l)" = "$n" ]
  # the clean room held
  assert_line --partial "network: blocked"
  assert_line --partial "host home: hidden"
  assert_line --partial "stopped after stage 4"
}

@test "the demo's loop at reduced size: bootstrap, noise, iterations, table, summary.json, plots" {
  O="$BATS_TEST_TMPDIR/out"
  run --separate-stderr env FW_BIN="$BIN_DIR" DEMO_QUICK=1 DEMO_DRILLS_MAX=24 DEMO_SFT_STEPS=20 \
    DEMO_ITERS=2 DEMO_TASKS=6 DEMO_SAMPLES=2 DEMO_EVAL_SAMPLES=1 "$ROOT/pipelines/demo.sh" "$O"
  assert_success
  # the bootstrap's SFT lowered the loss
  first=$(rec json "$O/boot/metrics.msgpack" | head -1 | jq .loss)
  last=$(rec json "$O/boot/metrics.msgpack" | tail -1 | jq .loss)
  [ "$(echo "$last < $first" | bc -l)" = 1 ]
  # a table row per iteration
  assert_line --regexp '^1 +[0-9.]+ +[0-9.]+ \[[0-9.]+, [0-9.]+\]'
  assert_line --regexp '^2 +[0-9.]+ +[0-9.]+ \[[0-9.]+, [0-9.]+\]'
  assert_line --partial "seed-to-seed spread"
  # summary.json: per iteration, bootstrap, final, noise, all consistent
  run jq -e '(.iterations | length) == 2 and (.bootstrap_seeds | length) == 3
    and (.final_seeds | length) == 3 and .noise >= 0
    and (.bootstrap - (.bootstrap_seeds | add / 3) | fabs) < 1e-9
    and (.final - (.final_seeds | add / 3) | fabs) < 1e-9
    and .rise == .final - .bootstrap and .learned == (.rise > .noise)
    and .final_seeds[0] == .iterations[-1].eval' "$O/summary.json"
  assert_success
  # iteration 2 trained from iteration 1's checkpoint, with teach
  rec json "$O/iter-2/rollouts.msgpack" | head -1 | jq -e --arg c "$(cat "$O/iter-1/ckpt")" '.policy.ckpt == $c'
  [ "$(rec json "$O/iter-1/taught.msgpack" | jq -s '[.[] | select(.teach == null)] | length')" = 0 ]
  [ "$(wc -l < "$O/curve.tsv")" = 3 ]
  # DEMO_ABLATE takes only teach; with it, the same loop without teach
  run env FW_BIN="$BIN_DIR" DEMO_ABLATE=grade "$ROOT/pipelines/demo.sh" "$BATS_TEST_TMPDIR/x"
  assert_failure 2
  run --separate-stderr env FW_BIN="$BIN_DIR" DEMO_ABLATE=teach DEMO_QUICK=1 DEMO_DRILLS_MAX=24 \
    DEMO_SFT_STEPS=20 DEMO_ITERS=1 DEMO_TASKS=6 DEMO_SAMPLES=2 "$ROOT/pipelines/demo.sh" "$O/ablate-teach"
  assert_success
  assert_line --partial "rollout -> grade -> (no teach) train-step -> eval"
  [ "$(rec json "$O/ablate-teach/iter-1/taught.msgpack" | jq -s '[.[] | select(.teach != null)] | length')" = 0 ]
  [ "$(rec json "$O/ablate-teach/iter-1/metrics.msgpack" | jq -s '[.[].loss_distill] | add')" = 0 ]
  if command -v gnuplot > /dev/null; then
    for f in eval reward loss; do [ -s "$O/$f.png" ]; done
  fi
}
