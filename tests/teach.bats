#!/usr/bin/env bats
# teach: environment, rules, demo and model hints on the right turn, and the
# hinted re-scoring of the policy's tokens checked against `ckpt score`, a
# builtin teacher against an http one (serve), -j against -j 1.

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C FW_THREADS=${FW_THREADS:-2}
  FX="$BATS_TEST_DIRNAME/fixtures/teach"
  M="$BATS_TEST_DIRNAME/../samples/models"
  T="$BATS_TEST_TMPDIR"
}

teardown() {
  for p in "$T"/*.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null; done
  true
}

# serve_start NAME ARGS...: serve on a free loopback port; $URL is its API base
serve_start() {
  local n=$1; shift
  serve --port 0 "$@" > "$T/$n.url" 2> "$T/$n.err" &
  echo $! > "$T/$n.pid"
  for _ in $(seq 100); do [ -s "$T/$n.url" ] && break; sleep 0.05; done
  URL="$(cat "$T/$n.url")/v1"
  [ "$URL" != /v1 ]
}

# close_to A B: two JSON arrays of numbers agree to 1e-4.  They are
# log-probs (or differences of them) of one checkpoint computed in another
# grouping of the same float32 sums: decoding with the KV cache against one
# full forward, a batch against single sequences.  The longest sums behind a
# log-prob have N ~ 600 terms (160 or 176 + 64 per layer, up to 100 positions, 264
# logits); rounding errors of random sign give about sqrt(N) u |lp| =
# 25 * 6e-8 * 6 = 9e-6 (|lp| <= 6: log 264 = 5.6 for these near-uniform
# tiny models), so 1e-4 is 11 times that (the worst case, (N-1) u |lp| =
# 2e-4, needs every rounding in one direction).  Measured: at most 1.3e-5
# in tests/unit/test_teach_kv.c and all teach.bats checks passing with
# OpenBLAS's Haswell, SkylakeX, Zen, Sandybridge and Cooperlake kernels,
# FW_THREADS 1 and 2, and under taskset -c 0.
close_to() {
  jq -e -n --argjson a "$1" --argjson b "$2" \
    '($a | length) == ($b | length) and ([$a, $b] | transpose | all(.[0] - .[1] | fabs < 1e-4))'
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
  run -2 teach --hints env,model:ftp:x
  assert_output --partial "unknown or unsupported source 'model:ftp:x'"
  run -2 teach --clip -1
  run -2 teach --teacher ftp:x
  assert_output --partial "want builtin:DIR, http:URL or none"
  run -2 teach -j 0
  run -2 teach --hint-prompt 100
  run -2 teach --hint-tokens 0
  run -2 teach --hint-temp -1
}

@test "the usage and the man page's SYNOPSIS agree word for word" {
  run --separate-stderr teach --help
  assert_success
  [ -z "$stderr" ]
  load usage
  usage_is_synopsis teach
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

@test "env hints: a failing test's message from grade.messages, in place of the counts" {
  fill
  rec json "$T/f.mp" | jq -c '.grade.messages = {"test_sum": "sum(2) returned None, expected 4"}' |
    rec from-json | teach --teacher none | rec json > "$T/o.json"
  run -0 jq -r '.teach.hints[0].text' "$T/o.json"
  assert_output 'test test_sum: fail: sum(2) returned None, expected 4'
}

@test "credit beside a correct solution: teach.adv_split and the line on stderr, for failing fill rollouts only" {
  fill
  # the group: f1 answers "5", a resolved sample "4" (tokens 52, 257); the
  # policy tokens "5" and EOS align to "4" and EOS: "5" differs, EOS not
  rec json "$T/f.mp" | jq -c '., (.id = "f2" | .turns[1].text = "4" | .tokens[4] = 52
      | .patch = "" | .grade = {reward: 1, resolved: true, tests: {test_sum: "pass"}, hacks: []})' |
    jq -c '.task = {id: "t"}' | rec from-json > "$T/g.mp"
  run --separate-stderr teach --hints env,demo "$T/g.mp" -o "$T/o.mp"
  assert_success
  rec json "$T/o.mp" > "$T/o.json"
  adv=$(jq -c 'select(.id == "f1") | .teach.adv' "$T/o.json")
  run -0 jq -c --argjson a "$adv" 'select(.id == "f1") | .teach.adv_split
    | [.n_differ, .n_rest, .differ == $a[0], .rest == $a[1]]' "$T/o.json"
  assert_output '[1,1,true,true]'
  # the resolved one is not compared
  run -0 jq -c 'select(.id == "f2") | .teach | has("adv_split")' "$T/o.json"
  assert_output false
  [[ "$stderr" == *"teach: credit beside a correct solution (1 rollouts): mean "*" on the 1 tokens that differ, "*" on the 1 others"* ]]
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
  close_to "$got" "$want"
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
  assert_output '["g1-0",[1,"demo","a correct solution looked like this:\n    return x * 2"]]
["g1-1"]
["g2-0"]
["g3-0",[1,"demo","a correct solution looked like this:\nthe fill text"]]
["g3-1"]'
  # the order of records is kept, and without demo no group is formed
  run -0 bash -c "rec from-json '$FX/group.json' | teach --hints env --teacher none | rec json | jq -r .id | tr '\n' ' '"
  assert_output 'g1-0 g1-1 g2-0 g3-0 g3-1 '
  # a demo is cut to 5 times --max-chars: 50 bytes, less the space the
  # cut ends on ("...like this:\n    return x ")
  rec from-json "$FX/group.json" | teach --hints demo --max-chars 10 --teacher none |
    rec json | jq -r 'select(.id == "g1-0") | .teach.hints[0].text | length' > "$T/n"
  run -0 cat "$T/n"
  assert_output 49
}

@test "a hint naming the right answer, from rules or from a trained teacher through serve: the wrong answer gets negative credit, the right one positive" {
  ckpt init "$M/tiny-qwen2.json" "$T/ck" --seed 1 > /dev/null
  # teach a tiny model to answer what the hint says: "Q=\nHint: the answer is D\nD",
  # and, asked for a hint on the fill below (teach(1)'s documented prompt), to
  # write "the answer is 7"
  {
    for d in 0 1 2 3 4 5 6 7 8 9; do
      jq -cn --arg p "$(printf 'Q=\nHint: the answer is %s\n_' $d)" --arg c $d \
        '($p | rtrimstr("_")) as $p | {kind: "seq", tokens: (($p + $c) | explode),
         mask: (($p | explode | map(0)) + [1])}'
    done
    p='Task:\nQ=\n\nOutcome: not resolved\n\nEarlier turns:\n(none)\n\nTurn 1 (assistant):\n?\n\nOne short hint for turn 1, what to do differently:\nHint:'
    for _ in 1 2; do
      jq -cn --arg p "$(printf "$p")" --arg c "$(printf ' the answer is 7\n_')" \
        '($c | rtrimstr("_")) as $c | {kind: "seq", tokens: (($p + $c) | explode),
         mask: (($p | explode | map(0)) + ($c | explode | map(1)))}'
    done
  } | rec from-json > "$T/c.mp"
  for i in 1 2 3 4 5 6 7 8 9 10; do cat "$T/c.mp"; done > "$T/c10.mp"
  train-step --ckpt "$T/ck" --out "$T/run" --lr 3e-3 --steps 150 --batch-size 12 \
    --objective sft -o "$T/m.mp" "$T/c10.mp"
  ck=$(ls -d "$T"/run/step-* | tail -1)
  # rollouts answering 5 (wrong) and 7 (right) with a uniform student log-prob
  for a in 53 55; do
    echo "{\"id\":\"a$a\",\"policy\":{\"ckpt\":\"$ck\"},\"turns\":[{\"role\":\"user\",\"text\":\"Q=\"},{\"role\":\"assistant\",\"text\":\"?\",\"logprobs\":[-2.3026]}],\"tokens\":[81,61,$a],\"mask\":[0,0,1],\"grade\":{\"resolved\":false}}"
  done | rec from-json > "$T/q.mp"
  verdict='[.id, .teach.hints[0].text, .teach.hints[0].source, (.teach.adv[0] | if . < -1 then "neg" elif . > 1 then "pos" else "small" end)]'
  # a rule states the answer; the builtin teacher re-scores
  echo 'never 7: the answer is 7' > "$T/rules"
  teach --hints rules --rules "$T/rules" "$T/q.mp" | rec json > "$T/o.json"
  run -0 jq -c "$verdict" "$T/o.json"
  assert_output '["a53","the answer is 7","rules","neg"]
["a55","the answer is 7","rules","pos"]'
  # --topk 3: on both rollouts the hinted teacher's first choice is 7 (id
  # 55), log-probs falling; the credit is the same as without it
  teach --hints rules --rules "$T/rules" --topk 3 "$T/q.mp" | rec json > "$T/k.json"
  run -0 jq -c '[.id, .teach.topk.k, .teach.topk.from, .teach.topk.ids[0], (.teach.topk.ids | length),
    (.teach.topk.logprobs | . == (sort | reverse) and all(. <= 0))]' "$T/k.json"
  assert_output '["a53",3,0,55,3,true]
["a55",3,0,55,3,true]'
  [ "$(jq -sc 'map(.teach.adv)' "$T/k.json")" = "$(jq -sc 'map(.teach.adv)' "$T/o.json")" ]
  # train-step --objective topk moves an untrained student toward what the
  # hint made the teacher say: after "Q=" the log-prob of 7 rises, and
  # beyond that of 5, the answer the wrong rollout wrote
  score() { echo "{\"tokens\":[81,61,$1]}" | rec from-json | ckpt score "$2" | rec json | jq '.logprobs[-1]'; }
  jq -c 'select(.id == "a53")' "$T/k.json" | rec from-json > "$T/k53.mp"
  train-step --ckpt "$T/ck" --out "$T/krun" --objective topk --lr 1e-2 --steps 10 \
    --schedule constant -o "$T/km.mp" "$T/k53.mp"
  kck=$(ls -d "$T"/krun/step-* | tail -1)
  b7=$(score 55 "$T/ck") a7=$(score 55 "$kck") a5=$(score 53 "$kck")
  echo "log p(7): $b7 -> $a7; log p(5) after: $a5"
  awk -v b="$b7" -v a="$a7" -v f="$a5" 'BEGIN { exit !(a > b + 1 && a > f) }'
  rec json "$T/km.mp" | jq -se 'map(.loss_topk) | .[0] > .[-1] and .[-1] > 0'
  # the trained model, served, writes the hint and re-scores through serve
  serve_start t --ckpt "t=$ck"
  teach --hints "model:http:$URL" --teacher "http:$URL" "$T/q.mp" | rec json > "$T/h.json"
  run -0 jq -c "$verdict" "$T/h.json"
  assert_output '["a53","the answer is 7","model","neg"]
["a55","the answer is 7","model","pos"]'
  # the same checkpoint in process gives the same hint and credit
  teach --hints "model:builtin:$ck" "$T/q.mp" | rec json > "$T/b.json"
  run -0 jq -c "$verdict" "$T/b.json"
  assert_output '["a53","the answer is 7","model","neg"]
["a55","the answer is 7","model","pos"]'
  close_to "$(jq -sc 'map(.teach.adv[])' "$T/h.json")" "$(jq -sc 'map(.teach.adv[])' "$T/b.json")"
  # an http teacher gives no top-k: a usage error
  run -2 --separate-stderr teach --hints rules --rules "$T/rules" --teacher "http:$URL" --topk 3 "$T/q.mp"
  [ -z "$output" ]
  [[ $stderr == *"--topk needs a builtin teacher"* ]]
}

@test "http teacher: serve's prompt log-probs give the builtin teacher's advantages, fill and agent" {
  fill
  serve_start a --ckpt "a=$T/ck"
  teach "$T/f.mp" | rec json > "$T/b.json"
  teach --teacher "http:$URL" "$T/f.mp" | rec json > "$T/h.json"
  close_to "$(jq -c .teach.adv "$T/h.json")" "$(jq -c .teach.adv "$T/b.json")"
  run -0 jq -r .teach.teacher "$T/h.json"
  assert_output "http:$URL"
  # the model named after '#', tokens of the checkpoint's own tokenizer
  teach --teacher "http:$URL#a" --clip 100 "$T/f.mp" | rec json | jq -c .teach.adv > "$T/h100"
  teach --clip 100 "$T/f.mp" | rec json | jq -c .teach.adv > "$T/b100"
  close_to "$(cat "$T/h100")" "$(cat "$T/b100")"
  # agent rollouts: the chat rendered here, scored there
  jq '.max_position_embeddings = 4096' "$M/tiny-qwen2.json" > "$T/long.json"
  ckpt init "$T/long.json" "$T/lck" --seed 1 > /dev/null
  serve_start l --ckpt "l=$T/lck"
  jq -c '.turns[3].exit = 0' "$FX/agent.json" | rec from-json > "$T/a.mp"
  teach --teacher "builtin:$T/lck" --clip 100 "$T/a.mp" | rec json | jq -c .teach.adv > "$T/ab"
  teach --teacher "http:$URL" --tokenizer "$T/lck/tokenizer.json" --clip 100 "$T/a.mp" |
    rec json | jq -c .teach.adv > "$T/ah"
  run -0 jq -c '.[0:3]' "$T/ah"
  assert_output '[0,0,0]'
  close_to "$(cat "$T/ah")" "$(cat "$T/ab")"
  # without a tokenizer for the rollout's tokens, no credit, said why
  teach --teacher "http:$URL" "$T/a.mp" | rec json > "$T/o.json"
  run -0 jq -c '[.teach.adv_omitted, (.teach.hints | length)]' "$T/o.json"
  assert_output '["no tokenizer for the http teacher: no --tokenizer and no policy.ckpt",3]'
}

@test "model hints: one per failing record on its weak turn, the same from serve as in process, bounded and seeded" {
  fill
  serve_start a --ckpt "a=$T/ck"
  teach --hints "env,model:http:$URL" "$T/f.mp" | rec json > "$T/h.json"
  teach --hints "env,model:builtin:$T/ck" "$T/f.mp" | rec json > "$T/b.json"
  teach --hints "env,model:policy" "$T/f.mp" | rec json > "$T/p.json"
  run -0 jq -c '[.teach.hints[] | [.turn, .source]]' "$T/h.json"
  assert_output '[[1,"env"],[1,"model"]]'
  run -0 jq -r '.teach.hints[1].text | length > 0' "$T/h.json"
  assert_output true
  # greedy: the same text whoever decodes it
  [ "$(jq -c .teach "$T/h.json")" = "$(jq -c .teach "$T/b.json")" ]
  [ "$(jq -c .teach "$T/p.json")" = "$(jq -c .teach "$T/b.json")" ]
  # the hint is re-scored with the others: credit differs from env alone
  teach --hints env "$T/f.mp" | rec json | jq -c .teach.adv > "$T/env"
  [ "$(jq -c .teach.adv "$T/b.json")" != "$(cat "$T/env")" ]
  # at most --hint-tokens tokens (bytes, for this byte-level tokenizer)
  teach --hints "model:http:$URL" --hint-tokens 5 --teacher none "$T/f.mp" | rec json > "$T/s.json"
  run -0 jq -r '.teach.hints[0].text | utf8bytelength <= 5' "$T/s.json"
  assert_output true
  # sampled: the same seed, the same hint; another seed, another one
  for s in 5 5 6; do
    teach --hints "model:builtin:$T/ck" --hint-temp 1 --seed $s --teacher none "$T/f.mp" |
      rec json | jq -r '.teach.hints[0].text'
  done > "$T/seeds"
  run -0 bash -c "uniq '$T/seeds' | wc -l"
  assert_output 2
  # serve draws the same from the same seed
  teach --hints "model:http:$URL" --hint-temp 1 --seed 5 --teacher none "$T/f.mp" |
    rec json | jq -r '.teach.hints[0].text' > "$T/hs"
  [ "$(cat "$T/hs")" = "$(head -1 "$T/seeds")" ]
  # a passing rollout has no weak turn: no hint asked for
  rec from-json "$FX/pass.json" | teach --hints "model:http:$URL" --teacher none | rec json > "$T/o.json"
  run -0 jq -c .teach "$T/o.json"
  assert_output '{"hints":[]}'
}

@test "a teacher that fails (server down, a bad answer): each record says why and is still written" {
  fill
  # a port nothing listens on any more
  serve_start d --ckpt "d=$T/ck"
  kill "$(cat "$T/d.pid")"; wait "$(cat "$T/d.pid")" 2>/dev/null || true
  (cat "$T/f.mp"; rec from-json "$FX/agent.json") > "$T/two.mp"
  run -0 --separate-stderr bash -c "teach --hints 'env,model:http:$URL' --teacher 'http:$URL' \
    --tokenizer '$T/ck/tokenizer.json' --timeout 5 '$T/two.mp' | rec json | jq -c '[.id, (.teach.hints | length), .teach.hint_error, .teach.adv_omitted]'"
  [ "${#lines[@]}" -eq 2 ]
  [[ ${lines[0]} == '["f1",1,"'"$URL"'/completions: '* ]]
  [[ ${lines[1]} == '["a1",4,"'"$URL"'/completions: '* ]]
  [[ $stderr == *"teach: $T/two.mp: record 1 (byte 0): model hint: $URL/completions: "* ]]
  [[ $stderr == *"record 2 "*"teacher: $URL/completions: "* ]]
  # a server that answers, but neither a completion nor prompt log-probs
  /usr/bin/python3 -c '
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        b = b"{\"choices\": [{\"index\": 0}]}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print("http://127.0.0.1:%d/v1" % s.server_port, flush=True)
s.serve_forever()' > "$T/bad.url" &
  echo $! > "$T/bad.pid"
  for _ in $(seq 100); do [ -s "$T/bad.url" ] && break; sleep 0.05; done
  B=$(cat "$T/bad.url")
  teach --hints "env,model:http:$B" --teacher "http:$B" "$T/f.mp" 2> /dev/null | rec json > "$T/o.json"
  run -0 jq -r '.teach.hint_error, .teach.adv_omitted, (.teach.hints | length)' "$T/o.json"
  assert_line --index 0 --partial "the answer is not a completion"
  assert_line --index 1 --partial "the answer has no prompt log-probs"
  assert_line --index 2 1
  # a model the server does not serve
  serve_start a --ckpt "a=$T/ck"
  teach --teacher "http:$URL#nope" "$T/f.mp" 2> /dev/null | rec json | jq -r .teach.adv_omitted > "$T/r"
  run -0 cat "$T/r"
  assert_output --partial "HTTP 404: no such model"
}

@test "-j N: the same bytes as -j 1, in input order, and bad input still costs only itself" {
  jq '.max_position_embeddings = 4096' "$M/tiny-qwen2.json" > "$T/long.json"
  ckpt init "$T/long.json" "$T/ck" --seed 1 > /dev/null
  sed "s|CKPT|$T/ck|" "$FX/fill.json" | rec from-json > "$T/f.mp"
  for i in 1 2 3 4; do
    cat "$T/f.mp"; rec from-json "$FX/agent.json"; rec from-json "$FX/group.json"
    rec from-json "$FX/pass.json"
  done > "$T/mix.mp"
  args=(--hints "env,demo,model:builtin:$T/ck" --teacher "builtin:$T/ck" --hint-temp 1 --seed 3)
  teach "${args[@]}" -j 1 "$T/mix.mp" > "$T/j1"
  run -0 rec count "$T/j1"
  assert_output 32
  for j in 2 3; do
    teach "${args[@]}" -j $j "$T/mix.mp" > "$T/j$j"
    cmp "$T/j1" "$T/j$j"
  done
  # every record got credit and its model hint
  run -0 bash -c "rec json '$T/j1' | jq -c 'select(.teach.hints | any(.source == \"model\")) | has(\"teach\")' | wc -l"
  assert_output 20
  # a malformed record at the end: exit 1, every good record before it written
  run -1 --separate-stderr bash -c "set -o pipefail; (cat '$T/mix.mp'; printf '\xc1') | teach ${args[*]} -j 3 | rec count"
  assert_output 32
  [[ $stderr == *"record 33"*"not msgpack"* ]]
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
  # --topk: from the first hinted turn's tokens on (the 3 before it have none)
  jq -c '.turns[3].exit = 0' "$FX/agent.json" | rec from-json |
    teach --teacher "builtin:$T/lck" --topk 2 > "$T/bk.mp"
  run -0 bash -c "rec json '$T/bk.mp' | jq -c '.teach.topk | [.k, .from, (.ids | length), (.logprobs | length)]'"
  assert_output '[2,3,2,2]'
  run -0 train-step --ckpt "$T/lck" --out "$T/krun" --objective topk -o "$T/km.mp" "$T/bk.mp"
  run -0 bash -c "rec json '$T/km.mp' | jq -c '[.tokens, .loss_topk > 0, .loss_distill]'"
  assert_output '[7,true,0]'
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

@test "too long for the model: the prompt is cut from its far end, then the hint to its first lines; credit omitted only when the completion alone does not fit" {
  fill
  R=$(printf 'r%.0s' $(seq 200))
  rec json "$T/f.mp" | jq -c --arg r "$R" '
    ([range(300) | 50, 43] + [61]) as $p |
    # a prompt of 601 tokens: only its last ones fit with the hint
    (.id = "p" | .tokens = $p + [53, 257] | .mask = [$p[] | 0] + [1, 1]),
    # four failing tests of 215-byte lines: the hint alone does not fit
    (.id = "h" | .grade.reason = $r | .grade.tests = {t1: "fail", t2: "fail", t3: "fail", t4: "fail"}),
    # a 512-token completion: nothing fits
    (.id = "c" | .tokens = [50] + [range(512) | 53] | .mask = [0] + [range(512) | 1] |
     .turns[1].logprobs = [range(512) | -1.0])' | rec from-json > "$T/long.mp"
  run -0 --separate-stderr teach -o "$T/t.mp" "$T/long.mp"
  assert_equal "$stderr" "$(printf '%s\n' 'teach: credit for 2 of 3 failing rollouts (66.7%)' \
    "teach: omitted for 1: N-token completion, more than the model's N")"
  rec json "$T/t.mp" > "$T/t.json"
  run -0 jq -c '[.id, (.teach.adv | length), .teach.adv_omitted]' "$T/t.json"
  assert_line --index 0 '["p",2,null]'
  assert_line --index 1 '["h",2,null]'
  assert_line --index 2 '["c",0,"512-token completion, more than the model'"'"'s 512"]'
  # ckpt score on what the teacher was to read: the prompt's last tokens
  # (512 in all), or the prompt and the hint's first two lines
  hint=$(jq -r 'select(.id == "p") | .teach.hints[0].text' "$T/t.json")
  h=$(printf '\nHint: %s\n' "$hint" | od -An -tu1 -v | tr -s ' \n' ',,' | sed 's/^,//;s/,$//')
  keep=$((512 - 2 - $(printf '\nHint: %s\n' "$hint" | wc -c)))
  two=$(jq -r 'select(.id == "h") | .teach.hints[0:2] | map(.text) | join("\n")' "$T/t.json")
  [ "${#two}" -eq 433 ]
  h2=$(printf '\nHint: %s\n' "$two" | od -An -tu1 -v | tr -s ' \n' ',,' | sed 's/^,//;s/,$//')
  for c in "p:$(jq -c --argjson k "$keep" 'select(.id == "p") | .tokens[-($k + 2):-2]' "$T/t.json" | tr -d '[]'),$h" \
           "h:50,43,50,61,$h2"; do
    id=${c%%:*}
    echo "{\"tokens\":[${c#*:},53,257]}" | rec from-json | ckpt score "$T/ck" |
      rec json | jq -c '.logprobs[-2:] | [(.[0] + 1.0), (.[1] + 2.0)] | map(if . > 5 then 5 elif . < -5 then -5 else . end)' > "$T/want"
    [ "$(jq -c --arg id "$id" 'select(.id == $id) | .teach.adv' "$T/t.json" | wc -c)" -gt 3 ]
    close_to "$(jq -c --arg id "$id" 'select(.id == $id) | .teach.adv' "$T/t.json")" "$(cat "$T/want")"
  done
  # a tokenizer with a BOS (<|begin_of_text|>, 259): the prompt's BOS stays
  jq -c '.post_processor = {type: "TemplateProcessing", single: [{SpecialToken: {id: "<|begin_of_text|>", type_id: 0}}, {Sequence: {id: "A", type_id: 0}}]}' \
    "$T/ck/tokenizer.json" > "$T/tj" && mv "$T/tj" "$T/ck/tokenizer.json"
  rec json "$T/long.mp" | jq -c 'select(.id == "p") | .tokens = [259] + .tokens | .mask = [0] + .mask' |
    rec from-json | teach 2> /dev/null | rec json > "$T/b.json"
  p=$(jq -c --argjson k "$((keep - 1))" '.tokens[-($k + 2):-2]' "$T/b.json" | tr -d '[]')
  echo "{\"tokens\":[259,$p,$h,53,257]}" | rec from-json | ckpt score "$T/ck" |
    rec json | jq -c '.logprobs[-2:] | [(.[0] + 1.0), (.[1] + 2.0)] | map(if . > 5 then 5 elif . < -5 then -5 else . end)' > "$T/want"
  close_to "$(jq -c .teach.adv "$T/b.json")" "$(cat "$T/want")"
}
