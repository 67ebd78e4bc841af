#!/bin/sh
# teach-sweep.sh — what `make teach-sweep` runs: the weight of a teach term
# (train-step --objective pg,distill:W, or with SWEEP_TERM=topk the topk
# term, pg,distill:DEMO_DISTILL,topk:W with teach --topk DEMO_TOPK) chosen
# on the training split alone.
#
#   pipelines/teach-sweep.sh [OUTDIR]       (default: out/teach-sweep)
#
# The bootstrap is the demo's, as in ablate.sh (pipelines/demo.sh stages 1,
# 5 and 6, in OUTDIR/base; or SWEEP_BASE, the base/ of an ablate.sh run).
# For each weight of SWEEP_WEIGHTS, and the reward arm (GRPO alone, weight
# 0: --no-teach), SWEEP_ITERS iterations of inner-loop.sh with the demo's
# settings under each seed of SWEEP_SEEDS (iteration i of seed s draws its
# tasks, samples and batches with seed 1000 * s + i, the same for every
# weight), each followed by an evaluation on SWEEP_EVAL training tasks
# (the first by id; eval.sh on them relabelled, sampling seed 7, which no
# iteration samples with).  The held-out split plays no part.  The weight
# whose mean final pass rate on those training tasks is highest is chosen;
# a tie goes to the first in SWEEP_WEIGHTS.
#
# Environment: SWEEP_TERM (distill or topk; distill), SWEEP_WEIGHTS
# ("0.1 0.3 1"), SWEEP_SEEDS ("1"), SWEEP_ITERS
# (3), SWEEP_EVAL (160), SWEEP_BASE; DEMO_TASKS (80), DEMO_SAMPLES (4),
# DEMO_EVAL_SAMPLES (1), DEMO_LR (1e-4), DEMO_STEPS (8), DEMO_MODEL,
# DEMO_DRILLS_MAX, DEMO_SFT_STEPS, and for topk DEMO_DISTILL and DEMO_TOPK:
# as in demo.sh.  FW_BIN names the tools' directory.
#
# Outputs in OUTDIR: sweep.json
#   {"term": T, "seeds": [..], "iterations": N, "eval_tasks": M, "boot": X,
#    "arms": [{"weight": W, "eval": [[per iteration] per seed], "final": F,
#              "credited": C, "failing": K}, ..] (the reward arm first,
#    weight 0), "chosen": W}
# (boot: the bootstrap's pass rate on those training tasks, iteration 0 of
# every curve; final: the mean over the seeds of the last iteration's pass
# rate; credited and failing: teach's counts summed over the iterations),
# stats.jsonl (per arm, seed and iteration: iter-stats.sh's line and the
# pass rate), table.txt (what is printed), sweep.log.  A finished stage is
# not redone.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-out/teach-sweep}
FW_BIN=${FW_BIN:-$here/bin}
PATH=$FW_BIN:$PATH
export PATH FW_BIN
weights=${SWEEP_WEIGHTS:-0.1 0.3 1}
term=${SWEEP_TERM:-distill}
case $term in distill|topk) ;; *) echo "teach-sweep: SWEEP_TERM: distill or topk, not '$term'" >&2; exit 2 ;; esac
. "$here/pipelines/teach-args.sh"
# an arm's directory: w0 (the reward arm), wW (distill) or topkW
arm_dir() { if [ "$1" = 0 ] || [ $term = distill ]; then echo "w$1"; else echo "topk$1"; fi; }
seeds=${SWEEP_SEEDS:-1}
iters=${SWEEP_ITERS:-3}
neval=${SWEEP_EVAL:-160}
ntasks=${DEMO_TASKS:-80}
k=${DEMO_SAMPLES:-4}
ek=${DEMO_EVAL_SAMPLES:-1}
lr=${DEMO_LR:-1e-4}
steps=${DEMO_STEPS:-8}
[ "$iters" -ge 1 ] 2> /dev/null || { echo "teach-sweep: SWEEP_ITERS must be 1 or more" >&2; exit 2; }
[ "$neval" -ge 1 ] 2> /dev/null || { echo "teach-sweep: SWEEP_EVAL must be 1 or more" >&2; exit 2; }
[ -n "$weights" ] || { echo "teach-sweep: SWEEP_WEIGHTS is empty" >&2; exit 2; }
for w in $weights; do
  # a weight train-step's --objective reads: a positive decimal number
  case $w in
    *[!0-9.]* | *.*.* | . | '') echo "teach-sweep: SWEEP_WEIGHTS: want positive numbers, not '$w'" >&2; exit 2 ;;
  esac
  awk -v w="$w" 'BEGIN { exit !(w > 0) }' || { echo "teach-sweep: SWEEP_WEIGHTS: want positive numbers, not '$w'" >&2; exit 2; }
