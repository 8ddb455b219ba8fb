//go:build amd64 && !noasm

#include "dotq_amd64.h"

// Q5_0 multi-activation row kernels: each Q5_0 weight block [d][qh 4][qs 16]
// is unpacked to signed levels once (Q50ROW's fifth-bit trick) and its
// magnitudes taken once, then multiplied against four or eight Q8_0
// activation rows. Gemma 3 270M stores its 640-wide matrices as Q5_0 (640 is
// no multiple of 256, so no k-quants), and with only the one-row kernel
// prefill unpacked every block once per prompt row. Each product runs the
// one-row kernel's (dotq_amd64.s, SIGNED_DOT) operations in the same order,
// so results match it bit for bit; sc and the calling convention are
// dotq4_amd64.s's and dotq8_amd64.s's.

// Q50LEVELS puts the signed levels (q − 16) of the block at AX in uY and
// their magnitudes in aY; Y9 holds 0x0f bytes, X13 and Y15 are scratch.
#define Q50LEVELS(uX, uY, aY) \
	VMOVDQU     6(AX), uX; \
	VPSRLW      $4, uX, X13; \
	VINSERTI128 $1, X13, uY, uY; \
	VPAND       Y9, uY, uY; \
	HIGHBITS(AX, 2, Y15); \
	VPANDN      bytesF0<>(SB), Y15, Y15; \
	VPOR        Y15, uY, uY; \
	VPSIGNB     uY, uY, aY

// Q50PROD: accY += d·dx (d broadcast in dY, dx at off(BX)) · Σ pairs of
// |u| (aY) × the activation quants at mem signed by u (uY), as SIGNED_DOT.
#define Q50PROD(off, mem, accY, dY, uY, aY) \
	VBROADCASTSS off(BX), Y13; \
	VMULPS       Y13, dY, Y13; \
	VMOVDQU      mem, Y14; \
	VPSIGNB      uY, Y14, Y14; \
	VPMADDUBSW   Y14, aY, Y14; \
	VPMADDWD     Y10, Y14, Y14; \
	VCVTDQ2PS    Y14, Y14; \
	VFMADD231PS  Y14, Y13, accY

#define LOAD_ARGS \
	MOVQ w+0(FP), SI; \
	MOVQ wstride+8(FP), R8; \
	MOVQ x+16(FP), R9; \
	MOVQ xstride+24(FP), R10; \
	MOVQ sc+32(FP), R15; \
	MOVQ dst+48(FP), R12; \
	MOVQ dstride+56(FP), R13; \
	SHLQ $2, R13; \
	MOVQ rows+64(FP), R14; \
	NIBBLE_MASK(Y9, X9); \
	ONES_I16(Y10, X10)

// func dotQ5_0Q8_0Rows4(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
// Registers as dotq4_amd64.s's: SI row base, AX its block, DI activations
// 0/1, DX 2/3, BX the block's scales [dx0..dx3 ×4 unused], CX blocks left,
// R12 dst, R13 dstride in bytes, R14 rows left; Y0..Y3 the accumulators, Y4
// the weight's d, Y11/Y12 the levels and their magnitudes.
TEXT ·dotQ5_0Q8_0Rows4(SB), NOSPLIT, $0-72
	LOAD_ARGS

