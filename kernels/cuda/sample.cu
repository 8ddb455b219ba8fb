// Token sampling on the device, one block (1024 threads) per logits row, so
// that only token ids cross to the host.
//
//   greedy (temperature ≤ 0 or topK == 1): argmax, lowest id on ties
//   otherwise: weights e_i = exp((l_i − max)/T); keep logits ≥ τ where τ is
//   the larger of the top-k threshold (the largest τ with #{l ≥ τ} ≥ k) and
//   the top-p threshold (the largest τ whose kept mass ≥ p of the top-k
//   mass), both found by bisection on the logit value; then pick the first
//   id whose running sum of kept weights (in id order) exceeds u·Σ kept.
//   u ∈ [0, 1) comes from the host, so a seed reproduces a run.
#include <math_constants.h>

#include "common.cuh"

#define SNT 1024
#define BISECT 32

struct SampleParams {
    float temperature, topP, u;
    int topK;
};

// block_sum reduces v over the block; every thread gets the result.
static __device__ float block_sum(float v, float* red) {
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    v = threadIdx.x < 32 ? red[threadIdx.x] : 0.f;
    if (threadIdx.x < 32) v = warp_sum(v);
    if (threadIdx.x == 0) red[0] = v;
    __syncthreads();
    v = red[0];
    __syncthreads();
    return v;
}

static __device__ float block_max(float v, float* red) {
    v = warp_max(v);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    v = threadIdx.x < 32 ? red[threadIdx.x] : -CUDART_INF_F;
    if (threadIdx.x < 32) v = warp_max(v);
    if (threadIdx.x == 0) red[0] = v;
    __syncthreads();
    v = red[0];
    __syncthreads();
    return v;
}

// count and mass of logits ≥ tau (mass weighted by e_i)
static __device__ void kept(const float* l, int vocab, float tau, float mx, float invT, float* red, float* cnt,
                            float* mass) {
    float c = 0.f, m = 0.f;
    for (int i = threadIdx.x; i < vocab; i += SNT)
        if (l[i] >= tau) c += 1.f, m += __expf((l[i] - mx) * invT);
    *cnt = block_sum(c, red);
    *mass = block_sum(m, red);
}

extern "C" __global__ void __launch_bounds__(SNT)
    sample(int* outTok, const float* logits, const SampleParams* params, int vocab) {
    __shared__ float red[32];
    __shared__ float scan[SNT];
    __shared__ int pick, amaxIdx;
    const float* l = logits + (size_t)blockIdx.x * vocab;
    const SampleParams sp = params[blockIdx.x];

    float best = -CUDART_INF_F, lo = CUDART_INF_F;
    int bi = 0x7fffffff;
    for (int i = threadIdx.x; i < vocab; i += SNT) {
        if (l[i] > best) best = l[i], bi = i;
        lo = fminf(lo, l[i]);
    }
    const float mx = block_max(best, red);
    const float mn = -block_max(-lo, red);
    if (threadIdx.x == 0) amaxIdx = 0x7fffffff;
    __syncthreads();
    if (best == mx) atomicMin(&amaxIdx, bi);
    __syncthreads();
    if (sp.temperature <= 0.f || sp.topK == 1 || mx == mn) {
        if (threadIdx.x == 0) outTok[blockIdx.x] = amaxIdx;
        return;
    }
    const float invT = 1.f / sp.temperature;
    float cnt, mass, tau = mn;
    if (sp.topK > 0 && sp.topK < vocab) {
        float a = mn, b = mx; // #{l ≥ a} ≥ k always holds
        for (int it = 0; it < BISECT; it++) {
            const float mid = 0.5f * (a + b);
            kept(l, vocab, mid, mx, invT, red, &cnt, &mass);
            if (cnt >= (float)sp.topK) a = mid; else b = mid;
        }
        tau = a;
    }
    if (sp.topP > 0.f && sp.topP < 1.f) {
        kept(l, vocab, tau, mx, invT, red, &cnt, &mass);
        const float want = sp.topP * mass;
        float a = tau, b = mx;
        for (int it = 0; it < BISECT; it++) {
            const float mid = 0.5f * (a + b);
            float c2, m2;
            kept(l, vocab, mid, mx, invT, red, &c2, &m2);
            if (m2 >= want) a = mid; else b = mid;
        }
        tau = a;
    }
    // Each thread owns a contiguous run of ids; an exclusive scan of the runs'
    // kept mass finds the run holding the target, which the owner walks.
    const int per = (vocab + SNT - 1) / SNT, beg = threadIdx.x * per, end = min(vocab, beg + per);
    float own = 0.f;
    for (int i = beg; i < end; i++)
        if (l[i] >= tau) own += __expf((l[i] - mx) * invT);
    scan[threadIdx.x] = own;
    if (threadIdx.x == 0) pick = 0x7fffffff;
    __syncthreads();
    for (int off = 1; off < SNT; off <<= 1) {
        const float v = threadIdx.x >= off ? scan[threadIdx.x - off] : 0.f;
        __syncthreads();
        scan[threadIdx.x] += v;
        __syncthreads();
    }
    const float total = scan[SNT - 1], target = sp.u * total;
    float run = scan[threadIdx.x] - own;
    if (own > 0.f && run <= target && target < run + own) {
        for (int i = beg; i < end; i++) {
            if (l[i] < tau) continue;
            run += __expf((l[i] - mx) * invT);
            if (target < run) {
                atomicMin(&pick, i);
                break;
            }
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) outTok[blockIdx.x] = pick != 0x7fffffff ? pick : amaxIdx;
}
