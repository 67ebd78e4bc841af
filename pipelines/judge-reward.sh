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
#                 --judge-only --reward JR_REWARD; then, for each setting
#                 of the sweep JR_SWEEP (the loss's normalisation and the
#                 learning rate), train-step --objective pg on the graded
#                 rollouts and rollout of the result on the training tasks
#                 (the seeds of the rollouts it learnt from); the setting
#                 whose first moves are right most often on the training
#                 tasks (the mean over the two kinds of the rate of the
#                 move each wants: a question on ask, a command on act) is
#                 chosen.  The held-out tasks play no part in the choice.
#                 A null arm trains the chosen setting on the same rollouts
#                 with each group's rewards rotated among its episodes (the
#                 same rewards, none for the move it paid): what the steps
#                 do without the judge's signal.
#   5. after      rollout of the chosen checkpoint (and of the null arm's)
#                 on the held-out tasks, the same seeds as before
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
# JR_PG_STEPS (16), JR_SWEEP ("token:3e-3 token:1e-3 token:3e-4 seq:3e-3
# seq:1e-3 seq:3e-4": NORM:LR pairs, train-step's --norm and --lr),
# JR_NULL (1: run the null arm; 0: not), JR_JOBS (2).  FW_BIN names the
# tools' directory.
# A stage whose output is in OUTDIR is not run again (the task-mutate
# tasks, boot/ckpt, before, train and graded); the sweep and after always
# are.  Outputs in OUTDIR: tasks.msgpack, boot/, before.msgpack,
# train.msgpack, graded.msgpack, sweep/NORM-LR/ (each setting's pg/,
# metrics.msgpack and train-after.msgpack), sweep.tsv (norm, lr, then
# asked and n on the training tasks of each kind, ask then act, and the
# score), pg (a link to the chosen setting's run), metrics.msgpack (its
# metrics), null/ (the null arm: its graded.msgpack, pg/ and
# metrics.msgpack), after.msgpack, null-after.msgpack,
# rates.tsv (kind, when, asked, n, rate, lo, hi; when is before, after or
# null) and reward.json.
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
sweep=${JR_SWEEP:-token:3e-3 token:1e-3 token:3e-4 seq:3e-3 seq:1e-3 seq:3e-4}
null=${JR_NULL:-1}
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
# pg NORM LR GRADED DIR: the iteration's training step into DIR
pg() {
  rm -rf "$4/pg"
  # an episode cut at the context ends at its last position: --truncate
  # keeps the positions it has (the first reply, which the judge read,
  # among them)
  run train-step --truncate --ckpt "$boot" --out "$4/pg" --objective pg --steps "$pg_steps" \
    --batch-size "$bs" --norm "$1" --lr "$2" --warmup 0 --schedule constant --seed 1 \
    -o "$4/metrics.msgpack" "$3"
}
# score FILE: the mean over the two kinds of the rate of the right first
# move (a question on an ask task, none on an act task), with the counts
# behind it: "ask_asked ask_n act_asked act_n score"
score() {
  rates "$1" x | awk -F'\t' '{ a[$1] = $3; n[$1] = $4 }
    END { if (!n["ask"] || !n["act"]) exit 1
          printf "%d %d %d %d %.4f\n", a["ask"], n["ask"], a["act"], n["act"],
                 (a["ask"] / n["ask"] + 1 - a["act"] / n["act"]) / 2 }'
}
rm -rf "$out/sweep" "$out/null" "$out/pg" "$out/after.msgpack" "$out/null-after.msgpack"
: > "$out/sweep.tsv"
s0=$(score "$out/train.msgpack") || { echo "judge-reward: no rollouts of one kind" >&2; exit 1; }
s0=${s0##* }
printf '    sweep on the training tasks (right first moves, mean of the two kinds; before: %.3f)\n' "$s0"
best= best_s=-1
for set in $sweep; do
  norm=${set%%:*} lr=${set#*:}
  case $norm in token|seq) ;; *) echo "judge-reward: JR_SWEEP: $set: not NORM:LR with NORM token or seq" >&2; exit 2 ;; esac
  d=$out/sweep/$norm-$lr
  mkdir -p "$d"
  pg "$norm" "$lr" "$out/graded.msgpack" "$d"
  episodes "$(readlink -f "$d/pg/latest")" 1 "$work/train.tasks" "$d/train-after.msgpack"
  line=$(score "$d/train-after.msgpack") || { echo "judge-reward: no rollouts of one kind" >&2; exit 1; }
  set -- $line
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$norm" "$lr" "$1" "$2" "$3" "$4" "$5" >> "$out/sweep.tsv"
  printf '    --norm %-5s --lr %-6s asked on ask %3d/%-3d on act %3d/%-3d  right %.3f\n' \
    "$norm" "$lr" "$1" "$2" "$3" "$4" "$5"
  # the first best wins a tie: the sweep's order breaks it
  if awk -v s="$5" -v b="$best_s" 'BEGIN { exit !(s > b) }'; then best=$set best_s=$5; fi
