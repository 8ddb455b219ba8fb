//go:build amd64 && !noasm

#include "textflag.h"

// AMX-INT8 tile products for amx.go's tiled matmul: C = A (16 activation
// rows × one K-block of int8s) · B (the block's levels of 16 weight rows in
// VNNI pair layout), stored to cbuf and scaled into Z0..Z15, one f32
// accumulator per activation row with a lane per weight row: acc +=
// f32(C)·(activation scale · weight scales) [+ activation sum · weight
// mins]. Each accumulator is then one (masked) store of 16 outputs.
// amx.go's amxCall gives the field offsets used here.
//
// Two blocks are in flight: block b+1's tiles (tmm1, tmm3, tmm5, stored to
// cbuf+1024) are computed while block b's stored C (tmm0, tmm2, tmm4,
// cbuf) is scaled. One block at a time ran at a seventh of the tile unit's
// rate: the tile load, product, store and the loads of what was stored are
// one dependency chain of ~190 cycles. The block count must be even
// (amxPlan.prepare checks).
//
// The Go assembler has no AMX mnemonics, so the instructions are spelled
// as bytes (VEX.128 0F38, W0), with fixed registers for their operands: A
// is loaded from (SI)(DX*1), B from (DI)(CX*1) with CX = 64, and C stored
// to (BX)(CX*1) or (AX)(CX*1).

#define LDTILECFG_DI BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0x07
#define TILERELEASE BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0
#define TILEZERO(t) BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $(0xC0|((t)<<3))
#define TILELOADD_A(t) BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $(0x04|((t)<<3)); BYTE $0x16
#define TILELOADD_B(t) BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $(0x04|((t)<<3)); BYTE $0x0F
#define TILESTORED_BX(t) BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $(0x04|((t)<<3)); BYTE $0x0B
#define TILESTORED_AX(t) BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $(0x04|((t)<<3)); BYTE $0x08
// TDPBSSD c, a, b: c += a·b (signed × signed bytes, int32 sums of four).
#define TDPBSSD(c, a, b) BYTE $0xC4; BYTE $0xE2; BYTE $(0x03|((15-(b))<<3)); BYTE $0x5E; BYTE $(0xC0|((c)<<3)|(a))

// TILES0 and TILES1 compute the next block's C into cbuf and cbuf+1024.
#define TILES0 \
	TILELOADD_A(2); \
	TILELOADD_B(4); \
	TILEZERO(0); \
	TDPBSSD(0, 2, 4); \
	TILESTORED_BX(0); \
	ADDQ 24(R8), SI; \
	ADDQ 56(R8), DI

#define TILES1 \
	TILELOADD_A(3); \
	TILELOADD_B(5); \
	TILEZERO(1); \
	TDPBSSD(1, 3, 5); \
	TILESTORED_AX(1); \
	ADDQ 24(R8), SI; \
	ADDQ 56(R8), DI

// ROWP adds C row n (at base+coff) times its scales (activation n's at
// R14+xoff, the weights' in Z20) to acc; ROWM also the min term
// (activation n's sum at R14+moff times the weights' mins in Z21).
#define ROWP(base, coff, xoff, acc) \
	VCVTDQ2PS   coff(base), Z16; \
	VMULPS.BCST xoff(R14), Z20, Z17; \
	VFMADD231PS Z16, Z17, acc

#define ROWM(base, coff, xoff, moff, acc) \
	ROWP(base, coff, xoff, acc); \
	VFMADD231PS.BCST moff(R14), Z21, acc

#define BODY_PLAIN \
	MOVQ c+0(FP), R8; \
	MOVQ 0(R8), DI; \
	LDTILECFG_DI; \
	MOVQ 128(R8), AX; \
	KMOVW AX, K1; \
	MOVQ 136(R8), BX; \
	MOVQ 16(R8), DX; \
	MOVQ 88(R8), R9; \
	MOVQ 8(R8), R10; \
	MOVQ 64(R8), R11; \
	MOVQ 96(R8), R12; \
group: \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	MOVQ R10, SI; \
	MOVQ 48(R8), DI; \
	MOVQ 40(R8), R13; \
	MOVQ R11, R14; \
	LEAQ 1024(BX), AX; \
	MOVQ $64, CX; \
	MOVQ 80(R8), R15; \
	TILES0; \
