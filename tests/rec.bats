#!/usr/bin/env bats
# rec: the record-stream swiss-army knife.

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  FIX="$BATS_TEST_DIRNAME/fixtures/rec"
  T="$BATS_TEST_TMPDIR"
  rec from-json "$FIX/traj.jsonl" > "$T/in.msgpack"
}

@test "from-json then json gives back the same JSON Lines" {
  run --separate-stderr rec json "$T/in.msgpack"
  assert_success
  [ -z "$stderr" ]
  [ "$output" = "$(jq -c . "$FIX/traj.jsonl")" ] || [ "$output" = "$(cat "$FIX/traj.jsonl")" ]
  # the same values as jq reads them
  diff <(rec json "$T/in.msgpack" | jq -S -c .) <(jq -S -c . "$FIX/traj.jsonl")
}

@test "64-bit integers survive exactly" {
  run rec get .big "$T/in.msgpack"
  assert_line --index 2 "18446744073709551615"
}

@test "count counts records across files and compressed input" {
  rec cat -z "$T/in.msgpack" > "$T/in.zst"
  run rec count "$T/in.msgpack" "$T/in.zst"
  assert_output "8"
  run rec count < "$T/in.zst"
  assert_output "4"
}

@test "cat -o writes a file atomically and compresses by suffix" {
  rec cat -o "$T/out.msgpack.zst" "$T/in.msgpack"
  run head -c 4 "$T/out.msgpack.zst"
  [ "$(head -c 4 "$T/out.msgpack.zst" | od -An -tx1 | tr -d ' ')" = "28b52ffd" ]
  run rec count "$T/out.msgpack.zst"
  assert_output "4"
  [ -z "$(ls "$T" | grep tmp)" ]
}

@test "concatenated zstd and plain streams read as one" {
  rec cat -z "$T/in.msgpack" > "$T/a.zst"
  cat "$T/a.zst" "$T/in.msgpack" "$T/a.zst" > "$T/mixed"
  run rec count "$T/mixed"
  assert_output "12"
  # decompressing gives back the plain bytes
  rec cat "$T/a.zst" | cmp - "$T/in.msgpack"
}

@test "head -n keeps the first records" {
  run rec head -n 2 "$T/in.msgpack"
  [ "$(rec head -n 2 "$T/in.msgpack" | rec count)" = 2 ]
  [ "$(rec head -n 2 "$T/in.msgpack" | rec get .id | tr '\n' ' ')" = "0a1f 1b2e " ]
  [ "$(rec head -n 0 "$T/in.msgpack" | rec count)" = 0 ]
}

@test "get follows paths with negative indexes and prints null when missing" {
  run rec get '.feedback[-1].rating' "$T/in.msgpack"
  assert_output "$(printf -- '-1\n-1\nnull\nnull')"
  run rec get '.turns[1].calls[0].name' "$T/in.msgpack"
  assert_line --index 0 "bash"
}

@test "get with a bad path is a usage error naming the column" {
  run -2 rec get '.a[x]' "$T/in.msgpack"
  assert_output --partial "column 4"
}

@test "stats reports kinds, fields and numeric summaries" {
  run rec stats "$T/in.msgpack"
  assert_success
  assert_line "records 4"
  assert_line --regexp "^traj	3$"
  assert_line --regexp "^task	1$"
  assert_line --regexp "^\.tokens	3	int:3	7	446.667	1234$"
}

@test "sample is reproducible with a seed and keeps input order" {
  seq 1 500 | awk '{printf "{\"id\":\"%d\",\"n\":%d}\n", $1, $1}' | rec from-json > "$T/many"
  a=$(rec sample -n 10 --seed 7 "$T/many" | rec get .n | tr '\n' ' ')
  b=$(rec sample -n 10 --seed 7 "$T/many" | rec get .n | tr '\n' ' ')
  c=$(rec sample -n 10 --seed 8 "$T/many" | rec get .n | tr '\n' ' ')
  [ "$a" = "$b" ]
  [ "$a" != "$c" ]
  [ "$(echo $a | wc -w)" = 10 ]
  [ "$(echo $a | tr ' ' '\n' | sort -n | tr '\n' ' ' | sed 's/ $//')" = "$(echo $a)" ]
  [ "$(rec sample -n 1000 "$T/many" | rec count)" = 500 ]
}

