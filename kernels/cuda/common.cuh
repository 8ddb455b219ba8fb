// Shared device helpers of Sluice's CUDA kernels: weight-block decoding and
// warp reductions. Every kernel file includes this header and is compiled to
// its own PTX module (see build-ptx.sh), so everything here is static inline.
//
// Weights stay in the GGUF block layouts they were uploaded in (kernels/quant,
// facts.md); dequant16<T> decodes 16 consecutive elements of one row, starting
// at element k0 (a multiple of 16), into registers. Type ids are GGML's.
#pragma once
#include <cuda_fp16.h>
#include <stdint.h>

#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q4_1 3
#define T_Q5_0 6
#define T_Q5_1 7
#define T_Q8_0 8
#define T_Q4_K 12
#define T_Q5_K 13
#define T_Q6_K 14
#define T_BF16 30
#define T_MXFP4 39

// Block decoding is host-callable too, so hostcheck can test it on a machine
// without a GPU.
#define SL_HD static __host__ __device__ __forceinline__

SL_HD float h2f(uint16_t h) {
    __half_raw r;
    r.x = h;
    return __half2float(__half(r));
}
SL_HD float bf2f(uint16_t h) {
    union {
        uint32_t u;
        float f;
    } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}
static __device__ __forceinline__ uint16_t f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }

