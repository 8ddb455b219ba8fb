//go:build amd64 && !noasm

#include "dotq_amd64.h"
#include "dotqv_amd64.h"

// Q8_0 row kernels for MoEFFN's grouped expert products (moe_group.go), for
// 1 to 8 activation rows, on AVX-512 VNNI. They take the layout of
// dotQ8_0Q8_0Rows4VNNI (dotq8v_amd64.s): a zmm holds two weight rows'
// products with one activation block (lanes 0..7 row r, 8..15 row r+1), and
// give each product the bits of the one-row AVX2 kernel: the same int32
// four-byte sums, then that kernel's d·dx, conversion, FMA chain over the
// blocks and horizontal sum, in its order. This header is written by hand;
// the kernels after it by moe_amd64_gen.py (go generate).
//
// What differs is the sign trick. VPDPBUSD multiplies unsigned by signed
// bytes; dotq8v_amd64.s makes the weights unsigned (|w|) and moves their
// signs onto each activation (a masked VPSUBB per weight pair and
// activation). Here the activations come offset instead, x' = x + 128 (the
// quant bytes XOR 0x80, moeOffset), so
//
//	Σ x'·w = Σ x·w + 128·Σ w,
//
// and 128·Σ w, one VPDPBUSD of 0x80 bytes by w per weight pair, is the
// accumulator's starting value negated. A product is then VPDPBUSD,
// VCVTDQ2PS, VMULPS, VFMADD: four ALU µops per two, not five, which is what
// bounds these loops (p0 and p5 take zmm work). The sums are exact: |x'·w|
// ≤ 255·128, four to a lane.
//
// Registers: SI row r's base, R8 wstride, R9 row r+1's offset from row r
// (0 for a lone last row, which then fills both halves), R10 xstride, R12
// dst, R13 dstride in bytes, R14 rows left; AX row r's block, CX blocks
// left, BX the block's scales, R15 row r+9's offset (prefetched with r+8), DI/DX/R11 the activation blocks; Z0..Z7 the
// accumulators; Z16 the two rows' quants, Z17 −128·Σw per lane, Z18 [d_r ×8,
// d_r+1 ×8], Z30 0x80 bytes, Z31 zero.

// UPAIR_LOAD reads the two rows' blocks: quants, correction, scales.
#define UPAIR_LOAD \
	VMOVDQU64       2(AX), Y16; \
	VINSERTI64X4    $1, 2(AX)(R9*1), Z16, Z16; \
	VPXORD          Z17, Z17, Z17; \
	VPDPBUSD        Z16, Z30, Z17; \
	VPSUBD          Z17, Z31, Z17; \
	VPBROADCASTW    (AX), X18; \
	VPBROADCASTW    (AX)(R9*1), X19; \
	VINSERTI32X4    $1, X19, Y18, Y18; \
	VCVTPH2PS       Y18, Z18

// UPROD: acc += d·dx (dx at off(BX)) · (Σ fours of x'·w − 128·Σ w), the
// offset activation block at mem, for both rows.
#define UPROD(off, mem, acc, q, s, t) \
	VBROADCASTI64X4 mem, q; \
	VMOVDQA64       Z17, s; \
	VPDPBUSD        Z16, q, s; \
	VCVTDQ2PS       s, s; \
	VMULPS.BCST     off(BX), Z18, t; \
	VFMADD231PS     s, t, acc

// ULOAD_ARGS, UPAIR_START and UPAIR_NEXT are dotqv_amd64.h's V forms plus
// the 0x80 bytes in Z30 and the prefetch distance in R15.
#define ULOAD_ARGS \
	VLOAD_ARGS; \
	MOVL   $0x80808080, DX; \
	VMOVD  DX, X30; \
	VPBROADCASTD X30, Z30

// UPAIR_START picks row r+1 (or row r again for a lone last row).
#define UPAIR_START(done) \
	VPAIR_START(done); \
	LEAQ   (R9)(R8*8), R15

#define UPAIR_NEXT(loop, done) VPAIR_NEXT(loop, done)

// func dotQ8_0Q8_0Rows1U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ8_0Q8_0Rows1U(SB), NOSPLIT, $0-72
	ULOAD_ARGS

u1row:
	UPAIR_START(u1done)
	MOVQ   x+16(FP), DI
	VXORPS Z0, Z0, Z0

