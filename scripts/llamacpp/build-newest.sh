#!/usr/bin/env bash
# Builds the newest llama.cpp this project can reach, v0.5.0, as the speed
# peer for BENCHMARKS.md (scripts/bench/gemma.sh). build.sh's llama.cpp
# (0c1e57098, from llama-cpp-python 0.3.36) stays the golden-data reference:
# its numbers are the committed ones. The v0.5.0 tree comes as a git bundle
# inside the npm package node-llama-cpp@3.22.1 (its llama.cpp.info.json names
# the release); npm is the only registry that ships it.
#
# Output (git-ignored): .build/llamacpp-newest/build/bin/{llama-bench,llama-server}
#
# "build-newest.sh golden" builds only libllama and links
# scripts/llamacpp/tiny_logits.cpp against it: .build/llamacpp-newest/tiny-logits,
# which prints every position's logits for a GGUF and a token list (the
# tiny-model goldens of the architectures only v0.5.0 knows, `make
# golden-tiny-newest`). llama-cpp-python's ctypes bindings (0.3.36) do not
# match v0.5.0's C structs, so the golden tool is C++ against llama.h.
# Cached: a second run is a no-op. Environment knobs:
#   JOBS (default 1)  parallel compile jobs; 1 keeps the shared 2-core dev
#                     machines usable while it builds (~25 min).
#   ISA (default native) native: -march=native without AMX (ggml's AMX matmul
#                     segfaults on the sandboxed AMX_INT8 machines, see
#                     build.sh); avx2: the same flags as build.sh's default.
# The compile runs under nice -n 19 for the same reason as JOBS.
set -euo pipefail

NPM_PKG=node-llama-cpp@3.22.1
WANT_TAG=v0.5.0

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/.build/llamacpp-newest
SRC=$B/src
BUILD=$B/build
JOBS=${JOBS:-1}
ISA=${ISA:-native}
case $ISA in
# GGML_AMX_*=OFF alone does not keep AMX out: -march=native defines
# __AMX_INT8__ on these CPUs and ggml compiles its AMX path from that macro;
# GCC's explicit -mno-amx-* win over what -march implies.
native) NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
	ISA_FLAGS=(-DGGML_NATIVE=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
		"-DCMAKE_C_FLAGS=$NO_AMX" "-DCMAKE_CXX_FLAGS=$NO_AMX") ;;
avx2) ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON) ;;
*) echo "ISA=$ISA: want native or avx2" >&2; exit 2 ;;
esac
STAMP=$B/.built-$WANT_TAG-$ISA
MODE=${1:-all}
TOOL=$B/tiny-logits
TOOL_SRC=$ROOT/scripts/llamacpp/tiny_logits.cpp
if [[ $MODE == golden && -x $TOOL && $TOOL -nt $TOOL_SRC ]]; then
	exit 0
fi
if [[ $MODE == all && -f $STAMP && -x $BUILD/bin/llama-bench && -x $BUILD/bin/llama-server ]]; then
	echo "llama.cpp $WANT_TAG already built: $BUILD/bin" >&2
	exit 0
fi
# A build configured with other flags is not reused.
if [[ -d $BUILD && ! -f $BUILD/.isa-$ISA-2 ]]; then
	rm -rf "$BUILD"
fi

mkdir -p "$B/npm"
BUNDLE=$B/npm/node_modules/node-llama-cpp/llama/gitRelease.bundle
INFO=$B/npm/node_modules/node-llama-cpp/llama/llama.cpp.info.json
if [[ ! -f $BUNDLE ]]; then
	# --ignore-scripts: the postinstall would download or build its own
	# binaries; only the bundled source is wanted.
	(cd "$B/npm" && npm init -y >/dev/null && npm i -E --ignore-scripts --no-audit --no-fund "$NPM_PKG")
fi
if ! grep -q "\"$WANT_TAG\"" "$INFO"; then
	echo "$INFO does not name $WANT_TAG:" >&2
	cat "$INFO" >&2
	exit 1
fi
if [[ ! -d $SRC/.git ]]; then
	rm -rf "$SRC"
	git clone --quiet "$BUNDLE" "$SRC"
fi
echo "llama.cpp $(git -C "$SRC" describe --tags --always 2>/dev/null || git -C "$SRC" rev-parse --short HEAD) from $NPM_PKG" >&2

CMAKE_CMD=(cmake -S "$SRC" -B "$BUILD"
	-DCMAKE_BUILD_TYPE=Release
	"${ISA_FLAGS[@]}"
	-DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=ON
	-DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF
	-DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF)
echo "+ ${CMAKE_CMD[*]}" >&2
"${CMAKE_CMD[@]}" >"$B/cmake-configure.log"
touch "$BUILD/.isa-$ISA-2"
if [[ $MODE == golden ]]; then
	echo "+ nice -n 19 cmake --build $BUILD -j$JOBS --target llama" >&2
	nice -n 19 cmake --build "$BUILD" --config Release -j"$JOBS" --target llama
	# v0.5.0 builds libllama and libggml* as shared libraries (in bin/);
	# the tool finds them there through its rpath.
	echo "+ c++ tiny_logits.cpp -lllama" >&2
	c++ -O2 -std=c++17 -I"$SRC/include" -I"$SRC/ggml/include" "$TOOL_SRC" \
		-L"$BUILD/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$BUILD/bin" -o "$TOOL"
	echo "built $TOOL" >&2
	exit 0
fi
for t in llama-bench llama-server; do
	echo "+ nice -n 19 cmake --build $BUILD -j$JOBS --target $t" >&2
	nice -n 19 cmake --build "$BUILD" --config Release -j"$JOBS" --target "$t"
done
touch "$STAMP"
echo "built llama.cpp $WANT_TAG: $BUILD/bin" >&2
