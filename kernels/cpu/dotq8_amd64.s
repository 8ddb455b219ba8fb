//go:build amd64 && !noasm

#include "dotq_amd64.h"

// Eight-activation row kernels: dotq4_amd64.s's four-activation kernels
// widened to eight activation rows, halving again what unpacking a block and
// converting its scale costs per product. Each product still runs exactly
// the one-row kernel's operations, so results match it bit for bit.
// sc holds per block [dx0 .. dx7 s0 .. s7] (s for Q8_1 only).
//
// Registers: SI row base, R8 wstride, R9 x, R10 xstride, R12 dst, R13
// dstride in bytes, R14 rows left, R15 sc; AX the row's block pointer, CX
// blocks left, BX the block's scales; activation j's block at DI + j·xstride
// for j = 0, 1, 2, 4, DX + (j−3)·xstride for j = 3, 5, 7 and R11 for j = 6;
// Y0..Y7 the accumulators; Y10 int16 ones; Y11 the weight's d broadcast.

// ROW8_START points the block pointers at a row's first blocks and clears
// the accumulators.
#define ROW8_START \
	MOVQ   SI, AX; \
	MOVQ   R9, DI; \
	LEAQ   (R9)(R10*2), DX; \
	ADDQ   R10, DX; \
	LEAQ   (DX)(R10*2), R11; \
	ADDQ   R10, R11; \
	MOVQ   R15, BX; \
	MOVQ   nb+40(FP), CX; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7

// NEXT8 advances to the next block (weight block wbb bytes, activation
// blocks abb) and loops while blocks are left.
#define NEXT8(wbb, abb, loop) \
	ADDQ $wbb, AX; \
	ADDQ $abb, DI; \
	ADDQ $abb, DX; \
	ADDQ $abb, R11; \
	ADDQ $64, BX; \
	DECQ CX; \
	JNZ  loop

// HSUM8 sums each accumulator's lanes as the one-row kernel does.
#define HSUM8 \
	HSUM(Y0, X0, X13); \
	HSUM(Y1, X1, X13); \
	HSUM(Y2, X2, X13); \
	HSUM(Y3, X3, X13); \
	HSUM(Y4, X4, X13); \
	HSUM(Y5, X5, X13); \
	HSUM(Y6, X6, X13); \
	HSUM(Y7, X7, X13)

// ADD_MS4 adds lanes 0..3 of msX to a0..a3: Q8_1's Σ m·s.
#define ADD_MS4(msX, a0, a1, a2, a3) \
	VADDSS    msX, a0, a0; \
	VMOVSHDUP msX, X13; \
	VADDSS    X13, a1, a1; \
	VMOVHLPS  msX, msX, X13; \
	VADDSS    X13, a2, a2; \
	VPERMILPS $3, msX, X13; \
	VADDSS    X13, a3, a3

// STORE8 writes a row's eight results and moves on to the next row.
#define STORE8(loop) \
	VMOVSS X0, (R12); \
	VMOVSS X1, (R12)(R13*1); \
	VMOVSS X2, (R12)(R13*2); \
	VMOVSS X4, (R12)(R13*4); \
	LEAQ   (R12)(R13*2), BX; \
	ADDQ   R13, BX; \
	VMOVSS X3, (BX); \
	VMOVSS X5, (BX)(R13*2); \
	VMOVSS X7, (BX)(R13*4); \
	ADDQ   R13, BX; \
	ADDQ   R13, BX; \
	ADDQ   R13, BX; \
	VMOVSS X6, (BX); \
	ADDQ   $4, R12; \
	ADDQ   R8, SI; \
	DECQ   R14; \
	JMP    loop

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
	ONES_I16(Y10, X10)

