// Stand-in for CUDA's cuda_fp16.h when the kernels are compiled for the CPU
// emulator: the few half-precision conversions common.cuh uses, bit-exact
// (round to nearest even, as __float2half_rn).
#pragma once
#include <stdint.h>
#include <string.h>

struct __half_raw {
    unsigned short x;
};
struct __half {
    unsigned short x;
    __half() = default;
    __half(__half_raw r) : x(r.x) {}
};

inline float __half2float(__half h) {
    uint32_t sign = (uint32_t)(h.x >> 15) << 31, exp = (h.x >> 10) & 0x1f, man = h.x & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else { // subnormal: man · 2⁻²⁴
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

inline __half __float2half_rn(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffffu;
    __half h;
    if (ax > 0x7f800000u) { // NaN
        h.x = (unsigned short)(sign | 0x7e00);
    } else if (ax >= 0x477ff000u) { // rounds to ≥ 65520: Inf
        h.x = (unsigned short)(sign | 0x7c00);
    } else if (ax < 0x38800000u) { // below the smallest normal half: subnormal or zero
        float a;
        memcpy(&a, &ax, 4);
        // a · 2²⁴ rounded to nearest even is the subnormal's mantissa
        float m = a * 16777216.0f;
        uint32_t q = (uint32_t)m;
        float rem = m - (float)q;
        if (rem > 0.5f || (rem == 0.5f && (q & 1))) q++;
        h.x = (unsigned short)(sign | q);
    } else {
        uint32_t mant = ax & 0x7fffff, exp = (ax >> 23) - 112;
        uint32_t v = (exp << 10) | (mant >> 13), rest = mant & 0x1fff;
        if (rest > 0x1000 || (rest == 0x1000 && (v & 1))) v++;
        h.x = (unsigned short)(sign | v);
    }
    return h;
}

inline unsigned short __half_as_ushort(__half h) { return h.x; }
