//go:build amd64 && !noasm

#include "dotq_amd64.h"
#include "dotk_amd64.h"

// Two-activation K-quant kernels (prefill): one weight row against two Q8_K
// activation rows, func dotQ?_KQ8_KRows2(w, x0, x1 *byte, nb int, dst0, dst1
// *float32); nb ≥ 1. The weight's scales and levels are unpacked once per
// super-block for both. Integer sums are exact in any order and every float
// operation is the one the single-activation kernel (dotk_amd64.s) performs,
// so each result equals it bit for bit.
//
// Registers: SI w, DI x0, R8 x1, CX super-blocks left; Y0/Y1 Σ d·sumi, X12/X13
// Σ dmin·mins·bsums, Y11/Y14 the super-block's integer sums, Y2/Y3 its d, for
// activation 0/1; X10 [w.d, w.dmin]; Y9 0x0f bytes.

// K4_ACT: activation at xp: its mins term into maccX (mins as words in X5)
// and d into dY, from X10 = [w.d, w.dmin]; clobbers X6-X8.
#define K4_ACT(xp, maccX, dY) \
	VMOVDQU      260(xp), Y6; \
	VEXTRACTI128 $1, Y6, X7; \
	VPHADDW      X7, X6, X6; \
	VPMADDWD     X6, X5, X6; \
	VCVTDQ2PS    X6, X6; \
	VBROADCASTSS (xp), X7; \
	VMULPS       X10, X7, X7; \
	VMOVSHDUP    X7, X8; \
	VBROADCASTSS X8, X8; \
	VFMADD231PS  X6, X8, maccX; \
	VBROADCASTSS X7, dY

// K4_SETUP2: scales to 0(SP), mins to X5, w's d/dmin to X10, then both
// activations' terms.
#define K4_SETUP2 \
	UNPACK_K4(4); \
	VMOVD     AX, X4; \
	VPINSRD   $1, BX, X4, X4; \
	VPMOVZXBW X4, X4; \
	VMOVDQU   X4, 0(SP); \
	VMOVD     DX, X5; \
	VPINSRD   $1, R13, X5, X5; \
	VPMOVZXBW X5, X5; \
	VMOVD     (SI), X10; \
	VCVTPH2PS X10, X10; \
	K4_ACT(DI, X12, Y2); \
	K4_ACT(R8, X13, Y3)

// K4_CHUNK2: levels in Y4 (low) / Y5 (high) against both activations.
#define K4_CHUNK2(xoff, s0, s1) \
	VPBROADCASTW s0(SP), Y6; \
	VPBROADCASTW s1(SP), Y7; \
	VPMADDUBSW   xoff(DI), Y4, Y8; \
	VPMADDWD     Y6, Y8, Y8; \
	VPADDD       Y8, Y11, Y11; \
	VPMADDUBSW   xoff+32(DI), Y5, Y8; \
	VPMADDWD     Y7, Y8, Y8; \
	VPADDD       Y8, Y11, Y11; \
	VPMADDUBSW   xoff(R8), Y4, Y8; \
	VPMADDWD     Y6, Y8, Y8; \
	VPADDD       Y8, Y14, Y14; \
	VPMADDUBSW   xoff+32(R8), Y5, Y8; \
	VPMADDWD     Y7, Y8, Y8; \
	VPADDD       Y8, Y14, Y14

#define Q4K_CHUNK2(j) \
	VMOVDQU 16+32*j(SI), Y4; \
	VPSRLW  $4, Y4, Y5; \
	VPAND   Y9, Y4, Y4; \
	VPAND   Y9, Y5, Y5; \
	K4_CHUNK2(4+64*j, 4*j, 4*j+2)

// K_BLOCK_END folds a super-block's integer sums into the accumulators.
#define K_BLOCK_END \
	VCVTDQ2PS   Y11, Y11; \
	VFMADD231PS Y11, Y2, Y0; \
	VCVTDQ2PS   Y14, Y14; \
	VFMADD231PS Y14, Y3, Y1

