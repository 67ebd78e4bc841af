#!/usr/bin/env bats
# grade --judge: rubric criteria scored by a judge beside the tests.
#
# One task from the Python sample (stub-body of textkit's `percent`); four
# rollouts: the solution with a clarifying question first, the solution
# without one, an empty patch that asks, an empty patch that does not.

bats_require_minimum_version 1.5.0

PYTEST='python3 -m pytest -q -p no:cacheprovider --junitxml=$FW_REPORT'
J="$BATS_TEST_DIRNAME/../samples/judge"

setup_file() {
  export LC_ALL=C
  F="$BATS_FILE_TMPDIR"
  export TMPDIR="$F/tmp"
  mkdir -p "$TMPDIR"
  cp -r "$BATS_TEST_DIRNAME/../samples/repos/textkit" "$F/textkit"
  "$BATS_TEST_DIRNAME/../samples/repos/commit.sh" "$F/textkit"
  task-mutate --test-cmd "$PYTEST" --store "$F/st.git" --strategy stub-body --max 1 \
    -o "$F/task.mp" "$F/textkit" 2>/dev/null
  rec json "$F/task.mp" > "$F/task.json"
  jq -r .solution "$F/task.json" > "$F/solution.diff"
  : > "$F/empty.diff"
  roll() { # ID PATCH FIRST-REPLY
    jq -c --arg id "$1" --rawfile p "$2" --arg a "$3" '{kind: "rollout", id: $id, v: 1,
      task: del(.solution), policy: {backend: "test", ckpt: "c1"}, sample: 0, patch: $p,
      turns: [{role: "user", text: "make percent work"}, {role: "assistant", text: $a},
              {role: "assistant", text: "Done: percent() now returns the share in percent."}]}' "$F/task.json"
  }
  { roll ask-fix "$F/solution.diff" "Do you want it rounded?"
    roll fix "$F/solution.diff" "On it."
    roll ask-none "$F/empty.diff" "Which percent do you mean?"
    roll none "$F/empty.diff" "Looking."; } | rec from-json -o "$F/rollouts.mp"
  rec from-json -o "$F/rubric.mp" "$J/rubric.jsonl"
  ckpt init "$BATS_TEST_DIRNAME/../samples/models/tiny-llama.json" "$F/ckpt" --seed 5 >/dev/null
  grade --store "$F/st.git" --judge "exec:$J/rules-judge" --rubric "$F/rubric.mp" \
    -o "$F/exec.mp" "$F/rollouts.mp" 2>"$F/exec.err"
  rec json "$F/exec.mp" > "$F/exec.json"
}

setup() { F="$BATS_FILE_TMPDIR"; }

@test "an exec judge's verdicts land in grade.judge beside the test reward" {
  run -0 jq -r '[.id, .grade.reward, .grade.judge.asks.verdict, .grade.judge.acts.verdict,
                 .grade.judge.clarity.verdict] | @tsv' "$F/exec.json"
  [ "${lines[0]}" = "$(printf 'ask-fix\t1\tyes\tyes\t4')" ]
  [ "${lines[1]}" = "$(printf 'fix\t1\tno\tyes\t4')" ]
  [ "${lines[2]}" = "$(printf 'ask-none\t0\tyes\tno\t4')" ]
  [ "${lines[3]}" = "$(printf 'none\t0\tno\tno\t4')" ]
  # p as the judge gave it; one-hot where it gave only a verdict
  run -0 jq -c 'select(.id == "ask-fix") | .grade.judge | [.asks.p, .asks.score, .acts.p, .clarity.score]' "$F/exec.json"
  [ "$output" = '[{"yes":0.9,"no":0.1},0.9,{"yes":1,"no":0},4]' ]
  run -0 jq -r 'select(.id == "fix") | .grade.judge.asks.rationale' "$F/exec.json"
  [ "$output" = "the first reply asks nothing" ]
}

