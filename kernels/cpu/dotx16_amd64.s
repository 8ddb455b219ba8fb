//go:build amd64 && !noasm

#include "textflag.h"

// The kernels of matrices in groups of sixteen rows (x16pack.go), on
// AVX-512 VNNI, for 1, 2, 3, 4 and 8 activation rows: Q4_1 × Q8_1 and
// Q8_0 × Q8_0. A zmm holds one block of sixteen weight rows, a lane a
// row: each of its quant vectors holds bytes 4j..4j+3 of every row's
// quants, so it pairs with the activation block's dword j broadcast from
// memory into VPDPBUSD. Eight VPDPBUSD leave each lane the block's whole
// Σ q·a, exact in int32, converted and scaled once:
//   Q4_1: acc += float(Σ q·a)·(d·dx), then acc += m·s (low nibble quads
//         pair with dwords 0..3, high with 4..7);
//   Q8_0: the quants are stored biased to unsigned (q+128), so the lane
//         holds Σ q·a + 128·Σa, less the table's 128·Σa; then
//         acc += float(Σ q·a)·(d·dx).
// Every lane runs those steps in that order whatever the number of
// activation rows, so each kernel's result is the one-row kernel's bit
// for bit (design invariant 6).
//
// Arguments: w the first group's first block, nb blocks a row, x the first
// activation row's first block, xstride bytes between activation rows, sc
// the scale table (per block 2·A words: each row's dx, then each row's s
// for Q4_1 or 128·Σa as an int32 for Q8_0), dst the first output, dstride
// bytes between activation rows' outputs, groups the number of sixteen-row
// groups. Registers: SI the weight block, CX blocks left, DI (DX)
// activation row 0 (4) at the block, R10 xstride, R11 3·xstride, BX the
// block's scale table, R12 the group's outputs, R13 dstride, R15
// 3·dstride, R14 groups left, R9 an activation row's or output's address;
// Z31 the low-nibble mask, Z30 the block's sixteen d, Z29 its sixteen m,
// Z16..Z23 the quant vectors, Z24..Z26 scratch, Z0..Z7 the accumulators.

// Q41X16_BLOCK loads and unpacks the Q4_1 block at SI (320 bytes: d, m,
// four nibble vectors).
#define Q41X16_BLOCK \
	VCVTPH2PS (SI), Z30; \
	VCVTPH2PS 32(SI), Z29; \
	VPANDD    64(SI), Z31, Z16; \
	VPANDD    128(SI), Z31, Z17; \
	VPANDD    192(SI), Z31, Z18; \
	VPANDD    256(SI), Z31, Z19; \
	VPSRLW    $4, 64(SI), Z20; \
	VPSRLW    $4, 128(SI), Z21; \
	VPSRLW    $4, 192(SI), Z22; \
	VPSRLW    $4, 256(SI), Z23; \
	VPANDD    Z31, Z20, Z20; \
	VPANDD    Z31, Z21, Z21; \
	VPANDD    Z31, Z22, Z22; \
	VPANDD    Z31, Z23, Z23

// Q41X16_ACT adds the block's products with the Q8_1 block at xp (f16 dx,
// f16 s, 32 int8) to acc; dxoff and soff are its dx and s in the table.
#define Q41X16_ACT(xp, acc, dxoff, soff) \
	VPXORD           Z24, Z24, Z24; \
	VPXORD           Z25, Z25, Z25; \
	VPDPBUSD.BCST    4(xp), Z16, Z24; \
	VPDPBUSD.BCST    8(xp), Z17, Z25; \
	VPDPBUSD.BCST    12(xp), Z18, Z24; \
	VPDPBUSD.BCST    16(xp), Z19, Z25; \
	VPDPBUSD.BCST    20(xp), Z20, Z24; \
	VPDPBUSD.BCST    24(xp), Z21, Z25; \
	VPDPBUSD.BCST    28(xp), Z22, Z24; \
	VPDPBUSD.BCST    32(xp), Z23, Z25; \
	VPADDD           Z25, Z24, Z24; \
	VCVTDQ2PS        Z24, Z24; \
	VMULPS.BCST      dxoff(BX), Z30, Z26; \
	VFMADD231PS      Z26, Z24, acc; \
	VFMADD231PS.BCST soff(BX), Z29, acc