@test "split shards by id hash and agrees with --shard" {
  seq 1 300 | awk '{printf "{\"id\":\"%d\"}\n", $1}' | rec from-json > "$T/many"
  rec split --shards 3 -o "$T/part" "$T/many"
  [ -f "$T/part.0.msgpack" ] && [ -f "$T/part.2.msgpack" ]
  total=0
  for k in 0 1 2; do
    n=$(rec count "$T/part.$k.msgpack")
    [ "$n" -gt 50 ]
    total=$((total + n))
    cmp "$T/part.$k.msgpack" <(rec cat --shard $k/3 "$T/many")
  done
  [ "$total" = 300 ]
  # merging with cat loses nothing
  [ "$(cat "$T"/part.*.msgpack | rec count)" = 300 ]
}

@test "split -z writes compressed shards" {
  rec split -z --shards 2 -o "$T/p" "$T/in.msgpack"
  [ -f "$T/p.0.msgpack.zst" ]
  [ "$(cat "$T"/p.*.zst | rec count)" = 4 ]
}

@test "a truncated stream keeps every good record and names the position" {
  head -c -3 "$T/in.msgpack" > "$T/cut"
  run --separate-stderr -1 rec cat "$T/cut"
  [ "$(printf '%s' "$output" | wc -c)" -gt 0 ]
  [[ "$stderr" =~ ^rec:\ .*cut:\ record\ 4\ \(byte\ [0-9]+\):\ truncated ]]
  [ "$(rec cat "$T/cut" 2>/dev/null | rec count)" = 3 ]
}

@test "garbage bytes are an error with exit 1 after the good records" {
  { cat "$T/in.msgpack"; printf '\xc1garbage'; } > "$T/bad"
  run --separate-stderr -1 rec count "$T/bad"
  assert_output "4"
  [[ "$stderr" == *"record 5 (byte"*"not msgpack"* ]]
}

@test "a top-level value that is not a map is reported; --skip-bad goes on" {
  { cat "$T/in.msgpack"; printf '\x93\x01\x02\x03'; cat "$T/in.msgpack"; } > "$T/arr"
  run --separate-stderr -1 rec count "$T/arr"
  assert_output "4"
  [[ "$stderr" == *"record 5"*"record is array, not a map"* ]]
  run --separate-stderr rec count --skip-bad "$T/arr"
  assert_output "8"
  [[ "$stderr" == *"skipped 1 bad record"* ]]
}

@test "a corrupt zstd frame is an error, not a crash" {
  rec cat -z "$T/in.msgpack" > "$T/z"
  printf 'XXXXXXXXXXXX' | dd of="$T/z" bs=1 seek=12 conv=notrunc 2>/dev/null
  run --separate-stderr -1 rec count "$T/z"
  [[ "$stderr" == *"zstd"* ]]
}

@test "a 4 GiB length field is refused without allocating it" {
  printf '\x81\xa1k\xdb\xff\xff\xff\xffxx' > "$T/huge"
  run --separate-stderr -1 rec count "$T/huge"
  [[ "$stderr" == *"exceeds the limit of 67108864 bytes"* ]]
  run --separate-stderr -1 rec count --max-record 1K "$T/in.msgpack" "$T/huge"
  [[ "$stderr" == *"limit of 1024 bytes"* ]]
}

@test "an empty input is zero records, not an error" {
  run rec count < /dev/null
  assert_success
  assert_output "0"
}

@test "from-json names the line and column of invalid JSON" {
  printf '{"a":1}\n{"b":2}\n{"c": tru}\n{"d":4}\n' > "$T/bad.jsonl"
  run --separate-stderr -1 rec from-json -o "$T/out" "$T/bad.jsonl"
  [[ "$stderr" == "rec: $T/bad.jsonl: line 3, column 7: unexpected 't'" ]] || [[ "$stderr" == *"line 3, column 7"* ]]
  [ "$(rec count "$T/out")" = 2 ]
}

@test "from-json rejects invalid UTF-8 with its position" {
  printf '{"a":"ok"}\n{"a":"b\xffc"}\n' > "$T/u.jsonl"
  run --separate-stderr -1 rec from-json "$T/u.jsonl"
  [[ "$stderr" == *"line 2, column 8: invalid UTF-8 in string"* ]]
}

