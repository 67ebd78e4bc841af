#!/usr/bin/env bats
# serve: checkpoints behind an OpenAI-compatible HTTP API, checked with curl
# against ckpt's own sampling and scoring.

bats_require_minimum_version 1.5.0

setup_file() {
  F="$BATS_FILE_TMPDIR"
  ckpt init "$BATS_TEST_DIRNAME/../samples/models/tiny-qwen2.json" "$F/a" --seed 1
  ckpt init "$BATS_TEST_DIRNAME/../samples/models/tiny-qwen2.json" "$F/b" --seed 2
}

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  F="$BATS_FILE_TMPDIR"
  T="$BATS_TEST_TMPDIR"
}

teardown() {
  if [ -f "$T/serve.pid" ]; then kill "$(cat "$T/serve.pid")" 2>/dev/null || true; fi
}

# start ARGS...: serve on a free loopback port; $URL is its address
start() {
  serve --port 0 "$@" > "$T/url" 2> "$T/err" &
  echo $! > "$T/serve.pid"
  for _ in $(seq 100); do [ -s "$T/url" ] && break; sleep 0.05; done
  URL=$(cat "$T/url")
  [ -n "$URL" ]
}

post() { curl -s -w '\n%{http_code}\n' "$URL$1" -d "$2"; }

@test "--help prints the usage on stdout and exits 0" {
  run --separate-stderr serve --help
  assert_success
  [ -z "$stderr" ]
  diff <(echo "$output" | sed 's/^usage: //' | tr -s '[:space:]' ' ') \
    <(man -l "$BATS_TEST_DIRNAME/../man/serve.1" 2>/dev/null |
      sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' | sed '1d;$d' | tr -s '[:space:]' ' ' | sed 's/^ //')
}

@test "a missing or malformed --ckpt and a bad host are usage errors; a bad checkpoint is exit 1" {
  run -2 --separate-stderr serve
  [[ "$stderr" == *"--ckpt is required"* ]]
  run -2 --separate-stderr serve --ckpt nodir
  [[ "$stderr" == *"bad checkpoint 'nodir'"* ]]
  run -2 --separate-stderr serve --ckpt a="$F/a" --ckpt a="$F/b"
  run -2 --separate-stderr serve --ckpt a="$F/a" --host localhost
  run -1 --separate-stderr serve --ckpt a="$T/nowhere"
  [[ "$stderr" == *"nowhere"* ]]
}

@test "it listens on loopback and lists its models; health answers" {
  start --ckpt a="$F/a" --ckpt b="$F/b"
  [[ "$URL" == http://127.0.0.1:* ]]
  run curl -s "$URL/health"
  assert_output '{"status":"ok"}'
  run jq -c '[.data[] | [.id, .max_model_len]]' <(curl -s "$URL/v1/models")
  assert_output '[["a",512],["b",512]]'
}

# Log-probs from decoding with the KV cache and from one full forward are
# the same float32 sums grouped otherwise; 1e-4 is 11 times the estimate
# sqrt(N) u |lp| with N ~ 600 terms behind a log-prob and |lp| <= 6 (see
# close_to in teach.bats for the figures).
@test "a greedy completion is ckpt sample's, and its log-probs are ckpt score's" {
  start --ckpt a="$F/a" --ckpt b="$F/b"
  curl -s "$URL/v1/completions" -d '{"model": "a", "prompt": "def f(x):", "max_tokens": 12,
    "temperature": 0, "logprobs": 1}' > "$T/c.json"
  [ "$(jq -r '.choices[0].text' "$T/c.json")" = "$(ckpt sample "$F/a" --prompt 'def f(x):' -n 12 --temp 0)" ]
  # rescored without the cache: the prompt's ids then the completion's
  jq -c '{id: "x", tokens: ([100,101,102,32,102,40,120,41,58] + .choices[0].token_ids)}' "$T/c.json" |
    rec from-json | ckpt score "$F/a" | rec json > "$T/s.json"
  run jq -e -n --slurpfile c "$T/c.json" --slurpfile s "$T/s.json" '
    ($c[0].choices[0].logprobs.token_logprobs) as $a | ($s[0].logprobs[-($a | length):]) as $b
    | [$a, $b] | transpose | all(.[]; (.[0] - .[1]) | fabs < 1e-4)'
  assert_success
  # the other arm is another model
  curl -s "$URL/v1/completions" -d '{"model": "b", "prompt": "def f(x):", "max_tokens": 12,
    "temperature": 0, "logprobs": 1}' > "$T/b.json"
  [ "$(jq -c '.choices[0].logprobs' "$T/b.json")" != "$(jq -c '.choices[0].logprobs' "$T/c.json")" ]
}

@test "echo with max_tokens 0 scores the given text as ckpt score does" {
  start --ckpt a="$F/a"
  curl -s "$URL/v1/completions" -d '{"prompt": "def f(x):\n    return x", "max_tokens": 0,
    "echo": true, "logprobs": 1}' > "$T/e.json"
  echo '{"id": "a", "text": "def f(x):\n    return x"}' | rec from-json | ckpt score "$F/a" |
    rec json > "$T/s.json"
  run jq -e -n --slurpfile e "$T/e.json" --slurpfile s "$T/s.json" '
    $e[0].choices[0] as $c | $c.text == "def f(x):\n    return x" and $c.logprobs.token_logprobs[0] == null
    and ([$c.logprobs.token_logprobs[1:], $s[0].logprobs] | transpose | all(.[]; (.[0] - .[1]) | fabs < 1e-4))
    and ($c.token_ids == $s[0].tokens)'
  assert_success
}

