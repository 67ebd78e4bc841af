#!/usr/bin/env bash
# demo.sh — what `make demo` runs: the whole flywheel on the embedded
# samples, the outer loop feeding a model that the inner loop then improves.
#
#   pipelines/demo.sh [OUTDIR]          (default: out)
#
# Stages
#   1. outer loop   samples/feedback -> traj -> report, SFT set, eval candidates
#   2. tasks        samples/repos (textkit, tally) -> task-mutate -> tasks;
#                   one more from the billing sample's history (a fix whose
#                   production log and ops thread come with it)
#   3. grading      each task's own solution and an empty patch, graded in the
#                   clean room: the solution must earn reward 1, the empty
#                   patch 0
#   4. clean room   a command that tries the network and the host's files
#   5. drills       samples/drills: a repository of small documented
#                   functions -> task-mutate -> train and eval tasks
#   6. bootstrap    a small Llama-style model, SFT on the drills corpus and
#                   the outer loop's thumbs-up data; its eval pass rate under
#                   three sampling seeds (the noise)
#   7. inner loop   N iterations (DEMO_ITERS, 5): rollout (K samples per
#                   train task) -> grade -> teach -> train-step (GRPO +
#                   distill) -> eval on the held-out split
# Then a table per iteration (with teach's share of failing rollouts
# credited, its mean credit on the tokens that differ from a correct
# solution and on the rest, and the policy's entropy: iter-stats.sh), out/summary.json, and PNG plots (gnuplot).
#
# Environment: DEMO_ITERS (5), DEMO_ABLATE (teach: the inner loop without
# teach), DEMO_SFT_STEPS (750: the corpus's notes make it half again as
# long as it was at 500, so each plain drill is seen as often), DEMO_TASKS (80: train tasks per iteration at
# most, a share of the train split drawn from the iteration's seed),
# DEMO_SAMPLES (4), DEMO_EVAL_SAMPLES (1), DEMO_LR (1e-4), DEMO_STEPS
# (8: optimizer steps per iteration), DEMO_DISTILL (0.1: the weight of
# teach's credit against GRPO's), DEMO_TOPK, DEMO_TOPK_WEIGHT and
# DEMO_TOPK_FIRST (the topk term, off by default: teach-args.sh), DEMO_QUICK (1: skip
# stages 2-4), DEMO_UPTO (stop after that stage), DEMO_DRILLS_MAX (tasks made
# from the drills at most, 1000), DEMO_MODEL (the model's config,
# samples/models/drills-llama.json).  FW_BIN names the tools' directory (default bin/ beside this
# script).  The run and its stages are recorded in FW_RUNS (default
# $FW_STATE/runs.msgpack, FW_STATE ~/.local/state/flywheel; empty: none),
# so `make status` shows them (fw-cron(1)).
#
# Outputs in OUTDIR: outer-loop/, tasks.msgpack, graded.msgpack,
# drills/ (tasks.msgpack, store.git), model/, boot/, iter-N/ (see
# inner-loop.sh) with iter-N/eval/ (see eval.sh), summary.json, curve.tsv,
# eval.png, reward.png, loss.png, demo.log.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-out}
FW_BIN=${FW_BIN:-$here/bin}
PATH=$FW_BIN:$PATH
export PATH FW_BIN
PY=${PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || PY=python3
iters=${DEMO_ITERS:-5}
ablate=${DEMO_ABLATE:-}
sft_steps=${DEMO_SFT_STEPS:-750}
ntasks=${DEMO_TASKS:-80}
k=${DEMO_SAMPLES:-4}
ek=${DEMO_EVAL_SAMPLES:-1}
lr=${DEMO_LR:-1e-4}
steps=${DEMO_STEPS:-8}
. "$here/pipelines/teach-args.sh"
teach_loop=$(teach_args) || exit 2
quick=${DEMO_QUICK:-0}
upto=${DEMO_UPTO:-7}
dmax=${DEMO_DRILLS_MAX:-1000}
model=${DEMO_MODEL:-$here/samples/models/drills-llama.json}
[ -r "$model" ] || { echo "demo: DEMO_MODEL: cannot read '$model'" >&2; exit 2; }
case $ablate in ''|teach) ;; *) echo "demo: DEMO_ABLATE must be teach or empty" >&2; exit 2 ;; esac
[ "$iters" -ge 1 ] 2> /dev/null || { echo "demo: DEMO_ITERS must be 1 or more" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
# grading's workspaces on a tmpfs when there is one with room (fast-tmp.sh)
. "$here/pipelines/fast-tmp.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/fw-demo.XXXXXX")
log=$(realpath -m -s -- "$out/demo.log")
: > "$log"

