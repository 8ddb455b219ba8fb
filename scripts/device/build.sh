#!/usr/bin/env bash
# Builds, on this machine, what scripts/device/run.sh needs on the GPU machine
# (which has no Go): the CUDA op tests and the model tests/benchmark as test
# binaries, and with WITH_CLI=1 also sluice-cuda and the small random HF
# model its end-to-end stage serves (mkmodel). The binaries are built in
# .build/device and carried gzipped in bin/device/, the one ignored path to
# carry (the carry limit is 64 MiB with the working tree; run.sh unpacks).
#
#   scripts/device/build.sh      then carry ["bin/device"] and run
#                                scripts/device/first.sh there (one window,
#                                a verdict), or run.sh (every stage)
#
# Then a pre-flight, so that nothing is found wrong only after the carry:
# the newest glibc symbol version the binaries need (the GPU machine's glibc
# must be at least that: GLIBC_MAX, default 2.35, Ubuntu 22.04's; the same
# for libstdc++'s GLIBCXX_ against GLIBCXX_MAX, default 3.4.30), libraries
# ldd cannot resolve here (libcuda.so.1 aside: the GPU machine's driver has
# it), and bin/device's total size against MAX_MIB (default 60).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=bin/device
build=.build/device
rm -rf "$out" "$build"
mkdir -p "$out" "$build"
export CGO_ENABLED=1
export CGO_LDFLAGS="${CGO_LDFLAGS:--L$PWD/.build/lib}"
[ -f .build/lib/libtokenizers.a ] || ./scripts/build-tokenizers.sh
strip=(-trimpath -ldflags "-s -w")
# sm_90 cubins of the PTX, embedded: an H100/H200 loads the kernels with no
# JIT (~1.2 MiB gzipped in each test binary)
./kernels/cuda/build-cubin.sh
go test -tags cuda -c "${strip[@]}" -o "$build/cuda-ops.test" ./kernels/cuda/
go test -tags cuda -c "${strip[@]}" -o "$build/cuda-model.test" ./kernels/cuda/modeltest/
# a real checkpoint's first 4 layers (~27 MiB) for first.sh's
# TestRealModelMatchesCPU; the model's own file (98 MB) is over the carry
if [ -f models/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
	go run ./scripts/device/cutmodel -layers "${LAYERS:-4}" models/SmolLM2-135M-Instruct.Q4_1.gguf "$out/real-model.gguf"
else
	echo "no models/SmolLM2-135M-Instruct.Q4_1.gguf (make model): no real-model check on the device" >&2
fi
if [ "${WITH_CLI:-0}" = 1 ]; then
	go build -tags cuda "${strip[@]}" -o "$build/sluice-cuda" ./cmd/sluice
	go run ./scripts/device/mkmodel "$out/e2e-model"
fi
ls -la "$build"

GLIBC_MAX=${GLIBC_MAX:-2.35}
GLIBCXX_MAX=${GLIBCXX_MAX:-3.4.30}
MAX_MIB=${MAX_MIB:-60}
bad=0
for f in "$build"/*; do
	[ -x "$f" ] && [ -f "$f" ] || continue
	need=$(objdump -T "$f" | { grep -o 'GLIBC_[0-9][0-9.]*' || true; } | sed 's/GLIBC_//' | sort -uV | tail -n 1)
	needxx=$(objdump -T "$f" | { grep -o 'GLIBCXX_[0-9][0-9.]*' || true; } | sed 's/GLIBCXX_//' | sort -uV | tail -n 1)
	if [ "$(printf '%s\n%s\n' "$need" "$GLIBC_MAX" | sort -V | tail -n 1)" != "$GLIBC_MAX" ]; then
		echo "pre-flight: $f needs GLIBC_$need, newer than GLIBC_$GLIBC_MAX" >&2
		bad=1
	fi
	if [ -n "$needxx" ] && [ "$(printf '%s\n%s\n' "$needxx" "$GLIBCXX_MAX" | sort -V | tail -n 1)" != "$GLIBCXX_MAX" ]; then
		echo "pre-flight: $f needs GLIBCXX_$needxx, newer than GLIBCXX_$GLIBCXX_MAX" >&2
		bad=1
	fi
	missing=$(ldd "$f" 2>&1 | grep 'not found' | grep -v 'libcuda\.so\.1' || true)
	if [ -n "$missing" ]; then
		echo "pre-flight: $f: libraries not found: $missing" >&2
		bad=1
	fi
	echo "pre-flight: $(basename "$f"): GLIBC_$need${needxx:+, GLIBCXX_$needxx} at most; needs $(ldd "$f" 2>/dev/null | awk '/=>/ {print $1}' | tr '\n' ' ')"
done
# xz where there is one: the test binaries shrink to ~10 MiB against gzip's
# ~18, which is what lets the 4-layer real model travel beside the tree.
for f in "$build"/*; do
	if command -v xz >/dev/null; then
		xz -9e -T0 -c "$f" >"$out/$(basename "$f").xz"
	else
		gzip -6 -c "$f" >"$out/$(basename "$f").gz"
	fi
done
ls -la "$out"
bytes=$(du -sb "$out" | cut -f1)
echo "pre-flight: $out is $((bytes >> 20)) MiB (limit $MAX_MIB)"
if [ "$bytes" -gt $((MAX_MIB << 20)) ]; then
	echo "pre-flight: $out is over $MAX_MIB MiB: build without WITH_CLI" >&2
	bad=1
fi
# The carry limit counts the whole working tree that travels with it (tracked
# files and untracked ones git does not ignore), not bin/device alone.
tree=$({ git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 -r stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
total=$((tree + bytes))
echo "pre-flight: the tree that travels is $((tree >> 20)) MiB, with $out $((total >> 20)) MiB (limit ${CARRY_MIB:=64})"
if [ "$total" -gt $((CARRY_MIB << 20)) ]; then
	echo "pre-flight: tree and $out together are over $CARRY_MIB MiB: cut fewer layers (LAYERS) or carry less" >&2
	bad=1
fi
exit $bad
