#!/usr/bin/env bats
# serve: checkpoints behind an OpenAI-compatible HTTP API, checked with curl
# against ckpt's own sampling and scoring.

bats_require_minimum_version 1.5.0

setup_file() {
  F="$BATS_FILE_TMPDIR"
  ckpt init "$BATS_TEST_DIRNAME/../samples/models/tiny-qwen2.json" "$F/a" --seed 1
  ckpt init "$BATS_TEST_DIRNAME/../samples/models/tiny-qwen2.json" "$F/b" --seed 2
  # t: a checkpoint taught to answer one chat with tools by a tool call,
  # so that the tests know what it writes
  jq '.max_position_embeddings = 2048' "$BATS_TEST_DIRNAME/../samples/models/tiny-qwen2.json" \
    > "$F/long.json"
  ckpt init "$F/long.json" "$F/t" --seed 1
  cat > "$F/tools.json" <<'EOF'
[{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
EOF
  jq -c --slurpfile t "$F/tools.json" -n \
    '{messages: [{role: "user", content: "Weather in Paris?"}], tools: $t[0], temperature: 0,
      max_tokens: 100}' > "$F/chat.json"
  serve --port 0 --ckpt t="$F/t" > "$F/url" &
  local pid=$!
  for _ in $(seq 100); do [ -s "$F/url" ] && break; sleep 0.05; done
  curl -s "$(cat "$F/url")/tokenize" -d @"$F/chat.json" | jq -c .tokens > "$F/ids.json"
  kill $pid
  /usr/bin/python3 "$BATS_TEST_DIRNAME/fixtures/serve-teach.py" "$F/t" "$F/ids.json" \
    'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' \
    > /dev/null
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

# sse PATH BODY: the data of each event of a streamed answer, one a line
sse() { curl -sN "$URL$1" -d "$2" | sed -n 's/^data: //p'; }

@test "--help prints the usage on stdout and exits 0" {
  run --separate-stderr serve --help
  assert_success
  [ -z "$stderr" ]
  load usage
  usage_is_synopsis serve
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

@test "a streamed completion is the answer in chunks of OpenAI's shape, then the usage and [DONE]" {
  start --ckpt a="$F/a"
  body='{"prompt": "def f(x):", "max_tokens": 12, "temperature": 0, "logprobs": 2}'
  curl -s "$URL/v1/completions" -d "$body" > "$T/whole.json"
  sse /v1/completions "$(jq -c '. + {stream: true, stream_options: {include_usage: true}}' <<< "$body")" \
    > "$T/ev"
  [ "$(tail -1 "$T/ev")" = "[DONE]" ]
  sed '$d' "$T/ev" | jq -s . > "$T/chunks.json"
  run jq -e -n --slurpfile w "$T/whole.json" --slurpfile c "$T/chunks.json" '
    $c[0] as $c | $w[0].choices[0] as $a | ($c[:-1] | map(.choices[0])) as $ch
    | ($c | map(.id) | unique | length) == 1 and ($c[0].id | startswith("cmpl-"))
    and all($c[]; .object == "text_completion" and .model == "a" and (.created | type) == "number")
    and ($ch | map(.text) | add) == $a.text
    and ($ch | map(.logprobs.token_logprobs) | add) == $a.logprobs.token_logprobs
    and ($ch | map(.logprobs.tokens) | add) == $a.logprobs.tokens
    and ($ch[:-1] | all(.finish_reason == null)) and $ch[-1].finish_reason == "length"
    and $c[-1].choices == [] and $c[-1].usage == {prompt_tokens: 9, completion_tokens: 12, total_tokens: 21}
    and all($c[:-1][]; .usage == null)'
  assert_success
  # without include_usage, no usage chunk; n choices by their index
  sse /v1/completions '{"prompt": "x", "max_tokens": 3, "n": 2, "seed": 1, "stream": true}' > "$T/ev2"
  run jq -e -s 'map(.choices[0].index) | (sort | unique) == [0,1] and all(.[]; . != null)' <(sed '$d' "$T/ev2")
  assert_success
  run jq -e -s 'all(.[]; has("usage") | not)' <(sed '$d' "$T/ev2")
  assert_success
  run post /v1/completions '{"prompt": "x", "stream_options": {"include_usage": true}}'
  assert_line --index 1 400
}

@test "a streamed chat starts with the assistant's role and ends with its finish reason" {
  start --ckpt a="$F/a"
  body='{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "seed": 3, "logprobs": true}'
  curl -s "$URL/v1/chat/completions" -d "$body" > "$T/whole.json"
  sse /v1/chat/completions "$(jq -c '. + {stream: true}' <<< "$body")" | sed '$d' > "$T/ev"
  run jq -e -s --slurpfile w "$T/whole.json" '. as $c | $w[0].choices[0] as $a
    | ($c | map(.choices[0])) as $ch
    | all($c[]; .object == "chat.completion.chunk" and (.id | startswith("chatcmpl-")))
    and $ch[0].delta == {role: "assistant", content: ""}
    and ($ch[1:] | map(.delta.content) | add) == $a.message.content
    and ($ch[1:] | map(.logprobs.content // [] | map(.logprob)) | add) == ($a.logprobs.content | map(.logprob))
    and $ch[-1].finish_reason == $a.finish_reason' "$T/ev"
  assert_success
}

@test "tool calls in the reply come back as tool_calls, whole or streamed" {
  start --ckpt t="$F/t"
  curl -s "$URL/v1/chat/completions" -d @"$F/chat.json" > "$T/c.json"
  run jq -c '.choices[0] | [.finish_reason, .message.content, (.message.tool_calls | map(.type, .function))]' "$T/c.json"
  assert_output '["tool_calls","Let me look.\n",["function",{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}]]'
  jq -e '.choices[0].message.tool_calls[0].id | test("^call_[0-9a-f]{16}$")' "$T/c.json"
  # streamed: the text before the call as it comes, the call as one delta
  sse /v1/chat/completions "$(jq -c '. + {stream: true}' "$F/chat.json")" | sed '$d' > "$T/ev"
  run jq -s -c '[(map(.choices[0].delta.content // "") | add),
                 (map(.choices[0].delta.tool_calls // empty) | length),
                 (.[-1].choices[0] | [.finish_reason, (.delta.tool_calls[0] | [.index, .function.name, .function.arguments])])]' "$T/ev"
  assert_output '["Let me look.\n",1,["tool_calls",[0,"get_weather","{\"city\":\"Paris\"}"]]]'
  # tool_choice none renders no tools (fewer prompt tokens) and parses no call
  n0=$(curl -s "$URL/tokenize" -d @"$F/chat.json" | jq .count)
  n1=$(jq -c '. + {tool_choice: "none"}' "$F/chat.json" | curl -s "$URL/tokenize" -d @- | jq .count)
  [ "$n1" -lt "$n0" ]
  run jq -e '.choices[0].finish_reason != "tool_calls" and .choices[0].message.tool_calls == null' \
    <(jq -c '. + {tool_choice: "none"}' "$F/chat.json" | curl -s "$URL/v1/chat/completions" -d @-)
  assert_success
  # a named tool_choice starts the call after the prompt
  run jq -r '.tokens[-60:] | implode' <(jq -c '. + {tool_choice: {type: "function", function: {name: "get_weather"}}}' \
    "$F/chat.json" | curl -s "$URL/tokenize" -d @-)
  assert_output --partial $'assistant\n<tool_call>\n{"name": "get_weather", "arguments": '
  run post /v1/chat/completions "$(jq -c '. + {tool_choice: {type: "function", function: {name: "nope"}}}' "$F/chat.json")"
  assert_line --index 1 400
  assert_line --partial "names a function that is not in 'tools'"
  # earlier calls and their results are rendered into the chat
  jq -c '.messages += [{role: "assistant", content: null, tool_calls: [{id: "c1", type: "function",
         function: {name: "get_weather", arguments: "{\"city\": \"Paris\"}"}}]},
         {role: "tool", tool_call_id: "c1", content: "sunny"}]' "$F/chat.json" > "$T/more.json"
  run jq -r '.tokens | implode' <(curl -s "$URL/tokenize" -d @"$T/more.json")
  assert_output --partial $'<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
  assert_output --partial $'<tool_response>\nsunny\n</tool_response>'
}

@test "stop strings cut the answer before them, streamed too; stop_token_ids end it" {
  start --ckpt t="$F/t"
  want='Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "'
  jq -c '. + {stop: ["Paris", "zzz"]}' "$F/chat.json" | curl -s "$URL/v1/chat/completions" -d @- > "$T/s.json"
  run jq -e --arg w "$(printf "$want")" '.choices[0] | .message.content == $w and .finish_reason == "stop"
    and .message.tool_calls == null' "$T/s.json"
  assert_success
  # streamed: no byte of the stop string goes out, though "Pari" came before "s"
  sse /v1/chat/completions "$(jq -c '. + {stream: true, stop: "Paris"}' "$F/chat.json")" | sed '$d' > "$T/ev"
  run jq -s -r 'map(.choices[0].delta.content // "") | add' "$T/ev"
  assert_output "$(printf "$want")"
  # a stop string as the reply begins, and one that never comes
  run jq -c '.choices[0] | [.message.content, .finish_reason]' \
    <(jq -c '. + {stop: ["Let"]}' "$F/chat.json" | curl -s "$URL/v1/chat/completions" -d @-)
  assert_output '["","stop"]'
  run jq -c '.choices[0].finish_reason' \
    <(jq -c '. + {stop: ["Rome"]}' "$F/chat.json" | curl -s "$URL/v1/chat/completions" -d @-)
  assert_output '"tool_calls"'
  # stop_token_ids: the id of "." ends the reply, which does not show it
  run jq -c '.choices[0] | [.message.content, .finish_reason, .token_ids[-1]]' \
    <(jq -c '. + {stop_token_ids: [46]}' "$F/chat.json" | curl -s "$URL/v1/chat/completions" -d @-)
  assert_output '["Let me look","stop",46]'
  run post /v1/chat/completions "$(jq -c '. + {stop: [""]}' "$F/chat.json")"
  assert_line --index 1 400
}

@test "logprobs and top_logprobs come in OpenAI's shapes, the drawn token first when greedy" {
  start --ckpt a="$F/a"
  curl -s "$URL/v1/completions" -d '{"prompt": "def", "max_tokens": 6, "temperature": 0, "logprobs": 3}' > "$T/c.json"
  run jq -e '.choices[0].logprobs as $l | ($l.tokens | length) == 6
    and all($l.top_logprobs[]; (to_entries | length) <= 3 and (to_entries | length) >= 1 and all(.[]; . <= 0))
    and ([range(6) as $i | $l.token_logprobs[$i] == ($l.top_logprobs[$i] | [.[]] | max)] | all)
    and $l.text_offset == [0,1,2,3,4,5]' "$T/c.json"
  assert_success
  curl -s "$URL/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
    "temperature": 0, "logprobs": true, "top_logprobs": 2}' > "$T/h.json"
  run jq -e 'all(.choices[0].logprobs.content[]; (.top_logprobs | length) == 2
    and .logprob == .top_logprobs[0].logprob and .token == .top_logprobs[0].token
    and .top_logprobs[0].logprob >= .top_logprobs[1].logprob and (.bytes | length) >= 1)' "$T/h.json"
  assert_success
  run post /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2}'
  assert_line --index 1 400
  assert_line --partial "'top_logprobs' needs 'logprobs': true"
  run post /v1/completions '{"prompt": "hi", "logprobs": 21}'
  assert_line --index 1 400
}