@test "a builtin judge's scores come from its log-probs and sum to 1 over the scale" {
  run -0 grade --store "$F/st.git" --judge "builtin:$F/ckpt" --rubric "$F/rubric.mp" \
    -o "$F/builtin.mp" "$F/rollouts.mp"
  rec json "$F/builtin.mp" > "$F/builtin.json"
  # sums of 2 or 5 doubles each in [0, 1]: rounding below 1e-12
  run -0 jq -r '.grade.judge | to_entries[] | (.value.p | add) | (. - 1) | fabs < 1e-12' "$F/builtin.json"
  [ "${#lines[@]}" -eq 12 ]
  ! printf '%s\n' "${lines[@]}" | grep -v true
  # the score is the expected value over the scale, the verdict its mode
  run -0 jq -r '.grade.judge.clarity | ((.score - ([.p["1"], .p["2"], .p["3"], .p["4"], .p["5"]]
               | to_entries | map((.key + 1) * .value) | add)) | fabs < 1e-12),
               (.verdict == (.p | to_entries | max_by(.value) | .key))' "$F/builtin.json"
  ! printf '%s\n' "${lines[@]}" | grep -v true
  # an untrained model is unsure, not certain: every p strictly inside (0, 1)
  run -0 jq '[.grade.judge[].p[] | select(. <= 0 or . >= 1)] | length' "$F/builtin.json"
  ! printf '%s\n' "${lines[@]}" | grep -v '^0$'
}

@test "a mix: reward weighs the tests' reward with judge scores, and keeps the tests' own" {
  run -0 grade --store "$F/st.git" --judge "exec:$J/rules-judge" --rubric "$F/rubric.mp" \
    --reward mix:resolved=3,asks=1 -o "$F/mix.mp" "$F/rollouts.mp"
  run -0 bash -c "rec json '$F/mix.mp' | jq -r '[.id, .grade.reward, .grade.reward_tests] | @tsv'"
  # (3*1 + 1*0.9)/4, (3*1 + 0.1)/4, (0 + 0.9)/4, (0 + 0.1)/4
  [ "${lines[0]}" = "$(printf 'ask-fix\t0.975\t1')" ]
  [ "${lines[1]}" = "$(printf 'fix\t0.775\t1')" ]
  [ "${lines[2]}" = "$(printf 'ask-none\t0.225\t0')" ]
  [ "${lines[3]}" = "$(printf 'none\t0.025\t0')" ]
}

@test "a rubric with a bad scale is refused with the criterion named" {
  jq -c '.criteria[1].scale = "1-7"' "$J/rubric.jsonl" | rec from-json -o "$F/bad.mp"
  run -1 --separate-stderr grade --store "$F/st.git" --judge "exec:$J/rules-judge" \
    --rubric "$F/bad.mp" "$F/rollouts.mp"
  [[ "$stderr" == *"criterion 2 ('acts'): scale '1-7' is not yes/no or 1-5"* ]]
  [ -z "$output" ]
}

@test "judge options are checked before anything runs" {
  run -2 grade --judge "exec:true" "$F/rollouts.mp"
  [[ "$output" == *"--judge and --rubric go together"* ]]
  run -2 grade --reward mix:resolved=1,asks=1 "$F/rollouts.mp"
  [[ "$output" == *"needs --judge"* ]]
  run -2 grade --reward mix:resolved=0 --judge "exec:true" --rubric "$F/rubric.mp" "$F/rollouts.mp"
  [[ "$output" == *"sum to 0"* ]]
  run -1 grade --store "$F/st.git" --judge "exec:$J/rules-judge" --rubric "$F/rubric.mp" \
    --reward mix:resolved=1,tone=1 "$F/rollouts.mp"
  [[ "$output" == *"criterion 'tone' is not in"* ]]
}

@test "a judge that fails stops grading with the record named, earlier records kept" {
  cat > "$F/flaky" <<'EOF2'
#!/bin/sh
req=$(cat)
printf '%s' "$req" | grep -q '"id":"fix"' && exit 4
printf '%s' "$req" | "$1"
EOF2
  chmod +x "$F/flaky"
  run -1 --separate-stderr grade --store "$F/st.git" --judge "exec:$F/flaky $J/rules-judge" \
    --rubric "$F/rubric.mp" -o "$F/part.mp" "$F/rollouts.mp"
  [[ "$stderr" == *"record 2"*"judge:"*"exit status 4"* ]]
  run -0 rec count "$F/part.mp"
  [ "$output" = 1 ]
}

# judged N RULE: N records whose grade.judge.asks.verdict is RULE (jq, on $i)
judged() {
  jq -nc --argjson n "$1" "range(\$n) as \$i | {kind: \"rollout\", id: \"r\(\$i)\",
    grade: {judge: {asks: {verdict: ($2)}}}}" | rec from-json
}

