#!/usr/bin/env bash
# 1,000 streams held open at once for HOLD, against Sluice with its default
# queue bound, Sluice with a queue that holds them all, and llama-server:
# what breaks first, server memory per stream, fds. Writes
# $OUT/streams-{sluice,sluice-queue1000,llama-server}.json.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
STREAMS=${STREAMS:-1000}
HOLD=${HOLD:-30s}
PORT=${PORT:-18183}
header
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

hold() { # NAME PID [metrics URL]
	local args=(--url "http://127.0.0.1:$PORT" --scenario streams-1000 --streams "$STREAMS" --duration "$HOLD"
		--max-tokens 4096 --label "$1" --server-pid "$2" --metrics "${3:-none}" --settle 2s --out "$OUT/streams-$1.json")
	echo "+ sluice bench ${args[*]}"
	"$SLUICE" bench "${args[@]}"
}

start_sluice "$PORT" streams-sluice
hold sluice "$SERVER_PID" "http://127.0.0.1:$PORT/metrics"
stop_server "$SERVER_PID"

start_sluice "$PORT" streams-sluice-queue1000 --max-queue "$STREAMS"
hold sluice-queue1000 "$SERVER_PID" "http://127.0.0.1:$PORT/metrics"
stop_server "$SERVER_PID"

start_llama "$PORT" streams-llama-server
hold llama-server "$SERVER_PID"
stop_server "$SERVER_PID"