@test "a request field serve does not act on is refused with 400 naming it, never ignored" {
  start --ckpt a="$F/a"
  run post /v1/completions '{"prompt": "x", "foo": 1}'
  assert_line --index 1 400
  jq -e '.error.param == "foo" and (.error.message | contains("'"'"'foo'"'"' is not supported"))' <<< "${lines[0]}"
  run post /v1/completions '{"prompt": "x", "frequency_penalty": 0.5}'
  assert_line --index 1 400
  assert_line --partial '"param":"frequency_penalty"'
  run post /v1/chat/completions '{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}}'
  assert_line --index 1 400
  assert_line --partial '"param":"response_format"'
  run post /v1/chat/completions '{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}'
  assert_line --index 1 400
  assert_line --partial "content parts of type 'image_url' are not supported"
  run post /v1/completions '{"prompt": "x", "stream_options": {"include_usage": true, "x": 1}, "stream": true}'
  assert_line --index 1 400
  # the neutral values are served; content parts are joined
  run post /v1/completions '{"prompt": "x", "frequency_penalty": 0, "presence_penalty": 0, "logit_bias": {},
    "best_of": 1, "user": "u", "max_tokens": 2}'
  assert_line --index 1 200
  a=$(curl -s "$URL/tokenize" -d '{"messages": [{"role": "user", "content": [{"type": "text", "text": "he"}, {"type": "text", "text": "llo"}]}]}')
  b=$(curl -s "$URL/tokenize" -d '{"messages": [{"role": "user", "content": "hello"}]}')
  [ "$a" = "$b" ]
}

