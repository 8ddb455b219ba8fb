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

// ---- paged_decode_<hd> ------------------------------------------------------
//
// Paged decode attention, flash-decoding at every batch size (the kernel
// above keeps the multi-row prefill chunks of head sizes up to 128).
//
// Work item = up to NQ query vectors of one sequence and one KV head (the
// query heads that read that KV head, row after row: query vector v is row
// v / group, head g·group + v % group). Grid: (items, kvHeads, partitions),
// 128 threads. Partition z covers the fixed context range
//
//	[z·DP, min((z+1)·DP, ctx))          ctx = last query row's position + 1
//
// and a block past its item's context returns at once. With splits > 0
// (few items: a batch of one or a few rows, whose items alone would leave
// most SMs idle) DP gives way to decode_part's shorter partitions, about
// splits of them per item, so that a batch-1 step runs kvHeads·splits
// blocks rather than kvHeads·⌈ctx/256⌉; the grid's z is then at least
// splits whatever the context (blocks past it return), so that a decode
// step's launch, and its CUDA graph, stay the same as the context grows.
// Inside a partition:
//
//	scores   thread groups of TG lanes take one position each; a lane holds
//	         NV 16-byte K vectors (8 halves) of it and the matching slices of
//	         the NQ query vectors in registers; the TG partial dots meet by
//	         shuffles, and the scores of the partition wait in shared memory
//	softmax  one warp per query vector: exact max and sum over the partition
//	PV       the same lanes read V in 16-byte vectors and accumulate P·V in
//	         registers; groups meet by shuffles, warps through shared memory
//
// K and V are never staged in shared memory: each 16-byte vector is read
// once from global memory by the lane that uses it. A single-partition item
// writes its output; otherwise each partition writes its unnormalised
// accumulator and (m, l), and the last partition of the item to finish (an
// atomic count per item and KV head, reset by that block) merges them:
//
//	out = Σ_z e^(m_z − M)·acc_z / Σ_z e^(m_z − M)·l_z,   M = max_z m_z
//
// Fused kv_write (fused = 1): this step's K and V rows are read from k and v
// (F32, rounded to the cache's F16) instead of the cache, and the item that
// holds a row's first query vector writes them into the cache from its
// partition 0. The host fuses only when every sequence's rows have
// consecutive positions and their slots are the block table's, so that
//
//	position p ≥ first new position P0  ⇔  row first + (p − P0) of the step.
#define DP 256 // positions per partition (decodePart in attention.go), at most
#define DMIN 64 // the shortest partition (decodeMinPart in attention.go)
#define DNT 128
#define DU 2 // positions a thread group loads per pass of the score loop

// decode_part is the partition length for a context of ctx positions: DP,
// or with splits > 0 ctx cut into splits ranges rounded up to a multiple of
// DMIN, within [DMIN, DP] (attention.go's decodePartLen).
static __device__ __forceinline__ int decode_part(int ctx, int splits) {
    if (splits <= 0) return DP;
    const int dp = ((ctx + splits - 1) / splits + DMIN - 1) / DMIN * DMIN;
    return min(DP, max(DMIN, dp));
}

template <int HD, int TG>
struct kvLanes {
    static constexpr int vecs = HD / 8;            // 16-byte vectors of one head's row
    static constexpr int nv = (vecs + TG - 1) / TG; // vectors per lane
};

// load_row8 reads 8 halves of one K or V row: from the F16 cache at slot,
// or, for a position of this step (row ≥ 0 when fused), the F32 input
// rounded as kv_write would store it.
static __device__ __forceinline__ void load_row8(float* f, const uint16_t* cache, const float* in, size_t slot, int row,
                                                 int kvCols, int col) {
    if (row >= 0) {
        const float4* p = (const float4*)(in + (size_t)row * kvCols + col);
        const float4 a = p[0], b = p[1];
        const float x[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int j = 0; j < 8; j++) f[j] = h2f(f2h(x[j]));
        return;
    }
    const uint4 w = *(const uint4*)(cache + slot * kvCols + col);
    const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        f[2 * j] = h2f(u[j] & 0xffff);
        f[2 * j + 1] = h2f(u[j] >> 16);
    }
}

