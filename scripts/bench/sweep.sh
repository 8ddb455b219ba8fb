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

start_sluice "$PORT" sweep-sluice
warm "http://127.0.0.1:$PORT"
sweep sluice "$SERVER_PID" "http://127.0.0.1:$PORT/metrics"
stop_server "$SERVER_PID"

start_llama "$PORT" sweep-llama-server
warm "http://127.0.0.1:$PORT"
sweep llama-server "$SERVER_PID" none
stop_server "$SERVER_PID"
