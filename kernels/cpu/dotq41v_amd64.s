//go:build amd64 && !noasm

#include "dotq_amd64.h"

// AVX-512 VNNI form of dotQ4_1Q8_1Rows (dotq_amd64.s), the single-row
// Q4_1 kernel that decode spends most of its time in (issue 26). The AVX2
// kernel runs about twelve vector µops per (row, block) on three ports;
// here a zmm holds two rows' products with one activation block (lanes
// 0..7 row r, 8..15 row r+1, each half laid out as the AVX2 kernel's ymm)
// and a (row pair, block) takes about eleven µops on the two 512-bit ports.
//
// Bit-exact with the AVX2 kernel, so that rows, rows2, rows4 and rows8
// still agree bit for bit (design invariant 6):
//   - VPDPBUSD(levels, x) gives each int32 lane the four-byte sum
//     VPMADDUBSW + VPMADDWD gives (no int16 pair can saturate: 2·15·128).
//   - High nibbles are not shifted down but masked in place (0xf0), so
//     their lanes hold 16× the sum; it converts exactly (< 2²⁴) and meets
//     d·dx/16 instead of d·dx. (d·dx)/16 is exactly round(d·(dx/16)) since
//     the product of two f16-sized scales is far from f32's subnormals, and
//     FMA(16·v, d·dx/16, acc) rounds the same exact v·d·dx + acc once.
//   - The per-block FMA chain, the horizontal sum and the sequential Σ m·s
//     added last are the AVX2 kernel's, lane for lane.
//
// Rows go four at a time (two zmm pairs) to share the activation's loads
// and scale conversion; a group of fewer than four repeats its last row
// and stores only the real ones. Each row's block eight rows ahead is
// prefetched, as the AVX2 kernel does.
//
// Registers: SI group base, R8 wstride, R9 x, R10 nb, R11 dst, R12 rows
// left; R13, R14, BX the offsets of the group's rows 1..3 from row 0; AX
// row 0's block, DX the block eight rows on (prefetch), DI x's, CX blocks
// left; Z0/Z1 the pairs' accumulators, Z6/Z7 their Σ m·s (lanes 1 and 9);
// Z2 [dx s dx s dx/16 s/16 dx/16 s/16]×2, Z5 x's quants in both halves,
// Z8 the 1,1/16 pattern, Z9 the nibble masks; K1 the upper two 128-bit
// lanes, K2 the upper four dwords of a ymm.

#include "dotq41v_amd64.h"
#include "dotg8_amd64.h"

// Q41PAIR: acc += the pair's block products (the rows' blocks at b0 and
// b1, their quants at q0 and q1); ms lanes 1 and 9 += m·s. w, c, t, u are
// scratch zmms, tY t's ymm.
#define Q41PAIR(b0, q0, b1, q1, acc, ms, w, c, t, tY, u) \
	VBROADCASTI32X4 q0, w; \
	VBROADCASTI32X4 q1, K1, w; \
	VPANDD          Z9, w, w; \
	VPXORD          c, c, c; \
	VPDPBUSD        Z5, w, c; \
	VCVTDQ2PS       c, c; \
	VPBROADCASTD    b0, tY; \
	VPBROADCASTD    b1, K2, tY; \
	VCVTPH2PS       tY, t; \
	VMULPS          Z2, t, t; \
	VADDPS          t, ms, ms; \
	VMOVSLDUP       t, u; \
	VFMADD231PS     u, c, acc

// FINISH: X(out) = the AVX2 kernel's horizontal sum of accY plus lane 1 of msX.
#define FINISH(accY, accX, msX) \
	HSUM(accY, accX, X13); \
	VMOVSHDUP msX, msX; \
	VADDSS    msX, accX, accX


