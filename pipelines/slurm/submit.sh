#!/bin/sh
# submit.sh — one iteration of the inner loop as a chain of Slurm jobs:
#
#   mutate   sbatch --array=0-(N-1)  task-mutate --shard K/N      parts/tasks.K.mp
#   rollout  sbatch --array, afterok  rollout --shard K/N (all tasks)  parts/rollouts.K.mp
#   grade    sbatch --array, aftercorr  grade (shard K's rollouts)  parts/graded.K.mp
#   teach    sbatch --array, aftercorr  teach (shard K's grades)    parts/taught.K.mp
#   train    sbatch, afterok  cat the parts of each stage; train-step over MPI
#
# Usage: submit.sh --test-cmd CMD --ckpt DIR --store DIR -o OUT [options] REPO ...
# (see fw-slurm(7), or --help).  Prints one line per job, "STAGE JOBID"; with
# --wait it then waits for the train job and exits 0 when every job of the
# chain completed, 1 when one did not (the states are printed).  Usage
# errors exit 2.
set -eu
here=$(cd "$(dirname "$0")" && pwd)

usage() {
  cat <<'EOF'
usage: submit.sh --test-cmd CMD --ckpt DIR --store DIR -o OUT [-n N]
                 [--report junit | tap] [--policy SPEC] [--split NAME | all]
                 [--samples K] [--seed S] [--hints LIST] [--np P]
                 [--launcher mpirun | srun] [--bin DIR] [-p PARTITION] [-A ACCOUNT]
                 [--sbatch OPT] [--STAGE-sbatch OPTS] [--STAGE-opts OPTS]
                 [--wait] [--poll SEC] REPO ...
EOF
}
usage_error() { echo "submit.sh: $1" >&2; usage >&2; exit 2; }

# q WORD: WORD quoted for the shell
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

test_cmd='' report=junit ckpt='' store='' out='' shards=2 policy='' split=train samples=4 seed=1
hints=env,demo np=1 launcher=mpirun bin='' wait=0 poll=2 sbatch_all=''
mutate_sb='' rollout_sb='' grade_sb='' teach_sb='' train_sb=''
mutate_opts='--strategy stub-body' rollout_opts='' grade_opts='' teach_opts='' train_opts="--objective pg,distill"

need() { [ $# -ge 2 ] || usage_error "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case $1 in
  -h | --help) usage; exit 0 ;;
  --test-cmd) need "$@"; test_cmd=$2; shift 2 ;;
  --report) need "$@"; report=$2; shift 2 ;;
  --ckpt) need "$@"; ckpt=$2; shift 2 ;;
  --store) need "$@"; store=$2; shift 2 ;;
  -o | --out) need "$@"; out=$2; shift 2 ;;
  -n | --shards) need "$@"; shards=$2; shift 2 ;;
  --policy) need "$@"; policy=$2; shift 2 ;;
  --split) need "$@"; split=$2; shift 2 ;;
  --samples) need "$@"; samples=$2; shift 2 ;;
  --seed) need "$@"; seed=$2; shift 2 ;;
  --hints) need "$@"; hints=$2; shift 2 ;;
  --np) need "$@"; np=$2; shift 2 ;;
  --launcher) need "$@"; launcher=$2; shift 2 ;;
  --bin) need "$@"; bin=$2; shift 2 ;;
  -p | --partition) need "$@"; sbatch_all="$sbatch_all $(q "--partition=$2")"; shift 2 ;;
  -A | --account) need "$@"; sbatch_all="$sbatch_all $(q "--account=$2")"; shift 2 ;;
  --sbatch) need "$@"; sbatch_all="$sbatch_all $(q "$2")"; shift 2 ;;
  --mutate-sbatch) need "$@"; mutate_sb=$2; shift 2 ;;
  --rollout-sbatch) need "$@"; rollout_sb=$2; shift 2 ;;
  --grade-sbatch) need "$@"; grade_sb=$2; shift 2 ;;
  --teach-sbatch) need "$@"; teach_sb=$2; shift 2 ;;
  --train-sbatch) need "$@"; train_sb=$2; shift 2 ;;
  --mutate-opts) need "$@"; mutate_opts=$2; shift 2 ;;
  --rollout-opts) need "$@"; rollout_opts=$2; shift 2 ;;
  --grade-opts) need "$@"; grade_opts=$2; shift 2 ;;
  --teach-opts) need "$@"; teach_opts=$2; shift 2 ;;
  --train-opts) need "$@"; train_opts=$2; shift 2 ;;
  --wait) wait=1; shift ;;
  --poll) need "$@"; poll=$2; shift 2 ;;
  --) shift; break ;;
  -*) usage_error "unknown option '$1'" ;;
  *) break ;;
  esac
