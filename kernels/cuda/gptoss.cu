// gpt-oss's kernels (models/gptoss.go's gptossOps; the CPU's are
// kernels/cpu/gptoss.go): attention whose softmax has a learned sink logit
// per head, and the experts' clamped SwiGLU. The MXFP4 expert weights go
// through matmul.cu's kernels (dequant16<T_MXFP4> in common.cuh).
#include "common.cuh"

// sink_attention is capped_attention (modelops.cu) without the cap and with
// one more logit in each head's softmax, sinks[h], which has no value:
// p_i = e^{s_i} / (Σ_j e^{s_j} + e^{sink_h}). A head can so attend to
// nothing. One block of SINK_NT threads per (row, head), the row's scores
// in scratch (scoreStride floats a row and head); rows[2r] is where row r's
// table of cache slots starts in slots, rows[2r+1] how many positions it
// reads (a window row's only its window's), oldest first. The cache holds
// F16. Correct, not tuned: it takes the steps paged_decode_sink
// (attention.cu) does not, the prompt chunks among them, as paged_prefill
// and paged_attention have no sinks yet.
#define SINK_NT 128
extern "C" __global__ void sink_attention(float* out, const float* q, const uint16_t* kc, const uint16_t* vc, const int* slots,
                                          const int* rows, float* scores, long long scoreStride, int heads, int kvHeads, int hd,
                                          float scale, const float* sinks) {
    const int r = blockIdx.x, h = blockIdx.y;
    const int* tab = slots + rows[2 * r];
    const int ctx = rows[2 * r + 1];
    const int kvCols = kvHeads * hd;
    const size_t kvOff = (size_t)(h / (heads / kvHeads)) * hd;
    const float* qv = q + ((size_t)r * heads + h) * hd;
    float* s = scores + ((size_t)r * heads + h) * scoreStride;
    const float sink = sinks[h];
    __shared__ float red[SINK_NT];
    float mx = sink; // the sink takes part in the maximum, as on the CPU
    for (int i = threadIdx.x; i < ctx; i += SINK_NT) {
        const uint16_t* kr = kc + (size_t)tab[i] * kvCols + kvOff;
        float d = 0.f;
        for (int c = 0; c < hd; c++) d += qv[c] * h2f(kr[c]);
        const float v = d * scale;
        s[i] = v;
        mx = fmaxf(mx, v);
    }
    red[threadIdx.x] = mx;
    __syncthreads();
    for (int k = SINK_NT / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + k]);
        __syncthreads();
    }
    mx = red[0];
    __syncthreads();
    float sum = 0.f;
    for (int i = threadIdx.x; i < ctx; i += SINK_NT) {
        const float e = expf(s[i] - mx);
        s[i] = e;
        sum += e;
    }
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int k = SINK_NT / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    const float inv = 1.f / (red[0] + expf(sink - mx));
    float* o = out + ((size_t)r * heads + h) * hd;
    for (int c = threadIdx.x; c < hd; c += SINK_NT) {
        float acc = 0.f;
        for (int i = 0; i < ctx; i++) acc += s[i] * h2f(vc[(size_t)tab[i] * kvCols + kvOff + c]);
        o[c] = acc * inv;
    }
}

// oai_swiglu is ggml's swiglu_oai in place over g, for m elements:
// x = min(g, limit), y = clamp(u, −limit, limit), g = x·σ(alpha·x)·(y + 1).
extern "C" __global__ void oai_swiglu(float* g, const float* u, long long m, float alpha, float limit) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < m; i += (long long)gridDim.x * blockDim.x) {
        const float x = fminf(g[i], limit), y = fminf(fmaxf(u[i], -limit), limit);
        g[i] = x / (1.f + expf(alpha * -x)) * (y + 1.f);
    }
}