done
for s in $seeds; do
  [ "$s" -ge 1 ] 2> /dev/null || { echo "teach-sweep: SWEEP_SEEDS: want positive integers, not '$s'" >&2; exit 2; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/sweep.log
t0=$(date +%s)
say() { printf '== [%ss] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }

base=${SWEEP_BASE:-$out/base}
if [ -s "$base/boot/ckpt" ]; then
  say "bootstrap: $(cat "$base/boot/ckpt") (made by an earlier run)"
else
  say "bootstrap (demo.sh stages 1, 5, 6 in $base)"
  DEMO_QUICK=1 DEMO_UPTO=6 "$here/pipelines/demo.sh" "$base" >> "$log" 2>&1 \
    || { echo "teach-sweep: the bootstrap failed (see $log)" >&2; tail -20 "$log" >&2; exit 1; }
fi
tasks=$base/drills/tasks.msgpack store=$base/drills/store.git
boot=$(cat "$base/boot/ckpt")

# the training tasks the choice is made on, as eval.sh takes them
if [ ! -s "$out/train-eval.msgpack" ]; then
  rec json "$tasks" | jq -s -c --argjson n "$neval" \
    '[.[] | select(.split == "train")] | sort_by(.id) | .[:$n][] | .split = "eval"' \
    | rec from-json > "$out/train-eval.tmp"
  mv "$out/train-eval.tmp" "$out/train-eval.msgpack"
fi
m=$(rec count "$out/train-eval.msgpack")
[ "$m" -ge 1 ] || { echo "teach-sweep: no training task to choose on" >&2; exit 1; }
evaluate() { # CKPT DIR
  [ -s "$2/pass.json" ] && return 0
  "$here/pipelines/eval.sh" -c "$1" -t "$out/train-eval.msgpack" -s "$store" -o "$2" \
    --samples "$ek" --context 80 --seed 7 >> "$log" 2>&1 \
    || { echo "teach-sweep: evaluation in $2 failed (see $log)" >&2; exit 1; }
}
evaluate "$boot" "$out/boot-eval"
b0=$(jq .pass "$out/boot-eval/pass.json")
say "bootstrap on $m training tasks: $b0"

: > "$out/stats.jsonl"
for i in $(seq 1 "$iters"); do
  for s in $seeds; do
    for w in 0 $weights; do
      if [ "$w" = 0 ]; then
        args=--no-teach
      elif [ $term = distill ]; then
        args="--objective pg,distill:$w"
      else
        args=$(DEMO_TOPK_WEIGHT=$w DEMO_TOPK=${DEMO_TOPK:-8} teach_args) || exit 2
      fi
      a=$(arm_dir "$w")
      if [ "$i" = 1 ]; then ck=$boot; else ck=$(cat "$out/$a-s$s/iter-$(( i - 1 ))/ckpt"); fi
      d=$out/$a-s$s/iter-$i
      if [ ! -s "$d/ckpt" ]; then
        rm -rf "$d"
        "$here/pipelines/inner-loop.sh" -c "$ck" -t "$tasks" -s "$store" -o "$d" \
          --seed $(( 1000 * s + i )) --samples "$k" --tasks "$ntasks" --lr "$lr" --steps "$steps" \
          --context 80 $args >> "$log" 2>&1 \
          || { echo "teach-sweep: weight $w, seed $s, iteration $i failed (see $log)" >&2; tail -20 "$log" >&2; exit 1; }
      fi
      evaluate "$(cat "$d/ckpt")" "$d/eval"
      "$here/pipelines/iter-stats.sh" "$d" | jq -c --argjson w "$w" --argjson s "$s" --argjson i "$i" \
        --slurpfile e "$d/eval/pass.json" '{weight: $w, seed: $s, iter: $i, eval: $e[0].pass} + .' \
        >> "$out/stats.jsonl"
    done
  done
  say "iteration $i: $(jq -rs --argjson i "$i" \
    '[.[] | select(.iter == $i) | "w\(.weight) s\(.seed) \(.eval * 1000 | round / 1000)"] | join(", ")' \
    "$out/stats.jsonl")"
done

jq -s --arg term $term --argjson b0 "$b0" --argjson n "$iters" --argjson m "$m" \
  --argjson seeds "[$(echo $seeds | tr ' ' ',')]" --argjson ws "[0,$(echo $weights | tr ' ' ',')]" '
  . as $all
  | {term: $term, seeds: $seeds, iterations: $n, eval_tasks: $m, boot: $b0,
     arms: [$ws[] as $w
       | {weight: $w,
          eval: [$seeds[] as $s | [$b0] + [$all[] | select(.weight == $w and .seed == $s) | .eval]]}
       | .final = ([.eval[][-1]] | add / length)
       | .credited = ([$all[] | select(.weight == $w) | .credited // 0] | add)
       | .failing = ([$all[] | select(.weight == $w) | .failing // 0] | add)]}
  | .chosen = (reduce (.arms[] | select(.weight > 0)) as $a (null;
      if . == null or $a.final > .final then $a else . end) | .weight)' \
  "$out/stats.jsonl" > "$out/sweep.json.tmp"
mv "$out/sweep.json.tmp" "$out/sweep.json"
jq -r '
  def r3: . * 1000 | round / 1000 | tostring;
  "weight\tfinal pass (train tasks)\tper iteration (mean over seeds)\tcredited/failing",
  (.arms[] | [(if .weight == 0 then "0 (reward only)" else (.weight | tostring) end), (.final | r3),
     ([range(0; .eval[0] | length) as $i | [.eval[][$i]] | add / length | r3] | join(" ")),
     (if .weight == 0 then "-" else "\(.credited)/\(.failing)" end)] | @tsv)' \
  "$out/sweep.json" | column -t -s "$(printf '\t')" > "$out/table.txt"
jq -r '"chosen on \(.eval_tasks) training tasks: \(.term) weight \(.chosen) (bootstrap \(.boot * 1000 | round / 1000))"' \
  "$out/sweep.json" >> "$out/table.txt"
cat "$out/table.txt"
