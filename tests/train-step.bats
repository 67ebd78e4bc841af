#!/usr/bin/env bats
# train-step: optimizer steps from record streams into checkpoint
# directories; the losses and the AdamW step checked against PyTorch
# (tests/ref/train_ref.py).

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C FW_THREADS=${FW_THREADS:-2}
  M="$BATS_TEST_DIRNAME/../samples/models"
  REF="$BATS_TEST_DIRNAME/ref/train_ref.py"
  PY=/usr/bin/python3
  T="$BATS_TEST_TMPDIR"
}

# a small fixed corpus: four sentences as byte-tokenizer ids after a BOS
corpus() {
  for s in 'the quick brown fox jumps over the lazy dog. ' \
           'hello world, hello flywheel. ' \
           'def add(a, b): return a + b' \
           'to be or not to be, that is the question. '; do
    printf '%s' "$s" | od -An -tu1 -v | tr -s ' \n' '  ' |
      awk '{ printf "{\"kind\":\"seq\",\"tokens\":[256"; for (i = 1; i <= NF; i++) printf ",%s", $i; print "]}" }'
  done | rec from-json > "$T/corpus.mp"
}

# a checkpoint with weights large enough for peaked outputs, and records
# from the reference for it
ref_setup() {
  jq '.initializer_range = 0.2' "$M/tiny-llama.json" > "$T/cfg.json"
  ckpt init "$T/cfg.json" "$T/r0" --seed 3
  "$PY" "$REF" make "$T/r0" 13 1 > "$T/recs.jsonl"
  rec from-json "$T/recs.jsonl" > "$T/recs.mp"
}

@test "--help prints the usage on stdout; missing --ckpt is a usage error" {
  run -0 --separate-stderr train-step --help
  assert_line --index 0 --partial 'usage: train-step --ckpt DIR --out DIR'
  run -2 --separate-stderr train-step --out "$T/o"
  [ -z "$output" ]
  [[ $stderr == *"--ckpt and --out are required"* ]]
  run -2 train-step --ckpt "$T/x" --out "$T/o" --objective sft,bogus
  run -2 train-step --ckpt "$T/x" --out "$T/o" --objective pg --kl-coef 0.1
  assert_output --partial '--kl-coef needs --ref DIR'
}

@test "sft on a small fixed corpus drives the loss from 5.6 below 1.0 in 40 steps" {
  corpus
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  run -0 --separate-stderr train-step --ckpt "$T/m0" --out "$T/run" --lr 3e-3 --steps 40 \
    --warmup 5 --decay-steps 200 -o "$T/metrics.mp" "$T/corpus.mp"
  [ -z "$output" ]
  rec json "$T/metrics.mp" > "$T/m.jsonl"
  [ "$(wc -l < "$T/m.jsonl")" -eq 40 ]
  first=$(jq -s '.[0].loss' "$T/m.jsonl")
  last=$(jq -s '.[39].loss' "$T/m.jsonl")
  echo "loss $first -> $last"
  jq -e -n "$first > 5 and $last < 1.0"
}

@test "a checkpoint directory holds weights, optimizer, tokenizer and trainer_state.json; latest points at it" {
  corpus
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  train-step --ckpt "$T/m0" --out "$T/run" --steps 2 --batch-size 3 "$T/corpus.mp" > "$T/m.mp"
  for f in config.json model.safetensors optimizer.safetensors tokenizer.json trainer_state.json; do
    [ -s "$T/run/latest/$f" ]
  done
  run jq -c '[.step, .data_position, .tokens_seen > 0, .schedule.name]' "$T/run/latest/trainer_state.json"
  assert_output '[2,2,true,"cosine"]'
  id=$(jq -r .id "$T/run/latest/trainer_state.json")
  [ "$(readlink "$T/run/latest")" = "step-00000002-$id" ]
  run ckpt info "$T/run"/latest
  assert_success
  # one metrics record per step, naming the checkpoint
  run rec json "$T/m.mp"
  assert_line --index 0 --regexp '^\{"kind":"metrics","id":"[0-9a-f]{16}","v":1,"step":1,"ckpt":"'"$id"'"'
  assert_line --index 1 --partial '"step":2,'
  rec json "$T/m.mp" | jq -e 'has("loss") and has("grad_norm") and has("lr") and has("tokens") and has("tok_per_s")' > /dev/null
}

