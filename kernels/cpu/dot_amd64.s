//go:build amd64 && !noasm

#include "textflag.h"

// AVX2 + FMA + F16C kernels. Register use is documented per function; none
// touches the stack, so all are NOSPLIT leaf functions with ABI0 arguments.

// func dotF32AVX2(a, b *float32, n int) float32
// n must be a multiple of 8. Four accumulators hide the FMA latency.
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

dot32:
	CMPQ        CX, $32
	JLT         dot8
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         dot32

dot8:
	CMPQ        CX, $8
	JLT         dotdone
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         dot8

dotdone:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func axpyF32AVX2(dst *float32, a float32, x *float32, n int)
// dst[i] += a·x[i]; n must be a multiple of 8.
TEXT ·axpyF32AVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	VBROADCASTSS a+8(FP), Y0
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX

axpy32:
	CMPQ        CX, $32
	JLT         axpy8
	VMOVUPS     (DI), Y1
	VMOVUPS     32(DI), Y2
	VMOVUPS     64(DI), Y3
	VMOVUPS     96(DI), Y4
	VFMADD231PS (SI), Y0, Y1
	VFMADD231PS 32(SI), Y0, Y2
	VFMADD231PS 64(SI), Y0, Y3
	VFMADD231PS 96(SI), Y0, Y4
	VMOVUPS     Y1, (DI)
	VMOVUPS     Y2, 32(DI)
	VMOVUPS     Y3, 64(DI)
	VMOVUPS     Y4, 96(DI)
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         axpy32

