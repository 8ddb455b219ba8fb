#!/usr/bin/env bash
# Every serving benchmark of BENCHMARKS.md in one run, one server at a time on
# loopback, each step bounded in time: the sweep (Sluice vs llama-server), the
# abandoned-request study, nginx in front of Sluice, 1,000 held streams; then
# the charts. Builds what it needs first (bin/sluice, llama-server).
# Sizes come from the environment (see each script); THREADS defaults to 2.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
make -s build model
scripts/llamacpp/build.sh
export OUT=${OUT:-docs/bench}
mkdir -p "$OUT"
for step in ${STEPS:-sweep abandon nginx streams}; do
	echo "=== $step"
	"scripts/bench/$step.sh" 2>&1 | tee "$OUT/$step.txt"
done
scripts/bench/plots.sh
