#!/usr/bin/env bash
# Concurrency sweep, Sluice and llama.cpp's llama-server side by side: same
# model file, same threads, same parallel slots and KV capacity, one server
# at a time on loopback. Each level is capped in time (DURATION to send,
# DRAIN to finish). Writes $OUT/sweep-{sluice,llama-server}.json.
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

sweep() { # NAME PID METRICS_URL|none
	local args=(--url "http://127.0.0.1:$PORT" --scenario sweep --levels "$LEVELS" --duration "$DURATION"
		--drain "$DRAIN" --max-tokens "$MAX_TOKENS" --prompt-words "$PROMPT_WORDS" "${SLO[@]}"
		--label "$1" --server-pid "$2" --metrics "$3" --settle 1s --out "$OUT/sweep-$1.json")
	echo "+ sluice bench ${args[*]}"
	"$SLUICE" bench "${args[@]}"
}

for server in ${SERVERS:-sluice llama-server}; do
	if [[ $server == sluice ]]; then
		start_sluice "$PORT" sweep-sluice
		metrics=http://127.0.0.1:$PORT/metrics
	else
		start_llama "$PORT" sweep-llama-server
		metrics=none
	fi
	warm "http://127.0.0.1:$PORT"
	sweep "$server" "$SERVER_PID" "$metrics"
	stop_server "$SERVER_PID"
done
