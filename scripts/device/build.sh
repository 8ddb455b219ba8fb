#!/usr/bin/env bash
# Builds, on this machine, what scripts/device/run.sh needs on the GPU machine
# (which has no Go): the CUDA op tests and the model tests/benchmark as test
# binaries (~27 MB), and with WITH_CLI=1 also bin/device/sluice-cuda (~32 MB).
# Everything lands in bin/device/, the one ignored path to carry (the carry
# limit is 64 MiB with the working tree: binaries are stripped).
#
#   scripts/device/build.sh      then carry ["bin/device"] and run
#                                scripts/device/run.sh there
set -euo pipefail
cd "$(dirname "$0")/../.."
out=bin/device
mkdir -p "$out"
export CGO_ENABLED=1
export CGO_LDFLAGS="${CGO_LDFLAGS:--L$PWD/.build/lib}"
[ -f .build/lib/libtokenizers.a ] || ./scripts/build-tokenizers.sh
strip=(-ldflags "-s -w")
go test -tags cuda -c "${strip[@]}" -o "$out/cuda-ops.test" ./kernels/cuda/
go test -tags cuda -c "${strip[@]}" -o "$out/cuda-model.test" ./kernels/cuda/modeltest/
rm -f "$out/sluice-cuda"
if [ "${WITH_CLI:-0}" = 1 ]; then
	go build -tags cuda "${strip[@]}" -o "$out/sluice-cuda" ./cmd/sluice
fi
du -sh "$out"
ls -la "$out"
