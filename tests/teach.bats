#!/usr/bin/env bats
# teach: environment hints on the right turn, and the hinted re-scoring of
# a fill rollout's policy tokens checked against `ckpt score`.

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C FW_THREADS=2
  FX="$BATS_TEST_DIRNAME/fixtures/teach"
  M="$BATS_TEST_DIRNAME/../samples/models"
  T="$BATS_TEST_TMPDIR"
}

# fill record for a fresh tiny checkpoint in $T/ck
fill() {
  ckpt init "$M/tiny-qwen2.json" "$T/ck" --seed 1 > /dev/null
  sed "s|CKPT|$T/ck|" "$FX/fill.json" | rec from-json > "$T/f.mp"
}

@test "--help, --version and bad options" {
  run -0 teach --help
  assert_line --index 0 --partial 'usage: teach'
  run -0 teach --version
  run -2 teach --hints bogus
  assert_output --partial "unknown or unsupported source 'bogus'"
  run -2 teach --clip -1
  run -2 teach --teacher http:x
}

@test "env hints: failed command on the turn that ran it, tests, hacks, denied network on the last reply" {
  rec from-json "$FX/agent.json" | teach --teacher none | rec json > "$T/o.json"
  run -0 jq -c '.teach.hints[] | [.turn, .source, .text]' "$T/o.json"
  assert_line --index 0 --partial '[2,"env","the command failed (exit 1): exit: 1\nstderr:\nModuleNotFoundError'
  assert_line --index 1 --partial '[6,"env","test tests/test_core.py::test_double: fail (1 of 2 f2p fail'
  assert_line --index 2 '[6,"env","hack skip-marker: tests/test_core.py: pytest.mark.skip added"]'
  assert_line --index 3 '[6,"env","network access denied: GET example.org:80"]'
  [ "${#lines[@]}" -eq 4 ]
  # passing tests, allowed requests, a successful command: no hint
  run -0 jq -c '.teach | has("adv")' "$T/o.json"
  assert_output false
  # everything else passes through
  run -0 bash -c "rec from-json '$FX/agent.json' | rec json | jq -S 'del(.teach)' > '$T/a' &&
                  jq -S 'del(.teach)' '$T/o.json' > '$T/b' && cmp '$T/a' '$T/b'"
}

@test "a passing rollout gets an empty teach and zero advantages" {
  rec from-json "$FX/pass.json" | teach --teacher none | rec json > "$T/o.json"
  run -0 jq -c .teach "$T/o.json"
  assert_output '{"hints":[]}'
  fill
  rec json "$T/f.mp" | jq -c 'del(.grade)' | rec from-json | teach | rec json > "$T/o.json"
  run -0 jq -c .teach "$T/o.json"
  assert_output '{"hints":[],"adv":[0,0]}'
}

@test "credit: adv = log p_teacher with the hint before the completion - recorded log-prob" {
  fill
  teach "$T/f.mp" > "$T/t.mp"
  run -0 rec json "$T/t.mp"
  hint=$(jq -r '.teach.hints[0].text' <<< "$output")
  [ "$hint" = 'test test_sum: fail (1 of 1 f2p fail, 0 of 0 p2p fail)' ]
  # the same sequence scored by ckpt score: prompt, "\nHint: TEXT\n", completion
  ids=$(printf '\nHint: %s\n' "$hint" | od -An -tu1 -v | tr -s ' \n' ',,' | sed 's/^,//;s/,$//')
  echo "{\"tokens\":[50,43,50,61,$ids,53,257]}" | rec from-json | ckpt score "$T/ck" |
    rec json | jq -c '.logprobs[-2:]' > "$T/lp"
  want=$(jq -c '[(.[0] + 1.0), (.[1] + 2.0)] | map(if . > 5 then 5 elif . < -5 then -5 else . end)' "$T/lp")
  got=$(rec json "$T/t.mp" | jq -c '.teach.adv')
  run -0 jq -n --argjson a "$got" --argjson b "$want" \
    '[$a, $b] | transpose | all(.[0] - .[1] | fabs < 1e-4)'
  assert_output true
  # --clip bounds every value
  teach --clip 0.5 "$T/f.mp" | rec json | jq -c .teach.adv > "$T/c"
  run -0 cat "$T/c"
  assert_output '[-0.5,-0.5]'
  # the rollout's own checkpoint as teacher: no teacher field
  run -0 bash -c "rec json '$T/t.mp' | jq -c '.teach | has(\"teacher\")'"
  assert_output false
}

