// A small CUDA execution emulator, so that the kernels' own source runs on a
// CPU: kernels/cuda/emu.cpp includes this, then the .cu files, under the
// build tag cudaemu. Not a performance tool: it exists so that the backend's
// tests exercise every kernel where no GPU is.
//
// Model: one block at a time; each of its threads is a ucontext fiber on one
// OS thread. A fiber runs until it reaches __syncthreads (waits for the
// block) or a warp collective (waits for its 31 siblings); the scheduler
// releases a barrier once every live thread it concerns is waiting, and
// reports a deadlock (a divergent barrier: a kernel bug) otherwise.
// Shared memory is `static` (one block at a time). Warp shuffles and
// mma.sync exchange registers through per-warp buffers.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_fp16.h"

using std::max;
using std::min;

#define SLUICE_EMU 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
struct uint2 {
    uint32_t x, y;
};
struct uint4 {
    uint32_t x, y, z, w;
};
struct float4 {
    float x, y, z, w;
};
inline uint2 make_uint2(uint32_t x, uint32_t y) { return {x, y}; }
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return {x, y, z, w}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

inline float __uint_as_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline uint32_t __float_as_uint(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
inline float __expf(float x) { return expf(x); }
// Round-to-nearest single operations, never contracted into an FMA (x86-64
// code built without -mfma has none to contract into).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
// One rounding, as the GPU's fma.rn.f32 (libm's fmaf is exact, hardware or not).
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }

// The running fiber's coordinates; the scheduler sets threadIdx before
// switching to a fiber, and fibers switch only inside the calls below.
inline dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace emu {

enum State { runnable, waitBlock, waitWarp, done };

// Fibers switch with emu_switch on x86-64 (callee-saved registers and the
// stack pointer; glibc's swapcontext also saves the signal mask, a system
// call per switch) and with swapcontext elsewhere.
#if defined(__x86_64__)
extern "C" void emu_switch(void** save, void* to);
asm(R"(
    .text
    .globl emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
)");
#endif

struct Sched {
    ucontext_t main;
    std::vector<ucontext_t> ctx;
    void* mainSp = nullptr;
    std::vector<void*> sp;
    std::vector<State> state;
    std::vector<char> stacks;
    std::vector<uint64_t> xbuf;       // one shuffle value per thread
    std::vector<uint32_t> abuf, bbuf; // mma fragments: 4 A and 2 B registers per thread
    std::function<void()> kernel;
    int cur = 0;
};
inline Sched S;

inline void toMain() {
#if defined(__x86_64__)
    emu_switch(&S.sp[S.cur], S.mainSp);
#else
    swapcontext(&S.ctx[S.cur], &S.main);
#endif
}

inline void wait(State s) {
    S.state[S.cur] = s;
    toMain();
}

inline void entry() {
    S.kernel();
    S.state[S.cur] = done;
#if defined(__x86_64__)
    toMain(); // never resumed
    __builtin_unreachable();
#endif
}

constexpr size_t stackBytes = 64 << 10;

// runBlock runs every thread of the current block to completion.
inline void runBlock(int n) {
    S.ctx.resize(n);
    S.sp.resize(n);
    S.state.assign(n, runnable);
    S.stacks.resize((size_t)n * stackBytes);
    S.xbuf.resize(n);
    S.abuf.resize(4 * (size_t)n);
    S.bbuf.resize(2 * (size_t)n);
    for (int t = 0; t < n; t++) {
        char* base = S.stacks.data() + (size_t)t * stackBytes;
#if defined(__x86_64__)
        // a frame emu_switch "returns" from into entry, 16-byte aligned as
        // after a call: [entry][0 × 6 callee-saved registers]
        uintptr_t top = ((uintptr_t)(base + stackBytes) & ~(uintptr_t)15) - 8;
        void** frame = (void**)top;
        *--frame = (void*)&entry;
        for (int r = 0; r < 6; r++) *--frame = nullptr;
        S.sp[t] = frame;
#else
        getcontext(&S.ctx[t]);
        S.ctx[t].uc_stack.ss_sp = base;
        S.ctx[t].uc_stack.ss_size = stackBytes;
        S.ctx[t].uc_link = &S.main;
        makecontext(&S.ctx[t], entry, 0);
#endif
    }
    for (;;) {
        for (int t = 0; t < n; t++) {
            if (S.state[t] != runnable) continue;
            S.cur = t;
            threadIdx.x = t;
#if defined(__x86_64__)
            emu_switch(&S.mainSp, S.sp[t]);
#else
            swapcontext(&S.main, &S.ctx[t]);
#endif
        }
        bool any = false, released = false;
        for (int w = 0; w < n / 32; w++) {
            int waiting = 0;
            for (int l = 0; l < 32; l++) waiting += S.state[32 * w + l] == waitWarp;
            if (waiting == 32) {
                for (int l = 0; l < 32; l++) S.state[32 * w + l] = runnable;
                released = true;
            } else if (waiting > 0) {
                any = true;
            }
        }
        if (released) continue;
        bool allBlock = true, alive = false;
        for (int t = 0; t < n; t++) {
            if (S.state[t] == done) continue;
            alive = true;
            if (S.state[t] != waitBlock) allBlock = false;
        }
        if (!alive) return;
        if (any || !allBlock) throw std::runtime_error("deadlock: threads wait at different barriers");
        for (int t = 0; t < n; t++)
            if (S.state[t] == waitBlock) S.state[t] = runnable;
    }
}

// launch runs the grid block by block.
inline void launch(dim3 grid, dim3 block, std::function<void()> k) {
    if (block.y != 1 || block.z != 1 || block.x % 32 != 0)
        throw std::runtime_error("the emulator takes 1-D blocks of whole warps");
    gridDim = grid;
    blockDim = block;
    S.kernel = std::move(k);
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx.x = x, blockIdx.y = y, blockIdx.z = z;
                runBlock(block.x);
            }
}

