#!/usr/bin/env bats
# Operations: fw-stage (a run record per stage), fw-cron (lock, log, run
# record, FW_NOTIFY on failure) and status.sh (`make status`).

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  R="$BATS_TEST_DIRNAME/.."
  T="$BATS_TEST_TMPDIR"
  STAGE="$R/pipelines/fw-stage"
  CRON="$R/pipelines/cron/fw-cron"
  STATUS="$R/pipelines/status.sh"
  export FW_BIN="${BIN_DIR:-$R/bin}"
  export FW_STATE="$T/state"
  unset FW_RUNS FW_RUN_ID FW_PIPELINE FW_NOTIFY FW_RUN_LOG
  cd "$T"
  printf '{"kind":"x","id":"1"}{"kind":"x","id":"2"}{"kind":"x","id":"3"}' | rec from-json > three.mp
}

rfc3339='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$'

@test "fw-stage without FW_RUNS only runs the command: streams pass through, its status is the exit" {
  run -0 --separate-stderr bash -c 'printf "in\n" | "$1" "a stage" -- sh -c "cat; echo out; echo err >&2"' _ "$STAGE"
  assert_output $'in\nout'
  [ "$stderr" = err ]
  run -7 "$STAGE" s -- sh -c 'exit 7'
  # nothing recorded anywhere
  [ -z "$(find "$T" -newer three.mp -type f ! -name 'separate-stderr-*')" ]
}

@test "fw-stage appends an ok record with the stage name verbatim, times, host, output and its record count" {
  export FW_RUNS="$T/runs.mp" FW_RUN_ID=r-42 FW_PIPELINE=inner-loop
  before=$(date -u +%Y-%m-%dT%H:%M:%S)
  run -0 --separate-stderr "$STAGE" 'grade / eval "x"' -o three.mp -- sh -c 'sleep 0.3; echo done'
  assert_output done
  [ -z "$stderr" ]
  after=$(date -u +%Y-%m-%dT%H:%M:%S)
  [ "$(rec count runs.mp)" = 1 ]
  rec json runs.mp > r.json
  run -0 jq -r '[.kind, .v, .run, .pipeline, .stage, .status, .exit, .output, .records, .host] | map(tostring) | join("|")' r.json
  assert_output "run|1|r-42|inner-loop|grade / eval \"x\"|ok|0|$T/three.mp|3|$(uname -n)"
  start=$(jq -r .start r.json) end=$(jq -r .end r.json)
  [[ $start =~ $rfc3339 ]] && [[ $end =~ $rfc3339 ]]
  [[ ! $start < $before ]] && [[ ! ${end:0:19} > $after ]] && [[ ! $end < $start ]]
  jq -e '.seconds >= 0.3 and .seconds < 10 and (.id | test("^[0-9a-f]{16,}$"))' r.json
  jq -e '.cmd == ["sh", "-c", "sleep 0.3; echo done"]' r.json
  # seconds is a float in the msgpack, not an integer
  run -0 rec stats runs.mp
  assert_line --regexp '^\.seconds	1	float:1'
}

@test "fw-stage records a failure with its exit status and runs the command's words as given" {
  export FW_RUNS="$T/runs.mp"
  run -3 "$STAGE" report -o missing.mp -- sh -c 'exit 3'
  mkdir outdir
  run -0 "$STAGE" split -o outdir -- printf '%s\n' '$(touch pwned)' 'a  b'
  assert_output $'$(touch pwned)\na  b'
  [ ! -e pwned ]
  run -0 "$STAGE" $'odd\tname' -- printf '%s' $'line\none\ttab\x01' $'not utf-8 \xff' '\'
  run -127 "$STAGE" nothing -- no-such-command-here
  assert_output --partial 'fw-stage: nothing: no-such-command-here: command not found'
  rec json runs.mp > r.json
  run -0 jq -c '[.stage, .status, .exit, has("output"), has("records"), has("run"), has("pipeline")]' r.json
  assert_output $'["report","failed",3,false,false,false,false]\n["split","ok",0,true,false,false,false]\n["odd\\tname","ok",0,false,false,false,false]\n["nothing","failed",127,false,false,false,false]'
  # control characters survive; bytes that are not UTF-8 are dropped, not the record
  jq -e -s '.[2].cmd == ["printf", "%s", "line\none\ttab\u0001", "not utf-8 ", "\\"]' r.json
  jq -e -s '.[1] | .output == "'"$T"'/outdir" and .cmd[1:] == ["%s\\n", "$(touch pwned)", "a  b"]' r.json
}