@test "two invocations resume to the same bytes as one run, schedule and data position included" {
  corpus
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  train-step --ckpt "$T/m0" --out "$T/a" --lr 3e-3 --steps 6 --batch-size 3 --warmup 2 --decay-steps 10 "$T/corpus.mp" > /dev/null
  train-step --ckpt "$T/m0" --out "$T/b" --lr 3e-3 --steps 2 --batch-size 3 --warmup 2 --decay-steps 10 "$T/corpus.mp" > /dev/null
  # the second takes the schedule from trainer_state.json
  train-step --ckpt "$T/b" --out "$T/b" --steps 4 --batch-size 3 "$T/corpus.mp" > /dev/null
  cmp "$T/a/latest/model.safetensors" "$T/b/latest/model.safetensors"
  cmp "$T/a/latest/optimizer.safetensors" "$T/b/latest/optimizer.safetensors"
  [ "$(jq .data_position "$T/b/latest/trainer_state.json")" = 2 ]
}

@test "other input starts from its first sequence; --seed draws one order, the same each time" {
  corpus
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  train-step --ckpt "$T/m0" --out "$T/a" --batch-size 3 "$T/corpus.mp" > /dev/null
  [ "$(jq .data_position "$T/a/latest/trainer_state.json")" = 3 ]
  rec head -n 2 "$T/corpus.mp" > "$T/two.mp"
  train-step --ckpt "$T/a" --out "$T/a" --batch-size 1 "$T/two.mp" > /dev/null
  [ "$(jq .data_position "$T/a/latest/trainer_state.json")" = 1 ]
  train-step --ckpt "$T/m0" --out "$T/s1" --batch-size 1 --seed 7 "$T/corpus.mp" | rec json > "$T/s1.jsonl"
  train-step --ckpt "$T/m0" --out "$T/s2" --batch-size 1 --seed 7 "$T/corpus.mp" | rec json > "$T/s2.jsonl"
  train-step --ckpt "$T/m0" --out "$T/s0" --batch-size 1 "$T/corpus.mp" | rec json > "$T/s0.jsonl"
  cmp "$T/s1/latest/model.safetensors" "$T/s2/latest/model.safetensors"
  # seed 7 does not start with the first sentence (45 trained tokens)
  [ "$(jq .tokens "$T/s0.jsonl")" = 45 ]
  [ "$(jq .tokens "$T/s1.jsonl")" != 45 ]
  # the seed is kept: 3 steps from the seeded checkpoint continue its order
  train-step --ckpt "$T/m0" --out "$T/s3" --batch-size 1 --seed 7 --steps 4 "$T/corpus.mp" > /dev/null
  train-step --ckpt "$T/s1" --out "$T/s1" --batch-size 1 --steps 3 "$T/corpus.mp" > /dev/null
  [ "$(jq -r .seed "$T/s1/latest/trainer_state.json")" = 7 ]
  cmp "$T/s1/latest/model.safetensors" "$T/s3/latest/model.safetensors"
}

@test "a rollout's turns: assistant tokens with their logprobs, teach.adv per turn token" {
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  for r in 0 1; do
    echo '{"kind":"rollout","task":{"id":"t1"},"turns":[{"role":"user","text":"go"},{"role":"assistant","text":"hi","tokens":[104,105],"logprobs":[-1.5,-2.5]},{"role":"tool","text":"ok"},{"role":"assistant","text":"x","tokens":[120],"logprobs":[-30]}],"grade":{"reward":'$r'},"teach":{"adv":[0.1,0.2,0.3]}}'
  done | rec from-json > "$T/ro.mp"
  train-step --ckpt "$T/m0" --out "$T/run" --objective pg,distill -o "$T/m.mp" "$T/ro.mp"
  # 2 x ("hi" + end, "x" + end); the end tokens have no logprob (ratio 1);
  # "x" at logprob -30 has a ratio far above 1 + 0.28: clipped for the
  # rollout with the positive advantage, and over --is-clip for both
  rec json "$T/m.mp" | jq -e '.tokens == 10 and .groups == 1 and .skipped_groups == 0 and .is_clip_frac == 2 / 6'
  echo '{"kind":"rollout","turns":[{"role":"user","text":"go"},{"role":"assistant","text":"hi","tokens":[104,105],"logprobs":[-1]}]}' |
    rec from-json > "$T/bad.mp"
  run -1 train-step --ckpt "$T/m0" --out "$T/run2" "$T/bad.mp"
  assert_output --partial "turn 1: 1 'logprobs' for 2 'tokens'"
}

