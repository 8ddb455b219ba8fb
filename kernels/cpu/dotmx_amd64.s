//go:build amd64 && !noasm

#include "dotq_amd64.h"

// MXFP4 rows against a Q8_0 activation row, in dotq_amd64.s's skeleton:
// four rows through the block loop together while four remain, then two,
// then one alone, each with the same instructions, so a result depends
// neither on the row count nor on tiling. Per block [e][qs 16]: the nibbles index ggml's doubled E2M1
// values (kvalues_mxfp4) with one VPSHUFB, then the signed dot as Q4_0's;
// the scale is 2^(e−128)·dx.
//
// Registers: SI pair base, R8 wstride, R9 x, R10 nb, R11 dst, R12 rows left,
// R13 zero; AX/BX the pair's block pointers, DI x's, CX blocks left, DX the
// exponent; Y0/Y1 the accumulators (Y7/Y14 too for four rows), X2 x's scale, Y5 x's 32 quants, Y8 the
// values table in both lanes, Y9 0x0f bytes, Y10 int16 ones.

// The sixteen codes' values, doubled (0, ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6 ×2).
DATA kvaluesMXFP4<>+0(SB)/8, $0x0c08060403020100
DATA kvaluesMXFP4<>+8(SB)/8, $0xf4f8fafcfdfeff00
DATA kvaluesMXFP4<>+16(SB)/8, $0x0c08060403020100
DATA kvaluesMXFP4<>+24(SB)/8, $0xf4f8fafcfdfeff00
GLOBL kvaluesMXFP4<>(SB), RODATA|NOPTR, $32

// SCALE_E8M0 puts 2^(e−128)·dx (e the byte at (wp), dx in X2) in every lane
// of tY: the float with exponent field e − 1. e = 0 and 1, whose halves are
// subnormal (2^−128, 2^−127), give 0 here; the quantizer writes e = 0 only
// for a block of zeros.
#define SCALE_E8M0(wp, tX, tY) \
	MOVBLZX      (wp), DX; \
	SUBL         $1, DX; \
	CMOVLLT      R13, DX; \
	SHLL         $23, DX; \
	VMOVD        DX, tX; \
	VMULSS       tX, X2, tX; \
	VBROADCASTSS tX, tY

#define MXROW(wp, accY, tX, tY, uX, uY, vX, vY) \
	SCALE_E8M0(wp, tX, tY); \
	NIBBLES(wp, 1, uX, uY, vX); \
	VPSHUFB uY, Y8, uY; \
	SIGNED_DOT(accY, tY, uY, vY)

// The same with the exponent and quants at memory operands e and q, so the
// four-row loop can address rows r+1 and r+3 as (AX)(R8*1) and (BX)(R8*1).
#define SCALE_AT(e, tX, tY) \
	MOVBLZX      e, DX; \
	SUBL         $1, DX; \
	CMOVLLT      R13, DX; \
	SHLL         $23, DX; \
	VMOVD        DX, tX; \
	VMULSS       tX, X2, tX; \
	VBROADCASTSS tX, tY

#define MXROW_AT(e, q, accY, tX, tY, uX, uY, vX, vY) \
	SCALE_AT(e, tX, tY); \
	VMOVDQU     q, uX; \
	VPSRLW      $4, uX, vX; \
	VINSERTI128 $1, vX, uY, uY; \
	VPAND       Y9, uY, uY; \
	VPSHUFB     uY, Y8, uY; \
	SIGNED_DOT(accY, tY, uY, vY)

// func dotMXFP4Q8_0Rows(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)
TEXT ·dotMXFP4Q8_0Rows(SB), NOSPLIT, $0-48
	MOVQ    w+0(FP), SI
	MOVQ    wstride+8(FP), R8
	MOVQ    x+16(FP), R9
	MOVQ    nb+24(FP), R10
	MOVQ    dst+32(FP), R11
	MOVQ    rows+40(FP), R12
	XORQ    R13, R13
	NIBBLE_MASK(Y9, X9)
	ONES_I16(Y10, X10)
	VMOVDQU kvaluesMXFP4<>(SB), Y8

	// Four rows at a time (AX rows r and r+1, BX rows r+2 and r+3): the x
	// block's loads and scale shared by four rows, and the four horizontal
	// sums done together. Each row's instructions are MXROW's, and the
	// transposed sums add the same lanes in the same order as HSUM
	// ((l+h) pairwise, then the pairs), so a row gets the pair loop's bits.
mxquad:
	CMPQ R12, $4
	JLT  mxpair
	MOVQ SI, AX
	LEAQ (SI)(R8*2), BX
	MOVQ R9, DI
	MOVQ R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y7, Y7, Y7
	VXORPS Y14, Y14, Y14

