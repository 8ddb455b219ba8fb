//go:build amd64 && !noasm

#include "dotq_amd64.h"

// AVX-512 VNNI forms of dotQ5_0Q8_0Rows4/Rows8 (dotq5_amd64.s), laid out as
// dotq8v_amd64.s's Q8_0 kernels: a zmm holds two weight rows' products with
// one activation block, VPDPBUSD replacing VPSIGNB + VPMADDUBSW + VPMADDWD.
// The two rows' blocks are unpacked to signed levels (q − 16) as Q50ROW
// does, in ymm halves, then joined.
//
// Bit-exact with the AVX2 kernels for dotq8v_amd64.s's reasons: |u| ≤ 16
// never saturates an int16 pair, the sign is applied as VPSIGNB does, and
// d·dx, conversion, FMA chain and horizontal sums run in the AVX2 order.
//
// Registers as dotq8v_amd64.s's, and R15 row r+1's block; Y9 0x0f bytes,
// Y8/Y12 the two rows' levels, X13/Y15 scratch while unpacking.

// Q50HALF puts the signed levels of the block at wp in uY.
#define Q50HALF(wp, uX, uY) \
	VMOVDQU     6(wp), uX; \
	VPSRLW      $4, uX, X13; \
	VINSERTI128 $1, X13, uY, uY; \
	VPAND       Y9, uY, uY; \
	HIGHBITS(wp, 2, Y15); \
	VPANDN      bytesF0<>(SB), Y15, Y15; \
	VPOR        Y15, uY, uY

// PAIR_LOAD5 reads the two rows' blocks: levels, magnitudes, signs, scales.
#define PAIR_LOAD5 \
	LEAQ            (AX)(R9*1), R15; \
	Q50HALF(AX, X8, Y8); \
	Q50HALF(R15, X12, Y12); \
	VINSERTI64X4    $1, Y12, Z8, Z16; \
	VPMOVB2M        Z16, K1; \
	VPABSB          Z16, Z17; \
	VPBROADCASTW    (AX), X18; \
	VPBROADCASTW    (R15), X19; \
	VINSERTI32X4    $1, X19, Y18, Y18; \
	VCVTPH2PS       Y18, Z18

#include "dotqv_amd64.h"

// VLOAD_ARGS5 also sets Q50HALF's 0x0f bytes in Y9.
#define VLOAD_ARGS5 \
	VLOAD_ARGS; \
	NIBBLE_MASK(Y9, X9)

// func dotQ5_0Q8_0Rows4VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ5_0Q8_0Rows4VNNI(SB), NOSPLIT, $0-72
	VLOAD_ARGS5

q5v4row:
	VPAIR_START(q5v4done)
	MOVQ   x+16(FP), DI
	LEAQ   (DI)(R10*2), DX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3

q5v4blk:
	PREFETCHT0 (AX)(R8*8)
	PAIR_LOAD5
	VPROD(0, 2(DI), Z0, Z20, Z21, Z22)
	VPROD(4, 2(DI)(R10*1), Z1, Z23, Z24, Z25)
	VPROD(8, 2(DX), Z2, Z26, Z27, Z28)
	VPROD(12, 2(DX)(R10*1), Z3, Z20, Z21, Z22)
	ADDQ       $22, AX
	ADDQ       $34, DI
	ADDQ       $34, DX
	ADDQ       $32, BX
	DECQ       CX
	JNZ        q5v4blk

	SAVE_HIGH4
	VHSUM4
	VSTORE4(0)
	TESTQ R9, R9
	JEQ   q5v4done
	RESTORE_HIGH4
	VHSUM4
	VSTORE4(4)
	VPAIR_NEXT(q5v4row, q5v4done)

q5v4done:
	VZEROUPPER
	RET

// func dotQ5_0Q8_0Rows8VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ5_0Q8_0Rows8VNNI(SB), NOSPLIT, $0-72
	VLOAD_ARGS5

q5v8row:
	VPAIR_START(q5v8done)
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

q5v8blk:
	PREFETCHT0 (AX)(R8*8)
	PAIR_LOAD5
	VPROD(0, 2(DI), Z0, Z20, Z21, Z22)
	VPROD(4, 2(DI)(R10*1), Z1, Z23, Z24, Z25)
	VPROD(8, 2(DI)(R10*2), Z2, Z26, Z27, Z28)
	VPROD(12, 2(DX), Z3, Z29, Z30, Z19)
	VPROD(16, 2(DI)(R10*4), Z4, Z20, Z21, Z22)
	VPROD(20, 2(DX)(R10*2), Z5, Z23, Z24, Z25)
	VPROD(24, 2(R11), Z6, Z26, Z27, Z28)
	VPROD(28, 2(DX)(R10*4), Z7, Z29, Z30, Z19)
	ADDQ       $22, AX
	ADDQ       $34, DI
	ADDQ       $34, DX
	ADDQ       $34, R11
	ADDQ       $64, BX
	DECQ       CX
	JNZ        q5v8blk

	SAVE_HIGH8
	VHSUM8
	VSTORE8(0)
	TESTQ R9, R9
	JEQ   q5v8done
	RESTORE_HIGH8
	VHSUM8
	VSTORE8(4)
	VPAIR_NEXT(q5v8row, q5v8done)

q5v8done:
	VZEROUPPER
	RET
