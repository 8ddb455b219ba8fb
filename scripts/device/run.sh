#!/usr/bin/env bash
# The GPU machine's one script (H200, driver 580, CUDA 13, PyTorch, maybe
# CuPy; no Go, no network). Prepare on the build machine with
# scripts/device/build.sh, carry bin/device, run from the repository root:
#
#   scripts/device/run.sh            results under $OUT (default ./device-out)
#
# The whole run ends within BUDGET seconds (default 540, under the device
# command's 600): each stage's limit is cut to what is left, and a stage with
# under MIN_STAGE seconds left is skipped. Stages run in order of what a
# first run most needs to show:
#   env         nvidia-smi, Python front ends, the binaries' libraries (ldd)
#   bandwidth   device copy bandwidth (PyTorch), the decode floor's divisor
#   ops         Go op tests: each CUDA op vs the CPU backend (random inputs)
#   model       CUDA vs CPU forward on a random SmolLM2-shaped model, batch invariance,
#               CUDA graphs replaying decode steps bit for bit
#   bench1      batch-1 decode of a random Llama-3-8B-shaped BF16 model, without and with graphs
#   diagnose    only after a failed ops/model stage: the failing tests again with
#               SLUICE_CUDA_SYNC=1, which names the kernel that faulted and its arguments
#   kernels     every kernel vs NumPy references, the PTX loaded by CuPy or, without
#               CuPy, by PyTorch + the driver API (torchcupy.py)
#   e2e         (build.sh WITH_CLI=1) sluice-cuda serve on a small random HF Llama:
#               sluice bench streaming over SSE, the abandon scenario's reclaim latency,
#               then sampling on the device against SLUICE_DEVICE_SAMPLE=0 (host)
#   sanitizer   compute-sanitizer memcheck, then racecheck, over a few op tests
#   benchq      batch-1 decode of the same shape with Q8_0 weights
#   benchN      the step bench: BF16 prefill and decode at 1, 16, 64, 256 sequences
#               (BENCH_PROMPT-token prompts, default 1000) with cuBLAS (the
#               PyTorch wheel's, SLUICE_CUBLAS), then benchNmma the same with
#               SLUICE_CUBLAS=off (our skinny and mma kernels): the two GEMM paths
#               side by side, each table headed by the path it ran; tokens sampled
#               on the device (ids read back), and benchNhost at 64 and 256 with
#               SLUICE_DEVICE_SAMPLE=0 (every logits row read back, sampled on the host)
#   sm90        the same .cu built here by nvcc for sm_90: kernel checks and op tests on it
# $OUT/summary.md gets a section after every stage, so a run cut short (or a
# stage that hangs) still leaves everything before it; the stage table comes last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/device-out}
BIN=${BIN:-bin/device}
# build.sh carries the binaries compressed: unpack them beside the model.
if compgen -G "$BIN/*.gz" >/dev/null || compgen -G "$BIN/*.xz" >/dev/null; then
	unpacked=${TMPDIR:-/tmp}/sluice-device-bin
	rm -rf "$unpacked"
	scripts/device/unpack.sh "$BIN" "$unpacked"
	[ -d "$BIN/e2e-model" ] && ln -s "$PWD/$BIN/e2e-model" "$unpacked/e2e-model"
	BIN=$unpacked
fi
BUDGET=${BUDGET:-540}
MIN_STAGE=${MIN_STAGE:-15}
export PATH="$PATH:/usr/local/cuda/bin"
# One JIT cache for every process of the run: the first Backend compiles the
# embedded PTX (~2 MB), every later test process loads the cached cubins.
export CUDA_CACHE_PATH=${CUDA_CACHE_PATH:-${TMPDIR:-/tmp}/sluice-cuda-cache} CUDA_CACHE_MAXSIZE=${CUDA_CACHE_MAXSIZE:-4294967296}
mkdir -p "$OUT" "$CUDA_CACHE_PATH"
t0=$(date +%s)
: >"$OUT/stages.md"
: >"$OUT/run.log"
failed=0
declare -A result

log() { echo "[$(date -u +%T) +$(($(date +%s) - t0))s] $*" | tee -a "$OUT/run.log"; }
left() { echo $((BUDGET - ($(date +%s) - t0))); }

