#!/usr/bin/env bash
# The GPU machine's one script (H200, driver 580, CUDA 13, PyTorch + CuPy, no
# Go, no network). Prepare on the build machine with scripts/device/build.sh,
# carry bin/device, run from the repository root:
#
#   scripts/device/run.sh            results under $OUT (default ./device-out)
#
# Stages, each under its own time limit, the optional ones skipped once the
# run passes SOFT_DEADLINE seconds (default 420) so that it ends well inside
# 10 minutes:
#   env         nvidia-smi, toolkit and Python versions
#   bandwidth   device copy bandwidth (PyTorch), the decode floor's divisor
#   kernels     every kernel vs NumPy references (CuPy loads the embedded sm_80 PTX)
#   ops         Go op tests: each CUDA op vs the CPU backend (random inputs)
#   model       CUDA vs CPU forward on a random SmolLM2-shaped model, batch invariance
#   bench       decode of a random Llama-3-8B-shaped BF16 model, batch 1..256
#   sm90        (optional) the same .cu built here by nvcc 13 for sm_90: kernel checks and
#               Go op tests again on that PTX (SLUICE_CUDA_PTX_DIR)
# and writes $OUT/summary.md: the tables for BENCHMARKS.md, with the date.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/device-out}
BIN=${BIN:-bin/device}
SOFT_DEADLINE=${SOFT_DEADLINE:-420}
export PATH="$PATH:/usr/local/cuda/bin"
mkdir -p "$OUT"
t0=$(date +%s)
: >"$OUT/stages.md"
failed=0

log() { echo "[$(date -u +%T) +$(($(date +%s) - t0))s] $*" | tee -a "$OUT/run.log"; }

# stage NAME LIMIT CMD...: runs CMD with output in $OUT/NAME.log.
stage() {
	local name=$1 limit=$2 start rc
	shift 2
	log "== $name (limit ${limit}s)"
	start=$(date +%s)
	timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
	rc=$?
	tail -n 25 "$OUT/$name.log" | sed 's/^/    /'
	local verdict=ok
	[ $rc -eq 0 ] || { verdict="FAIL (exit $rc)"; failed=1; }
	[ $rc -eq 124 ] && verdict="TIMEOUT after ${limit}s"
	echo "| $name | $verdict | $(($(date +%s) - start)) s |" >>"$OUT/stages.md"
	log "   $name: $verdict"
	return $rc
}

late() { [ $(($(date +%s) - t0)) -gt "$SOFT_DEADLINE" ]; }

stage env 30 bash -c 'nvidia-smi; nvcc --version; python3 -c "import torch, cupy; print(\"torch\", torch.__version__, \"cupy\", cupy.__version__)"; ls -la '"$BIN"
stage bandwidth 60 python3 - <<'PY'
import time, torch
n = 4 << 30
a = torch.empty(n, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(20): b.copy_(a)
torch.cuda.synchronize(); dt = (time.perf_counter() - t) / 20
print(f"copy bandwidth (read+write): {2 * n / dt / 1e9:.0f} GB/s")
PY
bw=$(grep -o '[0-9]* GB/s' "$OUT/bandwidth.log" | head -1 | cut -d' ' -f1)

stage kernels 120 python3 scripts/device/check_kernels.py kernels/cuda/ptx --out "$OUT/kernels-sm80.md"
stage ops 240 "$BIN/cuda-ops.test" -test.v -test.count=1 -test.timeout 230s
stage model 240 "$BIN/cuda-model.test" -test.v -test.count=1 -test.run 'TestForwardMatchesCPU|TestBatchInvariance' -test.timeout 230s
SLUICE_CUDA_BENCH=1 SLUICE_CUDA_BENCH_OUT="$OUT/bench.md" SLUICE_CUDA_BENCH_BATCHES=${BATCHES:-1,16,64,256} \
	stage bench 300 "$BIN/cuda-model.test" -test.v -test.count=1 -test.run TestDecodeThroughput -test.timeout 290s
if late; then
	log "past ${SOFT_DEADLINE}s: skipping the sm_90 rebuild"
	echo "| sm90 | skipped (time) | |" >>"$OUT/stages.md"
elif command -v nvcc >/dev/null; then
	stage sm90 200 bash -c "kernels/cuda/build-ptx.sh '$OUT/ptx-sm90' sm_90 &&
		python3 scripts/device/check_kernels.py '$OUT/ptx-sm90' --out '$OUT/kernels-sm90.md' &&
		SLUICE_CUDA_PTX_DIR='$OUT/ptx-sm90' '$BIN/cuda-ops.test' -test.count=1 -test.timeout 120s"
fi

{
	echo "# Sluice CUDA backend on the device — $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null)"
	echo "Copy bandwidth (PyTorch, read+write): ${bw:-?} GB/s"
	if [ -n "${bw:-}" ]; then
		# weight bytes per decode token of the 8B shape (bench_test.go's count), 85% target
		python3 -c "w=2*(32*(4096*(4096+2*1024)+4096*4096+3*4096*14336)+128256*4096+4096); b=$bw*1e9; print(f'Batch-1 floor: {w/1e9:.2f} GB per token / {b/1e12:.2f} TB/s = {b/w:.0f} tokens/s; 85% target = {0.85*b/w:.0f} tokens/s')"
	fi
	echo
	echo "| stage | result | time |"
	echo "|---|---|---:|"
	cat "$OUT/stages.md"
	echo
	[ -f "$OUT/bench.md" ] && cat "$OUT/bench.md" && echo
	[ -f "$OUT/kernels-sm80.md" ] && echo "Kernel checks (embedded sm_80 PTX, JIT by the driver):" && echo && cat "$OUT/kernels-sm80.md" && echo
	[ -f "$OUT/kernels-sm90.md" ] && echo "Kernel checks (sm_90 PTX from the device's nvcc):" && echo && cat "$OUT/kernels-sm90.md"
	echo
	echo "Model comparison:"
	grep -E "greedy agreement|^(--- |ok|FAIL|PASS)" "$OUT/model.log" 2>/dev/null | sed 's/^/    /'
} >"$OUT/summary.md"
log "done in $(($(date +%s) - t0)) s; summary in $OUT/summary.md"
cat "$OUT/summary.md"
exit $failed