# The runs log that `make status` reads (fw-cron(1)): every stage below
# and the inner loop's own stages leave a run record there under one run
# id, and the demo, unless fw-cron runs it, a closing "(run)" record.
# FW_RUNS= (set and empty) records nothing.
fw_prog=demo
. "$here/pipelines/cron/runlog.sh"
FW_RUNS=${FW_RUNS-${FW_STATE:-$HOME/.local/state/flywheel}/runs.msgpack}
own_run=
if [ -n "$FW_RUNS" ]; then
  FW_RUNS=$(realpath -m -s -- "$FW_RUNS")
  if ! mkdir -p -- "$(dirname "$FW_RUNS")" 2> /dev/null; then
    echo "demo: warning: cannot make the directory of the runs log $FW_RUNS: the run is not recorded" >&2
    FW_RUNS=
  elif [ -z "${FW_RUN_ID:-}" ]; then
    own_run=1
    FW_RUN_ID=demo-$(date -u +%Y%m%dT%H%M%SZ)-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
    FW_PIPELINE=demo
  fi
fi
export FW_RUNS FW_RUN_ID FW_PIPELINE
fw_clock; run_us0=$fw_us
demo_end() {
  local rc=$1 st=ok
  [ "$rc" = 0 ] || st=failed
  if [ -n "$own_run" ]; then
    fw_clock
    fw_log=$log fw_run_append "(run)" $st "$rc" "$run_us0" "$fw_us" -- "$0" "$out" || true
  fi
  rm -rf "$work" ${FW_FAST_TMP:+"$FW_FAST_TMP"}
}
trap 'demo_end $?' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

t0=$(date +%s)
stage() { printf '\n== [%ss] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
# run CMD ARG...: one stage, named by its command, into the demo's log
# (its record counts what CMD's -o OUT holds)
run() {
  local a p= o=
  for a in "$@"; do [ "$p" != -o ] || o=$a; p=$a; done
  "$here/pipelines/fw-stage" "${1##*/}" ${o:+-o "$o"} -- "$@" >> "$log" 2>&1 \
    || { echo "demo: failed: $*  (see $log)" >&2; tail -20 "$log" >&2; exit 1; }
}
# pipelines_eval ARGS: eval.sh on the drills' held-out split; prints its line
pipelines_eval() {
  "$here/pipelines/fw-stage" eval -- \
    "$here/pipelines/eval.sh" -t "$tasks" -s "$store" --samples "$ek" --context 80 "$@" 2>> "$log" \
    || { echo "demo: eval failed (see $log)" >&2; tail -20 "$log" >&2; exit 1; }
}

stage "1/7 outer loop: product feedback -> SFT data, eval candidates, A/B verdicts"
run "$here/pipelines/outer-loop.sh" -o "$out/outer-loop" \
  --private-eval "$here/samples/evals/private-eval.jsonl" --paired-by .meta.item \
  "$here/samples/feedback"
printf 'trajectories %s, SFT (thumbs-up) %s, eval candidates (thumbs-down) %s\n' \
  "$(rec count "$out/outer-loop/traj.msgpack")" \
  "$(rec count "$out/outer-loop/sft.msgpack")" \
  "$(rec count "$out/outer-loop/eval-candidates.msgpack")"
grep -E 'preferred|no verdict' "$out/outer-loop/report.txt" || true

if [ "$quick" != 1 ]; then
stage "2/7 tasks: remove a feature from each sample repository so that tests fail; a fix from a history"
for r in textkit tally; do
  cp -r "$here/samples/repos/$r" "$work/$r"
  "$here/samples/repos/commit.sh" "$work/$r"
done
store=$out/store.git
run task-mutate --test-cmd 'python3 -m pytest -q -p no:cacheprovider --junitxml=$FW_REPORT' \
  --store "$store" --strategy stub-body --strategy delete-feature --max 6 --seed 1 -j 2 \
  -o "$work/textkit.tasks" "$work/textkit"
run task-mutate --test-cmd 'make -s test' --report tap --store "$store" \
  --strategy stub-body --max 6 --seed 1 -j 2 -o "$work/tally.tasks" "$work/tally"
"$here/samples/repos/billing-history.sh" "$work/billing"
run task-mutate --strategy history --grep 'nightly import crash' --store "$store" \
  --test-cmd 'python3 -m pytest -q -p no:cacheprovider --continue-on-collection-errors --junitxml=$FW_REPORT' \
  --context "$here/samples/repos/billing-context" -o "$work/billing.tasks" "$work/billing"
cat "$work/textkit.tasks" "$work/tally.tasks" "$work/billing.tasks" > "$out/tasks.msgpack"
printf 'validated tasks: %s (by split: %s)\n' "$(rec count "$out/tasks.msgpack")" \
  "$(rec get .split "$out/tasks.msgpack" | sort | uniq -c | awk '{printf "%s %s ", $2, $1}')"
echo "one problem statement, as a policy sees it:"
rec head -n 1 "$out/tasks.msgpack" | rec get .prompt | sed 's/^/    /'
echo "a task from the billing sample's history (commit $(rec get .commit "$work/billing.tasks" | cut -c1-7), $(rec get .created "$work/billing.tasks")), as a policy sees it:"
rec get .prompt "$work/billing.tasks" | sed 's/^/    /'
echo "  and in /context, read-only beside the workspace, the log says:"
grep -h '^ValueError\|row 1377' "$here/samples/repos/billing-context/nightly-import.log" | sed 's/^/    /'

stage "3/7 grading in the clean room: the solution earns 1, an empty patch 0"
if command -v grade > /dev/null 2>&1; then
  # Rollouts made by hand until `rollout` exists: the task's own solution
  # and an empty patch, for every task.
  rec json "$out/tasks.msgpack" | while IFS= read -r t; do
    printf '%s\n' "$t" | jq -c '{kind:"rollout", id:(.id+"-sol"), v:1, task:(del(.solution)),
      policy:{backend:"oracle"}, sample:0, turns:[], patch:.solution}'
    printf '%s\n' "$t" | jq -c '{kind:"rollout", id:(.id+"-nil"), v:1, task:(del(.solution)),
      policy:{backend:"empty"}, sample:0, turns:[], patch:""}'
  done | rec from-json > "$work/rollouts.msgpack"
  run grade --store "$store" -j 2 -o "$out/graded.msgpack" "$work/rollouts.msgpack"
  rec json "$out/graded.msgpack" | jq -r '[.policy.backend, .grade.reward] | @tsv' \
    | sort | uniq -c | awk '{printf "%-7s reward %s: %s rollouts\n", $2, $3, $1}'
