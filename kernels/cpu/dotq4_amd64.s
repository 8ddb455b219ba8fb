//go:build amd64 && !noasm

#include "dotq_amd64.h"

// Four-activation row kernels: each weight row of a tile against four
// activation rows (x, x+xstride, ...; results at dst, dst+dstride, ...), so a
// block's nibbles are unpacked and its scale converted once for four
// products instead of once per product. Each product runs exactly the
// operations the one-row kernel (dotq_amd64.s) runs for it, in the same
// order, so the results match it bit for bit.
//
// Registers: SI row base, R8 wstride, R9 x, R10 xstride, R11 nb, R12 dst,
// R13 dstride in bytes, R14 rows left; AX the row's block pointer, DI
// activations 0/1 (the second at (DI)(R10*1)), DX activations 2/3, CX blocks
// left; Y0..Y3 the four accumulators; Y10 int16 ones.

// HSUM4 sums each accumulator's lanes as the one-row kernel does.
#define HSUM4 \
	HSUM(Y0, X0, X13); \
	HSUM(Y1, X1, X13); \
	HSUM(Y2, X2, X13); \
	HSUM(Y3, X3, X13)

// ADD_MS adds lane lane of msX to accX: the Q8_1 partners' Σ m·s, in lanes
// 1 and 3 of X4 (activations 0/1) and X5 (2/3). (dotQ4_1Q8_1Rows moves lane
// 1 down with VMOVSHDUP; the sum is the same.)
#define ADD_MS(msX, accX, lane) \
	VPERMILPS $lane, msX, X13; \
	VADDSS    X13, accX, accX

// STORE4 writes the four results of a row to their activation rows' dst.
#define STORE4 \
	VMOVSS X0, (R12); \
	VMOVSS X1, (R12)(R13*1); \
	VMOVSS X2, (R12)(R13*2); \
	LEAQ   (R12)(R13*2), BX; \
	VMOVSS X3, (BX)(R13*1)

// Q41PROD: accY += (d·dx in lane 0 of sX) · Σ pairs of levels Y11 × the
// activation quants at mem.
#define Q41PROD(sX, mem, accY) \
	VBROADCASTSS sX, Y13; \
	VPMADDUBSW   mem, Y11, Y14; \
	VPMADDWD     Y10, Y14, Y14; \
	VCVTDQ2PS    Y14, Y14; \
	VFMADD231PS  Y14, Y13, accY

