#!/bin/sh
# judge-reward.sh — what `make judge-reward` runs: the judge's verdict as the
# reward of one inner-loop iteration on requests that want a clarifying
# question (task.expect "ask") and requests that want the work started
# (task.expect "act", the control: a policy that always asks is not paid),
# and the rate of clarifying questions before and after on held-out tasks.
#
#   pipelines/judge-reward.sh [OUTDIR]          (default: out/judge-reward)
#
# Stages
#   1. tasks      task-mutate --strategy stub-body on samples/repos/textkit
#                 (or JR_TASKS with JR_STORE); samples/judge/gen.py tasks
#                 makes each task twice, asked vaguely (expect ask: no
#                 function named) and as written (expect act), and holds out
#                 a share of them, both variants (split eval)
#   2. bootstrap  ckpt init JR_MODEL, then train-step --objective sft on
#                 gen.py sft: on every training request one clarifying
#                 question and one first command, so that the policy does
#                 each about half the time whatever the request wants
#   3. before     rollout --mode agent of the bootstrap on the held-out
#                 tasks, JR_SAMPLES samples each at JR_TEMP
#   4. iteration  rollout of the bootstrap on the training tasks; grade
#                 --judge JR_JUDGE --rubric samples/judge/expect.jsonl
#                 --judge-only --reward JR_REWARD; train-step --objective pg
#                 on the graded rollouts
#   5. after      rollout of the new checkpoint on the held-out tasks, the
#                 same seeds as before
#
# A clarifying question: the agent's first reply runs no command (the
# episode stops at no-action after 0 steps) and ends in a question mark.
# The rate of them per kind of request, before and after, with 95% Wilson
# intervals, is the table this prints.
#
# Environment: JR_TASKS, JR_STORE (tasks and their store instead of stage
# 1's), JR_EVAL (0.4, the held-out share), JR_MODEL (tiny-qwen2 with a
# 1024-token context), JR_BOOT_STEPS (150), JR_BOOT_BATCH (10), JR_BOOT_LR
# (5e-3), JR_SAMPLES (8), JR_TEMP (1), JR_MAX_TOKENS (48), JR_JUDGE
# (exec:samples/judge/rules-judge), JR_REWARD
# (mix:resolved=0,asks-first=1,acts-at-once=1: the tests weigh nothing, a
# policy this small resolves no task; on an ask task the reward is the
# asks-first score, on an act task the acts-at-once score, each on [0, 1]),
# JR_PG_STEPS (16), JR_PG_LR (3e-3), JR_JOBS (2).  FW_BIN names the tools'
# directory.
# A stage whose output is in OUTDIR is not run again (the task-mutate
# tasks, boot/ckpt, before, train and graded); pg and after always are.
# Outputs in OUTDIR: tasks.msgpack, boot/, before.msgpack, train.msgpack,
# graded.msgpack, pg/ (the checkpoint run), metrics.msgpack,
# after.msgpack, rates.tsv (kind, when, asked, n, rate, lo, hi) and
# reward.json.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${FW_BIN:-$here/bin}
PATH=$bin:$PATH
export PATH LC_ALL=C
PY=/usr/bin/python3
out=${1:-out/judge-reward}
frac=${JR_EVAL:-0.4}
boot_steps=${JR_BOOT_STEPS:-150}
boot_batch=${JR_BOOT_BATCH:-10}
boot_lr=${JR_BOOT_LR:-5e-3}
k=${JR_SAMPLES:-8}
temp=${JR_TEMP:-1}
maxtok=${JR_MAX_TOKENS:-48}
judge=${JR_JUDGE:-exec:$here/samples/judge/rules-judge}
reward=${JR_REWARD:-mix:resolved=0,asks-first=1,acts-at-once=1}
pg_steps=${JR_PG_STEPS:-16}
pg_lr=${JR_PG_LR:-3e-3}
jobs=${JR_JOBS:-2}
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/judge-reward.log
: > "$log"
work=$(mktemp -d "${TMPDIR:-/tmp}/judge-reward.XXXXXX")
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)
stage() { printf '\n== [%ss] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
run() { "$@" >> "$log" 2>&1 || { echo "judge-reward: failed: $* (see $log)" >&2; tail -5 "$log" >&2; exit 1; }; }

stage "1/5 tasks"
if [ -n "${JR_TASKS:-}" ]; then
  [ -n "${JR_STORE:-}" ] || { echo "judge-reward: JR_TASKS needs JR_STORE" >&2; exit 2; }
  base=$JR_TASKS
  store=$JR_STORE
else
  store=$out/store.git
  base=$out/base-tasks.msgpack
  if [ ! -s "$base" ]; then
    rm -rf "$out/textkit" "$store"
    cp -r "$here/samples/repos/textkit" "$out/textkit"
    "$here/samples/repos/commit.sh" "$out/textkit" > /dev/null
    run task-mutate --store "$store" --strategy stub-body -o "$base.tmp" \
      --test-cmd 'python3 -m pytest -q -p no:cacheprovider --continue-on-collection-errors --junitxml=$FW_REPORT' \
      "$out/textkit"
    mv "$base.tmp" "$base"
  fi
fi
rec json "$base" | "$PY" "$here/samples/judge/gen.py" tasks --seed 1 --eval "$frac" \
  | rec from-json > "$out/tasks.msgpack"
traj-filter -q -e '.split == "train"' "$out/tasks.msgpack" > "$work/train.tasks"
traj-filter -q -e '.split == "eval"' "$out/tasks.msgpack" > "$work/eval.tasks"
ntr=$(rec count "$work/train.tasks")
nev=$(rec count "$work/eval.tasks")
[ "$ntr" -gt 0 ] && [ "$nev" -gt 0 ] || { echo "judge-reward: no training or no held-out tasks" >&2; exit 1; }
printf '    %s training tasks, %s held out (half of each expect ask, half act)\n' "$ntr" "$nev"

stage "2/5 bootstrap: $boot_steps steps of SFT on both first moves"
if [ -n "${JR_MODEL:-}" ]; then
  model=$JR_MODEL
else
  model=$work/model.json
  jq '.max_position_embeddings = 1024' "$here/samples/models/tiny-qwen2.json" > "$model"
fi
if [ ! -s "$out/boot/ckpt" ]; then
rm -rf "$out/boot" && mkdir -p "$out/boot"
run ckpt init "$model" "$out/boot/init" --seed 1
# the system prompt of an agent episode, as the policy reads it
rec head -n 1 "$work/train.tasks" > "$work/one.task"
rollout --policy "builtin:$out/boot/init" --mode agent --store "$store" --max-tokens 1 \
  "$work/one.task" 2>> "$log" | rec json | jq -j '.turns[0].text' > "$work/system.txt"
rec json "$work/train.tasks" | "$PY" "$here/samples/judge/gen.py" sft --seed 1 --system "$work/system.txt" \
  | rec from-json > "$out/boot/sft.msgpack"
run train-step --ckpt "$out/boot/init" --out "$out/boot/run" --objective sft \
  --steps "$boot_steps" --batch-size "$boot_batch" --lr "$boot_lr" --warmup 10 \
  --decay-steps "$boot_steps" --schedule cosine --seed 1 -o "$out/boot/metrics.msgpack" \
  "$out/boot/sft.msgpack"
readlink -f "$out/boot/run/latest" > "$out/boot/ckpt"
fi
boot=$(cat "$out/boot/ckpt")
rec json "$out/boot/metrics.msgpack" | jq -r '"    step \(.step): loss \(.loss*1000|round/1000)"' | sed -n '1p;$p'

# episodes CKPT SEED TASKS OUT: K agent episodes a task
episodes() {
  [ -s "$4" ] && return 0
  run rollout --policy "builtin:$1" --mode agent --store "$store" --samples "$k" --seed "$2" \
    --temp "$temp" --max-tokens "$maxtok" --max-steps 1 --timeout 30 --no-time -j "$jobs" \
    -o "$4.tmp" "$3"
  mv "$4.tmp" "$4"
}
# rates FILE WHEN: per kind of request, the clarifying questions among the
# episodes of FILE, with a 95% Wilson interval (z = 1.96)
rates() {
  rec json "$1" | jq -r --arg when "$2" '
    ([.turns[] | select(.role == "assistant")][0].text // "") as $first
    | [.task.expect, $when,
       (if .steps == 0 and .stop == "no-action" and ($first | test("\\?\\s*$")) then 1 else 0 end)]
    | @tsv' \
  | awk -F'\t' '{ n[$1 "\t" $2]++; k[$1 "\t" $2] += $3 }
    END { z = 1.96
          for (g in n) { p = k[g] / n[g]; d = 1 + z*z/n[g]
                         c = (p + z*z/(2*n[g])) / d
                         h = z * sqrt(p*(1-p)/n[g] + z*z/(4*n[g]*n[g])) / d
                         printf "%s\t%d\t%d\t%.4f\t%.4f\t%.4f\n", g, k[g], n[g], p, c - h, c + h } }' \
  | sort
}

stage "3/5 before: the bootstrap on the $nev held-out tasks, $k samples each at temperature $temp"
episodes "$boot" 2 "$work/eval.tasks" "$out/before.msgpack"
rates "$out/before.msgpack" before > "$work/rates"

stage "4/5 iteration: rollouts on the $ntr training tasks, judged ($judge), reward $reward, pg"
episodes "$boot" 1 "$work/train.tasks" "$out/train.msgpack"
rec from-json -o "$work/rubric.msgpack" "$here/samples/judge/expect.jsonl"
if [ ! -s "$out/graded.msgpack" ]; then
  run grade --judge "$judge" --rubric "$work/rubric.msgpack" --judge-only \
    --reward "$reward" --no-time -o "$out/graded.tmp" "$out/train.msgpack"
  mv "$out/graded.tmp" "$out/graded.msgpack"
fi
rec json "$out/graded.msgpack" | jq -r '[.task.expect, .grade.reward] | @tsv' \
  | awk -F'\t' '{ n[$1]++; s[$1] += $2 } END { for (e in n) printf "    judge reward on %s tasks: mean %.3f over %d rollouts\n", e, s[e]/n[e], n[e] }' | sort
n=$(rec count "$out/graded.msgpack")
bs=$(( (n + pg_steps - 1) / pg_steps ))
# twice through the rollouts: the clipped ratio bounds how far the second
# pass moves from the policy that sampled them
bs=$(( bs * 2 ))
rm -rf "$out/pg" "$out/after.msgpack"
# an episode cut at the context ends at its last position: --truncate keeps
# the positions it has (the first reply, which the judge read, among them)
run train-step --truncate --ckpt "$boot" --out "$out/pg" --objective pg --steps "$pg_steps" --batch-size "$bs" \
  --lr "$pg_lr" --warmup 0 --schedule constant --seed 1 -o "$out/metrics.msgpack" "$out/graded.msgpack"
after=$(readlink -f "$out/pg/latest")
rec json "$out/metrics.msgpack" | jq -r '"    step \(.step): loss_pg \(.loss_pg*10000|round/10000), reward_mean \(.reward_mean*1000|round/1000), groups \(.groups) (\(.skipped_groups) skipped: all rewards equal)"' | sed -n '1p;$p'

stage "5/5 after: the new checkpoint on the held-out tasks, the same seeds"
episodes "$after" 2 "$work/eval.tasks" "$out/after.msgpack"
rates "$out/after.msgpack" after >> "$work/rates"
sort "$work/rates" > "$out/rates.tsv"

printf '\n    clarifying questions on held-out tasks (first reply a question, no command)\n'
printf '    %-8s %-7s %9s %7s  %s\n' request when asked rate "95% wilson"
awk -F'\t' '{ printf "    %-8s %-7s %4d/%-4d %7.3f  [%.3f, %.3f]\n", $1, $2, $3, $4, $5, $6, $7 }' "$out/rates.tsv"
rec json "$out/metrics.msgpack" > "$work/metrics.json"
jq -R -s --arg reward "$reward" --arg judge "$judge" --argjson pg_steps "$pg_steps" --argjson k "$k" \
  --slurpfile m "$work/metrics.json" '
  {judge: $judge, reward: $reward, samples: $k, pg_steps: $pg_steps,
   reward_mean: $m[0].reward_mean, groups: $m[0].groups, skipped_groups: $m[0].skipped_groups,
   rates: (split("\n") | map(select(length > 0) | split("\t")
           | {expect: .[0], when: .[1], asked: (.[2]|tonumber), n: (.[3]|tonumber),
              rate: (.[4]|tonumber), lo: (.[5]|tonumber), hi: (.[6]|tonumber)}))}' \
  "$out/rates.tsv" > "$out/reward.json"
printf '\n%s\n' "$out/reward.json"
