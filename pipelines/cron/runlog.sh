# runlog.sh — the runs log: `run` records appended by fw-stage and fw-cron.
#
# Sourced (bash), not run.  Defines:
#   fw_find_rec          sets fw_rec to the rec tool: $FW_BIN/rec, else rec
#                        on PATH, else the checkout's bin/rec; returns 1 (and
#                        leaves fw_rec empty) when there is none
#   fw_clock             sets fw_us to the wall clock in microseconds since
#                        the epoch (an integer)
#   fw_rfc3339 US        sets fw_time to microseconds US as RFC 3339 UTC
#                        with milliseconds: 2026-12-02T03:00:00.123Z
#   fw_shjoin ARG...     prints the arguments as one shell command line
#   fw_json_str S        sets fw_j to S as a JSON string literal
#   fw_run_append STAGE STATUS EXIT US0 US1 [-- CMD...]
#                        appends one `run` record to $FW_RUNS (nothing when
#                        it is unset) under an exclusive flock on that file;
#                        the optional fields come from fw_output, fw_records,
#                        fw_log, fw_lock and fw_held_by when they are set,
#                        cmd from CMD.  Returns 1, with a message on stderr
#                        naming $fw_prog, when the record could not be written.
#
# The record (see fw-cron(1)): kind "run", v 1, id, run ($FW_RUN_ID, when set),
# pipeline ($FW_PIPELINE, when set), stage, status, exit, start, end, seconds
# (always a float), host, output, records, log, lock, held_by, cmd.

fw_runlog_dir=${BASH_SOURCE[0]%/*}
fw_host=${HOSTNAME:-$(uname -n)}
fw_output= fw_records= fw_log= fw_lock= fw_held_by=

fw_find_rec() {
	fw_rec=
	if [ -n "${FW_BIN:-}" ] && [ -x "$FW_BIN/rec" ]; then
		fw_rec=$FW_BIN/rec
	elif command -v rec >/dev/null 2>&1; then
		fw_rec=$(command -v rec)
	elif [ -x "$fw_runlog_dir/../../bin/rec" ]; then
		fw_rec=$fw_runlog_dir/../../bin/rec
	fi
	[ -n "$fw_rec" ]
}

fw_clock() {
	# EPOCHREALTIME's decimal point follows the locale; keep the digits.
	fw_us=${EPOCHREALTIME//[!0-9]/}
}

fw_rfc3339() {
	local TZ=UTC0
	printf -v fw_time '%(%Y-%m-%dT%H:%M:%S)T.%03dZ' $(($1 / 1000000)) $(($1 % 1000000 / 1000))
}

# fw_json_str S: sets fw_j to S as a JSON string literal.  Bytes are kept
# as they are (a string that is not UTF-8 is mended when it is written).
fw_json_str() {
	local LC_ALL=C s=$1 c h i
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	if [[ $s == *[$'\x01'-$'\x1f']* ]]; then
		s=${s//$'\n'/\\n}
		s=${s//$'\t'/\\t}
		s=${s//$'\r'/\\r}
		for ((i = 1; i < 32; i++)); do
			printf -v h %02x $i
			printf -v c "\\x$h"
			[[ $s != *"$c"* ]] || s=${s//"$c"/\\u00$h}
		done
	fi
	fw_j="\"$s\""
}

fw_run_append() {
	local stage=$1 status=$2 rc=$3 us0=$4 us1=$5 id a json sep= fd wrc k v
	shift 5
	[ "${1-}" != -- ] || shift
	[ -n "${FW_RUNS:-}" ] || return 0
	[ "$us1" -ge "$us0" ] || us1=$us0 # the clock was set back
	if ! fw_find_rec; then
		echo "$fw_prog: rec not found (set FW_BIN or PATH): no run record written to $FW_RUNS" >&2
		return 1
	fi
	# Unique, not a content hash: two runs of the same stage are two events.
	printf -v id '%013x%06x%05x' "$us0" $(($$ % 0x1000000)) $(((RANDOM << 15 | RANDOM) & 0xfffff))
	# The JSON is written here rather than by jq, which costs more than
	# everything else a stage adds; seconds is printed with a fraction so
	# that rec makes it a float.
	json="{\"kind\":\"run\",\"v\":1,\"id\":\"$id\""
	for k in run pipeline; do
		case $k in run) v=${FW_RUN_ID:-} ;; *) v=${FW_PIPELINE:-} ;; esac
		[ -z "$v" ] || { fw_json_str "$v"; json+=",\"$k\":$fw_j"; }
	done
	fw_json_str "$stage"; json+=",\"stage\":$fw_j"
	fw_json_str "$status"; json+=",\"status\":$fw_j,\"exit\":$((rc))"
	fw_rfc3339 "$us0"; json+=",\"start\":\"$fw_time\""
	fw_rfc3339 "$us1"; json+=",\"end\":\"$fw_time\""
	printf -v a '%d.%03d' $(((us1 - us0) / 1000000)) $(((us1 - us0) % 1000000 / 1000))
	fw_json_str "$fw_host"; json+=",\"seconds\":$a,\"host\":$fw_j"
	[ -z "$fw_output" ] || { fw_json_str "$fw_output"; json+=",\"output\":$fw_j"; }
	[ -z "$fw_records" ] || json+=",\"records\":$((fw_records))"
	for k in log lock held_by; do
		v=fw_$k
		[ -z "${!v}" ] || { fw_json_str "${!v}"; json+=",\"$k\":$fw_j"; }
	done
	json+=",\"cmd\":["
	for a in "$@"; do fw_json_str "$a"; json+="$sep$fw_j"; sep=,; done
	json+="]}"
	# Append under a lock on the runs log itself, so that stages ending at
	# once write whole records one after the other.
	if ! exec {fd}>>"$FW_RUNS"; then
		echo "$fw_prog: $FW_RUNS: cannot open the runs log: no run record written" >&2
		return 1
	fi
	if ! flock -w 60 "$fd"; then
		exec {fd}>&-
		echo "$fw_prog: $FW_RUNS: runs log locked for 60 s: no run record written" >&2
		return 1
	fi
	"$fw_rec" from-json <<< "$json" >&"$fd" 2>/dev/null ||
		iconv -c -f UTF-8 -t UTF-8 <<< "$json" | "$fw_rec" from-json >&"$fd"
	wrc=$?
	exec {fd}>&-
	if [ $wrc -ne 0 ]; then
		echo "$fw_prog: $FW_RUNS: cannot append the run record" >&2
		return 1
	fi
}

# fw_shjoin ARG...: prints the arguments as one shell command line, quoting
# only the words that need it.
fw_shjoin() {
	local a sep= q="'"
	for a in "$@"; do
		if [[ -n $a && $a != *[!A-Za-z0-9_./=:,+@%-]* ]]; then
			printf '%s%s' "$sep" "$a"
		else
			printf "%s'%s'" "$sep" "${a//$q/$q\\$q$q}"
		fi
		sep=' '
	done
}
