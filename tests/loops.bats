#!/usr/bin/env bats
# The loop pipelines on a reduced sample: inner-loop.sh, eval.sh (with
# retirement), plot.sh and the Makefile targets over them.

bats_require_minimum_version 1.5.0

setup_file() {
  export LC_ALL=C
  ROOT="$BATS_TEST_DIRNAME/.."
  PY=/usr/bin/python3
  [ -x "$PY" ] || PY=python3
  L="$BATS_FILE_TMPDIR/loop"
  mkdir -p "$L/drills" "$L/boot"
  "$PY" "$ROOT/samples/drills/gen.py" repo "$L/drills/repo"
  "$ROOT/samples/repos/commit.sh" "$L/drills/repo" > /dev/null
  "$BIN_DIR/task-mutate" --test-cmd 'python3 -S run_tests.py' --store "$L/drills/store.git" \
    --strategy stub-body --max 12 --seed 1 -j 2 --split train=0.5,eval=0.5,private=0 \
    -o "$L/drills/tasks.msgpack" "$L/drills/repo" 2> /dev/null
  "$BIN_DIR/ckpt" init "$ROOT/samples/models/drills-llama.json" "$L/model" --seed 1 > /dev/null
  "$PY" "$ROOT/samples/drills/gen.py" corpus | "$BIN_DIR/rec" from-json > "$L/corpus.msgpack"
  "$BIN_DIR/train-step" --ckpt "$L/model" --out "$L/boot/run" --objective sft --steps 3 \
    --batch-size 16 --lr 3e-3 --seed 1 -o /dev/null "$L/corpus.msgpack"
  readlink -f "$L/boot/run/latest" > "$L/boot/ckpt"
  export L ROOT
}

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  PATH="$BIN_DIR:$PATH"
  export FW_BIN="$BIN_DIR"
}

mtime() { stat -c %Y.%y "$@"; }

@test "the reduced sample has train and eval tasks" {
  [ "$(rec count "$L/drills/tasks.msgpack")" -ge 8 ]
  [ "$(rec get .split "$L/drills/tasks.msgpack" | grep -c train)" -ge 2 ]
  [ "$(rec get .split "$L/drills/tasks.msgpack" | grep -c eval)" -ge 2 ]
}

@test "inner-loop.sh: usage errors exit 2" {
  run "$ROOT/pipelines/inner-loop.sh" -c x
  assert_failure 2
  assert_output --partial "inner-loop.sh -c CKPT -t TASKS -s STORE -o DIR"
  run "$ROOT/pipelines/inner-loop.sh" --bogus
  assert_failure 2
  assert_output --partial "unknown argument '--bogus'"
}

@test "inner-loop.sh: one iteration from rollouts to a new checkpoint, every stage recorded" {
  D="$BATS_TEST_TMPDIR/it"
  export FW_RUNS="$BATS_TEST_TMPDIR/runs.msgpack"
  run "$ROOT/pipelines/inner-loop.sh" -c "$(cat "$L/boot/ckpt")" -t "$L/drills/tasks.msgpack" \
    -s "$L/drills/store.git" -o "$D" --samples 2 --steps 1
  assert_success
  ntrain=$(rec get .split "$L/drills/tasks.msgpack" | grep -c train)
  [ "$(rec count "$D/rollouts.msgpack")" = $((ntrain * 2)) ]
  [ "$(rec json "$D/graded.msgpack" | jq -s '[.[] | select(.grade.reward != null)] | length')" = $((ntrain * 2)) ]
  # teach ran: every record carries a teach field
  [ "$(rec json "$D/taught.msgpack" | jq -s '[.[] | select(.teach == null)] | length')" = 0 ]
  [ "$(rec count "$D/metrics.msgpack")" = 1 ]
  [ -f "$(cat "$D/ckpt")/model.safetensors" ]
  [ "$(cat "$D/ckpt")" != "$(cat "$L/boot/ckpt")" ]
  # one run record per stage, all ok, with record counts
  run sh -c "rec json '$FW_RUNS' | jq -r '[.stage, .status, (.records // \"-\")] | @tsv'"
  assert_line --regexp "^rollout	ok	$((ntrain * 2))$"
  assert_line --regexp "^grade	ok	$((ntrain * 2))$"
  assert_line --regexp "^teach	ok	$((ntrain * 2))$"
  assert_line --regexp "^train-step	ok	1$"
}