q50r4row:
	TESTQ  R14, R14
	JEQ    q50r4done
	MOVQ   SI, AX
	MOVQ   R9, DI
	LEAQ   (R9)(R10*2), DX
	MOVQ   R15, BX
	MOVQ   nb+40(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

q50r4blk:
	PREFETCHT0   (AX)(R8*8)
	VMOVD        (AX), X4
	VCVTPH2PS    X4, X4
	VBROADCASTSS X4, Y4
	Q50LEVELS(X11, Y11, Y12)
	Q50PROD(0, 2(DI), Y0, Y4, Y11, Y12)
	Q50PROD(4, 2(DI)(R10*1), Y1, Y4, Y11, Y12)
	Q50PROD(8, 2(DX), Y2, Y4, Y11, Y12)
	Q50PROD(12, 2(DX)(R10*1), Y3, Y4, Y11, Y12)
	ADDQ         $22, AX
	ADDQ         $34, DI
	ADDQ         $34, DX
	ADDQ         $32, BX
	DECQ         CX
	JNZ          q50r4blk

	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	HSUM(Y3, X3, X13)
	VMOVSS X0, (R12)
	VMOVSS X1, (R12)(R13*1)
	VMOVSS X2, (R12)(R13*2)
	LEAQ   (R12)(R13*2), BX
	VMOVSS X3, (BX)(R13*1)
	ADDQ   $4, R12
	ADDQ   R8, SI
	DECQ   R14
	JMP    q50r4row

q50r4done:
	VZEROUPPER
	RET

// func dotQ5_0Q8_0Rows8(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
// Registers as dotq8_amd64.s's: activation j's block at DI + j·xstride for
// j = 0, 1, 2, 4, DX + (j−3)·xstride for j = 3, 5, 7 and R11 for j = 6;
// BX the block's scales [dx0..dx7 ×8 unused]; Y0..Y7 the accumulators, Y11
// the weight's d, Y8/Y12 the levels and their magnitudes.
TEXT ·dotQ5_0Q8_0Rows8(SB), NOSPLIT, $0-72
	LOAD_ARGS

q50r8row:
	TESTQ  R14, R14
	JEQ    q50r8done
	MOVQ   SI, AX
	MOVQ   R9, DI
	LEAQ   (R9)(R10*2), DX
	ADDQ   R10, DX
	LEAQ   (DX)(R10*2), R11
	ADDQ   R10, R11
	MOVQ   R15, BX
	MOVQ   nb+40(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

q50r8blk:
	PREFETCHT0   (AX)(R8*8)
	VMOVD        (AX), X13
	VCVTPH2PS    X13, X13
	VBROADCASTSS X13, Y11
	Q50LEVELS(X8, Y8, Y12)
	Q50PROD(0, 2(DI), Y0, Y11, Y8, Y12)
	Q50PROD(4, 2(DI)(R10*1), Y1, Y11, Y8, Y12)
	Q50PROD(8, 2(DI)(R10*2), Y2, Y11, Y8, Y12)
	Q50PROD(12, 2(DX), Y3, Y11, Y8, Y12)
	Q50PROD(16, 2(DI)(R10*4), Y4, Y11, Y8, Y12)
	Q50PROD(20, 2(DX)(R10*2), Y5, Y11, Y8, Y12)
	Q50PROD(24, 2(R11), Y6, Y11, Y8, Y12)
	Q50PROD(28, 2(DX)(R10*4), Y7, Y11, Y8, Y12)
	ADDQ         $22, AX
	ADDQ         $34, DI
	ADDQ         $34, DX
	ADDQ         $34, R11
	ADDQ         $64, BX
	DECQ         CX
	JNZ          q50r8blk

	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	HSUM(Y3, X3, X13)
	HSUM(Y4, X4, X13)
	HSUM(Y5, X5, X13)
	HSUM(Y6, X6, X13)
	HSUM(Y7, X7, X13)
	VMOVSS X0, (R12)
	VMOVSS X1, (R12)(R13*1)
	VMOVSS X2, (R12)(R13*2)
	VMOVSS X4, (R12)(R13*4)
	LEAQ   (R12)(R13*2), BX
	ADDQ   R13, BX
	VMOVSS X3, (BX)
	VMOVSS X5, (BX)(R13*2)
	VMOVSS X7, (BX)(R13*4)
	ADDQ   R13, BX
	ADDQ   R13, BX
	ADDQ   R13, BX
	VMOVSS X6, (BX)
	ADDQ   $4, R12
	ADDQ   R8, SI
	DECQ   R14
	JMP    q50r8row

q50r8done:
	VZEROUPPER
	RET
