#!/usr/bin/env bash
# Gemma 3 270M (Q4_K_M), one stream: Sluice's BenchmarkGemma3 against
# llama-bench -p 128 -n 64 on the same file at 1 and 2 threads, in
# alternating rounds, with the ratios issue 15 asks for: Sluice ≥ 1.2× on
# decode (tg64) and ≥ 1.5× on prompt processing (pp128). The peer is the
# newest llama.cpp this project reaches (v0.5.0, scripts/llamacpp/build-newest.sh,
# built for this CPU); PEER=reference compares with build.sh's 0c1e57098
# instead. Run it on a quiet machine: the header line records the load.
#
#   scripts/bench/gemma.sh [ROUNDS] [--reps N]   (defaults 5 rounds, 3 reps)
#
# Arguments go to scripts/bench/cpu_speed.py; exits 1 when a target is missed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
./scripts/fetch-model.sh gemma3
case ${PEER:-newest} in
newest)
	./scripts/llamacpp/build-newest.sh
	LLAMA_BENCH=.build/llamacpp-newest/build/bin/llama-bench
	;;
reference)
	./scripts/llamacpp/build.sh
	LLAMA_BENCH=.build/llamacpp/build/bin/llama-bench
	;;
*)
	echo "PEER=$PEER: want newest or reference" >&2
	exit 2
	;;
esac
if [[ $# -eq 0 || $1 == -* ]]; then
	set -- 5 "$@"
fi
exec python3 scripts/bench/cpu_speed.py --model models/gemma-3-270m-q4_k_m.gguf \
	--llama-bench "$LLAMA_BENCH" --target tg64=1.2 --target pp128=1.5 "$@"
