// Token sampling on the device, one block (1024 threads) per logits row, so
// that only token ids cross to the host. It makes the choice the engine's
// host sampler (engine/sample.go, llama.cpp's chain) makes for the same
// draw u, step for step:
//
//   logit_bias  each listed token's bias added (float32, as the host's adjust
//               in engine/controls.go does before it samples)
//   penalties   repetition (÷ or × by the logit's sign), then count·frequency
//               + presence subtracted, on the listed tokens (float32, as the host)
//   greedy      temperature ≤ 0: argmax, lowest id on ties
//   top-k       the k best by (logit desc, id asc): radix select of the k-th
//               largest logit, the candidates at or above it sorted in shared
//               memory; then top-p, min-p, softmax and the draw run over that
//               sorted list in float64 in the host's order (bit for bit but
//               for the last bit of exp)
//   no top-k    the whole vocabulary in the host's order (the argmax swapped
//               to the front), min-p applied; softmax and draw by a block scan
//               in float64 (sums associate differently from the host's loop:
//               the token can differ only when u lies within ~1e-16 of a
//               boundary)
// A row the device does not decide gets id −1 and the host samples it from
// its logits: top-p without top-k, and top-k sets of more than SCAP
// candidates (ties included).
#include <math_constants.h>

#include "common.cuh"

#define SNT 1024
#define SCAP 1024

// SampleParams is one row's settings: 12 int32 of the step table
// (cuda.SampleParams). Penalized tokens are (id, count) pairs at
// table[penOff...], table being the first row's params, and the biased
// ones (id, bias's float bits) pairs right after them.
struct SampleParams {
    float temperature, topP, minP;
    int topK;
    float repetition, presence, frequency;
    int penOff, penN;
    unsigned uLo, uHi; // the draw u ∈ [0, 1), a float64's bits
    int biasN;
};