// [1, 1/16]×8: turns [d·dx, d·dx] per row into [d·dx, d·dx/16].
DATA q41vHalf<>+0(SB)/8, $0x3d8000003f800000
DATA q41vHalf<>+8(SB)/8, $0x3d8000003f800000
DATA q41vHalf<>+16(SB)/8, $0x3d8000003f800000
DATA q41vHalf<>+24(SB)/8, $0x3d8000003f800000
DATA q41vHalf<>+32(SB)/8, $0x3d8000003f800000
DATA q41vHalf<>+40(SB)/8, $0x3d8000003f800000
DATA q41vHalf<>+48(SB)/8, $0x3d8000003f800000
DATA q41vHalf<>+56(SB)/8, $0x3d8000003f800000
GLOBL q41vHalf<>(SB), RODATA|NOPTR, $64

// VPERMPS indices giving pair p of an 8-row group its scales from Q (lane
// 2k d_k·dx, 2k+1 d_k·dx/16): [4p ×4, 4p+1 ×4, 4p+2 ×4, 4p+3 ×4].
DATA q41vIdx<>+0(SB)/8, $0x0000000000000000
DATA q41vIdx<>+8(SB)/8, $0x0000000000000000
DATA q41vIdx<>+16(SB)/8, $0x0000000100000001
DATA q41vIdx<>+24(SB)/8, $0x0000000100000001
DATA q41vIdx<>+32(SB)/8, $0x0000000200000002
DATA q41vIdx<>+40(SB)/8, $0x0000000200000002
DATA q41vIdx<>+48(SB)/8, $0x0000000300000003
DATA q41vIdx<>+56(SB)/8, $0x0000000300000003
DATA q41vIdx<>+64(SB)/8, $0x0000000400000004
DATA q41vIdx<>+72(SB)/8, $0x0000000400000004
DATA q41vIdx<>+80(SB)/8, $0x0000000500000005
DATA q41vIdx<>+88(SB)/8, $0x0000000500000005
DATA q41vIdx<>+96(SB)/8, $0x0000000600000006
DATA q41vIdx<>+104(SB)/8, $0x0000000600000006
DATA q41vIdx<>+112(SB)/8, $0x0000000700000007
DATA q41vIdx<>+120(SB)/8, $0x0000000700000007
DATA q41vIdx<>+128(SB)/8, $0x0000000800000008
DATA q41vIdx<>+136(SB)/8, $0x0000000800000008
DATA q41vIdx<>+144(SB)/8, $0x0000000900000009
DATA q41vIdx<>+152(SB)/8, $0x0000000900000009
DATA q41vIdx<>+160(SB)/8, $0x0000000a0000000a
DATA q41vIdx<>+168(SB)/8, $0x0000000a0000000a
DATA q41vIdx<>+176(SB)/8, $0x0000000b0000000b
DATA q41vIdx<>+184(SB)/8, $0x0000000b0000000b
DATA q41vIdx<>+192(SB)/8, $0x0000000c0000000c
DATA q41vIdx<>+200(SB)/8, $0x0000000c0000000c
DATA q41vIdx<>+208(SB)/8, $0x0000000d0000000d
DATA q41vIdx<>+216(SB)/8, $0x0000000d0000000d
DATA q41vIdx<>+224(SB)/8, $0x0000000e0000000e
DATA q41vIdx<>+232(SB)/8, $0x0000000e0000000e
DATA q41vIdx<>+240(SB)/8, $0x0000000f0000000f
DATA q41vIdx<>+248(SB)/8, $0x0000000f0000000f
GLOBL q41vIdx<>(SB), RODATA|NOPTR, $256

// Q41PAIR8: acc += the products of pair p of an 8-row group: the rows'
// quants at q0 and q1 (row 2p in lanes 0..7, 2p+1 in 8..15), their scales
// picked out of Q (Z14) by idx. Both quants loads are zero-masked or
// zero-extending (load port only) and merged with the nibble masks in one
// VPTERNLOGD ((w|v)&mask).
#define Q41PAIR8(q0, q1, idx, acc, w, wY, v, c, t) \
	VBROADCASTI32X4   q0, wY; \
	VBROADCASTI32X4.Z q1, K1, v; \
	VPTERNLOGD        $0xa8, Z9, v, w; \
	VPXORD            c, c, c; \
	VPDPBUSD          Z5, w, c; \
	VCVTDQ2PS         c, c; \
	VPERMPS           Z14, idx, t; \
	VFMADD231PS       t, c, acc

