// Matrix multiply dst[i, o] = Σ_k x[i, k]·w[o, k] (+ bias[o]): x is F32
// [n, in], w is [out, in] in its stored block layout, dst is F32 [n, out].
//
// Two shapes of kernel:
//   gemv_*  decode (n ≤ 8): a block of 128 threads takes R consecutive
//           rows of w and splits their length across all its threads, so
//           even a 4096-row matrix spreads over ~1,000 blocks; each thread
//           keeps ≥ 8 independent 16-byte weight loads in flight (F16/BF16)
//           and NR row accumulators per weight row, and the block reduces
//           them in a fixed order (results do not depend on n or on the
//           launch's other matrices). Loads are branchless: row and chunk
//           indices are clamped into the matrix and out-of-range products
//           dropped by a select. One launch may serve up to three matrices
//           of the same x, may fold the RMSNorm that made x into its
//           prologue (normW: gemv_fold_norm), and may fuse its consumer into the
//           epilogue:
//             res  the residual Add that follows (res[i, o] += dst[i, o])
//             glu  gate and up as segments 0 and 1: each block takes the
//                  same rows of both and also writes glu = silu(gate)·up
//           Bandwidth-bound: only the weight stream should count.
//   skinny* 9–64 rows: a warp per 8 weight rows against every row of x, each
//           weight read once (below).
//   mma_*   prefill and large batches: 64×64 output tiles, k-steps of 32,
//           tensor cores through mma.sync m16n8k16 (bf16 for BF16 weights,
//           f16 for the rest: quantized blocks are dequantized into the
//           shared-memory tile). x is rounded to the same 16-bit type.
// in must be a multiple of 32 (the host checks).
#include "common.cuh"

// ---- decode: R rows per block, split along k across the block -----------

#define GEMV_NT 128
#define GEMV_WARPS (GEMV_NT / 32)

// A GEMV launch serves up to three matrices that share x (the backend fuses
// consecutive MatMuls of one input: q, k, v; gate, up): blocks are numbered
// across their rows in order, and each finds its matrix.
struct GemvSeg {
    float* dst;
    const uint8_t* w;
    const float* bias;
    int out;
};

#define GEMV_PARAMS                                                                                              \
    const float *x, int n, int in, long long rowBytes, float *d0, const uint8_t *w0, const float *b0, int out0,  \
        float *d1, const uint8_t *w1, const float *b1, int out1, float *d2, const uint8_t *w2, const float *b2,   \
        int out2, float *res, float *glu, const float *normW, float eps, float *normOut
#define GEMV_ARGS x, n, in, rowBytes, d0, w0, b0, out0, d1, w1, b1, out1, d2, w2, b2, out2, res, glu, normW, eps, normOut

// The RMSNorm the backend folds into the GEMV that reads its output: with
// normOut set, the GEMV's input is rmsnorm(x)·normW, row by row, each block
// computing the scales itself (gemv_fold_norm) and block 0 also writing the
// normalised rows to normOut for later readers. Without it every scale is 1
// and normW is the backend's buffer of ones: the loads multiply by both
// either way, so the hot loop has no branch (x·1·1 is x, bit for bit).
//
// Every row count takes the same arithmetic, so that a row's output does
// not depend on how many rows share the launch (design invariant 6: a
// sequence decoded alone and inside a batch gets the same logits). The dot
// products are Σ x·nw·w and the scale multiplies the reduced sums,
// Σ x·s·nw·w = s·Σ x·nw·w; a thread's sum of squares is float over the
// elements it loads, in the order it loads them, with every rounding
// pinned (gemv_sq4, gemv_sq8: explicit FMAs, no contraction left to nvcc,
// which contracts differently where the code around differs), and double
// across threads. Batch 1 (NR = 1: GEMV_FOLD) takes the squares from the very x
// loads its dot products make, so its weight stream starts with no pass
// over x and no barrier; more rows have no registers for NR more sums in
// the loop and take them in a pass before it (gemv_sumsq), element for
// element the same.
static __device__ __forceinline__ float gemv_sq4(float4 a) {
    return __fmaf_rn(a.w, a.w, __fmaf_rn(a.z, a.z, __fmaf_rn(a.y, a.y, __fmul_rn(a.x, a.x))));
}
static __device__ __forceinline__ float gemv_sq8(const float (&v)[8]) {
    float sq = __fmul_rn(v[0], v[0]);
#pragma unroll
    for (int k = 1; k < 8; k++) sq = __fmaf_rn(v[k], v[k], sq);
    return sq;
}