// Q80X16_BLOCK loads the Q8_0 block at SI (544 bytes: d, eight biased
// quant vectors).
#define Q80X16_BLOCK \
	VCVTPH2PS (SI), Z30; \
	VMOVDQU64 32(SI), Z16; \
	VMOVDQU64 96(SI), Z17; \
	VMOVDQU64 160(SI), Z18; \
	VMOVDQU64 224(SI), Z19; \
	VMOVDQU64 288(SI), Z20; \
	VMOVDQU64 352(SI), Z21; \
	VMOVDQU64 416(SI), Z22; \
	VMOVDQU64 480(SI), Z23

// Q80X16_ACT adds the block's products with the Q8_0 block at xp (f16 dx,
// 32 int8) to acc; dxoff and coff are its dx and 128·Σa in the table.
#define Q80X16_ACT(xp, acc, dxoff, coff) \
	VPXORD           Z24, Z24, Z24; \
	VPXORD           Z25, Z25, Z25; \
	VPDPBUSD.BCST    2(xp), Z16, Z24; \
	VPDPBUSD.BCST    6(xp), Z17, Z25; \
	VPDPBUSD.BCST    10(xp), Z18, Z24; \
	VPDPBUSD.BCST    14(xp), Z19, Z25; \
	VPDPBUSD.BCST    18(xp), Z20, Z24; \
	VPDPBUSD.BCST    22(xp), Z21, Z25; \
	VPDPBUSD.BCST    26(xp), Z22, Z24; \
	VPDPBUSD.BCST    30(xp), Z23, Z25; \
	VPADDD           Z25, Z24, Z24; \
	VPSUBD.BCST      coff(BX), Z24, Z24; \
	VCVTDQ2PS        Z24, Z24; \
	VMULPS.BCST      dxoff(BX), Z30, Z26; \
	VFMADD231PS      Z26, Z24, acc

// func dotQ4_1Q8_1X16A1(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ4_1Q8_1X16A1(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31

q41x16a1grp:
	VXORPS       Z0, Z0, Z0
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q41x16a1store

q41x16a1blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	Q41X16_BLOCK
	Q41X16_ACT(DI, Z0, 0, 4)
	ADDQ         $320, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $8, BX
	DECQ         CX
	JNZ          q41x16a1blk

q41x16a1store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          q41x16a1grp
	VZEROUPPER
	RET

// func dotQ4_1Q8_1X16A2(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ4_1Q8_1X16A2(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31

q41x16a2grp:
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q41x16a2store

q41x16a2blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	Q41X16_BLOCK
	Q41X16_ACT(DI, Z0, 0, 8)
	LEAQ         (DI)(R10*1), R9
	Q41X16_ACT(R9, Z1, 4, 12)
	ADDQ         $320, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $16, BX
	DECQ         CX
	JNZ          q41x16a2blk

q41x16a2store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	VMOVUPS      Z1, (R12)(R13*1)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          q41x16a2grp
	VZEROUPPER
	RET

// func dotQ4_1Q8_1X16A3(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ4_1Q8_1X16A3(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31

q41x16a3grp:
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	VXORPS       Z2, Z2, Z2
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q41x16a3store

q41x16a3blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	Q41X16_BLOCK
	Q41X16_ACT(DI, Z0, 0, 12)
	LEAQ         (DI)(R10*1), R9
	Q41X16_ACT(R9, Z1, 4, 16)
	LEAQ         (DI)(R10*2), R9
	Q41X16_ACT(R9, Z2, 8, 20)
	ADDQ         $320, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $24, BX
	DECQ         CX
	JNZ          q41x16a3blk

q41x16a3store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	VMOVUPS      Z1, (R12)(R13*1)
	VMOVUPS      Z2, (R12)(R13*2)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          q41x16a3grp
	VZEROUPPER
	RET

// func dotQ4_1Q8_1X16A4(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ4_1Q8_1X16A4(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31

q41x16a4grp:
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	VXORPS       Z2, Z2, Z2
	VXORPS       Z3, Z3, Z3
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q41x16a4store