@test "a judge reads a record with an integer beyond int64 and a NUL in a reply, as agent episodes have" {
  rec json "$F/rollouts.mp" | sed -n 3p | sed 's/^{/{"seed":11609108398030195000,/' \
    | jq -c '.turns[1].text = "Which\u0000 percent do you mean?"' \
    | rec from-json -o "$F/seed.mp"
  run -0 --separate-stderr grade --judge "exec:$J/rules-judge" --rubric "$F/rubric.mp" --judge-only \
    -o "$F/seed-judged.mp" "$F/seed.mp"
  run -0 bash -c "rec json '$F/seed-judged.mp' | jq -r '[.seed, .grade.judge.asks.verdict, .grade.judge.acts.verdict] | @tsv'"
  [ "$output" = "$(printf '11609108398030195000\tyes\tno')" ]
}

@test "fb-report --judge measures agreement with people: accuracy, kappa, interval, confusion" {
  # people say yes on even items; the judge gets items 0, 20 (yes) and 5, 25 (no) wrong
  for i in $(seq 0 39); do
    printf 'r%d\tasks\t%s\n' "$i" "$([ $((i % 2)) = 0 ] && echo yes || echo no)"
  done > "$F/labels.tsv"
  judged 40 'if ($i % 20 == 0 or $i % 20 == 5) then (if $i % 2 == 0 then "no" else "yes" end)
             elif $i % 2 == 0 then "yes" else "no" end' > "$F/judged.mp"
  run -0 --separate-stderr fb-report --judge "$F/labels.tsv" "$F/judged.mp"
  # 36 of 40 agree; both sides 20 yes 20 no: p_e = 0.5, kappa = (0.9-0.5)/0.5
  [[ "${lines[0]}" == "$(printf 'asks\tn 40\taccuracy 0.900\tkappa 0.800 [')"* ]]
  [[ "${lines[0]}" != *"chance"* ]]
  [ "${lines[1]}" = "$(printf '  human\\judge\tyes\tno')" ]
  [ "${lines[2]}" = "$(printf '  yes\t18\t2')" ]
  [ "${lines[3]}" = "$(printf '  no\t2\t18')" ]
}

@test "fb-report --judge flags a judge whose answers are constant (kappa 0) and exits 1" {
  judged 40 '"yes"' > "$F/const.mp"
  run -1 --separate-stderr fb-report --judge "$F/labels.tsv" "$F/const.mp"
  [[ "${lines[0]}" == "$(printf 'asks\tn 40\taccuracy 0.500\tkappa 0.000 [0.000, 0.000]\tno better than chance')" ]]
  [[ "$stderr" == *"1 criterion is no better than chance"* ]]
}

@test "fb-report --judge names a bad labels line" {
  printf 'r1\tasks\tyes\nr2 asks no\n' > "$F/bad.tsv"
  run -1 --separate-stderr fb-report --judge "$F/bad.tsv" "$F/const.mp"
  [[ "$stderr" == *"bad.tsv: line 2: want ID<TAB>CRITERION<TAB>LABEL"* ]]
}

@test "a judge over serve gives the builtin judge's scores" {
  serve --port 0 --ckpt "j=$F/ckpt" > "$F/serve.url" 2> "$F/serve.err" &
  local pid=$!
  for _ in $(seq 100); do [ -s "$F/serve.url" ] && break; sleep 0.05; done
  run -0 grade --store "$F/st.git" --judge "http:$(cat "$F/serve.url")/v1#j" \
    --judge-tokenizer "$F/ckpt" --rubric "$F/rubric.mp" -o "$F/http.mp" "$F/rollouts.mp"
  kill "$pid"
  [ -s "$F/builtin.json" ] || grade --store "$F/st.git" --judge "builtin:$F/ckpt" \
    --rubric "$F/rubric.mp" "$F/rollouts.mp" | rec json > "$F/builtin.json"
  # p is a softmax over sums of float32 log-probs (|log p| < 20, so each is
  # good to about 20 * 2^-23 = 2.4e-6 between two forward passes that group
  # sums differently); the softmax moves p by at most a quarter of the
  # difference of its inputs, so 1e-4 leaves a factor of ten for a
  # five-token label
  run -0 jq -n --slurpfile a "$F/builtin.json" --slurpfile b <(rec json "$F/http.mp") '
    [range($a | length) as $i | $a[$i].grade.judge | to_entries[] | .key as $k | .value.p
     | to_entries[] | (.value - $b[$i].grade.judge[$k].p[.key]) | fabs] | max < 1e-4'
  [ "$output" = true ]
  run -0 jq -n --slurpfile a "$F/builtin.json" --slurpfile b <(rec json "$F/http.mp") \
    '[$a[].grade.judge[].verdict] == [$b[].grade.judge[].verdict]'
  [ "$output" = true ]
}