@test "--api-key: 401 without the key, answers with it; health and metrics stay open" {
  start --ckpt a="$F/a" --api-key s3cret
  run curl -s -w '\n%{http_code}\n' "$URL/v1/completions" -d '{"prompt": "x", "max_tokens": 1}'
  assert_line --index 1 401
  assert_line --partial '"code":"invalid_api_key"'
  run curl -s -w '\n%{http_code}\n' -H 'Authorization: Bearer s3cre' "$URL/v1/models"
  assert_line --index 1 401
  run curl -s -w '\n%{http_code}\n' -H 'Authorization: Bearer s3cret' "$URL/v1/completions" -d '{"prompt": "x", "max_tokens": 1}'
  assert_line --index 1 200
  run curl -s -o /dev/null -w '%{http_code}' "$URL/health"
  assert_output 200
  run curl -s -o /dev/null -w '%{http_code}' "$URL/metrics"
  assert_output 200
}

@test "/v1/models/ID names one model; /metrics counts requests, tokens and latency in Prometheus' format" {
  start --ckpt a="$F/a" --ckpt b="$F/b"
  run jq -c '[.id, .object, .max_model_len]' <(curl -s "$URL/v1/models/b")
  assert_output '["b","model",512]'
  run curl -s -o /dev/null -w '%{http_code}' "$URL/v1/models/c"
  assert_output 404
  curl -s "$URL/v1/completions" -d '{"model": "a", "prompt": "hi", "max_tokens": 5}' > "$T/1.json"
  curl -s "$URL/v1/completions" -d '{"model": "a", "prompt": "hello", "max_tokens": 7, "stream": true,
    "stream_options": {"include_usage": true}}' > "$T/2.sse"
  curl -s "$URL/v1/completions" -d '{"model": "a", "prompt": "x", "foo": 1}' > /dev/null
  curl -s "$URL/metrics" > "$T/m"
  grep -qx 'serve_requests_total{model="a"} 2' "$T/m"
  grep -qx 'serve_requests_total{model="b"} 0' "$T/m"
  grep -qx 'serve_prompt_tokens_total{model="a"} 7' "$T/m"
  # the tokens drawn: at most 5 + 7, fewer where a sample drew the end
  # token first; the two responses' usage says how many
  gen=$(( $(jq .usage.completion_tokens "$T/1.json") +
          $(sed -n 's/^data: //p' "$T/2.sse" | grep -v '^\[DONE\]$' | jq -s '[.[] | .usage.completion_tokens // empty] | last') ))
  [ "$gen" -ge 2 ] && [ "$gen" -le 12 ]
  grep -qx "serve_generation_tokens_total{model=\"a\"} $gen" "$T/m"
  grep -qx 'serve_request_duration_seconds_count{model="a"} 2' "$T/m"
  grep -qx 'serve_request_duration_seconds_bucket{model="a",le="+Inf"} 2' "$T/m"
  grep -qx 'serve_requests_waiting{model="a"} 0' "$T/m"
  grep -qx 'serve_http_requests_total{code="400"} 1' "$T/m"
  # every sample line is NAME{LABELS} VALUE and each family has its TYPE
  run grep -vE '^(# (HELP|TYPE) serve_[a-z_]+ .+|serve_[a-z_]+\{[a-z]+="[^"]*"(,le="[^"]+")?\} [0-9.e+-]+)$' "$T/m"
  assert_failure
  # bucket counts never fall
  run awk '/_bucket\{model="a"/ { if ($2 < last) bad = 1; last = $2 } END { exit bad }' "$T/m"
  assert_success
}

