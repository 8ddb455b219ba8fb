// What a cuBLAS GEMM (blas.go, blas.h) needs around it: activations are F32
// and cuBLAS multiplies two halves of one type, so x is rounded to the
// weight's type first, exactly as the mma kernels round it while staging;
// a bias is written into dst for the GEMM's beta = 1 to add onto.
#include "common.cuh"

// to_half_*: dst[i] = round(src[i]) to bf16 / f16, four at a time (m is a
// multiple of 4: the rows are multiples of 32 elements).
template <bool BF>
static __device__ void to_half(uint16_t* dst, const float* src, long long m) {
    const long long m4 = m >> 2;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < m4; i += (long long)gridDim.x * blockDim.x) {
        const float4 v = ((const float4*)src)[i];
        const uint32_t lo = BF ? f2bf(v.x) | (uint32_t)f2bf(v.y) << 16 : f2h(v.x) | (uint32_t)f2h(v.y) << 16;
        const uint32_t hi = BF ? f2bf(v.z) | (uint32_t)f2bf(v.w) << 16 : f2h(v.z) | (uint32_t)f2h(v.w) << 16;
        ((uint2*)dst)[i] = make_uint2(lo, hi);
    }
}

extern "C" __global__ void to_half_bf16(uint16_t* dst, const float* src, long long m) { to_half<true>(dst, src, m); }
extern "C" __global__ void to_half_f16(uint16_t* dst, const float* src, long long m) { to_half<false>(dst, src, m); }

// bias_rows: dst[i, o] = bias[o] for n rows of out.
extern "C" __global__ void bias_rows(float* dst, const float* bias, int n, int out) {
    const long long m = (long long)n * out;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < m; i += (long long)gridDim.x * blockDim.x)
        dst[i] = bias[i % out];
}
