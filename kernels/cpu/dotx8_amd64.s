//go:build amd64 && !noasm

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

// func dotQ4_1Q8_1X8A1(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ4_1Q8_1X8A1(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14

q41x8a1grp:
	MOVQ         SI, AX
	VXORPS       Y8, Y8, Y8
	MOVQ         AX, SI
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q41x8a1p0store

q41x8a1p0blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	Q41X8_BLOCK
	Q41X8_ACT(DI, Y8, 0, 4)
	ADDQ         $160, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $8, BX
	DECQ         CX
	JNZ          q41x8a1p0blk

q41x8a1p0store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Y8, (R12)
	ADDQ         $32, R12
	DECQ         R14
	JNZ          q41x8a1grp
	VZEROUPPER
	RET

// func dotQ4_1Q8_1X8A2(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ4_1Q8_1X8A2(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14

q41x8a2grp:
	MOVQ         SI, AX
	VXORPS       Y8, Y8, Y8
	VXORPS       Y9, Y9, Y9
	MOVQ         AX, SI
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q41x8a2p0store

q41x8a2p0blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	Q41X8_BLOCK
	Q41X8_ACT(DI, Y8, 0, 8)
	LEAQ         (DI)(R10*1), R9
	Q41X8_ACT(R9, Y9, 4, 12)
	ADDQ         $160, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $16, BX
	DECQ         CX
	JNZ          q41x8a2p0blk

q41x8a2p0store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Y8, (R12)
	VMOVUPS      Y9, (R12)(R13*1)
	ADDQ         $32, R12
	DECQ         R14
	JNZ          q41x8a2grp
	VZEROUPPER
	RET

// func dotQ4_1Q8_1X8A3(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ4_1Q8_1X8A3(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14

q41x8a3grp:
	MOVQ         SI, AX
	VXORPS       Y8, Y8, Y8
	VXORPS       Y9, Y9, Y9
	VXORPS       Y10, Y10, Y10
	MOVQ         AX, SI
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q41x8a3p0store

q41x8a3p0blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	Q41X8_BLOCK
	Q41X8_ACT(DI, Y8, 0, 12)
	LEAQ         (DI)(R10*1), R9
	Q41X8_ACT(R9, Y9, 4, 16)
	LEAQ         (DI)(R10*2), R9
	Q41X8_ACT(R9, Y10, 8, 20)
	ADDQ         $160, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $24, BX
	DECQ         CX
	JNZ          q41x8a3p0blk

q41x8a3p0store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Y8, (R12)
	VMOVUPS      Y9, (R12)(R13*1)
	VMOVUPS      Y10, (R12)(R13*2)
	ADDQ         $32, R12
	DECQ         R14
	JNZ          q41x8a3grp
	VZEROUPPER
	RET

// func dotQ4_1Q8_1X8A4(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ4_1Q8_1X8A4(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14

q41x8a4grp:
	MOVQ         SI, AX
	VXORPS       Y8, Y8, Y8
	VXORPS       Y9, Y9, Y9
	VXORPS       Y10, Y10, Y10
	VXORPS       Y11, Y11, Y11
	MOVQ         AX, SI
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q41x8a4p0store

q41x8a4p0blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	Q41X8_BLOCK
	Q41X8_ACT(DI, Y8, 0, 16)
	LEAQ         (DI)(R10*1), R9
	Q41X8_ACT(R9, Y9, 4, 20)
	LEAQ         (DI)(R10*2), R9
	Q41X8_ACT(R9, Y10, 8, 24)
	LEAQ         (DI)(R11*1), R9
	Q41X8_ACT(R9, Y11, 12, 28)
	ADDQ         $160, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $32, BX
	DECQ         CX
	JNZ          q41x8a4p0blk

q41x8a4p0store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Y8, (R12)
	VMOVUPS      Y9, (R12)(R13*1)
	VMOVUPS      Y10, (R12)(R13*2)
	VMOVUPS      Y11, (R12)(R15*1)
	ADDQ         $32, R12
	DECQ         R14
	JNZ          q41x8a4grp
	VZEROUPPER
	RET

// func dotQ4_1Q8_1X8A8(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ4_1Q8_1X8A8(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14

q41x8a8grp:
	MOVQ         SI, AX
	VXORPS       Y8, Y8, Y8
	VXORPS       Y9, Y9, Y9
	VXORPS       Y10, Y10, Y10
	VXORPS       Y11, Y11, Y11
	MOVQ         AX, SI
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q41x8a8p0store