else
  echo "grade is not built yet: skipped"
fi

stage "4/7 clean room: no network, no host files, writes only in the workspace"
mkdir -p "$work/ws"
fw-run --workspace "$work/ws" --timeout 10 -- sh -c '
  python3 -c "import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=2)" 2>/dev/null \
    && echo "network: reachable" || echo "network: blocked"
  cat /root/.bashrc > /dev/null 2>&1 && echo "host home: readable" || echo "host home: hidden"
  touch /usr/x 2>/dev/null && echo "/usr: writable" || echo "/usr: read-only"
  touch ./ok && echo "workspace: writable"' 2>> "$log" | jq -r '.stdout' | sed '/^$/d; s/^/    /'

fi

[ "$upto" -ge 5 ] || { stage "stopped after stage $upto (DEMO_UPTO)"; exit 0; }
stage "5/7 drills: a repository of small documented functions -> train and eval tasks"
# made once per version of the generator (a finished stage is not redone)
stamp="$(cksum < "$here/samples/drills/gen.py") $dmax"
if [ "$(cat "$out/drills/stamp" 2> /dev/null)" != "$stamp" ] || [ ! -s "$out/drills/tasks.msgpack" ]; then
  rm -rf "$out/drills" && mkdir -p "$out/drills"
  run "$PY" "$here/samples/drills/gen.py" repo "$out/drills/repo"
  run "$here/samples/repos/commit.sh" "$out/drills/repo"
  run task-mutate --test-cmd 'python3 -S run_tests.py' --store "$out/drills/store.git" \
    --strategy stub-body --max "$dmax" --seed 1 -j 2 --split train=0.5,eval=0.5,private=0 \
    -o "$out/drills/tasks.msgpack.tmp" "$out/drills/repo"
  mv "$out/drills/tasks.msgpack.tmp" "$out/drills/tasks.msgpack"
  printf '%s\n' "$stamp" > "$out/drills/stamp"
else
  echo "(made by an earlier run: $out/drills)"
