# Helpers sourced by the scripts in scripts/bench/: start servers on loopback,
# wait until they answer a completion, stop them by the pids recorded here.
# Every server this file starts is stopped on exit (trap in cleanup).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=${THREADS:-2}          # both servers, same count
SLOTS=${SLOTS:-16}             # Sluice --max-seqs = llama-server -np
CTX_TOKENS=${CTX_TOKENS:-8192} # KV capacity, both: llama-server -c, Sluice --kv-blocks CTX_TOKENS/16
OUT=${OUT:-docs/bench}
LOGS=${LOGS:-.build/bench}
LLAMA_SERVER=${LLAMA_SERVER:-.build/llamacpp/build/bin/llama-server}
SLUICE=${SLUICE:-bin/sluice}
mkdir -p "$OUT" "$LOGS"

PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	PIDS=()
}
trap cleanup EXIT INT TERM

# wait_ready URL PID: until a one-token completion answers 200 (both servers
# answer 503 while the model loads), at most 180 s, failing at once if the
# server process is gone.
wait_ready() {
	local url=$1 pid=$2 i
	for i in $(seq 360); do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "server for $url (pid $pid) exited; its log is in $LOGS" >&2
			return 1
		fi
		if curl -sf -o /dev/null -m 30 "$url/v1/completions" -H 'Content-Type: application/json' \
			-d '{"prompt":"Hello","max_tokens":1}'; then
			return 0
		fi
		sleep 0.5
	done
	echo "server at $url never became ready" >&2
	return 1
}

# start_sluice PORT NAME [extra serve flags...]: sets SERVER_PID.
start_sluice() {
	local port=$1 name=$2
	shift 2
	"$SLUICE" serve --model "$MODEL" --addr "127.0.0.1:$port" --threads "$THREADS" \
		--max-seqs "$SLOTS" --kv-blocks $((CTX_TOKENS / 16)) "$@" >"$LOGS/$name.log" 2>&1 &
	SERVER_PID=$!
	PIDS+=("$SERVER_PID")
	wait_ready "http://127.0.0.1:$port" "$SERVER_PID"
}

# start_llama PORT NAME [extra flags...]: llama.cpp's server, continuous
# batching on, SLOTS parallel slots sharing CTX_TOKENS of KV. Sets SERVER_PID.
# On a machine other jobs load, run with OMP_WAIT_POLICY=PASSIVE in the
# environment: v0.5.0 is built with OpenMP, whose threads spin at every
# barrier by default, and with both of them rarely on a core at once it
# crawled (0.6 tok/s at 1 client, no request finished at 4 and 16, load
# average ~13 on 2 cores; 23.7 tok/s with PASSIVE in the same minutes).
start_llama() {
	local port=$1 name=$2
	shift 2
	"$LLAMA_SERVER" -m "$MODEL" --host 127.0.0.1 --port "$port" -t "$THREADS" -tb "$THREADS" \
		-np "$SLOTS" -c "$CTX_TOKENS" -cb "$@" >"$LOGS/$name.log" 2>&1 &
	SERVER_PID=$!
	PIDS+=("$SERVER_PID")
	wait_ready "http://127.0.0.1:$port" "$SERVER_PID"
}

# stop_server PID: stop one server started above and wait for it.
stop_server() {
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	local keep=() p
	for p in "${PIDS[@]}"; do
		[[ $p == "$1" ]] || keep+=("$p")
	done
	PIDS=("${keep[@]}")
}

# cool_down: COOLDOWN seconds (default 0) of idle before a server starts.
# On a VM whose host lowers a busy guest's clock, a run right after another
# is slower than one after a rest (session 14's 2-core EPYC: the same Sluice
# binary 148.8 and 144.3 tok/s at 1 client back to back, 172.2 after 45 s
# idle; llama-server 79.4 first in a rotation, 63-73 after Sluice), so
# without one whichever server runs first after a pause is favoured.
cool_down() {
	if ((${COOLDOWN:-0} > 0)); then
		sleep "$COOLDOWN"
	fi
}

# warm URL: a few requests so neither server is measured cold.
warm() {
	# --seed: prompts of its own, so the measured ones are never prefix-cache hits.
	"$SLUICE" bench --url "$1" --concurrency 2 --requests 4 --max-tokens 8 --seed 1000 --quiet >/dev/null
}

# header: the facts every figure is recorded with.
header() {
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "sluice: $(git -C "$ROOT" rev-parse --short HEAD); model: $MODEL; threads: $THREADS; slots: $SLOTS; KV tokens: $CTX_TOKENS"
}
