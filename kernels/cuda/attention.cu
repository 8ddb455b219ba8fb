// Paged causal attention over the F16 KV cache, for decode rows and prefill
// chunks alike (kernels/cpu/attention.go is the reference).
//
// Work item = up to R consecutive rows of one sequence × one KV head; its
// Q = R·group query vectors (all query heads that read this KV head, for
// each row) share every K/V tile loaded, which is what makes GQA cheap.
// The host sizes R so that Q ≤ QMAX. Grid: (items, kvHeads), 128 threads.
//
// The context is walked in tiles of 32 positions, each position found
// through the sequence's block table:
//
//	slot(p) = blocks[p / blockSize]·blockSize + p % blockSize
//
// with an online softmax (running max m, running sum l, rescale factor
// exp(m_old − m_new)) so no score vector of context length is materialised.
// Row at position P sees positions [0, P].
//
// Split context (flash-decoding): when a step has too few work items to fill
// the GPU (decode at small batch), grid.z splits each item's context into
// ranges of splitLen positions. Each split writes its unnormalised output
// and its (m, l) to part; the last split of a work item to finish (an
// atomic count per item and KV head, reset by that block for the next
// launch) merges them:
//
//	out = Σ_z e^(m_z − M)·acc_z / Σ_z e^(m_z − M)·l_z,   M = max_z m_z
//
// so split or not, attention is one launch.
#include <math_constants.h>

#include "common.cuh"

#define QMAX 16
#define HDMAX 128
#define TILE 32
#define NT 128
// floats of one split's partial result: acc[QMAX][HDMAX], m[QMAX], l[QMAX]
#define PART (QMAX * HDMAX + 2 * QMAX)

// combine_splits merges the splits' partial results pp[z·PART] of one work
// item and KV head into out. The partials were written by other blocks of
// this launch: they are read through L2 (__ldcg), never a stale L1 line.
static __device__ void combine_splits(float* out, const float* pp, int splits, int row0, int nq, int group, int g,
                                      int qCols, int headDim) {
    for (int idx = threadIdx.x; idx < nq * headDim; idx += NT) {
        const int qi = idx / headDim, d = idx % headDim;
        float M = -CUDART_INF_F;
        for (int z = 0; z < splits; z++) M = fmaxf(M, __ldcg(pp + z * PART + QMAX * HDMAX + qi));
        float num = 0.f, den = 0.f;
        for (int z = 0; z < splits; z++) {
            const float* pz = pp + z * PART;
            const float m = __ldcg(pz + QMAX * HDMAX + qi);
            if (m == -CUDART_INF_F) continue; // the split saw no position of this row
            const float w = __expf(m - M);
            num += w * __ldcg(pz + qi * HDMAX + d);
            den += w * __ldcg(pz + QMAX * HDMAX + QMAX + qi);
        }
        const int r = row0 + qi / group, h = g * group + qi % group;
        out[(size_t)r * qCols + (size_t)h * headDim + d] = num / den;
    }
}

