#!/usr/bin/env bats
# pipelines/teach-sweep.sh (make teach-sweep) at a tiny size: teach's
# weight chosen on training tasks alone, sweep.json in its schema, its
# figures recomputed here from the iterations it ran.

bats_require_minimum_version 1.5.0

setup_file() {
  export LC_ALL=C
  O="$BATS_FILE_TMPDIR/ts"
  ROOT="$BATS_TEST_DIRNAME/.."
  env FW_BIN="$BIN_DIR" SWEEP_WEIGHTS="0.1 1" SWEEP_SEEDS="1 2" SWEEP_ITERS=1 SWEEP_EVAL=8 \
    DEMO_DRILLS_MAX=24 DEMO_MODEL="$ROOT/samples/models/drills-small.json" DEMO_SFT_STEPS=20 \
    DEMO_TASKS=6 DEMO_SAMPLES=2 DEMO_EVAL_SAMPLES=1 "$ROOT/pipelines/teach-sweep.sh" "$O" \
    > "$BATS_FILE_TMPDIR/stdout" 2> "$BATS_FILE_TMPDIR/stderr"
  echo $? > "$BATS_FILE_TMPDIR/rc"
}

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  O="$BATS_FILE_TMPDIR/ts"
  ROOT="$BATS_TEST_DIRNAME/.."
  PY=/usr/bin/python3
  [ -x "$PY" ] || PY=python3
}

@test "teach-sweep: the tasks it chooses on are training tasks, none held out" {
  [ "$(cat "$BATS_FILE_TMPDIR/rc")" = 0 ] || { cat "$BATS_FILE_TMPDIR/stderr"; false; }
  # SWEEP_EVAL of the training split's tasks, the first by id, relabelled
  # for eval.sh; no held-out task among them
  want=$(rec json "$O/base/drills/tasks.msgpack" | jq -r 'select(.split == "train") | .id' | sort | head -8)
  assert_equal "$(rec get .id "$O/train-eval.msgpack" | sort)" "$want"
  held=$(rec json "$O/base/drills/tasks.msgpack" | jq -r 'select(.split != "train") | .id' | sort)
  [ -n "$held" ]
  assert_equal "$(comm -12 <(echo "$held") <(rec get .id "$O/train-eval.msgpack" | sort))" ""
  # each evaluation graded rollouts of those tasks only
  for f in "$O"/boot-eval/graded.msgpack "$O"/w*-s*/iter-*/eval/graded.msgpack; do
    assert_equal "$(rec get .task.id "$f" | sort -u)" "$want"
  done
}

@test "teach-sweep: every weight ran from one bootstrap on the same tasks, with its weight in the loss" {
  for s in 1 2; do
    for i in 1; do
      for w in 0.1 1; do
        cmp <(rec get .id "$O/w0-s$s/iter-$i/train.tasks") <(rec get .id "$O/w$w-s$s/iter-$i/train.tasks")
        [ "$(rec json "$O/w$w-s$s/iter-$i/taught.msgpack" | jq -s '[.[] | select(.teach == null)] | length')" = 0 ]
        # train-step's loss is loss_pg + W * loss_distill: float32 sums of
        # a few terms, so agreement to 1e-6 of their size (float32's unit
        # roundoff is 6e-8) plus 1e-9
        run -0 jq -s --argjson w "$w" 'map((.loss - (.loss_pg + $w * .loss_distill) | fabs)
          <= 1e-6 * ((.loss_pg | fabs) + $w * (.loss_distill | fabs)) + 1e-9) | all' \
          <(rec json "$O/w$w-s$s/iter-$i/metrics.msgpack")
        assert_output true
      done
      # the reward arm: no teach, no distill term
      [ "$(rec json "$O/w0-s$s/iter-$i/taught.msgpack" | jq -s '[.[] | select(.teach != null)] | length')" = 0 ]
      run -0 jq -s 'map(.loss_distill == 0) | all' <(rec json "$O/w0-s$s/iter-$i/metrics.msgpack")
      assert_output true
    done
  done
}