axpy8:
	CMPQ        CX, $8
	JLT         axpydone
	VMOVUPS     (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS     Y1, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         axpy8

axpydone:
	VZEROUPPER
	RET

// The quantized kernels compute a run of weight rows against one activation
// row: dst[r] = Σ W[r]·x for r < rows, rows at w, w+wstride, ... Two rows go
// through the block loop together, sharing the activation's loads and scale
// conversion, and one call covers a whole tile, so no per-row call overhead.
// Every row follows the same instruction sequence whichever of the pair it
// is in, so a result does not depend on rows or on tiling. nb ≥ 1.
//
// Registers: SI row pair base, R8 wstride, R9 x, R10 nb, R11 dst, R12 rows
// left; AX/BX the pair's block pointers, DI x's, CX blocks left; Y0/Y1
// accumulators, Y2 x's scales, Y5 x's quants, Y9 0x0f bytes, Y10 int16 ones.

// HSUM leaves in lane 0 of accX the sum of accY's eight lanes.
#define HSUM(accY, accX, tX) \
	VEXTRACTF128 $1, accY, tX; \
	VADDPS       tX, accX, accX; \
	VHADDPS      accX, accX, accX; \
	VHADDPS      accX, accX, accX

#define ONES_I16(dY, dX) \
	MOVL         $0x00010001, DX; \
	VMOVD        DX, dX; \
	VPBROADCASTD dX, dY

// Q41ROW adds one Q4_1 block [d m][qs 16] at (wp) against the Q8_1 block
// whose [dx, s] are in X2 and quants in Y5: d·dx·Σq·qx into accY's lanes and
// [d·dx, m·s] into msX (lane 1 is the one kept).
#define Q41ROW(wp, accY, msX, tX, tY, uX, uY, vX) \
	VMOVD        (wp), tX; \
	VCVTPH2PS    tX, tX; \
	VMULPS       tX, X2, tX; \
	VADDPS       tX, msX, msX; \
	VBROADCASTSS tX, tY; \
	VMOVDQU      4(wp), uX; \
	VPSRLW       $4, uX, vX; \
	VINSERTI128  $1, vX, uY, uY; \
	VPAND        Y9, uY, uY; \
	VPMADDUBSW   Y5, uY, uY; \
	VPMADDWD     Y10, uY, uY; \
	VCVTDQ2PS    uY, uY; \
	VFMADD231PS  uY, tY, accY

// func dotQ4_1Q8_1Rows(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)
TEXT ·dotQ4_1Q8_1Rows(SB), NOSPLIT, $0-48
	MOVQ         w+0(FP), SI
	MOVQ         wstride+8(FP), R8
	MOVQ         x+16(FP), R9
	MOVQ         nb+24(FP), R10
	MOVQ         dst+32(FP), R11
	MOVQ         rows+40(FP), R12
	MOVL         $0x0f0f0f0f, DX
	VMOVD        DX, X9
	VPBROADCASTD X9, Y9
	ONES_I16(Y10, X10)

q41pair:
	CMPQ   R12, $2
	JLT    q41single
	MOVQ   SI, AX
	LEAQ   (SI)(R8*1), BX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS X7, X7, X7
	VXORPS X8, X8, X8

q41pairblk:
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   4(DI), Y5
	Q41ROW(AX, Y0, X7, X3, Y3, X4, Y4, X6)
	Q41ROW(BX, Y1, X8, X11, Y11, X12, Y12, X13)
	ADDQ      $20, AX
	ADDQ      $20, BX
	ADDQ      $36, DI
	DECQ      CX
	JNZ       q41pairblk
	HSUM(Y0, X0, X3)
	VMOVSHDUP X7, X7
	VADDSS    X7, X0, X0
	MOVSS     X0, (R11)
	HSUM(Y1, X1, X3)
	VMOVSHDUP X8, X8
	VADDSS    X8, X1, X1
	MOVSS     X1, 4(R11)
	ADDQ      $8, R11
	LEAQ      (SI)(R8*2), SI
	SUBQ      $2, R12
	JMP       q41pair

q41single:
	TESTQ  R12, R12
	JEQ    q41done
	MOVQ   SI, AX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS X7, X7, X7

q41singleblk:
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   4(DI), Y5
	Q41ROW(AX, Y0, X7, X3, Y3, X4, Y4, X6)
	ADDQ      $20, AX
	ADDQ      $36, DI
	DECQ      CX
	JNZ       q41singleblk
	HSUM(Y0, X0, X3)
	VMOVSHDUP X7, X7
	VADDSS    X7, X0, X0
	MOVSS     X0, (R11)

q41done:
	VZEROUPPER
	RET

// Q80ROW adds one Q8_0 block [d][qs int8 32] at (wp) against the Q8_0 block
// whose dx is in X2 and quants in Y5. VPMADDUBSW needs one unsigned operand,
// so |w| multiplies x·sign(w) (ggml's trick; exact while no quant is −128,
// which ggml's quantizers never produce).
#define Q80ROW(wp, accY, tX, tY, uY, vY) \
	VMOVD        (wp), tX; \
	VCVTPH2PS    tX, tX; \
	VMULSS       tX, X2, tX; \
	VBROADCASTSS tX, tY; \
	VMOVDQU      2(wp), uY; \
	VPSIGNB      uY, uY, vY; \
	VPSIGNB      uY, Y5, uY; \
	VPMADDUBSW   uY, vY, vY; \
	VPMADDWD     Y10, vY, vY; \
	VCVTDQ2PS    vY, vY; \
	VFMADD231PS  vY, tY, accY

// func dotQ8_0Q8_0Rows(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)
TEXT ·dotQ8_0Q8_0Rows(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x+16(FP), R9
	MOVQ nb+24(FP), R10
	MOVQ dst+32(FP), R11
	MOVQ rows+40(FP), R12
	ONES_I16(Y10, X10)

q80pair:
	CMPQ   R12, $2
	JLT    q80single
	MOVQ   SI, AX
	LEAQ   (SI)(R8*1), BX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

q80pairblk:
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   2(DI), Y5
	Q80ROW(AX, Y0, X3, Y3, Y4, Y6)
	Q80ROW(BX, Y1, X11, Y11, Y12, Y13)
	ADDQ      $34, AX
	ADDQ      $34, BX
	ADDQ      $34, DI
	DECQ      CX
	JNZ       q80pairblk
	HSUM(Y0, X0, X3)
	MOVSS     X0, (R11)
	HSUM(Y1, X1, X3)
	MOVSS     X1, 4(R11)
	ADDQ      $8, R11
	LEAQ      (SI)(R8*2), SI
	SUBQ      $2, R12
	JMP       q80pair

q80single:
	TESTQ  R12, R12
	JEQ    q80done
	MOVQ   SI, AX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0

q80singleblk:
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   2(DI), Y5
	Q80ROW(AX, Y0, X3, Y3, Y4, Y6)
	ADDQ      $34, AX
	ADDQ      $34, DI
	DECQ      CX
	JNZ       q80singleblk
	HSUM(Y0, X0, X3)
	MOVSS     X0, (R11)

q80done:
	VZEROUPPER
	RET
