// Package cuda is the NVIDIA GPU implementation of kernels.Backend: kernels of
// our own (the .cu files here, compiled to PTX by build-ptx.sh and embedded)
// driven through gorgonia.org/cu. It owns device memory for weights, scratch
// and the KV block pool; only token ids and the logits a caller reads cross
// back to the host.
//
// Everything but this file is under the build tag cuda: gorgonia.org/cu's
// package init calls cuInit and exits the process without a GPU, and the
// binary needs libcuda.so.1 to load, so the default build stays CUDA-free.
// The backend reaches the device through a small driver interface
// (driver.go): driver_cu.go on a GPU, or — build tag cudaemu — a CPU
// emulator that runs the same .cu sources (emu.cpp, emu/runtime.h), so the
// tests exercise every kernel where no GPU is: `make cuda-emu`.
//
// Concurrency: all CUDA calls run on one goroutine locked to its OS thread
// (CUDA contexts are per thread). Ops called by the engine goroutine only
// validate their arguments and record launches; Read (and Sample) hand the
// recorded step to that goroutine in one exchange, which copies the step's
// small host-side tables (token ids, positions, slots, block tables) to the
// device in a single transfer, issues the launches on one stream, checks
// every call's result and waits for the stream. A launch error is therefore
// reported by the Read that ends the step: a launch the driver refuses names
// its kernel and arguments (*LaunchError), a fault while the step runs
// surfaces at the wait, and SLUICE_CUDA_SYNC=1 (Options.SyncEach) waits after
// every launch so that it too names its kernel; SLUICE_CUDA_TRACE=1 also
// prints each kernel's name before launching it, so that a hang's last line
// names its kernel. Modules load as prebuilt sm_90 cubins on an H100/H200
// (build-cubin.sh; embedded when built), else as PTX through the JIT, with
// the driver's info and error logs, which a failed load returns; a cubin
// the driver refuses falls back to the PTX, and a process's later backends
// load the images its first one loaded (modules.go).
//
// cudrv.h holds the driver calls made beside gorgonia.org/cu (which keeps
// the context and memory): modules, the stream, a step's launches in one
// cgo call. The emulator implements the same driver entry points (emu.cpp,
// emu/cuda.h), so that path runs in the tests too.
//
// Numerics: weights keep their GGUF block layouts and are dequantized in
// registers; decode-sized matmuls accumulate in F32, larger ones run on
// tensor cores with activations rounded to BF16 (BF16 weights) or F16 (all
// other types); the KV cache is stored as F16.
//
// Launches: ops that the forward pass issues back to back are fused when
// recorded, so a batch-1 decode layer is 6 launches: the q/k/v GEMV (one
// launch, three matrices, the RMSNorm before it folded in: its sum of
// squares taken from the GEMV's own x loads, its scale applied to the dot
// products), rope_kv (RoPE of q and k, then K and V into the cache),
// attention (each context split into enough partitions to give every SM two
// blocks, merged by the last to finish), the o GEMV with the residual
// Add in its epilogue, the gate/up GEMV (RMSNorm folded in, SwiGLU in its
// epilogue), the down GEMV with the residual Add. Where no GEMV takes them,
// a residual Add folds into the RMSNorm after it (add_rms_norm). The GEMVs
// split each row across a block of 128 threads with 8 independent 16-byte
// loads in flight per thread (F16/BF16), so matrices of 4,096 rows still
// fill the GPU. Not done yet, and the first things to measure on a GPU:
// ldmatrix/cp.async pipelining in the tensor-core tiles, wider
// GEMV batches (9–64 rows now take 64×64 tiles, which leaves SMs idle on
// narrow matrices), pinned host memory for large logit reads, and Hopper's
// wgmma (needs CUDA 12+).
//
// Sampling: Sample (sample.cu) picks tokens on the device with the engine
// sampler's chain and order (logit bias, penalties, top-k, top-p, min-p, temperature,
// the caller's draw), so that a seeded generation gives the same tokens on
// either side; rows it cannot decide (top-p without top-k) come back
// Undecided for the host. Graphs: a step whose launches repeat (decode) is
// captured as a CUDA graph the second time and replayed while they repeat
// (cudrv.go); Options.NoGraphs or SLUICE_CUDA_GRAPHS=0 turns them off.
//
// gpt-oss (gptoss.go): its MXFP4 experts are one more block type of the
// matmul kernels (dequant16 in common.cuh, bit for bit the CPU's decode);
// attention sinks are an extra logit in paged_decode_sink and
// paged_prefill_sink (attention.cu) at their head sizes, and in
// sink_attention (gptoss.cu, a plain block per row and head) at others; the
// experts' clamped SwiGLU is oai_swiglu, after the gate and up GEMVs rather
// than fused into them.
//
// Limits: matmul rows must be a multiple of 32 elements, head size a
// multiple of 8 up to 128, or 256. Decode rows of head size 64, 80, 96, 128
// and 256, and every row of 256, go to paged_decode; prefill chunks of 64,
// 80, 96 and 128 to paged_prefill (tensor cores); only the other head sizes'
// chunks reach paged_attention, which takes at most 16 query heads per KV
// head.
package cuda
