// Matrix multiply dst[i, o] = Σ_k x[i, k]·w[o, k] (+ bias[o]): x is F32
// [n, in], w is [out, in] in its stored block layout, dst is F32 [n, out].
//
// Two shapes of kernel:
//   gemv_*  decode (n ≤ 8): one warp per output row streams the weight row
//           once, dequantizes in registers and keeps NR row accumulators;
//           one launch may serve up to three matrices of the same x.
//           Bandwidth-bound; the F16/BF16 ones load 16 bytes per lane per
//           step so a warp reads 512 contiguous bytes.
//   mma_*   prefill and large batches: 64×64 output tiles, k-steps of 32,
//           tensor cores through mma.sync m16n8k16 (bf16 for BF16 weights,
//           f16 for the rest: quantized blocks are dequantized into the
//           shared-memory tile). x is rounded to the same 16-bit type.
// in must be a multiple of 32 (the host checks).
#include "common.cuh"

// ---- decode: one warp per output row --------------------------------------

template <int NR>
static __device__ __forceinline__ void gemv_store(float* dst, const float* bias, float* acc, int n, int out, int o) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int r = 0; r < NR; r++) {
        float s = warp_sum(acc[r]);
        if (lane == 0 && r < n) dst[(size_t)r * out + o] = s + (bias ? bias[o] : 0.f);
    }
}

// A GEMV launch serves up to three matrices that share x (the backend fuses
// consecutive MatMuls of one input: q, k, v; gate, up): warps are numbered
// across their rows in order, and each finds its matrix.
struct GemvSeg {
    float* dst;
    const uint8_t* w;
    const float* bias;
    int out;
};

#define GEMV_PARAMS                                                                                             \
    const float *x, int n, int in, long long rowBytes, float *d0, const uint8_t *w0, const float *b0, int out0, \
        float *d1, const uint8_t *w1, const float *b1, int out1, float *d2, const uint8_t *w2, const float *b2,  \
        int out2

// gemv_seg finds the warp's matrix and its first row: each warp takes RPW
// consecutive rows of one matrix, so a matrix of out rows has ⌈out/RPW⌉
// warps. False when the warp has none.
template <int RPW>
static __device__ __forceinline__ bool gemv_seg(GEMV_PARAMS, GemvSeg* s, int* o) {
    int w = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int n0 = (out0 + RPW - 1) / RPW, n1 = (out1 + RPW - 1) / RPW, n2 = (out2 + RPW - 1) / RPW;
    if (w < n0) {
        *s = {d0, w0, b0, out0};
    } else if ((w -= n0) < n1) {
        *s = {d1, w1, b1, out1};
    } else if ((w -= n1) < n2) {
        *s = {d2, w2, b2, out2};
    } else {
        return false;
    }
    *o = RPW * w;
    return true;
}