@test "--route: a rollout with teacher credit is left to distill, the others to pg" {
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  # one group: a success without credit, a failure with credit on its
  # first token; three trained tokens each, no sampling log-probs (ratio 1)
  { echo '{"kind":"rollout","id":"a","task":{"id":"t1"},"tokens":[104,105,106,107],"mask":[0,1,1,1],"grade":{"reward":1},"teach":{"adv":[0,0,0]}}'
    echo '{"kind":"rollout","id":"b","task":{"id":"t1"},"tokens":[104,108,109,110],"mask":[0,1,1,1],"grade":{"reward":0},"teach":{"adv":[-1,0,0]}}'
  } | rec from-json > "$T/ro.mp"
  # GRPO without std: advantages +0.5 and -0.5; loss_pg = -mean of A over
  # the pg tokens: 0 over both rollouts' six, -0.5 over the success's three;
  # loss_distill = -mean of a over the six tokens with credit: 1/6 in both
  train-step --ckpt "$T/m0" --out "$T/r0" --objective pg,distill --no-std -o "$T/m0.mp" "$T/ro.mp"
  train-step --ckpt "$T/m0" --out "$T/r1" --objective pg,distill --no-std --route -o "$T/m1.mp" "$T/ro.mp"
  # r is exactly 1 (old = the current log-prob), so these are sums of
  # +-0.5/6 and -1/6 in double: 1e-9 is far above their rounding (1e-16)
  rec json "$T/m0.mp" | jq -e '(.loss_pg | fabs) < 1e-9 and (.loss_distill - 1/6 | fabs) < 1e-9'
  rec json "$T/m1.mp" | jq -e '(.loss_pg + 0.5 | fabs) < 1e-9 and (.loss_distill - 1/6 | fabs) < 1e-9'
}

@test "--keep 2 leaves the two newest checkpoints" {
  corpus
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  train-step --ckpt "$T/m0" --out "$T/run" "$T/corpus.mp" > /dev/null
  for i in 1 2 3; do
    train-step --ckpt "$T/run" --out "$T/run" --keep 2 "$T/corpus.mp" > /dev/null
  done
  run ls "$T/run"
  assert_output --regexp $'^latest\nstep-00000003-[0-9a-f]{16}\nstep-00000004-[0-9a-f]{16}$'
}

# close A B: the first metrics records of A and B (JSON lines) agree in
# loss and grad_norm as float32 sums of the same terms in another order.
# N terms added in another order move by at most (N-1) u sum|x| (u = 2^-24;
# Higham, Accuracy and Stability of Numerical Algorithms, 4.2); the longest
# sums behind each figure are the step's tokens and the 264 logits of each
# token's softmax (tiny-llama's vocabulary), so N = tokens + 264.
close() {
  jq -e -n --slurpfile a "$1" --slurpfile b "$2" '
    (($a[0].tokens + 264 - 1) * pow(2; -24)) as $tol
    | def near(x; y): ((x - y) / x | fabs) <= $tol;
    $a[0].tokens == $b[0].tokens and near($a[0].loss; $b[0].loss)
    and near($a[0].grad_norm; $b[0].grad_norm)'
}

# 143 tokens: a bound of 2.4e-5 relative (measured: at most 4.3e-8 for the
# loss and 1.1e-8 for grad_norm with OpenBLAS's Haswell, SkylakeX, Zen,
# Sandybridge and Cooperlake kernels, FW_THREADS 1 and 2)
@test "micro-batches of --batch-tokens give the update of one batch" {
  corpus
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  train-step --ckpt "$T/m0" --out "$T/a" --lr 1e-2 "$T/corpus.mp" | rec json > "$T/a.jsonl"
  train-step --ckpt "$T/m0" --out "$T/b" --lr 1e-2 --batch-tokens 48 "$T/corpus.mp" | rec json > "$T/b.jsonl"
  close "$T/a.jsonl" "$T/b.jsonl"
}

@test "a traj record trains on its assistant turns only (the chat template's mask)" {
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  echo '{"kind":"traj","turns":[{"role":"system","text":"be brief"},{"role":"user","text":"say hi"},{"role":"assistant","text":"hi there"},{"role":"user","text":"again"},{"role":"assistant","text":"hi"}]}' |
    rec from-json > "$T/t.mp"
  train-step --ckpt "$T/m0" --out "$T/run" -o "$T/m.mp" "$T/t.mp"
  # "hi there" + <|im_end|>, "hi" + <|im_end|>
  rec json "$T/m.mp" | jq -e '.tokens == 12'
}