u1blk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (AX)(R15*1)
	UPAIR_LOAD
	UPROD(0, 2(DI), Z0, Z20, Z21, Z22)
	ADDQ       $34, AX
	ADDQ       $34, DI
	ADDQ       $8, BX
	DECQ       CX
	JNZ        u1blk

	VEXTRACTF64X4 $1, Z0, Y16
	HSUM(Y0, X0, X13)
	VMOVSS X0, 0(R12)
	TESTQ R9, R9
	JEQ   u1done
	VMOVAPS Y16, Y0
	HSUM(Y0, X0, X13)
	VMOVSS X0, 4(R12)
	UPAIR_NEXT(u1row, u1done)

u1done:
	VZEROUPPER
	RET

// func dotQ8_0Q8_0Rows2U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ8_0Q8_0Rows2U(SB), NOSPLIT, $0-72
	ULOAD_ARGS

u2row:
	UPAIR_START(u2done)
	MOVQ   x+16(FP), DI
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1

u2blk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (AX)(R15*1)
	UPAIR_LOAD
	UPROD(0, 2(DI), Z0, Z20, Z21, Z22)
	UPROD(4, 2(DI)(R10*1), Z1, Z23, Z24, Z25)
	ADDQ       $34, AX
	ADDQ       $34, DI
	ADDQ       $16, BX
	DECQ       CX
	JNZ        u2blk

	VEXTRACTF64X4 $1, Z0, Y16
	VEXTRACTF64X4 $1, Z1, Y17
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	VMOVSS X0, 0(R12)
	VMOVSS X1, 0(R12)(R13*1)
	TESTQ R9, R9
	JEQ   u2done
	VMOVAPS Y16, Y0
	VMOVAPS Y17, Y1
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	VMOVSS X0, 4(R12)
	VMOVSS X1, 4(R12)(R13*1)
	UPAIR_NEXT(u2row, u2done)

u2done:
	VZEROUPPER
	RET

// func dotQ8_0Q8_0Rows3U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ8_0Q8_0Rows3U(SB), NOSPLIT, $0-72
	ULOAD_ARGS

u3row:
	UPAIR_START(u3done)
	MOVQ   x+16(FP), DI
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2

u3blk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (AX)(R15*1)
	UPAIR_LOAD
	UPROD(0, 2(DI), Z0, Z20, Z21, Z22)
	UPROD(4, 2(DI)(R10*1), Z1, Z23, Z24, Z25)
	UPROD(8, 2(DI)(R10*2), Z2, Z26, Z27, Z28)
	ADDQ       $34, AX
	ADDQ       $34, DI
	ADDQ       $24, BX
	DECQ       CX
	JNZ        u3blk

	VEXTRACTF64X4 $1, Z0, Y16
	VEXTRACTF64X4 $1, Z1, Y17
	VEXTRACTF64X4 $1, Z2, Y18
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	VMOVSS X0, 0(R12)
	VMOVSS X1, 0(R12)(R13*1)
	VMOVSS X2, 0(R12)(R13*2)
	TESTQ R9, R9
	JEQ   u3done
	VMOVAPS Y16, Y0
	VMOVAPS Y17, Y1
	VMOVAPS Y18, Y2
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	VMOVSS X0, 4(R12)
	VMOVSS X1, 4(R12)(R13*1)
	VMOVSS X2, 4(R12)(R13*2)
	UPAIR_NEXT(u3row, u3done)

u3done:
	VZEROUPPER
	RET

// func dotQ8_0Q8_0Rows4U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ8_0Q8_0Rows4U(SB), NOSPLIT, $0-72
	ULOAD_ARGS

u4row:
	UPAIR_START(u4done)
	MOVQ   x+16(FP), DI
	LEAQ   (DI)(R10*2), DX
	ADDQ   R10, DX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3

u4blk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (AX)(R15*1)
	UPAIR_LOAD
	UPROD(0, 2(DI), Z0, Z20, Z21, Z22)
	UPROD(4, 2(DI)(R10*1), Z1, Z23, Z24, Z25)
	UPROD(8, 2(DI)(R10*2), Z2, Z26, Z27, Z28)
	UPROD(12, 2(DX), Z3, Z29, Z19, Z8)
	ADDQ       $34, AX
	ADDQ       $34, DI
	ADDQ       $34, DX
	ADDQ       $32, BX
	DECQ       CX
	JNZ        u4blk

	VEXTRACTF64X4 $1, Z0, Y16
	VEXTRACTF64X4 $1, Z1, Y17
	VEXTRACTF64X4 $1, Z2, Y18
	VEXTRACTF64X4 $1, Z3, Y19
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	HSUM(Y3, X3, X13)
	VMOVSS X0, 0(R12)
	VMOVSS X1, 0(R12)(R13*1)
	VMOVSS X2, 0(R12)(R13*2)
	LEAQ   (R12)(R13*2), BX
	ADDQ   R13, BX
	VMOVSS X3, 0(BX)
	TESTQ R9, R9
	JEQ   u4done
	VMOVAPS Y16, Y0
	VMOVAPS Y17, Y1
	VMOVAPS Y18, Y2
	VMOVAPS Y19, Y3
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	HSUM(Y3, X3, X13)
	VMOVSS X0, 4(R12)
	VMOVSS X1, 4(R12)(R13*1)
	VMOVSS X2, 4(R12)(R13*2)
	LEAQ   (R12)(R13*2), BX
	ADDQ   R13, BX
	VMOVSS X3, 4(BX)
	UPAIR_NEXT(u4row, u4done)

