#!/bin/sh
# demo.sh — what `make demo` runs: every stage of flywheel that exists today,
# end to end on the embedded samples.
#
#   pipelines/demo.sh [OUTDIR]          (default: out)
#
# Stages
#   1. outer loop   samples/feedback -> traj -> report, SFT set, eval candidates
#   2. tasks        samples/repos (made git repositories) -> task-mutate -> tasks
#   3. grading      each task's own solution and an empty patch, graded in the
#                   clean room: the solution must earn reward 1, the empty
#                   patch 0
#   4. clean room   a command that tries the network and the host's files
#   5. model        a tiny Llama-style model, bootstrapped by SFT on the
#                   outer loop's thumbs-up data
#   6. inner loop   one iteration: rollout (builtin policy, 4 samples per
#                   train task) -> grade -> teach (hints -> per-token
#                   credit) -> train-step (GRPO + distillation)
#
# Outputs in OUTDIR: outer-loop/ (see outer-loop.sh), tasks.msgpack,
# graded.msgpack, model/, run/ (checkpoints), rollouts-graded.msgpack, demo.log.  FW_BIN names the tools' directory
# (default bin/ beside this script).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-out}
FW_BIN=${FW_BIN:-$here/bin}
PATH=$FW_BIN:$PATH
export PATH FW_BIN
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/fw-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
log=$out/demo.log
: > "$log"

t0=$(date +%s)
stage() { printf '\n== [%ss] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
run() { "$@" >> "$log" 2>&1 || { echo "demo: failed: $*  (see $log)" >&2; tail -20 "$log" >&2; exit 1; }; }

stage "1/6 outer loop: product feedback -> SFT data, eval candidates, A/B verdicts"
run "$here/pipelines/outer-loop.sh" -o "$out/outer-loop" \
  --private-eval "$here/samples/evals/private-eval.jsonl" --paired-by .meta.item \
  "$here/samples/feedback"
printf 'trajectories %s, SFT (thumbs-up) %s, eval candidates (thumbs-down) %s\n' \
  "$(rec count "$out/outer-loop/traj.msgpack")" \
  "$(rec count "$out/outer-loop/sft.msgpack")" \
  "$(rec count "$out/outer-loop/eval-candidates.msgpack")"
grep -E 'preferred|no verdict' "$out/outer-loop/report.txt" || true

stage "2/6 tasks: remove a feature from each sample repository so that tests fail"
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
cat "$work/textkit.tasks" "$work/tally.tasks" > "$out/tasks.msgpack"
printf 'validated tasks: %s (by split: %s)\n' "$(rec count "$out/tasks.msgpack")" \
  "$(rec get .split "$out/tasks.msgpack" | sort | uniq -c | awk '{printf "%s %s ", $2, $1}')"
echo "one problem statement, as a policy sees it:"
rec head -n 1 "$out/tasks.msgpack" | rec get .prompt | sed 's/^/    /'

stage "3/6 grading in the clean room: the solution earns 1, an empty patch 0"
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

stage "4/6 clean room: no network, no host files, writes only in the workspace"
mkdir -p "$work/ws"
fw-run --workspace "$work/ws" --timeout 10 -- sh -c '
  python3 -c "import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=2)" 2>/dev/null \
    && echo "network: reachable" || echo "network: blocked"
  cat /root/.bashrc > /dev/null 2>&1 && echo "host home: readable" || echo "host home: hidden"
  touch /usr/x 2>/dev/null && echo "/usr: writable" || echo "/usr: read-only"
  touch ./ok && echo "workspace: writable"' 2>> "$log" | jq -r '.stdout' | sed '/^$/d; s/^/    /'

stage "5/6 model: a tiny Llama-style checkpoint, bootstrapped by SFT on thumbs-up data"
rm -rf "$out/model" "$out/run"
run ckpt init "$here/samples/models/tiny-llama.json" "$out/model" --seed 1
ckpt info "$out/model" | grep -E 'architecture|parameters|layers|vocab' | sed 's/^/    /'
run train-step --ckpt "$out/model" --out "$out/run" --objective sft --steps 10 \
  --batch-size 16 --lr 3e-3 --warmup 2 --truncate --seed 1 -o "$work/sft-metrics.msgpack" \
  "$out/outer-loop/sft.msgpack"
rec json "$work/sft-metrics.msgpack" | jq -r '"    step \(.step): loss \(.loss*1000|round/1000), \(.tok_per_s|round) tokens/s"' \
  | sed -n '1p;$p'

stage "6/6 inner loop, one iteration: rollout -> grade -> teach -> train-step (GRPO + distill)"
rec cat "$out/tasks.msgpack" | traj-filter -e '.split == "train"' > "$work/train.tasks"
run rollout --policy "builtin:$out/run/latest" --mode fill --samples 4 --seed 1 --temp 1.0 \
  --max-tokens 48 --store "$store" -o "$work/rollouts.msgpack" "$work/train.tasks"
run grade --store "$store" -j 2 -o "$out/rollouts-graded.msgpack" "$work/rollouts.msgpack"
printf 'rollouts %s, mean reward %s (an untrained policy: reward 0 is expected)\n' \
  "$(rec count "$out/rollouts-graded.msgpack")" \
  "$(rec json "$out/rollouts-graded.msgpack" | jq -s '[.[].grade.reward] | add / length')"
run teach --hints env,demo -o "$out/rollouts-taught.msgpack" "$out/rollouts-graded.msgpack"
rec json "$out/rollouts-taught.msgpack" | jq -rs '"hints written: \([.[].teach.hints | length] | add); per-token credit on \([.[] | select(.teach.adv)] | length) rollouts, \([.[] | select(.teach.adv_omitted)] | length) left without (prompt and hint longer than the tiny model'"'"'s context)"'
run train-step --ckpt "$out/run/latest" --out "$out/run" --objective pg,distill --steps 1 \
  --seed 1 -o "$work/pg-metrics.msgpack" "$out/rollouts-taught.msgpack"
rec json "$work/pg-metrics.msgpack" | jq -r '"    step \(.step): groups \(.groups), skipped (equal rewards) \(.skipped_groups), distill loss \(.loss_distill), new checkpoint \(.ckpt)"'

stage "done in $(( $(date +%s) - t0 ))s; outputs in $out"
echo "Not yet built: the iterated loop with its held-out eval curve (make demo will"
echo "show the pass rate rising), cron and Slurm pipelines."
