// Row-wise and element-wise kernels: embedding lookup (GetRows), RMSNorm,
// RoPE, SwiGLU, residual Add, and the KV-cache write. Semantics mirror
// kernels/cpu (ops.go, rope.go, attention.go). Activations are F32 row-major.
#include "common.cuh"

// get_rows: dst[i, :] = dequant(src[rows[i], :]). One block per output row;
// each thread decodes 16-element chunks (cols is a multiple of 16; the host
// checks, and block sizes of the quantized types are multiples of 16).
template <int T>
static __device__ void get_rows(float* dst, const uint8_t* src, const int* rows, int cols, long long rowBytes) {
    const uint8_t* row = src + (size_t)rows[blockIdx.x] * rowBytes;
    float* out = dst + (size_t)blockIdx.x * cols;
    for (int k0 = 16 * threadIdx.x; k0 < cols; k0 += 16 * blockDim.x) {
        float v[16];
        dequant16<T>(row, k0, v);
#pragma unroll
        for (int i = 0; i < 16; i++) out[k0 + i] = v[i];
    }
}

#define GET_ROWS(name, T)                                                                                    \
    extern "C" __global__ void get_rows_##name(float* dst, const uint8_t* src, const int* rows, int cols, \
                                               long long rowBytes) {                                        \
        get_rows<T>(dst, src, rows, cols, rowBytes);                                                       \
    }
GET_ROWS(f32, T_F32)
GET_ROWS(f16, T_F16)
GET_ROWS(bf16, T_BF16)
GET_ROWS(q4_0, T_Q4_0)
GET_ROWS(q4_1, T_Q4_1)
GET_ROWS(q5_0, T_Q5_0)
GET_ROWS(q5_1, T_Q5_1)
GET_ROWS(q8_0, T_Q8_0)
GET_ROWS(q4_k, T_Q4_K)
GET_ROWS(q5_k, T_Q5_K)
GET_ROWS(q6_k, T_Q6_K)
GET_ROWS(mxfp4, T_MXFP4)

// get_rows_f32_any copies F32 rows of any length (picking logit rows out of
// the hidden state, where cols need not be a multiple of 16).
extern "C" __global__ void get_rows_f32_any(float* dst, const float* src, const int* rows, int cols) {
    const float* in = src + (size_t)rows[blockIdx.x] * cols;
    float* out = dst + (size_t)blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = in[c];
}

// rms_norm_row normalises one row into out; with ADD it first makes the
// residual update x += o (the forward pass's Add just before its RMSNorm,
// fused by the backend). The sum of squares is accumulated in double, as the
// CPU reference does, so long rows keep their precision. out may be x: each
// thread writes only the elements it read.
template <bool ADD>
static __device__ void rms_norm_row(float* out, float* x, const float* o, const float* w, int cols, float eps) {
    __shared__ double part[32];
    double ss = 0;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = x[c];
        if (ADD) x[c] = v = v + o[c];
        ss += (double)v * (double)v;
    }
#pragma unroll
    for (int k = 16; k > 0; k >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, k);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    if (lane == 0) part[warp] = ss;
    __syncthreads();
    if (warp == 0) {
        ss = lane < nw ? part[lane] : 0;
#pragma unroll
        for (int k = 16; k > 0; k >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, k);
        if (lane == 0) part[0] = ss;
    }
    __syncthreads();
    const float scale = (float)(1.0 / sqrt(part[0] / (double)cols + (double)eps));
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = x[c] * scale * w[c];
}

// rms_norm: dst[i] = x[i] / rms(x[i]) * w, one block per row.
extern "C" __global__ void rms_norm(float* dst, float* x, const float* w, int cols, float eps) {
    const size_t r = (size_t)blockIdx.x * cols;
    rms_norm_row<false>(dst + r, x + r, nullptr, w, cols, eps);
}

// add_rms_norm: x[i] += o[i], then dst[i] = rms_norm(x[i]), one block per row.
extern "C" __global__ void add_rms_norm(float* dst, float* x, const float* o, const float* w, int cols, float eps) {
    const size_t r = (size_t)blockIdx.x * cols;
    rms_norm_row<true>(dst + r, x + r, o + r, w, cols, eps);
}

