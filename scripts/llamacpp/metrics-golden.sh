#!/usr/bin/env bash
# Captures llama-server v0.5.0's /metrics exposition after one request into
# server/metrics/testdata/llamacpp-v0.5.0.metrics, the reference for
# --metrics-compat=llamacpp's names, types, HELP text and label sets
# (server/metrics TestLlamaCppMatchesGolden; cmd/sluice
# TestLlamaCppMatchesLlamaServer compares with the live server when
# .build/llamacpp-newest has it). make test does not build llama-server, so
# the capture is checked in.
#
# Needs .build/llamacpp-newest/build/bin/llama-server (build-newest.sh) and
# the default model (make model). Usage: scripts/llamacpp/metrics-golden.sh
set -euo pipefail

cd "$(dirname "$0")/../.."
BIN=.build/llamacpp-newest/build/bin/llama-server
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
OUT=server/metrics/testdata/llamacpp-v0.5.0.metrics
PORT=${PORT:-18431}
[[ -x $BIN ]] || { echo "$BIN missing: scripts/llamacpp/build-newest.sh builds it" >&2; exit 1; }

CMD=("$BIN" -m "$MODEL" --metrics --host 127.0.0.1 --port "$PORT" -c 1024 -np 1 -t 2)
LOG=$(mktemp)
"${CMD[@]}" >"$LOG" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -f "$LOG"' EXIT
for _ in $(seq 600); do
	curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break
	kill -0 $PID 2>/dev/null || { cat "$LOG" >&2; exit 1; }
	sleep 0.1
done
REQ='{"prompt":"The river rose through the night, and by morning","max_tokens":8,"temperature":0}'
curl -sf "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' -d "$REQ" >/dev/null
mkdir -p "$(dirname "$OUT")"
{
	# Comments other than HELP and TYPE are ignored by Prometheus' parser.
	echo "# llama.cpp $(git -C .build/llamacpp-newest/src describe --tags --always 2>/dev/null || echo v0.5.0) llama-server /metrics"
	echo "# made by scripts/llamacpp/metrics-golden.sh: ${CMD[*]}"
	echo "# after one POST /v1/completions $REQ"
	curl -sf "http://127.0.0.1:$PORT/metrics"
} >"$OUT"
echo "wrote $OUT" >&2
