#!/usr/bin/env bats
# The inner loop on Slurm: pipelines/slurm/submit.sh's chain of array jobs on
# a real single-node cluster (munged, slurmctld and slurmd started by
# setup_file in a temporary directory), checked against the same tools run
# on one machine.
#
# setup_file runs the chain once over 2 shards, on the small Python
# repository of tests/fixtures/slurm/mini (6 functions, a TAP runner), with
# a tiny random checkpoint and 2 samples per task; then the one-machine
# pipeline on the same repository and store.  The tests look at both.

bats_require_minimum_version 1.5.0

# the chain's options, and the same for the one-machine pipeline
TEST_CMD='python3 run_tests.py'
ROLLOUT_OPTS='--max-tokens 16'

setup_file() {
  export LC_ALL=C FW_THREADS=1
  F="$BATS_FILE_TMPDIR"
  SL="$BATS_TEST_DIRNAME/../pipelines/slurm"
  export TMPDIR="$F/tmp"
  mkdir -p "$TMPDIR"
  cp -r "$BATS_TEST_DIRNAME/fixtures/slurm/mini" "$F/mini"
  "$BATS_TEST_DIRNAME/../samples/repos/commit.sh" "$F/mini"
  ckpt init "$BATS_TEST_DIRNAME/../samples/models/tiny-llama.json" "$F/m0" --seed 1 > /dev/null

  # A short path: munge's socket name must fit in a socket address.
  C=$(mktemp -d /tmp/fw-slurm.XXXXXX)
  echo "$C" > "$F/cluster.dir"
  if [ "$(id -u)" != 0 ]; then
    echo "not root: slurmd runs jobs as their users, which needs root" > "$F/no-cluster"
    return 0
  fi
  if ! "$SL/local-cluster.sh" start "$C" > "$F/cluster.out" 2> "$F/cluster.err"; then
    { echo "the cluster did not start:"; cat "$F/cluster.err"; } > "$F/no-cluster"
    return 0
  fi
  export SLURM_CONF="$C/slurm.conf"

  "$SL/submit.sh" --test-cmd "$TEST_CMD" --report tap --ckpt "$F/m0" --store "$F/st.git" \
    -o "$F/out" -n 2 --samples 2 --seed 1 --np 2 --rollout-opts "$ROLLOUT_OPTS" \
    --train-opts '--objective pg,distill --steps 1' --poll 0.2 --wait "$F/mini" \
    > "$F/submit.out" 2> "$F/submit.err" && echo 0 > "$F/submit.rc" || echo $? > "$F/submit.rc"

  # one machine, no shards: the same tools, repository and store
  O="$F/one"
  mkdir -p "$O"
  task-mutate --test-cmd "$TEST_CMD" --report tap --store "$F/st.git" --seed 1 \
    --strategy stub-body -j 2 -o "$O/tasks.mp" "$F/mini" 2> /dev/null
  traj-filter -e '.split == "train"' -o "$O/train.mp" "$O/tasks.mp"
  # shellcheck disable=SC2086
  rollout --policy "builtin:$F/m0" --store "$F/st.git" --samples 2 --seed 1 $ROLLOUT_OPTS \
    -o "$O/rollouts.mp" "$O/train.mp"
  grade --store "$F/st.git" -j 2 -o "$O/graded.mp" "$O/rollouts.mp"
  teach --hints env,demo -o "$O/taught.mp" "$O/graded.mp"
}

teardown_file() {
  C=$(cat "$BATS_FILE_TMPDIR/cluster.dir" 2> /dev/null) || return 0
  "$BATS_TEST_DIRNAME/../pipelines/slurm/local-cluster.sh" stop "$C"
  rm -rf "$C"
}

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  F="$BATS_FILE_TMPDIR"
  T="$BATS_TEST_TMPDIR"
  SL="$BATS_TEST_DIRNAME/../pipelines/slurm"
  OUT="$F/out"
}

# need_cluster: skip when setup_file could not start the cluster; else
# show what the chain printed, for a failing test's log
need_cluster() {
  if [ -f "$F/no-cluster" ]; then skip "$(cat "$F/no-cluster")"; fi
  cat "$F/submit.out" "$F/submit.err"
}

# jobid STAGE: the chain's job id of STAGE
jobid() { awk -v s="$1" '$1 == s { print $2 }' "$F/submit.out"; }

# wait_job ID: until Slurm has finished job ID; its state on stdout
wait_job() {
  local st
  while :; do
    st=$(scontrol -o show job "$1" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case $st in PENDING | CONFIGURING | RUNNING | COMPLETING | '') sleep 0.2 ;; *) break ;; esac
  done
  echo "$st"
}

