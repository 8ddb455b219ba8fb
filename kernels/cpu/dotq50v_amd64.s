//go:build amd64 && !noasm

#include "dotq_amd64.h"

// AVX-512 VNNI form of dotQ5_0Q8_0Rows (dotq_amd64.s) for whole groups of
// eight rows, the rest going to the AVX2 kernel, laid out as
// dotq80v_amd64.s (Gemma 3 270M Q4_K_M keeps a fifth of its decode step in
// Q5_0 rows). A zmm holds two rows' 32 levels in element order (row 2p in
// bytes 0..31, 2p+1 in 32..63), so the rows' qh words, side by side in a
// 64-bit k mask, say which bytes get their fifth bit: u = nibble + 16·bit,
// 0..31, and q = u − 16. VPDPBUSD sums u·x onto −16·Σx (one VPDPBUSD a
// block for all rows): the AVX2 kernel's exact int32 four-byte sums, then
// its d·dx, FMA chain and horizontal sums, lane for lane.
//
// Registers as dotq80v_amd64.s, but for: BX and R9 build a pair's qh mask
// (x and nb are reloaded from the arguments each group); Z7 −16·Σx, Z9
// 0x0f bytes, Z28 0x10 bytes; K1 the upper eight dwords, K5 the pair's
// fifth bits, K6 the words of 128-bit lanes 1 and 3 (high nibbles).

DATA q50vIdx<>+0(SB)/8, $0x0000000000000000
DATA q50vIdx<>+8(SB)/8, $0x0000000000000000
DATA q50vIdx<>+16(SB)/8, $0x0000000000000000
DATA q50vIdx<>+24(SB)/8, $0x0000000000000000
DATA q50vIdx<>+32(SB)/8, $0x0000000200000002
DATA q50vIdx<>+40(SB)/8, $0x0000000200000002
DATA q50vIdx<>+48(SB)/8, $0x0000000200000002
DATA q50vIdx<>+56(SB)/8, $0x0000000200000002
DATA q50vIdx<>+64(SB)/8, $0x0000000400000004
DATA q50vIdx<>+72(SB)/8, $0x0000000400000004
DATA q50vIdx<>+80(SB)/8, $0x0000000400000004
DATA q50vIdx<>+88(SB)/8, $0x0000000400000004
DATA q50vIdx<>+96(SB)/8, $0x0000000600000006
DATA q50vIdx<>+104(SB)/8, $0x0000000600000006
DATA q50vIdx<>+112(SB)/8, $0x0000000600000006
DATA q50vIdx<>+120(SB)/8, $0x0000000600000006
DATA q50vIdx<>+128(SB)/8, $0x0000000800000008
DATA q50vIdx<>+136(SB)/8, $0x0000000800000008
DATA q50vIdx<>+144(SB)/8, $0x0000000800000008
DATA q50vIdx<>+152(SB)/8, $0x0000000800000008
DATA q50vIdx<>+160(SB)/8, $0x0000000a0000000a
DATA q50vIdx<>+168(SB)/8, $0x0000000a0000000a
DATA q50vIdx<>+176(SB)/8, $0x0000000a0000000a
DATA q50vIdx<>+184(SB)/8, $0x0000000a0000000a
DATA q50vIdx<>+192(SB)/8, $0x0000000c0000000c
DATA q50vIdx<>+200(SB)/8, $0x0000000c0000000c
DATA q50vIdx<>+208(SB)/8, $0x0000000c0000000c
DATA q50vIdx<>+216(SB)/8, $0x0000000c0000000c
DATA q50vIdx<>+224(SB)/8, $0x0000000e0000000e
DATA q50vIdx<>+232(SB)/8, $0x0000000e0000000e
DATA q50vIdx<>+240(SB)/8, $0x0000000e0000000e
DATA q50vIdx<>+248(SB)/8, $0x0000000e0000000e
GLOBL q50vIdx<>(SB), RODATA|NOPTR, $256

// Q50PAIR8: acc += pair p's block products: quants at q0/q1 and qh words
// at h0/h1 of rows 2p and 2p+1.
#define Q50PAIR8(q0, q1, h0, h1, idx, acc, w, wY, v, c) \
	MOVL              h0, BX; \
	MOVL              h1, R9; \
	SHLQ              $32, R9; \
	ORQ               R9, BX; \
	KMOVQ             BX, K5; \
	VBROADCASTI32X4   q0, wY; \
	VBROADCASTI32X4.Z q1, K1, v; \
	VPORD             v, w, w; \
	VPSRLW            $4, w, K6, w; \
	VPANDD            Z9, w, w; \
	VPADDB            Z28, w, K5, w; \
	VMOVDQA64         Z7, c; \
	VPDPBUSD          Z5, w, c; \
	VCVTDQ2PS         c, c; \
	VPERMPS           Z14, idx, v; \
	VFMADD231PS       v, c, acc