@test "from-json refuses values that are not objects" {
  printf '{"a":1}\n[1,2]\n' > "$T/arr.jsonl"
  run --separate-stderr -1 rec from-json "$T/arr.jsonl"
  [[ "$stderr" == *"line 2, column 1: value is array, not an object"* ]]
}

@test "from-json reads pretty-printed JSON and values split across reads" {
  jq . "$FIX/traj.jsonl" > "$T/pretty.json"
  run rec from-json "$T/pretty.json"
  [ "$(rec from-json "$T/pretty.json" | rec count)" = 4 ]
  # piped through stdin, values cross read boundaries: same records
  cat "$T/pretty.json" | rec from-json | cmp - <(jq -c . "$T/pretty.json" | rec from-json)
  # a value larger than one read buffer (1 MiB)
  head -c 3000000 /dev/zero | tr '\0' 'x' | jq -R -c '{text: .}' | rec from-json > "$T/bigrec"
  [ "$(rec get .text "$T/bigrec" | wc -c)" = 3000001 ]
}

@test "stdout carries only data: diagnostics go to stderr" {
  { cat "$T/in.msgpack"; printf '\xc1'; } > "$T/bad"
  run --separate-stderr -1 rec json "$T/bad"
  echo "$output" | jq -c . > /dev/null
  [ "$(echo "$output" | wc -l)" = 4 ]
  [ -n "$stderr" ]
}

@test "a closed pipe ends rec quietly" {
  seq 1 20000 | awk '{printf "{\"id\":\"%d\",\"text\":\"some text to make it longer\"}\n", $1}' | rec from-json > "$T/many"
  run --separate-stderr bash -c "rec json '$T/many' | head -n 1"
  assert_success
  [ -z "$stderr" ]
}

@test "missing input file is exit 1 with the file named" {
  run --separate-stderr -1 rec count /nonexistent/file
  [[ "$stderr" == "rec: /nonexistent/file: No such file or directory" ]]
}

@test "usage errors exit 2 and print usage on stderr" {
  run --separate-stderr -2 rec frobnicate
  [[ "$stderr" == *"unknown command 'frobnicate'"* ]]
  [[ "$stderr" == *"usage: rec cat"* ]]
  run -2 rec sample
  run -2 rec split -o x
  run -2 rec cat --shard 3/3
  run -2 rec cat --bogus
}

@test "--help prints usage on stdout and --version names the tool" {
  run --separate-stderr rec --help
  assert_success
  assert_line --index 0 --partial "usage: rec cat"
  [ -z "$stderr" ]
  run rec --version
  assert_output --regexp "^rec \(flywheel\) [0-9]+\.[0-9]+\.[0-9]+$"
}

@test "-o onto a FIFO or a device writes in place, never replaces it" {
  mkfifo "$T/fifo"
  rec count "$T/fifo" > "$T/n" &
  rec cat -o "$T/fifo" "$T/in.msgpack"
  wait
  [ "$(cat "$T/n")" = 4 ]
  [ -p "$T/fifo" ]
  rec cat -o /dev/null "$T/in.msgpack"
  [ -c /dev/null ]
}

@test "-o through a symbolic link replaces the file it names, not the link" {
  echo old > "$T/target"
  ln -s "$T/target" "$T/link"
  rec cat -o "$T/link" "$T/in.msgpack"
  [ -L "$T/link" ]
  [ "$(rec count "$T/target")" = 4 ]
}

@test "a record from a slow producer reaches the next stage at once" {
  # the producer writes one record, then works (sleeps) for 4 s; the
  # record must arrive downstream long before the producer ends
  run bash -c 'start=$(date +%s%N)
    { sleep 0.3; echo "{\"id\":\"x\"}"; sleep 4; } | rec from-json | rec cat | rec get .id |
      while read -r id; do echo "$id $(( ($(date +%s%N) - start) / 1000000 ))"; done'
  assert_success
  [[ "$output" =~ ^x\ ([0-9]+)$ ]]
  [ "${BASH_REMATCH[1]}" -lt 2500 ]
}

