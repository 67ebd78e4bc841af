#!/usr/bin/env bats
# A function-calling agent with a model taught to call a tool (make check:
# the teaching takes minutes on 2 cores, the chat with the tools declared
# being about 2,100 tokens): the call is parsed from the model's reply,
# through serve and in process, run in the workspace, and its result
# answers it by id.

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  T="$BATS_TEST_TMPDIR"
  export TMPDIR="$T/tmp"
  mkdir -p "$TMPDIR"
  S="$BATS_TEST_DIRNAME/../../samples"
}

teardown() {
  if [ -f "$T/serve.pid" ]; then kill "$(cat "$T/serve.pid")" 2>/dev/null || true; fi
}

json() { rec json "$1"; }

start_serve() {
  serve --port 0 "$@" > "$T/serve.url" 2> "$T/serve.err" &
  echo $! > "$T/serve.pid"
  for _ in $(seq 100); do [ -s "$T/serve.url" ] && break; sleep 0.05; done
  URL=$(cat "$T/serve.url")
  [ -n "$URL" ]
}

@test "a taught model's tool call runs through serve and in process, its result answering it by id" {
  cp -r "$S/repos/textkit" "$T/textkit"
  "$S/repos/commit.sh" "$T/textkit"
  task-mutate --test-cmd 'python3 -m pytest -q -p no:cacheprovider --junitxml=$FW_REPORT' \
    --store "$T/st.git" --strategy stub-body --max 1 -o "$T/task1.mp" "$T/textkit" 2>/dev/null
  jq '.max_position_embeddings = 4096' "$S/models/tiny-qwen2.json" > "$T/long.json"
  ckpt init "$T/long.json" "$T/tk" --seed 2 > /dev/null
  rollout --print-tools > "$T/tools.json"
  rollout --policy "builtin:$T/tk" --mode agent --tools --max-tokens 1 "$T/task1.mp" \
    | rec json > "$T/t0.json"
  cmd='echo hi > note.txt; ls textkit'
  jq -c --slurpfile t "$T/tools.json" '{messages: ([.turns[0, 1]] | map({role, content: .text})),
    tools: $t[0]}' "$T/t0.json" > "$T/q1.json"
  start_serve --ckpt "t=$T/tk"
  curl -s "$URL/tokenize" -d @"$T/q1.json" | jq -c .tokens > "$T/ids1.json"
  kill "$(cat "$T/serve.pid")"
  rm "$T/serve.pid"
  /usr/bin/python3 "$BATS_TEST_DIRNAME/../fixtures/serve-teach.py" "$T/tk" "$T/ids1.json" \
    "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"$cmd\"}}\n</tool_call>"
  # what comes after the first call is untaught: at --max-steps 1 a second
  # call ends the episode at max-steps, a reply without one at no-action
  check() {
    run jq -c '[.steps, (.stop == "max-steps" or .stop == "no-action"), .turns[2].calls[0].name,
                (.turns[2].calls[0].args | fromjson | .command), .turns[3].role,
                .turns[3].call_id == .turns[2].calls[0].id, .turns[3].exit, .turns[3].is_error,
                (.patch | contains("+hi"))]' "$1"
    assert_output "[1,true,\"bash\",\"$cmd\",\"tool\",true,0,false,true]"
  }
  start_serve --ckpt "t=$T/tk"
  run --separate-stderr rollout --policy "http:$URL/v1" --mode agent --tools --temp 0 \
    --max-tokens 300 --max-steps 1 -o "$T/h.mp" "$T/task1.mp"
  assert_success
  json "$T/h.mp" > "$T/h.json"
  check "$T/h.json"
  run --separate-stderr rollout --policy "builtin:$T/tk" --mode agent --tools --temp 0 \
    --max-tokens 300 --max-steps 1 -o "$T/b.mp" "$T/task1.mp"
  assert_success
  json "$T/b.mp" > "$T/b.json"
  check "$T/b.json"
  # token for token the same call from both backends
  diff <(jq -c '.turns[2].tokens' "$T/h.json") <(jq -c '.turns[2].tokens' "$T/b.json")
}
