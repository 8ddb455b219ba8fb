//go:build amd64 && !noasm

#include "dotq_amd64.h"
#include "dotg8_amd64.h"

// AVX-512 VNNI form of dotQ8_0Q8_0Rows (dotq_amd64.s) for whole groups of
// eight rows; the Go wrapper hands the rest to the AVX2 kernel. Decode's
// output head (SmolLM2-135M: 49152 Q8_0 rows) is a fifth of a step.
//
// Bit-exact with the AVX2 kernel, as dotq41v_amd64.s is with its own:
// a zmm holds two rows' products with one activation block (lanes 0..7
// row 2p, 8..15 row 2p+1), each half the AVX2 kernel's ymm. The int32
// four-byte sums are exact either way: here the weights are offset to
// unsigned (w XOR 0x80 = w+128), VPDPBUSD sums (w+128)·x, and the
// accumulator starts at −128·Σx, which VPDPBUSD(0x80, x) gives once a
// block for every row. The AVX2 kernel's d·dx, FMA chain over the blocks
// and horizontal sum are kept, lane for lane.
//
// Registers: SI group base, R8 wstride, R9 x, R10 nb, R11 dst, R12 groups
// left; rows 0..3 of a group at AX, AX+R8, AX+2·R8, AX+R14 (3·R8), rows
// 4..7 the same from R13; DX the next group's bytes (prefetched in order,
// 272 a block), DI x's block, CX blocks left. Z0..Z3 the pairs'
// accumulators; Z5 x's quants in both halves, Z6 dx (even lanes), Z7
// −128·Σx, Z8 zero, Z9 0x80 bytes, Z10..Z13 the pairs' scale indices,
// Z14 d_k·dx in lane 2k; K1 the upper four qwords, K2..K4 dwords 1..3.

DATA q80vIdx<>+0(SB)/8, $0x0000000000000000
DATA q80vIdx<>+8(SB)/8, $0x0000000000000000
DATA q80vIdx<>+16(SB)/8, $0x0000000000000000
DATA q80vIdx<>+24(SB)/8, $0x0000000000000000
DATA q80vIdx<>+32(SB)/8, $0x0000000200000002
DATA q80vIdx<>+40(SB)/8, $0x0000000200000002
DATA q80vIdx<>+48(SB)/8, $0x0000000200000002
DATA q80vIdx<>+56(SB)/8, $0x0000000200000002
DATA q80vIdx<>+64(SB)/8, $0x0000000400000004
DATA q80vIdx<>+72(SB)/8, $0x0000000400000004
DATA q80vIdx<>+80(SB)/8, $0x0000000400000004
DATA q80vIdx<>+88(SB)/8, $0x0000000400000004
DATA q80vIdx<>+96(SB)/8, $0x0000000600000006
DATA q80vIdx<>+104(SB)/8, $0x0000000600000006
DATA q80vIdx<>+112(SB)/8, $0x0000000600000006
DATA q80vIdx<>+120(SB)/8, $0x0000000600000006
DATA q80vIdx<>+128(SB)/8, $0x0000000800000008
DATA q80vIdx<>+136(SB)/8, $0x0000000800000008
DATA q80vIdx<>+144(SB)/8, $0x0000000800000008
DATA q80vIdx<>+152(SB)/8, $0x0000000800000008
DATA q80vIdx<>+160(SB)/8, $0x0000000a0000000a
DATA q80vIdx<>+168(SB)/8, $0x0000000a0000000a
DATA q80vIdx<>+176(SB)/8, $0x0000000a0000000a
DATA q80vIdx<>+184(SB)/8, $0x0000000a0000000a
DATA q80vIdx<>+192(SB)/8, $0x0000000c0000000c
DATA q80vIdx<>+200(SB)/8, $0x0000000c0000000c
DATA q80vIdx<>+208(SB)/8, $0x0000000c0000000c
DATA q80vIdx<>+216(SB)/8, $0x0000000c0000000c
DATA q80vIdx<>+224(SB)/8, $0x0000000e0000000e
DATA q80vIdx<>+232(SB)/8, $0x0000000e0000000e
DATA q80vIdx<>+240(SB)/8, $0x0000000e0000000e
DATA q80vIdx<>+248(SB)/8, $0x0000000e0000000e
GLOBL q80vIdx<>(SB), RODATA|NOPTR, $256