// rope_pair rotates one (tensor, head, pair) of x0[n, heads0*headDim] and
// x1[n, heads1*headDim] (q and k, fused by the backend; heads1 = 0 for one
// tensor) in row r; t numbers the pairs of x0, then those of x1. The angle
// is computed in double and rounded, as the CPU table is, so both backends
// rotate by the same float32 cos/sin. It returns false past the last pair;
// else *second says whether the pair was x1's, *ea/*eb are the rotated
// elements' columns within the row, *va/*vb their new values.
//   interleaved: pair i is (2i, 2i+1)   halves: pair i is (i, i + headDim/2)
static __device__ __forceinline__ bool rope_pair(float* x0, int heads0, float* x1, int heads1, const float* invFreq,
                                                 const int* pos, int headDim, int half, int halves, int r, int t,
                                                 bool* second, int* ea, int* eb, float* va, float* vb) {
    int heads = heads0;
    float* x = x0;
    *second = false;
    if (t >= heads0 * half) {
        t -= heads0 * half;
        x = x1, heads = heads1, *second = true;
    }
    if (t >= heads * half) return false;
    const int h = t / half, i = t % half;
    double s, c;
    sincos((double)pos[r] * (double)invFreq[i], &s, &c);
    const float cs = (float)c, sn = (float)s;
    float* v = x + (size_t)r * heads * headDim;
    const int a = h * headDim + (halves ? i : 2 * i), b = h * headDim + (halves ? i + headDim / 2 : 2 * i + 1);
    const float v0 = v[a], v1 = v[b];
    v[a] = *va = v0 * cs - v1 * sn;
    v[b] = *vb = v0 * sn + v1 * cs;
    *ea = a, *eb = b;
    return true;
}

// rope rotates x0 and x1 in place (rope_pair); one thread per pair, grid.y
// is the row.
extern "C" __global__ void rope(float* x0, int heads0, float* x1, int heads1, const float* invFreq, const int* pos,
                                int headDim, int half, int halves) {
    bool second;
    int a, b;
    float va, vb;
    rope_pair(x0, heads0, x1, heads1, invFreq, pos, headDim, half, halves, blockIdx.y,
              blockIdx.x * blockDim.x + threadIdx.x, &second, &a, &b, &va, &vb);
}

// rope_kv is rope of q (x0) and k (x1) followed by kv_write of k and v, in
// one launch (the backend fuses RoPE into the Attention that follows it):
// a thread that rotates a pair of k stores the rotated values in the cache
// itself; thread t < kvCols stores v's column t, and k's when RoPE leaves
// it alone (partial rotary dims). x1 is [n, kvCols].
extern "C" __global__ void rope_kv(float* x0, int heads0, float* x1, int heads1, const float* invFreq, const int* pos,
                                   int headDim, int half, int halves, uint16_t* kc, uint16_t* vc, const float* v,
                                   const int* slots, int kvCols) {
    const int r = blockIdx.y, t = blockIdx.x * blockDim.x + threadIdx.x;
    const size_t slot = (size_t)slots[r] * kvCols;
    bool second;
    int a, b;
    float va, vb;
    if (rope_pair(x0, heads0, x1, heads1, invFreq, pos, headDim, half, halves, r, t, &second, &a, &b, &va, &vb) &&
        second) {
        kc[slot + a] = f2h(va);
        kc[slot + b] = f2h(vb);
    }
    if (t < kvCols) {
        vc[slot + t] = f2h(v[(size_t)r * kvCols + t]);
        const int e = t % headDim;
        const bool rotated = halves ? e % (headDim / 2) < half : e < 2 * half;
        if (!rotated) kc[slot + t] = f2h(x1[(size_t)r * kvCols + t]);
    }
}

// swiglu: dst = silu(gate) * up over m elements; dst may alias gate.
extern "C" __global__ void swiglu(float* dst, const float* gate, const float* up, long long m) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < m; i += (long long)gridDim.x * blockDim.x) {
        const float g = gate[i];
        dst[i] = g / (1.f + expf(-g)) * up[i];
    }
}

// add: dst += x over m elements.
extern "C" __global__ void add(float* dst, const float* x, long long m) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < m; i += (long long)gridDim.x * blockDim.x)
        dst[i] += x[i];
}

// kv_write stores row r's K and V ([n, kvCols] F32) as F16 at slot slots[r]
// of one layer's cache ([slots, kvCols] F16). One block per row.
extern "C" __global__ void kv_write(uint16_t* kc, uint16_t* vc, const float* k, const float* v, const int* slots,
                                    int kvCols) {
    const int r = blockIdx.x;
    const size_t dst = (size_t)slots[r] * kvCols, src = (size_t)r * kvCols;
    for (int c = threadIdx.x; c < kvCols; c += blockDim.x) {
        kc[dst + c] = f2h(k[src + c]);
        vc[dst + c] = f2h(v[src + c]);
    }
}