done
[ -n "$best" ] || { echo "judge-reward: JR_SWEEP is empty" >&2; exit 2; }
bnorm=${best%%:*} blr=${best#*:}
ln -s "sweep/$bnorm-$blr/pg" "$out/pg"
cp "$out/sweep/$bnorm-$blr/metrics.msgpack" "$out/metrics.msgpack"
printf '    chosen: --norm %s --lr %s\n' "$bnorm" "$blr"
rec json "$out/metrics.msgpack" | jq -r '"    step \(.step): loss_pg \(.loss_pg*10000|round/10000), reward_mean \(.reward_mean*1000|round/1000), groups \(.groups) (\(.skipped_groups) skipped: all rewards equal)"' | sed -n '1p;$p'
after=$(readlink -f "$out/pg/latest")
if [ "$null" = 1 ]; then
  # each group's rewards rotated by one among its episodes, in the order
  # of the file: the same rewards and groups, with no tie to the move
  rec json "$out/graded.msgpack" | jq -s -c 'group_by(.task.id)
    | map(. as $g | [range(0; length)] | map(. as $i | $g[$i]
          | .grade.reward = $g[($i + 1) % ($g | length)].grade.reward)) | .[][]' \
    | rec from-json > "$work/null.msgpack"
  mkdir -p "$out/null"
  mv "$work/null.msgpack" "$out/null/graded.msgpack"
  pg "$bnorm" "$blr" "$out/null/graded.msgpack" "$out/null"
fi

stage "5/5 after: the chosen checkpoint on the held-out tasks, the same seeds"
episodes "$after" 2 "$work/eval.tasks" "$out/after.msgpack"
rates "$out/after.msgpack" after >> "$work/rates"
if [ "$null" = 1 ]; then
  episodes "$(readlink -f "$out/null/pg/latest")" 2 "$work/eval.tasks" "$out/null-after.msgpack"
  rates "$out/null-after.msgpack" null >> "$work/rates"
fi
sort "$work/rates" > "$out/rates.tsv"

printf '\n    clarifying questions on held-out tasks (first reply a question, no command)\n'
printf '    %-8s %-7s %9s %7s  %s\n' request when asked rate "95% wilson"
awk -F'\t' '{ printf "    %-8s %-7s %4d/%-4d %7.3f  [%.3f, %.3f]\n", $1, $2, $3, $4, $5, $6, $7 }' "$out/rates.tsv"
rec json "$out/metrics.msgpack" > "$work/metrics.json"
jq -R -s 'split("\n") | map(select(length > 0) | split("\t")
  | {norm: .[0], lr: (.[1]|tonumber), ask_asked: (.[2]|tonumber), ask_n: (.[3]|tonumber),
     act_asked: (.[4]|tonumber), act_n: (.[5]|tonumber), right: (.[6]|tonumber)})' \
  "$out/sweep.tsv" > "$work/sweep.json"
jq -R -s --arg reward "$reward" --arg judge "$judge" --argjson pg_steps "$pg_steps" --argjson k "$k" \
  --arg norm "$bnorm" --argjson lr "$blr" --argjson right0 "$s0" \
  --slurpfile m "$work/metrics.json" --slurpfile sw "$work/sweep.json" '
  {judge: $judge, reward: $reward, samples: $k, pg_steps: $pg_steps,
   chosen: {norm: $norm, lr: $lr}, right_before: $right0, sweep: $sw[0],
   reward_mean: $m[0].reward_mean, groups: $m[0].groups, skipped_groups: $m[0].skipped_groups,
   rates: (split("\n") | map(select(length > 0) | split("\t")
           | {expect: .[0], when: .[1], asked: (.[2]|tonumber), n: (.[3]|tonumber),
              rate: (.[4]|tonumber), lo: (.[5]|tonumber), hi: (.[6]|tonumber)}))}
  | . as $r
  | def rate(e; w): [$r.rates[] | select(.expect == e and .when == w) | .rate][0];
    def gap(w): if rate("ask"; w) == null or rate("act"; w) == null then null
                else rate("ask"; w) - rate("act"; w) end;
    .gap = {before: gap("before"), after: gap("after"), null: gap("null")}' \
  "$out/rates.tsv" > "$out/reward.json"
jq -r '"    the gap, rate on ask minus rate on act: before \(.gap.before*1000|round/1000), after \(.gap.after*1000|round/1000)" + (if .gap.null == null then "" else ", null arm \(.gap.null*1000|round/1000)" end)' "$out/reward.json"
printf '\n%s\n' "$out/reward.json"