// gemv_half: F16/BF16 weights. A warp takes 4 rows, each lane 8 elements of
// each per step: the x values it loads serve all 4 rows, and 4 weight loads
// of 16 bytes are in flight per lane — the batch-1 decode kernel, where
// only weight bandwidth should count.
#define HALF_RPW 4
template <int T, int NR>
static __device__ void gemv_half(GEMV_PARAMS) {
    GemvSeg sg;
    int o0;
    if (!gemv_seg<HALF_RPW>(x, n, in, rowBytes, d0, w0, b0, out0, d1, w1, b1, out1, d2, w2, b2, out2, &sg, &o0)) return;
    const int lane = threadIdx.x & 31, nrow = min(HALF_RPW, sg.out - o0);
    const uint4* row = (const uint4*)(sg.w + (size_t)o0 * in * 2);
    const int stride = in / 8; // uint4 per row
    float acc[HALF_RPW][NR];
#pragma unroll
    for (int j = 0; j < HALF_RPW; j++)
#pragma unroll
        for (int r = 0; r < NR; r++) acc[j][r] = 0.f;
#pragma unroll 2
    for (int c = lane; c < stride; c += 32) {
        uint4 v[HALF_RPW];
#pragma unroll
        for (int j = 0; j < HALF_RPW; j++) v[j] = j < nrow ? row[(size_t)j * stride + c] : make_uint4(0, 0, 0, 0);
        float xs[NR][8];
#pragma unroll
        for (int r = 0; r < NR; r++) {
            if (r < n) {
                const float4* xp = (const float4*)(x + (size_t)r * in + 8 * c);
                float4 a = xp[0], b = xp[1];
                xs[r][0] = a.x, xs[r][1] = a.y, xs[r][2] = a.z, xs[r][3] = a.w;
                xs[r][4] = b.x, xs[r][5] = b.y, xs[r][6] = b.z, xs[r][7] = b.w;
            }
        }
#pragma unroll
        for (int j = 0; j < HALF_RPW; j++) {
            uint32_t u[4] = {v[j].x, v[j].y, v[j].z, v[j].w};
            float wv[8];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                uint16_t lo = (uint16_t)(u[k] & 0xffff), hi = (uint16_t)(u[k] >> 16);
                wv[2 * k] = T == T_F16 ? h2f(lo) : bf2f(lo);
                wv[2 * k + 1] = T == T_F16 ? h2f(hi) : bf2f(hi);
            }
#pragma unroll
            for (int r = 0; r < NR; r++) {
                if (r < n) {
                    float s = 0.f;
#pragma unroll
                    for (int k = 0; k < 8; k++) s += xs[r][k] * wv[k];
                    acc[j][r] += s;
                }
            }
        }
    }
#pragma unroll
    for (int j = 0; j < HALF_RPW; j++)
        if (j < nrow) gemv_store<NR>(sg.dst, sg.bias, acc[j], n, sg.out, o0 + j);
}

// gemv_blocks: any type dequant16 knows, each lane one 32-element unit per step.
template <int T, int NR>
static __device__ void gemv_blocks(GEMV_PARAMS) {
    GemvSeg sg;
    int o;
    if (!gemv_seg<1>(x, n, in, rowBytes, d0, w0, b0, out0, d1, w1, b1, out1, d2, w2, b2, out2, &sg, &o)) return;
    const int lane = threadIdx.x & 31;
    const uint8_t* row = sg.w + (size_t)o * rowBytes;
    float acc[NR];
#pragma unroll
    for (int r = 0; r < NR; r++) acc[r] = 0.f;
    for (int k0 = 32 * lane; k0 < in; k0 += 32 * 32) {
        float wv[32];
        dequant16<T>(row, k0, wv);
        dequant16<T>(row, k0 + 16, wv + 16);
#pragma unroll
        for (int r = 0; r < NR; r++) {
            if (r < n) {
                const float4* xp = (const float4*)(x + (size_t)r * in + k0);
                float s = 0.f;
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    float4 a = xp[j];
                    s += a.x * wv[4 * j] + a.y * wv[4 * j + 1] + a.z * wv[4 * j + 2] + a.w * wv[4 * j + 3];
                }
                acc[r] += s;
            }
        }
    }
    gemv_store<NR>(sg.dst, sg.bias, acc, n, sg.out, o);
}

#define GEMV_ARGS x, n, in, rowBytes, d0, w0, b0, out0, d1, w1, b1, out1, d2, w2, b2, out2
#define GEMV_HALF(name, T, NR) \
    extern "C" __global__ void gemv_##name##_##NR(GEMV_PARAMS) { gemv_half<T, NR>(GEMV_ARGS); }
#define GEMV_BLOCKS(name, T, NR) \
    extern "C" __global__ void gemv_##name##_##NR(GEMV_PARAMS) { gemv_blocks<T, NR>(GEMV_ARGS); }