extern "C" __global__ void __launch_bounds__(NT)
    paged_attention(float* out, const float* q, const uint16_t* kc, const uint16_t* vc,
                    const int* items,     // [items][3]: sequence, first row, rows
                    const int* seqBlocks, // [seqs]: offset of each block table in blocks
                    const int* blocks, const int* positions, int heads, int kvHeads, int headDim, int blockSize,
                    float scale, float* part, int splitLen, int* counters) {
    __shared__ float qs[QMAX][HDMAX];
    __shared__ float ks[TILE][HDMAX + 1]; // +1: lanes read different rows of one column
    __shared__ float vs[TILE][HDMAX];
    __shared__ float ps[QMAX][TILE];
    __shared__ float corr[QMAX], lsum[QMAX], mrun[QMAX];
    __shared__ int qpos[QMAX];

    const int seq = items[3 * blockIdx.x], row0 = items[3 * blockIdx.x + 1], nrows = items[3 * blockIdx.x + 2];
    const int g = blockIdx.y, group = heads / kvHeads, nq = nrows * group;
    const int qCols = heads * headDim, kvCols = kvHeads * headDim;
    const int* bt = blocks + seqBlocks[seq];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

    // query vector qi = (row row0 + qi/group, head g·group + qi%group), pre-scaled
    for (int idx = tid; idx < nq * headDim; idx += NT) {
        const int qi = idx / headDim, d = idx % headDim;
        const int r = row0 + qi / group, h = g * group + qi % group;
        qs[qi][d] = q[(size_t)r * qCols + (size_t)h * headDim + d] * scale;
    }
    if (tid < nq) {
        qpos[tid] = positions[row0 + tid / group];
        mrun[tid] = -CUDART_INF_F;
        lsum[tid] = 0.f;
    }
    // this block's positions [lo, ctx); rows are in position order
    const int lo = blockIdx.z * splitLen;
    const int ctx = min(positions[row0 + nrows - 1] + 1, lo + splitLen);

    float acc[QMAX * HDMAX / NT];
#pragma unroll
    for (int i = 0; i < QMAX * HDMAX / NT; i++) acc[i] = 0.f;

    for (int t0 = lo; t0 < ctx; t0 += TILE) {
        const int tn = min(TILE, ctx - t0);
        // K and V tile: tn positions × headDim, 8 halves per load
        for (int idx = tid; idx < tn * (headDim / 8); idx += NT) {
            const int p = idx / (headDim / 8), d = 8 * (idx % (headDim / 8)), pos = t0 + p;
            const size_t slot = (size_t)bt[pos / blockSize] * blockSize + pos % blockSize;
            const size_t off = slot * kvCols + (size_t)g * headDim + d;
            uint4 kw = *(const uint4*)(kc + off), vw = *(const uint4*)(vc + off);
            uint32_t ku[4] = {kw.x, kw.y, kw.z, kw.w}, vu[4] = {vw.x, vw.y, vw.z, vw.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                ks[p][d + 2 * j] = h2f(ku[j] & 0xffff);
                ks[p][d + 2 * j + 1] = h2f(ku[j] >> 16);
                vs[p][d + 2 * j] = h2f(vu[j] & 0xffff);
                vs[p][d + 2 * j + 1] = h2f(vu[j] >> 16);
            }
        }
        __syncthreads();
        // scores: warp w takes query vectors w, w+4, ...; lane = position in tile
        for (int qi = warp; qi < nq; qi += NT / 32) {
            const bool valid = lane < tn && t0 + lane <= qpos[qi];
            float s = -CUDART_INF_F;
            if (valid) {
                s = 0.f;
                for (int d = 0; d < headDim; d++) s += qs[qi][d] * ks[lane][d];
            }
            const float mOld = mrun[qi], mNew = fmaxf(mOld, warp_max(s));
            const float p = valid ? __expf(s - mNew) : 0.f;
            const float sum = warp_sum(p);
            ps[qi][lane] = p;
            if (lane == 0) {
                const float c = mOld == -CUDART_INF_F ? 0.f : __expf(mOld - mNew);
                corr[qi] = c;
                lsum[qi] = lsum[qi] * c + sum;
                mrun[qi] = mNew;
            }
        }
        __syncthreads();
        // out[qi][d] = out·corr + Σ_p P[qi][p]·V[p][d]; thread owns idx = tid + NT·i
#pragma unroll
        for (int i = 0; i < QMAX * HDMAX / NT; i++) {
            const int idx = tid + NT * i;
            if (idx < nq * headDim) {
                const int qi = idx / headDim, d = idx % headDim;
                float a = acc[i] * corr[qi];
                for (int p = 0; p < tn; p++) a += ps[qi][p] * vs[p][d];
                acc[i] = a;
            }
        }
        __syncthreads();
    }
    __syncthreads(); // a split past every row's position never ran the loop
    if (gridDim.z > 1) {
        float* pp = part + ((size_t)(blockIdx.x * kvHeads + g) * gridDim.z + blockIdx.z) * PART;
#pragma unroll
        for (int i = 0; i < QMAX * HDMAX / NT; i++) {
            const int idx = tid + NT * i;
            if (idx < nq * headDim) pp[(idx / headDim) * HDMAX + idx % headDim] = acc[i];
        }
        if (tid < nq) {
            pp[QMAX * HDMAX + tid] = mrun[tid];
            pp[QMAX * HDMAX + QMAX + tid] = lsum[tid];
        }
        // publish the partials, then count this split in; the last one merges
        __threadfence();
        __syncthreads();
        __shared__ int last;
        int* cnt = counters + blockIdx.x * kvHeads + g;
        if (tid == 0) last = atomicAdd(cnt, 1) == (int)gridDim.z - 1;
        __syncthreads();
        if (!last) return;
        __threadfence();
        combine_splits(out, part + (size_t)(blockIdx.x * kvHeads + g) * gridDim.z * PART, gridDim.z, row0, nq, group, g,
                       qCols, headDim);
        if (tid == 0) *cnt = 0;
        return;
    }
#pragma unroll
    for (int i = 0; i < QMAX * HDMAX / NT; i++) {
        const int idx = tid + NT * i;
        if (idx < nq * headDim) {
            const int qi = idx / headDim, d = idx % headDim;
            const int r = row0 + qi / group, h = g * group + qi % group;
            out[(size_t)r * qCols + (size_t)h * headDim + d] = acc[i] / lsum[qi];
        }
    }
}
