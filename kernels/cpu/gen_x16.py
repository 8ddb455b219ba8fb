# Writes dotx16_amd64.s, the grouped Q4_1 and Q8_0 kernels (x16pack.go), one
# per weight type and number of activation rows: go generate ./kernels/cpu.
hdr = r'''//go:build amd64 && !noasm

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

'''
acts = {
 1: ["DI"],
 2: ["DI", "(DI)(R10*1)"],
 3: ["DI", "(DI)(R10*1)", "(DI)(R10*2)"],
 4: ["DI", "(DI)(R10*1)", "(DI)(R10*2)", "(DI)(R11*1)"],
 8: ["DI", "(DI)(R10*1)", "(DI)(R10*2)", "(DI)(R11*1)", "DX", "(DX)(R10*1)", "(DX)(R10*2)", "(DX)(R11*1)"],
}
outs = ["(R12)", "(R12)(R13*1)", "(R12)(R13*2)", "(R12)(R15*1)", "(R9)", "(R9)(R13*1)", "(R9)(R13*2)", "(R9)(R15*1)"]
types = [
  # name, block macro, act macro, wblock bytes, act block bytes, prefetch lines, label prefix
  ("dotQ4_1Q8_1X16A", "Q41X16_BLOCK", "Q41X16_ACT", 320, 36, 5, "q41"),
  ("dotQ8_0Q8_0X16A", "Q80X16_BLOCK", "Q80X16_ACT", 544, 34, 9, "q80"),
]
s = hdr
for name0, blk, act, wbb, xbb, pf, lp in types:
  for A, xs in acts.items():
    name = f"{name0}{A}"
    L = f"{lp}x16a{A}"
    s += f"// func {name}(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)\n"
    s += f"TEXT ·{name}(SB), NOSPLIT, $0-64\n"
    s += f"""	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31

{L}grp:
"""
    for a in range(A):
        s += f"\tVXORPS       Z{a}, Z{a}, Z{a}\n"
    s += f"""	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          {L}store

{L}blk:
"""
    for i in range(pf):
        s += f"\tPREFETCHT0   {4096+64*i}(SI)\n"
    s += f"\t{blk}\n"
    for a, x in enumerate(xs):
        if x.startswith("("):
            s += f"\tLEAQ         {x}, R9\n"
            xp = "R9"
        else:
            xp = x
        s += f"\t{act}({xp}, Z{a}, {4*a}, {4*(A+a)})\n"
    s += f"""	ADDQ         ${wbb}, SI
	ADDQ         ${xbb}, DI
	ADDQ         ${xbb}, DX
	ADDQ         ${8*A}, BX
	DECQ         CX
	JNZ          {L}blk

{L}store:
	LEAQ         (R12)(R13*4), R9
"""
    for a in range(A):
        s += f"\tVMOVUPS      Z{a}, {outs[a]}\n"
    s += f"""	ADDQ         $64, R12
	DECQ         R14
	JNZ          {L}grp
	VZEROUPPER
	RET

"""
open("dotx16_amd64.s", "w").write(s)