// func dotQ4_1Q8_1Rows4(w *byte, wstride int, x *byte, xstride int, nb int, dst *float32, dstride int, rows int)
// X12 [d m d m] of the weight block; X6/X7 [d·dx m·s d·dx m·s] for
// activations 0/1 and 2/3, summed into X4/X5; Y11 the block's levels.
TEXT ·dotQ4_1Q8_1Rows4(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x+16(FP), R9
	MOVQ xstride+24(FP), R10
	MOVQ nb+32(FP), R11
	MOVQ dst+40(FP), R12
	MOVQ dstride+48(FP), R13
	SHLQ $2, R13
	MOVQ rows+56(FP), R14
	NIBBLE_MASK(Y9, X9)
	ONES_I16(Y10, X10)

q41r4row:
	TESTQ  R14, R14
	JEQ    q41r4done
	MOVQ   SI, AX
	MOVQ   R9, DI
	LEAQ   (R9)(R10*2), DX
	MOVQ   R11, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS X4, X4, X4
	VXORPS X5, X5, X5

q41r4blk:
	PREFETCHT0 (AX)(R8*8)
	VMOVD      (AX), X12
	VCVTPH2PS  X12, X12
	VMOVDDUP   X12, X12
	VMOVD      (DI), X6
	VPINSRD    $1, (DI)(R10*1), X6, X6
	VCVTPH2PS  X6, X6
	VMULPS     X6, X12, X6
	VADDPS     X6, X4, X4
	VMOVD      (DX), X7
	VPINSRD    $1, (DX)(R10*1), X7, X7
	VCVTPH2PS  X7, X7
	VMULPS     X7, X12, X7
	VADDPS     X7, X5, X5
	NIBBLES(AX, 4, X11, Y11, X13)
	Q41PROD(X6, 4(DI), Y0)
	VMOVHLPS   X6, X6, X6
	Q41PROD(X6, 4(DI)(R10*1), Y1)
	Q41PROD(X7, 4(DX), Y2)
	VMOVHLPS   X7, X7, X7
	Q41PROD(X7, 4(DX)(R10*1), Y3)
	ADDQ       $20, AX
	ADDQ       $36, DI
	ADDQ       $36, DX
	DECQ       CX
	JNZ        q41r4blk

	HSUM4
	ADD_MS(X4, X0, 1)
	ADD_MS(X4, X1, 3)
	ADD_MS(X5, X2, 1)
	ADD_MS(X5, X3, 3)
	STORE4
	ADDQ $4, R12
	ADDQ R8, SI
	DECQ R14
	JMP  q41r4row

q41r4done:
	VZEROUPPER
	RET

// Q80PROD: accY += (d·dx in lane 0 of sX) · Σ pairs of |w| (Y12) × the
// activation quants at mem signed by w (Y11), as SIGNED_DOT does.
#define Q80PROD(sX, mem, accY) \
	VBROADCASTSS sX, Y13; \
	VMOVDQU      mem, Y14; \
	VPSIGNB      Y11, Y14, Y14; \
	VPMADDUBSW   Y14, Y12, Y14; \
	VPMADDWD     Y10, Y14, Y14; \
	VCVTDQ2PS    Y14, Y14; \
	VFMADD231PS  Y14, Y13, accY

// func dotQ8_0Q8_0Rows4(w *byte, wstride int, x *byte, xstride int, nb int, dst *float32, dstride int, rows int)
// X4 the weight's d in every lane; X6 [d·dx0 d·dx1 d·dx2 d·dx3]; Y11/Y12 the
// block's quants and their magnitudes.
TEXT ·dotQ8_0Q8_0Rows4(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x+16(FP), R9
	MOVQ xstride+24(FP), R10
	MOVQ nb+32(FP), R11
	MOVQ dst+40(FP), R12
	MOVQ dstride+48(FP), R13
	SHLQ $2, R13
	MOVQ rows+56(FP), R14
	ONES_I16(Y10, X10)

q80r4row:
	TESTQ  R14, R14
	JEQ    q80r4done
	MOVQ   SI, AX
	MOVQ   R9, DI
	LEAQ   (R9)(R10*2), DX
	MOVQ   R11, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

q80r4blk:
	PREFETCHT0   (AX)(R8*8)
	VMOVDQU      2(AX), Y11
	VPSIGNB      Y11, Y11, Y12
	VMOVD        (AX), X4
	VCVTPH2PS    X4, X4
	VBROADCASTSS X4, X4
	VMOVD        (DI), X6
	VPINSRW      $1, (DI)(R10*1), X6, X6
	VPINSRW      $2, (DX), X6, X6
	VPINSRW      $3, (DX)(R10*1), X6, X6
	VCVTPH2PS    X6, X6
	VMULPS       X6, X4, X6
	Q80PROD(X6, 2(DI), Y0)
	VMOVSHDUP    X6, X7
	Q80PROD(X7, 2(DI)(R10*1), Y1)
	VMOVHLPS     X6, X6, X7
	Q80PROD(X7, 2(DX), Y2)
	VPERMILPS    $3, X6, X7
	Q80PROD(X7, 2(DX)(R10*1), Y3)
	ADDQ         $34, AX
	ADDQ         $34, DI
	ADDQ         $34, DX
	DECQ         CX
	JNZ          q80r4blk

	HSUM4
	STORE4
	ADDQ $4, R12
	ADDQ R8, SI
	DECQ R14
	JMP  q80r4row

q80r4done:
	VZEROUPPER
	RET
