#!/bin/sh
# inner-loop.sh — one iteration of the inner loop: the policy tries the
# training tasks in the clean room, is graded, taught and trained.
#
#   pipelines/inner-loop.sh -c CKPT -t TASKS -s STORE -o DIR [options]
#
# Inputs
#   -c CKPT          the policy's checkpoint directory (see ckpt(1))
#   -t TASKS         task records (task-mutate(1)); only split "train" is used
#   -s STORE         the task store the tasks name
# Output, in DIR (each file written whole or not at all; a rerun skips the
# stages whose output is there, so a failed stage reruns alone)
#   rollouts.msgpack   rollout --mode fill, K samples per task
#   graded.msgpack     grade: a reward per rollout
#   taught.msgpack     teach: hints and per-token credit (a copy of graded
#                      with --no-teach)
#   private.tasks      the private tasks train-step is told of (--private)
#   metrics.msgpack    train-step's metrics, one record per step
#   run/               the checkpoints; run/latest is the new policy
#   ckpt               a file naming the new checkpoint's directory
# Options
#   --samples K (4)  --seed S (1)  --temp T (1.0)  --max-tokens N (32)
#   --context BYTES  show the policy at most this much of the file before
#                    the body (rollout --context)
#   --tasks N        use N training tasks this iteration (all: 0, the
#                    default), the ones whose turn it is by --seed
#   --lr X (1e-4)  --steps N (4)  --objective O (pg,distill; pg with
#   --no-teach)  --hints H (env,demo)  -j N (2)
#   --route          train-step --route: a failed rollout with teach's credit
#                    is trained by the teacher's terms alone, the others by pg
#   --topk K         teach --topk K: the hinted teacher's K most likely tokens
#                    at each credited token, for the objective's topk term
#   --topk-first-miss  train-step --topk-first-miss: the topk term only up to
#                    a rollout's first token the teacher would not have chosen
#   --teacher SPEC   teach --teacher SPEC (builtin:DIR, http:URL): a teacher
#                    other than the policy itself
#   --private FILE   more private tasks (records, or JSON Lines such as
#                    samples/evals/private-eval.jsonl)
# The private split is never trained on: train-step --private refuses a
# training input that holds a private task (split "private" in TASKS, in
# the rollout's own task, or any task of --private), each one named with
# its position, and the loop stops (exit 1) before any step.
# Every stage runs through fw-stage, so with FW_RUNS set each leaves a run
# record (see fw-cron(1)).  FW_BIN names the tools' directory.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
FW_BIN=${FW_BIN:-$here/../bin}
PATH=$FW_BIN:$PATH
export PATH FW_BIN
usage() { sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
context= ckpt= tasks= store= out= k=4 seed=1 temp=1.0 maxtok=32 ntasks=0 lr=1e-4 steps=4
objective= hints=env,demo jobs=2 teach=1 private= train_flags= topk= teacher=
while [ $# -gt 0 ]; do
  case $1 in
    -c) ckpt=$2; shift ;;
    -t) tasks=$2; shift ;;
    -s) store=$2; shift ;;
    -o) out=$2; shift ;;
    --samples) k=$2; shift ;;
    --seed) seed=$2; shift ;;
    --temp) temp=$2; shift ;;
    --max-tokens) maxtok=$2; shift ;;
    --context) context=$2; shift ;;
    --tasks) ntasks=$2; shift ;;
    --lr) lr=$2; shift ;;
    --steps) steps=$2; shift ;;
    --objective) objective=$2; shift ;;
    --hints) hints=$2; shift ;;
    --no-teach) teach=0 ;;
    --route) train_flags="$train_flags --route" ;;
    --topk) topk=$2; shift ;;
    --teacher) teacher=$2; shift ;;
    --topk-first-miss) train_flags="$train_flags --topk-first-miss" ;;
    --private) private=$2; shift ;;
    -j) jobs=$2; shift ;;
    -h|--help) usage ;;
    *) echo "inner-loop.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
[ -n "$ckpt" ] && [ -n "$tasks" ] && [ -n "$store" ] && [ -n "$out" ] || usage
[ -n "$objective" ] || { [ $teach = 1 ] && objective=pg,distill || objective=pg; }
mkdir -p "$out"
. "$here/keep.sh"

if [ ! -e "$out/train.tasks" ]; then
  # this iteration's share of the training tasks: all, or N of them in an
  # order drawn from the seed (a different N each iteration)
  traj-filter -e '.split == "train"' "$tasks" > "$out/train.tasks.tmp"
  if [ "$ntasks" -gt 0 ]; then
    n=$(rec count "$out/train.tasks.tmp")
    if [ "$n" -gt "$ntasks" ]; then
      parts=$(( (n + ntasks - 1) / ntasks ))
      traj-filter --shard "$(( seed % parts ))/$parts" "$out/train.tasks.tmp" > "$out/train.tasks.part"
      mv "$out/train.tasks.part" "$out/train.tasks.tmp"
    fi
  fi
  mv "$out/train.tasks.tmp" "$out/train.tasks"
fi
keep "$out/rollouts.msgpack" rollout rollout --policy "builtin:$ckpt" --mode fill \
  --samples "$k" --seed "$seed" --temp "$temp" --max-tokens "$maxtok" ${context:+--context "$context"} --store "$store" \
  -j "$jobs" "$out/train.tasks"
keep "$out/graded.msgpack" grade grade --store "$store" -j "$jobs" "$out/rollouts.msgpack"
if [ $teach = 1 ]; then
  keep "$out/taught.msgpack" teach teach --hints "$hints" ${topk:+--topk "$topk"} ${teacher:+--teacher "$teacher"} "$out/graded.msgpack"
else
  keep "$out/taught.msgpack" teach-skipped rec cat "$out/graded.msgpack"
fi
# private_tasks: the private tasks, as records, for train-step --private
private_tasks() {
  traj-filter -q -e '.split == "private"' "$tasks"
  if [ -n "$private" ]; then
    case $(head -c 1 "$private") in
      "{") rec from-json "$private" ;;
      *) rec cat "$private" ;;
    esac
  fi
}
if [ ! -e "$out/ckpt" ]; then
  private_tasks > "$out/private.tasks"
  n=$(rec count "$out/taught.msgpack")
  bs=$(( (n + steps - 1) / steps ))
  rm -rf "$out/run"
  keep "$out/metrics.msgpack" train-step train-step --ckpt "$ckpt" --out "$out/run" \
    --objective "$objective" --steps "$steps" --batch-size "$bs" --lr "$lr" --warmup 0 \
    --schedule constant --no-std --seed "$seed" $train_flags --private "$out/private.tasks" \
    "$out/taught.msgpack"
  readlink -f "$out/run/latest" > "$out/ckpt.tmp"
  mv "$out/ckpt.tmp" "$out/ckpt"
fi
