#!/usr/bin/env bats
# fb-ingest against input that is not what it was told (issue 16, case 15):
# JSON given as flywheel records was one error per byte, 1.48 GB of stderr
# from 200 MB.  Now it is one diagnostic at its position.

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  T="$BATS_TEST_TMPDIR"
}

@test "case 15: 2 MB of JSON Lines given as flywheel records is one diagnostic, not one per byte" {
  n=$((2000000 / $(stat -c %s "$BATS_TEST_DIRNAME/fixtures/ingest/openai-chat.jsonl") + 1))
  for i in $(seq $n); do cat "$BATS_TEST_DIRNAME/fixtures/ingest/openai-chat.jsonl"; done > "$T/big.jsonl"
  [ "$(stat -c %s "$T/big.jsonl")" -gt 1000000 ]
  run --separate-stderr fb-ingest --format flywheel -o "$T/out.mp" "$T/big.jsonl"
  # no trajectory made up from JSON bytes
  [ "$(rec count "$T/out.mp")" = 0 ]
  # the diagnostic at its position, and the closing count: a few lines
  [ "$(printf '%s\n' "$stderr" | wc -l)" -le 4 ]
  [[ "$stderr" == *"fb-ingest: $T/big.jsonl: record 1 (byte 0): this looks like JSON"* ]]
}
