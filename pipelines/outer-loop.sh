#!/bin/sh
# outer-loop.sh — product feedback to training and eval data.
#
#   pipelines/outer-loop.sh [-o OUTDIR] [--private-eval FILE] [--by PATH]
#                           [--paired-by PATH] [--seed S] LOG...
#
# Stages: ingest (fb-ingest: logs + feedback -> traj, secrets redacted)
#      -> filter (traj-filter: rated trajectories, duplicates of the same
#         conversation dropped)
#      -> report (fb-report: failure categories, A/B verdicts)
#      -> select (traj-filter: thumbs-up -> SFT set, thumbs-down -> eval
#         candidates, both decontaminated against the private eval split).
#
# Inputs
#   LOG...              log files, or directories searched for them: in a
#                       directory, files named feedback*.jsonl / feedback*.csv
#                       are feedback events, every other *.jsonl, *.json and
#                       *.traj (also one level down) is a trajectory log
#   --private-eval FILE the private eval split (records, JSON Lines or plain
#                       text); no output keeps a 13-gram of its user text.
#                       Without it nothing is decontaminated (a warning says so)
#   --by PATH           the A/B arm (default .model)
#   --paired-by PATH    the item a pair shares, for McNemar's test (optional)
#   --seed S            bootstrap seed of the report (default 0)
#   FW_BIN              directory of the flywheel tools (default: PATH)
#
# Outputs in OUTDIR (default ./outer-loop), each written whole or not at all
#   traj.msgpack             rated trajectories, redacted and deduplicated
#   sft.msgpack              thumbs-up trajectories (every vote up)
#   eval-candidates.msgpack  thumbs-down trajectories (some vote down)
#   report.txt               fb-report's table
#   report.msgpack           fb-report --records (kind metrics)
#   orphans.msgpack          feedback events that matched no trajectory
#   ingest.log               fb-ingest's summary and skipped lines
#   decontam.log             every record decontamination dropped, and why
#   runs.msgpack             one `run` record per stage: stage, status,
#                            start, end, records in and out
#
# Exit status: 0 when every stage ran (malformed log lines are skipped by
# fb-ingest and counted in ingest.log), 1 when a stage failed, 2 on bad usage.
set -eu

prog=outer-loop
usage() {
	echo "usage: $prog [-o OUTDIR] [--private-eval FILE] [--by PATH] [--paired-by PATH] [--seed S] LOG..." >&2
	exit 2
}

out=outer-loop private= by=.model paired= seed=0
while [ $# -gt 0 ]; do
	case $1 in
	-o) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
	--private-eval) [ $# -ge 2 ] || usage; private=$2; shift 2 ;;
	--by) [ $# -ge 2 ] || usage; by=$2; shift 2 ;;
	--paired-by) [ $# -ge 2 ] || usage; paired=$2; shift 2 ;;
	--seed) [ $# -ge 2 ] || usage; seed=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	--) shift; break ;;
	-*) echo "$prog: unknown option '$1'" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || usage
if [ -n "${FW_BIN:-}" ]; then PATH=$FW_BIN:$PATH; fi
for t in fb-ingest traj-filter fb-report rec; do
	command -v $t >/dev/null 2>&1 || { echo "$prog: $t not found (set FW_BIN or PATH)" >&2; exit 1; }
done
if [ -n "$private" ] && [ ! -r "$private" ]; then
	echo "$prog: $private: cannot read the private eval split" >&2
	exit 1
fi

W=$(mktemp -d "${TMPDIR:-/tmp}/outer-loop.XXXXXX")
trap 'rm -rf "$W"' EXIT
trap 'exit 1' HUP INT TERM

# Sort the inputs into logs and feedback (names with spaces are not supported).
: > "$W/logs"
: > "$W/feedback"
for a in "$@"; do
	if [ -d "$a" ]; then
		find "$a" -maxdepth 2 -type f \( -name '*.jsonl' -o -name '*.json' -o -name '*.traj' -o -name '*.csv' \) | sort > "$W/found"
	elif [ -f "$a" ]; then
		echo "$a" > "$W/found"
	else
		echo "$prog: $a: no such file or directory" >&2
		exit 1
	fi
	while read -r f; do
		case ${f##*/} in
		feedback*.jsonl|feedback*.csv) echo "$f" >> "$W/feedback" ;;
		*.csv) ;;
		*) echo "$f" >> "$W/logs" ;;
		esac
	done < "$W/found"
done
[ -s "$W/logs" ] || { echo "$prog: no trajectory logs in $*" >&2; exit 1; }

now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
count() { rec count "$@"; }
# run_record STAGE START IN OUT [STATUS]: appends a run record (its id hashes
# its content)
run_record() {
	body=$(printf '"stage":"%s","status":"%s","start":"%s","end":"%s","in":%s,"out":%s' \
		"$1" "${5:-ok}" "$2" "$(now)" "$3" "$4")
	id=$(printf '%s' "$body" | cksum | awk '{ printf "%08x%08x", $1, $2 }')
	printf '{"kind":"run","v":1,"id":"%s",%s}\n' "$id" "$body" >> "$W/runs.jsonl"
}
mkdir -p "$out"

