#!/usr/bin/env bash
# Relay mode (sluice serve --upstream), upstream = Sluice on the default model.
#  1. The abandon study through the relay: 30% of the clients hang up after 8
#     tokens; the upstream's /metrics is sampled, so "tokens generated" is what
#     the upstream computed. Modes: direct (no relay, the reference), relay
#     (cancels the upstream stream when its client leaves), relay
#     --abort-on-disconnect=false (reads the upstream to the end for nobody:
#     the seed's first bug). The upstream is restarted for each mode.
#  2. The relay's overhead per token: the same load direct and through the
#     relay, alternating, at 1 and 16 clients (TTFT and ITL; the ratio and the
#     difference are the relay's cost).
# Writes $OUT/relay-abandon-{direct,relay,relay-no-cancel}.json and
# $OUT/relay-overhead-c{1,16}-{direct,relay}-{1,2}.json.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
UP_PORT=${UP_PORT:-18190}
RELAY_PORT=${RELAY_PORT:-18191}
CONCURRENCY=${CONCURRENCY:-16}
REQUESTS=${REQUESTS:-48}
MAX_TOKENS=${MAX_TOKENS:-128}
header

# start_relay NAME [extra serve flags...]: a relay on RELAY_PORT in front of UP_PORT. Sets RELAY_PID.
start_relay() {
	local name=$1
	shift
	"$SLUICE" serve --upstream "http://127.0.0.1:$UP_PORT" --addr "127.0.0.1:$RELAY_PORT" "$@" >"$LOGS/$name.log" 2>&1 &
	RELAY_PID=$!
	PIDS+=("$RELAY_PID")
	wait_ready "http://127.0.0.1:$RELAY_PORT" "$RELAY_PID"
}

for mode in ${MODES:-direct relay relay-no-cancel}; do
	start_sluice "$UP_PORT" "relay-upstream-$mode"
	UP_PID=$SERVER_PID
	url="http://127.0.0.1:$UP_PORT"
	case $mode in
	relay) start_relay "relay-$mode" ;;
	relay-no-cancel) start_relay "relay-$mode" --abort-on-disconnect=false ;;
	esac
	[[ $mode != direct ]] && url="http://127.0.0.1:$RELAY_PORT"
	warm "$url"
	args=(--url "$url" --scenario abandon --abandon-ratio 0.3 --abandon-after 8
		--concurrency "$CONCURRENCY" --requests "$REQUESTS" --max-tokens "$MAX_TOKENS" --duration 120s
		--drain 0s --label "abandon $mode" --metrics "http://127.0.0.1:$UP_PORT/metrics" --server-pid "$UP_PID"
		--settle "${SETTLE:-10s}" --out "$OUT/relay-abandon-$mode.json")
	echo "+ sluice bench ${args[*]}"
	"$SLUICE" bench "${args[@]}"
	[[ $mode != direct ]] && { echo "relay metrics:"; curl -s "http://127.0.0.1:$RELAY_PORT/metrics" | grep -E '^sluice_relay_(tokens_after|upstream_cancelled|upstream_errors_total|upstream_truncated)' | grep -v ' 0$' || true; }
	[[ $mode != direct ]] && stop_server "$RELAY_PID"
	stop_server "$UP_PID"
done

if [[ ${OVERHEAD:-1} == 1 ]]; then
	start_sluice "$UP_PORT" relay-upstream-overhead
	start_relay relay-overhead
	warm "http://127.0.0.1:$UP_PORT"
	warm "http://127.0.0.1:$RELAY_PORT"
	for c in 1 16; do
		for rep in 1 2; do
			for via in direct relay; do
				port=$UP_PORT seed=$((100 * c + 10 * rep))
				[[ $via == relay ]] && port=$RELAY_PORT seed=$((seed + 1))
				# --seed: prompts of each run's own, so no run finds another's in the prefix cache.
				args=(--url "http://127.0.0.1:$port" --concurrency "$c" --requests $((c < 4 ? 16 : c * 4)) --max-tokens 64 --seed "$seed"
					--metrics none --label "$via c$c #$rep" --out "$OUT/relay-overhead-c$c-$via-$rep.json")
				echo "+ sluice bench ${args[*]}"
				"$SLUICE" bench "${args[@]}"
			done
		done
	done
fi