@test "fw-stage refuses bad usage with status 2" {
  run -2 "$STAGE"
  assert_output --partial 'usage: fw-stage NAME [-o OUTFILE] -- CMD [ARG ...]'
  run -2 "$STAGE" name true
  run -2 "$STAGE" name --
  run -2 "$STAGE" '' -- true
  run -0 "$STAGE" --help
  assert_output --partial 'fw-stage NAME [-o OUTFILE] -- CMD [ARG ...]'
}

@test "20 stages ending at once append 20 whole records" {
  export FW_RUNS="$T/runs.mp" FW_RUN_ID=par
  for i in $(seq 1 20); do
    "$STAGE" "stage $i" -o three.mp -- true &
  done
  wait
  [ "$(rec count runs.mp)" = 20 ]
  rec json runs.mp > r.json
  [ "$(jq -r .stage r.json | sort -u | wc -l)" = 20 ]
  [ "$(jq -r .id r.json | sort -u | wc -l)" = 20 ]
  jq -e -s 'all(.[]; .records == 3 and .status == "ok" and .run == "par")' r.json
  # the append waits for whoever holds the runs log's lock
  flock runs.mp sh -c 'touch held; sleep 1' 3>&- &
  for _ in $(seq 200); do [ -e held ] && break; sleep 0.05; done
  t0=${EPOCHREALTIME/./}
  "$STAGE" late -- true
  t1=${EPOCHREALTIME/./}
  wait
  [ $((t1 - t0)) -gt 500000 ]
  [ "$(rec count runs.mp)" = 21 ]
}

@test "fw-cron runs the command into a log, exports the run to its stages and records the whole run" {
  run -0 --separate-stderr "$CRON" --name outer-loop -- bash -c '
    echo "env $FW_PIPELINE $FW_RUN_ID $FW_RUNS"
    "$1" ingest -o three.mp -- echo ingesting
    "$1" filter -- sh -c "echo filtering >&2"' _ "$STAGE"
  [ -z "$output" ] && [ -z "$stderr" ]
  runs="$FW_STATE/runs.msgpack"
  [ "$(rec count "$runs")" = 3 ]
  rec json "$runs" > r.json
  id=$(jq -r 'select(.stage == "(run)") | .run' r.json)
  [[ $id =~ ^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$ ]]
  run -0 jq -r '[.pipeline, .run, .stage, .status, .exit] | map(tostring) | join(" ")' r.json
  assert_output "outer-loop $id ingest ok 0
outer-loop $id filter ok 0
outer-loop $id (run) ok 0"
  log=$(jq -r 'select(.stage == "(run)") | .log' r.json)
  [ "$log" = "$FW_STATE/logs/outer-loop-$id.log" ]
  run -0 cat "$log"
  assert_line "env outer-loop $id $runs"
  assert_line ingesting
  assert_line filtering
  assert_line --regexp "^fw-cron: outer-loop: run $id ok, exit 0, ended "
  [ -e "$FW_STATE/outer-loop.lock" ]
}

@test "fw-cron lets one run at a time: a second is skipped with 75 and recorded, a later one runs" {
  "$CRON" --name slow --runs "$T/runs.mp" -- sh -c 'touch started; while [ ! -e release ]; do sleep 0.05; done' 3>&- &
  first=$!
  for _ in $(seq 200); do [ -e started ] && break; sleep 0.05; done
  [ -e started ]
  run -75 --separate-stderr "$CRON" --name slow --runs "$T/runs.mp" -- touch second-ran
  [[ $stderr == "fw-cron: slow: skipped: the previous run still holds $FW_STATE/slow.lock (pid $first, run "* ]]
  [ ! -e second-ran ]
  touch release
  wait $first
  run -0 "$CRON" --name slow --runs "$T/runs.mp" -- touch third-ran
  [ -e third-ran ]
  run -0 jq -r 'select(.stage == "(run)") | "\(.status) \(.exit)"' <(rec json runs.mp)
  assert_output $'skipped 75\nok 0\nok 0'
  rec json runs.mp | jq -e -s 'map(select(.status == "skipped"))[0] | .lock == "'"$FW_STATE"'/slow.lock" and (.held_by | startswith("pid '"$first"',"))'
  # another name has another lock
  "$CRON" --name slow -- sh -c 'touch started2; while [ ! -e release2 ]; do sleep 0.05; done' 3>&- &
  first=$!
  for _ in $(seq 200); do [ -e started2 ] && break; sleep 0.05; done
  run -0 "$CRON" --name other -- true
  touch release2
  wait $first
}