fi
printf 'tasks: %s (by split: %s)\n' "$(rec count "$out/drills/tasks.msgpack")" \
  "$(rec get .split "$out/drills/tasks.msgpack" | sort | uniq -c | awk '{printf "%s %s ", $2, $1}')"
rec head -n 1 "$out/drills/tasks.msgpack" | rec get .prompt | sed -n '/^Signature/,/^These/p' | sed '$d; s/^/    /'
store=$out/drills/store.git
tasks=$out/drills/tasks.msgpack

stage "6/7 bootstrap: a small Llama-style model, SFT on the drills corpus and thumbs-up data"
rm -rf "$out/model" "$out/boot" "$out"/iter-*
mkdir -p "$out/boot"
run ckpt init "$model" "$out/model" --seed 1
ckpt info "$out/model" | grep -E 'architecture|parameters|layers' | sed 's/^/    /'
"$PY" "$here/samples/drills/gen.py" corpus | rec from-json > "$work/corpus.msgpack"
# first the thumbs-up chats, cut to the model's positions (those whose first
# answer starts beyond them are skipped), then the drills corpus
rec head -n 40 "$out/outer-loop/sft.msgpack" > "$work/thumbs-up.msgpack"
run train-step --ckpt "$out/model" --out "$out/boot/run" --objective sft --steps 10 \
  --batch-size 8 --lr 3e-4 --warmup 2 --truncate --skip-bad --seed 1 \
  -o "$out/boot/metrics-chat.msgpack" "$work/thumbs-up.msgpack"
run train-step --ckpt "$out/boot/run/latest" --out "$out/boot/run" --objective sft \
  --steps "$sft_steps" --batch-size 32 --lr 3e-3 --warmup 10 --decay-steps "$sft_steps" \
  --schedule cosine --seed 1 -o "$out/boot/metrics.msgpack" "$work/corpus.msgpack"
readlink -f "$out/boot/run/latest" > "$out/boot/ckpt"
rec json "$out/boot/metrics.msgpack" | jq -r '"    step \(.step): loss \(.loss*1000|round/1000), \(.tok_per_s|round) trained tokens/s"' \
  | sed -n '1p;$p'
for s in 1 2 3; do
  printf '    eval, sampling seed %s: ' "$s"
  pipelines_eval -c "$(cat "$out/boot/ckpt")" -o "$out/boot/eval-s$s" --seed "$s"
done

[ "$upto" -ge 7 ] || { stage "stopped after stage $upto (DEMO_UPTO)"; exit 0; }
if [ -n "$ablate" ]; then
  loop_args=--no-teach via="(no teach) "
else
  loop_args=$teach_loop via="teach -> "
fi
stage "7/7 inner loop: $iters iterations of rollout -> grade -> ${via}train-step -> eval"
ck=$(cat "$out/boot/ckpt")
printf '%-5s %-12s %-22s %-9s %-9s %-6s %-10s %-14s %s\n' iter "train reward" "eval pass [95% CI]" \
  "loss" "tok/s" "time" "credited" "adv diff/rest" "entropy"
for i in $(seq 1 "$iters"); do
  ti=$(date +%s)
  d=$out/iter-$i
  "$here/pipelines/inner-loop.sh" -c "$ck" -t "$tasks" -s "$store" -o "$d" --seed "$i" \
    --samples "$k" --tasks "$ntasks" --lr "$lr" --steps "$steps" --context 80 \
    $loop_args >> "$log" 2>&1 \
    || { echo "demo: iteration $i failed (see $log)" >&2; tail -20 "$log" >&2; exit 1; }
  ck=$(cat "$d/ckpt")
  pipelines_eval -c "$ck" -o "$d/eval" --seed 1 > /dev/null
  tr=$(rec json "$d/graded.msgpack" | jq -s '[.[].grade.reward] | add / length')
  "$here/pipelines/iter-stats.sh" "$d" > "$d/stats.json"
  rec json "$d/metrics.msgpack" | jq -s --argjson i "$i" --argjson tr "$tr" \
    --slurpfile e "$d/eval/pass.json" --slurpfile st "$d/stats.json" --argjson t "$(( $(date +%s) - ti ))" '
    {iter: $i, train_reward: $tr, eval: $e[0].pass, lo: $e[0].lo, hi: $e[0].hi,
     loss: ([.[].loss] | add / length), tok_per_s: ([.[].tok_per_s] | add / length), seconds: $t}
    + ($st[0] | {failing, credited, credited_share, adv_differ: .differ, adv_rest: .rest, entropy})' \
    > "$d/row.json"
  jq -r 'def r3: if . == null then "-" else .*1000|round/1000 end;
    "\(.iter)     \(.train_reward*1000|round/1000)        \(.eval*1000|round/1000) [\(.lo*1000|round/1000), \(.hi*1000|round/1000)]   \(.loss*10000|round/10000)   \(.tok_per_s|round)      \(.seconds)s \(.credited)/\(.failing) \(.adv_differ|r3)/\(.adv_rest|r3) \(.entropy|r3)"' "$d/row.json" \
    | awk '{printf "%-5s %-12s %-22s %-9s %-9s %-6s %-10s %-14s %s\n", $1, $2, $3 " " $4 " " $5, $6, $7, $8, $9, $10, $11}'