u4done:
	VZEROUPPER
	RET

// func dotQ8_0Q8_0Rows5U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ8_0Q8_0Rows5U(SB), NOSPLIT, $0-72
	ULOAD_ARGS

u5row:
	UPAIR_START(u5done)
	MOVQ   x+16(FP), DI
	LEAQ   (DI)(R10*2), DX
	ADDQ   R10, DX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4

u5blk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (AX)(R15*1)
	UPAIR_LOAD
	UPROD(0, 2(DI), Z0, Z20, Z21, Z22)
	UPROD(4, 2(DI)(R10*1), Z1, Z23, Z24, Z25)
	UPROD(8, 2(DI)(R10*2), Z2, Z26, Z27, Z28)
	UPROD(12, 2(DX), Z3, Z29, Z19, Z8)
	UPROD(16, 2(DI)(R10*4), Z4, Z9, Z10, Z11)
	ADDQ       $34, AX
	ADDQ       $34, DI
	ADDQ       $34, DX
	ADDQ       $40, BX
	DECQ       CX
	JNZ        u5blk

	VEXTRACTF64X4 $1, Z0, Y16
	VEXTRACTF64X4 $1, Z1, Y17
	VEXTRACTF64X4 $1, Z2, Y18
	VEXTRACTF64X4 $1, Z3, Y19
	VEXTRACTF64X4 $1, Z4, Y20
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	HSUM(Y3, X3, X13)
	HSUM(Y4, X4, X13)
	VMOVSS X0, 0(R12)
	VMOVSS X1, 0(R12)(R13*1)
	VMOVSS X2, 0(R12)(R13*2)
	VMOVSS X4, 0(R12)(R13*4)
	LEAQ   (R12)(R13*2), BX
	ADDQ   R13, BX
	VMOVSS X3, 0(BX)
	TESTQ R9, R9
	JEQ   u5done
	VMOVAPS Y16, Y0
	VMOVAPS Y17, Y1
	VMOVAPS Y18, Y2
	VMOVAPS Y19, Y3
	VMOVAPS Y20, Y4
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	HSUM(Y3, X3, X13)
	HSUM(Y4, X4, X13)
	VMOVSS X0, 4(R12)
	VMOVSS X1, 4(R12)(R13*1)
	VMOVSS X2, 4(R12)(R13*2)
	VMOVSS X4, 4(R12)(R13*4)
	LEAQ   (R12)(R13*2), BX
	ADDQ   R13, BX
	VMOVSS X3, 4(BX)
	UPAIR_NEXT(u5row, u5done)

u5done:
	VZEROUPPER
	RET

// func dotQ8_0Q8_0Rows6U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ8_0Q8_0Rows6U(SB), NOSPLIT, $0-72
	ULOAD_ARGS

u6row:
	UPAIR_START(u6done)
	MOVQ   x+16(FP), DI
	LEAQ   (DI)(R10*2), DX
	ADDQ   R10, DX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5