// Q41PROD8: accY += d·dx (d in Y11, dx at off(BX)) · Σ pairs of levels Y8 ×
// the activation quants at mem.
#define Q41PROD8(off, mem, accY) \
	VBROADCASTSS off(BX), Y13; \
	VMULPS       Y13, Y11, Y13; \
	VPMADDUBSW   mem, Y8, Y14; \
	VPMADDWD     Y10, Y14, Y14; \
	VCVTDQ2PS    Y14, Y14; \
	VFMADD231PS  Y14, Y13, accY

// func dotQ4_1Q8_1Rows8(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
// Y12 lane j: Σ m·s_j; Y9 0x0f bytes.
TEXT ·dotQ4_1Q8_1Rows8(SB), NOSPLIT, $0-72
	LOAD_ARGS
	NIBBLE_MASK(Y9, X9)

q41r8row:
	TESTQ R14, R14
	JEQ   q41r8done
	ROW8_START
	VXORPS Y12, Y12, Y12

q41r8blk:
	PREFETCHT0   (AX)(R8*8)
	VMOVD        (AX), X13
	VCVTPH2PS    X13, X13
	VBROADCASTSS X13, Y11
	VMOVSHDUP    X13, X13
	VBROADCASTSS X13, Y13
	VMULPS       32(BX), Y13, Y13
	VADDPS       Y13, Y12, Y12
	NIBBLES(AX, 4, X8, Y8, X13)
	Q41PROD8(0, 4(DI), Y0)
	Q41PROD8(4, 4(DI)(R10*1), Y1)
	Q41PROD8(8, 4(DI)(R10*2), Y2)
	Q41PROD8(12, 4(DX), Y3)
	Q41PROD8(16, 4(DI)(R10*4), Y4)
	Q41PROD8(20, 4(DX)(R10*2), Y5)
	Q41PROD8(24, 4(R11), Y6)
	Q41PROD8(28, 4(DX)(R10*4), Y7)
	NEXT8(20, 36, q41r8blk)

	HSUM8
	ADD_MS4(X12, X0, X1, X2, X3)
	VEXTRACTF128 $1, Y12, X12
	ADD_MS4(X12, X4, X5, X6, X7)
	STORE8(q41r8row)

q41r8done:
	VZEROUPPER
	RET

// Q80PROD8: accY += d·dx (d in Y11, dx at off(BX)) · Σ pairs of |w| (Y9) ×
// the activation quants at mem signed by w (Y8), as SIGNED_DOT does.
#define Q80PROD8(off, mem, accY) \
	VBROADCASTSS off(BX), Y13; \
	VMULPS       Y13, Y11, Y13; \
	VMOVDQU      mem, Y14; \
	VPSIGNB      Y8, Y14, Y14; \
	VPMADDUBSW   Y14, Y9, Y14; \
	VPMADDWD     Y10, Y14, Y14; \
	VCVTDQ2PS    Y14, Y14; \
	VFMADD231PS  Y14, Y13, accY

// func dotQ8_0Q8_0Rows8(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ8_0Q8_0Rows8(SB), NOSPLIT, $0-72
	LOAD_ARGS

q80r8row:
	TESTQ R14, R14
	JEQ   q80r8done
	ROW8_START

q80r8blk:
	PREFETCHT0   (AX)(R8*8)
	VMOVD        (AX), X13
	VCVTPH2PS    X13, X13
	VBROADCASTSS X13, Y11
	VMOVDQU      2(AX), Y8
	VPSIGNB      Y8, Y8, Y9
	Q80PROD8(0, 2(DI), Y0)
	Q80PROD8(4, 2(DI)(R10*1), Y1)
	Q80PROD8(8, 2(DI)(R10*2), Y2)
	Q80PROD8(12, 2(DX), Y3)
	Q80PROD8(16, 2(DI)(R10*4), Y4)
	Q80PROD8(20, 2(DX)(R10*2), Y5)
	Q80PROD8(24, 2(R11), Y6)
	Q80PROD8(28, 2(DX)(R10*4), Y7)
	NEXT8(34, 34, q80r8blk)

	HSUM8
	STORE8(q80r8row)

q80r8done:
	VZEROUPPER
	RET