#define GEMV_ALL(M, name, T) M(name, T, 1) M(name, T, 2) M(name, T, 4) M(name, T, 8)
GEMV_ALL(GEMV_HALF, f16, T_F16)
GEMV_ALL(GEMV_HALF, bf16, T_BF16)
GEMV_ALL(GEMV_BLOCKS, f32, T_F32)
GEMV_ALL(GEMV_BLOCKS, q4_0, T_Q4_0)
GEMV_ALL(GEMV_BLOCKS, q4_1, T_Q4_1)
GEMV_ALL(GEMV_BLOCKS, q5_0, T_Q5_0)
GEMV_ALL(GEMV_BLOCKS, q5_1, T_Q5_1)
GEMV_ALL(GEMV_BLOCKS, q8_0, T_Q8_0)
GEMV_ALL(GEMV_BLOCKS, q4_k, T_Q4_K)
GEMV_ALL(GEMV_BLOCKS, q5_k, T_Q5_K)
GEMV_ALL(GEMV_BLOCKS, q6_k, T_Q6_K)

// ---- prefill / large batch: tensor-core tiles -----------------------------
//
//   block tile: 64 rows of x (m) × 64 rows of w (n), k in steps of 32
//   4 warps as 2×2, each a 32×32 sub-tile = 2 (m16) × 4 (n8) mma tiles
//   shared tiles As[64][40], Bs[64][40] of 16-bit values; the 8-element pad
//   makes the fragment loads (row g, column pair t) hit 32 distinct banks.
#define BM 64
#define BN 64
#define BK 32
#define LDS (BK + 8)

template <bool BF>
static __device__ __forceinline__ uint32_t pack2(float a, float b) {
    uint16_t lo = BF ? f2bf(a) : f2h(a), hi = BF ? f2bf(b) : f2h(b);
    return (uint32_t)lo | ((uint32_t)hi << 16);
}

template <bool BF>
static __device__ __forceinline__ void mma16816(float* c, const uint32_t* a, const uint32_t* b) {
#ifdef SLUICE_EMU // the CPU emulator (emu/runtime.h) has no tensor cores
    emu::mma16816(BF, c, a, b);
#else
    if (BF) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
#endif
}

// Tile loads go global → registers (converted to 16-bit pairs) → shared, so
// the next tile's global reads overlap the current tile's mma work.
struct Stage {
    uint32_t a[8]; // 4 float4 of x  → 8 packed pairs
    uint32_t b[8]; // 16 weight values → 8 packed pairs
};

template <int T, bool BF>
static __device__ __forceinline__ void load_stage(Stage& s, const float* x, const uint8_t* w, int n, int in, int out,
                                                  long long rowBytes, int m0, int o0, int k0) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < 4; i++) { // x: 64 rows × 8 float4
        const int idx = tid + 128 * i, r = idx >> 3, c4 = idx & 7;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (m0 + r < n) v = *(const float4*)(x + (size_t)(m0 + r) * in + k0 + 4 * c4);
        s.a[2 * i] = pack2<BF>(v.x, v.y);
        s.a[2 * i + 1] = pack2<BF>(v.z, v.w);
    }
    // w: 64 rows × 2 halves of 16 elements; thread → (row tid/2, half tid%2)
    const int r = tid >> 1, h = tid & 1;
    if (o0 + r >= out) {
#pragma unroll
        for (int j = 0; j < 8; j++) s.b[j] = 0;
        return;
    }
    const uint8_t* row = w + (size_t)(o0 + r) * rowBytes;
    if (T == T_F16 || T == T_BF16) {
        const uint4* p = (const uint4*)(row + 2 * (size_t)(k0 + 16 * h));
        uint4 u = p[0], v = p[1];
        s.b[0] = u.x, s.b[1] = u.y, s.b[2] = u.z, s.b[3] = u.w;
        s.b[4] = v.x, s.b[5] = v.y, s.b[6] = v.z, s.b[7] = v.w;
    } else {
        float f[16];
        dequant16<T>(row, k0 + 16 * h, f);
#pragma unroll
        for (int j = 0; j < 8; j++) s.b[j] = pack2<BF>(f[2 * j], f[2 * j + 1]);
    }
}