q41x16a4blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	Q41X16_BLOCK
	Q41X16_ACT(DI, Z0, 0, 16)
	LEAQ         (DI)(R10*1), R9
	Q41X16_ACT(R9, Z1, 4, 20)
	LEAQ         (DI)(R10*2), R9
	Q41X16_ACT(R9, Z2, 8, 24)
	LEAQ         (DI)(R11*1), R9
	Q41X16_ACT(R9, Z3, 12, 28)
	ADDQ         $320, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $32, BX
	DECQ         CX
	JNZ          q41x16a4blk

q41x16a4store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	VMOVUPS      Z1, (R12)(R13*1)
	VMOVUPS      Z2, (R12)(R13*2)
	VMOVUPS      Z3, (R12)(R15*1)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          q41x16a4grp
	VZEROUPPER
	RET

// func dotQ4_1Q8_1X16A8(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ4_1Q8_1X16A8(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31

q41x16a8grp:
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	VXORPS       Z2, Z2, Z2
	VXORPS       Z3, Z3, Z3
	VXORPS       Z4, Z4, Z4
	VXORPS       Z5, Z5, Z5
	VXORPS       Z6, Z6, Z6
	VXORPS       Z7, Z7, Z7
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q41x16a8store

q41x16a8blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	Q41X16_BLOCK
	Q41X16_ACT(DI, Z0, 0, 32)
	LEAQ         (DI)(R10*1), R9
	Q41X16_ACT(R9, Z1, 4, 36)
	LEAQ         (DI)(R10*2), R9
	Q41X16_ACT(R9, Z2, 8, 40)
	LEAQ         (DI)(R11*1), R9
	Q41X16_ACT(R9, Z3, 12, 44)
	Q41X16_ACT(DX, Z4, 16, 48)
	LEAQ         (DX)(R10*1), R9
	Q41X16_ACT(R9, Z5, 20, 52)
	LEAQ         (DX)(R10*2), R9
	Q41X16_ACT(R9, Z6, 24, 56)
	LEAQ         (DX)(R11*1), R9
	Q41X16_ACT(R9, Z7, 28, 60)
	ADDQ         $320, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $64, BX
	DECQ         CX
	JNZ          q41x16a8blk

q41x16a8store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	VMOVUPS      Z1, (R12)(R13*1)
	VMOVUPS      Z2, (R12)(R13*2)
	VMOVUPS      Z3, (R12)(R15*1)
	VMOVUPS      Z4, (R9)
	VMOVUPS      Z5, (R9)(R13*1)
	VMOVUPS      Z6, (R9)(R13*2)
	VMOVUPS      Z7, (R9)(R15*1)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          q41x16a8grp
	VZEROUPPER
	RET

// func dotQ8_0Q8_0X16A1(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ8_0Q8_0X16A1(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31

q80x16a1grp:
	VXORPS       Z0, Z0, Z0
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q80x16a1store

q80x16a1blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	PREFETCHT0   4416(SI)
	PREFETCHT0   4480(SI)
	PREFETCHT0   4544(SI)
	PREFETCHT0   4608(SI)
	Q80X16_BLOCK
	Q80X16_ACT(DI, Z0, 0, 4)
	ADDQ         $544, SI
	ADDQ         $34, DI
	ADDQ         $34, DX
	ADDQ         $8, BX
	DECQ         CX
	JNZ          q80x16a1blk

q80x16a1store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          q80x16a1grp
	VZEROUPPER
	RET

// func dotQ8_0Q8_0X16A2(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ8_0Q8_0X16A2(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31

q80x16a2grp:
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q80x16a2store

q80x16a2blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	PREFETCHT0   4416(SI)
	PREFETCHT0   4480(SI)
	PREFETCHT0   4544(SI)
	PREFETCHT0   4608(SI)
	Q80X16_BLOCK
	Q80X16_ACT(DI, Z0, 0, 8)
	LEAQ         (DI)(R10*1), R9
	Q80X16_ACT(R9, Z1, 4, 12)
	ADDQ         $544, SI
	ADDQ         $34, DI
	ADDQ         $34, DX
	ADDQ         $16, BX
	DECQ         CX
	JNZ          q80x16a2blk

q80x16a2store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	VMOVUPS      Z1, (R12)(R13*1)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          q80x16a2grp
	VZEROUPPER
	RET

// func dotQ8_0Q8_0X16A3(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ8_0Q8_0X16A3(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31

q80x16a3grp:
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	VXORPS       Z2, Z2, Z2
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q80x16a3store

