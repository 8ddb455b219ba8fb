#!/usr/bin/env bash
# llama.cpp's own speed on the default model, the figure Sluice is measured
# against in BENCHMARKS.md: prompt processing (pp128) and decode (tg64)
# tokens/s for 1 and 2 threads. Builds llama.cpp first (cached).
# Extra arguments go to llama-bench (e.g. -o md, -o json).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
"$ROOT/scripts/llamacpp/build.sh"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
set -x
exec .build/llamacpp/build/bin/llama-bench -m "$MODEL" -t 1,2 -p 128 -n 64 -r 3 "$@"