@test "sft, pg, distill and their mix match the pytorch reference, losses and the AdamW update" {
  ref_setup
  for obj in sft pg distill topk 'sft:0.5,pg,distill:0.3' 'pg,topk:0.7'; do
    rm -rf "$T/r1"
    train-step --ckpt "$T/r0" --out "$T/r1" --objective "$obj" --lr 1e-2 --eps 1e-3 \
      --clip-grad 0.5 --schedule constant "$T/recs.mp" | rec json > "$T/m.jsonl"
    run "$PY" "$REF" check "$T/r0" "$T/r1/latest" "$T/recs.jsonl" "$T/m.jsonl" \
      --objective "$obj" --lr 1e-2 --eps 1e-3 --clip-grad 0.5
    echo "$obj: $output"
    assert_success
    assert_line --partial 'ok   update of every parameter after one AdamW step'
  done
}

@test "pg with --no-std, --norm seq, --kl-coef to a reference, DAPO clips and --is-clip match pytorch" {
  ref_setup
  ckpt init "$T/cfg.json" "$T/ref0" --seed 4
  for extra in "--no-std --kl-coef 0.1 --ref $T/ref0" \
               "--norm seq --kl-coef 0.1 --ref $T/ref0 --is-clip 1.2 --clip-low 0.1 --clip-high 0.1"; do
    rm -rf "$T/r1"
    # shellcheck disable=SC2086
    train-step --ckpt "$T/r0" --out "$T/r1" --objective pg,distill:0.3 --lr 1e-2 --eps 1e-3 \
      --schedule constant $extra "$T/recs.mp" | rec json > "$T/m.jsonl"
    # shellcheck disable=SC2086
    run "$PY" "$REF" check "$T/r0" "$T/r1/latest" "$T/recs.jsonl" "$T/m.jsonl" \
      --objective pg,distill:0.3 --lr 1e-2 --eps 1e-3 $extra
    echo "$extra: $output"
    assert_success
    assert_line --partial 'ok   kl:'
    assert_line --partial 'ok   skipped groups: train-step 2, pytorch 2'
  done
}

@test "topk: the KL to the teacher's tokens, every credited token or up to the first miss" {
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  # k = 1 (q = 1 on the teacher's token): the KL is -log p(teacher's token).
  # The teacher agrees on tokens 1, 3 and 4 and would have written 9 at 2.
  echo '{"kind":"rollout","id":"r","tokens":[1,2,3,4,5],"mask":[0,1,1,1,1],"teach":{"adv":[0,0,0,0],"topk":{"k":1,"from":0,"ids":[2,9,4,5],"logprobs":[0,0,0,0]}}}' |
    rec from-json > "$T/k.mp"
  lp() { echo "{\"tokens\":$1}" | rec from-json | ckpt score "$T/m0" | rec json | jq -c .logprobs; }
  a=$(lp '[1,2,3,4,5]') b=$(lp '[1,2,9]')
  for fm in "" --topk-first-miss; do
    rm -rf "$T/r"
    # shellcheck disable=SC2086
    train-step --ckpt "$T/m0" --out "$T/r" --objective topk $fm --steps 1 -o "$T/m.mp" "$T/k.mp"
    # float32 log-probs of a 5-token sequence, summed in another order:
    # 1e-5 relative is ~100 roundings
    if [ -z "$fm" ]; then want='(-$a[0] - $b[1] - $a[2] - $a[3]) / 4'; else want='(-$a[0] - $b[1]) / 2'; fi
    run -0 jq -n --argjson a "$a" --argjson b "$b" --slurpfile m <(rec json "$T/m.mp") \
      "($want) as \$w | (\$m[0].loss_topk - \$w | fabs) <= 1e-5 * \$w"
    assert_output true
  done
  # a malformed teach.topk is refused with the record's position
  echo '{"kind":"rollout","tokens":[1,2,3],"mask":[0,1,1],"teach":{"adv":[0,0],"topk":{"k":1,"ids":[2,9,4],"logprobs":[0,0,0]}}}' |
    rec from-json > "$T/bad.mp"
  run -1 --separate-stderr train-step --ckpt "$T/m0" --out "$T/r2" --objective topk "$T/bad.mp"
  [[ $stderr == *"record 1 (byte 0): 'teach.topk' has 3 tokens from 0, past the 2 of 'teach.adv'"* ]]
}