// SCALES4: the dwords at b0..b3 (a row's d and half its qh) into dwords
// 0..3 of dX, zero-masked loads merged by a VPTERNLOGD and a VPORD.
#define SCALES4(b0, b1, b2, b3, dX, t1, t2, t3) \
	VMOVD            b0, dX; \
	VPBROADCASTD.Z   b1, K2, t1; \
	VPBROADCASTD.Z   b2, K3, t2; \
	VPBROADCASTD.Z   b3, K4, t3; \
	VPTERNLOGD       $0xfe, t3, t2, t1; \
	VPORD            t1, dX, dX

// FINISH8: rows 2p and 2p+1 from pair p's accumulator, at off, off+4 of dst.
#define FINISH8(accZ, accY, accX, off) \
	VEXTRACTF64X4 $1, accZ, Y15; \
	HSUM(accY, accX, X7); \
	VMOVSS        accX, off(R11); \
	HSUM(Y15, X15, X7); \
	VMOVSS        X15, (off+4)(R11)

// func dotQ5_0Q8_0Rows8VNNI1(w *byte, wstride int, x *byte, nb int, dst *float32, groups int)
TEXT ·dotQ5_0Q8_0Rows8VNNI1(SB), NOSPLIT, $0-48
	MOVQ         w+0(FP), SI
	MOVQ         wstride+8(FP), R8
	MOVQ         dst+32(FP), R11
	MOVQ         groups+40(FP), R12
	VMOVDQU64    q50vIdx<>+0(SB), Z10
	VMOVDQU64    q50vIdx<>+64(SB), Z11
	VMOVDQU64    q50vIdx<>+128(SB), Z12
	VMOVDQU64    q50vIdx<>+192(SB), Z13
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z9
	MOVL         $0x10101010, AX
	VPBROADCASTD AX, Z28
	VPXORD       Z8, Z8, Z8
	MOVL         $0xff00, AX
	KMOVW        AX, K1
	MOVL         $2, AX
	KMOVW        AX, K2
	MOVL         $4, AX
	KMOVW        AX, K3
	MOVL         $8, AX
	KMOVW        AX, K4
	MOVL         $0xff00ff00, AX
	KMOVD        AX, K6
	LEAQ         (R8)(R8*2), R14

q50v8group:
	MOVQ   SI, AX
	LEAQ   (SI)(R8*4), R13
	LEAQ   (SI)(R8*8), DX
	MOVQ   x+16(FP), DI
	MOVQ   nb+24(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3

q50v8blk:
	PREFETCHT0      (DX)
	PREFETCHT0      64(DX)
	PREFETCHT0      128(DX)
	VPBROADCASTD    (DI), Y6
	VCVTPH2PS       Y6, Z6
	VBROADCASTI64X4 2(DI), Z5
	VPXORD          Z7, Z7, Z7
	VPDPBUSD        Z5, Z28, Z7
	VPSUBD          Z7, Z8, Z7
	SCALES4((AX), (AX)(R8*1), (AX)(R8*2), (AX)(R14*1), X14, X16, X17, X18)
	SCALES4((R13), (R13)(R8*1), (R13)(R8*2), (R13)(R14*1), X15, X19, X20, X21)
	VINSERTI32X4    $1, X15, Y14, Y14
	VCVTPH2PS       Y14, Z14
	VMULPS          Z6, Z14, Z14
	Q50PAIR8(6(AX), 6(AX)(R8*1), 2(AX), 2(AX)(R8*1), Z10, Z0, Z16, Y16, Z17, Z18)
	Q50PAIR8(6(AX)(R8*2), 6(AX)(R14*1), 2(AX)(R8*2), 2(AX)(R14*1), Z11, Z1, Z19, Y19, Z20, Z21)
	Q50PAIR8(6(R13), 6(R13)(R8*1), 2(R13), 2(R13)(R8*1), Z12, Z2, Z22, Y22, Z23, Z24)
	Q50PAIR8(6(R13)(R8*2), 6(R13)(R14*1), 2(R13)(R8*2), 2(R13)(R14*1), Z13, Z3, Z25, Y25, Z26, Z27)
	ADDQ            $22, AX
	ADDQ            $22, R13
	ADDQ            $176, DX
	ADDQ            $34, DI
	DECQ            CX
	JNZ             q50v8blk

	FINISH8(Z0, Y0, X0, 0)
	FINISH8(Z1, Y1, X1, 8)
	FINISH8(Z2, Y2, X2, 16)
	FINISH8(Z3, Y3, X3, 24)
	ADDQ $32, R11
	LEAQ (SI)(R8*8), SI
	DECQ R12
	JNZ  q50v8group
	VZEROUPPER
	RET