mxquadblk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (BX)(R8*8)
	VMOVD      (DI), X2
	VCVTPH2PS  X2, X2
	VMOVDQU    2(DI), Y5
	MXROW_AT((AX), 1(AX), Y0, X3, Y3, X4, Y4, X6, Y6)
	MXROW_AT((AX)(R8*1), 1(AX)(R8*1), Y1, X11, Y11, X12, Y12, X13, Y13)
	MXROW_AT((BX), 1(BX), Y7, X3, Y3, X4, Y4, X6, Y6)
	MXROW_AT((BX)(R8*1), 1(BX)(R8*1), Y14, X11, Y11, X12, Y12, X13, Y13)
	ADDQ       $17, AX
	ADDQ       $17, BX
	ADDQ       $34, DI
	DECQ       CX
	JNZ        mxquadblk
	VPERM2F128 $0x20, Y1, Y0, Y3   // [r lo, r+1 lo]
	VPERM2F128 $0x31, Y1, Y0, Y4   // [r hi, r+1 hi]
	VADDPS     Y4, Y3, Y3
	VPERM2F128 $0x20, Y14, Y7, Y6  // [r+2 lo, r+3 lo]
	VPERM2F128 $0x31, Y14, Y7, Y11 // [r+2 hi, r+3 hi]
	VADDPS     Y11, Y6, Y6
	VHADDPS    Y6, Y3, Y12         // [r, r, r+2, r+2 | r+1, r+1, r+3, r+3]
	VHADDPS    Y12, Y12, Y12       // [r, r+2, … | r+1, r+3, …]
	VMOVSS     X12, (R11)
	VEXTRACTPS $1, X12, 8(R11)
	VEXTRACTF128 $1, Y12, X12
	VMOVSS     X12, 4(R11)
	VEXTRACTPS $1, X12, 12(R11)
	ADDQ       $16, R11
	LEAQ       (SI)(R8*4), SI
	SUBQ       $4, R12
	JMP        mxquad

mxpair:
	CMPQ   R12, $2
	JLT    mxsingle
	MOVQ   SI, AX
	LEAQ   (SI)(R8*1), BX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

mxpairblk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (BX)(R8*8)
	VMOVD      (DI), X2
	VCVTPH2PS  X2, X2
	VMOVDQU    2(DI), Y5
	MXROW(AX, Y0, X3, Y3, X4, Y4, X6, Y6)
	MXROW(BX, Y1, X11, Y11, X12, Y12, X13, Y13)
	ADDQ       $17, AX
	ADDQ       $17, BX
	ADDQ       $34, DI
	DECQ       CX
	JNZ        mxpairblk
	HSUM(Y0, X0, X3)
	VMOVSS     X0, (R11)
	HSUM(Y1, X1, X3)
	VMOVSS     X1, 4(R11)
	ADDQ       $8, R11
	LEAQ       (SI)(R8*2), SI
	SUBQ       $2, R12
	JMP        mxpair

mxsingle:
	TESTQ  R12, R12
	JEQ    mxdone
	MOVQ   SI, AX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0

mxsingleblk:
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   2(DI), Y5
	MXROW(AX, Y0, X3, Y3, X4, Y4, X6, Y6)
	ADDQ      $17, AX
	ADDQ      $34, DI
	DECQ      CX
	JNZ       mxsingleblk
	HSUM(Y0, X0, X3)
	VMOVSS    X0, (R11)

mxdone:
	VZEROUPPER
	RET

// dotMXFP4Q8_0RowsVNNI is dotMXFP4Q8_0Rows on AVX-512 VNNI (256-bit forms,
// so no 512-bit frequency license): the nibbles come from one broadcast
// load shifted per lane (VPSRLVD by Y10: 0 in the low lane, 4 in the high),
// not a load, a shift and a lane insert; and VPDPBUSD sums the four
// products per dword that VPMADDUBSW then VPMADDWD summed. The integer sums
// are exact either way and every float operation is the AVX2 kernel's, so
// a row gets that kernel's bits (TestMXFP4RowsVNNI). Y10 holds the shifts,
// Y15 a row block's integer sums.

DATA mxNibbleShift<>+0(SB)/8, $0
DATA mxNibbleShift<>+8(SB)/8, $0
DATA mxNibbleShift<>+16(SB)/8, $0x0000000400000004
DATA mxNibbleShift<>+24(SB)/8, $0x0000000400000004
GLOBL mxNibbleShift<>(SB), RODATA|NOPTR, $32

#define NIBBLES_V(q, uY) \
	VBROADCASTI128 q, uY; \
	VPSRLVD        Y10, uY, uY; \
	VPAND          Y9, uY, uY

#define SIGNED_DOT_V(accY, tY, uY, vY) \
	VPSIGNB     uY, uY, vY; \
	VPSIGNB     uY, Y5, uY; \
	VPXOR       Y15, Y15, Y15; \
	VPDPBUSD    uY, vY, Y15; \
	VCVTDQ2PS   Y15, Y15; \
	VFMADD231PS Y15, tY, accY

#define MXROWV(wp, accY, tX, tY, uX, uY, vX, vY) \
	SCALE_E8M0(wp, tX, tY); \
	NIBBLES_V(1(wp), uY); \
	VPSHUFB uY, Y8, uY; \
	SIGNED_DOT_V(accY, tY, uY, vY)

