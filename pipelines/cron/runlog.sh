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

fw_run_append() {
	local stage=$1 status=$2 rc=$3 us0=$4 us1=$5 id a i=0 argv=() head= rest= secs fd wrc t0 t1
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
	for a in "$@"; do argv+=(--arg "argv_$i" "$a"); i=$((i + 1)); done
	fw_rfc3339 "$us0"; t0=$fw_time
	fw_rfc3339 "$us1"; t1=$fw_time
	# One jq makes the record in two halves; the seconds go between them by
	# hand, since jq prints 2.0 as 2, an integer to msgpack.
	{ read -r head && read -r rest; } < <(jq -cn --arg id "$id" \
		--arg run "${FW_RUN_ID:-}" --arg pipeline "${FW_PIPELINE:-}" \
		--arg stage "$stage" --arg status "$status" --argjson exit "$rc" \
		--arg start "$t0" --arg stop "$t1" \
		--arg host "$fw_host" --arg output "${fw_output:-}" --arg records "${fw_records:-}" \
		--arg log "${fw_log:-}" --arg lock "${fw_lock:-}" --arg held_by "${fw_held_by:-}" \
		"${argv[@]}" '
		def opt(k; v): if v != "" then {(k): v} else {} end;
		({kind: "run", v: 1, id: $id} + opt("run"; $run) + opt("pipeline"; $pipeline)
		 + {stage: $stage, status: $status, exit: $exit, start: $start, "end": $stop}),
		({host: $host} + opt("output"; $output)
		 + (if $records != "" then {records: ($records | tonumber)} else {} end)
		 + opt("log"; $log) + opt("lock"; $lock) + opt("held_by"; $held_by)
		 + {cmd: [$ARGS.named | to_entries[] | select(.key | startswith("argv_"))
		          | {i: (.key[5:] | tonumber), v: .value}] | sort_by(.i) | map(.v)})')
	if [ -z "$rest" ]; then
		echo "$fw_prog: cannot build the run record: no run record written to $FW_RUNS" >&2
		return 1
	fi
	printf -v secs '%d.%03d' $(((us1 - us0) / 1000000)) $(((us1 - us0) % 1000000 / 1000))
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
	"$fw_rec" from-json <<< "${head%\}},\"seconds\":$secs,${rest#\{}" >&"$fd"
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