// SINK (paged_decode_sink_<hd>, gpt-oss): each query head h's softmax has
// one more logit, sinks[h], with no value; it joins the maximum and the
// denominator where the output is written:
//
//	out = Σ_z e^(m_z − M)·acc_z / (Σ_z e^(m_z − M)·l_z + e^(sink − M)),   M = max(sink, max_z m_z)
template <int HD, int TG, int NQ, bool SINK>
static __device__ __forceinline__ void paged_decode(
    float* out, const float* q, uint16_t* kc, uint16_t* vc, const float* kin, const float* vin, int fused,
    const int* items,     // [items][4]: sequence, first query vector, query vectors, first partial
    const int* seqs,      // [seqs][3]: block-table offset in blocks, first row, rows
    const int* blocks, const int* positions, int heads, int kvHeads, int blockSize, float scale, float* part,
    int* counters, int splits, const float* sinks) {
    constexpr int NV = kvLanes<HD, TG>::nv, VECS = kvLanes<HD, TG>::vecs, GPB = DNT / TG, PF = NQ * HD + 2 * NQ;
    __shared__ float sc[NQ][DP];
    __shared__ float red[DNT / 32][NQ][HD];
    __shared__ float mS[NQ], lS[NQ];
    __shared__ int last;

    const int* it = items + 4 * blockIdx.x;
    const int sqi = it[0], qv0 = it[1], nqv = it[2], poff = it[3];
    const int g = blockIdx.y, group = heads / kvHeads, z = blockIdx.z;
    const int* sq = seqs + 3 * sqi;
    const int* bt = blocks + sq[0];
    const int qCols = heads * HD, kvCols = kvHeads * HD;
    const int ctx = positions[(qv0 + nqv - 1) / group] + 1, dp = decode_part(ctx, splits),
              nparts = (ctx + dp - 1) / dp;
    if (z >= nparts) return; // the whole block: no barrier is passed
    const int lo = z * dp, hi = min(ctx, lo + dp);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, grp = tid / TG, li = tid % TG;
    const int newRow0 = sq[1], newLo = fused ? positions[newRow0] : 0x7fffffff;

    if (fused && z == 0) {
        // this item's rows (those whose first query vector it holds) into the cache
        for (int idx = tid; idx < nqv * VECS; idx += DNT) {
            const int i = idx / VECS, v = idx % VECS;
            if ((qv0 + i) % group != 0) continue;
            const int r = (qv0 + i) / group, pos = positions[r];
            const size_t slot = (size_t)bt[pos / blockSize] * blockSize + pos % blockSize;
            const size_t src = (size_t)r * kvCols + g * HD + 8 * v, dst = slot * kvCols + g * HD + 8 * v;
            uint32_t kw[4], vw[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                kw[j] = f2h(kin[src + 2 * j]) | (uint32_t)f2h(kin[src + 2 * j + 1]) << 16;
                vw[j] = f2h(vin[src + 2 * j]) | (uint32_t)f2h(vin[src + 2 * j + 1]) << 16;
            }
            *(uint4*)(kc + dst) = make_uint4(kw[0], kw[1], kw[2], kw[3]);
            *(uint4*)(vc + dst) = make_uint4(vw[0], vw[1], vw[2], vw[3]);
        }
    }

    // q in registers: lane li holds vectors li, li+TG, ... of each query vector, pre-scaled
    float qr[NQ][NV * 8];
    int qpos[NQ];
#pragma unroll
    for (int i = 0; i < NQ; i++) {
        qpos[i] = -1;
        const int qv = qv0 + i, r = qv / group, h = g * group + qv % group;
        if (i < nqv) qpos[i] = positions[r];
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int v = li + TG * j;
            if (i < nqv && v < VECS) {
                const float4* p = (const float4*)(q + (size_t)r * qCols + (size_t)h * HD + 8 * v);
                const float4 a = p[0], b = p[1];
                qr[i][8 * j] = a.x * scale, qr[i][8 * j + 1] = a.y * scale, qr[i][8 * j + 2] = a.z * scale;
                qr[i][8 * j + 3] = a.w * scale, qr[i][8 * j + 4] = b.x * scale, qr[i][8 * j + 5] = b.y * scale;
                qr[i][8 * j + 6] = b.z * scale, qr[i][8 * j + 7] = b.w * scale;
            } else {
#pragma unroll
                for (int e = 0; e < 8; e++) qr[i][8 * j + e] = 0.f;
            }
        }
    }

    // scores: the loop bound is the block's, so every lane reaches each
    // shuffle; each group takes DU positions a pass, their K loads issued
    // before any of them is used (more bytes in flight per lane)
    for (int p0 = lo; p0 < hi; p0 += DU * GPB) {
        float kf[DU][NV][8];
#pragma unroll
        for (int u = 0; u < DU; u++) {
            const int pos = p0 + grp + u * GPB;
            if (pos >= hi) continue;
            const size_t slot = (size_t)bt[pos / blockSize] * blockSize + pos % blockSize;
            const int row = pos >= newLo ? newRow0 + pos - newLo : -1;
#pragma unroll
            for (int j = 0; j < NV; j++)
                if (li + TG * j < VECS) load_row8(kf[u][j], kc, kin, slot, row, kvCols, g * HD + 8 * (li + TG * j));
        }
#pragma unroll
        for (int u = 0; u < DU; u++) {
            const int pos = p0 + grp + u * GPB;
            float s[NQ];
#pragma unroll
            for (int i = 0; i < NQ; i++) s[i] = 0.f;
            if (pos < hi) {
#pragma unroll
                for (int j = 0; j < NV; j++) {
                    if (li + TG * j >= VECS) break;
#pragma unroll
                    for (int i = 0; i < NQ; i++)
#pragma unroll
                        for (int e = 0; e < 8; e++) s[i] += qr[i][8 * j + e] * kf[u][j][e];
                }
            }
#pragma unroll
            for (int o = TG / 2; o > 0; o >>= 1)
#pragma unroll
                for (int i = 0; i < NQ; i++) s[i] += __shfl_xor_sync(0xffffffffu, s[i], o);
            if (li == 0 && pos < hi)
#pragma unroll
                for (int i = 0; i < NQ; i++) sc[i][pos - lo] = pos <= qpos[i] ? s[i] : -CUDART_INF_F;
        }
    }
    __syncthreads();

    // softmax over the partition, one warp per query vector
    const int n = hi - lo;
    for (int i = warp; i < NQ; i += DNT / 32) {
        float m = -CUDART_INF_F;
        for (int p = lane; p < n; p += 32) m = fmaxf(m, sc[i][p]);
        m = warp_max(m);
        float l = 0.f;
        for (int p = lane; p < n; p += 32) {
            const float e = m == -CUDART_INF_F ? 0.f : __expf(sc[i][p] - m);
            sc[i][p] = e;
            l += e;
        }
        l = warp_sum(l);
        if (lane == 0) mS[i] = m, lS[i] = l;
    }
    __syncthreads();

    // P·V: each lane accumulates its vectors over its group's positions
    float acc[NQ][NV * 8];
