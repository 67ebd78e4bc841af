#!/usr/bin/env bats
# fb-ingest: product logs and feedback events to traj records.

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  FIX="$BATS_TEST_DIRNAME/fixtures/ingest"
  S="$BATS_TEST_DIRNAME/../samples/feedback"
  T="$BATS_TEST_TMPDIR"
}

# turns of the record whose meta.source_id is $2, from log $1, unredacted
turns_of() {
  fb-ingest -q --no-redact "$1" | rec json | jq -S -c --arg s "$2" 'select(.meta.source_id == $s) | .turns'
}

# the expected turns of a format, as written by hand in expected/
expected() {
  jq -S -c . "$FIX/expected/$1.json"
}

all_samples() {
  fb-ingest "$@" --feedback "$S/feedback-external.jsonl" --feedback "$S/feedback-internal.csv" \
    "$S/openai-chat.jsonl" "$S/openai-responses.jsonl" "$S/anthropic.jsonl" \
    "$S"/claude-code/*.jsonl "$S/sharegpt.jsonl" "$S"/swe-agent/*.traj
}

@test "OpenAI Chat Completions: parallel tool calls, tool results by id, the response choice" {
  [ "$(turns_of "$FIX/openai-chat.jsonl" chatcmpl-fix1)" = "$(expected openai-chat)" ]
  run -0 bash -c "fb-ingest -q '$FIX/openai-chat.jsonl' | rec json | jq -c '[.source, .model, .created, .usage, .meta.item]'"
  assert_output '["openai-chat","ckpt-b","2026-11-02T08:00:00Z",{"input_tokens":120,"output_tokens":9},"item-007"]'
}

@test "OpenAI Responses: reasoning, function_call and function_call_output items" {
  [ "$(turns_of "$FIX/openai-responses.jsonl" resp_fix2)" = "$(expected openai-responses)" ]
  run -0 bash -c "fb-ingest -q '$FIX/openai-responses.jsonl' | rec json | jq -c '[.source, .model, .meta.unknown_items]'"
  assert_output '["openai-responses","ckpt-a",1]'
}

@test "Anthropic Messages: thinking, tool_use input as JSON text, results with is_error inside user turns" {
  [ "$(turns_of "$FIX/anthropic.jsonl" msg_fix3)" = "$(expected anthropic)" ]
  run -0 bash -c "fb-ingest -q '$FIX/anthropic.jsonl' | rec json | jq -c '[.source, .model, .created, .meta.stop]'"
  assert_output '["anthropic","ckpt-c","2026-11-02T08:30:00Z","end_turn"]'
}

@test "Claude Code: the main thread is rebuilt, edited branches and side chains are left out" {
  [ "$(turns_of "$FIX/claude-code.jsonl" S1)" = "$(expected claude-code)" ]
  run -0 bash -c "fb-ingest -q '$FIX/claude-code.jsonl' 2>/dev/null | rec json | jq -c '[.meta.source_id, .model, .tags, .meta.sidechain_events, .meta.dropped_events, .usage.output_tokens]'"
  assert_line --index 0 '["S1","ckpt-b",["sidechain"],2,2,26]'
  assert_line --index 1 '["S2","ckpt-a",[],null,null,1]'
}

@test "ShareGPT: function calls are matched to observations by position" {
  [ "$(turns_of "$FIX/sharegpt.jsonl" sg-fix5)" = "$(expected sharegpt)" ]
}

@test "SWE-agent .traj: actions become calls answered by the next observation" {
  [ "$(turns_of "$FIX/swe-agent.traj" calc__calc-1)" = "$(expected swe-agent)" ]
  run -0 bash -c "fb-ingest -q '$FIX/swe-agent.traj' | rec json | jq -c '[.source, .model, .usage, .meta.exit_status]'"
  assert_output '["swe-agent","ckpt-c",{"input_tokens":5000,"output_tokens":300},"submitted"]'
}

@test "flywheel records go through again unchanged, ids kept" {
  fb-ingest -q --no-redact "$FIX/openai-chat.jsonl" "$FIX/anthropic.jsonl" "$FIX/claude-code.jsonl" \
    "$FIX/swe-agent.traj" > "$T/a.mp" 2>/dev/null
  [ "$(rec count "$T/a.mp")" = 5 ]
  run -0 fb-ingest -q --no-redact "$T/a.mp"
  diff <(rec json "$T/a.mp" | jq -c 'del(.meta.file, .meta.line)') \
       <(fb-ingest -q --no-redact "$T/a.mp" | rec json | jq -c 'del(.meta.file, .meta.line)')
}

@test "each file's format is detected, and --format forces one" {
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" "$FIX/openai-chat.jsonl" "$FIX/anthropic.jsonl" "$FIX/sharegpt.jsonl"
  [[ "$stderr" == *"openai-chat: 1 trajectory from 1 file"* ]]
  [[ "$stderr" == *"anthropic: 1 trajectory from 1 file"* ]]
  [[ "$stderr" == *"sharegpt: 1 trajectory from 1 file"* ]]
  run -0 --separate-stderr fb-ingest --format sharegpt -o "$T/o.mp" "$FIX/openai-chat.jsonl"
  [[ "$stderr" == *"openai-chat.jsonl: line 1: 'conversations' is missing"* ]]
}

@test "an unknown format says what was seen and sets exit status 1" {
  echo '{"foo": 1, "bar": [2]}' > "$T/odd.jsonl"
  run -1 --separate-stderr fb-ingest -o "$T/o.mp" "$T/odd.jsonl" "$FIX/sharegpt.jsonl"
  [[ "$stderr" == *"fb-ingest: $T/odd.jsonl: unknown format: a JSON object with keys 'foo', 'bar'"* ]]
  # the other file is still ingested
  [ "$(rec count "$T/o.mp")" = 1 ]
}

@test "a malformed line names file and line, is skipped and counted" {
  { cat "$FIX/openai-chat.jsonl"; echo '{"id": "chatcmpl-x", "messages": [ '; cat "$FIX/openai-chat.jsonl" | sed 's/fix1/fix9/; s/add()/sub()/'; } > "$T/log.jsonl"
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" "$T/log.jsonl"
  [[ "$stderr" == *"fb-ingest: $T/log.jsonl: line 2: invalid JSON:"* ]]
  [[ "$stderr" == *"openai-chat: 2 trajectories from 1 file, 0 duplicates dropped, 1 skipped"* ]]
  [ "$(rec count "$T/o.mp")" = 2 ]
}

@test "a wrong field type says which field" {
  echo '{"id": "c1", "object": "chat.completion", "messages": [{"role": "assistant", "content": "x", "tool_calls": {"id": 1}}]}' > "$T/bad.jsonl"
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" --format openai-chat "$T/bad.jsonl"
  [[ "$stderr" == *"line 1: 'tool_calls' is object, not array"* ]]
}

@test "--strict stops at the first bad line, exits 1, and keeps every record before it" {
  { cat "$FIX/openai-chat.jsonl"; echo 'not json'; sed 's/fix1/fix9/; s/add()/sub()/' "$FIX/openai-chat.jsonl"; } > "$T/log.jsonl"
  run -1 --separate-stderr fb-ingest --strict -o "$T/o.mp" "$T/log.jsonl"
  [[ "$stderr" == *"line 2: invalid JSON"* ]]
  [ "$(rec count "$T/o.mp")" = 1 ]
  run -1 fb-ingest --strict --feedback "$FIX/feedback.jsonl" -o "$T/o2.mp" "$FIX/sharegpt.jsonl"
  assert_output --partial "feedback.jsonl: line 8: invalid JSON"
}

@test "ids come from content: the same log twice gives the same ids, duplicates are dropped and counted" {
  a=$(fb-ingest -q "$FIX/anthropic.jsonl" | rec json | jq -r .id)
  b=$(cp "$FIX/anthropic.jsonl" "$T/copy.jsonl"; fb-ingest -q "$T/copy.jsonl" | rec json | jq -r .id)
  [ "$a" = "$b" ]
  [[ "$a" =~ ^[0-9a-f]{16}$ ]]
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" "$FIX/anthropic.jsonl" "$T/copy.jsonl"
  [[ "$stderr" == *"anthropic: 1 trajectory from 2 files, 1 duplicates dropped"* ]]
  [ "$(rec count "$T/o.mp")" = 1 ]
  # a different conversation gets a different id
  c=$(sed 's/Why does make fail/Why does cmake fail/' "$FIX/anthropic.jsonl" | fb-ingest -q | rec json | jq -r .id)
  [ "$a" != "$c" ]
}

@test "feedback is joined by trajectory id, the latest vote per user wins, ratings are normalised" {
  fb-ingest -q --feedback "$FIX/feedback.jsonl" --feedback "$FIX/feedback.csv" -o "$T/o.mp" \
    "$FIX/openai-chat.jsonl" "$FIX/openai-responses.jsonl" "$FIX/anthropic.jsonl" \
    "$FIX/sharegpt.jsonl" "$FIX/claude-code.jsonl" "$FIX/swe-agent.traj" 2>/dev/null
  fb() { rec json "$T/o.mp" | jq -c --arg s "$1" 'select(.meta.source_id == $s) | [.feedback[] | [.rating, .raw, .user, .origin, .at, .comment]]'; }
  [ "$(fb chatcmpl-fix1)" = '[[1,"up","u1","external","2026-11-03T10:00:00Z",""]]' ]
  [ "$(fb resp_fix2)" = '[[-1,-1,"u2","external","2026-11-02T09:00:00Z",""]]' ]
  [ "$(fb msg_fix3)" = '[[1,true,"u3","external","2026-11-03T09:00:00Z","nice"]]' ]
  [ "$(fb S1)" = '[[-1,false,"u4","internal","2026-11-03T12:00:00Z",""]]' ]
  # a 1-5 scale: 4-5 up, 1-2 down, 3 neutral; CSV quoting
  [ "$(fb calc__calc-1)" = '[[1,"5","r1","internal","2026-11-04T08:00:00Z","works, finally"],[-1,"2","r2","internal","2026-11-04T08:05:00Z",""]]' ]
  [ "$(fb S2)" = '[[-1,"1","r3","internal","2026-11-04T08:20:00Z","said \"hi\" only"]]' ]
}

@test "feedback summary counts joined, orphaned, superseded, neutral and skipped events" {
  run -0 --separate-stderr fb-ingest --feedback "$FIX/feedback.jsonl" --feedback "$FIX/feedback.csv" \
    -o "$T/o.mp" "$FIX/openai-chat.jsonl" "$FIX/openai-responses.jsonl" "$FIX/anthropic.jsonl" \
    "$FIX/sharegpt.jsonl" "$FIX/claude-code.jsonl" "$FIX/swe-agent.traj"
  [[ "$stderr" == *"feedback.jsonl: line 8: invalid JSON"* ]]
  [[ "$stderr" == *"feedback.jsonl: line 9: cannot parse rating 'meh'"* ]]
  [[ "$stderr" == *"feedback: 11 events, 8 joined, 2 orphaned, 1 superseded, 1 neutral, 2 skipped"* ]]
}

@test "orphan feedback is written with --orphans, never silently dropped" {
  fb-ingest -q --feedback "$FIX/feedback.jsonl" --feedback "$FIX/feedback.csv" --orphans "$T/orph.mp" \
    -o "$T/o.mp" "$FIX/openai-chat.jsonl" 2>/dev/null
  run -0 bash -c "rec json '$T/orph.mp' | jq -r '[.kind, .trace, .rating, .line] | @tsv'"
  assert_line "feedback	chatcmpl-nope	1	7"
  assert_line "feedback	orphan-csv	1	6"
  assert_line "feedback	resp_fix2	-1	3"
  [ "${#lines[@]}" = 9 ]
}

@test "redaction is on by default, counted per record, and --no-redact turns it off" {
  run -0 bash -c "fb-ingest -q --feedback '$FIX/feedback.jsonl' '$FIX/sharegpt.jsonl' 2>/dev/null | rec json | jq -c '[.feedback[0].comment, .meta.redactions]'"
  assert_output '["wrong file, mail me at <REDACTED:email>",{"email":1}]'
  run -0 bash -c "fb-ingest -q --no-redact --feedback '$FIX/feedback.jsonl' '$FIX/sharegpt.jsonl' 2>/dev/null | rec json | jq -c '[.feedback[0].comment, .meta.redactions]'"
  assert_output '["wrong file, mail me at jo.doe@example.org",null]'
}

@test "no planted secret of the samples survives redaction" {
  tail -n +2 "$S/planted-secrets.tsv" | cut -f2 > "$T/secrets"
  n=$(wc -l < "$T/secrets")
  [ "$n" -ge 80 ]
  # every rule is planted
  [ "$(tail -n +2 "$S/planted-secrets.tsv" | cut -f1 | sort -u | wc -l)" = 11 ]
  all_samples --no-redact -q --orphans "$T/o-raw.mp" -o "$T/raw.mp"
  [ "$(cat "$T/raw.mp" "$T/o-raw.mp" | grep -a -o -F -f "$T/secrets" | sort -u | wc -l)" = "$n" ]
  run -0 --separate-stderr all_samples --orphans "$T/o-red.mp" -o "$T/red.mp"
  run ! grep -a -F -f "$T/secrets" "$T/red.mp" "$T/o-red.mp"
  # exactly the planted secrets were redacted: no false positives in the samples
  [ "$(cat "$T/red.mp" "$T/o-red.mp" | grep -a -o '<REDACTED:[a-z-]*>' | wc -l)" = "$n" ]
}

@test "the samples hold over 300 trajectories from three models in six formats" {
  all_samples -q -o "$T/all.mp"
  [ "$(rec count "$T/all.mp")" -ge 300 ]
  [ "$(rec json "$T/all.mp" | jq -r .model | sort -u | tr '\n' ' ')" = "ckpt-a ckpt-b ckpt-c " ]
  [ "$(rec json "$T/all.mp" | jq -r .source | sort -u | wc -l)" = 6 ]
  # most trajectories carry feedback, from both origins
  [ "$(rec json "$T/all.mp" | jq -r '.feedback[].origin' | sort -u | tr '\n' ' ')" = "external internal " ]
}

@test "the summary goes to stderr and stdout holds only records" {
  run -0 --separate-stderr fb-ingest "$FIX/sharegpt.jsonl"
  [[ "$stderr" == *"sharegpt: 1 trajectory from 1 file"* ]]
  [[ "$stderr" == *"redactions: 0"* ]]
  fb-ingest "$FIX/sharegpt.jsonl" 2>/dev/null | rec count | grep -qx 1
}

@test "reads standard input and compresses with -z" {
  fb-ingest -q -z < "$FIX/anthropic.jsonl" > "$T/o.zst"
  [ "$(head -c 4 "$T/o.zst" | od -An -tx1 | tr -d ' ')" = "28b52ffd" ]
  [ "$(rec count "$T/o.zst")" = 1 ]
}

@test "--help, --version and usage errors" {
  run -0 --separate-stderr fb-ingest --help
  assert_line --index 0 "usage: fb-ingest [--format F] [--model NAME] [--meta KEY=VALUE]... [--feedback FILE]..."
  run -0 fb-ingest --version
  assert_output --regexp '^fb-ingest \(flywheel\) [0-9.]+$'
  run -2 --separate-stderr fb-ingest --format yaml
  [[ "$stderr" == *"unknown format 'yaml'"* ]]
  run -2 fb-ingest --bogus
}

@test "feedback files with a byte order mark, CRLF and an event id next to the trajectory id" {
  printf '\xef\xbb\xbf{"id": "ev-1", "trace_id": "sg-fix5", "vote": "down", "user": "z"}\n' > "$T/f.jsonl"
  printf '\xef\xbb\xbfid,rating,trajectory_id,user\r\nev-2,up,msg_fix3,y\r\n' > "$T/f.csv"
  run -0 bash -c "fb-ingest -q --feedback '$T/f.jsonl' --feedback '$T/f.csv' '$FIX/sharegpt.jsonl' '$FIX/anthropic.jsonl' | rec json | jq -c '[.meta.source_id, [.feedback[] | [.rating, .user]]]'"
  assert_line --index 0 '["sg-fix5",[[-1,"z"]]]'
  assert_line --index 1 '["msg_fix3",[[1,"y"]]]'
}

@test "every sample trajectory has the turns its episode was generated from" {
  # sample-turns.jsonl is worked out by gen.py from the abstract episodes,
  # one signature per turn: role|text length|thinking length|call names|argument lengths|error
  all_samples -q --no-redact -o "$T/all.mp"
  rec json "$T/all.mp" | jq -r '[.meta.source_id, .model, (.turns | map([.role, (.text | length),
      ((.thinking // "") | length), ([.calls[]?.name] | join(",")), ([.calls[]?.args | length | tostring] | join(",")),
      (if .role == "tool" then (if .is_error then "1" else "0" end) else "" end)] | map(tostring) | join("|")))] | @json' |
    sort > "$T/got"
  jq -r '[.source_id, .model, .turns] | @json' "$FIX/sample-turns.jsonl" | sort > "$T/want"
  [ "$(wc -l < "$T/want")" -ge 300 ]
  diff "$T/want" "$T/got"
}

@test "every tool turn answers a call of the assistant turn before it" {
  all_samples -q --no-redact -o "$T/all.mp"
  run -0 bash -c "rec json '$T/all.mp' | jq -s '[.[] | .turns as \$t | range(0; \$t | length) as \$i
      | select(\$t[\$i].role == \"tool\")
      | select(([\$t[:\$i][] | select(.role == \"assistant\")] | last | [.calls[]?.id] | index([\$t[\$i].call_id])) == null)] | length'"
  assert_output 0
  # and the check can fail: break one id
  run -0 bash -c "rec json '$T/all.mp' | head -1 | jq -c '.turns[3].call_id = \"nope\"' | jq -s '[.[] | .turns as \$t | range(0; \$t | length) as \$i
      | select(\$t[\$i].role == \"tool\")
      | select(([\$t[:\$i][] | select(.role == \"assistant\")] | last | [.calls[]?.id] | index([\$t[\$i].call_id])) == null)] | length'"
  assert_output 1
}

@test "orphan feedback is redacted too" {
  echo '{"trace_id": "nowhere", "rating": "down", "user": "u9", "comment": "call me: ana.lima@example.com"}' > "$T/f.jsonl"
  run -0 --separate-stderr fb-ingest --feedback "$T/f.jsonl" --orphans "$T/orph.mp" -o "$T/o.mp" "$FIX/sharegpt.jsonl"
  [[ "$stderr" == *"redactions: 1 (email 1)"* ]]
  run -0 bash -c "rec json '$T/orph.mp' | jq -c '[.trace, .comment, .meta.redactions]'"
  assert_output '["nowhere","call me: <REDACTED:email>",{"email":1}]'
}

@test "a pretty-printed JSON array of conversations is read as one document" {
  jq -s '.[1].id = "sg-fix6" | .[1].conversations[-1].value = "43 lines."' "$FIX/sharegpt.jsonl" "$FIX/sharegpt.jsonl" > "$T/sg.json"
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" "$T/sg.json"
  [[ "$stderr" == *"sharegpt: 2 trajectories from 1 file, 0 duplicates dropped, 0 skipped"* ]]
  [ "$(rec json "$T/o.mp" | jq -S -c '.turns' | head -1)" = "$(expected sharegpt)" ]
}

@test "a first line longer than the detection window is still JSON Lines" {
  jq -c '.request.messages[4].content = [{"type": "text", "text": ("x" * 100000)}]' "$FIX/openai-chat.jsonl" > "$T/long.jsonl"
  jq -c '.request.messages[4].content = "short"' "$FIX/openai-chat.jsonl" >> "$T/long.jsonl"
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" "$T/long.jsonl"
  [[ "$stderr" == *"openai-chat: 2 trajectories from 1 file, 0 duplicates dropped, 0 skipped"* ]]
  [ "$(rec json "$T/o.mp" | jq '.turns[4].text | length' | head -1)" = 100000 ]
  # and from a pipe
  [ "$(fb-ingest -q < "$T/long.jsonl" | rec count)" = 2 ]
}

@test "the usage and the man page synopsis agree word for word" {
  load usage
  usage_is_synopsis fb-ingest
}

@test "a missing log sets exit status 1 and the others are still read; a missing feedback file stops before output" {
  run -1 --separate-stderr fb-ingest -o "$T/o.mp" "$T/nope.jsonl" "$FIX/sharegpt.jsonl"
  [[ "$stderr" == *"fb-ingest: $T/nope.jsonl: No such file or directory"* ]]
  [ "$(rec count "$T/o.mp")" = 1 ]
  run -1 --separate-stderr fb-ingest --feedback "$T/nope.csv" -o "$T/o2.mp" "$FIX/sharegpt.jsonl"
  [[ "$stderr" == *"fb-ingest: $T/nope.csv: No such file or directory"* ]]
  [ ! -e "$T/o2.mp" ]
}

# ---- agent formats ----------------------------------------------------------

@test "mini-swe-agent: the single bash block of a reply is its call, the next user message its result" {
  [ "$(turns_of "$FIX/mini-swe-agent.traj.json" mini-swe-agent)" = "$(expected mini-swe-agent)" ]
  run -0 bash -c "fb-ingest -q '$FIX/mini-swe-agent.traj.json' | rec json | jq -c '[.source, .model, .meta.exit_status, .meta.trajectory_format, .meta.cost, has(\"created\")]'"
  assert_output '["mini-swe-agent","ckpt-d","Submitted","mini-swe-agent-1",0.0123,false]'
}

@test "mini-swe-agent: a bare message list is one trajectory named after its file" {
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" "$FIX/mini-swe-agent-list.json"
  [[ "$stderr" == *"mini-swe-agent: 1 trajectory from 1 file"* ]]
  run -0 bash -c "rec json '$T/o.mp' | jq -c '[.meta.source_id, [.turns[] | .role], .turns[2].calls[0].args, .turns[3].call_id]'"
  assert_output '["mini-swe-agent-list",["system","user","assistant","tool"],"{\"command\":\"python -m pytest -q\"}","step-0"]'
}

@test "mini-swe-agent: tool-calling models keep their calls and tool messages" {
  jq '.trajectory_format = "mini-swe-agent-1.1" | .messages = (.messages[:2] + [
      {"role": "assistant", "content": "", "tool_calls": [{"id": "call_m1", "type": "function",
        "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
      {"role": "tool", "tool_call_id": "call_m1", "content": "calc.py"}])' \
    "$FIX/mini-swe-agent.traj.json" > "$T/tc.traj.json"
  run -0 bash -c "fb-ingest -q --no-redact '$T/tc.traj.json' | rec json | jq -c '.turns[2:] | map([.role, .calls[0].id // .call_id, .calls[0].args // .text])'"
  assert_output '[["assistant","call_m1","{\"command\":\"ls\"}"],["tool","call_m1","calc.py"]]'
}

@test "OpenHands: actions are calls with the model's arguments, observations answer their cause" {
  [ "$(turns_of "$FIX/openhands.json" openhands)" = "$(expected openhands)" ]
  run -0 bash -c "fb-ingest -q '$FIX/openhands.json' | rec json | jq -c '[.source, .model, .created, .usage]'"
  assert_output '["openhands","ckpt-d","2026-11-05T09:00:00Z",{"input_tokens":3000,"output_tokens":75}]'
}

@test "OpenHands: an evaluation output line names the instance" {
  jq -c '{instance_id: "calc__calc-3", instruction: "fix", history: ., metadata: {llm_config: {model: "litellm/ckpt-d"}}, test_result: {}}' \
    "$FIX/openhands.json" > "$T/output.jsonl"
  run -0 bash -c "fb-ingest -q --no-redact '$T/output.jsonl' | rec json | jq -c '[.source, .meta.source_id, .model, (.turns | length)]'"
  assert_output '["openhands","calc__calc-3","ckpt-d",8]'
  # without the model's responses the configured model is used
  jq -c '.history |= map(del(.tool_call_metadata))' "$T/output.jsonl" > "$T/bare.jsonl"
  run -0 bash -c "fb-ingest -q --no-redact '$T/bare.jsonl' | rec json | jq -c '[.model, .turns[2].calls[0].name, .turns[2].calls[0].args]'"
  assert_output '["litellm/ckpt-d","run","{\"command\":\"grep -n '"'"'def add'"'"' calc.py\",\"is_input\":false}"]'
}

@test "OpenHands and mini-swe-agent: a broken event or message names itself, the other files are read" {
  jq '.[4] |= del(.observation)' "$FIX/openhands.json" > "$T/oh.json"
  jq '.messages[3] |= del(.role)' "$FIX/mini-swe-agent.traj.json" > "$T/m.traj.json"
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" "$T/oh.json" "$T/m.traj.json" "$FIX/sharegpt.jsonl"
  [[ "$stderr" == *"$T/oh.json: line 1: '[4]' has neither 'action' nor 'observation'"* ]]
  [[ "$stderr" == *"$T/m.traj.json: line 1: 'messages[3].role' is missing"* ]]
  [[ "$stderr" == *"openhands: 0 trajectories from 1 file, 0 duplicates dropped, 1 skipped"* ]]
  [ "$(rec count "$T/o.mp")" = 1 ]
  # --strict: exit 1 at the first, after what came before it
  run -1 --separate-stderr fb-ingest --strict -o "$T/o.mp" "$FIX/sharegpt.jsonl" "$T/m.traj.json" "$FIX/openhands.json"
  [ "$(rec json "$T/o.mp" | jq -r .source)" = sharegpt ]
}

@test "Codex rollouts: response items make the turns, unknown lines are kept in meta" {
  [ "$(turns_of "$FIX/codex.jsonl" 0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b)" = "$(expected codex)" ]
  run -0 bash -c "fb-ingest -q '$FIX/codex.jsonl' | rec json | jq -c '[.source, .model, .created, .usage, .tags, .meta.git_branch, .meta.unknown_items, [.meta.unknown[] | [.type, .line]]]'"
  assert_output '["codex","ckpt-e","2026-11-06T10:00:00Z",{"input_tokens":5200,"output_tokens":310},["compacted"],"main",{"web_search_call":1},[["world_state",16]]]'
}

@test "Codex rollouts: rollouts put together are told apart by their session_meta" {
  { cat "$FIX/codex.jsonl"; sed 's/0199a1b2/0299a1b2/; s/subtracts; fix it/multiplies; fix it/' "$FIX/codex.jsonl"; } > "$T/two.jsonl"
  run -0 bash -c "fb-ingest -q '$T/two.jsonl' | rec json | jq -c '[.meta.source_id[0:8], .meta.line]'"
  assert_line --index 0 '["0199a1b2",1]'
  assert_line --index 1 '["0299a1b2",18]'
}

@test "Codex rollouts: a malformed line is named and skipped, a broken item costs only its rollout" {
  { head -5 "$FIX/codex.jsonl"; echo '{"timestamp": "2026-11-06T10:00:02Z", "type": '; tail -n +6 "$FIX/codex.jsonl"; } > "$T/a.jsonl"
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" "$T/a.jsonl"
  [[ "$stderr" == *"$T/a.jsonl: line 6: invalid JSON:"* ]]
  [[ "$stderr" == *"codex: 1 trajectory from 1 file, 0 duplicates dropped, 1 skipped"* ]]
  [ "$(rec json "$T/o.mp" | jq -S -c .turns)" = "$(expected codex)" ]
  # a line of white space is passed over; JSON that is no object and a line
  # of NUL bytes are named by their numbers
  { head -5 "$FIX/codex.jsonl"; printf ' \t\r\n[1]\n\0\0\n'; tail -n +6 "$FIX/codex.jsonl"; } > "$T/c.jsonl"
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" "$T/c.jsonl"
  [[ "$stderr" != *"c.jsonl: line 6:"* ]]
  [[ "$stderr" == *"$T/c.jsonl: line 7: not a JSON object"* ]]
  [[ "$stderr" == *"$T/c.jsonl: line 8: invalid JSON:"* ]]
  [ "$(rec json "$T/o.mp" | jq -S -c .turns)" = "$(expected codex)" ]
  # a call whose arguments are not the JSON string the protocol has
  { sed '7s/"arguments":"[^}]*}"/"arguments":{"command":"ls"}/' "$FIX/codex.jsonl"; sed 's/0199a1b2/0299a1b2/' "$FIX/codex.jsonl"; } > "$T/b.jsonl"
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" "$T/b.jsonl"
  [[ "$stderr" == *"$T/b.jsonl: line 7: 'payload.arguments' is object, not string"* ]]
  [ "$(rec json "$T/o.mp" | jq -r .meta.source_id)" = 0299a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b ]
  # --strict stops there with exit 1
  run -1 fb-ingest --strict -o "$T/o.mp" "$T/b.jsonl"
  [ "$(rec count "$T/o.mp")" = 0 ]
}

@test "OpenTelemetry: the trajectory is rebuilt from the chat spans, tool results from execute_tool" {
  run -0 bash -c "fb-ingest -q --no-redact '$FIX/otel.json' | rec json | jq -S -c .turns | head -1"
  assert_output "$(expected otel)"
  run -0 bash -c "fb-ingest -q '$FIX/otel.json' | rec json | jq -c '[.source, .model, .created, .usage, .meta.source_id, .meta.agent_name, .meta.service]'"
  assert_line --index 0 '["otel","ckpt-f-2026","2026-11-07T10:00:00Z",{"input_tokens":450,"output_tokens":45},"conv-otel-1","calc-fixer","calc-agent"]'
  # a trace with no agent span is a trajectory of its own
  assert_line --index 1 '["otel","ckpt-f","2026-11-07T10:00:20Z",{},"0af7651916cd43dd8448eb211c80319c",null,"chat-app"]'
}

@test "OpenTelemetry: spans spread over the lines of a collector file make the same trajectory" {
  # one export request per line, the agent's spans split between two of them
  jq -c '.resourceSpans[0] as $r | ($r | .scopeSpans = [.scopeSpans[1]] | {resourceSpans: [.]}),
         ($r | .scopeSpans = [.scopeSpans[0]] | {resourceSpans: [.]}),
         {resourceSpans: [.resourceSpans[1]]}' "$FIX/otel.json" > "$T/traces.jsonl"
  [ "$(wc -l < "$T/traces.jsonl")" = 3 ]
  run -0 bash -c "fb-ingest -q --no-redact '$T/traces.jsonl' | rec json | jq -S -c .turns | head -1"
  assert_output "$(expected otel)"
}

@test "OpenTelemetry: a bad line and a trace without messages are named, the rest is kept" {
  { jq -c '{resourceSpans: [.resourceSpans[0]]}' "$FIX/otel.json"; echo '{"resourceSpans": [ '; } > "$T/t.jsonl"
  jq -c '{resourceSpans: [.resourceSpans[1]]} | .resourceSpans[0].scopeSpans[0].spans[0].attributes |=
      map(select(.key | startswith("gen_ai.") and contains("messages") | not))' "$FIX/otel.json" >> "$T/t.jsonl"
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" "$T/t.jsonl"
  [[ "$stderr" == *"$T/t.jsonl: line 2: invalid JSON:"* ]]
  [[ "$stderr" == *"$T/t.jsonl: trajectory 2: trace 0af7651916cd43dd8448eb211c80319c: no span holds gen_ai.input.messages or gen_ai.output.messages"* ]]
  [ "$(rec json "$T/o.mp" | jq -r .meta.source_id)" = conv-otel-1 ]
}

@test "Claude Code: API errors, local commands, meta lines and titles are not turns; split messages merge" {
  [ "$(turns_of "$FIX/claude-code-real.jsonl" S3)" = "$(expected claude-code-real)" ]
  run -0 bash -c "fb-ingest -q '$FIX/claude-code-real.jsonl' | rec json | jq -c '[.model, .usage, .meta.title, .meta.api_errors, .meta.synthetic_events, .meta.meta_events]'"
  assert_output '["ckpt-b",{"input_tokens":1900,"output_tokens":66},"Fix calc.add",1,1,1]'
}

@test "Claude Code: signed thinking is kept byte for byte even when redacting, unsigned thinking is redacted" {
  run -0 bash -c "fb-ingest -q '$FIX/claude-code-real.jsonl' | rec json | jq -r '.turns[1] | .thinking, .signatures[0]'"
  assert_line --index 0 "Run the test first; the CI token ghp_R2d2C3po4Bb8Ee1Ff9Gg7Hh6Ii5Jj0Kk3Ll8Mm is not needed."
  assert_line --index 1 "EqQBCkYIBxgCKkDsig+verbatim/0A=="
  sed 's/,"signature":"[^"]*"//' "$FIX/claude-code-real.jsonl" > "$T/unsigned.jsonl"
  run -0 bash -c "fb-ingest -q '$T/unsigned.jsonl' | rec json | jq -r '.turns[1] | .thinking, has(\"signatures\")'"
  assert_line --index 0 "Run the test first; the CI token <REDACTED:github> is not needed."
  assert_line --index 1 false
  # the signature is not part of the content id
  [ "$(fb-ingest -q "$FIX/claude-code-real.jsonl" | rec json | jq -r .id)" = "$(fb-ingest -q --no-redact "$T/unsigned.jsonl" | rec json | jq -r .id)" ]
}

@test "each new format is detected, and --format forces one" {
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" "$FIX/mini-swe-agent.traj.json" "$FIX/mini-swe-agent-list.json" \
    "$FIX/openhands.json" "$FIX/codex.jsonl" "$FIX/otel.json" "$FIX/claude-code-real.jsonl"
  [[ "$stderr" == *"mini-swe-agent: 2 trajectories from 2 files"* ]]
  [[ "$stderr" == *"openhands: 1 trajectory from 1 file"* ]]
  [[ "$stderr" == *"codex: 1 trajectory from 1 file"* ]]
  [[ "$stderr" == *"otel: 2 trajectories from 1 file"* ]]
  [[ "$stderr" == *"claude-code: 1 trajectory from 1 file"* ]]
  run -0 --separate-stderr fb-ingest --format codex -o "$T/o.mp" "$FIX/openai-chat.jsonl"
  [[ "$stderr" == *"openai-chat.jsonl: line 1: 'type' is missing"* ]]
  # a rollout is read as such from a pipe too
  [ "$(fb-ingest -q --format codex < "$FIX/codex.jsonl" | rec count)" = 1 ]
}

# ---- what used to pass silently ----------------------------------------------

@test "--model and --meta fill in what a log does not say, and the id follows the model" {
  a=$(fb-ingest -q "$FIX/mini-swe-agent-list.json" | rec json | jq -r .id)
  run -0 bash -c "fb-ingest -q --model ckpt-z --meta run=r7 --meta split=train '$FIX/mini-swe-agent-list.json' '$FIX/mini-swe-agent.traj.json' | rec json | jq -c '[.model, .meta.run, .meta.split]'"
  assert_line --index 0 '["ckpt-z","r7","train"]'
  # a model the log names is kept
  assert_line --index 1 '["ckpt-d","r7","train"]'
  b=$(fb-ingest -q --model ckpt-z "$FIX/mini-swe-agent-list.json" | rec json | jq -r .id)
  [ "$a" != "$b" ]
  run -2 fb-ingest --meta novalue "$FIX/sharegpt.jsonl"
  run -2 fb-ingest --meta =x "$FIX/sharegpt.jsonl"
}

@test "a request and its reply are read by the reply's shape; a reply not understood is an error" {
  echo '{"request": {"model": "claude-x", "messages": [{"role": "user", "content": "hi"}]}, "response": {"id": "msg_p1", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn"}}' > "$T/proxy.jsonl"
  run -0 bash -c "fb-ingest -q '$T/proxy.jsonl' | rec json | jq -c '[.source, .model, .meta.source_id, [.turns[] | [.role, .text]]]'"
  assert_output '["anthropic","claude-x","msg_p1",[["user","hi"],["assistant","hello"]]]'
  # forced the other way, the reply is not understood: the record is bad, not shorter
  run -0 --separate-stderr fb-ingest --format openai-chat -o "$T/o.mp" "$T/proxy.jsonl"
  [[ "$stderr" == *"line 1: 'response.choices' is missing: the reply is not understood (an Anthropic reply? --format anthropic)"* ]]
  [ "$(rec count "$T/o.mp")" = 0 ]
  echo '{"request": {"messages": [{"role": "user", "content": "hi"}]}, "response": {"id": "x", "type": "message", "contnet": []}}' > "$T/odd.jsonl"
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" "$T/odd.jsonl"
  [[ "$stderr" == *"line 1: 'response.content' is missing: the reply is not understood"* ]]
}

@test "an unknown field of a message is warned about once per field and file" {
  for i in 1 2; do echo '{"id": "c'$i'", "messages": [{"role": "user", "contents": "hi '$i'"}, {"role": "assistant", "content": "ok '$i'", "contents": "x"}]}'; done > "$T/typo.jsonl"
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" "$T/typo.jsonl"
  [ "$(grep -c "unknown field" <<< "$stderr")" = 1 ]
  [[ "$stderr" == *"fb-ingest: $T/typo.jsonl: line 1: unknown field 'messages[].contents' is ignored"* ]]
  [ "$(rec count "$T/o.mp")" = 2 ]
  # the same in another file is said again; known fields say nothing
  cp "$T/typo.jsonl" "$T/typo2.jsonl"
  run -0 --separate-stderr fb-ingest -o "$T/o.mp" "$T/typo.jsonl" "$T/typo2.jsonl" "$FIX/openai-chat.jsonl" "$FIX/anthropic.jsonl" "$FIX/sharegpt.jsonl" "$FIX/claude-code.jsonl"
  [ "$(grep -c "unknown field" <<< "$stderr")" = 2 ]
}

@test "a time the log does not give is left out, not written empty" {
  run -0 bash -c "fb-ingest -q --feedback <(printf 'trace_id,rating\nmini-swe-agent-list,up\n') '$FIX/mini-swe-agent-list.json' | rec json | jq -c '[has(\"created\"), (.feedback[0] | has(\"at\")), .feedback[0].rating]'"
  assert_output '[false,false,1]'
}

@test "a feedback file's rating scale is said in the summary and can be set; signs mixed with stars are refused" {
  printf 'trace_id,rating\nsg-fix5,1\nmsg_fix3,-1\nresp_fix2,2\n' > "$T/mixed.csv"
  run -1 --separate-stderr fb-ingest --feedback "$T/mixed.csv" -o "$T/o.mp" "$FIX/sharegpt.jsonl"
  [[ "$stderr" == *"$T/mixed.csv: ratings mix signs (-1 at line 3) with stars (2 at line 4): say which with --rating-scale"* ]]
  [ ! -e "$T/o.mp" ]
  # told it is a score, 1 is up and 2 is up
  run -0 --separate-stderr fb-ingest --rating-scale score --feedback "$T/mixed.csv" -o "$T/o.mp" "$FIX/sharegpt.jsonl" "$FIX/anthropic.jsonl" "$FIX/openai-responses.jsonl"
  [[ "$stderr" == *"feedback: $T/mixed.csv: score scale (as --rating-scale says)"* ]]
  [ "$(rec json "$T/o.mp" | jq -r '.feedback[0].rating' | tr '\n' ' ')" = "1 -1 1 " ]
  # decided per file otherwise, and said why
  run -0 --separate-stderr fb-ingest --feedback "$FIX/feedback.jsonl" --feedback "$FIX/feedback.csv" -o "$T/o.mp" "$FIX/sharegpt.jsonl"
  [[ "$stderr" == *"feedback: $FIX/feedback.jsonl: thumbs scale (no rating above 1)"* ]]
  [[ "$stderr" == *"feedback: $FIX/feedback.csv: stars scale (a rating of 5 at line 2)"* ]]
  run -2 fb-ingest --rating-scale percent "$FIX/sharegpt.jsonl"
}

@test "feedback of which nothing joined while lines were skipped exits 1" {
  printf 'trace_id,rating\nsg-fix5,meh\nmsg_fix3,\n' > "$T/f.csv"
  run -1 --separate-stderr fb-ingest --feedback "$T/f.csv" -o "$T/o.mp" "$FIX/sharegpt.jsonl"
  [[ "$stderr" == *"feedback: no event was joined to a trajectory and 2 lines were skipped"* ]]
  [ "$(rec count "$T/o.mp")" = 1 ]
  # one joined event is enough for success
  printf 'sg-fix5,up\n' >> "$T/f.csv"
  run -0 fb-ingest -q --feedback "$T/f.csv" -o "$T/o.mp" "$FIX/sharegpt.jsonl"
}

@test "OpenAI Chat Completions: reasoning_content of a reply is its thinking" {
  echo '{"id": "c-r1", "messages": [{"role": "user", "content": "2+2?"}], "choices": [{"message": {"role": "assistant", "content": "4", "reasoning_content": "Add them."}}]}' > "$T/r.jsonl"
  run -0 bash -c "fb-ingest -q '$T/r.jsonl' | rec json | jq -c '.turns[1] | [.text, .thinking]'"
  assert_output '["4","Add them."]'
}

@test "--shard K/N writes the trajectories rec --shard K/N keeps, and the shards add up" {
  all_samples -q > "$T/all" 2> /dev/null || true
  total=$(rec count "$T/all")
  sum=0
  for k in 0 1 2; do
    all_samples -q --shard $k/3 > "$T/s$k" 2> /dev/null || true
    [ "$(rec get .id "$T/s$k")" = "$(rec get .id --shard $k/3 "$T/all")" ]
    sum=$((sum + $(rec count "$T/s$k")))
  done
  [ "$sum" -eq "$total" ]
  run -2 fb-ingest --shard 3/3 "$S/sharegpt.jsonl"
}

@test "--progress off a terminal: plain lines with the log bytes read and the share done" {
  run --separate-stderr fb-ingest -q --progress "$S/sharegpt.jsonl"
  [[ "$stderr" != *$'\r'* ]]
  bytes=$(wc -c < "$S/sharegpt.jsonl")
  last=$(printf '%s\n' "$stderr" | tail -1)
  [[ "$last" == "fb-ingest: "*" records, "*", 100%" ]]
  # the byte count is the log's size (between 1 kB and 1 MB)
  [[ "$last" == *", $(awk -v b="$bytes" 'BEGIN { printf "%.1fkB", b / 1000 }'), "* ]]
}