@test "--judge-only judges records as they are: no test runs, a grade kept, trajectories too" {
  # the rollouts never graded: the judge is all of their grade
  run -0 grade --judge "exec:$J/rules-judge" --rubric "$F/rubric.mp" --judge-only \
    -o "$F/only.mp" "$F/rollouts.mp"
  run -0 jq -n --slurpfile a <(rec json "$F/only.mp") --slurpfile b "$F/exec.json" \
    '[$a[] | .grade | keys] == [range(4) | ["judge"]] and [$a[].grade.judge] == [$b[].grade.judge]'
  [ "$output" = true ]
  # graded records judged again keep the tests' reward and get the new verdicts
  jq -c '.task.prompt = "x" | .turns[1].text = "Sure."' "$F/exec.json" | rec from-json -o "$F/regrade.mp"
  run -0 grade --judge "exec:$J/rules-judge" --rubric "$F/rubric.mp" --judge-only \
    -o "$F/regraded.mp" "$F/regrade.mp"
  run -0 jq -r '[.id, .grade.reward, .grade.judge.asks.verdict] | @tsv' <(rec json "$F/regraded.mp")
  [ "${lines[0]}" = "$(printf 'ask-fix\t1\tno')" ]
  [ "${lines[2]}" = "$(printf 'ask-none\t0\tno')" ]
  # an ingested trajectory is judged; a task record passes as it came
  { printf '%s\n' '{"kind":"traj","id":"t1","turns":[{"role":"user","text":"fix it"},{"role":"assistant","text":"Which one?"}]}'
    rec json "$F/task.mp"; } | rec from-json -o "$F/mixed.mp"
  run -0 grade --judge "exec:$J/rules-judge" --rubric "$F/rubric.mp" --judge-only \
    -o "$F/mixed-judged.mp" "$F/mixed.mp"
  run -0 jq -r '[.kind, .grade.judge.asks.verdict // "-"] | @tsv' <(rec json "$F/mixed-judged.mp")
  [ "${lines[0]}" = "$(printf 'traj\tyes')" ]
  [ "${lines[1]}" = "$(printf 'task\t-')" ]
  run -2 grade --judge-only "$F/mixed.mp"
  [[ "$output" == *"need --judge and --rubric"* ]]
  run -2 grade --judge "exec:$J/rules-judge" --rubric "$F/rubric.mp" --distil "$F/x.mp" "$F/mixed.mp"
  [[ "$output" == *"--distil and --student go together"* ]]
}

@test "--distil writes the student's examples: the prompt it reads, the teacher's verdict" {
  run -0 grade --judge "exec:$J/rules-judge" --rubric "$F/rubric.mp" --judge-only \
    --distil "$F/sft.mp" --student "$F/ckpt" -o "$F/only.mp" "$F/rollouts.mp"
  rec json "$F/sft.mp" > "$F/sft.json"
  # one example per rollout and criterion, its completion the verdict
  run -0 jq -n --slurpfile s "$F/sft.json" --slurpfile a <(rec json "$F/only.mp") '
    [$a[] | .id as $i | .grade.judge | to_entries[] | [$i, .key, " " + .value.verdict]]
    == [$s[] | [.id, .criterion, .completion]]'
  [ "$output" = true ]
  # the task's request is longer than the student's 512 positions: the
  # transcript gives way from its start, the question and "Answer:" stay,
  # and prompt + BOS + the longest label (" yes", 4 bytes) fit
  max=$(jq -r .max_position_embeddings "$F/ckpt/config.json")
  run -0 jq -r --argjson max "$max" '[(.prompt | utf8bytelength) + 1 + 4 <= $max,
    (.prompt | endswith("\nAnswer:")), (.prompt | test("transcript cut"))] | all' "$F/sft.json"
  ! printf '%s\n' "${lines[@]}" | grep -v true
  # that prompt is the one a builtin judge of that checkpoint reads: its
  # p(yes) is the softmax of the checkpoint's own log-probs of " yes" and
  # " no" after it (ckpt score; the same tokens through the same weights,
  # summed in another order: within 1e-4, as for serve above)
  [ -s "$F/builtin.json" ] || grade --store "$F/st.git" --judge "builtin:$F/ckpt" \
    --rubric "$F/rubric.mp" "$F/rollouts.mp" | rec json > "$F/builtin.json"
  jq -c 'select(.criterion == "asks") | {id, text: (.prompt + " yes")}, {id, text: (.prompt + " no")}' \
    "$F/sft.json" | rec from-json | ckpt score "$F/ckpt" | rec json > "$F/scored.json"
  run -0 jq -n --slurpfile s "$F/scored.json" --slurpfile b "$F/builtin.json" '
    def lp(n): .logprobs[-n:] | add;
    [range(0; $s | length; 2) as $i | ($s[$i] | lp(4)) as $y | ($s[$i + 1] | lp(3)) as $n
     | (1 / (1 + ($n - $y | exp))) as $p
     | ($b[] | select(.id == $s[$i].id) | .grade.judge.asks.p.yes) - $p | fabs] | max < 1e-4'
  [ "$output" = true ]
}