# excerpt NAME: what the summary keeps of a stage's log.
excerpt() {
	local f="$OUT/$1.log"
	case $1 in
	env) grep -E '^(GPU|driver|python|torch|cupy|compute-sanitizer|nvcc|ldd)' "$f" ;;
	bandwidth) grep -E 'GB/s|floor' "$f" ;;
	bench*) cat "$OUT/$1.md" 2>/dev/null || tail -n 15 "$f" ;;
	kernels) cat "$OUT/kernels.md" 2>/dev/null || tail -n 15 "$f" ;;
	sanitizer) grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^== (memcheck|racecheck)|Invalid|Race|hazard' "$f" | head -n 30 ;;
	diagnose) grep -E 'kernel|launch|FAIL|panic' "$f" | head -n 30 ;;
	e2e) grep -E '^(==|reclaim|server did not)|^ *(run|c=[0-9]|abandon)|KV reclaim|KV usage|rror' "$f" | head -n 40 ;;
	*) # every test's verdict, and what a failing one printed before its verdict
		grep -E '^\s*--- (PASS|FAIL)|^(FAIL|ok|PASS)|greedy agreement|panic:' "$f" | head -n 40
		grep -E -B 8 '^\s*--- FAIL' "$f" | grep -vE '^\s*(=== RUN|--- PASS)' | head -n 60 ;;
	esac
}

# stage NAME LIMIT CMD...: runs CMD with output in $OUT/NAME.log, under
# min(LIMIT, what is left of the budget), then appends its section to the summary.
stage() {
	local name=$1 limit=$2 start rc verdict
	shift 2
	local avail=$(($(left) - 10))
	if [ "$avail" -lt "$MIN_STAGE" ]; then
		log "== $name skipped: ${avail}s left of the ${BUDGET}s budget"
		result[$name]=skipped
		echo "| $name | skipped (time) | |" >>"$OUT/stages.md"
		printf '\n## %s: skipped (time)\n' "$name" >>"$OUT/summary.md"
		return 0
	fi
	[ "$limit" -gt "$avail" ] && limit=$avail
	log "== $name (limit ${limit}s)"
	start=$(date +%s)
	timeout --kill-after=5 "$limit" "$@" >"$OUT/$name.log" 2>&1
	rc=$?
	tail -n 25 "$OUT/$name.log" | sed 's/^/    /'
	verdict=ok
	[ $rc -eq 0 ] || { verdict="FAIL (exit $rc)"; failed=1; }
	[ $rc -eq 124 ] || [ $rc -eq 137 ] && verdict="TIMEOUT after ${limit}s"
	result[$name]=$verdict
	local took=$(($(date +%s) - start))
	echo "| $name | $verdict | $took s |" >>"$OUT/stages.md"
	{
		printf '\n## %s: %s (%d s)\n\n' "$name" "$verdict" "$took"
		excerpt "$name" | sed 's/^/    /'
		# a failure the excerpt does not explain: the log's end says more
		if [ $rc -ne 0 ] && [ -z "$(excerpt "$name" | grep -E 'FAIL|rror|panic|kernel' | head -n 1)" ]; then
			echo "    … last lines of $name.log:"
			tail -n 12 "$OUT/$name.log" | sed 's/^/    /'
		fi
	} >>"$OUT/summary.md"
	log "   $name: $verdict"
	return $rc
}

{
	echo "# Sluice CUDA backend on the device — $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo '? (nvidia-smi failed)')"
	echo "Budget ${BUDGET}s; JIT cache $CUDA_CACHE_PATH (max $CUDA_CACHE_MAXSIZE bytes)"
} >"$OUT/summary.md"

