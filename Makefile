# Sluice: `make run` fetches the default model, builds and serves it; `make test` builds
# everything that needs building (the Rust tokenizer library included) and runs the tests.

SHELL := /bin/bash
GO ?= go
MODEL := models/SmolLM2-135M-Instruct.Q4_1.gguf
ADDR ?= 127.0.0.1:8080

# The tokenizer is Hugging Face's Rust library behind cgo; its static archive is built
# from the pinned Go module's own source by scripts/build-tokenizers.sh.
export CGO_ENABLED := 1
export CGO_LDFLAGS := -L$(CURDIR)/.build/lib
# go-nvml's generated cgo calls deprecated NVML entry points; the warnings are noise.
export CGO_CFLAGS := -O2 -g -Wno-deprecated-declarations
TOKENIZERS_LIB := .build/lib/libtokenizers.a

# Packages whose tests exercise goroutines and channels run under the race detector.
RACE_PKGS := ./engine/... ./scheduler/... ./kvcache/... ./server/... ./kvevents/... github.com/go-zeromq/zmq4/...

.PHONY: all build run model test test-deps test-race test-unit vet bench golden clean

all: build

$(TOKENIZERS_LIB): scripts/build-tokenizers.sh
	./scripts/build-tokenizers.sh

model: $(MODEL)

$(MODEL):
	./scripts/fetch-model.sh

build: $(TOKENIZERS_LIB)
	mkdir -p bin
	$(GO) build -o bin/sluice ./cmd/sluice

run: model build
	./bin/sluice serve --model $(MODEL) --addr $(ADDR)

vet: $(TOKENIZERS_LIB)
	$(GO) vet ./...

test: $(TOKENIZERS_LIB) model test-deps vet test-unit test-race

# Optional peers of the end-to-end tests: Debian's nginx unpacked under .build
# (the proxy test skips without it). The Node OpenAI SDK is installed by its own
# test (npm ci in tests/openai-node).
test-deps:
	-./deploy/fetch-nginx.sh

# server/e2e drives the official SDKs against real models: on two busy cores
# it has passed Go's default 10-minute binary timeout, so the bound is wider.
TEST_TIMEOUT ?= 30m

test-unit:
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

test-race:
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -race $(RACE_PKGS)

bench: $(TOKENIZERS_LIB) model
	$(GO) test -run '^$$' -bench . -benchtime 2x ./kernels/... ./models/...

golden:
	./scripts/golden/run.sh

clean:
	rm -rf bin .build

# --- gRPC endpoint and metrics (issue 5) -------------------------------------
# `make proto` regenerates server/grpc/proto/**.pb.go with pinned protoc
# (PyPI grpcio-tools), protoc-gen-go and protoc-gen-go-grpc, all under .build/.
# grpcurl (pinned) is installed for the reflection test; an install failure is
# not fatal: that one test then skips with a message.
.PHONY: proto grpcurl

proto:
	./scripts/proto.sh

grpcurl:
	-./scripts/install-grpcurl.sh

test-unit test-race: grpcurl

# --- CUDA backend (issue 7) --------------------------------------------------
# Needs the CUDA toolkit (scripts/install-cuda.sh: Debian's CUDA 11.8, ~3 min).
# `make cuda` builds bin/sluice-cuda with the build tag cuda (gorgonia.org/cu,
# our kernels' PTX embedded); it needs a GPU host's libcuda.so.1 to start.
# `make cuda-check` is CI's: every kernel compiles and the committed PTX matches
# the .cu sources, the cuda build vets, the GPU tests compile, and `make
# cuda-emu` runs the backend's tests with the kernels' own source on a CPU
# emulator (build tag cudaemu: every op vs the CPU backend, and a small Llama
# through models.Llama; then the device script's kernel checks, NumPy
# references and all, through emucupy). `make cuda-device` builds bin/device/ for
# scripts/device/run.sh on the GPU machine.
.PHONY: cuda cuda-ptx cuda-check cuda-emu cuda-device
# The emulated kernel checks' NumPy, in a pinned venv (.build/py-emu): the system
# python3 of a fresh machine has no NumPy.
EMU_PY_PINS := numpy==2.3.5
CUDA_PTX := $(patsubst kernels/cuda/%.cu,kernels/cuda/ptx/%.ptx,$(wildcard kernels/cuda/*.cu))

$(CUDA_PTX) &: $(wildcard kernels/cuda/*.cu kernels/cuda/*.cuh) kernels/cuda/build-ptx.sh
	./kernels/cuda/build-ptx.sh

cuda-ptx:
	./kernels/cuda/build-ptx.sh

cuda: $(TOKENIZERS_LIB) $(CUDA_PTX)
	mkdir -p bin
	$(GO) build -tags cuda -o bin/sluice-cuda ./cmd/sluice

cuda-check: $(TOKENIZERS_LIB) cuda-ptx
	git diff --exit-code --stat -- kernels/cuda/ptx || { echo "kernels/cuda/ptx is stale: commit the PTX make cuda-ptx built"; exit 1; }
	$(GO) vet -tags cuda ./kernels/cuda/...
	$(GO) test -tags cuda -c -o /dev/null ./kernels/cuda/
	$(GO) test -tags cuda -c -o /dev/null ./kernels/cuda/modeltest/
	$(MAKE) cuda-emu

cuda-emu: $(TOKENIZERS_LIB)
	$(GO) vet -tags cudaemu ./kernels/cuda/...
	$(GO) test -tags cudaemu -count=1 ./kernels/cuda/...
	EMU_LIB=bin/libcudaemu.so PYTHONPATH=scripts/device/emucupy "$$(./scripts/py-venv.sh emu $(EMU_PY_PINS))" scripts/device/check_kernels.py kernels/cuda/ptx

cuda-device: $(TOKENIZERS_LIB) $(CUDA_PTX)
	./scripts/device/build.sh

# --- Per-capability fragments ------------------------------------------------
# Each mk/*.mk adds its own targets and may add prerequisites to test (e.g.
# `test: k8s-check`); the recipes above stay the only ones for test itself.
include $(wildcard mk/*.mk)
