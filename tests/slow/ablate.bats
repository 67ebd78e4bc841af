#!/usr/bin/env bats
# pipelines/ablate.sh (make learn-ablate) at a tiny size: the schema of
# ablate.json and its derived figures, recomputed here from the curves.

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  ROOT="$BATS_TEST_DIRNAME/../.."
  PY=/usr/bin/python3
  [ -x "$PY" ] || PY=python3
}

@test "ablate.sh: both arms from one bootstrap under each seed, ablate.json in its schema, a table and a plot" {
  O="$BATS_TEST_TMPDIR/ab"
  run --separate-stderr env FW_BIN="$BIN_DIR" ABLATE_SEEDS="1 2" ABLATE_ARMS="teach reward" DEMO_ITERS=2 DEMO_DRILLS_MAX=24 \
    DEMO_MODEL="$ROOT/samples/models/drills-small.json" DEMO_SFT_STEPS=20 DEMO_TASKS=6 \
    DEMO_SAMPLES=2 DEMO_EVAL_SAMPLES=1 "$ROOT/pipelines/ablate.sh" "$O"
  assert_success
  assert_line --regexp '^iter +teach eval \(sd\) +reward eval \(sd\)'
  assert_line --partial "spread (pooled seed-to-seed sd of the final pass rate): "
  # the schema, and spread, teach_ahead and iters_to_match as the issue
  # defines them, recomputed from the curves (sums of a few numbers in
  # [0, 1]: 1e-9 is far above their rounding)
  run "$PY" - "$O/ablate.json" "$O/base/boot/eval-s1/pass.json" <<'EOF'
import json, statistics, sys
a = json.load(open(sys.argv[1]))
b0 = json.load(open(sys.argv[2]))["pass"]
assert sorted(a) == ["arms", "iterations", "iters_to_match", "seeds", "spread", "teach_ahead"], sorted(a)
assert a["seeds"] == [1, 2] and a["iterations"] == 2 and sorted(a["arms"]) == ["reward", "teach"]
for arm in a["arms"].values():
    assert list(arm) == ["eval"] and len(arm["eval"]) == 2
    assert all(len(c) == 3 and c[0] == b0 for c in arm["eval"])
ft = [c[-1] for c in a["arms"]["teach"]["eval"]]
fr = [c[-1] for c in a["arms"]["reward"]["eval"]]
spread = ((statistics.variance(ft) + statistics.variance(fr)) / 2) ** 0.5
assert abs(a["spread"] - spread) < 1e-9, (a["spread"], spread)
assert a["teach_ahead"] == (statistics.mean(ft) - statistics.mean(fr) > spread)
target = statistics.mean(fr)
hit = [i for i in range(3) if statistics.mean(c[i] for c in a["arms"]["teach"]["eval"]) >= target]
assert a["iters_to_match"] == (hit[0] if hit else None), (a["iters_to_match"], hit)
print("ok")
EOF
  assert_output ok
  # the arms saw the same tasks and as many rollouts; only the teach arm was taught
  for s in 1 2; do
    for i in 1 2; do
      cmp <(rec get .id "$O/teach-s$s/iter-$i/train.tasks") <(rec get .id "$O/reward-s$s/iter-$i/train.tasks")
      [ "$(rec json "$O/reward-s$s/iter-$i/taught.msgpack" | jq -s '[.[] | select(.teach != null)] | length')" = 0 ]
      [ "$(rec json "$O/teach-s$s/iter-$i/taught.msgpack" | jq -s '[.[] | select(.teach == null)] | length')" = 0 ]
    done
  done
  [ "$(jq length "$O/stats.json")" = 8 ]
  if command -v gnuplot > /dev/null; then [ -s "$O/ablate.png" ]; fi

  # a rerun with the third arm: the finished iterations are kept (their
  # checkpoints untouched), the route arm runs from the same bootstrap
  ls -l --time-style=+%s.%N "$O"/teach-s1/iter-2/ckpt "$O"/reward-s2/iter-2/ckpt > "$BATS_TEST_TMPDIR/before"
  run --separate-stderr env FW_BIN="$BIN_DIR" ABLATE_SEEDS="1 2" ABLATE_ARMS="teach reward route" \
    DEMO_ITERS=2 DEMO_DRILLS_MAX=24 DEMO_MODEL="$ROOT/samples/models/drills-small.json" \
    DEMO_SFT_STEPS=20 DEMO_TASKS=6 DEMO_SAMPLES=2 DEMO_EVAL_SAMPLES=1 "$ROOT/pipelines/ablate.sh" "$O"
  assert_success
  assert_line --regexp '^iter +teach eval \(sd\) +reward eval \(sd\) +route eval \(sd\)'
  ls -l --time-style=+%s.%N "$O"/teach-s1/iter-2/ckpt "$O"/reward-s2/iter-2/ckpt | cmp - "$BATS_TEST_TMPDIR/before"
  run jq -c '(.arms | keys_unsorted), (.arms.route.eval | length), (.arms.route.eval | map(length))' "$O/ablate.json"
  assert_line --index 0 '["teach","reward","route"]'
  assert_line --index 1 2
  assert_line --index 2 '[3,3]'
  [ "$(jq length "$O/stats.json")" = 12 ]
  # the route arm's first iteration: the teach arm's rollouts (their
  # tokens; timings differ) and credit, the same seed, only --route
  # differs, so its weights differ where (and only because) failed
  # rollouts with credit left the pg term
  for s in 1 2; do
    cmp <(rec json "$O/teach-s$s/iter-1/taught.msgpack" | jq -c '{id, tokens, mask, r: .grade.reward, adv: .teach.adv}') \
      <(rec json "$O/route-s$s/iter-1/taught.msgpack" | jq -c '{id, tokens, mask, r: .grade.reward, adv: .teach.adv}')
  done
  taught=$(rec json "$O/route-s1/iter-1/taught.msgpack" | jq -s '[.[] | select(.teach.adv != null and (.teach.adv | any(. != 0)))] | length')
  if [ "$taught" -gt 0 ]; then
    ! cmp -s "$(cat "$O/teach-s1/iter-1/ckpt")/model.safetensors" "$(cat "$O/route-s1/iter-1/ckpt")/model.safetensors"
  fi
  run -2 env ABLATE_ARMS="teach route" "$ROOT/pipelines/ablate.sh" "$BATS_TEST_TMPDIR/x"
  assert_output --partial "ABLATE_ARMS must hold reward"
  run -2 env ABLATE_ARMS="teach reward x" "$ROOT/pipelines/ablate.sh" "$BATS_TEST_TMPDIR/x"
  assert_output --partial "ABLATE_ARMS: teach, reward, route, topk or teacher, not 'x'"

  # the topk arm: the teach arm's rollouts, with the teacher's top tokens
  # kept and trained toward up to each rollout's first miss; the teach arm
  # made again under the same DEMO_TOPK, which it must not take
  rm -rf "$O/teach-s1"
  run --separate-stderr env FW_BIN="$BIN_DIR" ABLATE_SEEDS="1" ABLATE_ARMS="teach reward topk" \
    DEMO_ITERS=1 DEMO_TOPK=4 DEMO_TOPK_FIRST=1 DEMO_DRILLS_MAX=24 \
    DEMO_MODEL="$ROOT/samples/models/drills-small.json" DEMO_SFT_STEPS=20 DEMO_TASKS=6 \
    DEMO_SAMPLES=2 DEMO_EVAL_SAMPLES=1 "$ROOT/pipelines/ablate.sh" "$O"
  assert_success
  assert_line --regexp '^iter +teach eval \(sd\) +reward eval \(sd\) +topk eval \(sd\)'
  cmp <(rec json "$O/teach-s1/iter-1/taught.msgpack" | jq -c '{id, tokens, adv: .teach.adv}') \
    <(rec json "$O/topk-s1/iter-1/taught.msgpack" | jq -c '{id, tokens, adv: .teach.adv}')
  run -0 bash -c "rec json '$O/topk-s1/iter-1/taught.msgpack' | jq -s 'map(select(.teach.topk)) | (length > 0) and all(.teach.topk.k == 4)'"
  assert_output true
  run -0 bash -c "rec json '$O/topk-s1/iter-1/metrics.msgpack' | jq -s 'map(.loss_topk) | any(. > 0)'"
  assert_output true
  # the teach arm itself has no topk term, DEMO_TOPK set or not
  run -0 bash -c "rec json '$O/teach-s1/iter-1/taught.msgpack' | jq -s 'map(select(.teach.topk)) | length'"
  assert_output 0
  run -0 bash -c "rec json '$O/teach-s1/iter-1/metrics.msgpack' | jq -s 'all(.loss_topk // 0 == 0)'"
  assert_output true
  # the teacher arm: another checkpoint reads the hints; given the
  # bootstrap, which is the policy of iteration 1, it credits as the teach
  # arm does
  run --separate-stderr env FW_BIN="$BIN_DIR" ABLATE_SEEDS="1" ABLATE_ARMS="teach reward teacher" \
    ABLATE_TEACHER="$(cat "$O/base/boot/ckpt")" DEMO_ITERS=1 DEMO_DRILLS_MAX=24 \
    DEMO_MODEL="$ROOT/samples/models/drills-small.json" DEMO_SFT_STEPS=20 DEMO_TASKS=6 \
    DEMO_SAMPLES=2 DEMO_EVAL_SAMPLES=1 "$ROOT/pipelines/ablate.sh" "$O"
  assert_success
  assert_line --regexp '^iter +teach eval \(sd\) +reward eval \(sd\) +teacher eval \(sd\)'
  cmp <(rec json "$O/teach-s1/iter-1/taught.msgpack" | jq -c '{id, tokens, adv: .teach.adv}') \
    <(rec json "$O/teacher-s1/iter-1/taught.msgpack" | jq -c '{id, tokens, adv: .teach.adv}')
  run jq -c '.arms | keys_unsorted' "$O/ablate.json"
  assert_output '["teach","reward","teacher"]'
}