// SCALES4: the [d m] words of four rows (at b0..b3) into dwords 0..3 of
// dX, zero-masked loads merged by one VPTERNLOGD (OR of three) and a VPORD.
#define SCALES4(b0, b1, b2, b3, dX, t1, t2, t3) \
	VMOVD            b0, dX; \
	VPBROADCASTD.Z   b1, K2, t1; \
	VPBROADCASTD.Z   b2, K3, t2; \
	VPBROADCASTD.Z   b3, K4, t3; \
	VPTERNLOGD       $0xfe, t3, t2, t1; \
	VPORD            t1, dX, dX

// FINISH8: rows 2p and 2p+1 of an 8-row group from pair p's accumulator
// and Σ m·s (lanes 4p+1 and 4p+3 of Z4), stored at off and off+4 of dst.
#define FINISH8(p, accZ, accY, accX, off) \
	VEXTRACTF64X4 $1, accZ, Y15; \
	VEXTRACTF32X4 $p, Z4, X14; \
	HSUM(accY, accX, X7); \
	VMOVSHDUP     X14, X5; \
	VADDSS        X5, accX, accX; \
	VMOVSS        accX, off(R11); \
	HSUM(Y15, X15, X7); \
	VPERMILPS     $3, X14, X5; \
	VADDSS        X5, X15, X15; \
	VMOVSS        X15, (off+4)(R11)

// How an eight-row group's block gets into registers: its eight [d m]
// words into Z14 (as F: lanes 2k, 2k+1 row k's d, m), and its four pairs'
// quants, handed to a pair macro pair(q0, q1, idx, acc0, acc1, acc2) with
// pair p's scale index and its accumulators for up to three activations.
// The group's rows 0..3 are at AX + k·R8 (R14 = 3·R8), rows 4..7 at
// R13 + k·R8, and the next block 20 bytes on. (Session 9's eight-row
// grouped layout had a second pair of these; q41pack.go's sixteen-row
// layout has kernels of its own.)
#define Q41_SCALES_FILE G8_SCALES(X14, Y14, Z14)
#define Q41_ROWS_FILE(pair) \
	pair(4(AX), 4(AX)(R8*1), Z10, Z0, Z16, Z24); \
	pair(4(AX)(R8*2), 4(AX)(R14*1), Z11, Z1, Z17, Z25); \
	pair(4(R13), 4(R13)(R8*1), Z12, Z2, Z18, Z26); \
	pair(4(R13)(R8*2), 4(R13)(R14*1), Z13, Z3, Z19, Z27)

// Q41ACT8: an activation's Q (d_k·dx, d_k·dx/16) from the rows' scales
// F in Z14 and its [dx s] at mem; ms += its m_k·s.
#define Q41ACT8(mem, q, ms) \
	VPBROADCASTD mem, Y6; \
	VCVTPH2PS    Y6, Z6; \
	VMULPS       Z6, Z14, q; \
	VADDPS       q, ms, ms; \
	VMOVSLDUP    q, q; \
	VMULPS       Z8, q, q

// Q41PAIR8X1 is Q41PAIR8 as the layouts' lists call it (one activation:
// Q is Z14, the other accumulators unused).
#define Q41PAIR8X1(q0, q1, idx, acc0, acc1, acc2) Q41PAIR8(q0, q1, idx, acc0, Z20, Y20, Z21, Z22, Z23)

