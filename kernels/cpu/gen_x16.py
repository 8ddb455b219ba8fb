# Writes dotx16_amd64.s and dotx8_amd64.s, the grouped Q4_1 and Q8_0 kernels
# (x16pack.go) for AVX-512 VNNI and AVX2, one per weight type and number of
# activation rows: go generate ./kernels/cpu.
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
def prologue(name):
    """The kernel's header: its arguments into registers (dotx16_amd64.s's
    register list)."""
    return f"""// func {name}(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·{name}(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14
"""


def block_loop(P, blk, act, wbb, xbb, pf, A, part, acc):
    """One pass over a group's blocks for the activation rows in part (of
    A), acc(i) the i-th one's accumulator, pf lines prefetched a block
    (none: the pass reads L1), then their stores."""
    s = f"""	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          {P}store

{P}blk:
"""
    for i in range(pf):
        s += f"\tPREFETCHT0   {4096+64*i}(SI)\n"
    s += f"\t{blk}\n"
    for i, a in enumerate(part):
        x = acts[A][a]
        if x.startswith("("):
            s += f"\tLEAQ         {x}, R9\n"
            xp = "R9"
        else:
            xp = x
        s += f"\t{act}({xp}, {acc(i)}, {4*a}, {4*(A+a)})\n"
    s += f"""	ADDQ         ${wbb}, SI
	ADDQ         ${xbb}, DI
	ADDQ         ${xbb}, DX
	ADDQ         ${8*A}, BX
	DECQ         CX
	JNZ          {P}blk

{P}store:
	LEAQ         (R12)(R13*4), R9
"""
    for i, a in enumerate(part):
        s += f"\tVMOVUPS      {acc(i)}, {outs[a]}\n"
    return s


s = hdr
for name0, blk, act, wbb, xbb, pf, lp in types:
  for A in acts:
    L = f"{lp}x16a{A}"
    s += prologue(f"{name0}{A}")
    s += f"""	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31

{L}grp:
"""
    for a in range(A):
        s += f"\tVXORPS       Z{a}, Z{a}, Z{a}\n"
    s += block_loop(L, blk, act, wbb, xbb, pf, A, range(A), lambda i: f"Z{i}")
    s += f"""	ADDQ         $64, R12
	DECQ         R14
	JNZ          {L}grp
	VZEROUPPER
	RET

"""
open("dotx16_amd64.s", "w").write(s)

