#!/usr/bin/env bash
# Concurrency sweep, Sluice and llama.cpp's llama-server side by side: same
# model file, same threads, same parallel slots and KV capacity, one server
# at a time on loopback. Each level is capped in time (DURATION to send,
# DRAIN to finish). Writes $OUT/sweep-{sluice,llama-server}.json.
#
# SERVERS lists the servers in the order they run: sluice, llama-server, or
# NAME=PATH for a Sluice binary at PATH labelled NAME (two builds compared
# in one run, e.g. SERVERS="before=/tmp/sluice-old sluice llama-server").
# ALTERNATE=1 runs level by level, every server at each level before the
# next (a fresh server per level; one JSON per server and level,
# sweep-NAME-cLEVEL.json), so that on a shared machine whose load drifts the
# servers meet about the same load at each level and their ratios hold.
# COOLDOWN=SECONDS rests the machine before each server starts (lib.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
LEVELS=${LEVELS:-1,4,16,64}
DURATION=${DURATION:-30s}
DRAIN=${DRAIN:-15s}
MAX_TOKENS=${MAX_TOKENS:-64}
PROMPT_WORDS=${PROMPT_WORDS:-64}
SLO=(--slo-ttft "${SLO_TTFT:-2s}" --slo-tpot "${SLO_TPOT:-200ms}")
PORT=${PORT:-18181}
header

sweep() { # NAME PID METRICS_URL|none LEVELS OUT
	local args=(--url "http://127.0.0.1:$PORT" --scenario sweep --levels "$4" --duration "$DURATION"
		--drain "$DRAIN" --max-tokens "$MAX_TOKENS" --prompt-words "$PROMPT_WORDS" "${SLO[@]}"
		--label "$1" --server-pid "$2" --metrics "$3" --settle 1s --out "$5")
	echo "+ sluice bench ${args[*]}"
	"$SLUICE" bench "${args[@]}"
}

run_server() { # SERVER LEVELS OUT_SUFFIX
	local server=$1 name=$1 bin=$SLUICE metrics
	if [[ $server == *=* ]]; then
		name=${server%%=*} bin=${server#*=}
		server=sluice
	fi
	cool_down
	if [[ $server == sluice ]]; then
		SLUICE=$bin start_sluice "$PORT" "sweep-$name"
		metrics=http://127.0.0.1:$PORT/metrics
		echo "$name: $bin"
	else
		start_llama "$PORT" "sweep-$name"
		metrics=none
	fi
	warm "http://127.0.0.1:$PORT"
	echo "$(date -u +%H:%M:%S) $name, levels $2, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
	sweep "$name" "$SERVER_PID" "$metrics" "$2" "$OUT/sweep-$name$3.json"
	stop_server "$SERVER_PID"
}

if [[ ${ALTERNATE:-0} == 1 ]]; then
	for level in ${LEVELS//,/ }; do
		for server in ${SERVERS:-sluice llama-server}; do
			run_server "$server" "$level" "-c$level"
		done
	done
else
	for server in ${SERVERS:-sluice llama-server}; do
		run_server "$server" "$LEVELS" ""
	done
fi