pair: \
	TILES1; \
	VMOVUPS (R13), Z20; \
	ROWP(BX, 0, 0, Z0); \
	ROWP(BX, 64, 4, Z1); \
	ROWP(BX, 128, 8, Z2); \
	ROWP(BX, 192, 12, Z3); \
	ROWP(BX, 256, 16, Z4); \
	ROWP(BX, 320, 20, Z5); \
	ROWP(BX, 384, 24, Z6); \
	ROWP(BX, 448, 28, Z7); \
	ROWP(BX, 512, 32, Z8); \
	ROWP(BX, 576, 36, Z9); \
	ROWP(BX, 640, 40, Z10); \
	ROWP(BX, 704, 44, Z11); \
	ROWP(BX, 768, 48, Z12); \
	ROWP(BX, 832, 52, Z13); \
	ROWP(BX, 896, 56, Z14); \
	ROWP(BX, 960, 60, Z15); \
	ADDQ $64, R13; \
	ADDQ $64, R14; \
	SUBQ $2, R15; \
	JZ last; \
	TILES0; \
	VMOVUPS (R13), Z20; \
	ROWP(AX, 0, 0, Z0); \
	ROWP(AX, 64, 4, Z1); \
	ROWP(AX, 128, 8, Z2); \
	ROWP(AX, 192, 12, Z3); \
	ROWP(AX, 256, 16, Z4); \
	ROWP(AX, 320, 20, Z5); \
	ROWP(AX, 384, 24, Z6); \
	ROWP(AX, 448, 28, Z7); \
	ROWP(AX, 512, 32, Z8); \
	ROWP(AX, 576, 36, Z9); \
	ROWP(AX, 640, 40, Z10); \
	ROWP(AX, 704, 44, Z11); \
	ROWP(AX, 768, 48, Z12); \
	ROWP(AX, 832, 52, Z13); \
	ROWP(AX, 896, 56, Z14); \
	ROWP(AX, 960, 60, Z15); \
	ADDQ $64, R13; \
	ADDQ $64, R14; \
	JMP pair; \
last: \
	VMOVUPS (R13), Z20; \
	ROWP(AX, 0, 0, Z0); \
	ROWP(AX, 64, 4, Z1); \
	ROWP(AX, 128, 8, Z2); \
	ROWP(AX, 192, 12, Z3); \
	ROWP(AX, 256, 16, Z4); \
	ROWP(AX, 320, 20, Z5); \
	ROWP(AX, 384, 24, Z6); \
	ROWP(AX, 448, 28, Z7); \
	ROWP(AX, 512, 32, Z8); \
	ROWP(AX, 576, 36, Z9); \
	ROWP(AX, 640, 40, Z10); \
	ROWP(AX, 704, 44, Z11); \
	ROWP(AX, 768, 48, Z12); \
	ROWP(AX, 832, 52, Z13); \
	ROWP(AX, 896, 56, Z14); \
	ROWP(AX, 960, 60, Z15); \
	ADDQ $64, R13; \
	ADDQ $64, R14; \
	MOVQ $16, R15; \
	CMPQ R9, $1; \
	JNE full; \
	MOVQ 120(R8), R15; \
full: \
	MOVQ R12, AX; \
	CMPQ R15, $0; JLE stored; VMOVUPS Z0, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $1; JLE stored; VMOVUPS Z1, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $2; JLE stored; VMOVUPS Z2, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $3; JLE stored; VMOVUPS Z3, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $4; JLE stored; VMOVUPS Z4, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $5; JLE stored; VMOVUPS Z5, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $6; JLE stored; VMOVUPS Z6, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $7; JLE stored; VMOVUPS Z7, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $8; JLE stored; VMOVUPS Z8, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $9; JLE stored; VMOVUPS Z9, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $10; JLE stored; VMOVUPS Z10, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $11; JLE stored; VMOVUPS Z11, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $12; JLE stored; VMOVUPS Z12, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $13; JLE stored; VMOVUPS Z13, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $14; JLE stored; VMOVUPS Z14, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $15; JLE stored; VMOVUPS Z15, K1, (AX); ADDQ 104(R8), AX; \
stored: \
	ADDQ 32(R8), R10; \
	ADDQ 72(R8), R11; \
	ADDQ 112(R8), R12; \
	DECQ R9; \
	JNZ group; \
	TILERELEASE; \
	VZEROUPPER; \
	RET

#define BODY_MIN \
	MOVQ c+0(FP), R8; \
	MOVQ 0(R8), DI; \
	LDTILECFG_DI; \
	MOVQ 128(R8), AX; \
	KMOVW AX, K1; \
	MOVQ 136(R8), BX; \
	MOVQ 16(R8), DX; \
	MOVQ 88(R8), R9; \
	MOVQ 8(R8), R10; \
	MOVQ 64(R8), R11; \
	MOVQ 96(R8), R12; \
group: \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	MOVQ R10, SI; \
	MOVQ 48(R8), DI; \
	MOVQ 40(R8), R13; \
	MOVQ R11, R14; \
	LEAQ 1024(BX), AX; \
	MOVQ $64, CX; \
	MOVQ 80(R8), R15; \
	TILES0; \