q80x16a3blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	PREFETCHT0   4416(SI)
	PREFETCHT0   4480(SI)
	PREFETCHT0   4544(SI)
	PREFETCHT0   4608(SI)
	Q80X16_BLOCK
	Q80X16_ACT(DI, Z0, 0, 12)
	LEAQ         (DI)(R10*1), R9
	Q80X16_ACT(R9, Z1, 4, 16)
	LEAQ         (DI)(R10*2), R9
	Q80X16_ACT(R9, Z2, 8, 20)
	ADDQ         $544, SI
	ADDQ         $34, DI
	ADDQ         $34, DX
	ADDQ         $24, BX
	DECQ         CX
	JNZ          q80x16a3blk

q80x16a3store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	VMOVUPS      Z1, (R12)(R13*1)
	VMOVUPS      Z2, (R12)(R13*2)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          q80x16a3grp
	VZEROUPPER
	RET

// func dotQ8_0Q8_0X16A4(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ8_0Q8_0X16A4(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31

q80x16a4grp:
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	VXORPS       Z2, Z2, Z2
	VXORPS       Z3, Z3, Z3
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q80x16a4store

q80x16a4blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	PREFETCHT0   4416(SI)
	PREFETCHT0   4480(SI)
	PREFETCHT0   4544(SI)
	PREFETCHT0   4608(SI)
	Q80X16_BLOCK
	Q80X16_ACT(DI, Z0, 0, 16)
	LEAQ         (DI)(R10*1), R9
	Q80X16_ACT(R9, Z1, 4, 20)
	LEAQ         (DI)(R10*2), R9
	Q80X16_ACT(R9, Z2, 8, 24)
	LEAQ         (DI)(R11*1), R9
	Q80X16_ACT(R9, Z3, 12, 28)
	ADDQ         $544, SI
	ADDQ         $34, DI
	ADDQ         $34, DX
	ADDQ         $32, BX
	DECQ         CX
	JNZ          q80x16a4blk

q80x16a4store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	VMOVUPS      Z1, (R12)(R13*1)
	VMOVUPS      Z2, (R12)(R13*2)
	VMOVUPS      Z3, (R12)(R15*1)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          q80x16a4grp
	VZEROUPPER
	RET

// func dotQ8_0Q8_0X16A8(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ8_0Q8_0X16A8(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31

q80x16a8grp:
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	VXORPS       Z2, Z2, Z2
	VXORPS       Z3, Z3, Z3
	VXORPS       Z4, Z4, Z4
	VXORPS       Z5, Z5, Z5
	VXORPS       Z6, Z6, Z6
	VXORPS       Z7, Z7, Z7
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q80x16a8store

q80x16a8blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	PREFETCHT0   4416(SI)
	PREFETCHT0   4480(SI)
	PREFETCHT0   4544(SI)
	PREFETCHT0   4608(SI)
	Q80X16_BLOCK
	Q80X16_ACT(DI, Z0, 0, 32)
	LEAQ         (DI)(R10*1), R9
	Q80X16_ACT(R9, Z1, 4, 36)
	LEAQ         (DI)(R10*2), R9
	Q80X16_ACT(R9, Z2, 8, 40)
	LEAQ         (DI)(R11*1), R9
	Q80X16_ACT(R9, Z3, 12, 44)
	Q80X16_ACT(DX, Z4, 16, 48)
	LEAQ         (DX)(R10*1), R9
	Q80X16_ACT(R9, Z5, 20, 52)
	LEAQ         (DX)(R10*2), R9
	Q80X16_ACT(R9, Z6, 24, 56)
	LEAQ         (DX)(R11*1), R9
	Q80X16_ACT(R9, Z7, 28, 60)
	ADDQ         $544, SI
	ADDQ         $34, DI
	ADDQ         $34, DX
	ADDQ         $64, BX
	DECQ         CX
	JNZ          q80x16a8blk

q80x16a8store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	VMOVUPS      Z1, (R12)(R13*1)
	VMOVUPS      Z2, (R12)(R13*2)
	VMOVUPS      Z3, (R12)(R15*1)
	VMOVUPS      Z4, (R9)
	VMOVUPS      Z5, (R9)(R13*1)
	VMOVUPS      Z6, (R9)(R13*2)
	VMOVUPS      Z7, (R9)(R15*1)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          q80x16a8grp
	VZEROUPPER
	RET

