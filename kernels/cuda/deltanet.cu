// Gated DeltaNet (Qwen3.5/3.6's linear-attention layers, kernels/deltanet.go)
// in its recurrent form, as the CPU backend computes it (kernels/cpu
// deltanet.go): the causal convolution one thread per channel of a
// sequence, the q/k L2 norms one warp per head of a row, and the state
// update one block per value head of a sequence, one thread per value
// index j holding the row S_h[·][j] in the slot's memory.
//
// Sequence table (deltanet.go), DN_SEQ ints per sequence:
//   [first row, end row, state slot, checkpoint row (−1: none), checkpoint slot,
//    slot the state starts from (−1: zeros; the state slot itself, or a seed)]
// State layout per layer: conv [slots][K−1][channels], ssm [slots][Hv][S][S]
// (S_h[i][j] at (h·S + j)·S + i).
#include "common.cuh"

#define DN_SEQ 6
#define DN_MAX_K 17

static __device__ __forceinline__ float dn_sigmoid(float x) { return (float)(1.0 / (1.0 + exp(-(double)x))); }
static __device__ __forceinline__ float dn_silu(float x) { return __fmul_rn(x, dn_sigmoid(x)); }
static __device__ __forceinline__ float dn_softplus(float x) { return x > 20.f ? x : (float)log1p(exp((double)x)); }

// dn_conv: block (x, y) covers channels [x·blockDim, …) of sequence y.
extern "C" __global__ void dn_conv(float* qkv, const float* w, float* conv, const int* seqs, int ch, int k, int per) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ch) return;
    const int* s = seqs + DN_SEQ * blockIdx.y;
    const int start = s[0], end = s[1], ck = s[3], src = s[5];
    float h[DN_MAX_K - 1];
    for (int j = 0; j < k - 1; j++) h[j] = src < 0 ? 0.f : conv[(size_t)src * per + (size_t)j * ch + c];
    const float* wc = w + (size_t)c * k;
    for (int r = start; r <= end; r++) {
        if (r == ck)
            for (int j = 0; j < k - 1; j++) conv[(size_t)s[4] * per + (size_t)j * ch + c] = h[j];
        if (r == end) break;
        const float x = qkv[(size_t)r * ch + c];
        float y = 0.f;
        for (int j = 0; j < k - 1; j++) y = __fadd_rn(y, __fmul_rn(h[j], wc[j]));
        y = __fadd_rn(y, __fmul_rn(x, wc[k - 1]));
        for (int j = 0; j + 1 < k - 1; j++) h[j] = h[j + 1];
        if (k > 1) h[k - 2] = x;
        qkv[(size_t)r * ch + c] = dn_silu(y);
    }
    for (int j = 0; j < k - 1; j++) conv[(size_t)s[2] * per + (size_t)j * ch + c] = h[j];
}

// dn_l2norm scales one q or k head of one row to unit length, x/√(Σx²+eps):
// block b is head b % heads of row b / heads, one warp wide.
extern "C" __global__ void dn_l2norm(float* qkv, int ch, int heads, int hs, float eps) {
    float* v = qkv + (size_t)(blockIdx.x / heads) * ch + (size_t)(blockIdx.x % heads) * hs;
    double ss = 0;
    for (int i = threadIdx.x; i < hs; i += 32) ss += (double)v[i] * (double)v[i];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float sc = (float)(1.0 / sqrt(ss + (double)eps));
    for (int i = threadIdx.x; i < hs; i += 32) v[i] = __fmul_rn(v[i], sc);
}

// dn_recur runs value head blockIdx.y of sequence blockIdx.x over its rows,
// thread j owning row j of M = S_hᵀ:
//   M *= e^g;  δ_j = β(v_j − M[j]·k);  M[j] += δ_j·k;  o_j = M[j]·q/√S
// then out = rmsnorm(o)·norm·silu(z) (the sum of squares in double, in j
// order, as the CPU's rmsNormRow).
extern "C" __global__ void dn_recur(const float* qkv, const float* z, const float* beta, const float* alpha, const float* dt,
                                    const float* a, const float* norm, float* ssm, float* out, const int* seqs, int ch,
                                    int kh, int vh, int hs, int per, float eps) {
    __shared__ double red[1024];
    const int* s = seqs + DN_SEQ * blockIdx.x;
    const int start = s[0], end = s[1], ck = s[3], src = s[5];
    const int h = blockIdx.y, kq = h % kh;
    // Blocks are whole warps: threads past hs only join the barriers.
    const bool on = threadIdx.x < (unsigned)hs;
    const int j = on ? threadIdx.x : 0;
    float* m = ssm + (size_t)s[2] * per + ((size_t)h * hs + j) * hs;
    if (on && src < 0) {
        for (int i = 0; i < hs; i++) m[i] = 0.f;
    } else if (on && src != s[2]) {
        const float* from = ssm + (size_t)src * per + ((size_t)h * hs + j) * hs;
        for (int i = 0; i < hs; i++) m[i] = from[i];
    }
    const float scale = (float)(1.0 / sqrt((double)hs));
    for (int r = start; r <= end; r++) {
        if (on && r == ck) {
            float* to = ssm + (size_t)s[4] * per + ((size_t)h * hs + j) * hs;
            for (int i = 0; i < hs; i++) to[i] = m[i];
        }
        if (r == end) break;
        float o = 0.f;
        if (on) {
            const float* row = qkv + (size_t)r * ch;
            const float *q = row + (size_t)kq * hs, *k = row + (size_t)(kh + kq) * hs;
            const float v = row[(size_t)(2 * kh + h) * hs + j];
            const float b = dn_sigmoid(beta[(size_t)r * vh + h]);
            const float decay = (float)exp((double)__fmul_rn(dn_softplus(__fadd_rn(alpha[(size_t)r * vh + h], dt[h])), a[h]));
            float dot = 0.f;
            for (int i = 0; i < hs; i++) {
                m[i] = __fmul_rn(m[i], decay);
                dot = __fadd_rn(dot, __fmul_rn(m[i], k[i]));
            }
            const float d = __fmul_rn(__fsub_rn(v, dot), b);
            for (int i = 0; i < hs; i++) {
                m[i] = __fadd_rn(m[i], __fmul_rn(d, k[i]));
                o = __fadd_rn(o, __fmul_rn(m[i], q[i]));
            }
            o = __fmul_rn(o, scale);
            red[j] = (double)o * (double)o;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            double ss = 0;
            for (int i = 0; i < hs; i++) ss += red[i];
            red[0] = ss;
        }
        __syncthreads();
        const float rs = (float)(1.0 / sqrt(red[0] / (double)hs + (double)eps));
        __syncthreads();
        if (on) {
            const size_t at = (size_t)r * vh * hs + (size_t)h * hs + j;
            out[at] = __fmul_rn(__fmul_rn(__fmul_rn(o, rs), norm[j]), dn_silu(z[at]));
        }
    }
}

// dn_copy copies n floats (a slot's layer of state, for CopyState).
extern "C" __global__ void dn_copy(float* dst, const float* src, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

// sigmoid_mul: d *= sigmoid(g) over m elements (the hybrid models' gated
// attention output).
extern "C" __global__ void sigmoid_mul(float* d, const float* g, long long m) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < m; i += (long long)gridDim.x * blockDim.x)
        d[i] = __fmul_rn(d[i], dn_sigmoid(g[i]));
}
