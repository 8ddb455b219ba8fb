//go:build amd64 && !noasm

#include "dotq_amd64.h"

// AVX-512 VNNI forms of dotQ8_0Q8_0Rows4/Rows8 (dotq4_amd64.s,
// dotq8_amd64.s). The AVX2 kernels spend six port-0/1 µops on every
// (weight row, activation, block) product: a weight block's load is shared,
// its arithmetic is not, so four or eight activation rows save little. Here
// a zmm holds two weight rows' products with one activation block (lanes
// 0..7 row r, 8..15 row r+1) and VPDPBUSD replaces VPSIGNB + VPMADDUBSW +
// VPMADDWD: five µops per two products.
//
// Bit-exact with the AVX2 kernels: VPDPBUSD(|w|, x signed by w) gives each
// int32 lane the same four-byte sum VPMADDUBSW + VPMADDWD gives (|w| ≤ 128
// and |x| ≤ 127 never saturate an int16 pair), the sign is applied as
// VPSIGNB does (x negated where w < 0; where w = 0 |w| is 0), and each half's
// d·dx, conversion, FMA chain over the blocks and horizontal sum are the
// AVX2 kernel's, in its order.
//
// Registers: SI row r's base, R8 wstride, R9 row r+1's offset from row r
// (0 for a lone last row, which then fills both halves), R10 xstride, R12
// dst, R13 dstride in bytes, R14 rows left; AX row r's block, CX blocks
// left, BX the block's scales, DI/DX/R11 the activation blocks (as
// dotq8_amd64.s); Z0..Z7 the accumulators; Z16 the two rows' quants, Z17
// their magnitudes, K1 their signs, Z18 [d_r ×8, d_r+1 ×8], Z31 zero.

#include "dotq8v_amd64.h"
#include "dotqv_amd64.h"

// func dotQ8_0Q8_0Rows4VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ8_0Q8_0Rows4VNNI(SB), NOSPLIT, $0-72
	VLOAD_ARGS

v4row:
	VPAIR_START(v4done)
	MOVQ   x+16(FP), DI
	LEAQ   (DI)(R10*2), DX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3

v4blk:
	PREFETCHT0 (AX)(R8*8)
	PAIR_LOAD
	VPROD(0, 2(DI), Z0, Z20, Z21, Z22)
	VPROD(4, 2(DI)(R10*1), Z1, Z23, Z24, Z25)
	VPROD(8, 2(DX), Z2, Z26, Z27, Z28)
	VPROD(12, 2(DX)(R10*1), Z3, Z20, Z21, Z22)
	ADDQ       $34, AX
	ADDQ       $34, DI
	ADDQ       $34, DX
	ADDQ       $32, BX
	DECQ       CX
	JNZ        v4blk

	SAVE_HIGH4
	VHSUM4
	VSTORE4(0)
	TESTQ R9, R9
	JEQ   v4done
	RESTORE_HIGH4
	VHSUM4
	VSTORE4(4)
	VPAIR_NEXT(v4row, v4done)

v4done:
	VZEROUPPER
	RET

// func dotQ8_0Q8_0Rows8VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ8_0Q8_0Rows8VNNI(SB), NOSPLIT, $0-72
	VLOAD_ARGS

v8row:
	VPAIR_START(v8done)
	MOVQ   x+16(FP), DI
	LEAQ   (DI)(R10*2), DX
	ADDQ   R10, DX
	LEAQ   (DX)(R10*2), R11
	ADDQ   R10, R11
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7

v8blk:
	PREFETCHT0 (AX)(R8*8)
	PAIR_LOAD
	VPROD(0, 2(DI), Z0, Z20, Z21, Z22)
	VPROD(4, 2(DI)(R10*1), Z1, Z23, Z24, Z25)
	VPROD(8, 2(DI)(R10*2), Z2, Z26, Z27, Z28)
	VPROD(12, 2(DX), Z3, Z29, Z30, Z19)
	VPROD(16, 2(DI)(R10*4), Z4, Z20, Z21, Z22)
	VPROD(20, 2(DX)(R10*2), Z5, Z23, Z24, Z25)
	VPROD(24, 2(R11), Z6, Z26, Z27, Z28)
	VPROD(28, 2(DX)(R10*4), Z7, Z29, Z30, Z19)
	ADDQ       $34, AX
	ADDQ       $34, DI
	ADDQ       $34, DX
	ADDQ       $34, R11
	ADDQ       $64, BX
	DECQ       CX
	JNZ        v8blk

	SAVE_HIGH8
	VHSUM8
	VSTORE8(0)
	TESTQ R9, R9
	JEQ   v8done
	RESTORE_HIGH8
	VHSUM8
	VSTORE8(4)
	VPAIR_NEXT(v8row, v8done)

v8done:
	VZEROUPPER
	RET
