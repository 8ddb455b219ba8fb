//go:build amd64 && !noasm

#include "dotq_amd64.h"

// Four-activation row kernels: each weight row of a tile against four
// activation rows (x, x+xstride, ...; results at dst, dst+dstride, ...), so a
// block's nibbles are unpacked and its scale converted once for four
// products instead of once per product. Each product runs exactly the
// operations the one-row kernel (dotq_amd64.s) runs for it, in the same
// order, so the results match it bit for bit.
//
// The activations' f16 scales come converted: sc holds per block [dx0 dx1
// dx2 dx3 s0 s1 s2 s3] (s for Q8_1 only), so a product's d·dx is a
// broadcast load and one VMULPS. Measured (BenchmarkRowsKernels) that beats
// converting them here and shuffling each lane out, and beats one VMULPS
// for the four stored to the frame and broadcast back.
//
// Registers: SI row base, R8 wstride, R9 x, R10 xstride, R11 nb, R12 dst,
// R13 dstride in bytes, R14 rows left, R15 sc; AX the row's block pointer,
// DI activations 0/1 (the second at (DI)(R10*1)), DX activations 2/3, BX
// the block's scales, CX blocks left; Y0..Y3 the four accumulators; Y10
// int16 ones.

// HSUM4 sums each accumulator's lanes as the one-row kernel does.
#define HSUM4 \
	HSUM(Y0, X0, X13); \
	HSUM(Y1, X1, X13); \
	HSUM(Y2, X2, X13); \
	HSUM(Y3, X3, X13)

// STORE4 writes the four results of a row to their activation rows' dst.
#define STORE4 \
	VMOVSS X0, (R12); \
	VMOVSS X1, (R12)(R13*1); \
	VMOVSS X2, (R12)(R13*2); \
	LEAQ   (R12)(R13*2), BX; \
	VMOVSS X3, (BX)(R13*1)

// Q41PROD: accY += d·dx (d broadcast in Y5, dx at off(BX)) · Σ pairs of
// levels Y11 × the activation quants at mem.
#define Q41PROD(off, mem, accY) \
	VBROADCASTSS off(BX), Y13; \
	VMULPS       Y13, Y5, Y13; \
	VPMADDUBSW   mem, Y11, Y14; \
	VPMADDWD     Y10, Y14, Y14; \
	VCVTDQ2PS    Y14, Y14; \
	VFMADD231PS  Y14, Y13, accY

// func dotQ4_1Q8_1Rows4(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
// X12 [d m] of the weight block; X4 lane j: Σ m·s_j; Y11 the block's levels.
TEXT ·dotQ4_1Q8_1Rows4(SB), NOSPLIT, $0-72
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x+16(FP), R9
	MOVQ xstride+24(FP), R10
	MOVQ sc+32(FP), R15
	MOVQ nb+40(FP), R11
	MOVQ dst+48(FP), R12
	MOVQ dstride+56(FP), R13
	SHLQ $2, R13
	MOVQ rows+64(FP), R14
	NIBBLE_MASK(Y9, X9)
	ONES_I16(Y10, X10)

q41r4row:
	TESTQ  R14, R14
	JEQ    q41r4done
	MOVQ   SI, AX
	MOVQ   R9, DI
	LEAQ   (R9)(R10*2), DX
	MOVQ   R15, BX
	MOVQ   R11, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS X4, X4, X4

q41r4blk:
	PREFETCHT0   (AX)(R8*8)
	VMOVD        (AX), X12
	VCVTPH2PS    X12, X12
	VBROADCASTSS X12, Y5
	VMOVSHDUP    X12, X6
	VBROADCASTSS X6, X6
	VMULPS       16(BX), X6, X6
	VADDPS       X6, X4, X4
	NIBBLES(AX, 4, X11, Y11, X13)
	Q41PROD(0, 4(DI), Y0)
	Q41PROD(4, 4(DI)(R10*1), Y1)
	Q41PROD(8, 4(DX), Y2)
	Q41PROD(12, 4(DX)(R10*1), Y3)
	ADDQ         $20, AX
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $32, BX
	DECQ         CX
	JNZ          q41r4blk

	HSUM4
	VADDSS    X4, X0, X0
	VMOVSHDUP X4, X13
	VADDSS    X13, X1, X1
	VMOVHLPS  X4, X4, X13
	VADDSS    X13, X2, X2
	VPERMILPS $3, X4, X13
	VADDSS    X13, X3, X3
	STORE4
	ADDQ $4, R12
	ADDQ R8, SI
	DECQ R14
	JMP  q41r4row

q41r4done:
	VZEROUPPER
	RET

// Q80PROD: accY += d·dx (d broadcast in Y4, dx at off(BX)) · Σ pairs of
// |w| (Y12) × the activation quants at mem signed by w (Y11), as SIGNED_DOT
// does.
#define Q80PROD(off, mem, accY) \
	VBROADCASTSS off(BX), Y13; \
	VMULPS       Y13, Y4, Y13; \
	VMOVDQU      mem, Y14; \
	VPSIGNB      Y11, Y14, Y14; \
	VPMADDUBSW   Y14, Y12, Y14; \
	VPMADDWD     Y10, Y14, Y14; \
	VCVTDQ2PS    Y14, Y14; \
	VFMADD231PS  Y14, Y13, accY

// func dotQ8_0Q8_0Rows4(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
// Y11/Y12 the block's quants and their magnitudes.
TEXT ·dotQ8_0Q8_0Rows4(SB), NOSPLIT, $0-72
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x+16(FP), R9
	MOVQ xstride+24(FP), R10
	MOVQ sc+32(FP), R15
	MOVQ nb+40(FP), R11
	MOVQ dst+48(FP), R12
	MOVQ dstride+56(FP), R13
	SHLQ $2, R13
	MOVQ rows+64(FP), R14
	ONES_I16(Y10, X10)

q80r4row:
	TESTQ  R14, R14
	JEQ    q80r4done
	MOVQ   SI, AX
	MOVQ   R9, DI
	LEAQ   (R9)(R10*2), DX
	MOVQ   R15, BX
	MOVQ   R11, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

q80r4blk:
	PREFETCHT0   (AX)(R8*8)
	VMOVD        (AX), X4
	VCVTPH2PS    X4, X4
	VBROADCASTSS X4, Y4
	VMOVDQU      2(AX), Y11
	VPSIGNB      Y11, Y11, Y12
	Q80PROD(0, 2(DI), Y0)
	Q80PROD(4, 2(DI)(R10*1), Y1)
	Q80PROD(8, 2(DX), Y2)
	Q80PROD(12, 2(DX)(R10*1), Y3)
	ADDQ         $34, AX
	ADDQ         $34, DI
	ADDQ         $34, DX
	ADDQ         $32, BX
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
