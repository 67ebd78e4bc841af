#!/usr/bin/env bats
# lib-deps: the modules of libflywheel depend on each other one way only.

bats_require_minimum_version 1.5.0

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export LC_ALL=C
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  T="$BATS_TEST_TMPDIR"
  # the archive the build made beside BIN_DIR (make test: bin/ and build/)
  ARCHIVE=${LIBFW:-${BIN_DIR:+$BIN_DIR/../build/libflywheel.a}}
  [ -n "$ARCHIVE" ] || ARCHIVE=$ROOT/build/libflywheel.a
}

@test "no lib module includes a header of a module that includes its own, directly or around a circle" {
  run --separate-stderr "$ROOT/tests/lib-deps" "$ROOT/lib"
  assert_success
  [ -z "$stderr" ]
}

@test "no lib module calls into a module that calls back into it" {
  [ -r "$ARCHIVE" ] || skip "no $ARCHIVE (make first)"
  run --separate-stderr "$ROOT/tests/lib-deps" --objects "$ARCHIVE" "$ROOT/lib"
  assert_success
  [ -z "$stderr" ]
}

# a small library with two modules, a and b
mklib() {
  mkdir -p "$T/lib"
  printf 'int fw_a(void);\n' > "$T/lib/fw_a.h"
  printf 'int fw_b(void);\n' > "$T/lib/fw_b.h"
  printf '#include "fw_a.h"\n#include "fw_b.h"\nint fw_a(void) { return fw_b(); }\n' > "$T/lib/fw_a.c"
}

@test "a circle of includes between two modules is found and named" {
  mklib
  printf '#include "fw_b.h"\nint fw_b(void) { return 1; }\n' > "$T/lib/fw_b.c"
  run --separate-stderr "$ROOT/tests/lib-deps" "$T/lib"
  assert_success
  # fw_b_part.c is part of module b
  printf '#include "fw_b.h"\n#include "fw_a.h"\nint fw_b_part(void) { return fw_a(); }\n' > "$T/lib/fw_b_part.c"
  run --separate-stderr "$ROOT/tests/lib-deps" "$T/lib"
  assert_failure 1
  [[ "$stderr" == *"circle of includes"* ]]
  [[ "$stderr" == *"fw_a"* && "$stderr" == *"fw_b"* ]]
}

@test "a circle of calls between two modules is found, and calls inside one module are not" {
  mklib
  # fw_b_part.c is part of module b: b calls a, a calls b
  printf '#include "fw_b.h"\nint fw_b(void) { return 1; }\n' > "$T/lib/fw_b.c"
  printf 'int fw_a(void);\nint fw_b_part(void) { return fw_a(); }\n' > "$T/lib/fw_b_part.c"
  for f in a b; do cc -c -o "$T/fw_$f.o" "$T/lib/fw_$f.c"; done
  ar rcs "$T/one-way.a" "$T/fw_a.o" "$T/fw_b.o"
  run --separate-stderr "$ROOT/tests/lib-deps" --objects "$T/one-way.a" "$T/lib"
  assert_success
  cc -c -o "$T/fw_b_part.o" "$T/lib/fw_b_part.c"
  ar rcs "$T/circle.a" "$T/fw_a.o" "$T/fw_b.o" "$T/fw_b_part.o"
  run --separate-stderr "$ROOT/tests/lib-deps" --objects "$T/circle.a" "$T/lib"
  assert_failure 1
  [[ "$stderr" == *"circle of calls"* ]]
}
