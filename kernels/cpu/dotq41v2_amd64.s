//go:build amd64 && !noasm

#include "dotq_amd64.h"

// AVX-512 VNNI two- and three-activation forms of the Q4_1 kernels
// (dotq41v4_amd64.s has the four- and eight-activation ones): speculative
// verify steps of 2, 3, 6 and 7 rows (issue 26), which otherwise went
// through the AVX2 dotQ4_1Q8_1Rows2 or a second pass over the weights. A
// zmm holds two weight rows' products with one activation block, as in
// dotq41v4_amd64.s, whose header gives the argument for bit-exactness with
// the one-row kernel; per lane the arithmetic here is the same, only the
// number of activations differs. The scale table (actScales, m = 2 or 3)
// is [dx0..dx(m-1) s0..s(m-1)] per block; Z21 holds the s's at lanes the
// Σ m·s_j sums are read from (0..1 for two activations from an 8-byte
// broadcast; 1..3 for three, from a 16-byte broadcast of [dx2 s0 s1 s2],
// which stays inside the block's 24 bytes).
//
// Registers as dotq41v4_amd64.s's (dotqv_amd64.h's VLOAD_ARGS and the pair
// loop), Z0..Z2 the accumulators.

#include "dotqv_amd64.h"
#include "dotq41v_amd64.h"

// Q41V_MS2 adds lanes 0 and 1 of msX to a0 and a1; Q41V_MS3 lanes 1..3 to
// a0..a2.
#define Q41V_MS2(msX, a0, a1) \
	VADDSS    msX, a0, a0; \
	VMOVSHDUP msX, X13; \
	VADDSS    X13, a1, a1

#define Q41V_MS3(msX, a0, a1, a2) \
	VMOVSHDUP msX, X13; \
	VADDSS    X13, a0, a0; \
	VMOVHLPS  msX, msX, X13; \
	VADDSS    X13, a1, a1; \
	VPERMILPS $3, msX, X13; \
	VADDSS    X13, a2, a2

// func dotQ4_1Q8_1Rows2VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ4_1Q8_1Rows2VNNI(SB), NOSPLIT, $0-72
	Q41V_CONSTS
	VLOAD_ARGS

q41v2row:
	VPAIR_START(q41v2done)
	MOVQ   x+16(FP), DI
	LEAQ   (R9)(R8*8), R15
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z10, Z10, Z10

q41v2blk:
	PREFETCHT0   (AX)(R8*8)
	PREFETCHT0   (AX)(R15*1)
	VPBROADCASTQ 8(BX), Z21
	Q41V_PAIR(Z21)
	Q41VPROD(0, 4(DI), Z0, Z22, Z23, Z24)
	Q41VPROD(4, 4(DI)(R10*1), Z1, Z25, Z26, Z27)
	ADDQ         $20, AX
	ADDQ         $36, DI
	ADDQ         $16, BX
	DECQ         CX
	JNZ          q41v2blk

	VEXTRACTF32X4 $2, Z10, X11
	VEXTRACTF64X4 $1, Z0, Y16
	VEXTRACTF64X4 $1, Z1, Y17
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	Q41V_MS2(X10, X0, X1)
	VMOVSS X0, (R12)
	VMOVSS X1, (R12)(R13*1)
	TESTQ  R9, R9
	JEQ    q41v2done
	VMOVAPS Y16, Y0
	VMOVAPS Y17, Y1
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	Q41V_MS2(X11, X0, X1)
	VMOVSS X0, 4(R12)
	VMOVSS X1, 4(R12)(R13*1)
	VPAIR_NEXT(q41v2row, q41v2done)

q41v2done:
	VZEROUPPER
	RET

// func dotQ4_1Q8_1Rows3VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ4_1Q8_1Rows3VNNI(SB), NOSPLIT, $0-72
	Q41V_CONSTS
	VLOAD_ARGS

q41v3row:
	VPAIR_START(q41v3done)
	MOVQ   x+16(FP), DI
	LEAQ   (R9)(R8*8), R15
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z10, Z10, Z10

q41v3blk:
	PREFETCHT0      (AX)(R8*8)
	PREFETCHT0      (AX)(R15*1)
	VBROADCASTF32X4 8(BX), Z21
	Q41V_PAIR(Z21)
	Q41VPROD(0, 4(DI), Z0, Z22, Z23, Z24)
	Q41VPROD(4, 4(DI)(R10*1), Z1, Z25, Z26, Z27)
	Q41VPROD(8, 4(DI)(R10*2), Z2, Z28, Z29, Z30)
	ADDQ            $20, AX
	ADDQ            $36, DI
	ADDQ            $24, BX
	DECQ            CX
	JNZ             q41v3blk

	VEXTRACTF32X4 $2, Z10, X11
	VEXTRACTF64X4 $1, Z0, Y16
	VEXTRACTF64X4 $1, Z1, Y17
	VEXTRACTF64X4 $1, Z2, Y18
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	Q41V_MS3(X10, X0, X1, X2)
	VMOVSS X0, (R12)
	VMOVSS X1, (R12)(R13*1)
	VMOVSS X2, (R12)(R13*2)
	TESTQ  R9, R9
	JEQ    q41v3done
	VMOVAPS Y16, Y0
	VMOVAPS Y17, Y1
	VMOVAPS Y18, Y2
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	Q41V_MS3(X11, X0, X1, X2)
	VMOVSS X0, 4(R12)
	VMOVSS X1, 4(R12)(R13*1)
	VMOVSS X2, 4(R12)(R13*2)
	VPAIR_NEXT(q41v3row, q41v3done)

q41v3done:
	VZEROUPPER
	RET
