// The ops the newer architectures add to a Llama pass (kernels.GemmaOps,
// HeadNormOps, MoEOps): QK-norm, GELU-tanh GeGLU, the embedding scale, the
// mixture-of-experts router and the expert rows' scatter. Semantics mirror
// kernels/cpu (gemma.go, moe.go), rounding included where it decides ties:
// products and sums that the CPU evaluates in a fixed order use the _rn
// intrinsics here, so nvcc cannot contract them into FMAs.
#include "common.cuh"

// head_rms_norm normalises one head of one row in place: block b is head
// b % heads of row b / heads, one warp wide. The sum of squares is in
// double, as the CPU's rmsNormRow.
extern "C" __global__ void head_rms_norm(float* x, const float* w, int hd, float eps) {
    float* h = x + (size_t)blockIdx.x * hd;
    double ss = 0;
    for (int c = threadIdx.x; c < hd; c += 32) ss += (double)h[c] * (double)h[c];
#pragma unroll
    for (int k = 16; k > 0; k >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, k);
    const float scale = (float)(1.0 / sqrt(ss / (double)hd + (double)eps));
    for (int c = threadIdx.x; c < hd; c += 32) h[c] = __fmul_rn(__fmul_rn(h[c], scale), w[c]);
}

// gelu_tanh_f16 is the CPU's GELU table entry for x: x rounded to F16,
// 0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²))) in float32 (tanh in double),
// the result rounded to F16, as ggml's GGML_GELU_FP16 computes it.
static __device__ __forceinline__ float gelu_tanh_f16(float x) {
    const float v = h2f(f2h(x));
    const float inner = __fmul_rn(__fmul_rn(0.79788456080286535587989211986876f, v),
                                  __fadd_rn(1.f, __fmul_rn(__fmul_rn(0.044715f, v), v)));
    const float g = __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.f, (float)tanh((double)inner)));
    return h2f(f2h(g));
}

// geglu: dst = gelu_tanh(gate) · up over m elements; dst may alias gate.
extern "C" __global__ void geglu(float* dst, const float* gate, const float* up, long long m) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < m; i += (long long)gridDim.x * blockDim.x) {
        const float g = gate[i];
        float v;
        if (g <= -10.f) {
            v = 0.f;
        } else if (g >= 10.f) {
            v = __fmul_rn(g, up[i]);
        } else {
            v = __fmul_rn(gelu_tanh_f16(g), up[i]);
        }
        dst[i] = v;
    }
}

// scale_rows: x *= s over m elements (Gemma's embeddings × √hidden).
extern "C" __global__ void scale_rows(float* x, float s, long long m) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < m; i += (long long)gridDim.x * blockDim.x)
        x[i] = __fmul_rn(x[i], s);
}

// MOE_MAX_EXPERTS bounds the router's per-row scratch (the host checks).
#define MOE_MAX_EXPERTS 256

// moe_route picks each row's k experts from its router logits, as the CPU's
// moeScratch.route: p = softmax (exp in double, rounded, summed in float in
// expert order), the k largest by repeated selection (a tie goes to the
// lower expert), weighted by p / Σp or, with norm, p / Σ of the k. One
// thread per row (k is small, experts tens to hundreds); out[2(r·k + j)] is
// the expert as a float, out[2(r·k + j) + 1] its weight.
extern "C" __global__ void moe_route(float* out, const float* logits, int n, int experts, int k, int norm) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    float p[MOE_MAX_EXPERTS];
    const float* row = logits + (size_t)r * experts;
    float mx = -INFINITY;
    for (int e = 0; e < experts; e++) mx = fmaxf(mx, row[e]);
    float sum = 0.f;
    for (int e = 0; e < experts; e++) {
        p[e] = (float)exp((double)__fsub_rn(row[e], mx));
        sum = __fadd_rn(sum, p[e]);
    }
    float picked = 0.f;
    float* o = out + 2 * (size_t)r * k;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < experts; e++)
            if (p[e] >= 0.f && (best < 0 || p[e] > p[best])) best = e;
        picked = __fadd_rn(picked, p[best]);
        p[best] = __fsub_rn(-1.f, p[best]); // taken; the CPU recovers p as −1 − this, rounded twice
        o[2 * j] = (float)best;
        o[2 * j + 1] = __fsub_rn(-1.f, p[best]);
    }
    const float div = norm ? picked : sum;
    for (int j = 0; j < k; j++) o[2 * j + 1] = __fdiv_rn(o[2 * j + 1], div);
}

// moe_scatter adds one expert's outputs into their rows: dst[rows[i]] +=
// w[i] · o[i] for its m rows, one block per row. The rows of one expert are
// distinct, and experts run one after another on the stream, so no two
// threads add to one element at once.
extern "C" __global__ void moe_scatter(float* dst, const float* o, const int* rows, const float* w, int hidden) {
    const int i = blockIdx.x;
    float* d = dst + (size_t)rows[i] * hidden;
    const float* src = o + (size_t)i * hidden;
    const float wi = w[i];
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) d[c] = __fadd_rn(d[c], __fmul_rn(wi, src[c]));
}

// zero_f32 clears m floats (the MoE output before its experts add to it).
extern "C" __global__ void zero_f32(float* x, long long m) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < m; i += (long long)gridDim.x * blockDim.x)
        x[i] = 0.f;
}