#define MXROW_ATV(e, q, accY, tX, tY, uX, uY, vX, vY) \
	SCALE_AT(e, tX, tY); \
	NIBBLES_V(q, uY); \
	VPSHUFB uY, Y8, uY; \
	SIGNED_DOT_V(accY, tY, uY, vY)

// func dotMXFP4Q8_0RowsVNNI(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)
TEXT ·dotMXFP4Q8_0RowsVNNI(SB), NOSPLIT, $0-48
	MOVQ    w+0(FP), SI
	MOVQ    wstride+8(FP), R8
	MOVQ    x+16(FP), R9
	MOVQ    nb+24(FP), R10
	MOVQ    dst+32(FP), R11
	MOVQ    rows+40(FP), R12
	XORQ    R13, R13
	NIBBLE_MASK(Y9, X9)
	VMOVDQU mxNibbleShift<>(SB), Y10
	VMOVDQU kvaluesMXFP4<>(SB), Y8

	// Four rows at a time (AX rows r and r+1, BX rows r+2 and r+3): the x
	// block's loads and scale shared by four rows, and the four horizontal
	// sums done together. Each row's instructions are MXROW's, and the
	// transposed sums add the same lanes in the same order as HSUM
	// ((l+h) pairwise, then the pairs), so a row gets the pair loop's bits.
vmxquad:
	CMPQ R12, $4
	JLT  vmxpair
	MOVQ SI, AX
	LEAQ (SI)(R8*2), BX
	MOVQ R9, DI
	MOVQ R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y7, Y7, Y7
	VXORPS Y14, Y14, Y14

vmxquadblk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (BX)(R8*8)
	VMOVD      (DI), X2
	VCVTPH2PS  X2, X2
	VMOVDQU    2(DI), Y5
	MXROW_ATV((AX), 1(AX), Y0, X3, Y3, X4, Y4, X6, Y6)
	MXROW_ATV((AX)(R8*1), 1(AX)(R8*1), Y1, X11, Y11, X12, Y12, X13, Y13)
	MXROW_ATV((BX), 1(BX), Y7, X3, Y3, X4, Y4, X6, Y6)
	MXROW_ATV((BX)(R8*1), 1(BX)(R8*1), Y14, X11, Y11, X12, Y12, X13, Y13)
	ADDQ       $17, AX
	ADDQ       $17, BX
	ADDQ       $34, DI
	DECQ       CX
	JNZ        vmxquadblk
	VPERM2F128 $0x20, Y1, Y0, Y3   // [r lo, r+1 lo]
	VPERM2F128 $0x31, Y1, Y0, Y4   // [r hi, r+1 hi]
	VADDPS     Y4, Y3, Y3
	VPERM2F128 $0x20, Y14, Y7, Y6  // [r+2 lo, r+3 lo]
	VPERM2F128 $0x31, Y14, Y7, Y11 // [r+2 hi, r+3 hi]
	VADDPS     Y11, Y6, Y6
	VHADDPS    Y6, Y3, Y12         // [r, r, r+2, r+2 | r+1, r+1, r+3, r+3]
	VHADDPS    Y12, Y12, Y12       // [r, r+2, … | r+1, r+3, …]
	VMOVSS     X12, (R11)
	VEXTRACTPS $1, X12, 8(R11)
	VEXTRACTF128 $1, Y12, X12
	VMOVSS     X12, 4(R11)
	VEXTRACTPS $1, X12, 12(R11)
	ADDQ       $16, R11
	LEAQ       (SI)(R8*4), SI
	SUBQ       $4, R12
	JMP        vmxquad

vmxpair:
	CMPQ   R12, $2
	JLT    vmxsingle
	MOVQ   SI, AX
	LEAQ   (SI)(R8*1), BX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

vmxpairblk:
	PREFETCHT0 (AX)(R8*8)
	PREFETCHT0 (BX)(R8*8)
	VMOVD      (DI), X2
	VCVTPH2PS  X2, X2
	VMOVDQU    2(DI), Y5
	MXROWV(AX, Y0, X3, Y3, X4, Y4, X6, Y6)
	MXROWV(BX, Y1, X11, Y11, X12, Y12, X13, Y13)
	ADDQ       $17, AX
	ADDQ       $17, BX
	ADDQ       $34, DI
	DECQ       CX
	JNZ        vmxpairblk
	HSUM(Y0, X0, X3)
	VMOVSS     X0, (R11)
	HSUM(Y1, X1, X3)
	VMOVSS     X1, 4(R11)
	ADDQ       $8, R11
	LEAQ       (SI)(R8*2), SI
	SUBQ       $2, R12
	JMP        vmxpair

vmxsingle:
	TESTQ  R12, R12
	JEQ    vmxdone
	MOVQ   SI, AX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0

vmxsingleblk:
	VMOVD     (DI), X2
	VCVTPH2PS X2, X2
	VMOVDQU   2(DI), Y5
	MXROWV(AX, Y0, X3, Y3, X4, Y4, X6, Y6)
	ADDQ      $17, AX
	ADDQ      $34, DI
	DECQ      CX
	JNZ       vmxsingleblk
	HSUM(Y0, X0, X3)
	VMOVSS    X0, (R11)

vmxdone:
	VZEROUPPER
	RET