#pragma unroll
    for (int i = 0; i < NQ; i++)
#pragma unroll
        for (int e = 0; e < NV * 8; e++) acc[i][e] = 0.f;
#pragma unroll 2
    for (int pos = lo + grp; pos < hi; pos += GPB) {
        const size_t slot = (size_t)bt[pos / blockSize] * blockSize + pos % blockSize;
        const int row = pos >= newLo ? newRow0 + pos - newLo : -1;
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int v = li + TG * j;
            if (v >= VECS) break;
            float vf[8];
            load_row8(vf, vc, vin, slot, row, kvCols, g * HD + 8 * v);
#pragma unroll
            for (int i = 0; i < NQ; i++) {
                const float w = sc[i][pos - lo];
#pragma unroll
                for (int e = 0; e < 8; e++) acc[i][8 * j + e] += w * vf[e];
            }
        }
    }
    // the groups of one warp meet by shuffles, the warps in shared memory
#pragma unroll
    for (int o = TG; o < 32; o <<= 1)
#pragma unroll
        for (int i = 0; i < NQ; i++)
#pragma unroll
            for (int e = 0; e < NV * 8; e++) acc[i][e] += __shfl_xor_sync(0xffffffffu, acc[i][e], o);
    if (lane < TG) {
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int v = li + TG * j;
            if (v >= VECS) break;
#pragma unroll
            for (int i = 0; i < NQ; i++)
#pragma unroll
                for (int e = 0; e < 8; e++) red[warp][i][8 * v + e] = acc[i][8 * j + e];
        }
    }
    __syncthreads();

    float* pp = part + ((size_t)(poff + z) * kvHeads + g) * PF;
    for (int idx = tid; idx < nqv * HD; idx += DNT) {
        const int i = idx / HD, d = idx % HD;
        float a = 0.f;
#pragma unroll
        for (int w = 0; w < DNT / 32; w++) a += red[w][i][d];
        if (nparts == 1) {
            const int qv = qv0 + i, r = qv / group, h = g * group + qv % group;
            float den = lS[i];
            if constexpr (SINK) {
                const float sk = sinks[h], M = fmaxf(mS[i], sk), w = __expf(mS[i] - M);
                a *= w;
                den = den * w + __expf(sk - M);
            }
            out[(size_t)r * qCols + (size_t)h * HD + d] = a / den;
        } else {
            pp[i * HD + d] = a;
        }
    }
    if (nparts == 1) return;
    if (tid < nqv) {
        pp[NQ * HD + tid] = mS[tid];
        pp[NQ * HD + NQ + tid] = lS[tid];
    }
    // publish the partials, then count this partition in; the last one merges
    __threadfence();
    __syncthreads();
    int* cnt = counters + (size_t)blockIdx.x * kvHeads + g;
    if (tid == 0) last = atomicAdd(cnt, 1) == nparts - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const float* p0 = part + ((size_t)poff * kvHeads + g) * PF;
    const size_t zs = (size_t)kvHeads * PF; // from one partition's partial to the next
    for (int idx = tid; idx < nqv * HD; idx += DNT) {
        const int i = idx / HD, d = idx % HD;
        const int qv = qv0 + i, r = qv / group, h = g * group + qv % group;
        float M = SINK ? sinks[h] : -CUDART_INF_F;
        for (int zz = 0; zz < nparts; zz++) M = fmaxf(M, __ldcg(p0 + zz * zs + NQ * HD + i));
        float num = 0.f, den = SINK ? __expf(sinks[h] - M) : 0.f;
        for (int zz = 0; zz < nparts; zz++) {
            const float* pz = p0 + zz * zs;
            const float m = __ldcg(pz + NQ * HD + i);
            if (m == -CUDART_INF_F) continue; // the partition is past this query vector's position
            const float w = __expf(m - M);
            num += w * __ldcg(pz + i * HD + d);
            den += w * __ldcg(pz + NQ * HD + NQ + i);
        }
        out[(size_t)r * qCols + (size_t)h * HD + d] = num / den;
    }
    if (tid == 0) *cnt = 0;
}