@test "-l sets the zstd level; every level reads back the same records" {
  rec cat -l 1 "$T/in.msgpack" > "$T/l1"
  rec cat -l 19 "$T/in.msgpack" > "$T/l19"
  [ "$(head -c 4 "$T/l19" | od -An -tx1 | tr -d ' ')" = "28b52ffd" ]
  rec cat "$T/l1" | cmp - "$T/in.msgpack"
  rec cat "$T/l19" | cmp - "$T/in.msgpack"
  zstd -dc "$T/l19" | cmp - "$T/in.msgpack"
  run -2 rec cat -l 0 "$T/in.msgpack"
  run -2 rec cat -l 20 "$T/in.msgpack"
}

@test "--progress draws a meter on stderr, and nothing without it" {
  run --separate-stderr bash -c "{ cat '$T/in.msgpack'; sleep 0.3; cat '$T/in.msgpack'; } | rec count --progress"
  assert_output "8"
  [[ "$stderr" == *"rec: "*" records, "* ]]
  run --separate-stderr bash -c "{ cat '$T/in.msgpack'; sleep 0.3; cat '$T/in.msgpack'; } | rec count"
  [ -z "$stderr" ]
}

@test "JSON where records are expected is refused once, with the command that converts it" {
  hint='this looks like JSON; convert it with `rec from-json`'
  for f in "$FIX/traj.jsonl" <(printf '\xef\xbb\xbf\n  [{"kind": "traj"}]\n'); do
    run --separate-stderr -1 rec count "$f"
    assert_output "0"
    [ "$stderr" = "rec: $f: record 1 (byte 0): $hint" ]
  done
  # after good records, at the record where the JSON starts
  cat "$T/in.msgpack" "$FIX/traj.jsonl" > "$T/mixed"
  run --separate-stderr -1 rec count "$T/mixed"
  assert_output "4"
  [[ "$stderr" == "rec: $T/mixed: record 5 (byte "*"): $hint" ]]
  # 2 MB of JSON Lines: one line on stderr, not one per byte
  for i in $(seq 2000); do cat "$FIX/traj.jsonl"; done > "$T/big.jsonl"
  run --separate-stderr -1 rec cat --skip-bad "$T/big.jsonl"
  [ -z "$output" ]
  [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
}

@test "text amid records is one error; --skip-bad goes on at the next record" {
  { cat "$T/in.msgpack"; printf 'a line of text\nand \xc1\xc2 bytes that are no msgpack\n'; cat "$T/in.msgpack"; } > "$T/text"
  run --separate-stderr -1 rec count "$T/text"
  assert_output "4"
  [[ "$stderr" =~ ^rec:\ .*/text:\ record\ 5\ \(byte\ [0-9]+\):\ record\ is\ int,\ not\ a\ map\;\ 48\ bytes\ that\ are\ not\ records\ skipped$ ]]
  run --separate-stderr rec count --skip-bad "$T/text"
  assert_output "8"
  [[ "$stderr" == *"skipped 1 bad record"* ]]
  # the records after it are whole and in order
  diff <(rec json --skip-bad "$T/text" 2> /dev/null) <(rec json "$T/in.msgpack" "$T/in.msgpack")
  # a file of text alone: one error, nothing out
  run --separate-stderr -1 rec json <(seq 1 5000)
  [ -z "$output" ]
  [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
}

@test "the usage and the man page synopsis agree word for word" {
  load usage
  usage_is_synopsis rec
}

@test "a subcommand's bad option names the subcommand: rec json --bogus says 'rec json:'" {
  run --separate-stderr -2 rec json --bogus
  [[ "${stderr_lines[0]}" == "rec json: unrecognized option '--bogus'" ]]
  [[ "$stderr" == *"usage: rec cat"* ]]
}

@test "--progress off a terminal: plain lines, the share done for files, none for a pipe" {
  run --separate-stderr rec count --progress "$T/in.msgpack" "$T/in.msgpack"
  assert_output "8"
  [[ "$stderr" != *$'\r'* ]]
  # the bytes read are the two files' sizes, in kB under 1 MB
  b=$(( 2 * $(wc -c < "$T/in.msgpack") ))
  kb=$(awk -v b="$b" 'BEGIN { if (b < 1000) printf "%dB", b; else printf "%.1fkB", b / 1000 }')
  [[ "$stderr" == "rec: 8 records, $kb, "*", 100%" ]]
  run --separate-stderr bash -c "cat '$T/in.msgpack' | rec count --progress"
  [[ "$stderr" == "rec: 4 records, "*"s" ]]
  [[ "$stderr" != *"%"* ]]
}