q41x8a8p0blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	Q41X8_BLOCK
	Q41X8_ACT(DI, Y8, 0, 32)
	LEAQ         (DI)(R10*1), R9
	Q41X8_ACT(R9, Y9, 4, 36)
	LEAQ         (DI)(R10*2), R9
	Q41X8_ACT(R9, Y10, 8, 40)
	LEAQ         (DI)(R11*1), R9
	Q41X8_ACT(R9, Y11, 12, 44)
	ADDQ         $160, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $64, BX
	DECQ         CX
	JNZ          q41x8a8p0blk

q41x8a8p0store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Y8, (R12)
	VMOVUPS      Y9, (R12)(R13*1)
	VMOVUPS      Y10, (R12)(R13*2)
	VMOVUPS      Y11, (R12)(R15*1)
	VXORPS       Y8, Y8, Y8
	VXORPS       Y9, Y9, Y9
	VXORPS       Y10, Y10, Y10
	VXORPS       Y11, Y11, Y11
	MOVQ         AX, SI
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q41x8a8p1store

q41x8a8p1blk:
	Q41X8_BLOCK
	Q41X8_ACT(DX, Y8, 16, 48)
	LEAQ         (DX)(R10*1), R9
	Q41X8_ACT(R9, Y9, 20, 52)
	LEAQ         (DX)(R10*2), R9
	Q41X8_ACT(R9, Y10, 24, 56)
	LEAQ         (DX)(R11*1), R9
	Q41X8_ACT(R9, Y11, 28, 60)
	ADDQ         $160, SI
	ADDQ         $36, DI
	ADDQ         $36, DX
	ADDQ         $64, BX
	DECQ         CX
	JNZ          q41x8a8p1blk

q41x8a8p1store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Y8, (R9)
	VMOVUPS      Y9, (R9)(R13*1)
	VMOVUPS      Y10, (R9)(R13*2)
	VMOVUPS      Y11, (R9)(R15*1)
	ADDQ         $32, R12
	DECQ         R14
	JNZ          q41x8a8grp
	VZEROUPPER
	RET

// func dotQ8_0Q8_0X8A1(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ8_0Q8_0X8A1(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14

q80x8a1grp:
	MOVQ         SI, AX
	VXORPS       Y8, Y8, Y8
	MOVQ         AX, SI
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q80x8a1p0store

q80x8a1p0blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	Q80X8_BLOCK
	Q80X8_ACT(DI, Y8, 0, 4)
	ADDQ         $272, SI
	ADDQ         $34, DI
	ADDQ         $34, DX
	ADDQ         $8, BX
	DECQ         CX
	JNZ          q80x8a1p0blk

q80x8a1p0store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Y8, (R12)
	ADDQ         $32, R12
	DECQ         R14
	JNZ          q80x8a1grp
	VZEROUPPER
	RET

// func dotQ8_0Q8_0X8A2(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ8_0Q8_0X8A2(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14

q80x8a2grp:
	MOVQ         SI, AX
	VXORPS       Y8, Y8, Y8
	VXORPS       Y9, Y9, Y9
	MOVQ         AX, SI
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q80x8a2p0store

q80x8a2p0blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	Q80X8_BLOCK
	Q80X8_ACT(DI, Y8, 0, 8)
	LEAQ         (DI)(R10*1), R9
	Q80X8_ACT(R9, Y9, 4, 12)
	ADDQ         $272, SI
	ADDQ         $34, DI
	ADDQ         $34, DX
	ADDQ         $16, BX
	DECQ         CX
	JNZ          q80x8a2p0blk

q80x8a2p0store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Y8, (R12)
	VMOVUPS      Y9, (R12)(R13*1)
	ADDQ         $32, R12
	DECQ         R14
	JNZ          q80x8a2grp
	VZEROUPPER
	RET

// func dotQ8_0Q8_0X8A3(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ8_0Q8_0X8A3(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14

q80x8a3grp:
	MOVQ         SI, AX
	VXORPS       Y8, Y8, Y8
	VXORPS       Y9, Y9, Y9
	VXORPS       Y10, Y10, Y10
	MOVQ         AX, SI
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q80x8a3p0store

q80x8a3p0blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	Q80X8_BLOCK
	Q80X8_ACT(DI, Y8, 0, 12)
	LEAQ         (DI)(R10*1), R9
	Q80X8_ACT(R9, Y9, 4, 16)
	LEAQ         (DI)(R10*2), R9
	Q80X8_ACT(R9, Y10, 8, 20)
	ADDQ         $272, SI
	ADDQ         $34, DI
	ADDQ         $34, DX
	ADDQ         $24, BX
	DECQ         CX
	JNZ          q80x8a3p0blk

q80x8a3p0store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Y8, (R12)
	VMOVUPS      Y9, (R12)(R13*1)
	VMOVUPS      Y10, (R12)(R13*2)
	ADDQ         $32, R12
	DECQ         R14
	JNZ          q80x8a3grp
	VZEROUPPER
	RET

// func dotQ8_0Q8_0X8A4(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ8_0Q8_0X8A4(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14

