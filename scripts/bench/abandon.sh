#!/usr/bin/env bash
# The abandoned-request study: 30% of the clients hang up after 8 tokens.
# Run against Sluice, then Sluice with --abort-on-disconnect=false (which
# keeps generating for nobody, as a server that never watches its clients
# does), sampling /metrics for KV usage and reclaim latency.
# Writes $OUT/abandon-{abort,no-abort}.json.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
CONCURRENCY=${CONCURRENCY:-16}
REQUESTS=${REQUESTS:-48}
MAX_TOKENS=${MAX_TOKENS:-128}
DURATION=${DURATION:-90s}
SLO=(--slo-ttft "${SLO_TTFT:-2s}" --slo-tpot "${SLO_TPOT:-200ms}")
PORT=${PORT:-18182}
header

for mode in abort no-abort; do
	flags=()
	[[ $mode == no-abort ]] && flags=(--abort-on-disconnect=false)
	start_sluice "$PORT" "abandon-$mode" "${flags[@]}"
	warm "http://127.0.0.1:$PORT"
	args=(--url "http://127.0.0.1:$PORT" --scenario abandon --abandon-ratio 0.3 --abandon-after 8
		--concurrency "$CONCURRENCY" --requests "$REQUESTS" --max-tokens "$MAX_TOKENS" --duration "$DURATION"
		--drain 0s "${SLO[@]}" --label "sluice $mode" --server-pid "$SERVER_PID" --settle 3s
		--out "$OUT/abandon-$mode.json")
	echo "+ sluice bench ${args[*]}"
	"$SLUICE" bench "${args[@]}"
	stop_server "$SERVER_PID"
done