// Q80PAIR8: acc += pair p's block products: quants at q0 (row 2p, low
// half) and q1 (row 2p+1, high half), loaded zero-extended and
// zero-masked, merged and offset in one VPTERNLOGD ((w|v)^0x80).
#define Q80PAIR8(q0, q1, idx, acc, w, wY, v, c, t) \
	VMOVDQU64         q0, wY; \
	VBROADCASTI64X4.Z q1, K1, v; \
	VPTERNLOGD        $0x56, Z9, v, w; \
	VMOVDQA64         Z7, c; \
	VPDPBUSD          Z5, w, c; \
	VCVTDQ2PS         c, c; \
	VPERMPS           Z14, idx, t; \
	VFMADD231PS       t, c, acc

// SCALES4: the dwords at b0..b3 (a row's d and its first two quants) into
// dwords 0..3 of dX, zero-masked loads merged by a VPTERNLOGD and a VPORD.
#define SCALES4(b0, b1, b2, b3, dX, t1, t2, t3) \
	VMOVD            b0, dX; \
	VPBROADCASTD.Z   b1, K2, t1; \
	VPBROADCASTD.Z   b2, K3, t2; \
	VPBROADCASTD.Z   b3, K4, t3; \
	VPTERNLOGD       $0xfe, t3, t2, t1; \
	VPORD            t1, dX, dX

// FINISH8: rows 2p and 2p+1 from pair p's accumulator, at off, off+4 of dst.
#define FINISH8(accZ, accY, accX, off) \
	VEXTRACTF64X4 $1, accZ, Y15; \
	HSUM(accY, accX, X7); \
	VMOVSS        accX, off(R11); \
	HSUM(Y15, X15, X7); \
	VMOVSS        X15, (off+4)(R11)

// func dotQ8_0Q8_0Rows8VNNI1(w *byte, wstride int, x *byte, nb int, dst *float32, groups int)
TEXT ·dotQ8_0Q8_0Rows8VNNI1(SB), NOSPLIT, $0-48
	MOVQ      w+0(FP), SI
	MOVQ      wstride+8(FP), R8
	MOVQ      x+16(FP), R9
	MOVQ      nb+24(FP), R10
	MOVQ      dst+32(FP), R11
	MOVQ      groups+40(FP), R12
	VMOVDQU64 q80vIdx<>+0(SB), Z10
	VMOVDQU64 q80vIdx<>+64(SB), Z11
	VMOVDQU64 q80vIdx<>+128(SB), Z12
	VMOVDQU64 q80vIdx<>+192(SB), Z13
	MOVL      $0x80808080, AX
	VPBROADCASTD AX, Z9
	VPXORD    Z8, Z8, Z8
	MOVL      $0xf0, AX
	KMOVW     AX, K1
	MOVL      $2, AX
	KMOVW     AX, K2
	MOVL      $4, AX
	KMOVW     AX, K3
	MOVL      $8, AX
	KMOVW     AX, K4
	LEAQ      (R8)(R8*2), R14

q80v8group:
	MOVQ   SI, AX
	LEAQ   (SI)(R8*4), R13
	LEAQ   (SI)(R8*8), DX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3

q80v8blk:
	PREFETCHT0      (DX)
	PREFETCHT0      64(DX)
	PREFETCHT0      128(DX)
	PREFETCHT0      192(DX)
	PREFETCHT0      256(DX)
	VPBROADCASTD    (DI), Y6
	VCVTPH2PS       Y6, Z6
	VBROADCASTI64X4 2(DI), Z5
	VPXORD          Z7, Z7, Z7
	VPDPBUSD        Z5, Z9, Z7
	VPSUBD          Z7, Z8, Z7
	SCALES4((AX), (AX)(R8*1), (AX)(R8*2), (AX)(R14*1), X14, X16, X17, X18)
	SCALES4((R13), (R13)(R8*1), (R13)(R8*2), (R13)(R14*1), X15, X19, X20, X21)
	VINSERTI32X4    $1, X15, Y14, Y14
	VCVTPH2PS       Y14, Z14
	VMULPS          Z6, Z14, Z14
	Q80PAIR8(2(AX), 2(AX)(R8*1), Z10, Z0, Z24, Y24, Z25, Z26, Z27)
	Q80PAIR8(2(AX)(R8*2), 2(AX)(R14*1), Z11, Z1, Z28, Y28, Z29, Z30, Z31)
	Q80PAIR8(2(R13), 2(R13)(R8*1), Z12, Z2, Z16, Y16, Z17, Z18, Z19)
	Q80PAIR8(2(R13)(R8*2), 2(R13)(R14*1), Z13, Z3, Z20, Y20, Z21, Z22, Z23)
	ADDQ            $34, AX
	ADDQ            $34, R13
	ADDQ            $272, DX
	ADDQ            $34, DI
	DECQ            CX
	JNZ             q80v8blk

	FINISH8(Z0, Y0, X0, 0)
	FINISH8(Z1, Y1, X1, 8)
	FINISH8(Z2, Y2, X2, 16)
	FINISH8(Z3, Y3, X3, 24)
	ADDQ $32, R11
	LEAQ (SI)(R8*8), SI
	DECQ R12
	JNZ  q80v8group
	VZEROUPPER
	RET

