//go:build amd64 && !noasm

#include "dotq_amd64.h"

// AVX-512 VNNI kernels for MXFP4 weights against four or eight Q8_0
// activation rows, in dotq8v_amd64.s's frame (dotqv_amd64.h): a zmm holds
// two weight rows' products with one activation block, the rows' values
// (magnitudes in Z17, signs in K1) and scales (Z18) loaded once per block
// for all the activation rows. The values: each row's 16 code bytes
// broadcast to both 128-bit lanes of its half, the high lane shifted right
// by 4 (VPSRLVD by Z10), masked to nibbles and looked up in ggml's doubled
// E2M1 table (Z8, in every lane). The scales: 2^(e−128) as the float with
// exponent field max(e − 1, 0), dotmx_amd64.s's SCALE_E8M0, here built in
// the vector lanes.
//
// Bit-exact with the one-row kernels (dotMXFP4Q8_0Rows, ...VNNI): the
// four-byte integer sums are exact, the scale product (2^(e−128) times the
// activation's scale), the FMA chain over the blocks and each row's HSUM
// are theirs, in their order. Registers as dotq8v_amd64.s, plus R11 the
// exponent bytes, K2 the high row's dwords, Z8 the table, Z9 0x0f bytes,
// Z10 the shifts. No eight-row form: it would need R11 for its activation
// rows, and R15 is not free.

DATA mxvShift<>+0(SB)/8, $0
DATA mxvShift<>+8(SB)/8, $0
DATA mxvShift<>+16(SB)/8, $0x0000000400000004
DATA mxvShift<>+24(SB)/8, $0x0000000400000004
GLOBL mxvShift<>(SB), RODATA|NOPTR, $32

DATA mxvTable<>+0(SB)/8, $0x0c08060403020100
DATA mxvTable<>+8(SB)/8, $0xf4f8fafcfdfeff00
GLOBL mxvTable<>(SB), RODATA|NOPTR, $16

DATA mxvOne<>+0(SB)/4, $1
GLOBL mxvOne<>(SB), RODATA|NOPTR, $4

#define PAIR_LOAD_MX(scr) \
	VMOVDQU64       1(AX), X16; \
	VINSERTI32X4    $1, 1(AX)(R9*1), Y16, Y16; \
	VSHUFI64X2      $0x50, Z16, Z16, Z16; \
	VPSRLVD         Z10, Z16, Z16; \
	VPANDD          Z9, Z16, Z16; \
	VPSHUFB         Z16, Z8, Z16; \
	VPMOVB2M        Z16, K1; \
	VPABSB          Z16, Z17; \
	MOVBLZX         (AX), scr; \
	VPBROADCASTD    scr, Z18; \
	MOVBLZX         (AX)(R9*1), scr; \
	VPBROADCASTD    scr, K2, Z18; \
	VPSUBD.BCST     mxvOne<>(SB), Z18, Z18; \
	VPMAXSD         Z31, Z18, Z18; \
	VPSLLD          $23, Z18, Z18

#include "dotqv_amd64.h"

#define MX_CONSTS \
	MOVL            $0x0f0f0f0f, AX; \
	VPBROADCASTD    AX, Z9; \
	VBROADCASTI32X4 mxvTable<>(SB), Z8; \
	VBROADCASTI64X4 mxvShift<>(SB), Z10; \
	MOVL            $0xff00, AX; \
	KMOVW           AX, K2

// func dotMXFP4Q8_0Rows4VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotMXFP4Q8_0Rows4VNNI(SB), NOSPLIT, $0-72
	VLOAD_ARGS
	MX_CONSTS

mx4row:
	VPAIR_START(mx4done)
	MOVQ   x+16(FP), DI
	LEAQ   (DI)(R10*2), DX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3

mx4blk:
	PREFETCHT0 (AX)(R8*8)
	PAIR_LOAD_MX(R11)
	VPROD(0, 2(DI), Z0, Z20, Z21, Z22)
	VPROD(4, 2(DI)(R10*1), Z1, Z23, Z24, Z25)
	VPROD(8, 2(DX), Z2, Z26, Z27, Z28)
	VPROD(12, 2(DX)(R10*1), Z3, Z20, Z21, Z22)
	ADDQ       $17, AX
	ADDQ       $34, DI
	ADDQ       $34, DX
	ADDQ       $32, BX
	DECQ       CX
	JNZ        mx4blk

	SAVE_HIGH4
	VHSUM4
	VSTORE4(0)
	TESTQ R9, R9
	JEQ   mx4done
	RESTORE_HIGH4
	VHSUM4
	VSTORE4(4)
	VPAIR_NEXT(mx4row, mx4done)

mx4done:
	VZEROUPPER
	RET
