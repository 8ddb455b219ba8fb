//go:build amd64 && !noasm

#include "dotq_amd64.h"
#include "dotk_amd64.h"

// Four-activation Q4_K and Q6_K kernels: one weight row against four Q8_K activation
// rows (x, x+xstride, ...; results at dst, dst+dstride, ...), the weight's
// scales and levels unpacked once per super-block for the four. As in
// dotk2_amd64.s, integer sums are exact in any order and every float
// operation is the one the single-activation kernel performs, so each result
// equals it bit for bit.
//
// Registers: SI w, DI activation 0 (1 and 2 at (DI)(R10*1), (DI)(R10*2)),
// R15 activation 3, R10 xstride, CX super-blocks left, R11 dst, R12 dstride
// in bytes; Y0..Y3 Σ d·sumi and Y10..Y13 the super-block's integer sums, per
// activation; Y9 0x0f bytes. UNPACK_K4 clobbers AX, BX, DX, R13, R14.
//
// Frame: 0(SP) the super-block's 8 scale words; 16(SP) the four d products
// w.d·x.d; 32(SP) + 16·j activation j's Σ dmin·mins·bsums (4 lanes).

// K4_ACT4: K4_ACT for activation j at xp, its mins term accumulated in the
// frame; X14 = [w.d, w.dmin], mins as words in X5; clobbers X6-X8.
#define K4_ACT4(xp, j) \
	VMOVDQU      260(xp), Y6; \
	VEXTRACTI128 $1, Y6, X7; \
	VPHADDW      X7, X6, X6; \
	VPMADDWD     X6, X5, X6; \
	VCVTDQ2PS    X6, X6; \
	VBROADCASTSS (xp), X7; \
	VMULPS       X14, X7, X7; \
	VMOVSHDUP    X7, X8; \
	VBROADCASTSS X8, X8; \
	VMOVUPS      32+16*j(SP), X15; \
	VFMADD231PS  X6, X8, X15; \
	VMOVUPS      X15, 32+16*j(SP); \
	VMOVSS       X7, 16+4*j(SP)

// K4_DOT4: one activation's products with levels Y4 (low) / Y5 (high), the
// sub-block scales in Y6/Y7, into accY.
#define K4_DOT4(mem, accY) \
	VPMADDUBSW mem, Y4, Y8; \
	VPMADDWD   Y6, Y8, Y8; \
	VPADDD     Y8, accY, accY; \
	VPMADDUBSW 32+mem, Y5, Y8; \
	VPMADDWD   Y7, Y8, Y8; \
	VPADDD     Y8, accY, accY

#define Q4K_CHUNK4(j) \
	VMOVDQU      16+32*j(SI), Y4; \
	VPSRLW       $4, Y4, Y5; \
	VPAND        Y9, Y4, Y4; \
	VPAND        Y9, Y5, Y5; \
	VPBROADCASTW 4*j(SP), Y6; \
	VPBROADCASTW 4*j+2(SP), Y7; \
	K4_DOT4(4+64*j(DI), Y10); \
	K4_DOT4(4+64*j(DI)(R10*1), Y11); \
	K4_DOT4(4+64*j(DI)(R10*2), Y12); \
	K4_DOT4(4+64*j(R15), Y13)

// K_END4 folds activation j's integer sums (intY) into accY.
#define K_END4(j, intY, accY) \
	VCVTDQ2PS    intY, intY; \
	VBROADCASTSS 16+4*j(SP), Y8; \
	VFMADD231PS  intY, Y8, accY

// KSTORE4 stores Σ lanes of accY − Σ lanes of activation j's mins term.
#define KSTORE4(j, accY, accX, dst) \
	HSUM(accY, accX, X4); \
	VMOVUPS   32+16*j(SP), X5; \
	VMOVHLPS  X5, X5, X4; \
	VADDPS    X4, X5, X5; \
	VMOVSHDUP X5, X4; \
	VADDSS    X4, X5, X5; \
	VSUBSS    X5, accX, accX; \
	VMOVSS    accX, dst