@test "train-step --objective distill accepts teach's output" {
  fill
  teach "$T/f.mp" > "$T/t.mp"
  run -0 train-step --ckpt "$T/ck" --out "$T/run" --objective distill -o "$T/m.mp" "$T/t.mp"
  run -0 bash -c "rec json '$T/m.mp' | jq -c 'select(.kind == \"metrics\") | [.tokens, .skipped_records, .loss_distill != 0]'"
  assert_output '[2,0,true]'
}

@test "records that cannot get credit keep their hints; adv omitted with the reason" {
  rec from-json "$FX/agent.json" | teach --teacher "builtin:$T/nope" | rec json > "$T/o.json"
  run -0 jq -r '.teach.adv_omitted' "$T/o.json"
  assert_output --partial "$T/nope"
  fill
  rec from-json "$FX/agent.json" | teach --teacher "builtin:$T/ck" | rec json > "$T/o.json"
  run -0 jq -c '[.teach.adv_omitted, (.teach.hints | length)]' "$T/o.json"
  assert_output '["578 tokens with the hints, more than the model'"'"'s 512",4]'
  # an http reply without ids or log-probs
  jq -c 'del(.turns[2].logprobs)' "$FX/agent.json" | rec from-json |
    teach --teacher "builtin:$T/ck" | rec json > "$T/o.json"
  run -0 jq -c '[.teach.adv_omitted, (.teach.hints | length)]' "$T/o.json"
  assert_output '["no log-probs",4]'
}

@test "rules hints: samples/teach-rules.txt on a trajectory that breaks each rule" {
  rec from-json "$FX/rules.json" |
    teach --hints rules --rules "$BATS_TEST_DIRNAME/../samples/teach-rules.txt" --teacher none |
    rec json | jq -c '.teach.hints[] | [.turn, .source, .text]' > "$T/h"
  run -0 cat "$T/h"
  assert_output '[1,"rules","There is no network here; work with what is installed."]
[3,"rules","There is no network here; work with what is installed."]
[5,"rules","Run the tests (python3 run_tests.py) to see what fails before you stop."]
[5,"rules","Do not edit the tests; change the code they test."]
[3,"rules","This command failed the same way before; read its error and change something."]
[5,"rules","Every reply needs one bash block; keep working until the tests pass."]'
  # counts: longer 3 fires on the 5-token reply, repeated 3 does not fire on 2
  printf '# counts\n\nlonger 3: short please\nrepeated 3: x\n' > "$T/r"
  rec from-json "$FX/rules.json" | teach --hints env,rules --rules "$T/r" --teacher none |
    rec json | jq -c '.teach.hints[] | [.turn, .source]' > "$T/h"
  run -0 cat "$T/h"
  assert_output '[1,"env"]
[3,"env"]
[5,"rules"]'
}

@test "bad rules files are usage errors naming the line" {
  printf '# ok\nbogus x: y\n' > "$T/r"
  run -2 teach --hints rules --rules "$T/r" < /dev/null
  assert_output "teach: $T/r:2: unknown rule kind 'bogus'"
  printf 'match (: y\n' > "$T/r"
  run -2 teach --hints rules --rules "$T/r" < /dev/null
  assert_output --partial "$T/r:1: regex at 1:"
  printf 'longer x: y\n' > "$T/r"
  run -2 teach --hints rules --rules "$T/r" < /dev/null
  printf 'never foo\n' > "$T/r"
  run -2 teach --hints rules --rules "$T/r" < /dev/null
  assert_output --partial "want 'KIND ARG: HINT'"
  run -2 teach --hints rules < /dev/null
  assert_output 'teach: --hints rules needs --rules FILE'
}

@test "demo hints: a resolved rollout of the same group, never another group's" {
  rec from-json "$FX/group.json" | teach --hints demo --teacher none |
    rec json | jq -c '[.id, (.teach.hints[] | [.turn, .source, .text])]' > "$T/h"
  run -0 cat "$T/h"
  assert_output '["g1-0",[1,"demo","a correct solution looked like this:\ndiff --git a/m.py b/m.py\n+    return x * 2"]]
["g1-1"]
["g2-0"]
["g3-0",[1,"demo","a correct solution looked like this:\nthe fill text"]]
["g3-1"]'
  # the order of records is kept, and without demo no group is formed
  run -0 bash -c "rec from-json '$FX/group.json' | teach --hints env --teacher none | rec json | jq -r .id | tr '\n' ' '"
  assert_output 'g1-0 g1-1 g2-0 g3-0 g3-1 '
  # a demo is cut to 5 times --max-chars
  rec from-json "$FX/group.json" | teach --hints demo --max-chars 10 --teacher none |
    rec json | jq -r 'select(.id == "g1-0") | .teach.hints[0].text | length' > "$T/n"
  run -0 cat "$T/n"
  assert_output 50
}