template <typename T>
inline T shfl_xor(T v, int o) {
    static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
    const int t = S.cur, partner = (t & ~31) | ((t & 31) ^ o);
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof(T));
    S.xbuf[t] = bits;
    wait(waitWarp);
    bits = S.xbuf[partner];
    wait(waitWarp); // nobody overwrites xbuf before every lane has read
    T r;
    memcpy(&r, &bits, sizeof(T));
    return r;
}

inline float h2float(uint16_t h, bool bf) {
    if (bf) return __uint_as_float((uint32_t)h << 16);
    __half_raw r;
    r.x = h;
    return __half2float(__half(r));
}

// mma16816 emulates mma.sync.m16n8k16.row.col (f32 accumulate) from the
// documented fragment layouts: lane = 4·group + t;
//   A regs: 0 (row g, k 2t..2t+1), 1 (row g+8), 2 (row g, k+8), 3 (row g+8, k+8)
//   B regs: 0 (k 2t..2t+1, col g), 1 (k 2t+8..2t+9, col g)
//   C:      c0,c1 (row g, cols 2t, 2t+1), c2,c3 (row g+8)
inline void mma16816(bool bf, float* c, const uint32_t* a, const uint32_t* b) {
    const int t = S.cur, w0 = t & ~31, lane = t & 31, g = lane >> 2, tg = lane & 3;
    for (int i = 0; i < 4; i++) S.abuf[4 * t + i] = a[i];
    for (int i = 0; i < 2; i++) S.bbuf[2 * t + i] = b[i];
    wait(waitWarp);
    auto A = [&](int row, int k) {
        const int src = w0 + 4 * (row % 8) + (k % 8) / 2, reg = (row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
        return h2float((uint16_t)(S.abuf[4 * src + reg] >> (16 * (k & 1))), bf);
    };
    auto B = [&](int k, int col) {
        const int src = w0 + 4 * col + (k % 8) / 2, reg = k >= 8 ? 1 : 0;
        return h2float((uint16_t)(S.bbuf[2 * src + reg] >> (16 * (k & 1))), bf);
    };
    for (int e = 0; e < 4; e++) {
        const int row = g + (e >= 2 ? 8 : 0), col = 2 * tg + (e & 1);
        float s = c[e];
        for (int k = 0; k < 16; k++) s += A(row, k) * B(k, col);
        c[e] = s;
    }
    wait(waitWarp);
}

} // namespace emu

#define __syncthreads() emu::wait(emu::waitBlock)
#define __shfl_xor_sync(mask, v, o) emu::shfl_xor(v, o)

// Blocks run one at a time: atomics need no atomicity, fences order nothing.
inline void __threadfence() {}
inline float __ldcg(const float* p) { return *p; }
inline int atomicAdd(int* p, int v) {
    int old = *p;
    *p = old + v;
    return old;
}

inline int atomicMin(int* p, int v) {
    int old = *p;
    if (v < old) *p = v;
    return old;
}