// KSTORE stores Σ lanes of accY − Σ lanes of mX at dst (KFINISH's sequence).
#define KSTORE(accY, accX, mX, tX, dst) \
	HSUM(accY, accX, tX); \
	VMOVHLPS  mX, mX, tX; \
	VADDPS    tX, mX, mX; \
	VMOVSHDUP mX, tX; \
	VADDSS    tX, mX, mX; \
	VSUBSS    mX, accX, accX; \
	VMOVSS    accX, dst

#define K2_ARGS \
	MOVQ   w+0(FP), SI; \
	MOVQ   x0+8(FP), DI; \
	MOVQ   x1+16(FP), R8; \
	MOVQ   nb+24(FP), CX; \
	MOVQ   dst0+32(FP), R11; \
	MOVQ   dst1+40(FP), R12; \
	NIBBLE_MASK(Y9, X9); \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS X12, X12, X12; \
	VXORPS X13, X13, X13

#define K2_FINISH \
	KSTORE(Y0, X0, X12, X4, (R11)); \
	KSTORE(Y1, X1, X13, X4, (R12)); \
	VZEROUPPER; \
	RET

// func dotQ4_KQ8_KRows2(w, x0, x1 *byte, nb int, dst0, dst1 *float32)
TEXT ·dotQ4_KQ8_KRows2(SB), NOSPLIT, $16-48
	K2_ARGS

q4k2blk:
	PREFETCHT0 2048(SI)
	PREFETCHT0 2112(SI)
	PREFETCHT0 2176(SI)
	K4_SETUP2
	VPXOR      Y11, Y11, Y11
	VPXOR      Y14, Y14, Y14
	Q4K_CHUNK2(0)
	Q4K_CHUNK2(1)
	Q4K_CHUNK2(2)
	Q4K_CHUNK2(3)
	K_BLOCK_END
	ADDQ       $144, SI
	ADDQ       $292, DI
	ADDQ       $292, R8
	DECQ       CX
	JNZ        q4k2blk
	K2_FINISH

// Q5K_CHUNK2: as Q4K_CHUNK2 with the fifth bits from qh (Y15); HBITS2 is
// dotk_amd64.s's HBITS reading Y15.
#define HBITS2(op, n, dst) \
	op    $n, Y15, Y6; \
	VPAND bytes10<>(SB), Y6, Y6; \
	VPOR  Y6, dst, dst

#define Q5K_CHUNK2(j, shl, shr) \
	VMOVDQU 48+32*j(SI), Y4; \
	VPSRLW  $4, Y4, Y5; \
	VPAND   Y9, Y4, Y4; \
	VPAND   Y9, Y5, Y5; \
	shl; \
	shr; \
	K4_CHUNK2(4+64*j, 4*j, 4*j+2)

// func dotQ5_KQ8_KRows2(w, x0, x1 *byte, nb int, dst0, dst1 *float32)
TEXT ·dotQ5_KQ8_KRows2(SB), NOSPLIT, $16-48
	K2_ARGS

q5k2blk:
	PREFETCHT0 2048(SI)
	PREFETCHT0 2112(SI)
	PREFETCHT0 2176(SI)
	K4_SETUP2
	VMOVDQU    16(SI), Y15
	VPXOR      Y11, Y11, Y11
	VPXOR      Y14, Y14, Y14
	Q5K_CHUNK2(0, HBITS2(VPSLLW, 4, Y4), HBITS2(VPSLLW, 3, Y5))
	Q5K_CHUNK2(1, HBITS2(VPSLLW, 2, Y4), HBITS2(VPSLLW, 1, Y5))
	Q5K_CHUNK2(2, HBITS2(VPSRLW, 0, Y4), HBITS2(VPSRLW, 1, Y5))
	Q5K_CHUNK2(3, HBITS2(VPSRLW, 2, Y4), HBITS2(VPSRLW, 3, Y5))
	K_BLOCK_END
	ADDQ       $176, SI
	ADDQ       $292, DI
	ADDQ       $292, R8
	DECQ       CX
	JNZ        q5k2blk
	K2_FINISH