# Decoding in a batch runs the same sums as decoding alone, in matrix
# products of more rows; the log-prob tolerance is the one of the greedy
# test above (1e-4, eleven times the float32 estimate).
@test "concurrent requests decode together, each as it would alone" {
  start --ckpt a="$F/a" --max-seqs 8
  for i in 1 2 3 4 5 6; do
    curl -s "$URL/v1/completions" -d "{\"prompt\": \"p$i\", \"max_tokens\": 300, \"seed\": $i, \"ignore_eos\": true}" > "$T/alone$i.json"
  done
  s0=$(curl -s "$URL/metrics" | awk '/^serve_decode_steps_total/ { print $2 }')
  for i in 1 2 3 4 5 6; do
    curl -s "$URL/v1/completions" -d "{\"prompt\": \"p$i\", \"max_tokens\": 300, \"seed\": $i, \"ignore_eos\": true}" > "$T/batch$i.json" &
    pids="${pids:-} $!"
  done
  wait $pids
  for i in 1 2 3 4 5 6; do
    jq -e -n --slurpfile a "$T/alone$i.json" --slurpfile b "$T/batch$i.json" '
      $a[0].choices[0] as $x | $b[0].choices[0] as $y | $x.token_ids == $y.token_ids
      and ($x.token_ids | length) == 300
      and ([$x.token_logprobs_all, $y.token_logprobs_all] | transpose | all(.[]; (.[0] - .[1]) | fabs < 1e-4))'
  done
  # one at a time, the 1,800 tokens take 6 x 299 steps (the last token of
  # each needs none); together, fewer
  s1=$(curl -s "$URL/metrics" | awk '/^serve_decode_steps_total/ { print $2 }')
  echo "steps: $((s1 - s0))"
  [ $((s1 - s0)) -lt 1794 ]
}