done
[ $# -gt 0 ] || usage_error "no repository given"
[ -n "$test_cmd" ] || usage_error "--test-cmd is required"
[ -n "$ckpt" ] || usage_error "--ckpt is required"
[ -n "$store" ] || usage_error "--store is required"
[ -n "$out" ] || usage_error "-o OUT is required"
case $shards in '' | *[!0-9]* | 0*) usage_error "bad shard count '$shards' (want N >= 1)" ;; esac
case $np in '' | *[!0-9]* | 0*) usage_error "bad process count '$np' (want P >= 1)" ;; esac
case $samples in '' | *[!0-9]* | 0*) usage_error "bad sample count '$samples'" ;; esac
case $seed in '' | *[!0-9]*) usage_error "bad seed '$seed'" ;; esac
case $poll in '' | *[!0-9.]*) usage_error "bad poll interval '$poll'" ;; esac
case $report in junit | tap) ;; *) usage_error "bad report '$report' (want junit or tap)" ;; esac
case $launcher in mpirun | srun) ;; *) usage_error "bad launcher '$launcher' (want mpirun or srun)" ;; esac

# Every path the jobs see is absolute: they start in another directory,
# maybe on another machine (the paths must be on a shared filesystem).
abs() { case $1 in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$PWD" "$1" ;; esac; }
mkdir -p "$out/parts" "$out/logs"
out=$(cd "$out" && pwd)
ckpt=$(abs "$ckpt")
store=$(abs "$store")
[ -n "$policy" ] || policy=builtin:$ckpt
if [ -z "$bin" ]; then
  bin=$(dirname "$(command -v task-mutate 2> /dev/null || echo "$here/../../bin/task-mutate")")
fi
bin=$(cd "$bin" && pwd)
for t in task-mutate traj-filter rollout grade teach train-step; do
  [ -x "$bin/$t" ] || { echo "submit.sh: $bin/$t: not found (build with make, or --bin DIR)" >&2; exit 1; }
done
command -v sbatch > /dev/null 2>&1 || { echo "submit.sh: sbatch: not found (Debian: slurm-client)" >&2; exit 1; }
repos=
for r in "$@"; do repos="$repos $(q "$(abs "$r")")"; done

# run.env: what every job reads, with each value quoted for the shell
{
  echo "# written by submit.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ); sourced by each job"
  for v in FW_BIN="$bin" FW_SHARDS="$shards" FW_TEST_CMD="$test_cmd" FW_REPORT="$report" \
    FW_STORE="$store" FW_CKPT="$ckpt" FW_POLICY="$policy" FW_SPLIT="$split" \
    FW_SAMPLES="$samples" FW_SEED="$seed" FW_HINTS="$hints" FW_LAUNCHER="$launcher" \
    FW_MUTATE_OPTS="$mutate_opts" FW_ROLLOUT_OPTS="$rollout_opts" \
    FW_GRADE_OPTS="$grade_opts" FW_TEACH_OPTS="$teach_opts" FW_TRAIN_OPTS="$train_opts"; do
    echo "${v%%=*}=$(q "${v#*=}")"
  done
  echo "FW_REPOS=$(q "$repos")"
  cat <<'EOF'
PATH=$FW_BIN:$PATH
FW_THREADS=${FW_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
export PATH FW_THREADS
# fw_parts STAGE: the files of every shard of STAGE, in shard order
fw_parts() {
  _k=0
  while [ "$_k" -lt "$FW_SHARDS" ]; do
    [ -f "$out/parts/$1.$_k.mp" ] || { echo "$out/parts/$1.$_k.mp: missing" >&2; exit 1; }
    printf '%s\n' "$out/parts/$1.$_k.mp"
    _k=$((_k + 1))
  done
}
EOF
} > "$out/run.env.tmp"
mv "$out/run.env.tmp" "$out/run.env"
# what an earlier chain left, but its checkpoints in OUT/run
rm -f "$out"/parts/*.mp "$out"/logs/*.out "$out"/tasks.mp "$out"/rollouts.mp \
  "$out"/graded.mp "$out"/taught.mp "$out"/metrics.mp "$out"/jobs

# sub STAGE EXTRA: sbatch the stage's script, print "STAGE JOBID", set $id
sub() {
  stage=$1
  shift
  eval "set -- $sbatch_all \"\$@\""
  id=$(sbatch --parsable --export=ALL "$@" "$here/$stage.sbatch" "$out") ||
    { echo "submit.sh: sbatch of $stage failed" >&2; exit 1; }
  id=${id%%;*}
  echo "$stage $id"
}
arr="--array=0-$((shards - 1))"
log=$out/logs/%x-%A_%a.out
dep=--kill-on-invalid-dep=yes
# shellcheck disable=SC2086 # the --STAGE-sbatch values are lists of options
sub mutate "$arr" "--output=$log" $mutate_sb; j_mutate=$id
# shellcheck disable=SC2086
sub rollout "$arr" "--output=$log" "--dependency=afterok:$j_mutate" $dep $rollout_sb; j_rollout=$id
# shellcheck disable=SC2086
sub grade "$arr" "--output=$log" "--dependency=aftercorr:$j_rollout" $dep $grade_sb; j_grade=$id
# shellcheck disable=SC2086
sub teach "$arr" "--output=$log" "--dependency=aftercorr:$j_grade" $dep $teach_sb; j_teach=$id
# shellcheck disable=SC2086
sub train "--ntasks=$np" "--output=$out/logs/%x-%j.out" "--dependency=afterok:$j_teach" $dep \
  $train_sb; j_train=$id
printf '%s\n' "$j_mutate $j_rollout $j_grade $j_teach $j_train" > "$out/jobs"

[ $wait = 1 ] || exit 0

# job_states ID: "STATE" of each job (each task of an array) of ID, from
# scontrol while Slurm remembers the job (MinJobAge), else from sacct
job_states() {
  s=$(scontrol -o show job "$1" 2> /dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  [ -n "$s" ] || s=$(sacct -n -X -P -o State -j "$1" 2> /dev/null | sed 's/ .*//')
  printf '%s\n' "$s"
}
while :; do
  st=$(job_states "$j_train")
  case $st in
  COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | PREEMPTED | BOOT_FAIL | DEADLINE) break ;;
  '') echo "submit.sh: job $j_train: Slurm knows it no more" >&2; exit 1 ;;
  esac
  sleep "$poll"
done
if [ "$st" = COMPLETED ]; then
  echo "done: $out/run/latest"
  exit 0
fi
j=''
for s in mutate rollout grade teach train; do
  eval "j=\$j_$s"
  printf '%s %s: %s\n' "$s" "$j" "$(job_states "$j" | sort | uniq -c | awk '{printf "%s %s ", $2, $1}')" >&2
done
echo "submit.sh: the chain did not complete; logs in $out/logs" >&2
exit 1