stage env 20 bash -c '
	echo "GPU: $(nvidia-smi --query-gpu=name,memory.total,clocks.max.memory,driver_version --format=csv,noheader)"
	nvidia-smi
	echo "nvcc: $(nvcc --version 2>/dev/null | tail -n 1 || echo none)"
	echo "compute-sanitizer: $(command -v compute-sanitizer || echo none)"
	echo "python: $(python3 --version 2>&1)"
	python3 -c "import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, torch.cuda.get_device_name(0))" 2>&1 | sed "s/^/torch: /"
	python3 -c "import cupy; print(\"cupy\", cupy.__version__)" 2>&1 | tail -n 1 | sed "s/^/cupy: /"
	for f in '"$BIN"'/*; do
		[ -f "$f" ] && [ -x "$f" ] || continue
		missing=$(ldd "$f" 2>&1 | grep "not found")
		echo "ldd $(basename "$f"): ${missing:-all libraries found}"
	done
	ls -la '"$BIN"
stage bandwidth 40 python3 - <<'PY'
import time, torch
n = 4 << 30
a = torch.empty(n, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(20): b.copy_(a)
torch.cuda.synchronize(); dt = (time.perf_counter() - t) / 20
bw = 2 * n / dt
print(f"copy bandwidth (read+write): {bw / 1e9:.0f} GB/s")
# weight bytes per decode token of the 8B BF16 shape (bench_test.go's count)
w = 2 * (32 * (4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336) + 128256 * 4096 + 4096)
print(f"batch-1 floor: {w / 1e9:.2f} GB per token / {bw / 1e12:.2f} TB/s = {bw / w:.0f} tokens/s; 90% = {0.9 * bw / w:.0f} tokens/s")
PY

stage ops 150 "$BIN/cuda-ops.test" -test.v -test.count=1 -test.timeout 145s
stage model 120 "$BIN/cuda-model.test" -test.v -test.count=1 -test.run 'TestForwardMatchesCPU|TestBatchInvariance|TestGraphsReplay' -test.timeout 115s
# cuBLAS for the backend: the one PyTorch loads (findcublas.py: /proc/self/maps
# after a GEMM, else the CUDA 13 wheel's nvidia/cu13/lib, the CUDA 12 wheel's
# nvidia/cublas/lib, LD_LIBRARY_PATH, ldconfig); SLUICE_CUBLAS set wins.
if python3 scripts/device/findcublas.py --env "$OUT/cublas.env" >"$OUT/cublas.log" 2>&1; then
	# shellcheck disable=SC1091
	. "$OUT/cublas.env" && export SLUICE_CUBLAS
fi
grep '^cublas' "$OUT/cublas.log" | sed 's/^/    /' >>"$OUT/summary.md"
log "SLUICE_CUBLAS=${SLUICE_CUBLAS:-unset: libcublas.so.13 or .12 on the loader path, if any}"
bench() { # bench NAME DTYPE BATCHES LIMIT [PROMPT]
	local bw
	bw=$(sed -n 's/.*copy bandwidth (read+write): \([0-9]*\) GB\/s.*/\1/p' "$OUT/bandwidth.log" 2>/dev/null | head -n 1)
	SLUICE_CUDA_BENCH_BW=$bw SLUICE_CUDA_BENCH=1 SLUICE_CUDA_BENCH_OUT="$OUT/$1.md" SLUICE_CUDA_BENCH_DTYPE=$2 SLUICE_CUDA_BENCH_BATCHES=$3 \
		SLUICE_CUDA_BENCH_PROMPT=${5:-128} \
		stage "$1" "$4" "$BIN/cuda-model.test" -test.v -test.count=1 -test.run TestDecodeThroughput -test.timeout "$4s"
}
bench bench1 BF16 1 150

if [[ ${result[ops]} == FAIL* || ${result[model]} == FAIL* ]]; then
	stage diagnose 60 bash -c "
		export SLUICE_CUDA_SYNC=1
		[[ '${result[ops]}' == FAIL* ]] && '$BIN/cuda-ops.test' -test.count=1 -test.failfast -test.timeout 25s
		[[ '${result[model]}' == FAIL* ]] && '$BIN/cuda-model.test' -test.count=1 -test.failfast -test.run 'TestForwardMatchesCPU|TestBatchInvariance' -test.timeout 25s
		true"
fi

stage kernels 60 python3 scripts/device/check_kernels.py kernels/cuda/ptx --out "$OUT/kernels.md"
if [ -x "$BIN/sluice-cuda" ] && [ -d "$BIN/e2e-model" ]; then
	stage e2e 95 bash scripts/device/e2e.sh "$BIN" "$OUT"
fi
if command -v compute-sanitizer >/dev/null; then
	stage sanitizer 70 bash -c "
		echo '== memcheck'
		compute-sanitizer --tool memcheck --error-exitcode 3 '$BIN/cuda-ops.test' -test.count=1 -test.run 'TestRMSNorm|TestRoPE|TestSwiGLUAdd|TestFusion|TestAttention' -test.timeout 40s || exit
		echo '== racecheck'
		compute-sanitizer --tool racecheck --error-exitcode 3 '$BIN/cuda-ops.test' -test.count=1 -test.run 'TestRMSNorm|TestAttention|TestSample' -test.timeout 25s"
fi
bench benchq Q8_0 1 90
bench benchN BF16 1,16,64,256 150 "${BENCH_PROMPT:-1000}"
SLUICE_CUBLAS=off bench benchNmma BF16 1,16,64,256 150 "${BENCH_PROMPT:-1000}"
# the step bench's tokens are sampled on the device; this reads every logits row back instead
SLUICE_DEVICE_SAMPLE=0 bench benchNhost BF16 64,256 120 "${BENCH_PROMPT:-1000}"
if command -v nvcc >/dev/null; then
	stage sm90 90 bash -c "kernels/cuda/build-ptx.sh '$OUT/ptx-sm90' sm_90 &&
		python3 scripts/device/check_kernels.py '$OUT/ptx-sm90' --quick --out '$OUT/kernels-sm90.md' &&
		SLUICE_CUDA_PTX_DIR='$OUT/ptx-sm90' '$BIN/cuda-ops.test' -test.count=1 -test.timeout 60s"
fi

{
	echo
	echo "## Stages"
	echo
	echo "| stage | result | time |"
	echo "|---|---|---:|"
	cat "$OUT/stages.md"
} >>"$OUT/summary.md"
log "done in $(($(date +%s) - t0)) s; summary in $OUT/summary.md"
cat "$OUT/summary.md"
exit $failed