@test "criteria that name an expect judge only the tasks that expect it; a mix weighs only those" {
  rec from-json -o "$F/expect.mp" "$J/expect.jsonl"
  /usr/bin/python3 "$J/gen.py" items --n 30 --seed 3 --kinds ask,act,skills \
    | rec from-json -o "$F/kinds.mp"
  run -0 grade --judge "exec:$J/rules-judge" --rubric "$F/expect.mp" --judge-only \
    --reward mix:resolved=0,asks-first=1,acts-at-once=1 -o "$F/kinds-judged.mp" "$F/kinds.mp"
  rec json "$F/kinds-judged.mp" > "$F/kinds.json"
  # each kind present, and each record judged on its kind's criterion and clarity only
  run -0 jq -r '.task.expect' "$F/kinds.json"
  [ "$(printf '%s\n' "${lines[@]}" | sort -u | tr '\n' ' ')" = "act ask skills " ]
  run -0 jq -r '[.task.expect, (.grade.judge | keys | join(","))] | @tsv' "$F/kinds.json"
  ! printf '%s\n' "${lines[@]}" | grep -v -e $'^ask\tasks-first,clarity$' \
    -e $'^act\tacts-at-once,clarity$' -e $'^skills\tclarity,skills$'
  # the mix is the one criterion that applies (the tests weigh 0); a skills
  # task has none, so its reward is the tests' own (none ran: 0)
  run -0 jq -r 'if .task.expect == "ask" then .grade.reward == .grade.judge["asks-first"].score
                elif .task.expect == "act" then .grade.reward == .grade.judge["acts-at-once"].score
                else .grade.reward == 0 end' "$F/kinds.json"
  ! printf '%s\n' "${lines[@]}" | grep -v true
  # a bad expect is refused with the criterion named
  jq -c '.criteria[0].expect = [1]' "$J/expect.jsonl" | rec from-json -o "$F/bad-expect.mp"
  run -1 grade --judge "exec:$J/rules-judge" --rubric "$F/bad-expect.mp" --judge-only "$F/kinds.mp"
  [[ "$output" == *"criterion 1 ('asks-first'): expect 1 is not a string"* ]]
}

@test "make judge's pipeline at reduced size: the teacher's labels, a student, agreement and cost" {
  # 5 steps leave the student at chance: fb-report flags it and the
  # pipeline says so with exit 1, after writing its figures
  run -1 env FW_BIN="$BIN_DIR" JUDGE_TRAIN=30 JUDGE_HELDOUT=20 JUDGE_STEPS=5 \
    "$BATS_TEST_DIRNAME/../pipelines/judge.sh" "$F/jp"
  [[ "$output" == *"no better than chance"* ]]
  [ "$(rec count "$F/jp/sft.msgpack")" -eq 90 ]
  [ "$(wc -l < "$F/jp/labels.tsv")" -eq 60 ]
  run -0 jq -r '[(.criteria | keys | join(",")), ([.criteria[].n] | unique | join(",")),
                 (.teacher.judgements_per_s > 0), (.student.prompt_tok_per_s > 0)] | @tsv' "$F/jp/judge.json"
  [ "$output" = "$(printf 'acts,asks,clarity\t20\ttrue\ttrue')" ]
}
