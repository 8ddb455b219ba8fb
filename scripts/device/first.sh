#!/usr/bin/env bash
# A GPU window's one command: the CUDA backend's first contact with a device,
# ending with a verdict however it goes. Build here (scripts/device/build.sh),
# carry bin/device, run from the repository root with a device timeout of
# BUDGET plus a margin:
#
#   scripts/device/first.sh          three files under $OUT (default ./device-out)
#
# What comes back is bounded because the device tool returns only a few files
# and the last 12 KB of output:
#   summary.md  rewritten before and after every stage: the stage table, what
#               each finished stage found, and as its last line the verdict
#               (INCOMPLETE naming the stage a killed run stopped in);
#   bench.md    the step benchmarks' tables;
#   logs.tgz    every stage's full log (goroutine dumps included), re-packed
#               after every stage.
# Stdout is one line per stage, then the summary.
#
# Stages, in the order a first run most needs them:
#   env        GPU, driver, Python, PyTorch, the binaries' libraries
#   cublas     the cuBLAS PyTorch loads (findcublas.py), or SLUICE_CUBLAS;
#              its path goes to the later stages as SLUICE_CUBLAS
#   jit        module loading: prebuilt sm_90 cubins (or the PTX JIT, and
#              why), then a second backend from the process's image cache
#   ops        every CUDA op vs the CPU backend
#   model      whole models vs the CPU backend: random SmolLM2-shaped,
#              batch invariance, graph replay, and the carried real checkpoint
#              (bin/device/real-model.gguf, cut by scripts/device/cutmodel)
#   diagnose   after a failed or hung ops/model stage only: the first failing
#              test alone with SLUICE_CUDA_TRACE=1, which prints every kernel
#              before launching it, so a fault or a hang names its kernel
#   bandwidth  device copy bandwidth (PyTorch): the decode floor's divisor
#   bench      8B-shaped BF16 decode at 1 and 256 sequences, plain and graphs,
#              with cuBLAS; benchmma the same 256 with SLUICE_CUBLAS=off
#
# Time: the whole run ends within BUDGET seconds (default 480). A stage's
# limit is its own (LIMIT_<stage> overrides it) cut so that every later stage
# keeps its minimum (MIN_<stage>); one that cannot get its minimum is skipped.
# A stage past its limit gets SIGQUIT, which makes a Go test binary print
# every goroutine's stack, and SIGKILL QUIT_GRACE seconds later.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/device-out}
BIN=${BIN:-bin/device}
BUDGET=${BUDGET:-480}
QUIT_GRACE=${QUIT_GRACE:-8}
FINISH=${FINISH:-4} # packing the logs and the last summary
PYTHON=${PYTHON:-python3}
export PATH="$PATH:/usr/local/cuda/bin" GOTRACEBACK=all
t0=$SECONDS
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-first.XXXXXX")
mkdir -p "$OUT"
rm -f "$OUT/summary.md" "$OUT/bench.md" "$OUT/logs.tgz"
# The driver's JIT cache starts empty, so that the jit stage's first backend
# is a cold compile; every later process of the run finds the cubins there.
export CUDA_CACHE_PATH=$WORK.jit CUDA_CACHE_MAXSIZE=4294967296
mkdir -p "$CUDA_CACHE_PATH"

ORDER=(env cublas jit ops model diagnose bandwidth bench benchmma)
declare -A LIMIT=([env]=15 [cublas]=25 [jit]=40 [ops]=100 [model]=80 [diagnose]=40 [bandwidth]=20 [bench]=150 [benchmma]=80)
declare -A MIN=([env]=5 [cublas]=5 [jit]=10 [ops]=20 [model]=20 [diagnose]=10 [bandwidth]=10 [bench]=40 [benchmma]=20)
declare -A STATUS TOOK
for s in "${ORDER[@]}"; do
	v=LIMIT_$s && [ -n "${!v:-}" ] && LIMIT[$s]=${!v}
	v=MIN_$s && [ -n "${!v:-}" ] && MIN[$s]=${!v}
	STATUS[$s]=pending
