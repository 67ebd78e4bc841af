#!/bin/sh
# ablate.sh — what `make learn-ablate` runs: does teach's textual feedback
# speed learning?  One bootstrap, then the demo's inner loop twice from it,
# with teach (GRPO + teach's credit) and without (GRPO alone, the same
# rollouts' rewards), each under several training seeds.
#
#   pipelines/ablate.sh [OUTDIR]       (default: out/ablate)
#
# The bootstrap is the demo's (pipelines/demo.sh stages 1, 5 and 6, in
# OUTDIR/base); each arm and seed runs DEMO_ITERS iterations of
# inner-loop.sh with the demo's settings into OUTDIR/ARM-sSEED/iter-N (the
# iteration's seed 1000 * SEED + N draws its tasks, its samples and its
# batches, the same in both arms), each followed by the held-out eval
# (eval.sh, sampling seed 1, as the demo's table).  Iteration 0 is the
# bootstrap's eval.  The loop goes iteration by iteration over every seed
# and arm.
#
# ABLATE_ARMS adds more arms: route, teach's credit as in the teach arm,
# with train-step --route (a failed rollout that has credit is trained by
# the teacher's terms alone, the successes by pg: SRPO's routing, the guard
# against collapse it proposes); topk, the teach arm with the topk term
# (the hinted teacher's top DEMO_TOPK tokens, 8 unless set, at weight
# DEMO_TOPK_WEIGHT; DEMO_TOPK_FIRST: teach-args.sh); teacher, the teach
# arm with another checkpoint as the teacher (ABLATE_TEACHER, a checkpoint
# directory of the same tokenizer: a stronger model reading the hints for
# the policy, where the teach arm's teacher is the policy itself).
#
# Environment: ABLATE_SEEDS (training seeds, "1 2 3"); ABLATE_ARMS (the
# arms, "teach reward"; route, topk and teacher add theirs); ABLATE_TEACHER; DEMO_ITERS (5),
# DEMO_TASKS (80), DEMO_SAMPLES (4), DEMO_EVAL_SAMPLES (1), DEMO_LR (1e-4),
# DEMO_STEPS (8), DEMO_DISTILL (0.1), DEMO_TOPK, DEMO_TOPK_WEIGHT,
# DEMO_TOPK_FIRST, DEMO_MODEL, DEMO_DRILLS_MAX,
# DEMO_SFT_STEPS: as in demo.sh.
#
# Outputs in OUTDIR: ablate.json
#   {"seeds": [..], "iterations": N,
#    "arms": {"teach": {"eval": [[per iteration] per seed]}, "reward": {...}},
#    (and "route", "topk": {...} when they ran)
#    "spread": X, "teach_ahead": true|false, "iters_to_match": K}
# (spread: the pooled seed-to-seed standard deviation of the final pass
# rate, sqrt of the mean of the two arms' sample variances; teach_ahead:
# the teach arm's mean final pass rate beats the reward arm's by more than
# spread; iters_to_match: the first iteration at which the teach arm's mean
# reaches the reward arm's final mean, or null; all three from the teach
# and reward arms), stats.json (per arm, seed
# and iteration: iter-stats.sh's line, the eval pass rate), table.txt (what
# is printed), ablate.png (both curves, mean and seed-to-seed range;
# gnuplot), ablate.log.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-out/ablate}
FW_BIN=${FW_BIN:-$here/bin}
PATH=$FW_BIN:$PATH
export PATH FW_BIN
seeds=${ABLATE_SEEDS:-1 2 3}
arms=${ABLATE_ARMS:-teach reward}
iters=${DEMO_ITERS:-5}
ntasks=${DEMO_TASKS:-80}
k=${DEMO_SAMPLES:-4}
ek=${DEMO_EVAL_SAMPLES:-1}
lr=${DEMO_LR:-1e-4}
steps=${DEMO_STEPS:-8}
. "$here/pipelines/teach-args.sh"
# the teach arm never has the topk term (DEMO_TOPK is the topk arm's)
teach_loop=$(DEMO_TOPK=0 teach_args) || exit 2
topk_loop=$(DEMO_TOPK=${DEMO_TOPK:-8} teach_args) || exit 2
case " ${ABLATE_ARMS:-} " in
  *" topk "*) case $topk_loop in *--topk*) ;; *) echo "ablate: the topk arm needs DEMO_TOPK and DEMO_TOPK_WEIGHT above 0" >&2; exit 2 ;; esac ;;