@test "a failed run calls FW_NOTIFY with a summary naming the failed stage, its exit and the log" {
  export FW_NOTIFY="cat > '$T/summary'; printf '%s' \"\$FW_SUMMARY_SUBJECT\" > '$T/subject'"
  run -4 --separate-stderr "$CRON" --name inner-loop -- bash -c '
    "$1" rollout -o three.mp -- true
    "$1" "grade it" -- sh -c "echo the-last-words; exit 4" || exit
    "$1" never -- true' _ "$STAGE"
  [ -z "$output" ]
  assert_equal "$(echo "$stderr" | grep -c '')" 1
  [[ $stderr == "fw-cron: inner-loop: failed with exit 4 (run "*"); log: $FW_STATE/logs/inner-loop-"*.log ]]
  id=$(jq -r 'select(.stage == "(run)") | .run' <(rec json "$FW_STATE/runs.msgpack"))
  log="$FW_STATE/logs/inner-loop-$id.log"
  run -0 cat summary
  assert_line --index 0 --regexp "^The flywheel pipeline inner-loop failed on $(uname -n) \(run $id\): stage \"grade it\" exited with status 4 at [-0-9T:.]+Z after [0-9.]+ s\. 1 stage passed \(\"rollout\"\)\. The run started at .*, and exited with status 4\. Log: $log$"
  assert_line "The last lines of $log:"
  assert_line "    the-last-words"
  run -0 cat subject
  assert_output "flywheel: inner-loop failed on $(uname -n): stage grade it exit 4"
}

@test "a run that fails outside any stage still notifies; a success does not" {
  export FW_NOTIFY="cat >> '$T/summary'"
  run -0 "$CRON" --name ok-job -- "$STAGE" one -- true
  [ ! -e summary ]
  run -9 "$CRON" --name bare -- sh -c 'echo cannot-start >&2; exit 9'
  run -0 cat summary
  assert_line --index 0 --partial "the command \`sh -c 'echo cannot-start >&2; exit 9'\` exited with status 9 and no stage of it reported a failure. 0 stages passed."
  assert_line "    cannot-start"
}

@test "a failing notify command is reported but the exit stays the command's" {
  export FW_NOTIFY='cat > /dev/null; exit 5'
  run -3 --separate-stderr "$CRON" --name job -- sh -c 'exit 3'
  assert_equal "$(echo "$stderr" | sed -n 2p)" "fw-cron: job: the notify command failed with exit 5"
  export FW_NOTIFY='sleep 30' FW_NOTIFY_TIMEOUT=1
  run -3 --separate-stderr "$CRON" --name job -- sh -c 'exit 3'
  assert_equal "$(echo "$stderr" | sed -n 2p)" "fw-cron: job: the notify command did not finish in 1 s"
}

@test "fw-cron refuses bad usage and names that cannot name a file" {
  run -2 "$CRON"
  assert_output --partial 'usage: fw-cron [--lock FILE] [--runs FILE] [--log-dir DIR] [--name NAME] -- CMD [ARG ...]'
  run -2 "$CRON" --name a/b -- true
  run -2 "$CRON" --bogus -- true
  run -2 "$CRON" --name x
  [ ! -e "$FW_STATE" ]
}

