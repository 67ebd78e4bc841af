#!/usr/bin/env bats
# Every tool: its usage is its man page's SYNOPSIS, --help lists each option
# of the synopsis on a line of its own, and the record filters take the
# options flywheel(7) promises.

bats_require_minimum_version 1.5.0

TOOLS="fb-ingest traj-filter fb-report task-mutate rollout grade teach train-step rec ckpt
  serve fw-env fw-run"

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  load usage
  export LC_ALL=C
}

@test "every tool's usage and its man page SYNOPSIS agree word for word" {
  bad=
  for t in $TOOLS; do
    usage_is_synopsis "$t" || bad="$bad $t"
  done
  [ -z "$bad" ] || { echo "differ:$bad"; return 1; }
}

@test "every tool's --help lists each option of its synopsis on a line of its own" {
  bad=
  for t in $TOOLS; do
    run --separate-stderr "$t" --help
    [ "$status" -eq 0 ] && [ -z "$stderr" ] || { bad="$bad $t(exit $status)"; continue; }
    help=$(printf '%s\n' "$output" | sed -n '/^options:$/,$p')
    [ -n "$help" ] || { bad="$bad $t(no options)"; continue; }
    # after "options:", every line is "  -OPT  text" (or a continuation)
    if printf '%s\n' "$help" | sed 1d | grep -v '^  -' | grep -qv '^   '; then
      bad="$bad $t(format)"
    fi
    for o in $(printf '%s\n' "$output" | sed '/^$/,$d' | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
      printf '%s\n' "$help" | grep -q -- "^  \(-[a-zA-Z], \)\?$o\b" || bad="$bad $t:$o"
    done
  done
  [ -z "$bad" ] || { echo "missing:$bad"; return 1; }
}

@test "the record filters take -z, --shard K/N and --progress, as flywheel(7) promises" {
  bad=
  for t in fb-ingest traj-filter fb-report task-mutate rollout grade teach; do
    syn=$("$t" --help | sed '/^$/,$d')
    for o in '\[-z\]' '\[--shard K/N\]' '\[--progress\]'; do
      printf '%s\n' "$syn" | grep -q -- "$o" || bad="$bad $t:$o"
    done
  done
  # rec, train-step and ckpt score (rec's -z is per subcommand, --shard
  # common; train-step writes metrics, -z on them)
  rec --help | grep -q -- '\[--shard K/N\] \[--progress\]' || bad="$bad rec"
  for o in '\[-z\]' '\[--shard K/N\]' '\[--progress\]'; do
    train-step --help | sed '/^$/,$d' | grep -q -- "$o" || bad="$bad train-step:$o"
  done
  ckpt --help | grep -q -- '^ *ckpt score DIR .*\[-z\] \[--shard K/N\] \[--progress\]' ||
    bad="$bad ckpt-score"
  [ -z "$bad" ] || { echo "missing:$bad"; return 1; }
}

@test "a bad option is a usage error on every tool: exit 2, the usage on stderr, stdout empty" {
  for t in $TOOLS; do
    case $t in rec) args="cat --no-such-option" ;; fw-env) args="id --no-such-option" ;;
      ckpt) args="info --no-such-option" ;; *) args="--no-such-option" ;; esac
    run --separate-stderr -2 $t $args
    [ -z "$output" ]
    [[ "$stderr" == *"usage: $t"* ]] || { echo "$t: $stderr"; return 1; }
  done
}

@test "teach: --shard K/N teaches rec's shard K/N, -z compresses, --progress meters the input" {
  FX="$BATS_TEST_DIRNAME/fixtures/teach"
  T="$BATS_TEST_TMPDIR"
  for f in agent fill group pass; do rec from-json "$FX/$f.json"; done > "$T/in.mp"
  teach --teacher none "$T/in.mp" > "$T/all.mp" 2> /dev/null
  for k in 0 1; do
    teach --teacher none --shard $k/2 "$T/in.mp" > "$T/s$k.mp" 2> /dev/null
    [ "$(rec get .id "$T/s$k.mp")" = "$(rec get .id --shard $k/2 "$T/all.mp")" ]
  done
  [ $(( $(rec count "$T/s0.mp") + $(rec count "$T/s1.mp") )) -eq "$(rec count "$T/in.mp")" ]
  run --separate-stderr teach --teacher none -z --progress "$T/in.mp"
  [ "$(teach --teacher none -z "$T/in.mp" 2> /dev/null | head -c 4 | od -An -tx1 | tr -d ' ')" = 28b52ffd ]
  [[ "$stderr" == *"teach: 8 records, "*", 100%"* ]]
  run -2 teach --shard 2/2 "$T/in.mp"
}

@test "train-step --progress: steps done of --steps, plain lines off a terminal" {
  T="$BATS_TEST_TMPDIR"
  printf 'hello world, hello flywheel. ' | od -An -tu1 -v | tr -s ' \n' '  ' |
    awk '{ printf "{\"kind\":\"seq\",\"tokens\":[256"; for (i = 1; i <= NF; i++) printf ",%s", $i; print "]}" }' |
    rec from-json > "$T/corpus.mp"
  ckpt init "$BATS_TEST_DIRNAME/../samples/models/tiny-llama.json" "$T/m0" --seed 1
  run -0 --separate-stderr train-step --ckpt "$T/m0" --out "$T/run" --steps 3 --progress "$T/corpus.mp"
  [[ "$stderr" != *$'\r'* ]]
  [[ "${stderr_lines[-1]}" == "train-step: 3/3 steps, "*"/s, "*"s, 100%" ]]
}
