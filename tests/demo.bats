#!/usr/bin/env bats
# make demo's pipeline, end to end on the samples.

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  ROOT="$BATS_TEST_DIRNAME/.."
}

@test "the demo runs every stage on the samples and leaves checkable outputs" {
  run --separate-stderr env FW_BIN="$BIN_DIR" "$ROOT/pipelines/demo.sh" "$BATS_TEST_TMPDIR/out"
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
  # the SFT bootstrap lowered the loss, and the loop made a new checkpoint
  first=$(echo "$output" | grep -m1 -oE 'step 1: loss [0-9.]+' | awk '{print $4}')
  last=$(echo "$output" | grep -m1 -oE 'step 10: loss [0-9.]+' | awk '{print $4}')
  [ "$(echo "$last < $first" | bc -l)" = 1 ]
  [ "$(rec count "$O/rollouts-graded.msgpack")" -gt 0 ]
  # every failed rollout got hints from its environment
  [ "$(rec json "$O/rollouts-taught.msgpack" | jq -s '[.[] | select(.grade.reward == 0 and (.teach.hints | length) == 0)] | length')" = 0 ]
  [ -f "$O/run/latest/model.safetensors" ]
  [ -f "$O/run/latest/trainer_state.json" ]
}
