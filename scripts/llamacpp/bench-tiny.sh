#!/usr/bin/env bash
# llama.cpp v0.5.0's speed on tiny GGUF models in tokens per CPU-second, the
# figure BenchmarkTinyNewest reports for Sluice (the dev machines are shared,
# so wall-clock tokens/s there measures the neighbours too): for each model,
# llama-bench on one thread runs pp128 and tg64 with -r 10 and -r 210 under
# time(1); the difference of their CPU seconds is 200 repetitions' cost,
# without loading and warm-up (a tiny model's repetition takes ~2 ms, below
# time(1)'s 10 ms resolution).
#
#   scripts/llamacpp/bench-tiny.sh MODEL.gguf...
#
# Needs .build/llamacpp-newest/build/bin/llama-bench (build-newest.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BENCH=$ROOT/.build/llamacpp-newest/build/bin/llama-bench
TMP=$(mktemp)
trap 'rm -f "$TMP"' EXIT
cpu() { # CPU seconds of one llama-bench run
	/usr/bin/time -o "$TMP" -f '%U %S' "$BENCH" -t 1 "$@" -o csv >/dev/null 2>&1
	awk '{print $1 + $2}' "$TMP"
}
printf '%-20s %12s %12s\n' model pp128/cpu-s tg64/cpu-s
for m in "$@"; do
	pp1=$(cpu -m "$m" -p 128 -n 0 -r 10); pp2=$(cpu -m "$m" -p 128 -n 0 -r 210)
	tg1=$(cpu -m "$m" -p 0 -n 64 -r 10); tg2=$(cpu -m "$m" -p 0 -n 64 -r 210)
	awk -v m="$(basename "$m" .gguf)" -v a="$pp1" -v b="$pp2" -v c="$tg1" -v d="$tg2" \
		'BEGIN { printf "%-20s %12.0f %12.0f\n", m, 200*128/(b-a), 200*64/(d-c) }'
done
