//go:build amd64 && !noasm

#include "dotq_amd64.h"
#include "dotk_amd64.h"

// K-quant kernels: func dotQ?_KQ8_K(w, x *byte, nb int) float32, one weight
// row of nb super-blocks (256 elements) against one Q8_K activation row
// [d f32][qs int8 256][bsums int16 16]; nb ≥ 1. They follow ggml's AVX2
// ggml_vec_dot_q*_K_q8_K: integer sums per super-block, then one FMA by d.
//
// Each super-block iteration prefetches the bytes 2 KB ahead: measured with
// BenchmarkMatMulStreaming, +20-40% on weights that stream from memory.
//
// Registers: SI w, DI x, CX super-blocks left, Y0 Σ d·sumi (8 lanes), X12
// Σ dmin·mins·bsums (4 lanes), Y9 0x0f bytes, Y10 int16 ones.

// K4_SETUP: the eight int16 scales go to 0(SP) for VPBROADCASTW; the mins
// term dmin·Σ_j m_j·(bsums[2j]+bsums[2j+1]) is added to X12; Y2 gets d in
// every lane (d = x.d·w.d, dmin = x.d·w.dmin).
#define K4_SETUP \
	UNPACK_K4(4); \
	VMOVD        AX, X4; \
	VPINSRD      $1, BX, X4, X4; \
	VPMOVZXBW    X4, X4; \
	VMOVDQU      X4, 0(SP); \
	VMOVD        DX, X5; \
	VPINSRD      $1, R13, X5, X5; \
	VPMOVZXBW    X5, X5; \
	VMOVDQU      260(DI), Y6; \
	VEXTRACTI128 $1, Y6, X7; \
	VPHADDW      X7, X6, X6; \
	VPMADDWD     X6, X5, X5; \
	VCVTDQ2PS    X5, X5; \
	VMOVD        (SI), X1; \
	VCVTPH2PS    X1, X1; \
	VBROADCASTSS (DI), X2; \
	VMULPS       X1, X2, X1; \
	VMOVSHDUP    X1, X3; \
	VBROADCASTSS X3, X3; \
	VFMADD231PS  X5, X3, X12; \
	VBROADCASTSS X1, Y2

// K4_CHUNK: 64 elements (sub-blocks 2j, 2j+1): low levels in Y4, high in
// Y5 (0..15 or 0..31), against x quants at xoff, scaled and summed into Y11.
#define K4_CHUNK(xoff, s0, s1) \
	VPMADDUBSW   xoff(DI), Y4, Y4; \
	VPMADDUBSW   xoff+32(DI), Y5, Y5; \
	VPBROADCASTW s0(SP), Y6; \
	VPMADDWD     Y6, Y4, Y4; \
	VPBROADCASTW s1(SP), Y7; \
	VPMADDWD     Y7, Y5, Y5; \
	VPADDD       Y4, Y11, Y11; \
	VPADDD       Y5, Y11, Y11

#define Q4K_CHUNK(j) \
	VMOVDQU 16+32*j(SI), Y4; \
	VPSRLW  $4, Y4, Y5; \
	VPAND   Y9, Y4, Y4; \
	VPAND   Y9, Y5, Y5; \
	K4_CHUNK(4+64*j, 4*j, 4*j+2)

// KFINISH returns Σ lanes of Y0 − Σ lanes of X12.
#define KFINISH \
	HSUM(Y0, X0, X3); \
	VMOVHLPS  X12, X12, X1; \
	VADDPS    X1, X12, X12; \
	VMOVSHDUP X12, X1; \
	VADDSS    X1, X12, X12; \
	VSUBSS    X12, X0, X0; \
	VZEROUPPER; \
	MOVSS     X0, ret+24(FP); \
	RET

// func dotQ4_KQ8_K(w, x *byte, nb int) float32
TEXT ·dotQ4_KQ8_K(SB), NOSPLIT, $16-28
	MOVQ   w+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   nb+16(FP), CX
	NIBBLE_MASK(Y9, X9)
	VXORPS Y0, Y0, Y0
	VXORPS X12, X12, X12

