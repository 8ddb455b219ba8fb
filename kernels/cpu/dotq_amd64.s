//go:build amd64 && !noasm

#include "dotq_amd64.h"

// Legacy-quant row kernels: dst[r] = Σ W[r]·x for r < rows, weight rows at
// w, w+wstride, ... against one activation row x of nb blocks in the partner
// format (nb ≥ 1). Two rows go through the block loop together, sharing the
// activation's loads and scale conversion; one call covers a whole tile, so
// there is no per-row call overhead. Every row runs the same instruction
// sequence whether it is in a pair or alone, so a result depends neither on
// the row count nor on tiling. Every kernel is the same skeleton around one
// per-block ROW macro.
//
// The pair loops prefetch the same block eight rows ahead: weights stream
// from memory once per token, and in BenchmarkDecodeStep this software
// prefetch lifts the matmuls from ~40 to ~70 tokens per CPU-second (the
// hardware prefetcher alone does not keep two interleaved streams fed).
//
// Registers: SI pair base, R8 wstride, R9 x, R10 nb, R11 dst, R12 rows left;
// AX/BX the pair's block pointers, DI x's, CX blocks left; Y0/Y1 the pair's
// accumulators (X7/X8 lane 1: Σ m·s for the Q8_1 partners), X2 x's [d, s],
// Y5 x's 32 quants, Y9 0x0f bytes, Y10 int16 ones.

// Q41ROW: Q4_1 [d m][qs 16] against Q8_1: levels 0..15, plus m·s.
#define Q41ROW(wp, accY, msX, tX, tY, uX, uY, vX, vY) \
	SCALE_DM(wp, msX, tX, tY); \
	NIBBLES(wp, 4, uX, uY, vX); \
	UNSIGNED_DOT(accY, tY, uY)

// Q80ROW: Q8_0 [d][qs int8 32] against Q8_0 (exact while no quant is −128,
// which ggml's quantizers never produce).
#define Q80ROW(wp, accY, tX, tY, uX, uY, vX, vY) \
	SCALE_D(wp, tX, tY); \
	VMOVDQU 2(wp), uY; \
	SIGNED_DOT(accY, tY, uY, vY)

// Q40ROW: Q4_0 [d][qs 16], levels − 8 against Q8_0.
#define Q40ROW(wp, accY, tX, tY, uX, uY, vX, vY) \
	SCALE_D(wp, tX, tY); \
	NIBBLES(wp, 2, uX, uY, vX); \
	VPSUBB bytes08<>(SB), uY, uY; \
	SIGNED_DOT(accY, tY, uY, vY)

// Q50ROW: Q5_0 [d][qh 4][qs 16] against Q8_0. Where the fifth bit is clear,
// OR-ing 0xf0 into the nibble makes it q − 16 as a signed byte.
#define Q50ROW(wp, accY, tX, tY, uX, uY, vX, vY) \
	SCALE_D(wp, tX, tY); \
	NIBBLES(wp, 6, uX, uY, vX); \
	HIGHBITS(wp, 2, vY); \
	VPANDN bytesF0<>(SB), vY, vY; \
	VPOR   vY, uY, uY; \
	SIGNED_DOT(accY, tY, uY, vY)

// Q51ROW: Q5_1 [d m][qh 4][qs 16] against Q8_1: levels 0..31.
#define Q51ROW(wp, accY, msX, tX, tY, uX, uY, vX, vY) \
	SCALE_DM(wp, msX, tX, tY); \
	NIBBLES(wp, 8, uX, uY, vX); \
	HIGHBITS(wp, 4, vY); \
	VPAND  bytes10<>(SB), vY, vY; \
	VPOR   vY, uY, uY; \
	UNSIGNED_DOT(accY, tY, uY)