// func dotQ4_KQ8_KRows4(w, x *byte, xstride, nb int, dst *float32, dstride int)
TEXT ·dotQ4_KQ8_KRows4(SB), NOSPLIT, $96-48
	MOVQ   w+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   xstride+16(FP), R10
	MOVQ   nb+24(FP), CX
	MOVQ   dst+32(FP), R11
	MOVQ   dstride+40(FP), R12
	SHLQ   $2, R12
	LEAQ   (DI)(R10*2), R15
	ADDQ   R10, R15
	NIBBLE_MASK(Y9, X9)
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VMOVUPS Y0, 32(SP)
	VMOVUPS Y0, 64(SP)

q4k4blk:
	PREFETCHT0 2048(SI)
	PREFETCHT0 2112(SI)
	PREFETCHT0 2176(SI)
	UNPACK_K4(4)
	VMOVD      AX, X4
	VPINSRD    $1, BX, X4, X4
	VPMOVZXBW  X4, X4
	VMOVDQU    X4, 0(SP)
	VMOVD      DX, X5
	VPINSRD    $1, R13, X5, X5
	VPMOVZXBW  X5, X5
	VMOVD      (SI), X14
	VCVTPH2PS  X14, X14
	K4_ACT4(DI, 0)
	LEAQ       (DI)(R10*1), AX
	K4_ACT4(AX, 1)
	LEAQ       (DI)(R10*2), AX
	K4_ACT4(AX, 2)
	K4_ACT4(R15, 3)
	VPXOR      Y10, Y10, Y10
	VPXOR      Y11, Y11, Y11
	VPXOR      Y12, Y12, Y12
	VPXOR      Y13, Y13, Y13
	Q4K_CHUNK4(0)
	Q4K_CHUNK4(1)
	Q4K_CHUNK4(2)
	Q4K_CHUNK4(3)
	K_END4(0, Y10, Y0)
	K_END4(1, Y11, Y1)
	K_END4(2, Y12, Y2)
	K_END4(3, Y13, Y3)
	ADDQ       $144, SI
	ADDQ       $292, DI
	ADDQ       $292, R15
	DECQ       CX
	JNZ        q4k4blk

	KSTORE4(0, Y0, X0, (R11))
	KSTORE4(1, Y1, X1, (R11)(R12*1))
	KSTORE4(2, Y2, X2, (R11)(R12*2))
	LEAQ (R11)(R12*2), AX
	ADDQ R12, AX
	KSTORE4(3, Y3, X3, (AX))
	VZEROUPPER
	RET

// Q6_K against four activations. Registers: Y0..Y3 the super-block's
// integer sums per activation; Y4 ql bytes, Y5 qh, Y7 one 32-element
// group's levels, Y11 its 16 scale words, X13 the block's scales; Y10 32 in
// every byte. Frame: 32·j(SP) activation j's Σ d·sumi.

// Q6_DOT4: one activation's scaled Σ (q−32)·q8 for the group in Y7.
#define Q6_DOT4(mem, accY) \
	VPMADDUBSW mem, Y10, Y8; \
	VPMADDUBSW mem, Y7, Y6; \
	VPSUBW     Y8, Y6, Y6; \
	VPMADDWD   Y11, Y6, Y6; \
	VPADDD     Y6, accY, accY

// Q6_GROUP4: levels of one 32-element group (ql at qloff, nibble shift lo,
// qh bits at qhShift) against the four activations at xoff.
#define Q6_GROUP4(qloff, lo, qhShift, xoff, shuf) \
	VMOVDQU    qloff(SI), Y4; \
	Q6_GROUP(Y4, lo, qhShift, bytes03<>(SB)); \
	VPSHUFB    q6Shuf<>+shuf(SB), X13, X11; \
	VPMOVSXBW  X11, Y11; \
	Q6_DOT4(xoff(DI), Y0); \
	Q6_DOT4(xoff(DI)(R10*1), Y1); \
	Q6_DOT4(xoff(DI)(R10*2), Y2); \
	Q6_DOT4(xoff(R15), Y3)

