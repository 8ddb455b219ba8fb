//go:build amd64 && !noasm

#include "textflag.h"
#include "tilestore_amd64.h"

// vnniDotTilesMin: amx.go's amxCall (the hasMin formats: Q4_1, Q5_1, Q4_K,
// Q5_K, whose levels are unsigned, blockK 32) with AVX-512 VNNI in place of
// the AMX tiles, for CPUs without AMX. The B tiles (activations in the
// VNNI pair layout, a lane per activation row) are already what VPDPBUSD
// takes as its signed operand: per block, its 8 vectors are loaded once and
// each weight row's 4-level groups are broadcast as the unsigned operand,
// so one VPDPBUSD does a block's 64 products of a weight row and 16
// activation rows. The int32 sums are the AMX tile's C row, and they are
// scaled into Z0..Z15 by the very instructions of amx_amd64.s's ROWM, in
// the same block order, so the outputs are the AMX path's bits.
//
// Registers: Z0..Z15 f32 accumulators (weight row m, lane = activation
// row), Z20/Z21 the block's activation scales and sums, Z22..Z29 the
// block's B tile, Z18/Z19 broadcasts, Z30/Z31 int32 sums (alternating, so
// neighbouring rows' chains overlap), Z16/Z17 scaling temporaries.

// MROW computes weight row m's block sums (its levels at AX) into acc32
// and scales them into acc.
#define MROW(m, acc32, acc) \
	VPBROADCASTD 0(AX), Z18; \
	VPXORD acc32, acc32, acc32; \
	VPBROADCASTD 4(AX), Z19; \
	VPDPBUSD Z22, Z18, acc32; \
	VPBROADCASTD 8(AX), Z18; \
	VPDPBUSD Z23, Z19, acc32; \
	VPBROADCASTD 12(AX), Z19; \
	VPDPBUSD Z24, Z18, acc32; \
	VPBROADCASTD 16(AX), Z18; \
	VPDPBUSD Z25, Z19, acc32; \
	VPBROADCASTD 20(AX), Z19; \
	VPDPBUSD Z26, Z18, acc32; \
	VPBROADCASTD 24(AX), Z18; \
	VPDPBUSD Z27, Z19, acc32; \
	VPBROADCASTD 28(AX), Z19; \
	VPDPBUSD Z28, Z18, acc32; \
	VPDPBUSD Z29, Z19, acc32; \
	ADDQ DX, AX; \
	VCVTDQ2PS acc32, Z16; \
	VMULPS.BCST (4*(m))(R13), Z20, Z17; \
	VFMADD231PS Z16, Z17, acc; \
	VFMADD231PS.BCST (64+4*(m))(R13), Z21, acc

// VNNI_TILE_ENTRY loads an amxCall's fields (c at 0(FP)) as every VNNI
// tile kernel keeps them and starts the first group (group:) with its
// accumulators cleared and its block pointers at block 0: SI the weight
// levels, DI the activation tile, R13 the weight scales, R14 the
// activations' sums, R15 the blocks left.
#define VNNI_TILE_ENTRY \
	MOVQ c+0(FP), R8; \
	MOVQ 128(R8), AX; \
	KMOVW AX, K1; \
	MOVQ 16(R8), DX; \
	MOVQ 88(R8), R9; \
	MOVQ 40(R8), R10; \
	MOVQ 64(R8), R11; \
	MOVQ 96(R8), R12; \
group: \
	TILE_ZERO_ACC; \
	MOVQ 8(R8), SI; \
	MOVQ R10, DI; \
	MOVQ 32(R8), R13; \
	MOVQ R11, R14; \
	MOVQ 80(R8), R15

// VNNI_ROWS16 runs ROW (a row macro: MROW, MROWP, MROWP16) for the
// group's 16 weight rows into Z0..Z15, alternating the int32 scratch.
#define VNNI_ROWS16(ROW) \
	ROW(0, Z30, Z0); \
	ROW(1, Z31, Z1); \
	ROW(2, Z30, Z2); \
	ROW(3, Z31, Z3); \
	ROW(4, Z30, Z4); \
	ROW(5, Z31, Z5); \
	ROW(6, Z30, Z6); \
	ROW(7, Z31, Z7); \
	ROW(8, Z30, Z8); \
	ROW(9, Z31, Z9); \
	ROW(10, Z30, Z10); \
	ROW(11, Z31, Z11); \
	ROW(12, Z30, Z12); \
	ROW(13, Z31, Z13); \
	ROW(14, Z30, Z14); \
	ROW(15, Z31, Z15)

// func vnniDotTilesMin(c *amxCall)
TEXT ·vnniDotTilesMin(SB), NOSPLIT, $0-8
	VNNI_TILE_ENTRY

block:
	VMOVDQU64 0(DI), Z22
	VMOVDQU64 64(DI), Z23
	VMOVDQU64 128(DI), Z24
	VMOVDQU64 192(DI), Z25
	VMOVDQU64 256(DI), Z26
	VMOVDQU64 320(DI), Z27
	VMOVDQU64 384(DI), Z28
	VMOVDQU64 448(DI), Z29
	VMOVUPS 0(R14), Z20
	VMOVUPS 64(R14), Z21
	MOVQ SI, AX
	VNNI_ROWS16(MROW)
	ADDQ 24(R8), SI
	ADDQ 48(R8), DI
	ADDQ $128, R13
	ADDQ $128, R14
	DECQ R15
	JNZ block

	TILE_STORE_GROUP
	VZEROUPPER
	RET