// The two-activation form of the eight-row groups above, for the output
// head of speculative verify steps of two rows (issue 26), as
// dotQ4_1Q8_1Rows8x2VNNI is for Q4_1: each block's scales are converted
// and its quants offset once for both activations, each activation adding
// only its products, the one-row kernel's per lane. BX the second
// activation's offset (xstride), R15 its dst's (dstride bytes); Z0..Z3 the
// first activation's accumulators, Z16..Z19 the second's; Z15, Z29 and
// Z22 its quants, −128·Σx and d_k·dx, as Z5, Z7 and Z14 are the first's;
// Z4 the rows' scales, Z6 each activation's dx in turn.

// Q80V8_SETUP: the scale indices Z10..Z13, the arguments (dotg8_amd64.h),
// Z9 0x80 bytes and Z8 zero, as the one-row groups have them.
#define Q80V8_SETUP \
	VMOVDQU64    q80vIdx<>+0(SB), Z10; \
	VMOVDQU64    q80vIdx<>+64(SB), Z11; \
	VMOVDQU64    q80vIdx<>+128(SB), Z12; \
	VMOVDQU64    q80vIdx<>+192(SB), Z13; \
	G8_ARGS($0xf0); \
	MOVL         $0x80808080, AX; \
	VPBROADCASTD AX, Z9; \
	VPXORD       Z8, Z8, Z8

// Q80ACT8: an activation's quants x (at qmem) and −128·Σx (bias), and its
// d_k·dx (q) from its dx at mem and the rows' scales in Z4.
#define Q80ACT8(mem, qmem, x, bias, q) \
	VBROADCASTI64X4 qmem, x; \
	VPXORD          bias, bias, bias; \
	VPDPBUSD        x, Z9, bias; \
	VPSUBD          bias, Z8, bias; \
	VPBROADCASTD    mem, Y6; \
	VCVTPH2PS       Y6, Z6; \
	VMULPS          Z6, Z4, q

// Q80PAIR8X2: Q80PAIR8 for both activations from one offsetting.
#define Q80PAIR8X2(q0, q1, idx, acc0, acc1) \
	VMOVDQU64         q0, Y23; \
	VBROADCASTI64X4.Z q1, K1, Z24; \
	VPTERNLOGD        $0x56, Z9, Z24, Z23; \
	VMOVDQA64         Z7, Z25; \
	G8_PROD(Z5, Z14, idx, acc0, Z25, Z26); \
	VMOVDQA64         Z29, Z27; \
	G8_PROD(Z15, Z22, idx, acc1, Z27, Z28)

// FINISH8D: FINISH8 storing through d.
#define FINISH8D(accZ, accY, accX, off, d) \
	VEXTRACTF64X4 $1, accZ, Y15; \
	HSUM(accY, accX, X7); \
	VMOVSS        accX, off(d); \
	HSUM(Y15, X15, X7); \
	VMOVSS        X15, (off+4)(d)

// func dotQ8_0Q8_0Rows8x2VNNI(w *byte, wstride int, x *byte, xstride int, nb int, dst *float32, dstride int, groups int)
TEXT ·dotQ8_0Q8_0Rows8x2VNNI(SB), NOSPLIT, $0-64
	Q80V8_SETUP

q80v82group:
	G8_GROUP
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z16, Z17, Z18, Z19)