@test "the reference notices a wrong update" {
  ref_setup
  train-step --ckpt "$T/r0" --out "$T/r1" --objective pg --lr 1e-2 --eps 1e-3 \
    --schedule constant "$T/recs.mp" | rec json > "$T/m.jsonl"
  run "$PY" "$REF" check "$T/r0" "$T/r1/latest" "$T/recs.jsonl" "$T/m.jsonl" \
    --objective pg --lr 1e-2 --eps 1e-3 --clip-high 0.1
  assert_failure
  assert_line --partial 'FAIL update of every parameter'
}

@test "a bad record stops before any step; --skip-bad trains on the rest and counts it" {
  corpus
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  { cat "$T/corpus.mp"; echo '{"kind":"seq","tokens":[1,2,999]}' | rec from-json; echo '{"kind":"x"}' | rec from-json; } > "$T/bad.mp"
  run -1 --separate-stderr train-step --ckpt "$T/m0" --out "$T/run" "$T/bad.mp"
  [ -z "$output" ]
  [[ $stderr == *"bad.mp: record 5 (byte "*"): 'tokens' holds an id outside the vocabulary"* ]]
  [[ $stderr == *"record 6 (byte "*"): record has neither 'tokens', 'turns' nor 'completion'"* ]]
  [ ! -e "$T/run" ]
  run -0 --separate-stderr train-step --ckpt "$T/m0" --out "$T/run" --skip-bad -o "$T/m.mp" "$T/bad.mp"
  rec json "$T/m.mp" | jq -e '.skipped_records == 2 and .seqs == 4'
}

@test "a record of a private task stops the run before any step, --skip-bad or not" {
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  printf '%s\n' \
    '{"kind":"rollout","id":"r1","task":{"kind":"task","id":"a","split":"train"},"prompt":"ab","completion":"cd"}' \
    '{"kind":"rollout","id":"r2","task":{"kind":"task","id":"b","split":"private"},"prompt":"ab","completion":"cd"}' \
    '{"kind":"rollout","id":"r3","task":"c","prompt":"ab","completion":"cd"}' \
    '{"kind":"rollout","id":"r4","task":{"kind":"task","id":"d","split":"train"},"prompt":"ab","completion":"cd"}' \
    '{"kind":"task","id":"e","split":"private","prompt":"ab","completion":"cd"}' | rec from-json > "$T/in.mp"
  # the ids of --private: c by a task id string, d though its split says train
  printf '%s\n' '{"kind":"task","id":"c"}' '{"kind":"task","id":"d"}' | rec from-json > "$T/private.mp"
  run -1 --separate-stderr train-step --ckpt "$T/m0" --out "$T/run" --skip-bad \
    --private "$T/private.mp" -o "$T/m.mp" "$T/in.mp"
  [ -z "$output" ]
  assert_equal "$stderr" "train-step: $T/in.mp: record 2 (byte 77): refusing to train on private task b
train-step: $T/in.mp: record 3 (byte 156): refusing to train on private task c
train-step: $T/in.mp: record 4 (byte 207): refusing to train on private task d
train-step: $T/in.mp: record 5 (byte 284): refusing to train on private task e
train-step: no step taken: 4 record(s) of private tasks in the training input"
  [ ! -e "$T/run" ] && [ ! -e "$T/m.mp" ]
  # without --private only the split counts
  run -1 --separate-stderr train-step --ckpt "$T/m0" --out "$T/run" "$T/in.mp"
  [[ "$stderr" == *"no step taken: 2 record(s) of private tasks"* ]]
  # the training records alone train
  rec head -n 1 "$T/in.mp" > "$T/one.mp"
  run -0 --separate-stderr train-step --ckpt "$T/m0" --out "$T/run" --private "$T/private.mp" \
    -o "$T/m.mp" "$T/one.mp"
  [ -L "$T/run/latest" ]
  # a --private file that cannot be read, or a record of it without an id
  run -1 --separate-stderr train-step --ckpt "$T/m0" --out "$T/run2" --private "$T/nosuch" "$T/one.mp"
  [[ "$stderr" == "train-step: $T/nosuch: "* ]]
  echo '{"kind":"task"}' | rec from-json > "$T/noid.mp"
  run -1 --separate-stderr train-step --ckpt "$T/m0" --out "$T/run2" --private "$T/noid.mp" "$T/one.mp"
  [ "$stderr" = "train-step: --private $T/noid.mp: record 1 has no string 'id'" ]
  [ ! -e "$T/run2" ]
}

