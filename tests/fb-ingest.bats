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
  assert_line --index 0 "usage: fb-ingest [--format F] [--feedback FILE]... [--orphans FILE] [--no-redact]"
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
  man=$(groff -mdoc -Tascii -P-cbou "$BATS_TEST_DIRNAME/../man/fb-ingest.1" 2>/dev/null |
    sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' | sed '1d;$d' | tr -s ' \n' ' ')
  use=$(fb-ingest --help | head -2 | sed 's/^usage: //' | tr -s ' \n' ' ')
  [ -n "$use" ]
  [ "$(echo $man)" = "$(echo $use)" ]
}

@test "a missing log sets exit status 1 and the others are still read; a missing feedback file stops before output" {
  run -1 --separate-stderr fb-ingest -o "$T/o.mp" "$T/nope.jsonl" "$FIX/sharegpt.jsonl"
  [[ "$stderr" == *"fb-ingest: $T/nope.jsonl: No such file or directory"* ]]
  [ "$(rec count "$T/o.mp")" = 1 ]
  run -1 --separate-stderr fb-ingest --feedback "$T/nope.csv" -o "$T/o2.mp" "$FIX/sharegpt.jsonl"
  [[ "$stderr" == *"fb-ingest: $T/nope.csv: No such file or directory"* ]]
  [ ! -e "$T/o2.mp" ]
}