// okey maps a float to a uint32 that orders as the float does.
static __device__ __forceinline__ uint32_t okey(float f) {
    const uint32_t u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

static __device__ float block_max_f(float v, float* red) {
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

extern "C" __global__ void __launch_bounds__(SNT)
    sample(int* outTok, const float* logits, float* work, const SampleParams* params, int vocab) {
    __shared__ float red[32];
    __shared__ int hist[256], amax, nc, pick;
    __shared__ unsigned long long cand[SCAP];
    __shared__ double ev[SCAP];
    __shared__ uint32_t kth;
    const int tid = threadIdx.x;
    const SampleParams sp = params[blockIdx.x];
    const float* l = logits + (size_t)blockIdx.x * vocab;

    // Bias and penalties change a copy: the logits stay the model's, for
    // logprobs and for a row read back to the host.
    if (sp.penN > 0 || sp.biasN > 0) {
        float* w = work + (size_t)blockIdx.x * vocab;
        for (int i = tid; i < vocab; i += SNT) w[i] = l[i];
        __syncthreads();
        const int* pairs = (const int*)params + sp.penOff;
        const int* bias = pairs + 2 * sp.penN;
        for (int t = tid; t < sp.biasN; t += SNT) {
            const int id = bias[2 * t];
            w[id] = __fadd_rn(w[id], __uint_as_float((unsigned)bias[2 * t + 1]));
        }
        __syncthreads();
        const float rep = sp.repetition == 0.f ? 1.f : sp.repetition;
        for (int t = tid; t < sp.penN; t += SNT) {
            const int id = pairs[2 * t];
            float v = w[id];
            v = v <= 0.f ? __fmul_rn(v, rep) : __fdiv_rn(v, rep);
            w[id] = __fsub_rn(v, __fadd_rn(__fmul_rn((float)pairs[2 * t + 1], sp.frequency), sp.presence));
        }
        __syncthreads();
        l = w;
    }

    // argmax, lowest id among equals
    float best = -CUDART_INF_F;
    int bi = 0x7fffffff;
    for (int i = tid; i < vocab; i += SNT)
        if (l[i] > best) best = l[i], bi = i;
    const float mx = block_max_f(best, red);
    if (tid == 0) amax = 0x7fffffff;
    __syncthreads();
    if (best == mx) atomicMin(&amax, bi);
    __syncthreads();
    const int top = amax == 0x7fffffff ? 0 : amax; // no logit above −inf: the host's argmax says 0
    if (sp.temperature <= 0.f) {
        if (tid == 0) outTok[blockIdx.x] = top;
        return;
    }
    double u;
    {
        const unsigned long long bits = ((unsigned long long)sp.uHi << 32) | sp.uLo;
        memcpy(&u, &bits, 8);
    }
    const bool topK = sp.topK > 0 && sp.topK < vocab, topP = sp.topP > 0.f && sp.topP < 1.f;
    if (!topK && topP) {
        if (tid == 0) outTok[blockIdx.x] = -1;
        return;
    }
    if (topK) {
        // radix select: the key of the k-th largest logit, a byte at a time
        uint32_t prefix = 0, mask = 0;
        int k = sp.topK;
        for (int shift = 24; shift >= 0; shift -= 8) {
            for (int b = tid; b < 256; b += SNT) hist[b] = 0;
            __syncthreads();
            for (int i = tid; i < vocab; i += SNT) {
                const uint32_t key = okey(l[i]);
                if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255], 1);
            }
            __syncthreads();
            if (tid == 0) {
                int cum = 0, b = 255;
                for (; b > 0; b--) {
                    if (cum + hist[b] >= k) break;
                    cum += hist[b];
                }
                k -= cum;
                kth = prefix | ((uint32_t)b << shift);
            }
            __syncthreads();
            prefix = kth, mask |= 255u << shift;
            __syncthreads();
        }
        // the candidates at or above it, sorted by (logit desc, id asc)
        if (tid == 0) nc = 0;
        __syncthreads();
        for (int i = tid; i < vocab; i += SNT) {
            const uint32_t key = okey(l[i]);
            if (key >= prefix) {
                const int at = atomicAdd(&nc, 1);
                if (at < SCAP) cand[at] = ((unsigned long long)(~key) << 32) | (uint32_t)i;
            }
        }
        __syncthreads();
        const int found = nc;
        if (found > SCAP) {
            if (tid == 0) outTok[blockIdx.x] = -1;
            return;
        }
        for (int i = found + tid; i < SCAP; i += SNT) cand[i] = ~0ull;
        __syncthreads();
        for (int size = 2; size <= SCAP; size <<= 1)
            for (int stride = size >> 1; stride > 0; stride >>= 1) {
                for (int i = tid; i < SCAP; i += SNT) {
                    const int j = i ^ stride;
                    if (j > i) {
                        const unsigned long long a = cand[i], b = cand[j];
                        if ((a > b) == ((i & size) == 0)) cand[i] = b, cand[j] = a;
                    }
                }
                __syncthreads();
            }
        // host order from here: top-p at temperature 1, min-p, softmax, draw
        int n = sp.topK;
        const double m0 = (double)l[(int)(uint32_t)cand[0]];
        if (topP) {
            for (int i = tid; i < n; i += SNT) ev[i] = exp((double)l[(int)(uint32_t)cand[i]] - m0);
            __syncthreads();
            if (tid == 0) {
                double sum = 0, cum = 0;
                for (int i = 0; i < n; i++) sum += ev[i];
                int cut = n;
                for (int i = 0; i < n; i++)
                    if ((cum += ev[i] / sum) >= (double)sp.topP) {
                        cut = i + 1;
                        break;
                    }
                nc = cut;
            }
            __syncthreads();
            n = nc;
            __syncthreads();
        }
        if (sp.minP > 0.f) {
            if (tid == 0) {
                const double mn = m0 + log((double)sp.minP);
                int kept = 1;
                for (int i = 1; i < n; i++)
                    if ((double)l[(int)(uint32_t)cand[i]] >= mn) cand[kept++] = cand[i];
                nc = kept;
            }
            __syncthreads();
            n = nc;
        }
        for (int i = tid; i < n; i += SNT) ev[i] = exp(((double)l[(int)(uint32_t)cand[i]] - m0) / (double)sp.temperature);
        __syncthreads();
        if (tid == 0) {
            double sum = 0, cum = 0;
            for (int i = 0; i < n; i++) sum += ev[i];
            int id = (int)(uint32_t)cand[n - 1];
            for (int i = 0; i < n; i++)
                if (u < (cum += ev[i] / sum)) {
                    id = (int)(uint32_t)cand[i];
                    break;
                }
            outTok[blockIdx.x] = id;
        }
        return;
    }
    // No top-k: the host's order is id order with the argmax swapped to
    // position 0 (and id 0 to the argmax's place). Thread t owns positions
    // [beg, end); ev[t] first holds its run's weight, then its run's
    // probability mass; the prefix of those masses finds the run holding u.
    const double mxd = (double)mx, mn = sp.minP > 0.f ? mxd + log((double)sp.minP) : -CUDART_INF;
    const double invT = (double)sp.temperature;
    const int per = (vocab + SNT - 1) / SNT, beg = tid * per, end = min(vocab, beg + per);
    auto idAt = [top](int pos) { return pos == 0 ? top : pos == top ? 0 : pos; };
    auto weight = [&](int id) {
        const double v = (double)l[id];
        return id == top || v >= mn ? exp((v - mxd) / invT) : 0.0;
    };
    double own = 0;
    for (int p = beg; p < end; p++) own += weight(idAt(p));
    ev[tid] = own;
    __syncthreads();
    if (tid == 0) {
        double sum = 0;
        for (int t = 0; t < SNT; t++) sum += ev[t];
        ev[0] = sum;
    }
    __syncthreads();
    const double sum = ev[0];
    __syncthreads();
    double mass = 0;
    for (int p = beg; p < end; p++) mass += weight(idAt(p)) / sum;
    ev[tid] = mass;
    if (tid == 0) pick = -1;
    __syncthreads();
    if (tid == 0) { // exclusive prefix, in place
        double run = 0;
        for (int t = 0; t < SNT; t++) {
            const double m = ev[t];
            ev[t] = run;
            run += m;
        }
    }
    __syncthreads();
    double cum = ev[tid];
    if (beg < end && cum <= u && u < cum + mass) {
        for (int p = beg; p < end; p++) {
            const int id = idAt(p);
            const double w = weight(id);
            if (w == 0) continue;
            if (u < (cum += w / sum)) {
                pick = id;
                break;
            }
        }
    }
    __syncthreads();
    if (tid == 0) {
        int id = pick;
        if (id < 0) { // u within rounding of 1: the host takes its last candidate
            for (int p = vocab - 1; p >= 0 && id < 0; p--)
                if (weight(idAt(p)) > 0) id = idAt(p);
        }
        outTok[blockIdx.x] = id;
    }
}