// One entry point per head size: HD, lanes per position (TG) and query
// vectors per item (NQ) are chosen so that a lane's query slices take at
// most 64 registers (NQ·8·NV); attention.go's decodeShape mirrors this table.
#define PAGED_DECODE(hd, tg, nq)                                                                                        \
    extern "C" __global__ void __launch_bounds__(DNT)                                                                   \
        paged_decode_##hd(float* out, const float* q, uint16_t* kc, uint16_t* vc, const float* kin, const float* vin,   \
                          int fused, const int* items, const int* seqs, const int* blocks, const int* positions,        \
                          int heads, int kvHeads, int blockSize, float scale, float* part, int* counters,               \
                          int splits) {                                                                                 \
        paged_decode<hd, tg, nq, false>(out, q, kc, vc, kin, vin, fused, items, seqs, blocks, positions, heads, kvHeads,\
                                        blockSize, scale, part, counters, splits, nullptr);                            \
    }                                                                                                                   \
    extern "C" __global__ void __launch_bounds__(DNT) paged_decode_sink_##hd(                                           \
        float* out, const float* q, uint16_t* kc, uint16_t* vc, const float* kin, const float* vin, int fused,          \
        const int* items, const int* seqs, const int* blocks, const int* positions, int heads, int kvHeads,             \
        int blockSize, float scale, float* part, int* counters, int splits, const float* sinks) {                      \
        paged_decode<hd, tg, nq, true>(out, q, kc, vc, kin, vin, fused, items, seqs, blocks, positions, heads, kvHeads, \
                                       blockSize, scale, part, counters, splits, sinks);                               \
    }
PAGED_DECODE(64, 8, 8)
PAGED_DECODE(80, 8, 4)
PAGED_DECODE(96, 8, 4)
PAGED_DECODE(128, 16, 8)
PAGED_DECODE(256, 16, 4)

// ---- paged_prefill_<hd> -----------------------------------------------------
//
// Prefill and mixed chunks on tensor cores (flash attention over the block
// table). Work item = up to 64 query vectors of one sequence and KV head
// (query vector v: row v / group, head g·group + v % group), a warp per 16
// of them; grid (items, kvHeads), 128 threads. The context is walked in
// tiles of 64 positions, K and V copied F16 into shared memory (V
// transposed, so that the P·V B fragments are pairs of consecutive
// positions); per warp and tile, with mma.sync m16n8k16 (f16 in, f32
// accumulation):
//
//	S = Q·Kᵀ   Q's A fragments stay in registers for the whole walk
//	causal mask: position p counts for query vector v when p ≤ position(v)
//	online softmax per row (running max m, sum l, rescale e^(m_old − m_new))
//	O += P·V   P's C fragments are re-packed as A fragments in place
//
// F16 rounding of q·scale and of P keeps results within ~1e-3 of the F32
// reference; K and V are F16 in the cache anyway.
#define PF_T 64