@test "inner-loop.sh: a rerun redoes nothing; a removed stage reruns alone" {
  D="$BATS_TEST_TMPDIR/it"
  args=(-c "$(cat "$L/boot/ckpt")" -t "$L/drills/tasks.msgpack" -s "$L/drills/store.git"
        -o "$D" --samples 2 --steps 1)
  "$ROOT/pipelines/inner-loop.sh" "${args[@]}"
  r=$(mtime "$D/rollouts.msgpack") g=$(mtime "$D/graded.msgpack") t=$(mtime "$D/taught.msgpack")
  c=$(cat "$D/ckpt")
  sleep 1
  "$ROOT/pipelines/inner-loop.sh" "${args[@]}"
  [ "$(mtime "$D/rollouts.msgpack")" = "$r" ]
  [ "$(mtime "$D/taught.msgpack")" = "$t" ]
  [ "$(cat "$D/ckpt")" = "$c" ]
  # the teach stage failed (its output gone) and reruns, with training after it
  rm "$D/taught.msgpack" "$D/ckpt" "$D/metrics.msgpack"
  "$ROOT/pipelines/inner-loop.sh" "${args[@]}"
  [ "$(mtime "$D/rollouts.msgpack")" = "$r" ]
  [ "$(mtime "$D/graded.msgpack")" = "$g" ]
  [ "$(mtime "$D/taught.msgpack")" != "$t" ]
  [ -f "$(cat "$D/ckpt")/model.safetensors" ]
}

@test "inner-loop.sh --no-teach trains on the graded rollouts as they are" {
  D="$BATS_TEST_TMPDIR/nt"
  run "$ROOT/pipelines/inner-loop.sh" -c "$(cat "$L/boot/ckpt")" -t "$L/drills/tasks.msgpack" \
    -s "$L/drills/store.git" -o "$D" --samples 2 --steps 1 --no-teach
  assert_success
  cmp "$D/graded.msgpack" "$D/taught.msgpack"
  [ "$(rec json "$D/metrics.msgpack" | jq '.loss_distill // 0')" = 0 ]
}

@test "eval.sh: the pass rate of a checkpoint with its interval, as grade --summary gives it" {
  E="$BATS_TEST_TMPDIR/ev"
  run "$ROOT/pipelines/eval.sh" -c "$(cat "$L/boot/ckpt")" -t "$L/drills/tasks.msgpack" \
    -s "$L/drills/store.git" -o "$E" --samples 2
  assert_success
  assert_output --regexp '^pass [0-9.]+ \[[0-9.]+, [0-9.]+\] on [0-9]+ tasks, [0-9]+ rollouts$'
  neval=$(rec get .split "$L/drills/tasks.msgpack" | grep -c eval)
  run jq -r '[.tasks, .rollouts, (.pass >= .lo and .pass <= .hi), .seed] | @tsv' "$E/pass.json"
  assert_output "$neval	$((neval * 2))	true	1"
  solved=$(rec json "$E/graded.msgpack" | jq -s '[.[] | select(.grade.resolved and .grade.reward > 0)] | length')
  [ "$(jq .solved "$E/pass.json")" = "$solved" ]
  grep -q "pass@1" "$E/summary.txt"
}