@test "a sequence beyond max_position_embeddings is refused, or with --truncate keeps its first tokens" {
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  seq 1 600 | awk '{ printf "%s%d", (NR > 1 ? "," : "{\"tokens\":["), $1 % 256 } END { print "]}" }' |
    rec from-json > "$T/long.mp"
  run -1 train-step --ckpt "$T/m0" --out "$T/run" "$T/long.mp"
  assert_output --partial 'record 1 (byte 0): 600 tokens exceed max_position_embeddings 512'
  train-step --ckpt "$T/m0" --out "$T/run" --truncate "$T/long.mp" | rec json | jq -e '.tokens == 511'
}

@test "rewards: groups of one and equal rewards are skipped and counted, NaN rewards left out" {
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  # group a: mixed; b: all equal; c: alone; d: one NaN and one 0 (then alone)
  for gr in a:1 a:0 a:1 b:1 b:1 c:0.5 'd:{"$float":"nan"}' d:0; do
    echo "{\"kind\":\"rollout\",\"tokens\":[256,104,105],\"group\":\"${gr%%:*}\",\"grade\":{\"reward\":${gr#*:}}}"
  done > "$T/r.jsonl"
  rec from-json "$T/r.jsonl" > "$T/r.mp"
  run -0 --separate-stderr train-step --ckpt "$T/m0" --out "$T/run" --objective pg -o "$T/m.mp" "$T/r.mp"
  [[ $stderr == *"1 records without a finite 'grade.reward' are left out of pg"* ]]
  rec json "$T/m.mp" | jq -e '.groups == 4 and .skipped_groups == 3 and .reward_mean == 4.5 / 7'
}

@test "optimizer state of another architecture is refused and nothing is written" {
  corpus
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  ckpt init "$M/tiny-qwen2.json" "$T/q0" --seed 1
  train-step --ckpt "$T/q0" --out "$T/q" "$T/corpus.mp" > /dev/null
  cp "$T/q/latest/optimizer.safetensors" "$T/m0/"
  run -1 --separate-stderr train-step --ckpt "$T/m0" --out "$T/run" "$T/corpus.mp"
  [[ $stderr == *"optimizer.safetensors"* ]]
  [ ! -e "$T/run" ]
}

@test "a diverging step (NaN) writes no checkpoint" {
  corpus
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  run -1 --separate-stderr train-step --ckpt "$T/m0" --out "$T/run" --lr 1e30 --steps 3 "$T/corpus.mp"
  [[ $stderr == *"not finite"*"no checkpoint written"* ]]
  [ ! -e "$T/run/latest" ]
}

@test "kill -9 at random moments leaves the latest checkpoint whole and loadable" {
  corpus
  # 3M parameters: writing the checkpoint is a fair share of a run
  jq '.hidden_size = 256 | .intermediate_size = 704 | .num_hidden_layers = 4' \
    "$M/tiny-llama.json" > "$T/k.json"
  ckpt init "$T/k.json" "$T/m0" --seed 1
  train-step --ckpt "$T/m0" --out "$T/run" "$T/corpus.mp" > /dev/null
  killed=0
  for i in $(seq 1 25); do
    train-step --ckpt "$T/run" --out "$T/run" --keep 3 "$T/corpus.mp" > /dev/null 2>&1 &
    pid=$!
    sleep "0.$((RANDOM % 3))$((RANDOM % 10))"
    kill -9 "$pid" 2> /dev/null || true
    rc=0
    wait "$pid" || rc=$?
    [ "$rc" -ne 137 ] || killed=$((killed + 1))
    ckpt info "$T/run/latest" > /dev/null
    jq -e '.step >= 1' "$T/run/latest/trainer_state.json" > /dev/null
  done
  echo "killed $killed of 25"
  [ "$killed" -ge 5 ]
  # and training goes on from it, the dead writers' temporary directories removed
  train-step --ckpt "$T/run" --out "$T/run" "$T/corpus.mp" > /dev/null
  ls -a "$T/run"
  [ "$(ls -a "$T/run" | grep -c '^\.tmp-')" -eq 0 ]
}