esac
case " ${ABLATE_ARMS:-} " in
  *" teacher "*) [ -n "${ABLATE_TEACHER:-}" ] && [ -s "${ABLATE_TEACHER:-}/config.json" ] \
    || { echo "ablate: the teacher arm needs ABLATE_TEACHER, a checkpoint directory" >&2; exit 2; } ;;
esac
[ "$iters" -ge 1 ] 2> /dev/null || { echo "ablate: DEMO_ITERS must be 1 or more" >&2; exit 2; }
case " $arms " in *" teach "*) ;; *) echo "ablate: ABLATE_ARMS must hold teach" >&2; exit 2 ;; esac
case " $arms " in *" reward "*) ;; *) echo "ablate: ABLATE_ARMS must hold reward" >&2; exit 2 ;; esac
for a in $arms; do
  case $a in teach|reward|route|topk|teacher) ;; *) echo "ablate: ABLATE_ARMS: teach, reward, route, topk or teacher, not '$a'" >&2; exit 2 ;; esac
done
for s in $seeds; do
  [ "$s" -ge 1 ] 2> /dev/null || { echo "ablate: ABLATE_SEEDS: want positive integers, not '$s'" >&2; exit 2; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/ablate.log
t0=$(date +%s)
say() { printf '== [%ss] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }

# a finished stage is not redone: a bootstrap with its eval, an iteration
# with its checkpoint, an eval with its pass.json (so a rerun goes on
# where a stopped one ended)
if [ -s "$out/base/boot/ckpt" ] && [ -s "$out/base/boot/eval-s1/pass.json" ]; then
  say "bootstrap: $(cat "$out/base/boot/ckpt") (made by an earlier run)"
else
  say "bootstrap (demo.sh stages 1, 5, 6 in $out/base)"
  DEMO_QUICK=1 DEMO_UPTO=6 "$here/pipelines/demo.sh" "$out/base" >> "$log" 2>&1 \
    || { echo "ablate: the bootstrap failed (see $log)" >&2; tail -20 "$log" >&2; exit 1; }
fi
tasks=$out/base/drills/tasks.msgpack store=$out/base/drills/store.git
boot=$(cat "$out/base/boot/ckpt")
b0=$(jq .pass "$out/base/boot/eval-s1/pass.json")

: > "$out/stats.jsonl"
# iteration by iteration over every seed and arm, so that a run stopped
# early has whole iterations of every arm, rerun with DEMO_ITERS at that
# many to make the outputs of what ran
for i in $(seq 1 "$iters"); do
  for s in $seeds; do
    for arm in $arms; do
      case $arm in
        teach) args=$teach_loop ;;
        route) args="$teach_loop --route" ;;
        topk) args=$topk_loop ;;
        teacher) args="$teach_loop --teacher builtin:$ABLATE_TEACHER" ;;
        *) args=--no-teach ;;
      esac
      if [ "$i" = 1 ]; then ck=$boot; else ck=$(cat "$out/$arm-s$s/iter-$(( i - 1 ))/ckpt"); fi
      d=$out/$arm-s$s/iter-$i
      if ! { [ -s "$d/ckpt" ] && [ -s "$d/eval/pass.json" ]; }; then
        "$here/pipelines/inner-loop.sh" -c "$ck" -t "$tasks" -s "$store" -o "$d" \
          --seed $(( 1000 * s + i )) --samples "$k" --tasks "$ntasks" --lr "$lr" --steps "$steps" \
          --context 80 $args >> "$log" 2>&1 \
          || { echo "ablate: $arm, seed $s, iteration $i failed (see $log)" >&2; tail -20 "$log" >&2; exit 1; }
        "$here/pipelines/eval.sh" -c "$(cat "$d/ckpt")" -t "$tasks" -s "$store" -o "$d/eval" \
          --samples "$ek" --context 80 --seed 1 >> "$log" 2>&1 \
          || { echo "ablate: eval of $arm, seed $s, iteration $i failed (see $log)" >&2; exit 1; }
      fi
      "$here/pipelines/iter-stats.sh" "$d" | jq -c --arg arm $arm --argjson s "$s" --argjson i "$i" \
        --slurpfile e "$d/eval/pass.json" '{arm: $arm, seed: $s, iter: $i, eval: $e[0].pass} + .' \
        >> "$out/stats.jsonl"
    done
  done
  say "iteration $i: $(jq -rs --argjson i "$i" \
    '[.[] | select(.iter == $i) | "\(.arm) s\(.seed) \(.eval * 1000 | round / 1000)"] | join(", ")' \
    "$out/stats.jsonl")"
