// Shared by the multi-activation kernels over groups of eight weight rows
// (dotQ4_1Q8_1Rows8x2/8x3VNNI, dotQ8_0Q8_0Rows8x2/8x3VNNI), whose
// signature is (w *byte, wstride int, x *byte, xstride int, nb int,
// dst *float32, dstride int, groups int) and whose registers are the
// one-row group kernels': SI group base, R8 wstride, R9 x, BX xstride,
// R10 nb, R11 dst, R15 dstride in bytes, R12 groups left, R14 3·R8; in a
// group AX rows 0..3's block, R13 rows 4..7's, DX the next group's bytes,
// DI the activations' block, CX blocks left.

// G8_ARGS loads the arguments, K1 = kHigh (the upper half of a pair's
// zmm) and K2..K4 = dwords 1..3 (SCALES4's merges). It comes after the
// constants' loads, which may clobber R15 when dynamically linking.
#define G8_ARGS(kHigh) \
	MOVQ  w+0(FP), SI; \
	MOVQ  wstride+8(FP), R8; \
	MOVQ  x+16(FP), R9; \
	MOVQ  xstride+24(FP), BX; \
	MOVQ  nb+32(FP), R10; \
	MOVQ  dst+40(FP), R11; \
	MOVQ  dstride+48(FP), R15; \
	SHLQ  $2, R15; \
	MOVQ  groups+56(FP), R12; \
	MOVL  kHigh, AX; \
	KMOVW AX, K1; \
	MOVL  $2, AX; \
	KMOVW AX, K2; \
	MOVL  $4, AX; \
	KMOVW AX, K3; \
	MOVL  $8, AX; \
	KMOVW AX, K4; \
	LEAQ  (R8)(R8*2), R14

// G8_GROUP points a group's registers at its first block.
#define G8_GROUP \
	MOVQ SI, AX; \
	LEAQ (SI)(R8*4), R13; \
	LEAQ (SI)(R8*8), DX; \
	MOVQ R9, DI; \
	MOVQ R10, CX

// G8_NEXT steps to the next group of eight rows and loops to label.
#define G8_NEXT(label) \
	ADDQ $32, R11; \
	LEAQ (SI)(R8*8), SI; \
	DECQ R12; \
	JNZ  label

#define ZERO4(a, b, c, d) \
	VPXORD a, a, a; \
	VPXORD b, b, b; \
	VPXORD c, c, c; \
	VPXORD d, d, d

// MOVE4 moves an activation's four accumulators to Z0..Z3, where HSUM's
// VEX forms can reach them.
#define MOVE4(a, b, c, d) \
	VMOVAPS a, Z0; \
	VMOVAPS b, Z1; \
	VMOVAPS c, Z2; \
	VMOVAPS d, Z3

// G8_STEP steps a group's registers to the next block (wbb weight bytes,
// 8·wbb the next group's, xbb activation bytes) and loops to label.
#define G8_STEP(wbb, wbb8, xbb, label) \
	ADDQ wbb, AX; \
	ADDQ wbb, R13; \
	ADDQ wbb8, DX; \
	ADDQ xbb, DI; \
	DECQ CX; \
	JNZ  label

// G8_PROD: one activation's part of a pair, c holding its start (zero, or
// Q8_0's −128·Σx): acc += q's scales picked by idx times the four-byte sums
// of its quants x with the pair's levels in Z23 (t is scratch).
#define G8_PROD(x, q, idx, acc, c, t) \
	VPDPBUSD    x, Z23, c; \
	VCVTDQ2PS   c, c; \
	VPERMPS     q, idx, t; \
	VFMADD231PS t, c, acc

// G8_SCALES converts the group's eight [d, m] (Q4_1) or d (Q8_0) words of
// the block into fZ, lane 2k row k's d (the file's SCALES4 gathers them;
// X6, X20, X23 and X28 are scratch).
#define G8_SCALES(fX, fY, fZ) \
	SCALES4((AX), (AX)(R8*1), (AX)(R8*2), (AX)(R14*1), fX, X23, X28, X20); \
	SCALES4((R13), (R13)(R8*1), (R13)(R8*2), (R13)(R14*1), X6, X23, X28, X20); \
	VINSERTI32X4 $1, X6, fY, fY; \
	VCVTPH2PS    fY, fZ