// SINK (paged_prefill_sink_<hd>, gpt-oss): each query head h's sink logit
// sinks[h] joins the row's maximum and sum where the output is written,
// as in paged_decode: out = O·e^(m − M) / (l·e^(m − M) + e^(sink − M)),
// M = max(m, sink).
template <int HD, bool SINK>
static __device__ __forceinline__ void paged_prefill(float* out, const float* q, const uint16_t* kc,
                                                     const uint16_t* vc, const int* items, const int* seqs,
                                                     const int* blocks, const int* positions, int heads, int kvHeads,
                                                     int blockSize, float scale, const float* sinks) {
    constexpr int KS = HD / 16, NT_O = HD / 8, NT_S = PF_T / 8;
    __shared__ __align__(16) uint16_t Ks[PF_T][HD + 8];
    __shared__ __align__(16) uint16_t Vt[HD][PF_T + 8];
    const int* it = items + 4 * blockIdx.x;
    const int sqi = it[0], qv0 = it[1], nqv = it[2];
    const int g = blockIdx.y, group = heads / kvHeads;
    const int* bt = blocks + seqs[3 * sqi];
    const int qCols = heads * HD, kvCols = kvHeads * HD;
    const int ctx = positions[(qv0 + nqv - 1) / group] + 1;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gr = lane >> 2, t = lane & 3;

    // this lane's two rows of the warp's 16 query vectors: gr and gr + 8
    int qpos[2];
    const float* qrow[2];
#pragma unroll
    for (int h2 = 0; h2 < 2; h2++) {
        const int i = 16 * warp + gr + 8 * h2, qv = qv0 + i, r = qv / group, h = g * group + qv % group;
        qpos[h2] = i < nqv ? positions[r] : -1;
        qrow[h2] = q + (size_t)(i < nqv ? r : 0) * qCols + (size_t)h * HD;
    }
    uint32_t qa[KS][4];
#pragma unroll
    for (int kk = 0; kk < KS; kk++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float* p = qrow[e & 1] + 16 * kk + 2 * t + ((e >> 1) << 3);
            qa[kk][e] = pack2<false>(p[0] * scale, p[1] * scale);
        }
    float o[NT_O][4];
#pragma unroll
    for (int n = 0; n < NT_O; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) o[n][e] = 0.f;
    float m[2] = {-CUDART_INF_F, -CUDART_INF_F}, l[2] = {0.f, 0.f};

    for (int t0 = 0; t0 < ctx; t0 += PF_T) {
        const int tn = min(PF_T, ctx - t0);
        for (int idx = tid; idx < PF_T * (HD / 8); idx += 128) {
            const int p = idx / (HD / 8), d = 8 * (idx % (HD / 8)), pos = t0 + p;
            uint4 kw = make_uint4(0, 0, 0, 0), vw = make_uint4(0, 0, 0, 0);
            if (p < tn) {
                const size_t off = ((size_t)bt[pos / blockSize] * blockSize + pos % blockSize) * kvCols + g * HD + d;
                kw = *(const uint4*)(kc + off);
                vw = *(const uint4*)(vc + off);
            }
            *(uint4*)&Ks[p][d] = kw;
            const uint32_t vu[4] = {vw.x, vw.y, vw.z, vw.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                Vt[d + 2 * j][p] = (uint16_t)(vu[j] & 0xffff);
                Vt[d + 2 * j + 1][p] = (uint16_t)(vu[j] >> 16);
            }
        }
        __syncthreads();
        // S = Q·Kᵀ: n8 tile j holds positions t0 + 8j .. t0 + 8j + 7
        float s[NT_S][4];
#pragma unroll
        for (int j = 0; j < NT_S; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) s[j][e] = 0.f;
#pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                uint32_t b[2];
                b[0] = *(const uint32_t*)&Ks[8 * j + gr][16 * kk + 2 * t];
                b[1] = *(const uint32_t*)&Ks[8 * j + gr][16 * kk + 2 * t + 8];
                mma16816<false>(s[j], qa[kk], b);
            }
        }
        // mask and the tile's row maxima (rows gr: e 0,1; gr + 8: e 2,3)
        float tmax[2] = {-CUDART_INF_F, -CUDART_INF_F};