// func dotQ4_1Q8_1Rows(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)
// Q4_1 rows against a Q8_1 activation row; m·s in lane 1 of X7/X8.
TEXT ·dotQ4_1Q8_1Rows(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x+16(FP), R9
	MOVQ nb+24(FP), R10
	MOVQ dst+32(FP), R11
	MOVQ rows+40(FP), R12
	NIBBLE_MASK(Y9, X9)
	ONES_I16(Y10, X10)

dotq4_1q8_1pair:
	CMPQ   R12, $2
	JLT    dotq4_1q8_1single
	MOVQ   SI, AX
	LEAQ   (SI)(R8*1), BX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS X7, X7, X7
	VXORPS X8, X8, X8

dotq4_1q8_1pairblk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (BX)(R8*8)
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   4(DI), Y5
	Q41ROW(AX, Y0, X7, X3, Y3, X4, Y4, X6, Y6)
	Q41ROW(BX, Y1, X8, X11, Y11, X12, Y12, X13, Y13)
	ADDQ      $20, AX
	ADDQ      $20, BX
	ADDQ      $36, DI
	DECQ      CX
	JNZ       dotq4_1q8_1pairblk
	HSUM(Y0, X0, X3)
	VMOVSHDUP X7, X7
	VADDSS    X7, X0, X0
	VMOVSS     X0, (R11)
	HSUM(Y1, X1, X3)
	VMOVSHDUP X8, X8
	VADDSS    X8, X1, X1
	VMOVSS     X1, 4(R11)
	ADDQ      $8, R11
	LEAQ      (SI)(R8*2), SI
	SUBQ      $2, R12
	JMP       dotq4_1q8_1pair

dotq4_1q8_1single:
	TESTQ  R12, R12
	JEQ    dotq4_1q8_1done
	MOVQ   SI, AX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS X7, X7, X7

dotq4_1q8_1singleblk:
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   4(DI), Y5
	Q41ROW(AX, Y0, X7, X3, Y3, X4, Y4, X6, Y6)
	ADDQ      $20, AX
	ADDQ      $36, DI
	DECQ      CX
	JNZ       dotq4_1q8_1singleblk
	HSUM(Y0, X0, X3)
	VMOVSHDUP X7, X7
	VADDSS    X7, X0, X0
	VMOVSS     X0, (R11)

dotq4_1q8_1done:
	VZEROUPPER
	RET

// func dotQ8_0Q8_0Rows(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)
// Q8_0 rows against a Q8_0 activation row.
TEXT ·dotQ8_0Q8_0Rows(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x+16(FP), R9
	MOVQ nb+24(FP), R10
	MOVQ dst+32(FP), R11
	MOVQ rows+40(FP), R12
	NIBBLE_MASK(Y9, X9)
	ONES_I16(Y10, X10)

dotq8_0q8_0pair:
	CMPQ   R12, $2
	JLT    dotq8_0q8_0single
	MOVQ   SI, AX
	LEAQ   (SI)(R8*1), BX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

dotq8_0q8_0pairblk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (BX)(R8*8)
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   2(DI), Y5
	Q80ROW(AX, Y0, X3, Y3, X4, Y4, X6, Y6)
	Q80ROW(BX, Y1, X11, Y11, X12, Y12, X13, Y13)
	ADDQ      $34, AX
	ADDQ      $34, BX
	ADDQ      $34, DI
	DECQ      CX
	JNZ       dotq8_0q8_0pairblk
	HSUM(Y0, X0, X3)
	VMOVSS     X0, (R11)
	HSUM(Y1, X1, X3)
	VMOVSS     X1, 4(R11)
	ADDQ      $8, R11
	LEAQ      (SI)(R8*2), SI
	SUBQ      $2, R12
	JMP       dotq8_0q8_0pair

dotq8_0q8_0single:
	TESTQ  R12, R12
	JEQ    dotq8_0q8_0done
	MOVQ   SI, AX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0

dotq8_0q8_0singleblk:
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   2(DI), Y5
	Q80ROW(AX, Y0, X3, Y3, X4, Y4, X6, Y6)
	ADDQ      $34, AX
	ADDQ      $34, DI
	DECQ      CX
	JNZ       dotq8_0q8_0singleblk
	HSUM(Y0, X0, X3)
	VMOVSS     X0, (R11)

dotq8_0q8_0done:
	VZEROUPPER
	RET

// func dotQ4_0Q8_0Rows(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)
// Q4_0 rows against a Q8_0 activation row.
TEXT ·dotQ4_0Q8_0Rows(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x+16(FP), R9
	MOVQ nb+24(FP), R10
	MOVQ dst+32(FP), R11
	MOVQ rows+40(FP), R12
	NIBBLE_MASK(Y9, X9)
	ONES_I16(Y10, X10)

dotq4_0q8_0pair:
	CMPQ   R12, $2
	JLT    dotq4_0q8_0single
	MOVQ   SI, AX
	LEAQ   (SI)(R8*1), BX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

dotq4_0q8_0pairblk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (BX)(R8*8)
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   2(DI), Y5
	Q40ROW(AX, Y0, X3, Y3, X4, Y4, X6, Y6)
	Q40ROW(BX, Y1, X11, Y11, X12, Y12, X13, Y13)
	ADDQ      $18, AX
	ADDQ      $18, BX
	ADDQ      $34, DI
	DECQ      CX
	JNZ       dotq4_0q8_0pairblk
	HSUM(Y0, X0, X3)
	VMOVSS     X0, (R11)
	HSUM(Y1, X1, X3)
	VMOVSS     X1, 4(R11)
	ADDQ      $8, R11
	LEAQ      (SI)(R8*2), SI
	SUBQ      $2, R12
	JMP       dotq4_0q8_0pair

dotq4_0q8_0single:
	TESTQ  R12, R12
	JEQ    dotq4_0q8_0done
	MOVQ   SI, AX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0

dotq4_0q8_0singleblk:
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   2(DI), Y5
	Q40ROW(AX, Y0, X3, Y3, X4, Y4, X6, Y6)
	ADDQ      $18, AX
	ADDQ      $34, DI
	DECQ      CX
	JNZ       dotq4_0q8_0singleblk
	HSUM(Y0, X0, X3)
	VMOVSS     X0, (R11)

dotq4_0q8_0done:
	VZEROUPPER
	RET

// func dotQ5_0Q8_0Rows(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)
// Q5_0 rows against a Q8_0 activation row.
TEXT ·dotQ5_0Q8_0Rows(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x+16(FP), R9
	MOVQ nb+24(FP), R10
	MOVQ dst+32(FP), R11
	MOVQ rows+40(FP), R12
	NIBBLE_MASK(Y9, X9)
	ONES_I16(Y10, X10)

dotq5_0q8_0pair:
	CMPQ   R12, $2
	JLT    dotq5_0q8_0single
	MOVQ   SI, AX
	LEAQ   (SI)(R8*1), BX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

dotq5_0q8_0pairblk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (BX)(R8*8)
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   2(DI), Y5
	Q50ROW(AX, Y0, X3, Y3, X4, Y4, X6, Y6)
	Q50ROW(BX, Y1, X11, Y11, X12, Y12, X13, Y13)
	ADDQ      $22, AX
	ADDQ      $22, BX
	ADDQ      $34, DI
	DECQ      CX
	JNZ       dotq5_0q8_0pairblk
	HSUM(Y0, X0, X3)
	VMOVSS     X0, (R11)
	HSUM(Y1, X1, X3)
	VMOVSS     X1, 4(R11)
	ADDQ      $8, R11
	LEAQ      (SI)(R8*2), SI
	SUBQ      $2, R12
	JMP       dotq5_0q8_0pair

dotq5_0q8_0single:
	TESTQ  R12, R12
	JEQ    dotq5_0q8_0done
	MOVQ   SI, AX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0

dotq5_0q8_0singleblk:
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   2(DI), Y5
	Q50ROW(AX, Y0, X3, Y3, X4, Y4, X6, Y6)
	ADDQ      $22, AX
	ADDQ      $34, DI
	DECQ      CX
	JNZ       dotq5_0q8_0singleblk
	HSUM(Y0, X0, X3)
	VMOVSS     X0, (R11)

dotq5_0q8_0done:
	VZEROUPPER
	RET

// func dotQ5_1Q8_1Rows(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)
// Q5_1 rows against a Q8_1 activation row; m·s in lane 1 of X7/X8.
TEXT ·dotQ5_1Q8_1Rows(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x+16(FP), R9
	MOVQ nb+24(FP), R10
	MOVQ dst+32(FP), R11
	MOVQ rows+40(FP), R12
	NIBBLE_MASK(Y9, X9)
	ONES_I16(Y10, X10)

dotq5_1q8_1pair:
	CMPQ   R12, $2
	JLT    dotq5_1q8_1single
	MOVQ   SI, AX
	LEAQ   (SI)(R8*1), BX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS X7, X7, X7
	VXORPS X8, X8, X8

dotq5_1q8_1pairblk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (BX)(R8*8)
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   4(DI), Y5
	Q51ROW(AX, Y0, X7, X3, Y3, X4, Y4, X6, Y6)
	Q51ROW(BX, Y1, X8, X11, Y11, X12, Y12, X13, Y13)
	ADDQ      $24, AX
	ADDQ      $24, BX
	ADDQ      $36, DI
	DECQ      CX
	JNZ       dotq5_1q8_1pairblk
	HSUM(Y0, X0, X3)
	VMOVSHDUP X7, X7
	VADDSS    X7, X0, X0
	VMOVSS     X0, (R11)
	HSUM(Y1, X1, X3)
	VMOVSHDUP X8, X8
	VADDSS    X8, X1, X1
	VMOVSS     X1, 4(R11)
	ADDQ      $8, R11
	LEAQ      (SI)(R8*2), SI
	SUBQ      $2, R12
	JMP       dotq5_1q8_1pair

dotq5_1q8_1single:
	TESTQ  R12, R12
	JEQ    dotq5_1q8_1done
	MOVQ   SI, AX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS X7, X7, X7

dotq5_1q8_1singleblk:
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   4(DI), Y5
	Q51ROW(AX, Y0, X7, X3, Y3, X4, Y4, X6, Y6)
	ADDQ      $24, AX
	ADDQ      $36, DI
	DECQ      CX
	JNZ       dotq5_1q8_1singleblk
	HSUM(Y0, X0, X3)
	VMOVSHDUP X7, X7
	VADDSS    X7, X0, X0
	VMOVSS     X0, (R11)

dotq5_1q8_1done:
	VZEROUPPER
	RET