// Q41V81_BLOCK: a group's block for one activation in the layout given by
// scales and rows, whose blocks are wbb bytes apart; loops to label. The
// next group's bytes are prefetched in order, 160 a block, from DX.
#define Q41V81_BLOCK(scales, rows, wbb, label) \
	PREFETCHT0      (DX); \
	PREFETCHT0      64(DX); \
	PREFETCHT0      128(DX); \
	VBROADCASTI64X4 4(DI), Z5; \
	scales; \
	Q41ACT8((DI), Z14, Z4); \
	rows(Q41PAIR8X1); \
	G8_STEP(wbb, $160, $36, label)

// Q41V81_FINISH stores a group's eight results.
#define Q41V81_FINISH \
	FINISH8(0, Z0, Y0, X0, 0); \
	FINISH8(1, Z1, Y1, X1, 8); \
	FINISH8(2, Z2, Y2, X2, 16); \
	FINISH8(3, Z3, Y3, X3, 24)

// func dotQ4_1Q8_1RowsVNNI(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)
TEXT ·dotQ4_1Q8_1RowsVNNI(SB), NOSPLIT, $0-48
	MOVQ      w+0(FP), SI
	MOVQ      wstride+8(FP), R8
	MOVQ      x+16(FP), R9
	MOVQ      nb+24(FP), R10
	MOVQ      dst+32(FP), R11
	MOVQ      rows+40(FP), R12
	VMOVDQU64 q41Mask<>(SB), Z9
	CMPQ      R12, $8
	JLT       q41vtail
	VMOVUPS   q41vHalf<>(SB), Z8
	VMOVDQU64 q41vIdx<>+0(SB), Z10
	VMOVDQU64 q41vIdx<>+64(SB), Z11
	VMOVDQU64 q41vIdx<>+128(SB), Z12
	VMOVDQU64 q41vIdx<>+192(SB), Z13
	MOVL      $0xff00, AX
	KMOVW     AX, K1
	MOVL      $2, AX
	KMOVW     AX, K2
	MOVL      $4, AX
	KMOVW     AX, K3
	MOVL      $8, AX
	KMOVW     AX, K4
	LEAQ      (R8)(R8*2), R14

	// Groups of eight rows: rows 0..3 at AX, AX+R8, AX+2·R8, AX+R14
	// (3·R8), rows 4..7 the same from R13. Their [d m] words are converted
	// together (F: lanes 2k, 2k+1 row k's d, m), multiplied by x's [dx s]
	// (P: d·dx and m·s), m·s summed in Z4's odd lanes, and Q = [d·dx,
	// d·dx/16] per row permuted out to each pair. The next group's bytes
	// are prefetched in order, 160 a block (eight rows' 20), from DX.
q41v8group:
	MOVQ   SI, AX
	LEAQ   (SI)(R8*4), R13
	LEAQ   (SI)(R8*8), DX
	MOVQ   R9, DI
	MOVQ   R10, CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4

q41v8blk:
	Q41V81_BLOCK(Q41_SCALES_FILE, Q41_ROWS_FILE, $20, q41v8blk)
	Q41V81_FINISH
	ADDQ  $32, R11
	LEAQ  (SI)(R8*8), SI
	SUBQ  $8, R12
	CMPQ  R12, $8
	JGE   q41v8group
	TESTQ R12, R12
	JEQ   q41vdone

	// Fewer than eight rows left: groups of four.
q41vtail:
	VMOVUPS q41Mul<>(SB), Z8
	MOVL    $0xff00, AX
	KMOVW   AX, K1
	MOVL    $0xf0, AX
	KMOVW   AX, K2

q41vgroup:
	// Offsets of rows 1..3, each falling back to the row before it past
	// the last row.
	XORQ    R13, R13
	CMPQ    R12, $2
	CMOVQGE R8, R13
	MOVQ    R13, R14
	LEAQ    (R8)(R8*1), CX
	CMPQ    R12, $3
	CMOVQGE CX, R14
	MOVQ    R14, BX
	ADDQ    R8, CX
	CMPQ    R12, $4
	CMOVQGE CX, BX
	MOVQ    SI, AX
	LEAQ    (SI)(R8*8), DX
	MOVQ    R9, DI
	MOVQ    R10, CX
	VPXORD  Z0, Z0, Z0
	VPXORD  Z1, Z1, Z1
	VPXORD  Z6, Z6, Z6
	VPXORD  Z7, Z7, Z7