// Q6_HALF4: a 128-element half, as dotk2_amd64.s's Q6_HALF2.
#define Q6_HALF4(qloff, qhoff, xoff, shuf) \
	VMOVDQU qhoff(SI), Y5; \
	Q6_GROUP4(qloff, 0, 0, xoff, shuf); \
	Q6_GROUP4(qloff+32, 0, 2, xoff+32, shuf+16); \
	Q6_GROUP4(qloff, 4, 4, xoff+64, shuf+32); \
	Q6_GROUP4(qloff+32, 4, 6, xoff+96, shuf+48)

// Q6_END4: activation j's integer sums (intY, at xmem) into its Σ d·sumi,
// d = w.d (X12) · x.d as the single-activation kernel forms it.
#define Q6_END4(j, xmem, intY) \
	VMULSS       xmem, X12, X6; \
	VBROADCASTSS X6, Y6; \
	VCVTDQ2PS    intY, intY; \
	VMOVUPS      32*j(SP), Y8; \
	VFMADD231PS  intY, Y6, Y8; \
	VMOVUPS      Y8, 32*j(SP)

// Q6_STORE4: Σ lanes of activation j's accumulator (minus Q6_K's zero mins
// term, which changes no bit) to dst.
#define Q6_STORE4(j, dst) \
	VMOVUPS 32*j(SP), Y8; \
	HSUM(Y8, X8, X4); \
	VMOVSS  X8, dst

// func dotQ6_KQ8_KRows4(w, x *byte, xstride, nb int, dst *float32, dstride int)
TEXT ·dotQ6_KQ8_KRows4(SB), NOSPLIT, $128-48
	MOVQ         w+0(FP), SI
	MOVQ         x+8(FP), DI
	MOVQ         xstride+16(FP), R10
	MOVQ         nb+24(FP), CX
	MOVQ         dst+32(FP), R11
	MOVQ         dstride+40(FP), R12
	SHLQ         $2, R12
	LEAQ         (DI)(R10*2), R15
	ADDQ         R10, R15
	NIBBLE_MASK(Y9, X9)
	MOVL         $0x20202020, DX
	VMOVD        DX, X10
	VPBROADCASTD X10, Y10
	VXORPS       Y0, Y0, Y0
	VMOVUPS      Y0, 0(SP)
	VMOVUPS      Y0, 32(SP)
	VMOVUPS      Y0, 64(SP)
	VMOVUPS      Y0, 96(SP)

q6k4blk:
	PREFETCHT0 2048(SI)
	PREFETCHT0 2112(SI)
	PREFETCHT0 2176(SI)
	PREFETCHT0 2240(SI)
	VMOVDQU    192(SI), X13
	VPXOR      Y0, Y0, Y0
	VPXOR      Y1, Y1, Y1
	VPXOR      Y2, Y2, Y2
	VPXOR      Y3, Y3, Y3
	Q6_HALF4(0, 128, 4, 0)
	Q6_HALF4(64, 160, 132, 64)
	MOVWLZX    208(SI), DX
	VMOVD      DX, X12
	VCVTPH2PS  X12, X12
	Q6_END4(0, (DI), Y0)
	Q6_END4(1, (DI)(R10*1), Y1)
	Q6_END4(2, (DI)(R10*2), Y2)
	Q6_END4(3, (R15), Y3)
	ADDQ       $210, SI
	ADDQ       $292, DI
	ADDQ       $292, R15
	DECQ       CX
	JNZ        q6k4blk

	Q6_STORE4(0, (R11))
	Q6_STORE4(1, (R11)(R12*1))
	Q6_STORE4(2, (R11)(R12*2))
	LEAQ (R11)(R12*2), AX
	ADDQ R12, AX
	Q6_STORE4(3, (AX))
	VZEROUPPER
	RET