pair: \
	TILES1; \
	VMOVUPS (R13), Z20; \
	VMOVUPS 64(R13), Z21; \
	ROWM(BX, 0, 0, 64, Z0); \
	ROWM(BX, 64, 4, 68, Z1); \
	ROWM(BX, 128, 8, 72, Z2); \
	ROWM(BX, 192, 12, 76, Z3); \
	ROWM(BX, 256, 16, 80, Z4); \
	ROWM(BX, 320, 20, 84, Z5); \
	ROWM(BX, 384, 24, 88, Z6); \
	ROWM(BX, 448, 28, 92, Z7); \
	ROWM(BX, 512, 32, 96, Z8); \
	ROWM(BX, 576, 36, 100, Z9); \
	ROWM(BX, 640, 40, 104, Z10); \
	ROWM(BX, 704, 44, 108, Z11); \
	ROWM(BX, 768, 48, 112, Z12); \
	ROWM(BX, 832, 52, 116, Z13); \
	ROWM(BX, 896, 56, 120, Z14); \
	ROWM(BX, 960, 60, 124, Z15); \
	ADDQ $128, R13; \
	ADDQ $128, R14; \
	SUBQ $2, R15; \
	JZ last; \
	TILES0; \
	VMOVUPS (R13), Z20; \
	VMOVUPS 64(R13), Z21; \
	ROWM(AX, 0, 0, 64, Z0); \
	ROWM(AX, 64, 4, 68, Z1); \
	ROWM(AX, 128, 8, 72, Z2); \
	ROWM(AX, 192, 12, 76, Z3); \
	ROWM(AX, 256, 16, 80, Z4); \
	ROWM(AX, 320, 20, 84, Z5); \
	ROWM(AX, 384, 24, 88, Z6); \
	ROWM(AX, 448, 28, 92, Z7); \
	ROWM(AX, 512, 32, 96, Z8); \
	ROWM(AX, 576, 36, 100, Z9); \
	ROWM(AX, 640, 40, 104, Z10); \
	ROWM(AX, 704, 44, 108, Z11); \
	ROWM(AX, 768, 48, 112, Z12); \
	ROWM(AX, 832, 52, 116, Z13); \
	ROWM(AX, 896, 56, 120, Z14); \
	ROWM(AX, 960, 60, 124, Z15); \
	ADDQ $128, R13; \
	ADDQ $128, R14; \
	JMP pair; \
last: \
	VMOVUPS (R13), Z20; \
	VMOVUPS 64(R13), Z21; \
	ROWM(AX, 0, 0, 64, Z0); \
	ROWM(AX, 64, 4, 68, Z1); \
	ROWM(AX, 128, 8, 72, Z2); \
	ROWM(AX, 192, 12, 76, Z3); \
	ROWM(AX, 256, 16, 80, Z4); \
	ROWM(AX, 320, 20, 84, Z5); \
	ROWM(AX, 384, 24, 88, Z6); \
	ROWM(AX, 448, 28, 92, Z7); \
	ROWM(AX, 512, 32, 96, Z8); \
	ROWM(AX, 576, 36, 100, Z9); \
	ROWM(AX, 640, 40, 104, Z10); \
	ROWM(AX, 704, 44, 108, Z11); \
	ROWM(AX, 768, 48, 112, Z12); \
	ROWM(AX, 832, 52, 116, Z13); \
	ROWM(AX, 896, 56, 120, Z14); \
	ROWM(AX, 960, 60, 124, Z15); \
	ADDQ $128, R13; \
	ADDQ $128, R14; \
	MOVQ $16, R15; \
	CMPQ R9, $1; \
	JNE full; \
	MOVQ 120(R8), R15; \
full: \
	MOVQ R12, AX; \
	CMPQ R15, $0; JLE stored; VMOVUPS Z0, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $1; JLE stored; VMOVUPS Z1, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $2; JLE stored; VMOVUPS Z2, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $3; JLE stored; VMOVUPS Z3, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $4; JLE stored; VMOVUPS Z4, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $5; JLE stored; VMOVUPS Z5, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $6; JLE stored; VMOVUPS Z6, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $7; JLE stored; VMOVUPS Z7, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $8; JLE stored; VMOVUPS Z8, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $9; JLE stored; VMOVUPS Z9, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $10; JLE stored; VMOVUPS Z10, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $11; JLE stored; VMOVUPS Z11, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $12; JLE stored; VMOVUPS Z12, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $13; JLE stored; VMOVUPS Z13, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $14; JLE stored; VMOVUPS Z14, K1, (AX); ADDQ 104(R8), AX; \
	CMPQ R15, $15; JLE stored; VMOVUPS Z15, K1, (AX); ADDQ 104(R8), AX; \
stored: \
	ADDQ 32(R8), R10; \
	ADDQ 72(R8), R11; \
	ADDQ 112(R8), R12; \
	DECQ R9; \
	JNZ group; \
	TILERELEASE; \
	VZEROUPPER; \
	RET

// func amxDotTilesPlain(c *amxCall)
TEXT ·amxDotTilesPlain(SB), NOSPLIT, $0-8
	BODY_PLAIN

// func amxDotTilesMin(c *amxCall)
TEXT ·amxDotTilesMin(SB), NOSPLIT, $0-8
	BODY_MIN
