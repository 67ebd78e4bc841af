#!/bin/sh
# eval.sh — evaluate a checkpoint on the held-out tasks, and retire the
# tasks it has saturated.
#
#   pipelines/eval.sh -c CKPT -t TASKS -s STORE -o DIR [options]
#
# Inputs
#   -c CKPT         the checkpoint directory
#   -t TASKS        task records; only split "eval" is used, less the tasks
#                   in --retired
#   -s STORE        the task store the tasks name
# Output, in DIR (each stage's file written whole; a rerun skips what is
# there)
#   rollouts.msgpack, graded.msgpack   K samples per task, graded
#   summary.txt                        grade --summary's tables
#   summary.msgpack                    the same as grade-summary records
#   pass.json       {"ckpt", "tasks", "rollouts", "solved", "pass",
#                   "lo", "hi", "seed"}: the pass rate (the share of the
#                   rollouts that solved their task, pass@1 estimated from K
#                   samples) with its 95% Wilson interval
# Options
#   --samples K (4)  --seed S (1)  --temp T (1.0)  --max-tokens N (32)
#   --context BYTES  show the policy at most this much of the file before
#                    the body (rollout --context)
#   -j N (2)
#   --history FILE  graded rollouts of earlier evals: with --retire-at,
#                   a task is judged over this eval and those (grade
#                   --summary --recent, the last --recent checkpoints, 3)
#   --retire-at X   retire the tasks whose pass rate over the recent
#                   checkpoints is at least X: they are appended to the
#                   --retired file and left out of later evals
#   --retired FILE  the retired set (task records); read, and appended to
#   --harder CMD    when tasks were retired, run CMD (sh -c) to make new,
#                   harder tasks: it gets the retired tasks on standard input
#                   and writes task records to standard output, which are
#                   appended to TASKS as split "eval" (e.g. task-mutate with
#                   a stronger strategy on the same repositories); a task
#                   whose id TASKS or the retired set holds is left out
# FW_BIN names the tools' directory.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
FW_BIN=${FW_BIN:-$here/../bin}
PATH=$FW_BIN:$PATH
export PATH FW_BIN
usage() { sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
context= ckpt= tasks= store= out= k=4 seed=1 temp=1.0 maxtok=32 jobs=2 retire= retired= harder=
history= recent=3
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
    --retire-at) retire=$2; shift ;;
    --retired) retired=$2; shift ;;
    --history) history=$2; shift ;;
    --recent) recent=$2; shift ;;
    --harder) harder=$2; shift ;;
    -j) jobs=$2; shift ;;
    -h|--help) usage ;;
    *) echo "eval.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
[ -n "$ckpt" ] && [ -n "$tasks" ] && [ -n "$store" ] && [ -n "$out" ] || usage
mkdir -p "$out"
. "$here/keep.sh"

if [ ! -e "$out/eval.tasks" ]; then
  if [ -n "$retired" ] && [ -s "$retired" ]; then
    ids=$(rec get .id "$retired" | jq -R . | jq -sc .)
    traj-filter -e '.split == "eval"' "$tasks" \
      | rec json | jq -c --argjson out "$ids" 'select(.id as $i | $out | index($i) | not)' \
      | rec from-json > "$out/eval.tasks.tmp"
  else
    traj-filter -e '.split == "eval"' "$tasks" > "$out/eval.tasks.tmp"
  fi
  mv "$out/eval.tasks.tmp" "$out/eval.tasks"
fi
keep "$out/rollouts.msgpack" eval-rollout rollout --policy "builtin:$ckpt" --mode fill \
  --samples "$k" --seed "$seed" --temp "$temp" --max-tokens "$maxtok" ${context:+--context "$context"} --store "$store" \
  -j "$jobs" "$out/eval.tasks"
keep "$out/graded.msgpack" eval-grade grade --store "$store" -j "$jobs" "$out/rollouts.msgpack"
if [ ! -e "$out/pass.json" ]; then
  grade --summary "$out/graded.msgpack" > "$out/summary.txt"
  grade --summary --records "$out/graded.msgpack" | rec json \
    | jq -c --argjson seed "$seed" 'select(.scope == "checkpoint")
        | {ckpt: .key, tasks, rollouts, solved, pass: .rate, lo, hi, seed: $seed}' \
    > "$out/pass.json.tmp"
  mv "$out/pass.json.tmp" "$out/pass.json"
fi
if [ -n "$retire" ] && [ ! -e "$out/retired.msgpack" ]; then
  [ -n "$retired" ] || { echo "eval.sh: --retire-at needs --retired FILE" >&2; exit 2; }
  # judge over this eval and the earlier ones
  if [ -n "$history" ] && [ -s "$history" ]; then
    cat "$history" "$out/graded.msgpack"
  else
    cat "$out/graded.msgpack"
  fi | grade --summary --records --retire-at "$retire" --recent "$recent" > "$out/summary.msgpack.tmp"
  mv "$out/summary.msgpack.tmp" "$out/summary.msgpack"
  sat=$(rec json "$out/summary.msgpack" | jq -r 'select(.retire == true and .scope == "task") | .key' | sort -u)
  : > "$out/retired.msgpack.tmp"
  if [ -n "$sat" ]; then
    printf '%s\n' "$sat" | jq -R . | jq -sc . > "$out/sat.json"
    rec json "$out/eval.tasks" | jq -c --slurpfile s "$out/sat.json" 'select(.id as $i | $s[0] | index($i))' \
      | rec from-json > "$out/retired.msgpack.tmp"
  fi
  mv "$out/retired.msgpack.tmp" "$out/retired.msgpack"
  nret=$(rec count "$out/retired.msgpack")
  cat "$out/retired.msgpack" >> "$retired"
  echo "eval.sh: $nret tasks retired as saturated (pass rate >= $retire over the last $recent checkpoints)" >&2
  if [ "$nret" -gt 0 ] && [ -n "$harder" ]; then
    "$here/fw-stage" harder-tasks -o "$out/harder.msgpack" -- sh -c "$harder" < "$out/retired.msgpack" \
      > "$out/harder.raw"
    # a task already in TASKS or retired (a maker run again on the same
    # repository makes the same ids) is not added twice
    { rec get .id "$tasks"; rec get .id "$retired"; } | jq -R . | jq -sc 'map({(.): true}) | add // {}' \
      > "$out/have.json"
    rec json "$out/harder.raw" | jq -cn --slurpfile have "$out/have.json" '
      foreach inputs as $t ({seen: $have[0]};
        if .seen[$t.id] then .emit = null else .seen[$t.id] = true | .emit = ($t | .split = "eval") end;
        .emit // empty)' | rec from-json > "$out/harder.msgpack"
    rm -f "$out/have.json"
    rm -f "$out/harder.raw"
    cat "$out/harder.msgpack" >> "$tasks"
    echo "eval.sh: $(rec count "$out/harder.msgpack") harder tasks added to $tasks" >&2
  fi
fi
jq -r '"pass \(.pass*1000|round/1000) [\(.lo*1000|round/1000), \(.hi*1000|round/1000)] on \(.tasks) tasks, \(.rollouts) rollouts"' "$out/pass.json"