q41vblk:
	PREFETCHT0      (DX)
	PREFETCHT0      (DX)(R13*1)
	PREFETCHT0      (DX)(R14*1)
	PREFETCHT0      (DX)(BX*1)
	VPBROADCASTD    (DI), Y2
	VCVTPH2PS       Y2, Z2
	VMULPS          Z8, Z2, Z2
	VBROADCASTI64X4 4(DI), Z5
	Q41PAIR((AX), 4(AX), (AX)(R13*1), 4(AX)(R13*1), Z0, Z6, Z16, Z17, Z18, Y18, Z19)
	Q41PAIR((AX)(R14*1), 4(AX)(R14*1), (AX)(BX*1), 4(AX)(BX*1), Z1, Z7, Z20, Z21, Z22, Y22, Z23)
	ADDQ            $20, AX
	ADDQ            $20, DX
	ADDQ            $36, DI
	DECQ            CX
	JNZ             q41vblk

	VEXTRACTF64X4 $1, Z0, Y3
	VEXTRACTF64X4 $1, Z1, Y11
	VEXTRACTF32X4 $2, Z6, X4
	VEXTRACTF32X4 $2, Z7, X12
	FINISH(Y0, X0, X6)
	VMOVSS        X0, (R11)
	CMPQ          R12, $2
	JLT           q41vdone
	FINISH(Y3, X3, X4)
	VMOVSS        X3, 4(R11)
	CMPQ          R12, $3
	JLT           q41vdone
	FINISH(Y1, X1, X7)
	VMOVSS        X1, 8(R11)
	CMPQ          R12, $4
	JLT           q41vdone
	FINISH(Y11, X11, X12)
	VMOVSS        X11, 12(R11)
	ADDQ          $16, R11
	LEAQ          (SI)(R8*4), SI
	SUBQ          $4, R12
	JNZ           q41vgroup

q41vdone:
	VZEROUPPER
	RET

// The two-activation form of the eight-row groups above, for speculative
// verify steps of two rows (issue 26). dotQ4_1Q8_1Rows2VNNI
// (dotq41v2_amd64.s) steps two weight rows at a time, so every block's
// scales and nibbles are unpacked per pair and its (row, activation,
// block) product costs what the one-row kernel's does: a two-row step cost
// two steps' arithmetic. Here the eight rows' scales are converted and the
// nibbles unpacked once for both activations, and each activation adds
// only its products, VPDPBUSD to FMA, the one-row kernel's per lane (so
// the bits are its, row for row). Registers as the one-row groups', with
// BX the second activation's offset (xstride), R15 its dst's (dstride
// bytes); Z0..Z3 and Z4 the first activation's accumulators and Σ m·s,
// Z16..Z19 and Z29 the second's; Z15 and Z22 its quants and Q, as Z5
// and Z21 are the first's; Z14 the rows' scales, Z6 each activation's
// [dx s] in turn.

// Q41V8_CONSTS: Z9 the nibble masks, Z8 [1, 1/16], Z10..Z13 the pairs'
// scale indices, as the one-row groups load them.
#define Q41V8_CONSTS \
	VMOVDQU64 q41Mask<>(SB), Z9; \
	VMOVUPS   q41vHalf<>(SB), Z8; \
	VMOVDQU64 q41vIdx<>+0(SB), Z10; \
	VMOVDQU64 q41vIdx<>+64(SB), Z11; \
	VMOVDQU64 q41vIdx<>+128(SB), Z12; \
	VMOVDQU64 q41vIdx<>+192(SB), Z13