done
CURRENT=""

say() { echo "[+$((SECONDS - t0))s] $*" | tee -a "$WORK/first.log"; }

# the real checkpoint build.sh cut (scripts/device/cutmodel), for TestRealModelMatchesCPU
[ -f "$BIN/real-model.gguf" ] && SLUICE_REAL_MODEL=$(cd "$BIN" && pwd)/real-model.gguf && export SLUICE_REAL_MODEL
# build.sh carries the binaries compressed: unpack them.
if compgen -G "$BIN/*.gz" >/dev/null || compgen -G "$BIN/*.xz" >/dev/null; then
	unpacked=$WORK.bin
	PYTHON=$PYTHON scripts/device/unpack.sh "$BIN" "$unpacked"
	BIN=$unpacked
fi

# the summary and the verdict
# shellcheck source=scripts/device/firstlib.sh
. scripts/device/firstlib.sh

finish() {
	CURRENT=""
	write_summary
	pack_logs
}
# The device tool's own limit (or anyone's TERM) still leaves a summary that
# says where the run stopped.
trap 'say "stopped by a signal during ${CURRENT:-no stage}"; STATUS[${CURRENT:-env}]="stopped by a signal"; write_summary; pack_logs; exit 143' TERM INT

# reserve NAME: the seconds the stages after NAME must keep: each its
# minimum and the grace a stuck one takes after it.
reserve() {
	local s after=0 r=0
	for s in "${ORDER[@]}"; do
		[ "$after" = 1 ] && [ "${STATUS[$s]}" = pending ] && r=$((r + MIN[$s] + QUIT_GRACE))
		[ "$s" = "$1" ] && after=1
	done
	echo "$r"
}

# stage NAME CMD...: CMD with its output in $WORK/NAME.log, under its limit;
# the summary is rewritten as it starts and when it ends.
stage() {
	local name=$1 rc start limit avail
	shift
	avail=$((BUDGET - (SECONDS - t0) - FINISH - QUIT_GRACE - $(reserve "$name")))
	limit=${LIMIT[$name]}
	[ "$limit" -gt "$avail" ] && limit=$avail
	if [ "$limit" -lt "${MIN[$name]}" ]; then
		STATUS[$name]="skipped (${avail}s of the budget left)"
		say "$name: skipped, ${avail}s left"
		write_summary
		return 0
	fi
	CURRENT=$name
	STATUS[$name]="running (limit ${limit}s)"
	write_summary
	start=$SECONDS
	# in a subshell of its own, whose stderr takes the shell's "Killed" notice
	(
		timeout --signal=QUIT --kill-after="$QUIT_GRACE" "$limit" "$@" >"$WORK/$name.log" 2>&1
		exit $?
	) 2>/dev/null
	rc=$?
	TOOK[$name]=$((SECONDS - start))
	case $rc in
	0) STATUS[$name]=ok ;;
	124) STATUS[$name]="TIMEOUT after ${limit}s (SIGQUIT: goroutine dump in logs.tgz)" ;;
	137) STATUS[$name]="TIMEOUT after ${limit}s (no exit on SIGQUIT: killed)" ;;
	*) STATUS[$name]="FAIL (exit $rc)" ;;
	esac
	CURRENT=""
	excerpt "$name" >"$WORK/$name.note" 2>/dev/null
	say "$name: ${STATUS[$name]} in ${TOOK[$name]}s"
	write_summary
	pack_logs
	return $rc
}

write_summary
say "budget ${BUDGET}s, logs in $WORK, JIT cache $CUDA_CACHE_PATH"

