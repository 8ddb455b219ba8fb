#!/usr/bin/env bash
# Builds llama.cpp, the reference and speed peer for Sluice, from the source
# distribution of PyPI's llama-cpp-python (the only route to llama.cpp's source
# from the package registries this project may use), plus a Python venv whose
# llama_cpp bindings load the shared library built here, so llama.cpp is
# compiled once, not twice.
#
# Output (all under .build/, git-ignored):
#   .build/llamacpp/build/bin/{llama-bench,llama-server,llama-cli,llama-simple,
#                              llama-tokenize,libllama.so,libggml*.so}
#   .build/venv/   python with llama_cpp importable (lib -> the build above)
#
# "build.sh lib" stops after libllama and the venv (all make_golden.py needs).
# Cached: a second run is a no-op. Environment knobs:
#   JOBS (default 2)  parallel compile jobs; the dev machines have 2 cores.
#   ISA (default avx2) avx2: AVX2+FMA+F16C+BMI2, the kernels Sluice's own CPU
#                     backend has, so golden data is the same on every build
#                     machine; native: -march=native without AMX, for speed.
#                     ggml's AMX matmul crashes (SIGSEGV in
#                     ggml_backend_amx_mul_mat) on the sandboxed dev machines,
#                     whose CPUs report AMX_INT8.
set -euo pipefail

VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
# llama.cpp commit vendored by llama-cpp-python 0.3.36 (its CHANGELOG).
LLAMA_COMMIT=0c1e57098

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/.build/llamacpp
SRC=$B/llama_cpp_python-$VERSION
BUILD=$B/build
VENV=$ROOT/.build/venv
JOBS=${JOBS:-2}
ISA=${ISA:-avx2}
case $ISA in
avx2) ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON) ;;
native) ISA_FLAGS=(-DGGML_NATIVE=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) ;;
*) echo "ISA=$ISA: want avx2 or native" >&2; exit 2 ;;
esac
# A build made with other flags (or before this knob existed) is not reused.
FLAGS_STAMP=$BUILD/.isa-$ISA
if [[ -d $BUILD && ! -f $FLAGS_STAMP ]]; then
	echo "rebuilding llama.cpp for ISA=$ISA (the cached build used other flags)" >&2
	rm -rf "$BUILD" "$VENV/.llamacpp-$VERSION" "$B"/.built-*
fi
TARGETS=(llama llama-bench llama-server llama-cli llama-simple llama-tokenize)
STAMP=$B/.built-$VERSION

MODE=${1:-all}
if [[ $MODE == lib && -f $BUILD/bin/libllama.so && -f $VENV/.llamacpp-$VERSION && -f $FLAGS_STAMP ]]; then
	exit 0
fi
if [[ -f $STAMP && -x $BUILD/bin/llama-server && -f $VENV/.llamacpp-$VERSION ]]; then
	echo "llama.cpp $LLAMA_COMMIT (llama-cpp-python $VERSION) already built: $BUILD/bin" >&2
	exit 0
fi

mkdir -p "$B/dl"
TARBALL=$B/dl/llama_cpp_python-$VERSION.tar.gz
if [[ ! -f $TARBALL ]]; then
	python3 -m pip download --quiet --no-deps --no-binary :all: \
		"llama-cpp-python==$VERSION" -d "$B/dl"
fi
echo "$SHA256  $TARBALL" | sha256sum -c --quiet -
if [[ ! -d $SRC ]]; then
	tar -C "$B" -xzf "$TARBALL"
fi

# GIT_EXECUTABLE=/bin/false: the unpacked source sits inside Sluice's own git
# work tree, and llama.cpp's build-info would otherwise stamp Sluice's commit
# as llama.cpp's. The vendored commit is recorded as LLAMA_COMMIT above.
# LLAMA_USE_PREBUILT_UI=OFF: the server's web UI would be downloaded from a
# host we cannot reach; the server runs fine without it.
CMAKE_CMD=(cmake -S "$SRC/vendor/llama.cpp" -B "$BUILD"
	-DCMAKE_BUILD_TYPE=Release
	-DBUILD_SHARED_LIBS=ON
	"${ISA_FLAGS[@]}"
	-DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=ON
	-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=ON
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
	-DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
	-DGIT_EXECUTABLE=/bin/false)
echo "+ ${CMAKE_CMD[*]}" >&2
"${CMAKE_CMD[@]}" >"$B/cmake-configure.log"
touch "$FLAGS_STAMP"
# Python bindings: llama_cpp is pure Python over ctypes. Copy the sdist's
# package into a venv and point its lib/ at the shared libraries built above
# (llama_cpp loads libllama from there, and _ggml loads libggml from there
# without honouring LLAMA_CPP_LIB_PATH).
setup_venv() {
	if [[ ! -x $VENV/bin/python ]]; then
		python3 -m venv "$VENV"
	fi
	"$VENV/bin/python" -m pip install --quiet \
		'numpy>=1.20.0' 'typing-extensions>=4.5.0' 'diskcache>=5.6.1' 'jinja2>=2.11.3'
	SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
	rm -rf "$SITE/llama_cpp"
	cp -r "$SRC/llama_cpp" "$SITE/llama_cpp"
	rm -rf "$SITE/llama_cpp/lib"
	ln -s "$BUILD/bin" "$SITE/llama_cpp/lib"
	"$VENV/bin/python" -c 'import llama_cpp; print("llama_cpp", llama_cpp.__version__, "loads", llama_cpp.llama_cpp._base_path)'
	touch "$VENV/.llamacpp-$VERSION"
}

# libllama first (the golden-data script needs only it), then llama-bench;
# the other tools (the server above all) take most of the compile time.
for t in llama llama-bench "${TARGETS[*]}"; do
	echo "+ cmake --build $BUILD --config Release -j$JOBS --target $t" >&2
	# shellcheck disable=SC2086 # $t is a space-separated target list
	cmake --build "$BUILD" --config Release -j"$JOBS" --target $t
	if [[ $t == llama ]]; then
		setup_venv
		if [[ $MODE == lib ]]; then
			exit 0
		fi
	fi
done
touch "$STAMP"

echo "built llama.cpp $LLAMA_COMMIT: $BUILD/bin" >&2
