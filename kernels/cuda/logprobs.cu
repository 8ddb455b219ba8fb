// Logprobs on the device, for the rows whose requests ask for them: one
// block (1024 threads) per such row computes log_softmax's normalizer and
// the row's k ≤ 20 best tokens, so only the sampled token's logprob and k
// (id, logprob) pairs cross to the host, never the row. The values are the
// engine's (engine/logprobs.go): logZ = max + log Σ exp(l − max), the sum in
// float64 over float32 differences (its association is a tree here, a loop
// there: logZ agrees to ~1e-15 relative), logprob = (float)(l − logZ); the
// top k are by (logit desc, id asc), so ties go to the lower id, and they
// are found by k block-wide arg-max passes, each over the tokens ranked
// below the previous pick (k ≤ 20 passes over the row: no sort, no shared
// candidate list, exact on ties).
#include <math_constants.h>

#include "common.cuh"

#define LPT 1024
#define LP_MAXK 20
#define LP_WORDS (1 + 2 * LP_MAXK)

// LogprobReq is one request row (cuda.LogprobRow): the logits row, the
// sampled token and k, 4 int32 of the step table.
struct LogprobReq {
    int row, tok, k, pad;
};

// lp_key orders tokens as engine.topLogprobs ranks them: the logit's
// ordered bits above, the complemented id below (the lower id ranks higher
// on a tie). −0 counts as +0, as the host's comparison sees them equal.
static __device__ __forceinline__ unsigned long long lp_key(float f, int id) {
    if (f == 0.f) f = 0.f;
    uint32_t u = __float_as_uint(f);
    u = (u & 0x80000000u) ? ~u : u | 0x80000000u;
    return ((unsigned long long)u << 32) | (unsigned long long)(~(uint32_t)id);
}

struct LpMaxF {
    static __device__ float ident() { return -CUDART_INF_F; }
    static __device__ float op(float a, float b) { return fmaxf(a, b); }
};
struct LpSumD {
    static __device__ double ident() { return 0.0; }
    static __device__ double op(double a, double b) { return a + b; }
};
struct LpMaxK {
    static __device__ unsigned long long ident() { return 0ull; }
    static __device__ unsigned long long op(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
};

// lp_reduce combines every thread's v over the block; red holds 32 values.
template <typename R, typename T>
static __device__ T lp_reduce(T v, T* red) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = R::op(v, __shfl_xor_sync(0xffffffffu, v, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = red[threadIdx.x];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v = R::op(v, __shfl_xor_sync(0xffffffffu, v, o));
        if (threadIdx.x == 0) red[0] = v;
    }
    __syncthreads();
    v = red[0];
    __syncthreads();
    return v;
}

// topk_logprobs writes LP_WORDS int32 per request: the sampled token's
// logprob (float bits), then k (id, logprob bits) pairs, best first, and
// id −1 in the pairs beyond k or beyond the vocabulary.
extern "C" __global__ void __launch_bounds__(LPT)
    topk_logprobs(int* out, const float* logits, const LogprobReq* reqs, int vocab) {
    __shared__ float redf[32];
    __shared__ double redd[32];
    __shared__ unsigned long long redk[32];
    const int tid = threadIdx.x;
    const LogprobReq q = reqs[blockIdx.x];
    const float* l = logits + (size_t)q.row * vocab;
    int* o = out + (size_t)blockIdx.x * LP_WORDS;

    float m = -CUDART_INF_F;
    for (int i = tid; i < vocab; i += LPT) m = fmaxf(m, l[i]);
    m = lp_reduce<LpMaxF>(m, redf);
    double s = 0;
    for (int i = tid; i < vocab; i += LPT) s += exp((double)__fsub_rn(l[i], m));
    s = lp_reduce<LpSumD>(s, redd);
    const double logZ = (double)m + log(s);
    if (tid == 0) o[0] = (int)__float_as_uint((float)((double)l[q.tok] - logZ));

    unsigned long long prev = ~0ull; // every token ranks below it
    for (int j = 0; j < LP_MAXK; j++) {
        unsigned long long best = 0; // no token: every real key is above 0
        if (j < q.k) {
            for (int i = tid; i < vocab; i += LPT) {
                const unsigned long long key = lp_key(l[i], i);
                if (key < prev && key > best) best = key;
            }
            best = lp_reduce<LpMaxK>(best, redk);
        }
        if (tid == 0) {
            const int id = best == 0 ? -1 : (int)~(uint32_t)best;
            o[1 + 2 * j] = id;
            o[2 + 2 * j] = id < 0 ? 0 : (int)__float_as_uint((float)((double)l[id] - logZ));
        }
        prev = best;
    }
}