#pragma unroll
        for (int j = 0; j < NT_S; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int pos = t0 + 8 * j + 2 * t + (e & 1);
                if (pos >= t0 + tn || pos > qpos[e >> 1]) s[j][e] = -CUDART_INF_F;
                tmax[e >> 1] = fmaxf(tmax[e >> 1], s[j][e]);
            }
        float corr[2], rs[2] = {0.f, 0.f};
#pragma unroll
        for (int h2 = 0; h2 < 2; h2++) {
            tmax[h2] = fmaxf(tmax[h2], __shfl_xor_sync(0xffffffffu, tmax[h2], 1));
            tmax[h2] = fmaxf(tmax[h2], __shfl_xor_sync(0xffffffffu, tmax[h2], 2));
            const float mn = fmaxf(m[h2], tmax[h2]);
            corr[h2] = m[h2] == -CUDART_INF_F ? 0.f : __expf(m[h2] - mn);
            m[h2] = mn;
        }
#pragma unroll
        for (int j = 0; j < NT_S; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float p = s[j][e] == -CUDART_INF_F ? 0.f : __expf(s[j][e] - m[e >> 1]);
                s[j][e] = p;
                rs[e >> 1] += p;
            }
#pragma unroll
        for (int h2 = 0; h2 < 2; h2++) {
            rs[h2] += __shfl_xor_sync(0xffffffffu, rs[h2], 1);
            rs[h2] += __shfl_xor_sync(0xffffffffu, rs[h2], 2);
            l[h2] = l[h2] * corr[h2] + rs[h2];
        }
#pragma unroll
        for (int n = 0; n < NT_O; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) o[n][e] *= corr[e >> 1];
        // O += P·V: the C fragments of S tiles 2kk and 2kk+1 are P's A fragment
        // for positions 16kk .. 16kk + 15
#pragma unroll
        for (int kk = 0; kk < PF_T / 16; kk++) {
            uint32_t pa[4];
            pa[0] = pack2<false>(s[2 * kk][0], s[2 * kk][1]);
            pa[1] = pack2<false>(s[2 * kk][2], s[2 * kk][3]);
            pa[2] = pack2<false>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            pa[3] = pack2<false>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
            for (int n = 0; n < NT_O; n++) {
                uint32_t b[2];
                b[0] = *(const uint32_t*)&Vt[8 * n + gr][16 * kk + 2 * t];
                b[1] = *(const uint32_t*)&Vt[8 * n + gr][16 * kk + 2 * t + 8];
                mma16816<false>(o[n], pa, b);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int n = 0; n < NT_O; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int h2 = e >> 1, i = 16 * warp + gr + 8 * h2;
            if (i >= nqv) continue;
            const int qv = qv0 + i, r = qv / group, h = g * group + qv % group;
            float num = o[n][e], den = l[h2];
            if constexpr (SINK) {
                const float sk = sinks[h], M = fmaxf(m[h2], sk), w = m[h2] == -CUDART_INF_F ? 0.f : __expf(m[h2] - M);
                num *= w;
                den = den * w + __expf(sk - M);
            }
            out[(size_t)r * qCols + (size_t)h * HD + 8 * n + 2 * t + (e & 1)] = num / den;
        }
}

#define PAGED_PREFILL(hd)                                                                                            \
    extern "C" __global__ void __launch_bounds__(128)                                                                 \
        paged_prefill_##hd(float* out, const float* q, const uint16_t* kc, const uint16_t* vc, const int* items,     \
                           const int* seqs, const int* blocks, const int* positions, int heads, int kvHeads,          \
                           int blockSize, float scale) {                                                              \
        paged_prefill<hd, false>(out, q, kc, vc, items, seqs, blocks, positions, heads, kvHeads, blockSize, scale,    \
                                 nullptr);                                                                            \
    }                                                                                                                 \
    extern "C" __global__ void __launch_bounds__(128) paged_prefill_sink_##hd(                                        \
        float* out, const float* q, const uint16_t* kc, const uint16_t* vc, const int* items, const int* seqs,         \
        const int* blocks, const int* positions, int heads, int kvHeads, int blockSize, float scale,                  \
        const float* sinks) {                                                                                         \
        paged_prefill<hd, true>(out, q, kc, vc, items, seqs, blocks, positions, heads, kvHeads, blockSize, scale,     \
                                sinks);                                                                               \
    }
PAGED_PREFILL(64)
PAGED_PREFILL(80)
PAGED_PREFILL(96)
PAGED_PREFILL(128)