@test "teach-sweep: sweep.json in its schema, the chosen weight the best final pass rate, the first on a tie" {
  run "$PY" - "$O/sweep.json" "$O/boot-eval/pass.json" "$O" <<'EOF'
import json, os, sys
a = json.load(open(sys.argv[1]))
b0 = json.load(open(sys.argv[2]))["pass"]
o = sys.argv[3]
assert sorted(a) == ["arms", "boot", "chosen", "eval_tasks", "iterations", "seeds", "term"], sorted(a)
assert a["term"] == "distill"
assert a["seeds"] == [1, 2] and a["iterations"] == 1 and a["eval_tasks"] == 8 and a["boot"] == b0
assert [x["weight"] for x in a["arms"]] == [0, 0.1, 1]
for x in a["arms"]:
    assert sorted(x) == ["credited", "eval", "failing", "final", "weight"], sorted(x)
    w = "%g" % x["weight"]
    # each curve: the bootstrap, then each iteration's pass on the training tasks
    for s, c in zip(a["seeds"], x["eval"]):
        want = [b0] + [json.load(open(os.path.join(o, "w%s-s%d" % (w, s), "iter-%d" % i, "eval", "pass.json")))["pass"]
                       for i in (1,)]
        assert c == want, (w, s, c, want)
    # a mean of two numbers in [0, 1]: 1e-12 is far above its rounding
    assert abs(x["final"] - sum(c[-1] for c in x["eval"]) / 2) < 1e-12
    if x["weight"] == 0:
        assert x["credited"] == 0
    else:
        assert 0 <= x["credited"] <= x["failing"]
taught = [x for x in a["arms"] if x["weight"] > 0]
best = max(x["final"] for x in taught)
assert a["chosen"] == [x["weight"] for x in taught if x["final"] == best][0], a["chosen"]
print("ok")
EOF
  assert_output ok
  run -0 cat "$BATS_FILE_TMPDIR/stdout"
  assert_line --regexp '^weight +final pass \(train tasks\)'
  assert_line --regexp '^0 \(reward only\) '
  assert_line --regexp "^chosen on 8 training tasks: distill weight $(jq .chosen "$O/sweep.json") "
}

@test "teach-sweep: SWEEP_TERM=topk sweeps the topk term beside the same reward arm" {
  run --separate-stderr env FW_BIN="$BIN_DIR" SWEEP_BASE="$O/base" SWEEP_TERM=topk SWEEP_WEIGHTS=2 \
    SWEEP_SEEDS=1 SWEEP_ITERS=1 SWEEP_EVAL=8 DEMO_TASKS=6 DEMO_SAMPLES=2 DEMO_TOPK=4 \
    "$ROOT/pipelines/teach-sweep.sh" "$O/k"
  assert_success
  assert_line --regexp "^chosen on 8 training tasks: topk weight 2 "
  d=$O/k/topk2-s1/iter-1
  # every credited record has the teacher's top 4; the loss is pg + 0.1 distill + 2 topk
  # (float32 sums of a few terms: 1e-6 of their size, as above)
  run -0 bash -c "rec json '$d/taught.msgpack' | jq -s 'map(select(.teach.adv and (.teach.adv | any(. != 0)))) | length > 0 and all(.teach.topk.k == 4)'"
  assert_output true
  run -0 jq -s 'map((.loss - (.loss_pg + 0.1 * .loss_distill + 2 * .loss_topk) | fabs)
    <= 1e-6 * ((.loss_pg | fabs) + 0.1 * (.loss_distill | fabs) + 2 * .loss_topk) + 1e-9 and .loss_topk > 0) | all' \
    <(rec json "$d/metrics.msgpack")
  assert_output true
  jq -e '.term == "topk" and ([.arms[].weight] == [0, 2])' "$O/k/sweep.json"
}

@test "teach-sweep: a rerun keeps what ran; a bad weight is refused" {
  ls -l --time-style=+%s.%N "$O"/w1-s2/iter-1/ckpt "$O"/w0-s1/iter-1/eval/pass.json > "$BATS_TEST_TMPDIR/before"
  cp "$O/sweep.json" "$BATS_TEST_TMPDIR/sweep.json"
  run --separate-stderr env FW_BIN="$BIN_DIR" SWEEP_WEIGHTS="0.1 1" SWEEP_SEEDS="1 2" SWEEP_ITERS=1 \
    SWEEP_EVAL=8 DEMO_TASKS=6 DEMO_SAMPLES=2 "$ROOT/pipelines/teach-sweep.sh" "$O"
  assert_success
  ls -l --time-style=+%s.%N "$O"/w1-s2/iter-1/ckpt "$O"/w0-s1/iter-1/eval/pass.json | cmp - "$BATS_TEST_TMPDIR/before"
  cmp "$O/sweep.json" "$BATS_TEST_TMPDIR/sweep.json"
  for w in 0 -1 abc 1.2.3; do
    run --separate-stderr env FW_BIN="$BIN_DIR" SWEEP_WEIGHTS="0.1 $w" "$ROOT/pipelines/teach-sweep.sh" "$BATS_TEST_TMPDIR/x"
    assert_failure 2
    [[ "$stderr" == "teach-sweep: SWEEP_WEIGHTS: want positive numbers, not '$w'" ]]
  done
}