// f2bf rounds to nearest even, as quant.F32ToBF16 does (NaN kept quiet).
static __device__ __forceinline__ uint16_t f2bf(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

SL_HD uint16_t ld16(const uint8_t* p) { return *(const uint16_t*)p; }

// scale_min_k4 unpacks sub-block j's 6-bit scale and min (ggml's get_scale_min_k4).
SL_HD void scale_min_k4(int j, const uint8_t* q, float* sc, float* m) {
    if (j < 4) {
        *sc = (float)(q[j] & 63);
        *m = (float)(q[j + 4] & 63);
    } else {
        *sc = (float)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m = (float)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// dequant16 decodes row elements [k0, k0+16). row is the row's first byte;
// k0 is a multiple of 16. Alignment: F32 rows are 16-byte aligned, F16/BF16
// rows too when the row length is a multiple of 8 (the host checks).
template <int T>
SL_HD void dequant16(const uint8_t* row, int k0, float* out) {
    if (T == T_F32) {
        const float4* p = (const float4*)(row + 4 * (size_t)k0);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float4 v = p[i];
            out[4 * i] = v.x, out[4 * i + 1] = v.y, out[4 * i + 2] = v.z, out[4 * i + 3] = v.w;
        }
    } else if (T == T_F16 || T == T_BF16) {
        const uint4* p = (const uint4*)(row + 2 * (size_t)k0);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            uint4 v = p[i];
            uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                uint16_t lo = (uint16_t)(w[j] & 0xffff), hi = (uint16_t)(w[j] >> 16);
                out[8 * i + 2 * j] = T == T_F16 ? h2f(lo) : bf2f(lo);
                out[8 * i + 2 * j + 1] = T == T_F16 ? h2f(hi) : bf2f(hi);
            }
        }
    } else if (T == T_Q4_0 || T == T_Q4_1 || T == T_Q5_0 || T == T_Q5_1 || T == T_Q8_0) {
        // 32-element blocks: half h of block b. In the 4/5-bit ones byte j of qs
        // holds element j (low nibble) and j+16 (high nibble).
        const int bb = T == T_Q4_0 ? 18 : T == T_Q4_1 ? 20 : T == T_Q5_0 ? 22 : T == T_Q5_1 ? 24 : 34;
        const uint8_t* b = row + (size_t)(k0 >> 5) * bb;
        const int h = (k0 >> 4) & 1;
        float d = h2f(ld16(b));
        if (T == T_Q8_0) {
            const uint8_t* qs = b + 2 + 16 * h;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                uint16_t w = ld16(qs + 2 * j);
                out[2 * j] = d * (float)(int8_t)(w & 0xff);
                out[2 * j + 1] = d * (float)(int8_t)(w >> 8);
            }
            return;
        }
        float m = (T == T_Q4_1 || T == T_Q5_1) ? h2f(ld16(b + 2)) : 0.f;
        uint32_t qh = 0;
        const uint8_t* qs;
        if (T == T_Q4_0) qs = b + 2;
        if (T == T_Q4_1) qs = b + 4;
        if (T == T_Q5_0) {
            qh = b[2] | (b[3] << 8) | (b[4] << 16) | ((uint32_t)b[5] << 24);
            qs = b + 6;
        }
        if (T == T_Q5_1) {
            qh = *(const uint32_t*)(b + 4);
            qs = b + 8;
        }
#pragma unroll
        for (int j = 0; j < 16; j++) {
            int q = h ? (qs[j] >> 4) : (qs[j] & 15);
            if (T == T_Q5_0 || T == T_Q5_1) q |= ((qh >> (j + 16 * h)) & 1) << 4;
            if (T == T_Q4_0) out[j] = (float)(q - 8) * d;
            if (T == T_Q5_0) out[j] = (float)(q - 16) * d;
            if (T == T_Q4_1 || T == T_Q5_1) out[j] = d * (float)q + m;
        }
    } else if (T == T_Q4_K || T == T_Q5_K) {
        const int bb = T == T_Q4_K ? 144 : 176;
        const uint8_t* b = row + (size_t)(k0 >> 8) * bb;
        const int e = k0 & 255, j = e >> 5, c = e >> 6, hi = j & 1, l0 = e & 31;
        float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2)), sc, mn;
        scale_min_k4(j, b + 4, &sc, &mn);
        const float d1 = d * sc, m1 = dmin * mn;
        const uint8_t* ql = b + (T == T_Q4_K ? 16 : 48) + 32 * c + l0;
        uint4 v = *(const uint4*)ql; // 16-byte aligned: 144·sb + 16 + 32c + l0
        uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 16; i++) {
            int byte = (w[i >> 2] >> (8 * (i & 3))) & 0xff;
            int q = hi ? byte >> 4 : byte & 15;
            if (T == T_Q5_K) q += ((b[16 + l0 + i] >> (2 * c + hi)) & 1) << 4;
            out[i] = d1 * (float)q - m1;
        }
    } else if (T == T_MXFP4) {
        // 17-byte blocks of 32: an E8M0 exponent, then byte j holds element j
        // (low nibble) and j+16 (high). Codes keep ggml's doubled values
        // (kvalues_mxfp4) against the halved scale 2^(e-128), so each element
        // is one exact product, bit for bit the CPU's (kernels/quant/mxfp4.go).
        const uint8_t* b = row + (size_t)(k0 >> 5) * 17;
        const int h = (k0 >> 4) & 1;
        const uint32_t e = b[0];
        union {
            uint32_t u;
            float f;
        } d;
        d.u = e < 2 ? 0x00200000u << e : (e - 1) << 23;
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const int q = h ? (b[1 + j] >> 4) : (b[1 + j] & 15);
            // kvalues_mxfp4 {0,1,2,3,4,6,8,12} and their negatives, by arithmetic
            // rather than a table (a local array would live in local memory)
            const int m = q & 7, v = m < 2 ? m : (2 + (m & 1)) << ((m >> 1) - 1);
            out[j] = (float)(q & 8 ? -v : v) * d.f;
        }
    } else if (T == T_Q6_K) {
        // 128-element halves; within one, quarter qr of 32 elements takes its
        // low 4 bits from ql[(qr&1)*32 + l] (low nibble for qr < 2) and bits 4-5
        // from qh[l] >> 2qr; 16-element groups have their own int8 scale.
        const uint8_t* b = row + (size_t)(k0 >> 8) * 210;
        const int e = k0 & 255, half = e >> 7, r = e & 127, qr = r >> 5, l0 = r & 31;
        const uint8_t* ql = b + 64 * half + (qr & 1) * 32 + l0;
        const uint8_t* qh = b + 128 + 32 * half + l0;
        float ds = h2f(ld16(b + 208)) * (float)(int8_t)b[192 + 8 * half + (l0 >> 4) + 2 * qr];
#pragma unroll
        for (int i = 0; i < 16; i++) {
            int nib = qr >= 2 ? ql[i] >> 4 : ql[i] & 15;
            int q = (nib | (((qh[i] >> (2 * qr)) & 3) << 4)) - 32;
            out[i] = ds * (float)q;
        }
    }
}

static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// ---- tensor cores (matmul.cu's tiles, attention.cu's paged_prefill) --------

// pack2 rounds two floats to F16 (or BF16) and packs them as one mma operand
// register, a in the low half.
template <bool BF>
static __device__ __forceinline__ uint32_t pack2(float a, float b) {
    uint16_t lo = BF ? f2bf(a) : f2h(a), hi = BF ? f2bf(b) : f2h(b);
    return (uint32_t)lo | ((uint32_t)hi << 16);
}

template <bool BF>
static __device__ __forceinline__ void mma16816(float* c, const uint32_t* a, const uint32_t* b) {
#ifdef SLUICE_EMU // the CPU emulator (emu/runtime.h) has no tensor cores
    emu::mma16816(BF, c, a, b);
#else
    if (BF) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
#endif
}
