//go:build amd64 && !noasm

#include "dotq_amd64.h"

// func dotQ4_1Q8_1Rows2(w *byte, wstride int, x0, x1 *byte, nb int, dst0, dst1 *float32, pairs int)
// Batched form of dotQ4_1Q8_1Rows: pairs of weight rows (A, B) against two
// activation rows (0, 1) at once, so each block's nibbles are unpacked and
// its scales converted once for four products. Each product runs exactly the
// operations dotQ4_1Q8_1Rows runs for it, in the same order, so batching does
// not change a single bit of the results.
//
// Registers: AX/BX rows A/B, DI/DX activations 0/1, CX blocks left; Y0 A0,
// Y1 B0, Y2 A1, Y3 B1 accumulators; X7/X8: [·, mA·s, ·, mB·s] sums for
// activation 0/1; X4 [dA mA dB mB]; Y11/Y12 levels of A/B.
TEXT ·dotQ4_1Q8_1Rows2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x0+16(FP), R9
	MOVQ x1+24(FP), R10
	MOVQ nb+32(FP), R11
	MOVQ dst0+40(FP), R12
	MOVQ dst1+48(FP), R13
	MOVQ pairs+56(FP), R14
	NIBBLE_MASK(Y9, X9)
	ONES_I16(Y10, X10)

r2pair:
	TESTQ  R14, R14
	JEQ    r2done
	MOVQ   SI, AX
	LEAQ   (SI)(R8*1), BX
	MOVQ   R9, DI
	MOVQ   R10, DX
	MOVQ   R11, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS X7, X7, X7
	VXORPS X8, X8, X8

r2blk:
	PREFETCHT0   (AX)(R8*8)
	PREFETCHT0   (BX)(R8*8)
	VMOVD        (AX), X4
	VPINSRD      $1, (BX), X4, X4
	VCVTPH2PS    X4, X4
	VMOVD        (DI), X5
	VCVTPH2PS    X5, X5
	VMOVDDUP     X5, X5
	VMULPS       X5, X4, X5
	VADDPS       X5, X7, X7
	VMOVD        (DX), X6
	VCVTPH2PS    X6, X6
	VMOVDDUP     X6, X6
	VMULPS       X6, X4, X6
	VADDPS       X6, X8, X8
	NIBBLES(AX, 4, X11, Y11, X13)
	NIBBLES(BX, 4, X12, Y12, X13)
	VBROADCASTSS X5, Y13
	VPMADDUBSW   4(DI), Y11, Y14
	VPMADDWD     Y10, Y14, Y14
	VCVTDQ2PS    Y14, Y14
	VFMADD231PS  Y14, Y13, Y0
	VBROADCASTSS X6, Y13
	VPMADDUBSW   4(DX), Y11, Y14
	VPMADDWD     Y10, Y14, Y14
	VCVTDQ2PS    Y14, Y14
	VFMADD231PS  Y14, Y13, Y2
	VMOVHLPS     X5, X5, X13
	VBROADCASTSS X13, Y13
	VPMADDUBSW   4(DI), Y12, Y14
	VPMADDWD     Y10, Y14, Y14
	VCVTDQ2PS    Y14, Y14
	VFMADD231PS  Y14, Y13, Y1
	VMOVHLPS     X6, X6, X13
	VBROADCASTSS X13, Y13
	VPMADDUBSW   4(DX), Y12, Y14
	VPMADDWD     Y10, Y14, Y14
	VCVTDQ2PS    Y14, Y14
	VFMADD231PS  Y14, Y13, Y3
	ADDQ         $20, AX
	ADDQ         $20, BX
	ADDQ         $36, DI
	ADDQ         $36, DX
	DECQ         CX
	JNZ          r2blk

	HSUM(Y0, X0, X13)
	VMOVSHDUP X7, X13
	VADDSS    X13, X0, X0
	VMOVSS     X0, (R12)
	HSUM(Y1, X1, X13)
	VPERMILPS $3, X7, X13
	VADDSS    X13, X1, X1
	VMOVSS     X1, 4(R12)
	HSUM(Y2, X2, X13)
	VMOVSHDUP X8, X13
	VADDSS    X13, X2, X2
	VMOVSS     X2, (R13)
	HSUM(Y3, X3, X13)
	VPERMILPS $3, X8, X13
	VADDSS    X13, X3, X3
	VMOVSS     X3, 4(R13)
	ADDQ      $8, R12
	ADDQ      $8, R13
	LEAQ      (SI)(R8*2), SI
	DECQ      R14
	JMP       r2pair