# The AVX2 kernels of matrices in groups of eight rows, dotx8_amd64.s.
x8hdr = r'''//go:build amd64 && !noasm

#include "textflag.h"

// The kernels of matrices in groups of eight rows (x16pack.go), for CPUs
// with AVX2 but not AVX-512 VNNI, for 1, 2, 3, 4 and 8 activation rows:
// Q4_1 × Q8_1 and Q8_0 × Q8_0. A ymm holds one block of eight weight
// rows, a lane a row: each quant vector holds bytes 4j..4j+3 of every
// row's quants, so it pairs with the activation block's dword j
// broadcast. AVX2 has no VPDPBUSD, so each pairing is a VPMADDUBSW
// (unsigned × signed bytes to int16 pairs):
//   Q4_1: levels 0..15 × quants ≤ 128 in magnitude make pairs of at most
//         3840, so the eight vectors' pairs add up in int16 (≤ 30720)
//         before one VPMADDWD widens them; then acc += float(Σ q·a)·(d·dx)
//         and acc += m·s;
//   Q8_0: the quants are stored signed, their magnitudes (VPABSB) the
//         unsigned operand and the activation takes their signs (VPSIGNB);
//         pairs reach 32512, so each vector's are widened and added in
//         int32; then acc += float(Σ q·a)·(d·dx).
// The integer sums are exact and the float steps are the sixteen-row
// AVX-512 kernels' in the same order, so a row's result is the same bits
// on either layout and for any number of activation rows (design
// invariant 6).
//
// Arguments as dotx16_amd64.s's, groups counting eight-row groups.
// Registers: SI the weight block, AX the group's first block, CX blocks
// left, DI (DX) activation row 0 (4) at the block, R10 xstride, R11
// 3·xstride, BX the block's scale table, R12 the group's outputs, R13
// dstride, R15 3·dstride, R14 groups left, R9 an activation row's or
// output's address; Y0..Y7 the block's unpacked quant vectors (Q8_0:
// their magnitudes), Y15 its eight d, Y14 its eight m, Y8..Y11 the
// accumulators of up to four activation rows (eight take two passes over
// the group, the second from L1), Y12 and Y13 scratch.

DATA x8nibbles<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA x8nibbles<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA x8nibbles<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA x8nibbles<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL x8nibbles<>(SB), RODATA|NOPTR, $32

DATA x8ones<>+0(SB)/8, $0x0001000100010001
DATA x8ones<>+8(SB)/8, $0x0001000100010001
DATA x8ones<>+16(SB)/8, $0x0001000100010001
DATA x8ones<>+24(SB)/8, $0x0001000100010001
GLOBL x8ones<>(SB), RODATA|NOPTR, $32

// Q41X8_BLOCK loads and unpacks the Q4_1 block at SI (160 bytes: d, m,
// four nibble vectors): low nibbles to Y0..Y3, high to Y4..Y7.
#define Q41X8_BLOCK \
	VCVTPH2PS (SI), Y15; \
	VCVTPH2PS 16(SI), Y14; \
	VMOVDQU   32(SI), Y0; \
	VMOVDQU   64(SI), Y1; \
	VMOVDQU   96(SI), Y2; \
	VMOVDQU   128(SI), Y3; \
	VPSRLW    $4, Y0, Y4; \
	VPSRLW    $4, Y1, Y5; \
	VPSRLW    $4, Y2, Y6; \
	VPSRLW    $4, Y3, Y7; \
	VPAND     x8nibbles<>(SB), Y0, Y0; \
	VPAND     x8nibbles<>(SB), Y1, Y1; \
	VPAND     x8nibbles<>(SB), Y2, Y2; \
	VPAND     x8nibbles<>(SB), Y3, Y3; \
	VPAND     x8nibbles<>(SB), Y4, Y4; \
	VPAND     x8nibbles<>(SB), Y5, Y5; \
	VPAND     x8nibbles<>(SB), Y6, Y6; \
	VPAND     x8nibbles<>(SB), Y7, Y7

// Q41X8_PAIR adds to the int16 pairs in Y13 those of vector v with the
// activation dword at off(xp).
#define Q41X8_PAIR(xp, off, v) \
	VPBROADCASTD off(xp), Y12; \
	VPMADDUBSW   Y12, v, Y12; \
	VPADDW       Y12, Y13, Y13

// Q41X8_ACT adds the block's products with the Q8_1 block at xp (f16 dx,
// f16 s, 32 int8) to acc; dxoff and soff are its dx and s in the table.
#define Q41X8_ACT(xp, acc, dxoff, soff) \
	VPBROADCASTD 4(xp), Y12; \
	VPMADDUBSW   Y12, Y0, Y13; \
	Q41X8_PAIR(xp, 8, Y1); \
	Q41X8_PAIR(xp, 12, Y2); \
	Q41X8_PAIR(xp, 16, Y3); \
	Q41X8_PAIR(xp, 20, Y4); \
	Q41X8_PAIR(xp, 24, Y5); \
	Q41X8_PAIR(xp, 28, Y6); \
	Q41X8_PAIR(xp, 32, Y7); \
	VPMADDWD     x8ones<>(SB), Y13, Y13; \
	VCVTDQ2PS    Y13, Y13; \
	VBROADCASTSS dxoff(BX), Y12; \
	VMULPS       Y15, Y12, Y12; \
	VFMADD231PS  Y12, Y13, acc; \
	VBROADCASTSS soff(BX), Y12; \
	VFMADD231PS  Y14, Y12, acc

// Q80X8_BLOCK loads the Q8_0 block at SI (272 bytes: d, eight quant
// vectors): d to Y15, the quants' magnitudes to Y0..Y7.
#define Q80X8_BLOCK \
	VCVTPH2PS (SI), Y15; \
	VPABSB    16(SI), Y0; \
	VPABSB    48(SI), Y1; \
	VPABSB    80(SI), Y2; \
	VPABSB    112(SI), Y3; \
	VPABSB    144(SI), Y4; \
	VPABSB    176(SI), Y5; \
	VPABSB    208(SI), Y6; \
	VPABSB    240(SI), Y7

// Q80X8_PAIR: Y12 = the int32 sums of the products of v (the
// magnitudes of the vector at woff(SI)) with the activation dword at
// off(xp), signed as the vector.
#define Q80X8_PAIR(xp, off, woff, v) \
	VPBROADCASTD off(xp), Y12; \
	VPSIGNB      woff(SI), Y12, Y12; \
	VPMADDUBSW   Y12, v, Y12; \
	VPMADDWD     x8ones<>(SB), Y12, Y12

// Q80X8_ACT adds the block's products with the Q8_0 block at xp (f16 dx,
// 32 int8) to acc; dxoff is its dx in the table.
#define Q80X8_ACT(xp, acc, dxoff, unused) \
	Q80X8_PAIR(xp, 2, 16, Y0); \
	VMOVDQU      Y12, Y13; \
	Q80X8_PAIR(xp, 6, 48, Y1); \
	VPADDD       Y12, Y13, Y13; \
	Q80X8_PAIR(xp, 10, 80, Y2); \
	VPADDD       Y12, Y13, Y13; \
	Q80X8_PAIR(xp, 14, 112, Y3); \
	VPADDD       Y12, Y13, Y13; \
	Q80X8_PAIR(xp, 18, 144, Y4); \
	VPADDD       Y12, Y13, Y13; \
	Q80X8_PAIR(xp, 22, 176, Y5); \
	VPADDD       Y12, Y13, Y13; \
	Q80X8_PAIR(xp, 26, 208, Y6); \
	VPADDD       Y12, Y13, Y13; \
	Q80X8_PAIR(xp, 30, 240, Y7); \
	VPADDD       Y12, Y13, Y13; \
	VCVTDQ2PS    Y13, Y13; \
	VBROADCASTSS dxoff(BX), Y12; \
	VMULPS       Y15, Y12, Y12; \
	VFMADD231PS  Y12, Y13, acc

'''
x8types = [
  ("dotQ4_1Q8_1X8A", "Q41X8_BLOCK", "Q41X8_ACT", 160, 36, 3, "q41"),
  ("dotQ8_0Q8_0X8A", "Q80X8_BLOCK", "Q80X8_ACT", 272, 34, 5, "q80"),
]
s = x8hdr
for name0, blk, act, wbb, xbb, pf, lp in x8types:
  for A in acts:
    L = f"{lp}x8a{A}"
    passes = [list(range(A))] if A <= 4 else [[0, 1, 2, 3], [4, 5, 6, 7]]
    s += prologue(f"{name0}{A}")
    s += f"""
{L}grp:
	MOVQ         SI, AX
"""
    for p, part in enumerate(passes):
        for i in range(len(part)):
            s += f"\tVXORPS       Y{8+i}, Y{8+i}, Y{8+i}\n"
        s += "\tMOVQ         AX, SI\n"
        s += block_loop(f"{L}p{p}", blk, act, wbb, xbb, pf if p == 0 else 0, A, part, lambda i: f"Y{8+i}")
    s += f"""	ADDQ         $32, R12
	DECQ         R14
	JNZ          {L}grp
	VZEROUPPER
	RET

"""
open("dotx8_amd64.s", "w").write(s)