// gemv_sumsq is the pass before the loop: thread t's sums of squares of
// the units (UNIT elements: 8 for gemv_half's chunks, 32 for gemv_blocks')
// t, t+GEMV_NT, ..., as the loop would take them.
template <int NR, int UNIT>
static __device__ __forceinline__ void gemv_sumsq(const float* x, int n, int in, float* ss) {
    for (int u = threadIdx.x; u < in / UNIT; u += GEMV_NT)
#pragma unroll
        for (int r = 0; r < NR; r++) {
            const float* xp = x + (size_t)min(r, n - 1) * in + UNIT * u;
            if constexpr (UNIT == 8) {
                const float4 a = ((const float4*)xp)[0], b = ((const float4*)xp)[1];
                const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
                ss[r] = __fadd_rn(ss[r], gemv_sq8(v));
            } else {
#pragma unroll
                for (int q = 0; q < UNIT / 4; q++) ss[r] = __fadd_rn(ss[r], gemv_sq4(((const float4*)xp)[q]));
            }
        }
}

#define GEMV_FOLD(NR, GLU) ((NR) == 1 && !(GLU))

// gemv_fold_norm turns the threads' sums of squares ss into the rows'
// scales (1 without normOut), and block 0 writes normOut.
template <int NR>
static __device__ __forceinline__ void gemv_fold_norm(const float* ss, const float* x, int n, int in,
                                                      const float* normW, float eps, float* normOut, float* scale) {
    __shared__ double part[GEMV_WARPS][NR];
    if (normOut == nullptr) {
#pragma unroll
        for (int r = 0; r < NR; r++) scale[r] = 1.f;
        return;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int r = 0; r < NR; r++) {
        double v = ss[r];
#pragma unroll
        for (int k = 16; k > 0; k >>= 1) v += __shfl_xor_sync(0xffffffffu, v, k);
        if (lane == 0) part[warp][r] = v;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < NR; r++) {
        double t = 0;
#pragma unroll
        for (int w = 0; w < GEMV_WARPS; w++) t += part[w][r];
        scale[r] = (float)(1.0 / sqrt(t / (double)in + (double)eps));
    }
    if (blockIdx.x == 0)
        for (int c = threadIdx.x; c < in; c += GEMV_NT)
#pragma unroll
            for (int r = 0; r < NR; r++)
                if (r < n) normOut[(size_t)r * in + c] = x[(size_t)r * in + c] * scale[r] * normW[c];
}

// gemv_rows finds the block's matrix and its rows: R rows a block, or with
// glu R/2 rows of gate (segment 0) and the same R/2 of up (segment 1).
// rowp[j] is row j's first byte (clamped into its matrix), seg[j] its
// segment, o[j] its output index. False when the block has none.
template <int R, bool GLU>
static __device__ __forceinline__ bool gemv_rows(GEMV_PARAMS, GemvSeg* sg, const uint8_t** rowp, int* o) {
    int blk = blockIdx.x;
    if (GLU) {
        const int nb = (out0 + R / 2 - 1) / (R / 2);
        if (blk >= nb) return false;
        sg[0] = {d0, w0, b0, out0};
        sg[1] = {d1, w1, b1, out1};
#pragma unroll
        for (int j = 0; j < R; j++) {
            const int h = j >= R / 2, oo = (R / 2) * blk + j % (R / 2);
            o[j] = oo;
            rowp[j] = sg[h].w + (size_t)min(oo, out0 - 1) * rowBytes;
        }
        return true;
    }
    const int n0 = (out0 + R - 1) / R, n1 = (out1 + R - 1) / R, n2 = (out2 + R - 1) / R;
    if (blk < n0) {
        sg[0] = {d0, w0, b0, out0};
    } else if ((blk -= n0) < n1) {
        sg[0] = {d1, w1, b1, out1};
    } else if ((blk -= n1) < n2) {
        sg[0] = {d2, w2, b2, out2};
    } else {
        return false;
    }
#pragma unroll
    for (int j = 0; j < R; j++) {
        o[j] = R * blk + j;
        rowp[j] = sg[0].w + (size_t)min(o[j], sg[0].out - 1) * rowBytes;
    }
    return true;
}