@test "ablate.sh: bad settings are usage errors" {
  run -2 env DEMO_ITERS=0 "$ROOT/pipelines/ablate.sh" "$BATS_TEST_TMPDIR/x"
  assert_output --partial "DEMO_ITERS must be 1 or more"
  run -2 env ABLATE_SEEDS="1 x" "$ROOT/pipelines/ablate.sh" "$BATS_TEST_TMPDIR/x"
  assert_output --partial "ABLATE_SEEDS: want positive integers, not 'x'"
  run -2 env ABLATE_ARMS="teach reward topk" DEMO_TOPK=0 "$ROOT/pipelines/ablate.sh" "$BATS_TEST_TMPDIR/x"
  assert_output --partial "the topk arm needs DEMO_TOPK and DEMO_TOPK_WEIGHT above 0"
  run -2 env ABLATE_ARMS="teach reward teacher" "$ROOT/pipelines/ablate.sh" "$BATS_TEST_TMPDIR/x"
  assert_output --partial "the teacher arm needs ABLATE_TEACHER, a checkpoint directory"
  run -2 env ABLATE_ARMS="teach reward teacher" ABLATE_TEACHER="$BATS_TEST_TMPDIR" "$ROOT/pipelines/ablate.sh" "$BATS_TEST_TMPDIR/x"
  assert_output --partial "the teacher arm needs ABLATE_TEACHER, a checkpoint directory"
}
