//go:build amd64 && !noasm

#include "dotq_amd64.h"

// AVX-512 VNNI two- and three-activation forms of the Q8_0 kernels
// (dotq8v_amd64.s has the four- and eight-activation ones): speculative
// verify steps of 2, 3, 6 and 7 rows through the output head (issue 26),
// which otherwise went through the AVX2 dotQ8_0Q8_0Rows2 or a second pass
// over the weights. dotq8v_amd64.s's header gives the argument for
// bit-exactness with the one-row kernel; per lane the arithmetic here is
// the same, only the number of activations differs. Registers as there;
// the scale table (actScales, m = 2 or 3) is 8m bytes a block.

#include "dotq8v_amd64.h"
#include "dotqv_amd64.h"

// func dotQ8_0Q8_0Rows2VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ8_0Q8_0Rows2VNNI(SB), NOSPLIT, $0-72
	VLOAD_ARGS

v2row:
	VPAIR_START(v2done)
	MOVQ   x+16(FP), DI
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1

v2blk:
	PREFETCHT0 (AX)(R8*8)
	PAIR_LOAD
	VPROD(0, 2(DI), Z0, Z20, Z21, Z22)
	VPROD(4, 2(DI)(R10*1), Z1, Z23, Z24, Z25)
	ADDQ       $34, AX
	ADDQ       $34, DI
	ADDQ       $16, BX
	DECQ       CX
	JNZ        v2blk

	VEXTRACTF64X4 $1, Z0, Y16
	VEXTRACTF64X4 $1, Z1, Y17
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	VMOVSS X0, (R12)
	VMOVSS X1, (R12)(R13*1)
	TESTQ  R9, R9
	JEQ    v2done
	VMOVAPS Y16, Y0
	VMOVAPS Y17, Y1
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	VMOVSS X0, 4(R12)
	VMOVSS X1, 4(R12)(R13*1)
	VPAIR_NEXT(v2row, v2done)

v2done:
	VZEROUPPER
	RET

// func dotQ8_0Q8_0Rows3VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ8_0Q8_0Rows3VNNI(SB), NOSPLIT, $0-72
	VLOAD_ARGS

v3row:
	VPAIR_START(v3done)
	MOVQ   x+16(FP), DI
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2

v3blk:
	PREFETCHT0 (AX)(R8*8)
	PAIR_LOAD
	VPROD(0, 2(DI), Z0, Z20, Z21, Z22)
	VPROD(4, 2(DI)(R10*1), Z1, Z23, Z24, Z25)
	VPROD(8, 2(DI)(R10*2), Z2, Z26, Z27, Z28)
	ADDQ       $34, AX
	ADDQ       $34, DI
	ADDQ       $24, BX
	DECQ       CX
	JNZ        v3blk

	VEXTRACTF64X4 $1, Z0, Y16
	VEXTRACTF64X4 $1, Z1, Y17
	VEXTRACTF64X4 $1, Z2, Y18
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	VMOVSS X0, (R12)
	VMOVSS X1, (R12)(R13*1)
	VMOVSS X2, (R12)(R13*2)
	TESTQ  R9, R9
	JEQ    v3done
	VMOVAPS Y16, Y0
	VMOVAPS Y17, Y1
	VMOVAPS Y18, Y2
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	VMOVSS X0, 4(R12)
	VMOVSS X1, 4(R12)(R13*1)
	VMOVSS X2, 4(R12)(R13*2)
	VPAIR_NEXT(v3row, v3done)

v3done:
	VZEROUPPER
	RET