// gemv_finish reduces every thread's acc[R][NR] over the block (warp
// shuffles, then the warps in order through shared memory), scales row r's
// sums by scale[r] (the folded norm's, else 1) and stores the rows that
// exist, with the fused epilogues.
template <int R, int NR, bool GLU>
static __device__ __forceinline__ void gemv_finish(float (*acc)[NR], const float* scale, const GemvSeg* sg,
                                                   const int* o, int n, float* res, float* glu) {
    __shared__ float red[GEMV_WARPS][R * NR];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int j = 0; j < R; j++)
#pragma unroll
        for (int r = 0; r < NR; r++) {
            const float v = warp_sum(acc[j][r]);
            if (lane == 0) red[warp][j * NR + r] = v;
        }
    __syncthreads();
    const int rows = GLU ? R / 2 : R;
    for (int i = threadIdx.x; i < rows * NR; i += GEMV_NT) {
        const int j = i / NR, r = i % NR;
        if (r >= n) continue;
        float s = 0.f;
#pragma unroll
        for (int w = 0; w < GEMV_WARPS; w++) s += red[w][i];
        s *= scale[r];
        const int oo = o[j], out = sg[0].out;
        if (oo >= out) continue;
        s += sg[0].bias ? sg[0].bias[oo] : 0.f;
        const size_t at = (size_t)r * out + oo;
        if (GLU) {
            float u = 0.f;
#pragma unroll
            for (int w = 0; w < GEMV_WARPS; w++) u += red[w][(j + R / 2) * NR + r];
            u = u * scale[r] + (sg[1].bias ? sg[1].bias[oo] : 0.f);
            sg[0].dst[at] = s;
            sg[1].dst[at] = u;
            glu[at] = s / (1.f + expf(-s)) * u;
        } else {
            sg[0].dst[at] = s;
            if (res) res[at] += s;
        }
    }
}

// gemv_half: F16/BF16 weights, 8 elements (16 bytes) per load. Each thread
// takes chunks c, c+128, ... of every row; U chunks per step give U·R
// independent loads in flight.
template <int T, int NR, int R, bool GLU>
static __device__ void gemv_half(GEMV_PARAMS) {
    GemvSeg sg[2];
    const uint8_t* rowp[R];
    int o[R];
    if (!gemv_rows<R, GLU>(GEMV_ARGS, sg, rowp, o)) return;
    float fsc[NR], ss[NR]; // the rows' norm scales; the thread's sums of squares
#pragma unroll
    for (int r = 0; r < NR; r++) fsc[r] = 1.f, ss[r] = 0.f;
    if constexpr (!GEMV_FOLD(NR, GLU)) {
        if (normOut != nullptr) gemv_sumsq<NR, 8>(x, n, in, ss);
        gemv_fold_norm<NR>(ss, x, n, in, normW, eps, normOut, fsc);
    }
    constexpr int U = R >= 8 ? 1 : 8 / R;
    const int chunks = in / 8; // uint4 per row
    float acc[R][NR];
#pragma unroll
    for (int j = 0; j < R; j++)
#pragma unroll
        for (int r = 0; r < NR; r++) acc[j][r] = 0.f;
    for (int c0 = threadIdx.x; c0 < chunks; c0 += U * GEMV_NT) {
        uint4 v[U][R];
        int cc[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            cc[u] = min(c0 + u * GEMV_NT, chunks - 1);
#pragma unroll
            for (int j = 0; j < R; j++) v[u][j] = ((const uint4*)rowp[j])[cc[u]];
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const bool live = c0 + u * GEMV_NT < chunks;
            float xs[NR][8];
#pragma unroll
            for (int r = 0; r < NR; r++) {
                const float4* xp = (const float4*)(x + (size_t)min(r, n - 1) * in + 8 * cc[u]);
                const float4 a = xp[0], b = xp[1];
                xs[r][0] = a.x, xs[r][1] = a.y, xs[r][2] = a.z, xs[r][3] = a.w;
                xs[r][4] = b.x, xs[r][5] = b.y, xs[r][6] = b.z, xs[r][7] = b.w;
                const float4* np = (const float4*)(normW + 8 * cc[u]);
                const float4 na = np[0], nb = np[1];
                const float nw[8] = {na.x, na.y, na.z, na.w, nb.x, nb.y, nb.z, nb.w};
                if constexpr (GEMV_FOLD(NR, GLU)) {
                    const float sq = gemv_sq8(xs[r]); // before the select: a branch around it spills
                    ss[r] = __fadd_rn(ss[r], live ? sq : 0.f);
                }
#pragma unroll
                for (int k = 0; k < 8; k++) xs[r][k] = xs[r][k] * nw[k];
            }
#pragma unroll
            for (int j = 0; j < R; j++) {
                const uint32_t w4[4] = {v[u][j].x, v[u][j].y, v[u][j].z, v[u][j].w};
                float wv[8];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const uint16_t lo = (uint16_t)(w4[k] & 0xffff), hi = (uint16_t)(w4[k] >> 16);
                    wv[2 * k] = T == T_F16 ? h2f(lo) : bf2f(lo);
                    wv[2 * k + 1] = T == T_F16 ? h2f(hi) : bf2f(hi);
                }
#pragma unroll
                for (int r = 0; r < NR; r++) {
                    float s = 0.f;
#pragma unroll
                    for (int k = 0; k < 8; k++) s += xs[r][k] * wv[k];
                    acc[j][r] += live ? s : 0.f;
                }
            }
        }
    }
    if constexpr (GEMV_FOLD(NR, GLU)) gemv_fold_norm<NR>(ss, x, n, in, normW, eps, normOut, fsc);
    gemv_finish<R, NR, GLU>(acc, fsc, sg, o, n, res, glu);
}