# Two ranks change only the order of the float32 sums: each rank sums its
# share of the batch and the all-reduce adds the shares.  Adam's default
# eps (1e-8) would turn a last-bit difference of a gradient near zero into
# a different sign of its update, so eps is 1e-3, where the update is a
# smooth function of the gradient.
#
# Step 1 starts from the same parameters, so its loss and grad_norm differ
# by the order of the sums alone (close, above: 99 tokens, 2.2e-5 relative;
# measured: at most 3.6e-7 with OpenBLAS's Haswell, SkylakeX, Zen,
# Sandybridge and Cooperlake kernels, FW_THREADS 1 and 2).
#
# Later steps start from parameters that already differ in their last
# bits, and how far that moves a loss or a gradient norm is the model's
# curvature, not float arithmetic (step 2's grad_norm moved by 1.5e-6 on
# one CPU and 1e-7 on another), so their metrics are not compared; the
# parameters after the three steps are, in one norm.  Each step rounds
# every parameter, so two updates that differ in the last bits land at
# most one ulp (2u|p|) apart per parameter and step, and Adam's step
# m/(sqrt(v)+eps) moves by at most 1/eps per unit of gradient, which lets a
# difference of the gradient reach the parameters at most lr/eps = 10 times
# larger.  Hence |two - one| <= 2 * steps * (lr/eps) * u * |one| = 60 u |one|
# (measured: at most 1.9 u |one|).  That is 7.5e-5 of the norm of the
# update itself (3.5 against |one| = 73); three steps on every other
# record instead end 7.6e5 u |one| away.
@test "mpirun -np 2 gives the update of one process with the same global batch (sums in another order)" {
  command -v mpirun > /dev/null || skip "no mpirun (mpi-default-bin)"
  ref_setup
  common=(--objective sft:0.5,pg,distill:0.3 --lr 1e-2 --eps 1e-3 --steps 3 --batch-size 9 --batch-tokens 64)
  train-step --ckpt "$T/r0" --out "$T/one" "${common[@]}" "$T/recs.mp" | rec json > "$T/one.jsonl"
  run -0 --separate-stderr mpirun --allow-run-as-root --oversubscribe -np 2 \
    "$BIN_DIR/train-step" --ckpt "$T/r0" --out "$T/two" "${common[@]}" -o "$T/two.mp" "$T/recs.mp"
  rec json "$T/two.mp" > "$T/two.jsonl"
  [ "$(wc -l < "$T/two.jsonl")" -eq 3 ]
  close "$T/one.jsonl" "$T/two.jsonl"
  jq -e -n --slurpfile a "$T/one.jsonl" --slurpfile b "$T/two.jsonl" \
    '[range(3) as $i | $a[$i].tokens == $b[$i].tokens] | all'
  run "$PY" "$REF" same "$T/two/latest" "$T/one/latest" --ulps 60
  echo "$output"
  assert_success
}

