// The ops the newer architectures add to a Llama pass (kernels.GemmaOps,
// HeadNormOps, MoEOps, SharedExpertOps): QK-norm, GELU-tanh GeGLU, the
// embedding scale, the mixture-of-experts router, the expert rows' scatter
// and the shared expert's gated add. Semantics mirror
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

// gated_add adds a shared expert's output into the mixture of its row:
// dst[r] += sigmoid(gate[r]) · x[r], one block per row, as the CPU's GatedAdd
// (the sigmoid in double, rounded; the product and sum rounded apart).
extern "C" __global__ void gated_add(float* dst, const float* x, const float* gate, int cols) {
    const size_t r = blockIdx.x;
    const float g = (float)(1.0 / (1.0 + exp(-(double)gate[r])));
    float* d = dst + r * cols;
    const float* src = x + r * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) d[c] = __fadd_rn(d[c], __fmul_rn(g, src[c]));
}

// zero_f32 clears m floats (the MoE output before its experts add to it).
extern "C" __global__ void zero_f32(float* x, long long m) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < m; i += (long long)gridDim.x * blockDim.x)
        x[i] = 0.f;
}

// soft_cap: x = cap·tanh(x/cap) over m elements (Gemma 2's final logits), as
// the CPU's SoftCap: the quotient rounded, tanh in double, the product rounded.
extern "C" __global__ void soft_cap(float* x, float cap, long long m) {
    const float inv = __fdiv_rn(1.f, cap);
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < m; i += (long long)gridDim.x * blockDim.x)
        x[i] = __fmul_rn(cap, (float)tanh((double)__fmul_rn(x[i], inv)));
}

// capped_attention is Gemma 2's attention with every score capped, s →
// cap·tanh(s/cap), before the softmax. It stands apart from attention.cu's
// paged kernels, which have no place for the cap: one block of CAP_NT
// threads per (row, head), the row's scores in scratch (scoreStride floats
// a row and head). rows[2r] is where row r's table starts in slots, rows[2r
// + 1] how many positions it reads; the table lists their cache slots,
// oldest first (a window row's only its window's). The cache holds F16.
#define CAP_NT 128
extern "C" __global__ void capped_attention(float* out, const float* q, const uint16_t* kc, const uint16_t* vc, const int* slots,
                                            const int* rows, float* scores, long long scoreStride, int heads, int kvHeads, int hd,
                                            float scale, float cap) {
    const int r = blockIdx.x, h = blockIdx.y;
    const int* tab = slots + rows[2 * r];
    const int ctx = rows[2 * r + 1];
    const int kvCols = kvHeads * hd;
    const size_t kvOff = (size_t)(h / (heads / kvHeads)) * hd;
    const float* qv = q + ((size_t)r * heads + h) * hd;
    float* s = scores + ((size_t)r * heads + h) * scoreStride;
    __shared__ float red[CAP_NT];
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < ctx; i += CAP_NT) {
        const uint16_t* kr = kc + (size_t)tab[i] * kvCols + kvOff;
        float d = 0.f;
        for (int c = 0; c < hd; c++) d += qv[c] * h2f(kr[c]);
        const float v = cap * (float)tanh((double)(d * scale / cap));
        s[i] = v;
        mx = fmaxf(mx, v);
    }
    red[threadIdx.x] = mx;
    __syncthreads();
    for (int k = CAP_NT / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + k]);
        __syncthreads();
    }
    mx = red[0];
    __syncthreads();
    float sum = 0.f;
    for (int i = threadIdx.x; i < ctx; i += CAP_NT) {
        const float e = expf(s[i] - mx);
        s[i] = e;
        sum += e;
    }
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int k = CAP_NT / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    const float inv = 1.f / red[0];
    float* o = out + ((size_t)r * heads + h) * hd;
    for (int c = threadIdx.x; c < hd; c += CAP_NT) {
        float acc = 0.f;
        for (int i = 0; i < ctx; i++) acc += s[i] * h2f(vc[(size_t)tab[i] * kvCols + kvOff + c]);
        o[c] = acc * inv;
    }
}