// gemv_blocks: any type dequant16 knows, 32-element units (one block of the
// 32-element formats, an eighth of a K-quant super-block) per thread and
// step: R units in flight, each a few dozen bytes in small loads (blocks of
// 18 or 34 bytes are only 2-byte aligned).
template <int T, int NR, int R, bool GLU>
static __device__ void gemv_blocks(GEMV_PARAMS) {
    GemvSeg sg[2];
    const uint8_t* rowp[R];
    int o[R];
    if (!gemv_rows<R, GLU>(GEMV_ARGS, sg, rowp, o)) return;
    float fsc[NR], ss[NR]; // the rows' norm scales; the thread's sums of squares
#pragma unroll
    for (int r = 0; r < NR; r++) fsc[r] = 1.f, ss[r] = 0.f;
    if constexpr (!GEMV_FOLD(NR, GLU)) {
        if (normOut != nullptr) gemv_sumsq<NR, 32>(x, n, in, ss);
        gemv_fold_norm<NR>(ss, x, n, in, normW, eps, normOut, fsc);
    }
    constexpr int U = 1;
    const int units = in / 32;
    float acc[R][NR];
#pragma unroll
    for (int j = 0; j < R; j++)
#pragma unroll
        for (int r = 0; r < NR; r++) acc[j][r] = 0.f;
    for (int u0 = threadIdx.x; u0 < units; u0 += U * GEMV_NT) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int uu = min(u0 + u * GEMV_NT, units - 1);
            const bool live = u0 + u * GEMV_NT < units;
            const int k0 = 32 * uu;
#pragma unroll
            for (int j = 0; j < R; j++) {
                float wv[32];
                dequant16<T>(rowp[j], k0, wv);
                dequant16<T>(rowp[j], k0 + 16, wv + 16);
#pragma unroll
                for (int r = 0; r < NR; r++) {
                    const float4* xp = (const float4*)(x + (size_t)min(r, n - 1) * in + k0);
                    const float4* np = (const float4*)(normW + k0);
                    float s = 0.f;
#pragma unroll
                    for (int q = 0; q < 8; q++) {
                        float4 a = xp[q];
                        const float4 nw = np[q];
                        // the unit's squares, taken with the first weight row's loads
                        if (GEMV_FOLD(NR, GLU) && j == 0) ss[r] = __fadd_rn(ss[r], live ? gemv_sq4(a) : 0.f);
                        a.x = a.x * nw.x, a.y = a.y * nw.y, a.z = a.z * nw.z, a.w = a.w * nw.w;
                        s += a.x * wv[4 * q] + a.y * wv[4 * q + 1] + a.z * wv[4 * q + 2] + a.w * wv[4 * q + 3];
                    }
                    acc[j][r] += live ? s : 0.f;
                }
            }
        }
    }
    if constexpr (GEMV_FOLD(NR, GLU)) gemv_fold_norm<NR>(ss, x, n, in, normW, eps, normOut, fsc);
    gemv_finish<R, NR, GLU>(acc, fsc, sg, o, n, res, glu);
}