done

# ablate.json in the issue's schema, from the stats
jq -s --argjson b0 "$b0" --argjson n "$iters" --argjson seeds "[$(echo $seeds | tr ' ' ',')]" \
  --argjson route "$(case " $arms " in *" route "*) echo true ;; *) echo false ;; esac)" \
  --argjson topk "$(case " $arms " in *" topk "*) echo true ;; *) echo false ;; esac)" \
  --argjson teacher "$(case " $arms " in *" teacher "*) echo true ;; *) echo false ;; esac)" '
  def curve($arm; $s): [$b0] + [.[] | select(.arm == $arm and .seed == $s) | .eval];
  def mean: add / length;
  def var: mean as $m | if length > 1 then (map((. - $m) * (. - $m)) | add) / (length - 1) else 0 end;
  . as $all
  | {seeds: $seeds, iterations: $n,
     arms: ({teach: {eval: [$seeds[] as $s | $all | curve("teach"; $s)]},
             reward: {eval: [$seeds[] as $s | $all | curve("reward"; $s)]}}
            + (if $route then {route: {eval: [$seeds[] as $s | $all | curve("route"; $s)]}} else {} end)
            + (if $topk then {topk: {eval: [$seeds[] as $s | $all | curve("topk"; $s)]}} else {} end)
            + (if $teacher then {teacher: {eval: [$seeds[] as $s | $all | curve("teacher"; $s)]}} else {} end))}
  | ([.arms.teach.eval[][-1]] ) as $ft | ([.arms.reward.eval[][-1]]) as $fr
  | .spread = ((($ft | var) + ($fr | var)) / 2 | sqrt)
  | .teach_ahead = (($ft | mean) - ($fr | mean) > .spread)
  | ($fr | mean) as $target
  | [range(0; $n + 1) as $i | (.arms.teach.eval | map(.[$i]) | mean) as $m | select($m >= $target) | $i] as $hit
  | .iters_to_match = (if ($hit | length) > 0 then $hit[0] else null end)' \
  "$out/stats.jsonl" > "$out/ablate.json.tmp"
mv "$out/ablate.json.tmp" "$out/ablate.json"
jq -s . "$out/stats.jsonl" > "$out/stats.json"