@test "the example crontab's jobs work: the outer loop, an inner-loop iteration (and its eval), retried until it passes" {
  crontab="$R/pipelines/cron/crontab.example"
  grep -E '^[0-9*]' "$crontab" > jobs
  [ "$(wc -l < jobs)" = 3 ]
  # five time fields, and no bare % (cron would end the command there)
  ! grep -vE '^([0-9*/,-]+ +){5}[^ ]' jobs
  ! grep -E '(^|[^\\])%' jobs
  job() { grep -E "$1" jobs | sed -E 's/^([^ ]+ +){5}//'; }
  # A stand-in checkout: its make targets log their calls and fail on demand.
  mkdir fw
  ln -s "$R/pipelines" fw/pipelines
  printf '%s\n' 'outer-loop inner-loop eval:' \
    '	@echo "$@ $(ITER)$(CKPT)" >> calls' '	@test ! -e fail-$@' > fw/Makefile
  cronenv=(env -i HOME="$T" PATH="$FW_BIN:/usr/bin:/bin" FW="$T/fw" FW_STATE="$T/state"
    FW_NOTIFY="cat >> '$T/mail'")
  run -0 "${cronenv[@]}" sh -c "$(job outer-loop)"
  run -0 "${cronenv[@]}" sh -c "$(job inner-loop)"
  touch fw/fail-inner-loop
  run -2 --separate-stderr "${cronenv[@]}" sh -c "$(job inner-loop)"
  rm fw/fail-inner-loop
  run -0 "${cronenv[@]}" sh -c "$(job inner-loop)"
  run -0 cat fw/calls
  assert_output "outer-loop 
inner-loop 1
inner-loop 2
inner-loop 2"
  [ "$(cat state/inner-loop.iter)" = 3 ]
  grep -q '^The flywheel pipeline inner-loop failed on .* exited with status 2' mail
  run -0 jq -r 'select(.stage == "(run)") | "\(.pipeline) \(.status)"' <(rec json state/runs.msgpack)
  assert_output $'outer-loop ok\ninner-loop ok\ninner-loop failed\ninner-loop ok'
  # housekeeping drops logs older than 60 days
  touch -d '90 days ago' state/logs/old.log
  run -0 "${cronenv[@]}" sh -c "$(job find)"
  [ ! -e state/logs/old.log ] && [ "$(ls state/logs | wc -l)" = 4 ]
}

# A runs log with two runs, the newer one failed in its second stage.
make_log() {
  "$CRON" --name outer-loop -- bash -c '"$1" ingest -o three.mp -- true; "$1" report -- sleep 0.2' _ "$STAGE"
  "$CRON" --name inner-loop -- bash -c '"$1" rollout -o three.mp -- true; "$1" grade -- sh -c "exit 6"' _ "$STAGE" 2>/dev/null || :
}

@test "status.sh shows recent runs newest first with stage figures and a FAILED section with the log" {
  make_log
  run -0 --separate-stderr "$STATUS"
  [ -z "$stderr" ]
  id=$(jq -r 'select(.stage == "(run)" and .pipeline == "inner-loop") | .run' <(rec json "$FW_STATE/runs.msgpack"))
  assert_line --index 0 "Runs log $FW_STATE/runs.msgpack: 6 records, 2 runs; all, newest first (times UTC)."
  # (bats drops the empty lines from $lines)
  assert_line --index 1 --regexp "^[-0-9]{10} [0-9:]{8}  inner-loop  FAILED      exit 6 +[0-9.]+ s  run $id  on $(uname -n)$"
  assert_line --index 2 --regexp '^    ok +[0-9.]+ s +3 records  rollout$'
  assert_line --index 3 --regexp '^    FAILED +[0-9.]+ s +exit 6  grade$'
  assert_line --index 4 "    log: $FW_STATE/logs/inner-loop-$id.log"
  assert_line --index 5 --regexp '^[-0-9]{10} [0-9:]{8}  outer-loop  ok          exit 0 '
  assert_line --index 7 --regexp '^    ok +0\.[2-9][0-9] s +report$'
  assert_line --index 9 "FAILED (1 in the runs shown)"
  assert_line --index 10 --regexp '^  [-0-9]{10} [0-9:]{8}  inner-loop  stage "grade" exit 6 after [0-9.]+ s$'
  assert_line --index 11 "      run $id  log: $FW_STATE/logs/inner-loop-$id.log"
  [ ${#lines[@]} = 12 ]
  # -n keeps the newest runs; make status shows the same view
  run -0 "$STATUS" -n 1
  refute_output --partial outer-loop
  run -0 env -u MAKEFLAGS make -s --no-print-directory -C "$R" status
  assert_line "FAILED (1 in the runs shown)"
  assert_line --partial "  inner-loop  stage \"grade\" exit 6 after "
}

@test "status.sh without a runs log says so and exits 0; a damaged one shows what it can and exits 1" {
  run -0 "$STATUS"
  assert_output "No runs log at $FW_STATE/runs.msgpack: nothing has run under fw-cron there yet (--runs FILE or FW_RUNS names another)."
  make_log
  head -c -5 "$FW_STATE/runs.msgpack" > cut.mp
  run -1 --separate-stderr "$STATUS" --runs cut.mp
  assert_line --index 0 "Runs log cut.mp: 5 records, 2 runs; all, newest first (times UTC)."
  assert_line "    no (run) record: still running, killed, or not run by fw-cron"
  [[ $stderr == "rec: cut.mp: record 6 (byte "*"): "* ]]
  run -2 "$STATUS" -n 0
}
