# --- CUDA: the device script's PyTorch front end, on the emulator (issue 11) --
# scripts/device/check_kernels.py falls back to PyTorch + the driver API
# (torchcupy.py) on a GPU machine without CuPy. Here that path runs against
# the CPU emulator: libcudaemu.so exports the driver entry points torchcupy
# calls through ctypes, and scripts/device/emutorch stands in for torch. The
# CuPy front end keeps its own emulated run in cuda-emu; this one takes the
# short list (--quick) of the same checks.
.PHONY: cuda-emu-torch
CUDA_EMU_LIB := bin/libcudaemu.so

$(CUDA_EMU_LIB): kernels/cuda/emu.cpp $(wildcard kernels/cuda/*.cu kernels/cuda/*.cuh kernels/cuda/emu/*.h)
	mkdir -p bin
	g++ -std=c++20 -O1 -shared -fPIC -Ikernels/cuda/emu kernels/cuda/emu.cpp -o $@

cuda-emu-torch: $(CUDA_EMU_LIB)
	SLUICE_LIBCUDA=$(CUDA_EMU_LIB) PYTHONPATH=scripts/device/emutorch "$$(./scripts/py-venv.sh emu $(EMU_PY_PINS))" \
		scripts/device/check_kernels.py kernels/cuda/ptx --frontend torch --quick

cuda-check: cuda-emu-torch

# cuda-emu's kernel checks load the same library (its recipe is in the Makefile).
cuda-emu: $(CUDA_EMU_LIB)

# The device sampler (kernels/cuda/sample.cu) against the engine's own host
# sampler, token for token over seeded generations, on the emulator; and
# constraint masks applied on the device (mask.cu) against the host path; and
# logprobs' top-k and log-softmax on the device (logprobs.cu) against the host's;
# and the engine's steps sampled on the device (devsample.go) against its host
# path, with the bytes each step copies back; and speculation verified from the
# device's per-row tokens (spec_dev_emu_test.go), greedy and seeded, against
# the plain run and the host path.
.PHONY: cuda-emu-sample
cuda-emu-sample: $(TOKENIZERS_LIB)
	$(GO) test -tags cudaemu -count=1 -run 'TestDeviceSamplerMatchesHost|TestDeviceMaskMatchesHost|TestDeviceLogprobsMatchHost|TestDeviceSamplingInEngine|TestDeviceSpecGreedy|TestDeviceSpecSeeded' ./engine/

cuda-check: cuda-emu-sample

# The emulator's cgo build (driver_emu.go's emu.cpp) #includes the kernels'
# .cu sources, which Go's build cache does not hash: after an edit to a .cu
# file alone, `go test -tags cudaemu` would link the previous build and test
# the old kernel. A digest of those sources in the C++ flags is part of the
# cache key, so every make target here rebuilds the emulator when a kernel
# changes. (Run by hand, go test needs the same: CGO_CXXFLAGS as below.)
CUDA_SRC_DIGEST := $(shell cat kernels/cuda/*.cu kernels/cuda/*.cuh kernels/cuda/emu/*.h 2>/dev/null | sha256sum | cut -c1-16)
export CGO_CXXFLAGS := -O2 -g -DSLUICE_CUDA_SRC_DIGEST=$(CUDA_SRC_DIGEST)

# scripts/device/first.sh, the GPU window's one command, against stub test
# binaries that pass, fail, hang and ignore SIGQUIT on cue (~25 s, mostly
# waiting out the stubs' timeouts): the summary rewritten at every stage,
# the verdict last, a hang's goroutine dump and traced rerun, at most 4
# files back (issue 27).
.PHONY: cuda-first-check
cuda-first-check:
	$(GO) test -count=1 ./scripts/device/firstcheck/

cuda-check: cuda-first-check

# ptxas for Hopper over every committed PTX module: registers and spills per
# kernel against kernels/cuda/ptxas-sm90.txt; a new spill in the batch-1
# decode path fails (kernels/cuda/ptxas-check.sh -update rewrites the
# baseline). CUDA 11.8's ptxas (scripts/install-cuda.sh) assembles sm_90.
.PHONY: cuda-ptxas
cuda-ptxas:
	./kernels/cuda/ptxas-check.sh

cuda-check: cuda-ptxas

# sm_90 cubins of the PTX (kernels/cuda/build-cubin.sh), embedded by the
# cuda and cudaemu builds: an H100/H200 loads them with no JIT; the
# emulator loads them as a GPU would (TestPrebuiltCubins). Not committed;
# named after their PTX's digest, so a stale one is never loaded.
.PHONY: cuda-cubin
CUDA_CUBIN_STAMP := kernels/cuda/cubin/.stamp
$(CUDA_CUBIN_STAMP): $(wildcard kernels/cuda/ptx/*.ptx) kernels/cuda/build-cubin.sh
	./kernels/cuda/build-cubin.sh
	touch $@

cuda-cubin: $(CUDA_CUBIN_STAMP)
cuda: $(CUDA_CUBIN_STAMP)
cuda-emu: $(CUDA_CUBIN_STAMP)
