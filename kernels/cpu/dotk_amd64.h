// Shared by the K-quant kernels (dotk_amd64.s, dotk2_amd64.s); include after
// dotq_amd64.h.

// Q4_K/Q5_K: scales and mins are 6-bit, packed in 12 bytes (see
// quant.ScaleMinK4). UNPACK_K4 rebuilds ggml's utmp: 8 scale bytes in
// AX (low 4) / BX (high 4), 8 min bytes in DX (low 4) / R13 (high 4).
#define UNPACK_K4(sc) \
	MOVL  sc+0(SI), AX; \
	MOVL  sc+4(SI), BX; \
	MOVL  sc+8(SI), DX; \
	MOVL  DX, R13; \
	SHRL  $4, R13; \
	ANDL  $0x0f0f0f0f, R13; \
	MOVL  BX, R14; \
	SHRL  $6, R14; \
	ANDL  $0x03030303, R14; \
	SHLL  $4, R14; \
	ORL   R14, R13; \
	MOVL  BX, R14; \
	ANDL  $0x3f3f3f3f, R14; \
	ANDL  $0x0f0f0f0f, DX; \
	MOVL  AX, BX; \
	SHRL  $6, BX; \
	ANDL  $0x03030303, BX; \
	SHLL  $4, BX; \
	ORL   DX, BX; \
	MOVL  R14, DX; \
	ANDL  $0x3f3f3f3f, AX

// Q6_K: per 128-element half, pair k of sub-blocks (16 elements each) uses
// scale bytes 2k and 2k+1; q6Shuf row k spreads them over 8 bytes each so
// VPMOVSXBW gives the 16 int16 multipliers of one 32-element group.
DATA q6Shuf<>+0(SB)/8, $0x0000000000000000
DATA q6Shuf<>+8(SB)/8, $0x0101010101010101
DATA q6Shuf<>+16(SB)/8, $0x0202020202020202
DATA q6Shuf<>+24(SB)/8, $0x0303030303030303
DATA q6Shuf<>+32(SB)/8, $0x0404040404040404
DATA q6Shuf<>+40(SB)/8, $0x0505050505050505
DATA q6Shuf<>+48(SB)/8, $0x0606060606060606
DATA q6Shuf<>+56(SB)/8, $0x0707070707070707
DATA q6Shuf<>+64(SB)/8, $0x0808080808080808
DATA q6Shuf<>+72(SB)/8, $0x0909090909090909
DATA q6Shuf<>+80(SB)/8, $0x0a0a0a0a0a0a0a0a
DATA q6Shuf<>+88(SB)/8, $0x0b0b0b0b0b0b0b0b
DATA q6Shuf<>+96(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA q6Shuf<>+104(SB)/8, $0x0d0d0d0d0d0d0d0d
DATA q6Shuf<>+112(SB)/8, $0x0e0e0e0e0e0e0e0e
DATA q6Shuf<>+120(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q6Shuf<>(SB), RODATA|NOPTR, $128

// Q6_GROUP builds levels (ql nibble | two qh bits << 4) in Y7 from the ql
// bytes in qlY (nibble shift lo: 0 or 4) and qh in Y5 (bits at qhShift);
// m3 holds 0x03 bytes (a register or bytes03<>).
#define Q6_GROUP(qlY, lo, qhShift, m3) \
	VPSRLW $qhShift, Y5, Y6; \
	VPAND  m3, Y6, Y6; \
	VPSLLW $4, Y6, Y6; \
	VPSRLW $lo, qlY, Y7; \
	VPAND  Y9, Y7, Y7; \
	VPOR   Y6, Y7, Y7

DATA bytes03<>+0(SB)/8, $0x0303030303030303
DATA bytes03<>+8(SB)/8, $0x0303030303030303
DATA bytes03<>+16(SB)/8, $0x0303030303030303
DATA bytes03<>+24(SB)/8, $0x0303030303030303
GLOBL bytes03<>(SB), RODATA|NOPTR, $32