// MROWP is MROW for the signed-level formats, without a min term. VPDPBUSD
// multiplies unsigned by signed bytes, so the levels are biased to w + 128
// (XOR 0x80, Z16, in the broadcast itself) and the sums start from
// −128·Σx (Z21, once per block and group), leaving Σ w·x: the AMX tile's
// C row, exactly.
#define MROWP(m, acc32, acc) \
	VPXORD.BCST 0(AX), Z16, Z18; \
	VMOVDQA64 Z21, acc32; \
	VPXORD.BCST 4(AX), Z16, Z19; \
	VPDPBUSD Z22, Z18, acc32; \
	VPXORD.BCST 8(AX), Z16, Z18; \
	VPDPBUSD Z23, Z19, acc32; \
	VPXORD.BCST 12(AX), Z16, Z19; \
	VPDPBUSD Z24, Z18, acc32; \
	VPXORD.BCST 16(AX), Z16, Z18; \
	VPDPBUSD Z25, Z19, acc32; \
	VPXORD.BCST 20(AX), Z16, Z19; \
	VPDPBUSD Z26, Z18, acc32; \
	VPXORD.BCST 24(AX), Z16, Z18; \
	VPDPBUSD Z27, Z19, acc32; \
	VPXORD.BCST 28(AX), Z16, Z19; \
	VPDPBUSD Z28, Z18, acc32; \
	VPDPBUSD Z29, Z19, acc32; \
	ADDQ DX, AX; \
	VCVTDQ2PS acc32, acc32; \
	VMULPS.BCST (4*(m))(R13), Z20, Z17; \
	VFMADD231PS acc32, Z17, acc

// func vnniDotTilesPlain(c *amxCall)
TEXT ·vnniDotTilesPlain(SB), NOSPLIT, $0-8
	VNNI_TILE_ENTRY
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z16

block:
	VMOVDQU64 0(DI), Z22
	VMOVDQU64 64(DI), Z23
	VMOVDQU64 128(DI), Z24
	VMOVDQU64 192(DI), Z25
	VMOVDQU64 256(DI), Z26
	VMOVDQU64 320(DI), Z27
	VMOVDQU64 384(DI), Z28
	VMOVDQU64 448(DI), Z29
	VMOVUPS 0(R14), Z20
	VPXORD Z21, Z21, Z21
	VPDPBUSD Z22, Z16, Z21
	VPDPBUSD Z23, Z16, Z21
	VPDPBUSD Z24, Z16, Z21
	VPDPBUSD Z25, Z16, Z21
	VPDPBUSD Z26, Z16, Z21
	VPDPBUSD Z27, Z16, Z21
	VPDPBUSD Z28, Z16, Z21
	VPDPBUSD Z29, Z16, Z21
	VPXORD Z17, Z17, Z17
	VPSUBD Z21, Z17, Z21
	MOVQ SI, AX
	VNNI_ROWS16(MROWP)
	ADDQ 24(R8), SI
	ADDQ 48(R8), DI
	ADDQ $64, R13
	ADDQ $64, R14
	DECQ R15
	JNZ block

	TILE_STORE_GROUP
	VZEROUPPER
	RET

// MROWP16 is MROWP for Q6_K's 16-element blocks (four B vectors).
#define MROWP16(m, acc32, acc) \
	VPXORD.BCST 0(AX), Z16, Z18; \
	VMOVDQA64 Z21, acc32; \
	VPXORD.BCST 4(AX), Z16, Z19; \
	VPDPBUSD Z22, Z18, acc32; \
	VPXORD.BCST 8(AX), Z16, Z18; \
	VPDPBUSD Z23, Z19, acc32; \
	VPXORD.BCST 12(AX), Z16, Z19; \
	VPDPBUSD Z24, Z18, acc32; \
	VPDPBUSD Z25, Z19, acc32; \
	ADDQ DX, AX; \
	VCVTDQ2PS acc32, acc32; \
	VMULPS.BCST (4*(m))(R13), Z20, Z17; \
	VFMADD231PS acc32, Z17, acc

// func vnniDotTilesPlain16(c *amxCall)
TEXT ·vnniDotTilesPlain16(SB), NOSPLIT, $0-8
	VNNI_TILE_ENTRY
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z16

block:
	VMOVDQU64 0(DI), Z22
	VMOVDQU64 64(DI), Z23
	VMOVDQU64 128(DI), Z24
	VMOVDQU64 192(DI), Z25
	VMOVUPS 0(R14), Z20
	VPXORD Z21, Z21, Z21
	VPDPBUSD Z22, Z16, Z21
	VPDPBUSD Z23, Z16, Z21
	VPDPBUSD Z24, Z16, Z21
	VPDPBUSD Z25, Z16, Z21
	VPXORD Z17, Z17, Z17
	VPSUBD Z21, Z17, Z21
	MOVQ SI, AX
	VNNI_ROWS16(MROWP16)
	ADDQ 24(R8), SI
	ADDQ 48(R8), DI
	ADDQ $64, R13
	ADDQ $64, R14
	DECQ R15
	JNZ block

	TILE_STORE_GROUP
	VZEROUPPER
	RET