// Rows per block: 4 for F16/BF16 (8 loads of 16 bytes in flight per thread),
// 2 for the block formats; glu variants take that many of gate and of up,
// and exist for one row of x only (batch-1 decode, where a launch saved
// counts; larger batches run SwiGLU on its own). MB1 is the batch-1 GEMV's
// fewest resident blocks per SM: 8 keeps F16/BF16's at 64 registers (the
// folded norm's sums would take it to 72 and 7 blocks), without a spill; 1
// leaves ptxas its own register heuristic (a minimum of 1 given explicitly
// lets it take up to 255).
#define GEMV_LB_1 __launch_bounds__(GEMV_NT)
#define GEMV_LB_8 __launch_bounds__(GEMV_NT, 8)
#define GEMV_K(kind, name, T, NR, R, GLU, fn, MB)                            \
    extern "C" __global__ void GEMV_LB_##MB kind##name##_##NR(GEMV_PARAMS) { \
        fn<T, NR, R, GLU>(GEMV_ARGS);                                        \
    }
#define GEMV_ALL(name, T, R, fn, MB1)                                                                             \
    GEMV_K(gemv_, name, T, 1, R, false, fn, MB1) GEMV_K(gemv_, name, T, 2, R, false, fn, 1)                       \
        GEMV_K(gemv_, name, T, 4, R, false, fn, 1) GEMV_K(gemv_, name, T, 8, R, false, fn, 1)                     \
            GEMV_K(gemv_glu_, name, T, 1, 2 * R, true, fn, 1)
GEMV_ALL(f16, T_F16, 4, gemv_half, 8)
GEMV_ALL(bf16, T_BF16, 4, gemv_half, 8)
GEMV_ALL(f32, T_F32, 2, gemv_blocks, 1)
GEMV_ALL(q4_0, T_Q4_0, 2, gemv_blocks, 1)
GEMV_ALL(q4_1, T_Q4_1, 2, gemv_blocks, 1)
GEMV_ALL(q5_0, T_Q5_0, 2, gemv_blocks, 1)
GEMV_ALL(q5_1, T_Q5_1, 2, gemv_blocks, 1)
GEMV_ALL(q8_0, T_Q8_0, 2, gemv_blocks, 1)
GEMV_ALL(q4_k, T_Q4_K, 2, gemv_blocks, 1)
GEMV_ALL(q5_k, T_Q5_K, 2, gemv_blocks, 1)
GEMV_ALL(q6_k, T_Q6_K, 2, gemv_blocks, 1)
GEMV_ALL(mxfp4, T_MXFP4, 2, gemv_blocks, 1)

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
MMA(mxfp4, T_MXFP4, false)

// ---- the 9–64-row middle: skinny tensor-core GEMM -------------------------
//
// skinny<M>_*: batches of 9 to 64 rows, too many for the GEMV (its cost
// grows with every row of x it re-reads per weight row) and too few for the
// 64×64 tiles above (out/64 blocks leave most SMs idle). A block of 4 warps
// takes 32 weight rows, each warp 8 of them (one n8 mma tile) against all M
// rows of x (M/16 m16 tiles), over the whole k:
//
//	per chunk of SK_KC k:  W fragments  global → registers (16 k-steps'
//	                       worth, all issued before the block waits)
//	                       x rows       global → 16-bit shared tile, shared
//	                                    by the 4 warps
//	                       mma.sync m16n8k16 per m tile and k-step
//
// so every weight byte is read once, straight into the fragment that uses
// it (B fragment of lane (g, t): row g, k pairs 2t and 2t+8; quantized rows
// are dequantized 16 elements at a time and the lane keeps its four), and
// out/32 blocks (128 for a 4096-row matrix) carry 4 KB of loads in flight a
// warp. Results depend only on the row's own products (no split k).
#define SK_KC 256
#define SK_STEPS (SK_KC / 16)

