# usage.bash — loaded by a tool's bats file: its usage agrees with its man page.

# usage_is_synopsis TOOL: succeeds when the synopsis TOOL --help prints
# (its lines up to the first empty one, "usage: " dropped) and the SYNOPSIS
# of man/TOOL.1 as groff renders it are the same words; mdoc's "FILE ..."
# and the usage's "FILE..." are the same word.
usage_is_synopsis() {
  local words='tr -s " \n" " " | sed "s/ \.\.\./.../g; s/^ //; s/ $//"' man use
  man=$(groff -mdoc -Tascii -P-cbou "$BATS_TEST_DIRNAME/../man/$1.1" 2> /dev/null |
    sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' | sed '1d;$d' | eval "$words")
  use=$("$1" --help | sed '/^$/,$d; s/^usage: //' | eval "$words")
  [ -n "$use" ] || return 1
  [ "$man" = "$use" ] || { printf 'man:   %s\nusage: %s\n' "$man" "$use" >&2; return 1; }
}