stage env bash -c '
	echo "GPU: $(nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader 2>&1 | head -n 1)"
	echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -n 1); CUDA $(nvidia-smi 2>/dev/null | sed -n "s/.*CUDA Version: *\([0-9.]*\).*/\1/p" | head -n 1)"
	echo "python: $('"$PYTHON"' --version 2>&1)"
	echo "torch: $('"$PYTHON"' -c "import torch; print(torch.__version__, \"cuda\", torch.version.cuda)" 2>&1 | tail -n 1)"
	echo "glibc: $(ldd --version 2>&1 | head -n 1)"
	for f in '"$BIN"'/*.test '"$BIN"'/sluice*; do
		[ -x "$f" ] || continue
		missing=$(ldd "$f" 2>&1 | grep "not found")
		echo "ldd $(basename "$f"): ${missing:-all libraries found}"
	done
	nvidia-smi 2>&1 | head -n 30'

stage cublas "$PYTHON" scripts/device/findcublas.py --env "$WORK/cublas.env"
# shellcheck disable=SC1091
[ -f "$WORK/cublas.env" ] && . "$WORK/cublas.env" && export SLUICE_CUBLAS

# TestJITTime loads the modules twice in each process: the first backend
# from the prebuilt sm_90 cubins (or the PTX's JIT, saying why), the second
# from the process's image cache.
stage jit bash -c '"$0"/cuda-ops.test -test.v -test.count=1 -test.run "^TestJITTime\$" -test.timeout 60s &&
	"$0"/cuda-ops.test -test.v -test.count=1 -test.run "^TestJITTime\$" -test.timeout 60s' "$BIN"
stage ops "$BIN/cuda-ops.test" -test.v -test.count=1 -test.timeout 10m
stage model "$BIN/cuda-model.test" -test.v -test.count=1 -test.timeout 10m \
	-test.run 'TestForwardMatchesCPU|TestBatchInvariance|TestGraphsReplay|TestRealModelMatchesCPU'

# diagnose: the first failing (or hung) test of ops, else of model, alone,
# every launch traced and waited for.
for s in ops model; do
	[[ ${STATUS[$s]} == ok || ${STATUS[$s]} == pending || ${STATUS[$s]} == skipped* ]] && continue
	t=$(first_bad "$WORK/$s.log")
	[ -n "$t" ] || t=.
	bin=$BIN/cuda-ops.test
	[ "$s" = model ] && bin=$BIN/cuda-model.test
	echo "$s $t" >"$WORK/diagnose.what"
	SLUICE_CUDA_SYNC=1 SLUICE_CUDA_TRACE=1 stage diagnose "$bin" -test.v -test.count=1 -test.run "^$t\$" -test.timeout 10m
	break
done
[ "${STATUS[diagnose]}" = pending ] && STATUS[diagnose]="not needed"

stage bandwidth "$PYTHON" - <<'PY'
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

# bench NAME BATCHES: the step benchmark, its table to $WORK/NAME.md.
bench() {
	local bw
	bw=$(sed -n 's/.*copy bandwidth (read+write): \([0-9]*\) GB\/s.*/\1/p' "$WORK/bandwidth.log" 2>/dev/null | head -n 1)
	SLUICE_CUDA_BENCH=1 SLUICE_CUDA_BENCH_BW=$bw SLUICE_CUDA_BENCH_OUT="$WORK/$1.md" SLUICE_CUDA_BENCH_DTYPE=BF16 \
		SLUICE_CUDA_BENCH_BATCHES=$2 SLUICE_CUDA_BENCH_PROMPT=${BENCH_PROMPT:-128} \
		stage "$1" "$BIN/cuda-model.test" -test.v -test.count=1 -test.run '^TestDecodeThroughput$' -test.timeout 10m
	write_bench
}
bench bench 1,256
SLUICE_CUBLAS=off bench benchmma 256

finish
say "done in $((SECONDS - t0))s"
# the device tool returns the last 12 KB of output: the summary's head and
# its verdict fit, whatever the stages printed
if [ "$(wc -c <"$OUT/summary.md")" -gt 9000 ]; then
	head -c 7000 "$OUT/summary.md"
	printf '\n… (cut here; summary.md has the rest)\n'
	tail -n 1 "$OUT/summary.md"
else
	cat "$OUT/summary.md"
fi
case $(tail -n 1 "$OUT/summary.md") in *PASS*) exit 0 ;; *) exit 1 ;; esac