# the table: per iteration, each arm's mean and seed-to-seed standard
# deviation of the eval pass rate, the rollouts each used (the same tasks
# and samples), teach's credit (in the arms that have it) and each arm's
# entropy
jq -r -s --slurpfile a "$out/ablate.json" '
  def mean: if length > 0 then add / length else null end;
  def sd: mean as $m | if length > 1 then ((map((. - $m) * (. - $m)) | add) / (length - 1) | sqrt) else 0 end;
  def r3: if . == null then "-" else (. * 1000 | round / 1000 | tostring) end;
  def wm(f; n): ([.[] | select(n > 0) | f * n] | add) as $s | ([.[] | n] | add // 0) as $w
    | if $w > 0 then $s / $w else null end;
  . as $all | $a[0] as $A | ($A.arms | keys_unsorted) as $arms
  | [$arms[] | select(. != "reward")] as $taught
  | (["iter"] + [$arms[] | "\(.) eval (sd)"] + ["rollouts per arm"]
     + [$taught[] | "\(.): credited", "\(.): adv differ/rest"] + ["entropy " + ($arms | join("/"))] | @tsv),
    (range(0; $A.iterations + 1) as $i
     | [$all[] | select(.iter == $i)] as $row
     | def of($arm): [$row[] | select(.arm == $arm)];
     [$i] + [$arms[] as $arm | ($A.arms[$arm].eval | map(.[$i])) | "\(mean | r3) (\(sd | r3))"]
     + (if $i == 0 then ["-"] + [$taught[] | "-", "-"] + ["-"]
        else [[$arms[] as $arm | of($arm) | [.[].rollouts] | add] | unique | map(tostring) | join("/")]
             + [$taught[] as $arm | of($arm)
                | "\([.[].credited] | add // 0)/\([.[].failing] | add // 0)",
                  "\(wm(.differ; .n_differ) | r3)/\(wm(.rest; .n_rest) | r3)"]
             + [[$arms[] as $arm | of($arm) | [.[].entropy | select(. != null)] | mean | r3] | join("/")] end)
     | @tsv)' "$out/stats.jsonl" | column -t -s "$(printf '\t')" > "$out/table.txt"
jq -r '
  def mean: add / length;
  def r3: if . == null then "-" else (. * 1000 | round / 1000 | tostring) end;
  "(rollouts summed over the seeds, one figure when every arm used as many; credited: failing rollouts with per-token credit of those hinted; adv: the mean credit on the tokens that differ from a correct solution and on the rest)",
  "spread (pooled seed-to-seed sd of the final pass rate): \(.spread | r3), of the teach and reward arms",
  "final: teach \([.arms.teach.eval[][-1]] | mean | r3), reward \([.arms.reward.eval[][-1]] | mean | r3)"
    + (if .arms.route then ", route \([.arms.route.eval[][-1]] | mean | r3)" else "" end)
    + (if .arms.topk then ", topk \([.arms.topk.eval[][-1]] | mean | r3)" else "" end)
    + (if .arms.teacher then ", teacher \([.arms.teacher.eval[][-1]] | mean | r3)" else "" end) + ": "
    + (if .teach_ahead then "teach ahead by more than the spread" else "teach NOT ahead by more than the spread" end),
  "iterations for teach to reach the reward arm'"'"'s final mean: \(.iters_to_match // "never")"' \
  "$out/ablate.json" >> "$out/table.txt"
cat "$out/table.txt"

# the plot: mean of each arm, and its range over the seeds
jq -r '. as $A | range(0; .iterations + 1) as $i
  | [$i] + ([.arms.teach, .arms.reward, (.arms.route // .arms.teach), (.arms.topk // .arms.teach),
             (.arms.teacher // .arms.teach)]
            | map(.eval | map(.[$i]) | (add / length), min, max)) | @tsv' \
  "$out/ablate.json" > "$out/curves.tsv"
case " $arms " in
  *" route "*) route_plot=", '' using 1:9:10 with filledcurves lc rgb '#2ca02c' title 'teach, routed: seed range', '' using 1:8 with linespoints lw 2 lc rgb '#2ca02c' title 'teach, routed: mean'" ;;
  *) route_plot= ;;
esac
case " $arms " in
  *" topk "*) route_plot="$route_plot, '' using 1:12:13 with filledcurves lc rgb '#9467bd' title 'teach, top-k: seed range', '' using 1:11 with linespoints lw 2 lc rgb '#9467bd' title 'teach, top-k: mean'" ;;
esac
case " $arms " in
  *" teacher "*) route_plot="$route_plot, '' using 1:15:16 with filledcurves lc rgb '#ff7f0e' title 'another teacher: seed range', '' using 1:14 with linespoints lw 2 lc rgb '#ff7f0e' title 'another teacher: mean'" ;;
esac
if command -v gnuplot > /dev/null 2>&1; then
  gnuplot >> "$log" 2>&1 <<GP || echo "ablate: plotting failed (see $log)" >&2
set terminal png size 720,420
set output '$out/ablate.png'
set xlabel 'iteration (0: bootstrap)'
set ylabel 'held-out eval pass rate'
set grid
set xtics 1
set key top left opaque box
set style fill transparent solid 0.2 noborder
plot '$out/curves.tsv' using 1:3:4 with filledcurves lc rgb '#1f77b4' title 'with teach: seed range', \
     '' using 1:2 with linespoints lw 2 lc rgb '#1f77b4' title 'with teach: mean', \
     '' using 1:6:7 with filledcurves lc rgb '#d62728' title 'reward only: seed range', \
     '' using 1:5 with linespoints lw 2 lc rgb '#d62728' title 'reward only: mean'$route_plot
GP
  [ -s "$out/ablate.png" ] && echo "plot: $out/ablate.png"
fi
say "done; outputs in $out"