@test "requests without a seed draw afresh; a seed repeats" {
  start --ckpt a="$F/a"
  body='{"prompt": "x", "max_tokens": 16}'
  a=$(curl -s "$URL/v1/completions" -d "$body" | jq -c .choices[0].token_ids)
  b=$(curl -s "$URL/v1/completions" -d "$body" | jq -c .choices[0].token_ids)
  [ "$a" != "$b" ]
  c=$(curl -s "$URL/v1/completions" -d '{"prompt": "x", "max_tokens": 16, "seed": 7}' | jq -c .choices[0].token_ids)
  d=$(curl -s "$URL/v1/completions" -d '{"prompt": "x", "max_tokens": 16, "seed": 7}' | jq -c .choices[0].token_ids)
  [ "$c" = "$d" ]
}

# The client labs use, from the npm registry: installed once into a cache
# folder; without the registry the test says so and is skipped.
@test "OpenAI's client for Node drives serve: models, tool calls, streams, stop, log-probs, errors" {
  command -v node > /dev/null && command -v npm > /dev/null || skip "node and npm are not installed"
  dir=${FW_NPM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flywheel/npm-openai}
  if [ ! -f "$dir/node_modules/openai/package.json" ]; then
    mkdir -p "$dir"
    timeout 300 npm install --prefix "$dir" --no-audit --no-fund --no-package-lock openai@6 \
      > "$T/npm.log" 2>&1 || skip "npm cannot reach the registry: $(grep -m1 -i error "$T/npm.log")"
  fi
  start --ckpt a="$F/a" --ckpt t="$F/t" --api-key k-test
  NODE_PATH="$dir/node_modules" run node "$BATS_TEST_DIRNAME/client/openai-node.mjs" "$URL" k-test \
    "$F/chat.json"
  echo "$output"
  assert_success
  refute_line --partial "not ok"
  assert_line "1..9"
}

# As in the batching test, sums grouped otherwise: log-probs to 1e-4.
@test "a prompt that a request being decoded shares takes that cache and decodes as alone" {
  ckpt init "$BATS_TEST_DIRNAME/../samples/models/bench-8x512.json" "$T/big" --seed 1
  start --ckpt big="$T/big"
  p=$(jq -nc '[range(64) | . * 7 % 250 + 3]')
  # A streams on; B comes once A's first token is out, so while A decodes
  curl -sN "$URL/v1/completions" -d "{\"prompt\": $p, \"max_tokens\": 100, \"ignore_eos\": true,
    \"stream\": true}" > "$T/a.ev" &
  apid=$!
  for _ in $(seq 400); do grep -q '"text"' "$T/a.ev" && break; sleep 0.05; done
  b="{\"prompt\": $p, \"max_tokens\": 8, \"seed\": 5, \"ignore_eos\": true}"
  curl -s "$URL/v1/completions" -d "$b" > "$T/b.json"
  wait $apid
  [ "$(sed -n 's/^data: //p' "$T/a.ev" | tail -1)" = "[DONE]" ]
  # the prompt but its last id came from A's cache
  curl -s "$URL/metrics" | grep -qx 'serve_prefix_shared_tokens_total{model="big"} 63'
  # B alone: nothing to share
  curl -s "$URL/v1/completions" -d "$b" > "$T/b2.json"
  curl -s "$URL/metrics" | grep -qx 'serve_prefix_shared_tokens_total{model="big"} 63'
  jq -e -n --slurpfile x "$T/b.json" --slurpfile y "$T/b2.json" '
    $x[0].choices[0] as $x | $y[0].choices[0] as $y | $x.token_ids == $y.token_ids
    and ([$x.token_logprobs_all, $y.token_logprobs_all] | transpose | all(.[]; (.[0] - .[1]) | fabs < 1e-4))'
}
