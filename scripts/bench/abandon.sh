#!/usr/bin/env bash
# The abandoned-request study: 30% of the clients hang up after 8 tokens.
# Run against Sluice, then Sluice with --abort-on-disconnect=false (which
# keeps generating for nobody, as a server that never watches its clients
# does), sampling /metrics for KV usage and reclaim latency.
# llama-server (with --metrics: sequences processing and tokens generated,
# it exports no KV usage) runs the same load as the peer.
# Writes $OUT/abandon-{abort,no-abort,llama-server}.json.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
CONCURRENCY=${CONCURRENCY:-16}
REQUESTS=${REQUESTS:-48}
MAX_TOKENS=${MAX_TOKENS:-128}
DURATION=${DURATION:-90s}
SLO=(--slo-ttft "${SLO_TTFT:-2s}" --slo-tpot "${SLO_TPOT:-200ms}")
PORT=${PORT:-18182}
header

for mode in ${MODES:-abort no-abort llama-server}; do
	case $mode in
	abort) start_sluice "$PORT" "abandon-$mode" ;;
	no-abort) start_sluice "$PORT" "abandon-$mode" --abort-on-disconnect=false ;;
	llama-server) start_llama "$PORT" "abandon-$mode" --metrics ;;
	esac
	warm "http://127.0.0.1:$PORT"
	label="sluice $mode"
	[[ $mode == llama-server ]] && label=llama-server
	# --settle: keep sampling after the last client left, long enough to see
	# what a server that never noticed the hang-ups keeps generating.
	args=(--url "http://127.0.0.1:$PORT" --scenario abandon --abandon-ratio 0.3 --abandon-after 8
		--concurrency "$CONCURRENCY" --requests "$REQUESTS" --max-tokens "$MAX_TOKENS" --duration "$DURATION"
		--drain 0s "${SLO[@]}" --label "$label" --server-pid "$SERVER_PID" --settle "${SETTLE:-10s}"
		--out "$OUT/abandon-$mode.json")
	echo "+ sluice bench ${args[*]}"
	"$SLUICE" bench "${args[@]}"
	stop_server "$SERVER_PID"
done
