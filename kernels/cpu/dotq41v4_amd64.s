//go:build amd64 && !noasm

#include "dotq_amd64.h"

// AVX-512 VNNI forms of dotQ4_1Q8_1Rows4/Rows8 (dotq4_amd64.s,
// dotq8_amd64.s), the kernels of speculative verify steps and small
// batches (issue 26). The AVX2 kernels spend five port-0/1/5 µops on every
// (weight row, activation, block) product; here a zmm holds two weight
// rows' products with one activation block (lanes 0..7 row r, 8..15 row
// r+1, each half laid out as the AVX2 kernel's ymm) and one VPDPBUSD
// replaces VPMADDUBSW + VPMADDWD: four µops per two products.
//
// Bit-exact with the AVX2 kernels, which are bit-exact with the one-row
// kernel (design invariant 6), on dotq41v_amd64.s's argument:
//   - VPDPBUSD(levels, x) gives each int32 lane the four-byte sum
//     VPMADDUBSW + VPMADDWD gives (no int16 pair can saturate: 2·15·128).
//   - High nibbles are masked in place (0xf0), not shifted, so their lanes
//     hold 16× the sum, which converts exactly (< 2²⁴), and meet
//     d·dx/16: (d/16)·dx rounds to exactly round(d·dx)/16, the products of
//     f16-sized scales being far from f32's subnormals, so the FMA rounds
//     the same exact v·d·dx + acc once.
//   - Each half's FMA chain over the blocks, its horizontal sum, and the
//     sequential Σ m·s_j added last are the AVX2 kernel's, lane for lane.
//
// Registers (dotqv_amd64.h's): SI row r's base, R8 wstride, R9 row r+1's
// offset from row r (0 for a lone last row, which then fills both halves),
// R10 xstride, R12 dst, R13 dstride in bytes, R14 rows left; AX row r's
// block, R15 the offset of row r+9's block from it (row r+8's is R8·8:
// both are prefetched, since the pairs step two rows), CX blocks left, BX the
// block's activation scales, DI/DX/R11 the activation blocks (as
// dotq8_amd64.s); Z0..Z7 the accumulators; Z8 [1 ×4, 1/16 ×4]×2, Z9 the
// nibble masks, Z10 Σ m·s_j (row r from lane 0, row r+1 from lane 8); in
// the loop Z16 the pair's levels, Z19 [d_r ×4, d_r/16 ×4, d_r+1 ×4,
// d_r+1/16 ×4], Z20 [m_r ×8, m_r+1 ×8]; K1 the upper eight dwords of a
// zmm, K2 the upper four of a ymm.


#include "dotqv_amd64.h"
#include "dotq41v_amd64.h"

// Q41V_MS4 adds lanes 0..3 of msX (Σ m·s_j) to a0..a3, as ADD_MS4 does.
#define Q41V_MS4(msX, a0, a1, a2, a3) \
	VADDSS    msX, a0, a0; \
	VMOVSHDUP msX, X13; \
	VADDSS    X13, a1, a1; \
	VMOVHLPS  msX, msX, X13; \
	VADDSS    X13, a2, a2; \
	VPERMILPS $3, msX, X13; \
	VADDSS    X13, a3, a3

// func dotQ4_1Q8_1Rows4VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
// sc per block: [dx0..dx3 s0..s3]; Z21 [s0..s3]×4, so lanes 0..3 of Z10
// hold row r's Σ m·s_j and lanes 8..11 row r+1's.
TEXT ·dotQ4_1Q8_1Rows4VNNI(SB), NOSPLIT, $0-72
	Q41V_CONSTS
	VLOAD_ARGS

q41v4row:
	VPAIR_START(q41v4done)
	MOVQ   x+16(FP), DI
	LEAQ   (DI)(R10*2), DX
	LEAQ   (R9)(R8*8), R15
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z10, Z10, Z10

