//go:build amd64 && !noasm

#include "textflag.h"

// Q4_1 × Q8_1 over matrices in groups of sixteen rows (q41x16.go), on
// AVX-512 VNNI, for 1, 2, 3, 4 and 8 activation rows. A zmm holds one
// block of sixteen weight rows, a lane a row: its four nibble zmm hold
// bytes 4j..4j+3 of every row's sixteen nibble bytes (j = 0..3), so the
// low nibbles of zmm j pair with the activation's dword j and the high
// ones with dword 4+j, each broadcast from memory into VPDPBUSD. Eight
// VPDPBUSD leave each lane the block's whole Σ q·a, exact in int32, which
// is converted and scaled once: acc += float(Σ q·a)·(d·dx), then
// acc += m·s. Every lane runs those steps in that order whatever the
// number of activation rows, so each kernel's result is the one-row
// kernel's bit for bit (design invariant 6).
//
// Arguments: w the first group's first block, nb blocks a row, x the first
// activation row's first Q8_1 block (36 bytes: f16 dx, f16 s, 32 int8),
// xstride bytes between activation rows, sc the scale table (per block
// 2·A floats: dx of each row, then s of each: actScales), dst the first
// output, dstride bytes between activation rows' outputs, groups the
// number of sixteen-row groups. Registers: SI the weight block, CX blocks
// left, DI (DX) activation row 0 (4) at the block, R10 xstride, R11
// 3·xstride, BX the block's scale table, R12 the group's outputs, R13
// dstride, R15 3·dstride, R14 groups left; Z31 the low-nibble mask, Z30
// the block's sixteen d, Z29 its sixteen m, Z16..Z23 the low then high
// nibble quads, Z24..Z26 scratch, Z0..Z7 the accumulators.

// X16_BLOCK loads and unpacks the block at SI.
#define X16_BLOCK \
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

// X16_ACT adds the block's products with the activation block at xp to
// acc; dxoff and soff are its dx and s in the scale table.
#define X16_ACT(xp, acc, dxoff, soff) \
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
	TESTQ        R8, R8
	JEQ          x16zero1

x16grp1:
	VXORPS       Z0, Z0, Z0
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX

x16blk1:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	X16_BLOCK
	X16_ACT(DI, Z0, 0, 4)
	ADDQ         $320, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $8, BX
	DECQ         CX
	JNZ          x16blk1

	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          x16grp1
	VZEROUPPER
	RET

x16zero1:
	VXORPS       Z0, Z0, Z0
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          x16zero1
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
	TESTQ        R8, R8
	JEQ          x16zero2

x16grp2:
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX

x16blk2:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	X16_BLOCK
	X16_ACT(DI, Z0, 0, 8)
	LEAQ         (DI)(R10*1), R9
	X16_ACT(R9, Z1, 4, 12)
	ADDQ         $320, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $16, BX
	DECQ         CX
	JNZ          x16blk2

	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	VMOVUPS      Z1, (R12)(R13*1)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          x16grp2
	VZEROUPPER
	RET

x16zero2:
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	VMOVUPS      Z1, (R12)(R13*1)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          x16zero2
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
	TESTQ        R8, R8
	JEQ          x16zero3

x16grp3:
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	VXORPS       Z2, Z2, Z2
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX

x16blk3:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	X16_BLOCK
	X16_ACT(DI, Z0, 0, 12)
	LEAQ         (DI)(R10*1), R9
	X16_ACT(R9, Z1, 4, 16)
	LEAQ         (DI)(R10*2), R9
	X16_ACT(R9, Z2, 8, 20)
	ADDQ         $320, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $24, BX
	DECQ         CX
	JNZ          x16blk3

	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	VMOVUPS      Z1, (R12)(R13*1)
	VMOVUPS      Z2, (R12)(R13*2)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          x16grp3
	VZEROUPPER
	RET

x16zero3:
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	VXORPS       Z2, Z2, Z2
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	VMOVUPS      Z1, (R12)(R13*1)
	VMOVUPS      Z2, (R12)(R13*2)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          x16zero3
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
	TESTQ        R8, R8
	JEQ          x16zero4

x16grp4:
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	VXORPS       Z2, Z2, Z2
	VXORPS       Z3, Z3, Z3
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX

x16blk4:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	X16_BLOCK
	X16_ACT(DI, Z0, 0, 16)
	LEAQ         (DI)(R10*1), R9
	X16_ACT(R9, Z1, 4, 20)
	LEAQ         (DI)(R10*2), R9
	X16_ACT(R9, Z2, 8, 24)
	LEAQ         (DI)(R11*1), R9
	X16_ACT(R9, Z3, 12, 28)
	ADDQ         $320, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $32, BX
	DECQ         CX
	JNZ          x16blk4

	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	VMOVUPS      Z1, (R12)(R13*1)
	VMOVUPS      Z2, (R12)(R13*2)
	VMOVUPS      Z3, (R12)(R15*1)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          x16grp4
	VZEROUPPER
	RET

x16zero4:
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	VXORPS       Z2, Z2, Z2
	VXORPS       Z3, Z3, Z3
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Z0, (R12)
	VMOVUPS      Z1, (R12)(R13*1)
	VMOVUPS      Z2, (R12)(R13*2)
	VMOVUPS      Z3, (R12)(R15*1)
	ADDQ         $64, R12
	DECQ         R14
	JNZ          x16zero4
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
	TESTQ        R8, R8
	JEQ          x16zero8

x16grp8:
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

x16blk8:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	X16_BLOCK
	X16_ACT(DI, Z0, 0, 32)
	LEAQ         (DI)(R10*1), R9
	X16_ACT(R9, Z1, 4, 36)
	LEAQ         (DI)(R10*2), R9
	X16_ACT(R9, Z2, 8, 40)
	LEAQ         (DI)(R11*1), R9
	X16_ACT(R9, Z3, 12, 44)
	X16_ACT(DX, Z4, 16, 48)
	LEAQ         (DX)(R10*1), R9
	X16_ACT(R9, Z5, 20, 52)
	LEAQ         (DX)(R10*2), R9
	X16_ACT(R9, Z6, 24, 56)
	LEAQ         (DX)(R11*1), R9
	X16_ACT(R9, Z7, 28, 60)
	ADDQ         $320, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $64, BX
	DECQ         CX
	JNZ          x16blk8

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
	JNZ          x16grp8
	VZEROUPPER
	RET

x16zero8:
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	VXORPS       Z2, Z2, Z2
	VXORPS       Z3, Z3, Z3
	VXORPS       Z4, Z4, Z4
	VXORPS       Z5, Z5, Z5
	VXORPS       Z6, Z6, Z6
	VXORPS       Z7, Z7, Z7
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
	JNZ          x16zero8
	VZEROUPPER
	RET