static __device__ __forceinline__ void store_stage(const Stage& s, uint16_t (*As)[LDS], uint16_t (*Bs)[LDS]) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int idx = tid + 128 * i, r = idx >> 3, c4 = idx & 7;
        *(uint2*)&As[r][4 * c4] = make_uint2(s.a[2 * i], s.a[2 * i + 1]);
    }
    const int r = tid >> 1, h = tid & 1;
    uint4* d = (uint4*)&Bs[r][16 * h];
    d[0] = make_uint4(s.b[0], s.b[1], s.b[2], s.b[3]);
    d[1] = make_uint4(s.b[4], s.b[5], s.b[6], s.b[7]);
}

template <int T, bool BF>
static __device__ void mma_gemm(float* dst, const float* x, const uint8_t* w, const float* bias, int n, int in,
                                int out, long long rowBytes) {
    __shared__ __align__(16) uint16_t As[BM][LDS];
    __shared__ __align__(16) uint16_t Bs[BN][LDS];
    const int o0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

    Stage s;
    load_stage<T, BF>(s, x, w, n, in, out, rowBytes, m0, o0, 0);
    for (int k0 = 0; k0 < in; k0 += BK) {
        store_stage(s, As, Bs);
        __syncthreads();
        if (k0 + BK < in) load_stage<T, BF>(s, x, w, n, in, out, rowBytes, m0, o0, k0 + BK);
#pragma unroll
        for (int ks = 0; ks < BK; ks += 16) {
            uint32_t a[2][4], b[4][2];
#pragma unroll
            for (int mt = 0; mt < 2; mt++) {
                const int rb = wm + 16 * mt;
                a[mt][0] = *(const uint32_t*)&As[rb + g][ks + 2 * t];
                a[mt][1] = *(const uint32_t*)&As[rb + g + 8][ks + 2 * t];
                a[mt][2] = *(const uint32_t*)&As[rb + g][ks + 2 * t + 8];
                a[mt][3] = *(const uint32_t*)&As[rb + g + 8][ks + 2 * t + 8];
            }
#pragma unroll
            for (int nt = 0; nt < 4; nt++) {
                const int nb = wn + 8 * nt;
                b[nt][0] = *(const uint32_t*)&Bs[nb + g][ks + 2 * t];
                b[nt][1] = *(const uint32_t*)&Bs[nb + g][ks + 2 * t + 8];
            }
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int nt = 0; nt < 4; nt++) mma16816<BF>(acc[mt][nt], a[mt], b[nt]);
        }
        __syncthreads();
    }
    // C fragment: c0,c1 at (row g, cols 2t, 2t+1); c2,c3 at row g+8.
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int i = m0 + wm + 16 * mt + g + (e >= 2 ? 8 : 0);
                const int o = o0 + wn + 8 * nt + 2 * t + (e & 1);
                if (i < n && o < out) dst[(size_t)i * out + o] = acc[mt][nt][e] + (bias ? bias[o] : 0.f);
            }
}

#define MMA(name, T, BF)                                                                                   \
    extern "C" __global__ void __launch_bounds__(128) mma_##name(float* dst, const float* x, const uint8_t* w, \
                                                                 const float* bias, int n, int in, int out,  \
                                                                 long long rowBytes) {                        \
        mma_gemm<T, BF>(dst, x, w, bias, n, in, out, rowBytes);                                                \
    }
MMA(f16, T_F16, false)
MMA(bf16, T_BF16, true)
MMA(q4_0, T_Q4_0, false)
MMA(q4_1, T_Q4_1, false)
MMA(q5_0, T_Q5_0, false)
MMA(q5_1, T_Q5_1, false)
MMA(q8_0, T_Q8_0, false)
MMA(q4_k, T_Q4_K, false)
MMA(q5_k, T_Q5_K, false)
MMA(q6_k, T_Q6_K, false)