@test "eval.sh: saturated tasks are retired, left out of the next eval, and harder ones made" {
  T="$BATS_TEST_TMPDIR/tasks.msgpack"
  cp "$L/drills/tasks.msgpack" "$T"
  neval=$(rec get .split "$T" | grep -c eval)
  # two spare tasks stand in for harder ones: what --harder writes is added as eval tasks
  rec json "$T" | jq -c 'select(.split == "train") | .id = ("hard-" + .id)' | head -2 \
    | rec from-json > "$BATS_TEST_TMPDIR/spare.msgpack"
  : > "$BATS_TEST_TMPDIR/retired.msgpack"
  run "$ROOT/pipelines/eval.sh" -c "$(cat "$L/boot/ckpt")" -t "$T" -s "$L/drills/store.git" \
    -o "$BATS_TEST_TMPDIR/e1" --samples 1 --retire-at 0 --retired "$BATS_TEST_TMPDIR/retired.msgpack" \
    --harder "cat > '$BATS_TEST_TMPDIR/harder-input'; rec cat '$BATS_TEST_TMPDIR/spare.msgpack'"
  assert_success
  # a pass rate of at least 0 saturates every task
  [ "$(rec count "$BATS_TEST_TMPDIR/retired.msgpack")" = "$neval" ]
  # the harder-task maker saw the retired tasks, and its tasks joined the eval split
  [ "$(rec count "$BATS_TEST_TMPDIR/harder-input")" = "$neval" ]
  [ "$(rec json "$T" | jq -c 'select(.split == "eval" and (.id | startswith("hard-")))' | wc -l)" = 2 ]
  # the next eval measures only what is left: the two new tasks
  run "$ROOT/pipelines/eval.sh" -c "$(cat "$L/boot/ckpt")" -t "$T" -s "$L/drills/store.git" \
    -o "$BATS_TEST_TMPDIR/e2" --samples 1 --retired "$BATS_TEST_TMPDIR/retired.msgpack"
  assert_success
  [ "$(jq .tasks "$BATS_TEST_TMPDIR/e2/pass.json")" = 2 ]
  # retired in their turn, the maker run again makes the same tasks: they are
  # not added again (nor a task it writes twice)
  n=$(rec count "$T")
  run "$ROOT/pipelines/eval.sh" -c "$(cat "$L/boot/ckpt")" -t "$T" -s "$L/drills/store.git" \
    -o "$BATS_TEST_TMPDIR/e4" --samples 1 --retire-at 0 --retired "$BATS_TEST_TMPDIR/retired.msgpack" \
    --harder "cat > /dev/null; rec cat '$BATS_TEST_TMPDIR/spare.msgpack' '$BATS_TEST_TMPDIR/spare.msgpack'; rec json '$T' | head -1 | jq -c '.id = \"new-1\"' | rec from-json; rec json '$T' | head -1 | jq -c '.id = \"new-1\"' | rec from-json"
  assert_success
  [ "$(rec count "$BATS_TEST_TMPDIR/retired.msgpack")" = $((neval + 2)) ]
  [ "$(rec count "$T")" = $((n + 1)) ]
  [ "$(rec json "$T" | jq -c 'select(.id == "new-1" and .split == "eval")' | wc -l)" = 1 ]
  # with a threshold no task reaches, nothing is retired
  : > "$BATS_TEST_TMPDIR/r2.msgpack"
  run "$ROOT/pipelines/eval.sh" -c "$(cat "$L/boot/ckpt")" -t "$L/drills/tasks.msgpack" \
    -s "$L/drills/store.git" -o "$BATS_TEST_TMPDIR/e3" --samples 1 --retire-at 1 \
    --retired "$BATS_TEST_TMPDIR/r2.msgpack"
  assert_success
  [ ! -s "$BATS_TEST_TMPDIR/r2.msgpack" ]
}

@test "make inner-loop ITER=n chains the iterations; finished ones are not redone" {
  cp -r "$L" "$BATS_TEST_TMPDIR/L"
  M="$BATS_TEST_TMPDIR/L"
  run make -C "$ROOT" --no-print-directory B="$BIN_DIR" LOOP="$M" inner-loop ITER=2
  assert_success
  [ -f "$M/iter-1/eval/pass.json" ] || [ -f "$M/iter-1/ckpt" ]
  [ -f "$M/iter-2/eval/pass.json" ]
  # iteration 2 started from iteration 1's checkpoint
  rec json "$M/iter-2/rollouts.msgpack" | head -1 | jq -e --arg c "$(cat "$M/iter-1/ckpt")" '.policy.ckpt == $c'
  run make -C "$ROOT" --no-print-directory B="$BIN_DIR" LOOP="$M" inner-loop ITER=2
  assert_success
  assert_output --partial "Nothing to be done"
  # make eval CKPT=: any checkpoint on the held-out split
  run make -C "$ROOT" --no-print-directory B="$BIN_DIR" LOOP="$M" eval CKPT="$(cat "$M/iter-2/ckpt")"
  assert_success
  assert_output --regexp '^pass [0-9.]+ '
}

@test "plot.sh draws the eval, reward and loss curves from curve.tsv" {
  command -v gnuplot || skip "gnuplot is not installed"
  P="$BATS_TEST_TMPDIR/p"
  mkdir -p "$P/ablate-teach"
  printf '0\t0.2\t0.15\t0.25\tNaN\tNaN\n1\t0.3\t0.25\t0.35\t0.2\t0.1\n2\t0.4\t0.35\t0.45\t0.3\t0.05\n' > "$P/curve.tsv"
  printf '0\t0.2\t0.15\t0.25\tNaN\tNaN\n1\t0.25\t0.2\t0.3\t0.2\t0.1\n' > "$P/ablate-teach/curve.tsv"
  run "$ROOT/pipelines/plot.sh" "$P"
  assert_success
  for f in eval reward loss; do
    [ "$(head -c 8 "$P/$f.png" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ]
  done
  run "$ROOT/pipelines/plot.sh" "$BATS_TEST_TMPDIR/none"
  assert_failure
}