q4kblk:
	PREFETCHT0 2048(SI)
	PREFETCHT0 2112(SI)
	PREFETCHT0 2176(SI)
	K4_SETUP
	VPXOR     Y11, Y11, Y11
	Q4K_CHUNK(0)
	Q4K_CHUNK(1)
	Q4K_CHUNK(2)
	Q4K_CHUNK(3)
	VCVTDQ2PS Y11, Y11
	VFMADD231PS Y11, Y2, Y0
	ADDQ      $144, SI
	ADDQ      $292, DI
	DECQ      CX
	JNZ       q4kblk
	KFINISH

// Q5K_CHUNK: as Q4K_CHUNK with the fifth bits from qh (Y8): bit 2j for the
// low levels, 2j+1 for the high, moved to bit 4 of each byte.
#define Q5K_CHUNK(j, shl, shr) \
	VMOVDQU 48+32*j(SI), Y4; \
	VPSRLW  $4, Y4, Y5; \
	VPAND   Y9, Y4, Y4; \
	VPAND   Y9, Y5, Y5; \
	shl; \
	shr; \
	K4_CHUNK(4+64*j, 4*j, 4*j+2)

#define HBITS(op, n, dst) \
	op    $n, Y8, Y6; \
	VPAND bytes10<>(SB), Y6, Y6; \
	VPOR  Y6, dst, dst

// func dotQ5_KQ8_K(w, x *byte, nb int) float32
TEXT ·dotQ5_KQ8_K(SB), NOSPLIT, $16-28
	MOVQ   w+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   nb+16(FP), CX
	NIBBLE_MASK(Y9, X9)
	VXORPS Y0, Y0, Y0
	VXORPS X12, X12, X12

q5kblk:
	PREFETCHT0 2048(SI)
	PREFETCHT0 2112(SI)
	PREFETCHT0 2176(SI)
	K4_SETUP
	VMOVDQU   16(SI), Y8
	VPXOR     Y11, Y11, Y11
	Q5K_CHUNK(0, HBITS(VPSLLW, 4, Y4), HBITS(VPSLLW, 3, Y5))
	Q5K_CHUNK(1, HBITS(VPSLLW, 2, Y4), HBITS(VPSLLW, 1, Y5))
	Q5K_CHUNK(2, HBITS(VPSRLW, 0, Y4), HBITS(VPSRLW, 1, Y5))
	Q5K_CHUNK(3, HBITS(VPSRLW, 2, Y4), HBITS(VPSRLW, 3, Y5))
	VCVTDQ2PS Y11, Y11
	VFMADD231PS Y11, Y2, Y0
	ADDQ      $176, SI
	ADDQ      $292, DI
	DECQ      CX
	JNZ       q5kblk

	KFINISH

// Q6_DOT: Y11 += scale pair · Σ (q − 32)·q8 for one 32-element group whose
// levels (0..63) are in Y7; (q−32)·q8 is q·q8 − 32·q8 since VPMADDUBSW
// needs the unsigned operand. X13 holds the block's 16 int8 scales; Y10
// 32 in every byte.
#define Q6_DOT(xoff, shuf) \
	VMOVDQU    xoff(DI), Y1; \
	VPMADDUBSW Y1, Y10, Y14; \
	VPMADDUBSW Y1, Y7, Y7; \
	VPSUBW     Y14, Y7, Y7; \
	VPSHUFB    q6Shuf<>+shuf(SB), X13, X15; \
	VPMOVSXBW  X15, Y15; \
	VPMADDWD   Y15, Y7, Y7; \
	VPADDD     Y7, Y11, Y11