q80v82blk:
	PREFETCHT0      (DX)
	PREFETCHT0      64(DX)
	PREFETCHT0      128(DX)
	PREFETCHT0      192(DX)
	PREFETCHT0      256(DX)
	G8_SCALES(X4, Y4, Z4)
	Q80ACT8((DI), 2(DI), Z5, Z7, Z14)
	Q80ACT8((DI)(BX*1), 2(DI)(BX*1), Z15, Z29, Z22)
	Q80PAIR8X2(2(AX), 2(AX)(R8*1), Z10, Z0, Z16)
	Q80PAIR8X2(2(AX)(R8*2), 2(AX)(R14*1), Z11, Z1, Z17)
	Q80PAIR8X2(2(R13), 2(R13)(R8*1), Z12, Z2, Z18)
	Q80PAIR8X2(2(R13)(R8*2), 2(R13)(R14*1), Z13, Z3, Z19)
	G8_STEP($34, $272, $34, q80v82blk)

	FINISH8D(Z0, Y0, X0, 0, R11)
	FINISH8D(Z1, Y1, X1, 8, R11)
	FINISH8D(Z2, Y2, X2, 16, R11)
	FINISH8D(Z3, Y3, X3, 24, R11)
	// HSUM's VHADDPS has no EVEX form: the second activation's sums move
	// to Z0..Z3 first.
	MOVE4(Z16, Z17, Z18, Z19)
	LEAQ    (R11)(R15*1), DX
	FINISH8D(Z0, Y0, X0, 0, DX)
	FINISH8D(Z1, Y1, X1, 8, DX)
	FINISH8D(Z2, Y2, X2, 16, DX)
	FINISH8D(Z3, Y3, X3, 24, DX)
	G8_NEXT(q80v82group)
	VZEROUPPER
	RET

// The three-activation form, for verify steps of three rows: as
// dotQ8_0Q8_0Rows8x2VNNI with a third activation at 2·xstride (quants
// Z31, −128·Σx Z30, d_k·dx Z21, accumulators Z24..Z27); the rows' scales
// are converted in Z4, and Z6 and Z20 hold each product in turn.

// Q80PROD8: one activation's part of a pair (levels offset in Z23).
#define Q80PROD8(x, bias, q, idx, acc) \
	VMOVDQA64 bias, Z6; \
	G8_PROD(x, q, idx, acc, Z6, Z20)

#define Q80PAIR8X3(q0, q1, idx, acc0, acc1, acc2) \
	VMOVDQU64         q0, Y23; \
	VBROADCASTI64X4.Z q1, K1, Z28; \
	VPTERNLOGD        $0x56, Z9, Z28, Z23; \
	Q80PROD8(Z5, Z7, Z14, idx, acc0); \
	Q80PROD8(Z15, Z29, Z22, idx, acc1); \
	Q80PROD8(Z31, Z30, Z21, idx, acc2)

#define FINISH8X(d) \
	FINISH8D(Z0, Y0, X0, 0, d); \
	FINISH8D(Z1, Y1, X1, 8, d); \
	FINISH8D(Z2, Y2, X2, 16, d); \
	FINISH8D(Z3, Y3, X3, 24, d)

// func dotQ8_0Q8_0Rows8x3VNNI(w *byte, wstride int, x *byte, xstride int, nb int, dst *float32, dstride int, groups int)
TEXT ·dotQ8_0Q8_0Rows8x3VNNI(SB), NOSPLIT, $0-64
	Q80V8_SETUP

q80v83group:
	G8_GROUP
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z16, Z17, Z18, Z19)
	ZERO4(Z24, Z25, Z26, Z27)

q80v83blk:
	PREFETCHT0      (DX)
	PREFETCHT0      64(DX)
	PREFETCHT0      128(DX)
	PREFETCHT0      192(DX)
	PREFETCHT0      256(DX)
	G8_SCALES(X4, Y4, Z4)
	Q80ACT8((DI), 2(DI), Z5, Z7, Z14)
	Q80ACT8((DI)(BX*1), 2(DI)(BX*1), Z15, Z29, Z22)
	Q80ACT8((DI)(BX*2), 2(DI)(BX*2), Z31, Z30, Z21)
	Q80PAIR8X3(2(AX), 2(AX)(R8*1), Z10, Z0, Z16, Z24)
	Q80PAIR8X3(2(AX)(R8*2), 2(AX)(R14*1), Z11, Z1, Z17, Z25)
	Q80PAIR8X3(2(R13), 2(R13)(R8*1), Z12, Z2, Z18, Z26)
	Q80PAIR8X3(2(R13)(R8*2), 2(R13)(R14*1), Z13, Z3, Z19, Z27)
	G8_STEP($34, $272, $34, q80v83blk)

	FINISH8X(R11)
	MOVE4(Z16, Z17, Z18, Z19)
	LEAQ    (R11)(R15*1), DX
	FINISH8X(DX)
	MOVE4(Z24, Z25, Z26, Z27)
	LEAQ    (DX)(R15*1), DX
	FINISH8X(DX)
	G8_NEXT(q80v83group)
	VZEROUPPER
	RET