@test "chat completions render the template and return per-token log-probs; seeds repeat" {
  start --ckpt a="$F/a"
  body='{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 10, "logprobs": true,
         "seed": 9, "n": 2}'
  curl -s "$URL/v1/chat/completions" -d "$body" > "$T/1.json"
  curl -s "$URL/v1/chat/completions" -d "$body" > "$T/2.json"
  # the same choices; each answer its own id
  diff <(jq -c .choices "$T/1.json") <(jq -c .choices "$T/2.json")
  [ "$(jq -r .id "$T/1.json")" != "$(jq -r .id "$T/2.json")" ]
  run jq -e '.object == "chat.completion" and (.choices | length) == 2
    and .choices[0].message.role == "assistant"
    and .choices[0].token_ids != .choices[1].token_ids
    and all(.choices[]; (.logprobs.content | length) <= (.token_ids | length)
                        and all(.logprobs.content[]; .logprob <= 0))
    and .usage.prompt_tokens > 0' "$T/1.json"
  assert_success
}

@test "bad requests get an error object and a 4xx status" {
  start --ckpt a="$F/a" --ckpt b="$F/b"
  run post /v1/completions '{"model": "c", "prompt": "x"}'
  assert_line '{"error":{"message":"no such model","type":"invalid_request_error"}}'
  assert_line 404
  run post /v1/completions 'not json'
  assert_line 400
  run post /v1/completions '{"model": "a", "prompt": "x", "temperature": -1}'
  assert_line --partial "'temperature' must be a number >= 0"
  assert_line 400
  run post /v1/chat/completions '{"model": "a", "messages": []}'
  assert_line 400
  run post /v1/nothing '{}'
  assert_line 404
  # the server is still up
  run curl -s "$URL/health"
  assert_output '{"status":"ok"}'
}

# ids N: a prompt of N token ids
ids() { jq -nc --argjson n "$1" '[range($n) | 97]'; }

@test "a prompt or max_tokens beyond the context is refused as vLLM refuses it; what fits is answered" {
  start --ckpt a="$F/a"
  # 2,000 tokens to a 512-position checkpoint, as ids and as text
  run post /v1/completions "{\"prompt\": $(ids 2000), \"max_tokens\": 4}"
  assert_line --index 1 400
  [ "$(jq -c . <<< "${lines[0]}")" = '{"error":{"message":"This model'"'"'s maximum context length is 512 tokens. However, your request has 2000 input tokens. Please reduce the length of the input messages.","type":"BadRequestError","param":null,"code":400}}' ]
  long=$(printf 'x = 1\n%.0s' $(seq 400))  # 2,399 bytes: $(...) drops the last newline
  run post /v1/completions "$(jq -nc --arg p "$long" '{prompt: $p}')"
  assert_line --index 1 400
  assert_line --partial "your request has 2399 input tokens"
  run post /v1/chat/completions "$(jq -nc --arg p "$long" '{messages: [{role: "user", content: $p}]}')"
  assert_line --index 1 400
  assert_line --partial "maximum context length is 512 tokens"
  # prompt and max_tokens together beyond it, as vLLM words it
  run post /v1/completions "{\"prompt\": $(ids 500), \"max_tokens\": 100}"
  assert_line --index 1 400
  assert_line --partial "'max_tokens' or 'max_completion_tokens' is too large: 100. This model's maximum context length is 512 tokens and your request has 500 input tokens (100 > 512 - 500)."
  run post /v1/chat/completions "$(jq -nc '{messages: [{role: "user", content: "hi"}], max_completion_tokens: 600}')"
  assert_line --index 1 400
  assert_line --partial "too large: 600"
  # what fits: max_tokens to the last position, the default cut to what is left,
  # the whole context scored
  run post /v1/completions "{\"prompt\": $(ids 500), \"max_tokens\": 12, \"temperature\": 0}"
  assert_line --index 1 200
  run post /v1/completions "{\"prompt\": $(ids 508), \"temperature\": 0}"
  assert_line --index 1 200
  jq -e '.usage.prompt_tokens == 508 and .usage.completion_tokens <= 4' <<< "${lines[0]}"
  run post /v1/completions "{\"prompt\": $(ids 512), \"max_tokens\": 0, \"echo\": true, \"logprobs\": 1}"
  assert_line --index 1 200
  run post /v1/completions "{\"prompt\": $(ids 512), \"max_tokens\": 1}"
  assert_line --index 1 400
}

@test "/tokenize gives a prompt's ids, their count and the context, as vLLM does" {
  start --ckpt a="$F/a"
  run curl -s "$URL/tokenize" -d '{"prompt": "hi"}'
  assert_output '{"count":2,"max_model_len":512,"tokens":[104,105]}'
  # the chat's ids are those a chat completion counts
  body='{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}'
  [ "$(curl -s "$URL/tokenize" -d "$body" | jq .count)" = "$(curl -s "$URL/v1/chat/completions" -d "$body" | jq .usage.prompt_tokens)" ]
}