u6blk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (AX)(R15*1)
	UPAIR_LOAD
	UPROD(0, 2(DI), Z0, Z20, Z21, Z22)
	UPROD(4, 2(DI)(R10*1), Z1, Z23, Z24, Z25)
	UPROD(8, 2(DI)(R10*2), Z2, Z26, Z27, Z28)
	UPROD(12, 2(DX), Z3, Z29, Z19, Z8)
	UPROD(16, 2(DI)(R10*4), Z4, Z9, Z10, Z11)
	UPROD(20, 2(DX)(R10*2), Z5, Z12, Z13, Z14)
	ADDQ       $34, AX
	ADDQ       $34, DI
	ADDQ       $34, DX
	ADDQ       $48, BX
	DECQ       CX
	JNZ        u6blk

	VEXTRACTF64X4 $1, Z0, Y16
	VEXTRACTF64X4 $1, Z1, Y17
	VEXTRACTF64X4 $1, Z2, Y18
	VEXTRACTF64X4 $1, Z3, Y19
	VEXTRACTF64X4 $1, Z4, Y20
	VEXTRACTF64X4 $1, Z5, Y21
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	HSUM(Y3, X3, X13)
	HSUM(Y4, X4, X13)
	HSUM(Y5, X5, X13)
	VMOVSS X0, 0(R12)
	VMOVSS X1, 0(R12)(R13*1)
	VMOVSS X2, 0(R12)(R13*2)
	VMOVSS X4, 0(R12)(R13*4)
	LEAQ   (R12)(R13*2), BX
	ADDQ   R13, BX
	VMOVSS X3, 0(BX)
	VMOVSS X5, 0(BX)(R13*2)
	TESTQ R9, R9
	JEQ   u6done
	VMOVAPS Y16, Y0
	VMOVAPS Y17, Y1
	VMOVAPS Y18, Y2
	VMOVAPS Y19, Y3
	VMOVAPS Y20, Y4
	VMOVAPS Y21, Y5
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	HSUM(Y3, X3, X13)
	HSUM(Y4, X4, X13)
	HSUM(Y5, X5, X13)
	VMOVSS X0, 4(R12)
	VMOVSS X1, 4(R12)(R13*1)
	VMOVSS X2, 4(R12)(R13*2)
	VMOVSS X4, 4(R12)(R13*4)
	LEAQ   (R12)(R13*2), BX
	ADDQ   R13, BX
	VMOVSS X3, 4(BX)
	VMOVSS X5, 4(BX)(R13*2)
	UPAIR_NEXT(u6row, u6done)

u6done:
	VZEROUPPER
	RET

// func dotQ8_0Q8_0Rows7U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ8_0Q8_0Rows7U(SB), NOSPLIT, $0-72
	ULOAD_ARGS

u7row:
	UPAIR_START(u7done)
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

u7blk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (AX)(R15*1)
	UPAIR_LOAD
	UPROD(0, 2(DI), Z0, Z20, Z21, Z22)
	UPROD(4, 2(DI)(R10*1), Z1, Z23, Z24, Z25)
	UPROD(8, 2(DI)(R10*2), Z2, Z26, Z27, Z28)
	UPROD(12, 2(DX), Z3, Z29, Z19, Z8)
	UPROD(16, 2(DI)(R10*4), Z4, Z9, Z10, Z11)
	UPROD(20, 2(DX)(R10*2), Z5, Z12, Z13, Z14)
	UPROD(24, 2(R11), Z6, Z15, Z20, Z21)
	ADDQ       $34, AX
	ADDQ       $34, DI
	ADDQ       $34, DX
	ADDQ       $34, R11
	ADDQ       $56, BX
	DECQ       CX
	JNZ        u7blk

	VEXTRACTF64X4 $1, Z0, Y16
	VEXTRACTF64X4 $1, Z1, Y17
	VEXTRACTF64X4 $1, Z2, Y18
	VEXTRACTF64X4 $1, Z3, Y19
	VEXTRACTF64X4 $1, Z4, Y20
	VEXTRACTF64X4 $1, Z5, Y21
	VEXTRACTF64X4 $1, Z6, Y22
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	HSUM(Y3, X3, X13)
	HSUM(Y4, X4, X13)
	HSUM(Y5, X5, X13)
	HSUM(Y6, X6, X13)
	VMOVSS X0, 0(R12)
	VMOVSS X1, 0(R12)(R13*1)
	VMOVSS X2, 0(R12)(R13*2)
	VMOVSS X4, 0(R12)(R13*4)
	LEAQ   (R12)(R13*2), BX
	ADDQ   R13, BX
	VMOVSS X3, 0(BX)
	VMOVSS X5, 0(BX)(R13*2)
	ADDQ   R13, BX
	ADDQ   R13, BX
	ADDQ   R13, BX
	VMOVSS X6, 0(BX)
	TESTQ R9, R9
	JEQ   u7done
	VMOVAPS Y16, Y0
	VMOVAPS Y17, Y1
	VMOVAPS Y18, Y2
	VMOVAPS Y19, Y3
	VMOVAPS Y20, Y4
	VMOVAPS Y21, Y5
	VMOVAPS Y22, Y6
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	HSUM(Y3, X3, X13)
	HSUM(Y4, X4, X13)
	HSUM(Y5, X5, X13)
	HSUM(Y6, X6, X13)
	VMOVSS X0, 4(R12)
	VMOVSS X1, 4(R12)(R13*1)
	VMOVSS X2, 4(R12)(R13*2)
	VMOVSS X4, 4(R12)(R13*4)
	LEAQ   (R12)(R13*2), BX
	ADDQ   R13, BX
	VMOVSS X3, 4(BX)
	VMOVSS X5, 4(BX)(R13*2)
	ADDQ   R13, BX
	ADDQ   R13, BX
	ADDQ   R13, BX
	VMOVSS X6, 4(BX)
	UPAIR_NEXT(u7row, u7done)

