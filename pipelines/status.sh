#!/usr/bin/env bash
# status.sh — recent pipeline runs from the runs log, and what failed.
#
#   pipelines/status.sh [--runs FILE] [-n N]
#
# Reads the `run` records that fw-cron and fw-stage append to the runs log
# (--runs, else $FW_RUNS, else $FW_STATE/runs.msgpack, FW_STATE defaulting
# to $HOME/.local/state/flywheel) and prints the N most recent runs (default
# 10), newest first: per run its pipeline, status, exit status, duration,
# run id and host, then each stage with its status, duration and the records
# it wrote (or its exit status when it failed), then the run's log.  A
# FAILED section ends the view: every failed stage of the runs shown, with
# the log to read.  Times are UTC.  `make status` runs it.
#
# Exit status: 0, also when there is no runs log yet (it says so); 1 when
# the runs log is damaged (the runs before the damage are shown, and rec's
# message gives its position); 2 on bad usage.
# See fw-cron(1).
set -u

fw_prog=status
usage() {
	echo "usage: status.sh [--runs FILE] [-n N]" >&2
	exit 2
}
runs= n=10
while [ $# -gt 0 ]; do
	case $1 in
	--runs) [ $# -ge 2 ] || usage; runs=$2; shift 2 ;;
	-n) [ $# -ge 2 ] || usage; n=$2; shift 2 ;;
	-h | --help) sed -n '2,/^# See /p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "status: unexpected '$1'" >&2; usage ;;
	esac
done
case $n in '' | *[!0-9]* | 0) echo "status: -n wants a positive count, not '$n'" >&2; usage ;; esac
runs=${runs:-${FW_RUNS:-${FW_STATE:-$HOME/.local/state/flywheel}/runs.msgpack}}

here=$0
[ ! -L "$here" ] || here=$(readlink -f "$here")
. "${here%/*}/cron/runlog.sh" || exit 1

if [ ! -e "$runs" ]; then
	echo "No runs log at $runs: nothing has run under fw-cron there yet (--runs FILE or FW_RUNS names another)."
	exit 0
fi
if ! fw_find_rec; then
	echo "status: rec not found (set FW_BIN or PATH, or build with make)" >&2
	exit 1
fi
err=$(mktemp "${TMPDIR:-/tmp}/status.XXXXXX") || exit 1
trap 'rm -f "$err"' EXIT

"$fw_rec" json -- "$runs" 2> "$err" | jq -rs --argjson n "$n" --arg file "$runs" '
def lpad(w): tostring | if length < w then . + (" " * (w - length)) else . end;
def rpad(w): tostring | if length < w then (" " * (w - length)) + . else . end;
def z2: tostring | if length < 2 then "0" + . else . end;
def dur:
	if type != "number" then "-"
	elif . < 10 then (. * 100 | round) as $c | "\($c / 100 | floor).\($c % 100 | z2) s"
	elif . < 60 then (. * 10 | round) as $c | "\($c / 10 | floor).\($c % 10) s"
	elif . < 3600 then (. | floor) as $s | "\($s / 60 | floor) min \($s % 60 | z2) s"
	else (. / 60 | floor) as $m | "\($m / 60 | floor) h \($m % 60 | z2) min" end;
# A sort key for RFC 3339 UTC times with or without fractions.
def tkey: (. // "") | sub("Z$"; "") | if test("\\.") then . else . + ".000" end;
def when: if type == "string" then .[0:19] | sub("T"; " ") else "-" end;
def count(w): if . == 1 then "1 \(w)" else "\(.) \(w)s" end;
def shown(s): if s == "failed" then "FAILED" else s end;

[.[] | select(type == "object" and .kind == "run")] as $all
| ($all | group_by(.run // ("\u0000" + (.id | tostring)))
  | map(
      (map(select(.stage == "(run)")) | last) as $r
      | (map(select(.stage != "(run)")) | sort_by(.start | tkey)) as $st
      | {
          r: $r, stages: $st,
          run: (.[0].run // null),
          pipeline: ($r.pipeline // ($st | map(.pipeline) | map(select(. != null)) | first) // "-"),
          start: ($r.start // ($st | map(.start) | min)),
          status: ($r.status // (if any($st[]; .status == "failed") then "failed"
                                 elif .[0].run == null then $st[0].status else "unfinished" end)),
          host: ($r.host // $st[0].host // "-")
        })
  | sort_by(.start | tkey) | reverse) as $runs
| ($runs[:$n]) as $show
| ([$show[].pipeline | tostring | length] | max // 1) as $pw
| if ($all | length) == 0 then "No run records in \($file) yet."
  else
  "Runs log \($file): \($all | length | count("record")), \($runs | length | count("run")); "
  + (if ($runs | length) > $n then "the \($n) most recent" else "all" end)
  + ", newest first (times UTC).",
  ($show[]
   | "",
     "\(.start | when)  \(.pipeline | lpad($pw))  \(shown(.status) | lpad(10))"
     + (if .r then "  exit \(.r.exit | tostring | lpad(3))  \(.r.seconds | dur | rpad(12))" else "" end)
     + (if .run then "  run \(.run)" else "  (no run id)" end)
     + "  on \(.host)",
     (if .r == null and .run != null then "    no (run) record: still running, killed, or not run by fw-cron" else empty end),
     (if .status == "skipped" then "    skipped: the previous run still held \(.r.lock // "the lock")"
        + (if (.r.held_by // "") != "" then " (\(.r.held_by))" else "" end) else empty end),
     (.stages[]
      | "    \(shown(.status) | lpad(8)) \(.seconds | dur | rpad(12))  "
        + (if .status == "failed" then "exit \(.exit)" elif .records != null then "\(.records) records" else "" end | rpad(14))
        + "  \(.stage)"),
     (if .r.log then "    log: \(.r.log)" else empty end)),
  "",
  ([$show[] | . as $x
    | ((.stages[] | select(.status == "failed")
        | "  \(.end | when)  \($x.pipeline)  stage \"\(.stage)\" exit \(.exit) after \(.seconds | dur)"),
       (if .status == "failed" and all(.stages[]; .status != "failed")
        then "  \(.r.end | when)  \(.pipeline)  the run itself exit \(.r.exit // "?") after \(.r.seconds | dur)"
        else empty end))
      as $line
    | $line, "      run \(.run // "-")" + (if .r.log then "  log: \(.r.log)" else "" end)]) as $failed
  | if ($failed | length) > 0 then "FAILED (\($failed | length / 2) in the runs shown)", $failed[]
    else "FAILED: none in the runs shown." end
  end
'
st=("${PIPESTATUS[@]}")
if [ "${st[0]}" -ne 0 ]; then
	cat "$err" >&2
	echo "status: $runs: the runs log is damaged; the runs above are those before the damage" >&2
	exit 1
fi
[ "${st[1]}" -eq 0 ] || exit 1
