// The driver calls the backend makes itself, beside gorgonia.org/cu (which
// keeps the context and memory): modules loaded with JIT logs, launches
// issued a step at a time, the stream. The same C serves both builds: on a
// GPU it includes the toolkit's cuda.h and links libcuda; under the
// emulator (SLUICE_EMU_DRV, set by driver_emu.go) it includes emu/cuda.h,
// whose functions emu.cpp implements over the kernels' own source.
#pragma once
#ifdef SLUICE_EMU_DRV
#include "emu/cuda.h"
#else
#include <cuda.h>
#endif
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "blas.h"

// SL_MAX_ARGS is maxArgs in queue.go.
#define SL_MAX_ARGS 24

// sl_load_module JIT-compiles a NUL-terminated PTX image with info and error
// log buffers of logBytes each (the driver writes them NUL-terminated) and
// reports the JIT's wall time in milliseconds (0 where it is not measured).
static CUresult sl_load_module(CUmodule* m, const char* ptx, char* info, char* err, size_t logBytes, float* wallMs) {
    CUjit_option opts[6] = {CU_JIT_INFO_LOG_BUFFER,  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_LOG_VERBOSE,      CU_JIT_WALL_TIME};
    void* vals[6] = {info, (void*)(uintptr_t)logBytes, err, (void*)(uintptr_t)logBytes, (void*)(uintptr_t)1, NULL};
    info[0] = err[0] = 0;
    CUresult r = cuModuleLoadDataEx(m, ptx, 6, opts, vals);
    memcpy(wallMs, &vals[5], sizeof(float)); // CU_JIT_WALL_TIME: a float in the value slot
    return r;
}

// sl_device_cc is the current context's device compute capability as
// major·10 + minor (90 on an H100/H200), or -1 when it cannot be read.
static int sl_device_cc(void) {
    CUdevice d;
    int major = 0, minor = 0;
    if (cuCtxGetDevice(&d) != CUDA_SUCCESS ||
        cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d) != CUDA_SUCCESS ||
        cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d) != CUDA_SUCCESS)
        return -1;
    return major * 10 + minor;
}

// sl_jit_ptx JIT-compiles a NUL-terminated PTX image of ptxBytes (the NUL
// included) into a cubin for the current device with the JIT linker, which,
// unlike cuModuleLoadDataEx, hands the cubin back: the caller copies it
// from *cubin (*cubinBytes long) into its cache, then destroys *state —
// also on failure, when *state is not NULL. Logs as sl_load_module's.
static CUresult sl_jit_ptx(const char* ptx, size_t ptxBytes, char* info, char* err, size_t logBytes, CUlinkState* state,
                           void** cubin, size_t* cubinBytes) {
    CUjit_option opts[5] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_LOG_VERBOSE};
    void* vals[5] = {info, (void*)(uintptr_t)logBytes, err, (void*)(uintptr_t)logBytes, (void*)(uintptr_t)1};
    info[0] = err[0] = 0;
    *state = NULL;
    CUresult r = cuLinkCreate(5, opts, vals, state);
    if (r != CUDA_SUCCESS) return r;
    r = cuLinkAddData(*state, CU_JIT_INPUT_PTX, (void*)ptx, ptxBytes, "sluice", 0, NULL, NULL);
    if (r != CUDA_SUCCESS) return r;
    return cuLinkComplete(*state, cubin, cubinBytes);
}

// sl_launch is one recorded kernel launch, laid out as queue.go's cLaunch.
typedef struct {
    CUfunction f;
    uint32_t grid[3], block[3];
    int32_t nargs, pad; // pad: SL_KIND_GEMM for a cuBLAS call, else 0
    uint64_t args[SL_MAX_ARGS]; // 8 bytes each: the driver reads each parameter's own size
} sl_launch;

// sl_run issues n launches in order on s. With syncEach it waits for the
// stream after every launch, so an asynchronous fault (an illegal address)
// is pinned on the launch that caused it. On failure *failed is the index
// of the launch, and *syncErr says whether the launch call itself returned
// the error (0) or the wait after it did (1).
static CUresult sl_run(const sl_launch* ls, int n, CUstream s, int syncEach, int* failed, int* syncErr, char* err,
                       int errLen) {
    void* p[SL_MAX_ARGS];
    for (int i = 0; i < n; i++) {
        const sl_launch* l = &ls[i];
        *failed = i;
        *syncErr = 0;
        if (l->nargs < 0 || l->nargs > SL_MAX_ARGS) return CUDA_ERROR_INVALID_VALUE;
        CUresult r;
        if (l->pad == SL_KIND_GEMM) { // a cuBLAS call (blas.h), not a kernel of ours
#ifdef SLUICE_EMU_DRV
            // cuBLAS records its kernels into a capturing stream itself; the
            // emulator's reference runs on the host, so the call is recorded
            if (emu_capture_call(s, sl_gemm, l->args, SL_G_NARGS)) {
                r = CUDA_SUCCESS;
            } else
#endif
                r = sl_gemm(l->args, (void*)s, err, errLen) == 0 ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_FAILED;
        } else {
#ifdef SLUICE_EMU_DRV
            if (emu_check_args(l->f, l->nargs, err, errLen)) return CUDA_ERROR_INVALID_VALUE;
#else
            (void)err, (void)errLen;
#endif
            for (int j = 0; j < l->nargs; j++) p[j] = (void*)&l->args[j];
            r = cuLaunchKernel(l->f, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2], 0, s,
                               p, NULL);
        }
        if (r != CUDA_SUCCESS) return r;
        if (syncEach) {
            *syncErr = 1;
            r = cuStreamSynchronize(s);
            if (r != CUDA_SUCCESS) return r;
        }
    }
    *failed = -1;
    return CUDA_SUCCESS;
}

// sl_capture records ls as a graph (stream capture: nothing runs) and
// instantiates it into *exec. The step's tables are copied before, outside
// the capture: a replay reads whatever the arena holds when it runs.
static CUresult sl_capture(const sl_launch* ls, int n, CUstream s, CUgraphExec* exec, int* failed, int* syncErr,
                           char* err, int errLen) {
    CUgraph g = NULL;
    *failed = -1;
    *syncErr = 0;
    CUresult r = cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (r != CUDA_SUCCESS) return r;
    CUresult rl = sl_run(ls, n, s, 0, failed, syncErr, err, errLen);
    r = cuStreamEndCapture(s, &g); // always: it leaves capture mode
    if (rl != CUDA_SUCCESS) {
        if (g != NULL) cuGraphDestroy(g);
        return rl;
    }
    if (r != CUDA_SUCCESS) return r;
    r = cuGraphInstantiateWithFlags(exec, g, 0);
    cuGraphDestroy(g);
    return r;
}