done
# the share of failing rollouts that teach gave per-token credit
jq -rs '([.[].failing] | add) as $f | ([.[].credited] | add) as $c
  | if $f > 0 then "teach gave per-token credit to \($c) of \($f) failing rollouts (\($c * 1000 / $f | round / 10)%)"
    else "teach hinted no failing rollout" end' $(for i in $(seq 1 "$iters"); do echo "$out/iter-$i/row.json"; done)

# the last checkpoint under the other two sampling seeds
for s in 2 3; do
  pipelines_eval -c "$ck" -o "$out/iter-$iters/eval-s$s" --seed "$s" > /dev/null
done
{ for s in 1 2 3; do jq -c '. + {kind: "boot"}' "$out/boot/eval-s$s/pass.json"; done
  jq -c '. + {kind: "final"}' "$out/iter-$iters/eval/pass.json"
  for s in 2 3; do jq -c '. + {kind: "final"}' "$out/iter-$iters/eval-s$s/pass.json"; done
  for i in $(seq 1 "$iters"); do jq -c '. + {kind: "row"}' "$out/iter-$i/row.json"; done
} > "$work/parts.json"
jq -s --arg ablate "$ablate" --argjson seconds "$(( $(date +%s) - t0 ))" '
  . as $all
  | [$all[] | select(.kind == "boot") | .pass] as $b
  | [$all[] | select(.kind == "final") | .pass] as $f
  | [$all[] | select(.kind == "row") | del(.kind)] as $rows
  | def mean: add / length; def spread: max - min;
  {iterations: $rows,
   bootstrap: ($b | mean), bootstrap_seeds: $b,
   final: ($f | mean), final_seeds: $f,
   noise: ([($b | spread), ($f | spread)] | max),
   rise: (($f | mean) - ($b | mean)),
   learned: ((($f | mean) - ($b | mean)) > ([($b | spread), ($f | spread)] | max)),
   ablate: (if $ablate == "" then null else $ablate end),
   eval_tasks: $all[0].tasks, eval_samples: ($all[0].rollouts / $all[0].tasks),
   seconds: $seconds}' \
  "$work/parts.json" > "$out/summary.json"

# the curve: iteration 0 is the bootstrap (sampling seed 1)
{ jq -r '"0\t\(.pass)\t\(.lo)\t\(.hi)\tNaN\tNaN"' "$out/boot/eval-s1/pass.json"
  jq -r '.iterations[] | "\(.iter)\t\(.eval)\t\(.lo)\t\(.hi)\t\(.train_reward)\t\(.loss)"' "$out/summary.json"
} > "$out/curve.tsv"
if command -v gnuplot > /dev/null 2>&1; then
  "$here/pipelines/plot.sh" "$out" >> "$log" 2>&1 || echo "demo: plotting failed (see $log)" >&2
fi

stage "done in $(( $(date +%s) - t0 ))s; outputs in $out"
jq -r '"eval pass rate (\(.eval_tasks) held-out tasks, \(.eval_samples) samples each):
  after the bootstrap  \(.bootstrap*1000|round/1000)  (seeds \(.bootstrap_seeds | map(.*1000|round/1000) | join(", ")))
  after iteration \(.iterations | length)    \(.final*1000|round/1000)  (seeds \(.final_seeds | map(.*1000|round/1000) | join(", ")))
  rise \(.rise*1000|round/1000), seed-to-seed spread \(.noise*1000|round/1000): \(if .learned then "the model learned (rise > spread)" else "NO rise beyond the noise" end)"' "$out/summary.json"
ls "$out"/*.png 2> /dev/null | sed 's/^/plot: /' || true
