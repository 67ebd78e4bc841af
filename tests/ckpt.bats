#!/usr/bin/env bats
# ckpt and the model: checkpoints in the Hugging Face layout, and every
# number of a forward/backward pass (written by the dump harness,
# tests/unit/test_ckpt_harness.c) checked against a PyTorch build of the
# same model (tests/ref/model_ref.py).

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C FW_THREADS=${FW_THREADS:-2}
  M="$BATS_TEST_DIRNAME/../samples/models"
  REF="$BATS_TEST_DIRNAME/ref/model_ref.py"
  PY=/usr/bin/python3
  T="$BATS_TEST_TMPDIR"
  TEXT='def add(a, b):\n    return a + b  # the quick brown fox jumps over it!!!!'
  # weights of every sign, with zeros, over the 2 x 36 tokens of $TEXT
  H=${UNIT_DIR:-$BATS_TEST_DIRNAME/../build/tests}/test_ckpt_harness
  case $H in /*) ;; *) H=$PWD/$H ;; esac
  W=$(seq 0 71 | awk '{ printf "%s%g", (NR > 1 ? "," : ""), ($1 % 5) * 0.5 - 0.5 }')
}

# the dump harness: one pass's numbers of checkpoint $1 into a safetensors file
dump() { "$H" dump "$@"; }

# a checkpoint of config $1 with weights large enough for peaked outputs
sharp() {
  jq '.initializer_range = 0.5' "$M/$1.json" > "$T/$1.json"
  ckpt init "$T/$1.json" "$T/$1" --seed 11
}

@test "ckpt init writes config.json, model.safetensors and tokenizer.json" {
  run ckpt init "$M/tiny-llama.json" "$T/m" --seed 1
  assert_success
  [ -s "$T/m/config.json" ] && [ -s "$T/m/model.safetensors" ] && [ -s "$T/m/tokenizer.json" ]
  run jq -r '.architectures[0], .hidden_size, .torch_dtype' "$T/m/config.json"
  assert_output $'LlamaForCausalLM\n64\nfloat32'
  run ckpt info "$T/m"
  assert_success
  assert_line 'architecture: LlamaForCausalLM'
  # 2 x 264 x 64 embeddings + 64 + 2 layers x (2 x 64 + 4096 + 2 x 2048 + 4096 + 3 x 176 x 64)
  assert_line 'parameters: 126272'
  assert_line 'dtype: F32'
  assert_line 'tokenizer: 264 ids, bos -1, eos 256'
}

@test "the same seed gives byte-identical checkpoints, another seed does not" {
  ckpt init "$M/tiny-qwen2.json" "$T/a" --seed 4
  ckpt init "$M/tiny-qwen2.json" "$T/b" --seed 4
  ckpt init "$M/tiny-qwen2.json" "$T/c" --seed 5
  cmp "$T/a/model.safetensors" "$T/b/model.safetensors"
  run ! cmp -s "$T/a/model.safetensors" "$T/c/model.safetensors"
}

@test "llama: logits, loss, every gradient and kv-cache log-probs match pytorch" {
  sharp tiny-llama
  dump "$T/tiny-llama" --text "$(printf "$TEXT")" --batch 2 --weights "$W" -o "$T/d.st"
  run "$PY" "$REF" "$T/tiny-llama" "$T/d.st"
  echo "$output"
  assert_success
  assert_line --partial 'ok   logits max relative error'
  assert_line --partial 'ok   kv-cache logp vs full forward'
}

@test "qwen2 (qkv bias, tied embeddings): every number matches pytorch" {
  sharp tiny-qwen2
  dump "$T/tiny-qwen2" --text "$(printf "$TEXT")" --batch 2 --weights "$W" -o "$T/d.st"
  run "$PY" "$REF" "$T/tiny-qwen2" "$T/d.st"
  echo "$output"
  assert_success
  assert_line --partial 'ok   gradients worst relative error'
}

@test "qwen3 (q/k norm, head_dim apart from hidden_size): every number matches pytorch" {
  sharp tiny-qwen3
  dump "$T/tiny-qwen3" --text "$(printf "$TEXT")" --batch 2 --weights "$W" -o "$T/d.st"
  run "$PY" "$REF" "$T/tiny-qwen3" "$T/d.st"
  echo "$output"
  assert_success
}

@test "the reference notices a wrong number" {
  sharp tiny-llama
  dump "$T/tiny-llama" --text "$(printf "$TEXT")" --batch 2 -o "$T/d.st"
  # same config, other weights: the dump no longer fits the checkpoint
  ckpt init "$T/tiny-llama.json" "$T/other" --seed 12
  run -1 "$PY" "$REF" "$T/other" "$T/d.st"
  assert_line --partial 'FAIL logits'
}

@test "ckpt convert to bf16 and f16 halves the file and still matches pytorch" {
  sharp tiny-qwen3
  ckpt convert --dtype bf16 "$T/tiny-qwen3" "$T/bf"
  ckpt convert --dtype f16 "$T/tiny-qwen3" "$T/hf"
  run ckpt info "$T/bf"
  assert_line 'dtype: BF16'
  run jq -r .torch_dtype "$T/hf/config.json"
  assert_output float16
  full=$(stat -c %s "$T/tiny-qwen3/model.safetensors")
  half=$(stat -c %s "$T/bf/model.safetensors")
  [ $((half * 2)) -lt $((full + 4096)) ] && [ $((half * 2)) -gt $((full - 4096)) ]
  cmp "$T/tiny-qwen3/tokenizer.json" "$T/bf/tokenizer.json"
  for d in bf hf; do
    dump "$T/$d" --text "$(printf "$TEXT")" --batch 2 -o "$T/$d.st"
    run "$PY" "$REF" "$T/$d" "$T/$d.st"
    echo "$output"
    assert_success
  done
}

@test "ckpt score adds logprobs that pytorch agrees with, and reports bad records" {
  sharp tiny-qwen2
  printf '%s\n' '{"kind":"traj","id":"a","text":"hello there, how are you?","keep":{"x":[1]}}' \
    '{"id":"b","tokens":[1,2,3,4,5,200,7]}' '{"id":"c","tokens":[1,2,999]}' '{"id":"d"}' \
    | rec from-json > "$T/in.rec"
  run -1 --separate-stderr ckpt score "$T/tiny-qwen2" "$T/in.rec" -o "$T/out.rec"
  assert_equal "$(echo "$stderr" | head -1)" "ckpt: $T/in.rec: record 3 (byte 79): 'tokens' holds an id outside the vocabulary"
  [[ "$stderr" == *"record 4 (byte 98): record has neither 'tokens' nor 'text'"* ]]
  rec json "$T/out.rec" > "$T/out.jsonl"
  run jq -c '[.id, (.tokens | length), (.logprobs | length), .keep]' "$T/out.jsonl"
  assert_output $'["a",25,24,{"x":[1]}]\n["b",7,6,null]'
  run "$PY" "$REF" "$T/tiny-qwen2" --scores "$T/out.jsonl"
  echo "$output"
  assert_success
}

@test "ckpt sample: same seed same text, greedy ignores the seed, stops at -n" {
  sharp tiny-llama
  a=$(ckpt sample "$T/tiny-llama" --prompt 'def ' -n 30 --seed 3 --temp 1 --top-p 0.9 --top-k 50 | od -An -tx1)
  b=$(ckpt sample "$T/tiny-llama" --prompt 'def ' -n 30 --seed 3 --temp 1 --top-p 0.9 --top-k 50 | od -An -tx1)
  c=$(ckpt sample "$T/tiny-llama" --prompt 'def ' -n 30 --seed 4 --temp 1 --top-p 0.9 --top-k 50 | od -An -tx1)
  assert_equal "$a" "$b"
  [ "$a" != "$c" ]
  g1=$(ckpt sample "$T/tiny-llama" --prompt 'def ' -n 20 --temp 0 --seed 1 | od -An -tx1)
  g2=$(ckpt sample "$T/tiny-llama" --prompt 'def ' -n 20 --temp 0 --seed 2 | od -An -tx1)
  assert_equal "$g1" "$g2"
  run ckpt sample "$T/tiny-llama" --prompt 'x' -n 5 --count 3 --seed 9
  assert_success
  [ "${#lines[@]}" -le 3 ]
}

@test "a truncated model.safetensors is an error naming the file and the tensor" {
  ckpt init "$M/tiny-llama.json" "$T/m"
  size=$(stat -c %s "$T/m/model.safetensors")
  truncate -s $((size - 100)) "$T/m/model.safetensors"
  run -1 --separate-stderr ckpt info "$T/m"
  assert_output ''
  [[ "$stderr" == "ckpt: $T/m/model.safetensors: tensor 'lm_head.weight': data_offsets outside"* ]]
}

@test "a header that is not JSON, and a shape that disagrees with config.json, are errors" {
  ckpt init "$M/tiny-llama.json" "$T/m"
  printf '\x10\x00\x00\x00\x00\x00\x00\x00{"a": nonsense }' > "$T/m/model.safetensors"
  run -1 ckpt info "$T/m"
  assert_output --partial "$T/m/model.safetensors: header is not a JSON object"
  ckpt init "$M/tiny-llama.json" "$T/n"
  jq '.intermediate_size = 128' "$T/n/config.json" > "$T/n/c" && mv "$T/n/c" "$T/n/config.json"
  run -1 ckpt info "$T/n"
  assert_output "ckpt: $T/n/model.safetensors: tensor 'model.layers.0.mlp.gate_proj.weight': shape [176, 64], config.json implies [128, 64]"
}

@test "an unsupported architecture is refused by name" {
  jq '.architectures = ["MistralForCausalLM"]' "$M/tiny-llama.json" > "$T/c.json"
  run -1 ckpt init "$T/c.json" "$T/m"
  assert_output "ckpt: $T/c.json: unsupported architecture 'MistralForCausalLM' (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM are)"
  [ ! -e "$T/m" ]
}

@test "usage: --help on stdout, a bad option or command exits 2" {
  run ckpt --help
  assert_success
  assert_line --index 0 --partial 'usage: ckpt init CONFIG.json OUTDIR'
  run -2 ckpt frobnicate
  run -2 ckpt convert "$T/a" "$T/b"
  assert_output --partial 'convert needs --dtype'
  run -2 ckpt sample --temp abc x
  run ckpt --version
  assert_success
}

@test "llama3 and linear rope_scaling: frequencies as Hugging Face rescales them" {
  jq '.initializer_range = 0.5 | .rope_theta = 500000.0 | .rope_scaling = {"rope_type": "llama3",
      "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 64}' "$M/tiny-llama.json" > "$T/l3.json"
  ckpt init "$T/l3.json" "$T/l3" --seed 2
  run jq -c .rope_scaling "$T/l3/config.json"
  assert_output '{"rope_type":"llama3","factor":8,"low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":64}'
  dump "$T/l3" --text "$(printf "$TEXT")" --batch 2 -o "$T/d.st"
  run "$PY" "$REF" "$T/l3" "$T/d.st"
  echo "$output"
  assert_success
  # the reference itself tells the difference: without the scaling it fails
  jq '.rope_scaling = null' "$T/l3/config.json" > "$T/c" && mv "$T/c" "$T/l3/config.json"
  run -1 "$PY" "$REF" "$T/l3" "$T/d.st"
  jq '.initializer_range = 0.5 | .rope_scaling = {"type": "linear", "factor": 4.0}' \
    "$M/tiny-qwen2.json" > "$T/lin.json"
  ckpt init "$T/lin.json" "$T/lin" --seed 2
  dump "$T/lin" --text "$(printf "$TEXT")" --batch 2 -o "$T/e.st"
  run "$PY" "$REF" "$T/lin" "$T/e.st"
  echo "$output"
  assert_success
}

@test "ckpt convert keeps every config.json field it does not own" {
  ckpt init "$M/tiny-qwen2.json" "$T/m"
  jq '.transformers_version = "4.44.0" | .eos_token_id = [256, 258] | .custom = {"a": 1}' \
    "$T/m/config.json" > "$T/c" && mv "$T/c" "$T/m/config.json"
  ckpt convert --dtype bf16 "$T/m" "$T/b"
  run jq -c '[.transformers_version, .eos_token_id, .custom, .torch_dtype]' "$T/b/config.json"
  assert_output '["4.44.0",[256,258],{"a":1},"bfloat16"]'
  run diff <(jq -S 'del(.torch_dtype)' "$T/m/config.json") <(jq -S 'del(.torch_dtype)' "$T/b/config.json")
  assert_success
}

@test "ckpt init leaves nothing behind when OUTDIR is taken, and accepts OUTDIR/" {
  mkdir -p "$T/taken" && touch "$T/taken/x"
  run -1 ckpt init "$M/tiny-llama.json" "$T/taken"
  assert_output --partial "$T/taken: Directory not empty"
  run ls "$T"
  assert_output taken
  ckpt init "$M/tiny-llama.json" "$T/new/"
  [ -s "$T/new/model.safetensors" ]
}

@test "ckpt init --tokenizer FILE copies it, and refuses a vocabulary it cannot hold" {
  ckpt init "$M/tiny-llama.json" "$T/a"
  ckpt init "$M/tiny-qwen3.json" "$T/b" --tokenizer "$T/a/tokenizer.json"
  cmp "$T/a/tokenizer.json" "$T/b/tokenizer.json"
  jq '.vocab_size = 200' "$M/tiny-llama.json" > "$T/small.json"
  run -1 ckpt init "$T/small.json" "$T/c" --tokenizer "$T/a/tokenizer.json"
  assert_output "ckpt: $T/small.json: vocab_size 200 is smaller than the tokenizer's 264 ids"
  echo '{"model": {"type": "WordPiece"}}' > "$T/bad.json"
  run -1 ckpt init "$M/tiny-llama.json" "$T/d" --tokenizer "$T/bad.json"
  assert_output --partial "ckpt: $T/bad.json: "
  [ ! -e "$T/c" ] && [ ! -e "$T/d" ]
}

@test "the usage and the man page synopsis agree word for word" {
  load usage
  usage_is_synopsis ckpt
}

@test "ckpt info on a training run follows latest and shows the step and the parent" {
  ckpt init "$M/tiny-llama.json" "$T/m" --seed 1
  run ckpt info "$T/m"
  assert_success
  assert_line "checkpoint: $T/m"
  assert_line 'step: 0'
  assert_line 'parent: none'
  printf '{"kind":"seq","tokens":[256,104,105,33,10]}\n' | rec from-json > "$T/c.mp"
  train-step --ckpt "$T/m" --out "$T/run" --steps 2 -o "$T/m1.mp" "$T/c.mp"
  train-step --ckpt "$T/run" --out "$T/run" -o "$T/m2.mp" "$T/c.mp"
  first=$(rec get .ckpt "$T/m1.mp" | tail -1)
  run ckpt info "$T/run"
  assert_success
  assert_line --regexp "^checkpoint: $T/run/latest -> step-00000003-[0-9a-f]{16}\$"
  assert_line 'step: 3'
  assert_line "parent: $first"
  assert_line 'architecture: LlamaForCausalLM'
  run -1 ckpt info "$T/nothing"
  assert_output "ckpt: $T/nothing: not a checkpoint (no config.json, no latest/config.json)"
}

@test "--threads sets the kernels' threads and gives the same scores" {
  sharp tiny-llama
  printf '{"id":"a","tokens":[1,2,3,4,5,6,7,8]}\n' | rec from-json > "$T/in.rec"
  ckpt score "$T/tiny-llama" --threads 1 "$T/in.rec" -o "$T/a.rec"
  ckpt score "$T/tiny-llama" --threads 2 "$T/in.rec" -o "$T/b.rec"
  cmp "$T/a.rec" "$T/b.rec"
  run -2 ckpt info "$T/tiny-llama" --threads 0
  assert_output --partial "bad --threads '0'"
}

@test "ckpt score -j N scores on N workers: -j 1 and -j 3 write the same bytes and report the same" {
  sharp tiny-llama
  for i in $(seq 1 24); do
    case $i in
      7) echo '{"id":"r7"}' ;;
      9) echo '{"id":"r9","tokens":[1,99999]}' ;;
      *[05]) echo "{\"id\":\"r$i\",\"tokens\":[$(seq -s, 1 $((i + 2)))]}" ;;
      *) echo "{\"id\":\"r$i\",\"text\":\"record $i: $(printf 'ab%.0s' $(seq 1 $i))\"}" ;;
    esac
  done | rec from-json > "$T/in.rec"
  run -1 --separate-stderr ckpt score "$T/tiny-llama" -j 1 "$T/in.rec" "$T/in.rec" -o "$T/a.rec"
  e1=$stderr
  run -1 --separate-stderr ckpt score "$T/tiny-llama" -j 3 "$T/in.rec" "$T/in.rec" -o "$T/b.rec"
  [ "$stderr" = "$e1" ]
  cmp "$T/a.rec" "$T/b.rec"
  [ "$(rec count "$T/a.rec")" -eq 44 ]
  [ "$(printf '%s\n' "$e1" | grep -c 'record 7 ')" -eq 2 ]
  # -j is the workers of score only; the other commands refuse it
  run -2 ckpt info "$T/tiny-llama" -j 2
  assert_output --partial "-j is for score, not info"
  run -2 ckpt score "$T/tiny-llama" -j 0 "$T/in.rec"
  assert_output --partial "bad -j '0'"
}

@test "ckpt convert writes the new checkpoint whole, with nothing left beside it" {
  ckpt init "$M/tiny-llama.json" "$T/m" --seed 1
  ckpt convert --dtype bf16 "$T/m" "$T/b"
  run ckpt info "$T/b"
  assert_line 'dtype: BF16'
  [ -s "$T/b/tokenizer.json" ]
  run ls -a "$T"
  refute_output --partial '.tmp.'
}

@test "ckpt score --shard K/N scores rec's shard K/N, and the shards together every record once" {
  ckpt init "$M/tiny-llama.json" "$T/m" --seed 1
  for i in $(seq 1 12); do echo "{\"id\":\"r$i\",\"text\":\"record $i\"}"; done | rec from-json > "$T/in.rec"
  ckpt score "$T/m" "$T/in.rec" > "$T/all.rec"
  for k in 0 1; do
    ckpt score "$T/m" --shard $k/2 "$T/in.rec" > "$T/s$k.rec"
    # the same records, scored the same, as rec's shard of the whole output
    rec cat --shard $k/2 "$T/all.rec" | cmp - "$T/s$k.rec"
  done
  [ "$(cat "$T/s0.rec" "$T/s1.rec" | rec get .id | sort)" = "$(rec get .id "$T/in.rec" | sort)" ]
  [ "$(rec count "$T/s0.rec")" -gt 0 ] && [ "$(rec count "$T/s1.rec")" -gt 0 ]
  run -2 ckpt score "$T/m" --shard 2/2 "$T/in.rec"
}

@test "ckpt score --progress: a meter of the input with its total on stderr, stdout unchanged" {
  ckpt init "$M/tiny-llama.json" "$T/m" --seed 1
  for i in $(seq 1 5); do echo "{\"id\":\"r$i\",\"text\":\"record $i\"}"; done | rec from-json > "$T/in.rec"
  ckpt score "$T/m" "$T/in.rec" > "$T/plain.rec" 2> "$T/plain.err"
  [ ! -s "$T/plain.err" ]
  run -0 --separate-stderr ckpt score "$T/m" --progress "$T/in.rec" -o "$T/meter.rec"
  cmp "$T/plain.rec" "$T/meter.rec"
  [[ "$stderr" != *$'\r'* ]]
  size=$(stat -c %s "$T/in.rec")
  [[ "${stderr_lines[-1]}" == "ckpt: 5 records, ${size}B, "*", 100%" ]]
}

@test "ckpt score reports each damaged record it can step over and scores the rest" {
  ckpt init "$M/tiny-llama.json" "$T/m" --seed 1
  echo '{"id":"a","text":"one"}' | rec from-json > "$T/a.rec"
  echo '{"id":"b","text":"two"}' | rec from-json > "$T/b.rec"
  { cat "$T/a.rec"; printf '\005'; cat "$T/b.rec" "$T/a.rec"; } > "$T/in.rec"
  run -1 --separate-stderr ckpt score "$T/m" "$T/in.rec" -o "$T/out.rec"
  assert_equal "$stderr" "ckpt: $T/in.rec: record 2 (byte 15): record is int, not a map"
  [ "$(rec get .id "$T/out.rec" | tr '\n' ' ')" = "a b a " ]
}