// Q41PAIR8X2: Q41PAIR8 for both activations from one unpacking.
#define Q41PAIR8X2(q0, q1, idx, acc0, acc1) \
	VBROADCASTI32X4   q0, Y23; \
	VBROADCASTI32X4.Z q1, K1, Z24; \
	VPTERNLOGD        $0xa8, Z9, Z24, Z23; \
	VPXORD            Z25, Z25, Z25; \
	G8_PROD(Z5, Z21, idx, acc0, Z25, Z26); \
	VPXORD            Z27, Z27, Z27; \
	G8_PROD(Z15, Z22, idx, acc1, Z27, Z28)

// FINISH8D: FINISH8 storing through d.
#define FINISH8D(p, accZ, accY, accX, off, d) \
	VEXTRACTF64X4 $1, accZ, Y15; \
	VEXTRACTF32X4 $p, Z4, X14; \
	HSUM(accY, accX, X7); \
	VMOVSHDUP     X14, X5; \
	VADDSS        X5, accX, accX; \
	VMOVSS        accX, off(d); \
	HSUM(Y15, X15, X7); \
	VPERMILPS     $3, X14, X5; \
	VADDSS        X5, X15, X15; \
	VMOVSS        X15, (off+4)(d)

// Q41V82_BLOCK: one block of a group for two activations; scales leaves
// the rows' [d m] in Z14 as F, rows lists the four pairs' quants and wbb
// is the step to the next block.
#define Q41V82_BLOCK(scales, rows, wbb, label) \
	PREFETCHT0      (DX); \
	PREFETCHT0      64(DX); \
	PREFETCHT0      128(DX); \
	VBROADCASTI64X4 4(DI), Z5; \
	VBROADCASTI64X4 4(DI)(BX*1), Z15; \
	scales; \
	Q41ACT8((DI), Z21, Z4); \
	Q41ACT8((DI)(BX*1), Z22, Z29); \
	rows(Q41PAIR8X2X); \
	G8_STEP(wbb, $160, $36, label)

// Q41PAIR8X2X is Q41PAIR8X2 as the layouts' row lists call a pair
// macro, with a third activation's accumulator it has no use for.
#define Q41PAIR8X2X(q0, q1, idx, acc0, acc1, acc2) Q41PAIR8X2(q0, q1, idx, acc0, acc1)

#define Q41V82_ZERO \
	ZERO4(Z0, Z1, Z2, Z3); \
	VPXORD Z4, Z4, Z4; \
	ZERO4(Z16, Z17, Z18, Z19); \
	VPXORD Z29, Z29, Z29

// Q41V82_END stores a group's results for both activations and steps to
// the next group.
#define Q41V82_END(group) \
	FINISH8D(0, Z0, Y0, X0, 0, R11); \
	FINISH8D(1, Z1, Y1, X1, 8, R11); \
	FINISH8D(2, Z2, Y2, X2, 16, R11); \
	FINISH8D(3, Z3, Y3, X3, 24, R11); \
	MOVE4(Z16, Z17, Z18, Z19); \
	VMOVAPS Z29, Z4; \
	LEAQ    (R11)(R15*1), DX; \
	FINISH8D(0, Z0, Y0, X0, 0, DX); \
	FINISH8D(1, Z1, Y1, X1, 8, DX); \
	FINISH8D(2, Z2, Y2, X2, 16, DX); \
	FINISH8D(3, Z3, Y3, X3, 24, DX); \
	G8_NEXT(group)

// func dotQ4_1Q8_1Rows8x2VNNI(w *byte, wstride int, x *byte, xstride int, nb int, dst *float32, dstride int, groups int)
TEXT ·dotQ4_1Q8_1Rows8x2VNNI(SB), NOSPLIT, $0-64
	Q41V8_CONSTS
	G8_ARGS($0xff00)

q41v82group:
	G8_GROUP
	Q41V82_ZERO

q41v82blk:
	Q41V82_BLOCK(Q41_SCALES_FILE, Q41_ROWS_FILE, $20, q41v82blk)
	Q41V82_END(q41v82group)
	VZEROUPPER
	RET