q80x8a4grp:
	MOVQ         SI, AX
	VXORPS       Y8, Y8, Y8
	VXORPS       Y9, Y9, Y9
	VXORPS       Y10, Y10, Y10
	VXORPS       Y11, Y11, Y11
	MOVQ         AX, SI
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q80x8a4p0store

q80x8a4p0blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	Q80X8_BLOCK
	Q80X8_ACT(DI, Y8, 0, 16)
	LEAQ         (DI)(R10*1), R9
	Q80X8_ACT(R9, Y9, 4, 20)
	LEAQ         (DI)(R10*2), R9
	Q80X8_ACT(R9, Y10, 8, 24)
	LEAQ         (DI)(R11*1), R9
	Q80X8_ACT(R9, Y11, 12, 28)
	ADDQ         $272, SI
	ADDQ         $34, DI
	ADDQ         $34, DX
	ADDQ         $32, BX
	DECQ         CX
	JNZ          q80x8a4p0blk

q80x8a4p0store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Y8, (R12)
	VMOVUPS      Y9, (R12)(R13*1)
	VMOVUPS      Y10, (R12)(R13*2)
	VMOVUPS      Y11, (R12)(R15*1)
	ADDQ         $32, R12
	DECQ         R14
	JNZ          q80x8a4grp
	VZEROUPPER
	RET

// func dotQ8_0Q8_0X8A8(w *byte, nb int, x *byte, xstride int, sc *float32, dst *float32, dstride int, groups int)
TEXT ·dotQ8_0Q8_0X8A8(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), R8
	MOVQ         xstride+24(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         dst+40(FP), R12
	MOVQ         dstride+48(FP), R13
	LEAQ         (R13)(R13*2), R15
	MOVQ         groups+56(FP), R14

q80x8a8grp:
	MOVQ         SI, AX
	VXORPS       Y8, Y8, Y8
	VXORPS       Y9, Y9, Y9
	VXORPS       Y10, Y10, Y10
	VXORPS       Y11, Y11, Y11
	MOVQ         AX, SI
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q80x8a8p0store

q80x8a8p0blk:
	PREFETCHT0   4096(SI)
	PREFETCHT0   4160(SI)
	PREFETCHT0   4224(SI)
	PREFETCHT0   4288(SI)
	PREFETCHT0   4352(SI)
	Q80X8_BLOCK
	Q80X8_ACT(DI, Y8, 0, 32)
	LEAQ         (DI)(R10*1), R9
	Q80X8_ACT(R9, Y9, 4, 36)
	LEAQ         (DI)(R10*2), R9
	Q80X8_ACT(R9, Y10, 8, 40)
	LEAQ         (DI)(R11*1), R9
	Q80X8_ACT(R9, Y11, 12, 44)
	ADDQ         $272, SI
	ADDQ         $34, DI
	ADDQ         $34, DX
	ADDQ         $64, BX
	DECQ         CX
	JNZ          q80x8a8p0blk

q80x8a8p0store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Y8, (R12)
	VMOVUPS      Y9, (R12)(R13*1)
	VMOVUPS      Y10, (R12)(R13*2)
	VMOVUPS      Y11, (R12)(R15*1)
	VXORPS       Y8, Y8, Y8
	VXORPS       Y9, Y9, Y9
	VXORPS       Y10, Y10, Y10
	VXORPS       Y11, Y11, Y11
	MOVQ         AX, SI
	MOVQ         x+16(FP), DI
	LEAQ         (DI)(R10*4), DX
	MOVQ         sc+32(FP), BX
	MOVQ         R8, CX
	TESTQ        CX, CX
	JEQ          q80x8a8p1store

q80x8a8p1blk:
	Q80X8_BLOCK
	Q80X8_ACT(DX, Y8, 16, 48)
	LEAQ         (DX)(R10*1), R9
	Q80X8_ACT(R9, Y9, 20, 52)
	LEAQ         (DX)(R10*2), R9
	Q80X8_ACT(R9, Y10, 24, 56)
	LEAQ         (DX)(R11*1), R9
	Q80X8_ACT(R9, Y11, 28, 60)
	ADDQ         $272, SI
	ADDQ         $34, DI
	ADDQ         $34, DX
	ADDQ         $64, BX
	DECQ         CX
	JNZ          q80x8a8p1blk

q80x8a8p1store:
	LEAQ         (R12)(R13*4), R9
	VMOVUPS      Y8, (R9)
	VMOVUPS      Y9, (R9)(R13*1)
	VMOVUPS      Y10, (R9)(R13*2)
	VMOVUPS      Y11, (R9)(R15*1)
	ADDQ         $32, R12
	DECQ         R14
	JNZ          q80x8a8grp
	VZEROUPPER
	RET