@test "a hint naming the right answer: the wrong answer gets negative credit, the right one positive" {
  ckpt init "$M/tiny-qwen2.json" "$T/ck" --seed 1 > /dev/null
  # teach a tiny model to answer what the hint says: "Q=\nHint: the answer is D\nD"
  for d in 0 1 2 3 4 5 6 7 8 9; do
    s="$(printf 'Q=\nHint: the answer is %s\n%s' $d $d | od -An -tu1 -v | tr -s ' \n' ',,' | sed 's/^,//;s/,$//')"
    echo "{\"kind\":\"seq\",\"tokens\":[$s],\"mask\":[$(printf '0,%.0s' $(seq 25))1]}"
  done | rec from-json > "$T/c.mp"
  for i in 1 2 3 4 5 6 7 8 9 10; do cat "$T/c.mp"; done > "$T/c10.mp"
  train-step --ckpt "$T/ck" --out "$T/run" --lr 3e-3 --steps 150 --batch-size 10 \
    --objective sft -o "$T/m.mp" "$T/c10.mp"
  ck=$(ls -d "$T"/run/step-* | tail -1)
  echo 'never 7: the answer is 7' > "$T/rules"
  # rollouts answering 5 (wrong) and 7 (right) with a uniform student log-prob
  for a in 53 55; do
    echo "{\"id\":\"a$a\",\"policy\":{\"ckpt\":\"$ck\"},\"turns\":[{\"role\":\"user\",\"text\":\"Q=\"},{\"role\":\"assistant\",\"text\":\"?\",\"logprobs\":[-2.3026]}],\"tokens\":[81,61,$a],\"mask\":[0,0,1]}"
  done | rec from-json | teach --hints rules --rules "$T/rules" | rec json > "$T/o.json"
  run -0 jq -c '[.id, .teach.hints[0].text, .teach.hints[0].source, (.teach.adv[0] | if . < -1 then "neg" elif . > 1 then "pos" else "small" end)]' "$T/o.json"
  assert_output '["a53","the answer is 7","rules","neg"]
["a55","the answer is 7","rules","pos"]'
}

@test "agent credit: zero before the first hinted turn, one value per assistant token, train-step takes it" {
  jq '.max_position_embeddings = 4096' "$M/tiny-qwen2.json" > "$T/long.json"
  ckpt init "$T/long.json" "$T/lck" --seed 1 > /dev/null
  # the failed command hints turn 2: every assistant token gets credit
  rec from-json "$FX/agent.json" | teach --teacher "builtin:$T/lck" > "$T/a.mp"
  run -0 bash -c "rec json '$T/a.mp' | jq -c '.teach.adv'"
  assert_output '[-5,-5,-5,-5]'
  # a teacher other than the sampling checkpoint is named
  run -0 bash -c "rec json '$T/a.mp' | jq -r '.teach.teacher'"
  assert_output "$T/lck"
  # without it only the last reply (turn 6) is hinted: the three tokens before get 0
  jq -c '.turns[3].exit = 0' "$FX/agent.json" | rec from-json |
    teach --teacher "builtin:$T/lck" --clip 100 | rec json > "$T/b.json"
  run -0 jq -c '[.teach.hints[].turn | tostring] + [(.teach.adv[0:3] | tostring), (.teach.adv[3] < 0 and .teach.adv[3] > -100)]' "$T/b.json"
  assert_output '["6","6","6","[0,0,0]",true]'
  run -0 train-step --ckpt "$T/lck" --out "$T/run" --objective distill -o "$T/m.mp" "$T/a.mp"
  run -0 bash -c "rec json '$T/m.mp' | jq -c '[.tokens, .skipped_records, .loss_distill > 0]'"
  assert_output '[7,0,true]'
}

@test "bad input: a missing file or a malformed record is exit 1, the good records still written" {
  rec from-json "$FX/pass.json" > "$T/p.mp"
  run -1 --separate-stderr bash -c "set -o pipefail; teach --teacher none '$T/nope' '$T/p.mp' | rec count"
  assert_output 1
  [[ $stderr == *"teach: $T/nope: No such file or directory"* ]]
  run -1 --separate-stderr bash -c "set -o pipefail; (cat '$T/p.mp'; printf '\xc1') | teach --teacher none | rec count"
  assert_output 1
  [[ $stderr == *"teach: <stdin>: record 2 (byte 211): not msgpack"* ]]
}