r2done:
	VZEROUPPER
	RET

// Q80PAIR: one Q8_0 weight row (quants uY, |quants| aY, scale in X4) against
// one activation (scale sX, quants xY) into accY, with the operations
// Q80ROW performs, so results match dotQ8_0Q8_0Rows bit for bit.
#define Q80PAIR(sX, xY, uY, aY, accY) \
	VMULSS       sX, X4, X5; \
	VBROADCASTSS X5, Y5; \
	VPSIGNB      uY, xY, Y15; \
	VPMADDUBSW   Y15, aY, Y15; \
	VPMADDWD     Y10, Y15, Y15; \
	VCVTDQ2PS    Y15, Y15; \
	VFMADD231PS  Y15, Y5, accY

// func dotQ8_0Q8_0Rows2(w *byte, wstride int, x0, x1 *byte, nb int, dst0, dst1 *float32, pairs int)
// dotQ4_1Q8_1Rows2's counterpart for Q8_0. Registers: Y0 A0, Y1 B0, Y2 A1,
// Y3 B1; X6/X7 and Y8/Y9 the activations' scales and quants; Y11/Y12 row A's
// quants and their magnitudes, Y13/Y14 row B's.
TEXT ·dotQ8_0Q8_0Rows2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x0+16(FP), R9
	MOVQ x1+24(FP), R10
	MOVQ nb+32(FP), R11
	MOVQ dst0+40(FP), R12
	MOVQ dst1+48(FP), R13
	MOVQ pairs+56(FP), R14
	ONES_I16(Y10, X10)

q80r2pair:
	TESTQ  R14, R14
	JEQ    q80r2done
	MOVQ   SI, AX
	LEAQ   (SI)(R8*1), BX
	MOVQ   R9, DI
	MOVQ   R10, DX
	MOVQ   R11, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

q80r2blk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (BX)(R8*8)
	VMOVD      (DI), X6
	VCVTPH2PS  X6, X6
	VMOVDQU    2(DI), Y8
	VMOVD      (DX), X7
	VCVTPH2PS  X7, X7
	VMOVDQU    2(DX), Y9
	VMOVDQU    2(AX), Y11
	VPSIGNB    Y11, Y11, Y12
	VMOVDQU    2(BX), Y13
	VPSIGNB    Y13, Y13, Y14
	VMOVD      (AX), X4
	VCVTPH2PS  X4, X4
	Q80PAIR(X6, Y8, Y11, Y12, Y0)
	Q80PAIR(X7, Y9, Y11, Y12, Y2)
	VMOVD      (BX), X4
	VCVTPH2PS  X4, X4
	Q80PAIR(X6, Y8, Y13, Y14, Y1)
	Q80PAIR(X7, Y9, Y13, Y14, Y3)
	ADDQ       $34, AX
	ADDQ       $34, BX
	ADDQ       $34, DI
	ADDQ       $34, DX
	DECQ       CX
	JNZ        q80r2blk

	HSUM(Y0, X0, X5)
	VMOVSS X0, (R12)
	HSUM(Y1, X1, X5)
	VMOVSS X1, 4(R12)
	HSUM(Y2, X2, X5)
	VMOVSS X2, (R13)
	HSUM(Y3, X3, X5)
	VMOVSS X3, 4(R13)
	ADDQ  $8, R12
	ADDQ  $8, R13
	LEAQ  (SI)(R8*2), SI
	DECQ  R14
	JMP   q80r2pair

q80r2done:
	VZEROUPPER
	RET
