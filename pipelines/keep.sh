# keep.sh — sourced by the loop pipelines (inner-loop.sh, eval.sh).
#
# keep FILE NAME CMD...: the stage NAME writes FILE with CMD -o FILE.tmp
# through fw-stage (a run record when FW_RUNS is set), then FILE.tmp moves
# into place; when FILE is already there the stage has finished and is not
# run again.  Needs $here, the pipelines directory.
keep() {
  f=$1 name=$2; shift 2
  [ -e "$f" ] && return 0
  rm -f "$f.tmp"
  "$here/fw-stage" "$name" -o "$f.tmp" -- "$@" -o "$f.tmp"
  mv "$f.tmp" "$f"
}