// The three-activation form, for verify steps of three rows: as
// dotQ4_1Q8_1Rows8x2VNNI with a third activation at 2·xstride (quants
// Z31, Q Z7, Σ m·s Z30, accumulators Z24..Z27), which takes every zmm: Z6
// holds each activation's [dx s] in turn and then, with Z20, the products.

// Q41PROD8: one activation's part of a pair: acc += Q's scales (by idx)
// times the products of its quants x with the unpacked levels in Z23.
#define Q41PROD8(x, q, idx, acc) \
	VPXORD Z6, Z6, Z6; \
	G8_PROD(x, q, idx, acc, Z6, Z20)

#define Q41PAIR8X3(q0, q1, idx, acc0, acc1, acc2) \
	VBROADCASTI32X4   q0, Y23; \
	VBROADCASTI32X4.Z q1, K1, Z28; \
	VPTERNLOGD        $0xa8, Z9, Z28, Z23; \
	Q41PROD8(Z5, Z21, idx, acc0); \
	Q41PROD8(Z15, Z22, idx, acc1); \
	Q41PROD8(Z31, Z7, idx, acc2)

// FINISH8X: the four pairs' rows from Z0..Z3 and Z4, through d.
#define FINISH8X(d) \
	FINISH8D(0, Z0, Y0, X0, 0, d); \
	FINISH8D(1, Z1, Y1, X1, 8, d); \
	FINISH8D(2, Z2, Y2, X2, 16, d); \
	FINISH8D(3, Z3, Y3, X3, 24, d)

// Q41PAIR8X3X is Q41PAIR8X3 as the layouts' lists call a pair macro.
#define Q41PAIR8X3X(q0, q1, idx, acc0, acc1, acc2) Q41PAIR8X3(q0, q1, idx, acc0, acc1, acc2)

#define Q41V83_ZERO \
	Q41V82_ZERO; \
	ZERO4(Z24, Z25, Z26, Z27); \
	VPXORD Z30, Z30, Z30

// Q41V83_BLOCK is Q41V82_BLOCK with the third activation.
#define Q41V83_BLOCK(scales, rows, wbb, label) \
	PREFETCHT0      (DX); \
	PREFETCHT0      64(DX); \
	PREFETCHT0      128(DX); \
	VBROADCASTI64X4 4(DI), Z5; \
	VBROADCASTI64X4 4(DI)(BX*1), Z15; \
	VBROADCASTI64X4 4(DI)(BX*2), Z31; \
	scales; \
	Q41ACT8((DI), Z21, Z4); \
	Q41ACT8((DI)(BX*1), Z22, Z29); \
	Q41ACT8((DI)(BX*2), Z7, Z30); \
	rows(Q41PAIR8X3X); \
	G8_STEP(wbb, $160, $36, label)

#define Q41V83_END(group) \
	FINISH8X(R11); \
	MOVE4(Z16, Z17, Z18, Z19); \
	VMOVAPS Z29, Z4; \
	LEAQ    (R11)(R15*1), DX; \
	FINISH8X(DX); \
	MOVE4(Z24, Z25, Z26, Z27); \
	VMOVAPS Z30, Z4; \
	LEAQ    (DX)(R15*1), DX; \
	FINISH8X(DX); \
	G8_NEXT(group)

// func dotQ4_1Q8_1Rows8x3VNNI(w *byte, wstride int, x *byte, xstride int, nb int, dst *float32, dstride int, groups int)
TEXT ·dotQ4_1Q8_1Rows8x3VNNI(SB), NOSPLIT, $0-64
	Q41V8_CONSTS
	G8_ARGS($0xff00)

q41v83group:
	G8_GROUP
	Q41V83_ZERO

q41v83blk:
	Q41V83_BLOCK(Q41_SCALES_FILE, Q41_ROWS_FILE, $20, q41v83blk)
	Q41V83_END(q41v83group)
	VZEROUPPER
	RET