@test "prompt/completion records train as the same tokens with the completion masked in" {
  ckpt init "$M/tiny-llama.json" "$T/c0" --seed 5 > /dev/null
  printf '%s\n' '{"prompt":"def f(x):\n","completion":"    return x * 3\n"}' \
    '{"prompt":"","completion":"hello"}' | rec from-json > "$T/pc.mp"
  # the same sequences as ids: the byte tokenizer has no BOS, so an empty
  # prompt starts with the end-of-text token; the completion ends with it
  for p_c in 'def f(x):\n|    return x * 3\n' '|hello'; do
    p=${p_c%%|*} c=${p_c#*|}
    printf "$p" > "$T/p"; printf "$c" > "$T/c"
    jq -nc --rawfile p "$T/p" --rawfile c "$T/c" '
      ($p | explode) as $pi | ($c | explode) as $ci
      | (if ($pi | length) == 0 then [256] else [] end) as $start
      | {tokens: ($start + $pi + $ci + [256]),
         mask: ([$start[], $pi[] | 0] + [$ci[], 0 | 1])}'
  done | rec from-json > "$T/ids.mp"
  train-step --ckpt "$T/c0" --out "$T/a" --objective sft --steps 2 --lr 1e-3 --seed 1 -o "$T/ma.mp" "$T/pc.mp"
  train-step --ckpt "$T/c0" --out "$T/b" --objective sft --steps 2 --lr 1e-3 --seed 1 -o "$T/mb.mp" "$T/ids.mp"
  [ "$(rec json "$T/ma.mp" | jq -c '[.loss, .tokens]')" = "$(rec json "$T/mb.mp" | jq -c '[.loss, .tokens]')" ]
  cmp "$T/a/latest/model.safetensors" "$T/b/latest/model.safetensors"
  # a completion that is not a string is bad input with its position
  printf '%s\n' '{"prompt":"a","completion":"b"}' '{"completion":7}' | rec from-json > "$T/bad.mp"
  run --separate-stderr train-step --ckpt "$T/c0" --out "$T/c" --objective sft --steps 1 "$T/bad.mp"
  assert_failure 1
  [[ $stderr == *"record 2 (byte "*"'prompt' and 'completion' must be strings"* ]]
}

@test "JSON Lines where records are expected is one error that names rec from-json" {
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  printf '{"kind":"seq","tokens":[256,104,105]}\n%.0s' $(seq 100) > "$T/seq.jsonl"
  run -1 --separate-stderr train-step --ckpt "$T/m0" --out "$T/run" --skip-bad "$T/seq.jsonl"
  [ "${stderr%%$'\n'*}" = "train-step: $T/seq.jsonl: record 1 (byte 0): this looks like JSON; convert it with \`rec from-json\`" ]
  [ "$(printf '%s\n' "$stderr" | wc -l)" -le 2 ]
  [ ! -e "$T/run" ]
}

@test "--threads sets the kernels' threads; -j is refused, since train-step runs no workers" {
  corpus
  ckpt init "$M/tiny-llama.json" "$T/m" --seed 1
  train-step --ckpt "$T/m" --out "$T/a" --steps 2 --threads 1 -o /dev/null "$T/corpus.mp"
  FW_THREADS=1 train-step --ckpt "$T/m" --out "$T/b" --steps 2 -o /dev/null "$T/corpus.mp"
  cmp "$T/a/latest/model.safetensors" "$T/b/latest/model.safetensors"
  cmp "$T/a/latest/optimizer.safetensors" "$T/b/latest/optimizer.safetensors"
  run -2 train-step --ckpt "$T/m" --out "$T/c" --threads 0 "$T/corpus.mp"
  assert_output --partial "bad --threads '0'"
  run -2 train-step --ckpt "$T/m" --out "$T/c" --steps 2 -j 1 "$T/corpus.mp"
  assert_output --partial "use --threads N"
  [ ! -e "$T/c" ]
}

@test "the usage and the man page synopsis agree word for word" {
  load usage
  usage_is_synopsis train-step
}

@test "--shard K/N trains on rec's shard K/N, and the two shards on every record once" {
  corpus
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  for k in 0 1; do
    train-step --ckpt "$T/m0" --out "$T/s$k" --shard $k/2 -o "$T/s$k.mp" "$T/corpus.mp"
    rec cat --shard $k/2 "$T/corpus.mp" > "$T/c$k.mp"
    train-step --ckpt "$T/m0" --out "$T/c$k" -o "$T/c$k.metrics" "$T/c$k.mp"
    cmp "$T/s$k/latest/model.safetensors" "$T/c$k/latest/model.safetensors"
  done
  a=$(rec json "$T/s0.mp" | jq .seqs) b=$(rec json "$T/s1.mp" | jq .seqs)
  [ "$a" -gt 0 ] && [ "$b" -gt 0 ] && [ $((a + b)) -eq 4 ]
  run -2 train-step --ckpt "$T/m0" --out "$T/x" --shard 1/1 "$T/corpus.mp"
}

@test "--progress: a meter of the records read with their total, then of the steps; the update unchanged" {
  corpus
  ckpt init "$M/tiny-llama.json" "$T/m0" --seed 1
  train-step --ckpt "$T/m0" --out "$T/plain" --steps 2 -o /dev/null "$T/corpus.mp" 2> "$T/plain.err"
  [ ! -s "$T/plain.err" ]
  run -0 --separate-stderr train-step --ckpt "$T/m0" --out "$T/meter" --steps 2 --progress \
    -o /dev/null "$T/corpus.mp"
  [ -z "$output" ]
  cmp "$T/plain/latest/model.safetensors" "$T/meter/latest/model.safetensors"
  [[ "$stderr" != *$'\r'* ]]
  size=$(stat -c %s "$T/corpus.mp")
  printf '%s\n' "$stderr" | grep -q "^train-step: 4 records, ${size}B, .*, 100%\$"
  [[ "${stderr_lines[-1]}" == "train-step: 2/2 steps, "*", 100%" ]]
}