# norm FILE: its records as JSON, one a line, sorted, times left out
norm() { rec json "$1" | jq -S -c 'del(.time, .grade.time)' | sort; }

@test "submit.sh --help prints the usage; missing inputs and bad values are usage errors" {
  run -0 --separate-stderr "$SL/submit.sh" --help
  assert_line --index 0 --partial 'usage: submit.sh --test-cmd CMD --ckpt DIR --store DIR -o OUT'
  [ -z "$stderr" ]
  # word for word the SYNOPSIS of fw-slurm(7)
  diff <(echo "$output" | sed 's/^usage: //' | tr -s '[:space:]' ' ') \
    <(man -l "$BATS_TEST_DIRNAME/../man/fw-slurm.7" 2>/dev/null |
      sed -n '/^SYNOPSIS/,/local-cluster.sh/p' | sed '1d;$d' | tr -s '[:space:]' ' ' |
      sed 's/^ //; s|pipelines/slurm/submit.sh|submit.sh|')
  run -2 --separate-stderr "$SL/submit.sh" --ckpt m --store s -o o repo
  [[ $stderr == *"submit.sh: --test-cmd is required"* ]]
  run -2 --separate-stderr "$SL/submit.sh" --test-cmd t --ckpt m --store s -o o
  [[ $stderr == *"no repository given"* ]]
  run -2 --separate-stderr "$SL/submit.sh" --test-cmd t --ckpt m --store s -o o -n 0 repo
  [[ $stderr == *"bad shard count '0'"* ]]
  run -2 --separate-stderr "$SL/submit.sh" --test-cmd t --ckpt m --store s -o o --launcher ssh repo
  [[ $stderr == *"bad launcher 'ssh'"* ]]
  run -2 --separate-stderr "$SL/submit.sh" --frobnicate
  [[ $stderr == *"unknown option '--frobnicate'"* ]]
  [ ! -e o ]
}

@test "the chain is four arrays of 2 tasks and a train job, each completed, and --wait saw it through" {
  need_cluster
  [ "$(cat "$F/submit.rc")" = 0 ]
  run cut -d' ' -f1 "$F/submit.out"
  assert_output $'mutate\nrollout\ngrade\nteach\ntrain\ndone:'
  for s in mutate rollout grade teach; do
    run scontrol -o show job "$(jobid $s)"
    [ "${#lines[@]}" = 2 ]
    [ "$(echo "$output" | grep -c 'JobState=COMPLETED')" = 2 ]
    [ "$(echo "$output" | grep -oE 'ArrayTaskId=[0-9]+' | sort | tr '\n' ' ')" = "ArrayTaskId=0 ArrayTaskId=1 " ]
  done
  scontrol -o show job "$(jobid train)" | grep -q 'JobState=COMPLETED'
  scontrol -o show job "$(jobid train)" | grep -q 'NumTasks=2 '
}

@test "each stage's shards are disjoint and not empty, and cat of them is the merged stream" {
  need_cluster
  for s in tasks rollouts graded taught; do
    n=0
    for k in 0 1; do
      c=$(rec count "$OUT/parts/$s.$k.mp")
      echo "$s.$k: $c"
      [ "$c" -gt 0 ]
      n=$((n + c))
    done
    cat "$OUT/parts/$s.0.mp" "$OUT/parts/$s.1.mp" | cmp - "$OUT/$s.mp"
    [ "$(rec get .id "$OUT/$s.mp" | sort -u | wc -l)" = "$n" ]
  done
}

@test "every sample of a task is in one rollout shard, next to the others, as teach's demo hints need" {
  need_cluster
  for k in 0 1; do
    rec get .task.id "$OUT/parts/rollouts.$k.mp" > "$T/tasks.$k"
    # consecutive: as many runs of equal ids as distinct ids
    [ "$(uniq "$T/tasks.$k" | wc -l)" = "$(sort -u "$T/tasks.$k" | wc -l)" ]
    [ "$(uniq -c "$T/tasks.$k" | awk '{print $1}' | sort -u)" = 2 ]
  done
  [ -z "$(comm -12 <(sort -u "$T/tasks.0") <(sort -u "$T/tasks.1"))" ]
}

@test "the merged tasks, rollouts, grades and teach records equal the one-machine pipeline's, order and times aside" {
  need_cluster
  for s in tasks rollouts graded taught; do
    norm "$OUT/$s.mp" > "$T/slurm.$s"
    norm "$F/one/$s.mp" > "$T/one.$s"
    echo "$s: $(wc -l < "$T/slurm.$s") records"
    [ -s "$T/one.$s" ]
    diff "$T/one.$s" "$T/slurm.$s"
  done
  # the records carry what each stage adds: a reward, hints, credit
  n=$(( 2 * $(rec count "$F/one/train.mp") ))
  rec json "$OUT/taught.mp" | jq -e -s --argjson n "$n" 'length == $n and all(.[]; (.grade.reward | type) == "number"
    and (.teach.hints | length) > 0 and (.teach | has("adv") or has("adv_omitted")))' > /dev/null
  # and the times that were left out are there
  rec json "$OUT/graded.mp" | jq -e -s 'all(.[]; (.time | type) == "number" and (.grade.time | type) == "number")' > /dev/null
}