q41v4blk:
	PREFETCHT0      (AX)(R8*8)
	PREFETCHT0      (AX)(R15*1)
	VBROADCASTF32X4 16(BX), Z21
	Q41V_PAIR(Z21)
	Q41VPROD(0, 4(DI), Z0, Z22, Z23, Z24)
	Q41VPROD(4, 4(DI)(R10*1), Z1, Z25, Z26, Z27)
	Q41VPROD(8, 4(DX), Z2, Z28, Z29, Z30)
	Q41VPROD(12, 4(DX)(R10*1), Z3, Z22, Z23, Z24)
	ADDQ            $20, AX
	ADDQ            $36, DI
	ADDQ            $36, DX
	ADDQ            $32, BX
	DECQ            CX
	JNZ             q41v4blk

	VEXTRACTF32X4 $2, Z10, X11
	SAVE_HIGH4
	VHSUM4
	Q41V_MS4(X10, X0, X1, X2, X3)
	VSTORE4(0)
	TESTQ R9, R9
	JEQ   q41v4done
	RESTORE_HIGH4
	VHSUM4
	Q41V_MS4(X11, X0, X1, X2, X3)
	VSTORE4(4)
	VPAIR_NEXT(q41v4row, q41v4done)

q41v4done:
	VZEROUPPER
	RET

// func dotQ4_1Q8_1Rows8VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
// sc per block: [dx0..dx7 s0..s7]; Z21 [s0..s7]×2, so lanes 0..7 of Z10
// hold row r's Σ m·s_j and lanes 8..15 row r+1's.
TEXT ·dotQ4_1Q8_1Rows8VNNI(SB), NOSPLIT, $0-72
	Q41V_CONSTS
	VLOAD_ARGS

q41v8row:
	VPAIR_START(q41v8done)
	MOVQ   x+16(FP), DI
	LEAQ   (DI)(R10*2), DX
	ADDQ   R10, DX
	LEAQ   (DX)(R10*2), R11
	ADDQ   R10, R11
	LEAQ   (R9)(R8*8), R15
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	VXORPS Z10, Z10, Z10

q41v8blk:
	PREFETCHT0      (AX)(R8*8)
	PREFETCHT0      (AX)(R15*1)
	VBROADCASTF64X4 32(BX), Z21
	Q41V_PAIR(Z21)
	Q41VPROD(0, 4(DI), Z0, Z22, Z23, Z24)
	Q41VPROD(4, 4(DI)(R10*1), Z1, Z25, Z26, Z27)
	Q41VPROD(8, 4(DI)(R10*2), Z2, Z28, Z29, Z30)
	Q41VPROD(12, 4(DX), Z3, Z11, Z12, Z13)
	Q41VPROD(16, 4(DI)(R10*4), Z4, Z22, Z23, Z24)
	Q41VPROD(20, 4(DX)(R10*2), Z5, Z25, Z26, Z27)
	Q41VPROD(24, 4(R11), Z6, Z28, Z29, Z30)
	Q41VPROD(28, 4(DX)(R10*4), Z7, Z11, Z12, Z13)
	ADDQ            $20, AX
	ADDQ            $36, DI
	ADDQ            $36, DX
	ADDQ            $36, R11
	ADDQ            $64, BX
	DECQ            CX
	JNZ             q41v8blk

	VEXTRACTF64X4 $1, Z10, Y11
	SAVE_HIGH8
	VHSUM8
	Q41V_MS4(X10, X0, X1, X2, X3)
	VEXTRACTF128  $1, Y10, X10
	Q41V_MS4(X10, X4, X5, X6, X7)
	VSTORE8(0)
	TESTQ R9, R9
	JEQ   q41v8done
	RESTORE_HIGH8
	VHSUM8
	Q41V_MS4(X11, X0, X1, X2, X3)
	VEXTRACTF128  $1, Y11, X11
	Q41V_MS4(X11, X4, X5, X6, X7)
	VSTORE8(4)
	VPAIR_NEXT(q41v8row, q41v8done)

q41v8done:
	VZEROUPPER
	RET