u7done:
	VZEROUPPER
	RET

// func dotQ8_0Q8_0Rows8U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ8_0Q8_0Rows8U(SB), NOSPLIT, $0-72
	ULOAD_ARGS

u8row:
	UPAIR_START(u8done)
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

u8blk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (AX)(R15*1)
	UPAIR_LOAD
	UPROD(0, 2(DI), Z0, Z20, Z21, Z22)
	UPROD(4, 2(DI)(R10*1), Z1, Z23, Z24, Z25)
	UPROD(8, 2(DI)(R10*2), Z2, Z26, Z27, Z28)
	UPROD(12, 2(DX), Z3, Z29, Z19, Z8)
	UPROD(16, 2(DI)(R10*4), Z4, Z9, Z10, Z11)
	UPROD(20, 2(DX)(R10*2), Z5, Z12, Z13, Z14)
	UPROD(24, 2(R11), Z6, Z15, Z20, Z21)
	UPROD(28, 2(DX)(R10*4), Z7, Z22, Z23, Z24)
	ADDQ       $34, AX
	ADDQ       $34, DI
	ADDQ       $34, DX
	ADDQ       $34, R11
	ADDQ       $64, BX
	DECQ       CX
	JNZ        u8blk

	VEXTRACTF64X4 $1, Z0, Y16
	VEXTRACTF64X4 $1, Z1, Y17
	VEXTRACTF64X4 $1, Z2, Y18
	VEXTRACTF64X4 $1, Z3, Y19
	VEXTRACTF64X4 $1, Z4, Y20
	VEXTRACTF64X4 $1, Z5, Y21
	VEXTRACTF64X4 $1, Z6, Y22
	VEXTRACTF64X4 $1, Z7, Y23
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	HSUM(Y3, X3, X13)
	HSUM(Y4, X4, X13)
	HSUM(Y5, X5, X13)
	HSUM(Y6, X6, X13)
	HSUM(Y7, X7, X13)
	VMOVSS X0, 0(R12)
	VMOVSS X1, 0(R12)(R13*1)
	VMOVSS X2, 0(R12)(R13*2)
	VMOVSS X4, 0(R12)(R13*4)
	LEAQ   (R12)(R13*2), BX
	ADDQ   R13, BX
	VMOVSS X3, 0(BX)
	VMOVSS X5, 0(BX)(R13*2)
	VMOVSS X7, 0(BX)(R13*4)
	ADDQ   R13, BX
	ADDQ   R13, BX
	ADDQ   R13, BX
	VMOVSS X6, 0(BX)
	TESTQ R9, R9
	JEQ   u8done
	VMOVAPS Y16, Y0
	VMOVAPS Y17, Y1
	VMOVAPS Y18, Y2
	VMOVAPS Y19, Y3
	VMOVAPS Y20, Y4
	VMOVAPS Y21, Y5
	VMOVAPS Y22, Y6
	VMOVAPS Y23, Y7
	HSUM(Y0, X0, X13)
	HSUM(Y1, X1, X13)
	HSUM(Y2, X2, X13)
	HSUM(Y3, X3, X13)
	HSUM(Y4, X4, X13)
	HSUM(Y5, X5, X13)
	HSUM(Y6, X6, X13)
	HSUM(Y7, X7, X13)
	VMOVSS X0, 4(R12)
	VMOVSS X1, 4(R12)(R13*1)
	VMOVSS X2, 4(R12)(R13*2)
	VMOVSS X4, 4(R12)(R13*4)
	LEAQ   (R12)(R13*2), BX
	ADDQ   R13, BX
	VMOVSS X3, 4(BX)
	VMOVSS X5, 4(BX)(R13*2)
	VMOVSS X7, 4(BX)(R13*4)
	ADDQ   R13, BX
	ADDQ   R13, BX
	ADDQ   R13, BX
	VMOVSS X6, 4(BX)
	UPAIR_NEXT(u8row, u8done)

u8done:
	VZEROUPPER
	RET
