#!/bin/sh
# judge.sh — what `make judge` runs: a small judge distilled from a top
# judge's verdicts, and how well it agrees with that judge on held-out items
# against what each costs.
#
#   pipelines/judge.sh [OUTDIR]         (default: out/judge)
#
# Stages
#   1. items     samples/judge/gen.py: short agent episodes on ambiguous
#                (task.expect "ask") and clear ("act") requests; a train
#                set and a held-out set from other seeds
#   2. teacher   grade --judge-only with the teacher judge (JUDGE_TEACHER,
#                default exec:samples/judge/rules-judge, which applies the
#                rubric's written rules: the stand-in for a frontier model's
#                labels) on the rubric samples/judge/rubric.jsonl; on the
#                train set it writes the student's SFT examples (--distil):
#                the judge prompt as the student reads it, the verdict as
#                its completion
#   3. student   ckpt init samples/models/judge-llama.json, then
#                train-step --objective sft on those examples
#   4. agreement the student judges the held-out items (builtin:); its
#                verdicts against the teacher's, per criterion, with
#                fb-report --judge (accuracy, Cohen's kappa with a bootstrap
#                interval, the confusion table); and the cost of each judge
#                (judgements per second, prompt tokens per second)
#
# Environment: JUDGE_TRAIN (400 items), JUDGE_HELDOUT (200), JUDGE_STEPS
# (300 optimizer steps), JUDGE_BATCH (8), JUDGE_LR (3e-3), JUDGE_TEACHER,
# JUDGE_MODEL (the student's config).  FW_BIN names the tools' directory.
# Outputs in OUTDIR: items-train.msgpack, items-heldout.msgpack,
# teacher-*.msgpack, sft.msgpack, student/ (the checkpoint run),
# student-heldout.msgpack, labels.tsv, agreement.txt, judge.json
# ({"teacher": {"judgements_per_s"}, "student": {"judgements_per_s",
# "prompt_tok_per_s", "params"}, "criteria": {NAME: {"n", "accuracy",
# "kappa", "kappa_lo", "kappa_hi"}}}).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${FW_BIN:-$here/bin}
PATH=$bin:$PATH
export PATH LC_ALL=C
PY=/usr/bin/python3
out=${1:-out/judge}
ntrain=${JUDGE_TRAIN:-400}
nheld=${JUDGE_HELDOUT:-200}
steps=${JUDGE_STEPS:-300}
batch=${JUDGE_BATCH:-8}
lr=${JUDGE_LR:-3e-3}
teacher=${JUDGE_TEACHER:-exec:$here/samples/judge/rules-judge}
model=${JUDGE_MODEL:-$here/samples/models/judge-llama.json}
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/judge.log
: > "$log"
t0=$(date +%s)
stage() { printf '\n== [%ss] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
run() { "$@" >> "$log" 2>&1 || { echo "judge: failed: $* (see $log)" >&2; tail -5 "$log" >&2; exit 1; }; }
now() { date +%s.%N; }

stage "1/4 items: $ntrain to train on, $nheld held out (other seeds)"
rec from-json -o "$out/rubric.msgpack" "$here/samples/judge/rubric.jsonl"
"$PY" "$here/samples/judge/gen.py" items --n "$ntrain" --seed 1 | rec from-json > "$out/items-train.msgpack"
"$PY" "$here/samples/judge/gen.py" items --n "$nheld" --seed 2 | rec from-json > "$out/items-heldout.msgpack"
ncrit=$(rec json "$out/rubric.msgpack" | jq '.criteria | length')
printf '    rubric: %s criteria (%s)\n' "$ncrit" "$(rec json "$out/rubric.msgpack" | jq -r '[.criteria[].name] | join(", ")')"
printf '    held-out requests: %s ambiguous (expect ask), %s clear (expect act)\n' \
  "$(rec get .task.expect "$out/items-heldout.msgpack" | grep -c '^ask$')" \
  "$(rec get .task.expect "$out/items-heldout.msgpack" | grep -c '^act$')"

stage "2/4 teacher: $teacher"
rm -rf "$out/student" && mkdir -p "$out/student"
run ckpt init "$model" "$out/student/init" --seed 1
run grade --judge "$teacher" --rubric "$out/rubric.msgpack" --judge-only \
  --distil "$out/sft.msgpack" --student "$out/student/init" \
  -o "$out/teacher-train.msgpack" "$out/items-train.msgpack"
a=$(now)
run grade --judge "$teacher" --rubric "$out/rubric.msgpack" --judge-only \
  -o "$out/teacher-heldout.msgpack" "$out/items-heldout.msgpack"
b=$(now)
teacher_s=$(awk -v a="$a" -v b="$b" 'BEGIN { print b - a }')
rec json "$out/teacher-heldout.msgpack" \
  | jq -r '.id as $i | .grade.judge | to_entries[] | "\($i)\t\(.key)\t\(.value.verdict)"' > "$out/labels.tsv"
printf '    %s examples for the student; labels on the held-out items: %s\n' \
  "$(rec count "$out/sft.msgpack")" "$(wc -l < "$out/labels.tsv")"

stage "3/4 student: $(ckpt info "$out/student/init" | awk -F': *' '/parameters/ {print $2}') parameters, $steps steps of SFT on the teacher's verdicts"
run train-step --ckpt "$out/student/init" --out "$out/student/run" --objective sft \
  --steps "$steps" --batch-size "$batch" --lr "$lr" --warmup 10 --decay-steps "$steps" \
  --schedule cosine --seed 1 -o "$out/student/metrics.msgpack" "$out/sft.msgpack"
rec json "$out/student/metrics.msgpack" | jq -r '"    step \(.step): loss \(.loss*1000|round/1000)"' | sed -n '1p;$p'

stage "4/4 agreement on the held-out items, and cost"
a=$(now)
run grade --judge "builtin:$out/student/run/latest" --rubric "$out/rubric.msgpack" --judge-only \
  --distil "$out/student-prompts.msgpack" --student "$out/student/init" \
  -o "$out/student-heldout.msgpack" "$out/items-heldout.msgpack"
b=$(now)
student_s=$(awk -v a="$a" -v b="$b" 'BEGIN { print b - a }')
# the prompt tokens the student read: a byte-level tokenizer, one token a
# byte and the BOS (the labels' tokens are scored as well, not counted)
ptok=$(rec json "$out/student-prompts.msgpack" | jq -s 'map((.prompt | utf8bytelength) + 1) | add')
status=0
fb-report --judge "$out/labels.tsv" "$out/student-heldout.msgpack" > "$out/agreement.txt" || status=$?
sed 's/^/    /' "$out/agreement.txt"
nj=$(( nheld * ncrit ))
jq -n --argjson ts "$teacher_s" --argjson ss "$student_s" --argjson nj "$nj" --argjson pt "$ptok" \
  --arg params "$(ckpt info "$out/student/init" | awk -F': *' '/parameters/ {print $2}')" \
  --rawfile agr "$out/agreement.txt" '
  def crit: capture("^(?<name>\\S+)\\tn (?<n>[0-9]+)\\taccuracy (?<acc>[0-9.]+)\\tkappa (?<k>-?[0-9.]+) \\[(?<lo>-?[0-9.]+), (?<hi>-?[0-9.]+)\\]");
  {teacher: {judgements_per_s: ($nj / $ts)},
   student: {judgements_per_s: ($nj / $ss), prompt_tok_per_s: ($pt / $ss), params: $params},
   criteria: ([$agr | split("\n")[] | select(test("^\\S+\\tn ")) | crit
               | {key: .name, value: {n: (.n|tonumber), accuracy: (.acc|tonumber), kappa: (.k|tonumber),
                                      kappa_lo: (.lo|tonumber), kappa_hi: (.hi|tonumber)}}] | from_entries)}' \
  > "$out/judge.json"
jq -r '"    teacher: \(.teacher.judgements_per_s*10|round/10) judgements/s\n    student: \(.student.judgements_per_s*10|round/10) judgements/s, \(.student.prompt_tok_per_s|round) prompt tokens/s (\(.student.params) parameters)"' "$out/judge.json"
printf '\n%s\n' "$out/judge.json"
[ "$status" -eq 0 ] || echo "judge: fb-report marks a criterion where the student is no better than chance" >&2
exit "$status"