// Q6_HALF: 128 elements: ql[64h:64h+64], qh[32h:32h+32], scales 8h..8h+7.
#define Q6_HALF(qloff, qhoff, xoff, shuf) \
	VMOVDQU qloff(SI), Y3; \
	VMOVDQU qloff+32(SI), Y4; \
	VMOVDQU qhoff(SI), Y5; \
	Q6_GROUP(Y3, 0, 0, Y8); \
	Q6_DOT(xoff, shuf); \
	Q6_GROUP(Y4, 0, 2, Y8); \
	Q6_DOT(xoff+32, shuf+16); \
	Q6_GROUP(Y3, 4, 4, Y8); \
	Q6_DOT(xoff+64, shuf+32); \
	Q6_GROUP(Y4, 4, 6, Y8); \
	Q6_DOT(xoff+96, shuf+48)

// func dotQ6_KQ8_K(w, x *byte, nb int) float32
// w: [ql 128][qh 64][scales int8 16][d f16] per super-block.
TEXT ·dotQ6_KQ8_K(SB), NOSPLIT, $0-28
	MOVQ         w+0(FP), SI
	MOVQ         x+8(FP), DI
	MOVQ         nb+16(FP), CX
	NIBBLE_MASK(Y9, X9)
	MOVL         $0x03030303, DX
	VMOVD        DX, X8
	VPBROADCASTD X8, Y8
	MOVL         $0x20202020, DX
	VMOVD        DX, X10
	VPBROADCASTD X10, Y10
	VXORPS       Y0, Y0, Y0
	VXORPS       X12, X12, X12

q6kblk:
	PREFETCHT0 2048(SI)
	PREFETCHT0 2112(SI)
	PREFETCHT0 2176(SI)
	PREFETCHT0 2240(SI)
	MOVWLZX      208(SI), DX // d is the block's last field: a 4-byte load could leave the row
	VMOVD        DX, X1
	VCVTPH2PS    X1, X1
	VMULSS       (DI), X1, X1
	VBROADCASTSS X1, Y2
	VMOVDQU      192(SI), X13
	VPXOR        Y11, Y11, Y11
	Q6_HALF(0, 128, 4, 0)
	Q6_HALF(64, 160, 132, 64)
	VCVTDQ2PS    Y11, Y11
	VFMADD231PS  Y11, Y2, Y0
	ADDQ         $210, SI
	ADDQ         $292, DI
	DECQ         CX
	JNZ          q6kblk
	KFINISH

// func dotQ8_KQ8_K(w, x *byte, nb int) float32
// Q8_K weights (rare, but a valid GGUF type) against Q8_K activations; the
// quants are in [−127, 127], so the sign trick is exact.
#define Q8K_CHUNK(off) \
	VMOVDQU    off(SI), Y4; \
	VMOVDQU    off(DI), Y5; \
	VPSIGNB    Y4, Y4, Y6; \
	VPSIGNB    Y4, Y5, Y5; \
	VPMADDUBSW Y5, Y6, Y6; \
	VPMADDWD   Y10, Y6, Y6; \
	VPADDD     Y6, Y11, Y11

TEXT ·dotQ8_KQ8_K(SB), NOSPLIT, $0-28
	MOVQ   w+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   nb+16(FP), CX
	ONES_I16(Y10, X10)
	VXORPS Y0, Y0, Y0
	VXORPS X12, X12, X12

q8kblk:
	VMOVSS       (SI), X1
	VMULSS       (DI), X1, X1
	VBROADCASTSS X1, Y2
	VPXOR        Y11, Y11, Y11
	Q8K_CHUNK(4)
	Q8K_CHUNK(36)
	Q8K_CHUNK(68)
	Q8K_CHUNK(100)
	Q8K_CHUNK(132)
	Q8K_CHUNK(164)
	Q8K_CHUNK(196)
	Q8K_CHUNK(228)
	VCVTDQ2PS    Y11, Y11
	VFMADD231PS  Y11, Y2, Y0
	ADDQ         $292, SI
	ADDQ         $292, DI
	DECQ         CX
	JNZ          q8kblk
	KFINISH