// Q6_DOT2: Y7 holds one 32-element group's levels; adds its scaled
// Σ (q−32)·q8 for both activations (Y11/Y14). Y10 = 32 in every byte.
#define Q6_DOT2(xoff, shuf) \
	VPSHUFB    q6Shuf<>+shuf(SB), X13, X15; \
	VPMOVSXBW  X15, Y15; \
	VPMADDUBSW xoff(DI), Y10, Y8; \
	VPMADDUBSW xoff(DI), Y7, Y6; \
	VPSUBW     Y8, Y6, Y6; \
	VPMADDWD   Y15, Y6, Y6; \
	VPADDD     Y6, Y11, Y11; \
	VPMADDUBSW xoff(R8), Y10, Y8; \
	VPMADDUBSW xoff(R8), Y7, Y6; \
	VPSUBW     Y8, Y6, Y6; \
	VPMADDWD   Y15, Y6, Y6; \
	VPADDD     Y6, Y14, Y14

#define Q6_HALF2(qloff, qhoff, xoff, shuf) \
	VMOVDQU qloff(SI), Y3; \
	VMOVDQU qloff+32(SI), Y4; \
	VMOVDQU qhoff(SI), Y5; \
	Q6_GROUP(Y3, 0, 0, bytes03<>(SB)); \
	Q6_DOT2(xoff, shuf); \
	Q6_GROUP(Y4, 0, 2, bytes03<>(SB)); \
	Q6_DOT2(xoff+32, shuf+16); \
	Q6_GROUP(Y3, 4, 4, bytes03<>(SB)); \
	Q6_DOT2(xoff+64, shuf+32); \
	Q6_GROUP(Y4, 4, 6, bytes03<>(SB)); \
	Q6_DOT2(xoff+96, shuf+48)

// func dotQ6_KQ8_KRows2(w, x0, x1 *byte, nb int, dst0, dst1 *float32)
// Here X13 holds the block's scales and X12/X13 carry no mins (Q6_K has
// none): the stores subtract X2 = 0 instead. w.d is in X10.
TEXT ·dotQ6_KQ8_KRows2(SB), NOSPLIT, $0-48
	MOVQ         w+0(FP), SI
	MOVQ         x0+8(FP), DI
	MOVQ         x1+16(FP), R8
	MOVQ         nb+24(FP), CX
	MOVQ         dst0+32(FP), R11
	MOVQ         dst1+40(FP), R12
	NIBBLE_MASK(Y9, X9)
	MOVL         $0x20202020, DX
	VMOVD        DX, X10
	VPBROADCASTD X10, Y10
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1

q6k2blk:
	PREFETCHT0   2048(SI)
	PREFETCHT0   2112(SI)
	PREFETCHT0   2176(SI)
	PREFETCHT0   2240(SI)
	VMOVDQU      192(SI), X13
	VPXOR        Y11, Y11, Y11
	VPXOR        Y14, Y14, Y14
	Q6_HALF2(0, 128, 4, 0)
	Q6_HALF2(64, 160, 132, 64)
	MOVWLZX      208(SI), DX
	VMOVD        DX, X12
	VCVTPH2PS    X12, X12
	VMULSS       (DI), X12, X2
	VBROADCASTSS X2, Y2
	VMULSS       (R8), X12, X3
	VBROADCASTSS X3, Y3
	K_BLOCK_END
	ADDQ         $210, SI
	ADDQ         $292, DI
	ADDQ         $292, R8
	DECQ         CX
	JNZ          q6k2blk
	VXORPS       X12, X12, X12
	VXORPS       X13, X13, X13
	K2_FINISH