template <int T, bool BF>
static __device__ __forceinline__ void skinny_b(uint32_t* b, const uint8_t* row, int k, int t) {
    if (T == T_F16 || T == T_BF16) {
        const uint32_t* p = (const uint32_t*)(row + 2 * (size_t)k);
        b[0] = p[t];
        b[1] = p[t + 4];
    } else {
        float f[16];
        dequant16<T>(row, k, f);
        // selects, not f[2t]: a register array indexed at run time would live in local memory
        float a0 = f[0], a1 = f[1], a8 = f[8], a9 = f[9];
#pragma unroll
        for (int j = 1; j < 4; j++)
            if (t == j) a0 = f[2 * j], a1 = f[2 * j + 1], a8 = f[2 * j + 8], a9 = f[2 * j + 9];
        b[0] = pack2<BF>(a0, a1);
        b[1] = pack2<BF>(a8, a9);
    }
}

template <int T, bool BF, int MT>
static __device__ void skinny_gemm(float* dst, const float* x, const uint8_t* w, const float* bias, int n, int in,
                                   int out, long long rowBytes) {
    __shared__ __align__(16) uint16_t xs[16 * MT][SK_KC + 8]; // +8: fragment rows on distinct banks
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int o0 = blockIdx.x * 32 + warp * 8;
    const uint8_t* row = w + (size_t)min(o0 + g, out - 1) * rowBytes; // clamped: its products are dropped
    float acc[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[mt][e] = 0.f;
    for (int kc = 0; kc < in; kc += SK_KC) {
        const int steps = min(SK_KC, in - kc) / 16;
        uint32_t b[SK_STEPS][2];
#pragma unroll
        for (int s = 0; s < SK_STEPS; s++)
            if (s < steps) skinny_b<T, BF>(b[s], row, kc + 16 * s, t);
        const int c4s = 4 * steps; // float4 per row of this chunk
        for (int idx = threadIdx.x; idx < 16 * MT * c4s; idx += 128) {
            const int r = idx / c4s, c4 = idx % c4s;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (r < n) v = *(const float4*)(x + (size_t)r * in + kc + 4 * c4);
            *(uint2*)&xs[r][4 * c4] = make_uint2(pack2<BF>(v.x, v.y), pack2<BF>(v.z, v.w));
        }
        __syncthreads();
#pragma unroll
        for (int s = 0; s < SK_STEPS; s++) {
            if (s >= steps) break;
            const int ks = 16 * s;
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                uint32_t a[4];
                a[0] = *(const uint32_t*)&xs[16 * mt + g][ks + 2 * t];
                a[1] = *(const uint32_t*)&xs[16 * mt + g + 8][ks + 2 * t];
                a[2] = *(const uint32_t*)&xs[16 * mt + g][ks + 2 * t + 8];
                a[3] = *(const uint32_t*)&xs[16 * mt + g + 8][ks + 2 * t + 8];
                mma16816<BF>(acc[mt], a, b[s]);
            }
        }
        __syncthreads();
    }
    // C fragment: c0,c1 at (x row g, weight rows 2t, 2t+1); c2,c3 at x row g+8
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int i = 16 * mt + g + (e >= 2 ? 8 : 0), o = o0 + 2 * t + (e & 1);
            if (i < n && o < out) dst[(size_t)i * out + o] = acc[mt][e] + (bias ? bias[o] : 0.f);
        }
}

#define SKINNY(M, name, T, BF)                                                                                     \
    extern "C" __global__ void __launch_bounds__(128)                                                              \
        skinny##M##_##name(float* dst, const float* x, const uint8_t* w, const float* bias, int n, int in, int out, \
                           long long rowBytes) {                                                                   \
        skinny_gemm<T, BF, M / 16>(dst, x, w, bias, n, in, out, rowBytes);                                         \
    }
#define SKINNY_ALL(M)                                                                                              \
    SKINNY(M, f16, T_F16, false)                                                                                   \
    SKINNY(M, bf16, T_BF16, true)                                                                                  \
    SKINNY(M, q4_0, T_Q4_0, false)                                                                                 \
    SKINNY(M, q4_1, T_Q4_1, false)                                                                                 \
    SKINNY(M, q5_0, T_Q5_0, false)                                                                                 \
    SKINNY(M, q5_1, T_Q5_1, false)                                                                                 \
    SKINNY(M, q8_0, T_Q8_0, false)                                                                                 \
    SKINNY(M, q4_k, T_Q4_K, false)                                                                                 \
    SKINNY(M, q5_k, T_Q5_K, false)                                                                                 \
    SKINNY(M, q6_k, T_Q6_K, false)                                                                                 \
    SKINNY(M, mxfp4, T_MXFP4, false)
SKINNY_ALL(16)
SKINNY_ALL(32)
SKINNY_ALL(64)