# 1. ingest: every log and feedback file; secrets redacted (the default).
t0=$(now)
set -- --orphans "$W/orphans.msgpack" -o "$W/ingested.msgpack"
while read -r f; do set -- "$@" --feedback "$f"; done < "$W/feedback"
while read -r f; do set -- "$@" "$f"; done < "$W/logs"
# Exit 1 means some input was skipped (an unknown format, a bad line):
# the rest is good and goes on; anything else stops the loop.
status=ok
fb-ingest "$@" 2> "$W/ingest.log" || {
	rc=$?
	if [ $rc -ne 1 ] || [ ! -s "$W/ingested.msgpack" ]; then
		cat "$W/ingest.log" >&2
		echo "$prog: ingest failed" >&2
		exit 1
	fi
	status=partial
	grep -v ': line [0-9]*: \|: [a-z-]*: [0-9]* trajector\|^fb-ingest: feedback: \|^fb-ingest: redactions: ' \
		"$W/ingest.log" | sed "s/^/$prog: warning: /" >&2 || :
}
n_logs=$(wc -l < "$W/logs")
n_ingested=$(count "$W/ingested.msgpack")
run_record ingest "$t0" "$n_logs" "$n_ingested" "$status"

# 2. filter: trajectories that carry a rating, one per conversation.
t0=$(now)
traj-filter -q -e 'any(.feedback, .rating != 0)' --dedup=.turns -o "$W/traj.msgpack" "$W/ingested.msgpack"
n_traj=$(count "$W/traj.msgpack")
run_record filter "$t0" "$n_ingested" "$n_traj"

# 3. report: failure categories and A/B verdicts.
t0=$(now)
set -- --by "$by" --seed "$seed"
if [ -n "$paired" ]; then set -- "$@" --paired-by "$paired"; fi
fb-report "$@" -o "$W/report.txt" "$W/traj.msgpack"
fb-report "$@" --records -o "$W/report.msgpack" "$W/traj.msgpack"
run_record report "$t0" "$n_traj" "$(count "$W/report.msgpack")"

# 4. select: SFT data and eval candidates, decontaminated.
set --
if [ -n "$private" ]; then
	set -- -v --decontam "$private"
else
	echo "$prog: warning: no --private-eval: outputs are not decontaminated" >&2
fi
t0=$(now)
traj-filter "$@" -e 'len(.feedback) > 0 and all(.feedback, .rating > 0)' \
	-o "$W/sft.msgpack" "$W/traj.msgpack" 2> "$W/sft.log"
run_record sft "$t0" "$n_traj" "$(count "$W/sft.msgpack")"
t0=$(now)
traj-filter "$@" -e 'any(.feedback, .rating < 0)' \
	-o "$W/eval-candidates.msgpack" "$W/traj.msgpack" 2> "$W/eval.log"
run_record eval-candidates "$t0" "$n_traj" "$(count "$W/eval-candidates.msgpack")"
rec from-json -o "$W/runs.msgpack" "$W/runs.jsonl"
# The reasons, with the work file named as it is published.
for s in sft eval; do
	case $s in sft) name=sft ;; *) name=eval-candidates ;; esac
	awk -v w="$W/" -v o="$out/" -v n="$name: " '{
		sub(/^traj-filter: /, n)
		i = index($0, w)
		if (i) $0 = substr($0, 1, i - 1) o substr($0, i + length(w))
		print
	}' "$W/$s.log"
done > "$W/decontam.log"

# Publish: each file is renamed into place whole.
for f in traj.msgpack sft.msgpack eval-candidates.msgpack report.txt report.msgpack \
	orphans.msgpack ingest.log decontam.log runs.msgpack; do
	cp "$W/$f" "$out/.$f.tmp"
	mv "$out/.$f.tmp" "$out/$f"
done

{
	echo "$prog: ingested $n_ingested trajectories from $n_logs logs ($(count "$W/orphans.msgpack") orphan feedback events); $n_traj rated after dedup"
	echo "$prog: sft.msgpack: $(count "$out/sft.msgpack") thumbs-up; eval-candidates.msgpack: $(count "$out/eval-candidates.msgpack") thumbs-down"
	if [ -n "$private" ]; then
		sed -n 's/^traj-filter: decontam: dropped/decontam: sft: dropped/p' "$W/sft.log"
		sed -n 's/^traj-filter: decontam: dropped/decontam: eval-candidates: dropped/p' "$W/eval.log"
		echo "decontam: the reasons are in $out/decontam.log"
	fi
	echo "$prog: report in $out/report.txt"
} | sed "s/^decontam:/$prog: decontam:/" >&2