@test "train-step ran as 2 MPI ranks in the allocation and took the step one process takes on the merged rollouts" {
  need_cluster
  log=$(ls "$OUT"/logs/fw-train-*.out)
  cat "$log"
  grep -qx 'train-step: 2 processes (mpirun)' "$log"
  grep -qx 'rank 0 of 2' "$log"
  grep -qx 'rank 1 of 2' "$log"
  for f in config.json model.safetensors optimizer.safetensors trainer_state.json; do
    [ -s "$OUT/run/latest/$f" ]
  done
  [ "$(jq .step "$OUT/run/latest/trainer_state.json")" = 1 ]
  rec json "$OUT/metrics.mp" > "$T/mpi.jsonl"
  [ "$(wc -l < "$T/mpi.jsonl")" = 1 ]
  train-step --ckpt "$F/m0" --out "$T/run" --objective pg,distill --steps 1 "$OUT/taught.mp" |
    rec json > "$T/one.jsonl"
  # one step from the same parameters: the same float32 sums in another
  # order, (N - 1) u at worst with N = tokens + 264 logits (tiny-llama's
  # vocabulary) and u = 2^-24 (see close in train-step.bats)
  jq -e -n --slurpfile a "$T/one.jsonl" --slurpfile b "$T/mpi.jsonl" \
    '(($a[0].tokens + 264 - 1) * pow(2; -24)) as $tol |
     $a[0].tokens == $b[0].tokens and $a[0].tokens > 0 and $a[0].groups == $b[0].groups and
     (($a[0].loss - $b[0].loss) / $a[0].loss | fabs) <= $tol and
     (($a[0].grad_norm - $b[0].grad_norm) / $a[0].grad_norm | fabs) <= $tol'
}

@test "a stage that fails cancels the jobs after it; --wait names the states and exits 1" {
  need_cluster
  mkdir -p "$T/not-a-repo"
  run -1 --separate-stderr "$SL/submit.sh" --test-cmd "$TEST_CMD" --report tap --ckpt "$F/m0" \
    --store "$T/st.git" -o "$T/out" -n 2 --poll 0.2 --wait "$T/not-a-repo"
  echo "$output"
  echo "$stderr"
  [[ $stderr == *"mutate $(awk '$1 == "mutate" { print $2 }' <<< "$output"): FAILED 2"* ]]
  [[ $stderr == *"rollout "*": CANCELLED 2"* ]]
  [[ $stderr == *"train "*": CANCELLED 1"* ]]
  [[ $stderr == *"submit.sh: the chain did not complete; logs in $T/out/logs"* ]]
  grep -q "not-a-repo" "$T"/out/logs/fw-mutate-*_0.out
  [ ! -e "$T/out/run" ]
}

@test "with srun --mpi=pmix as the launcher, the train job runs train-step as one MPI world too" {
  need_cluster
  srun --mpi=pmix -n 1 true 2> "$T/pmix.err" ||
    skip "srun --mpi=pmix does not work here: Slurm's pmix plugin loads libpmix.so (Debian: libpmix-dev)"
  mkdir -p "$T/o"
  cp -r "$OUT/parts" "$T/o/"
  sed 's/^FW_LAUNCHER=.*/FW_LAUNCHER='"'srun'"'/' "$OUT/run.env" > "$T/o/run.env"
  id=$(sbatch --parsable --ntasks=2 --output="$T/train.log" "$SL/train.sbatch" "$T/o")
  run wait_job "$id"
  cat "$T/train.log"
  assert_output COMPLETED
  grep -qx 'train-step: 2 processes (srun)' "$T/train.log"
  grep -qx 'rank 0 of 2' "$T/train.log"
  grep -qx 'rank 1 of 2' "$T/train.log"
  # the same step as mpirun's
  cmp "$T/o/run/latest/model.safetensors" "$OUT/run/latest/model.safetensors" ||
    jq -e -n --slurpfile a <(rec json "$T/o/metrics.mp") --slurpfile b <(rec json "$OUT/metrics.mp") \
      '(($a[0].loss - $b[0].loss) / $a[0].loss | fabs) <= ($a[0].tokens + 264 - 1) * pow(2; -24)'
}
