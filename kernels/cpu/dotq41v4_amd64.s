//go:build amd64 && !noasm

#include "dotq_amd64.h"

// AVX-512 VNNI forms of dotQ4_1Q8_1Rows4/Rows8 (dotq4_amd64.s,
// dotq8_amd64.s), the kernels of speculative verify steps and small
// batches (issue 26). The AVX2 kernels spend five port-0/1/5 µops on every
// (weight row, activation, block) product; here a zmm holds two weight
// rows' products with one activation block (lanes 0..7 row r, 8..15 row
// r+1, each half laid out as the AVX2 kernel's ymm) and one VPDPBUSD
// replaces VPMADDUBSW + VPMADDWD: four µops per two products.
//
// Bit-exact with the AVX2 kernels, which are bit-exact with the one-row
// kernel (design invariant 6), on dotq41v_amd64.s's argument:
//   - VPDPBUSD(levels, x) gives each int32 lane the four-byte sum
//     VPMADDUBSW + VPMADDWD gives (no int16 pair can saturate: 2·15·128).
//   - High nibbles are masked in place (0xf0), not shifted, so their lanes
//     hold 16× the sum, which converts exactly (< 2²⁴), and meet
//     d·dx/16: (d/16)·dx rounds to exactly round(d·dx)/16, the products of
//     f16-sized scales being far from f32's subnormals, so the FMA rounds
//     the same exact v·d·dx + acc once.
//   - Each half's FMA chain over the blocks, its horizontal sum, and the
//     sequential Σ m·s_j added last are the AVX2 kernel's, lane for lane.
//
// Registers (dotqv_amd64.h's): SI row r's base, R8 wstride, R9 row r+1's
// offset from row r (0 for a lone last row, which then fills both halves),
// R10 xstride, R12 dst, R13 dstride in bytes, R14 rows left; AX row r's
// block, R15 the offset of row r+9's block from it (row r+8's is R8·8:
// both are prefetched, since the pairs step two rows), CX blocks left, BX the
// block's activation scales, DI/DX/R11 the activation blocks (as
// dotq8_amd64.s); Z0..Z7 the accumulators; Z8 [1 ×4, 1/16 ×4]×2, Z9 the
// nibble masks, Z10 Σ m·s_j (row r from lane 0, row r+1 from lane 8); in
// the loop Z16 the pair's levels, Z19 [d_r ×4, d_r/16 ×4, d_r+1 ×4,
// d_r+1/16 ×4], Z20 [m_r ×8, m_r+1 ×8]; K1 the upper eight dwords of a
// zmm, K2 the upper four of a ymm.


#include "dotqv_amd64.h"
#include "dotq41v_amd64.h"

// Q41V_MS4 adds lanes 0..3 of msX (Σ m·s_j) to a0..a3, as ADD_MS4 does.
#define Q41V_MS4(msX, a0, a1, a2, a3) \
	VADDSS    msX, a0, a0; \
	VMOVSHDUP msX, X13; \
	VADDSS    X13, a1, a1; \
	VMOVHLPS  msX, msX, X13; \
	VADDSS    X13, a2, a2; \
	VPERMILPS $3, msX, X13; \
	VADDSS    X13, a3, a3

// func dotQ4_1Q8_1Rows4VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
// sc per block: [dx0..dx3 s0..s3]; Z21 [s0..s3]×4, so lanes 0..3 of Z10
// hold row r's Σ m·s_j and lanes 8..11 row r+1's.
TEXT ·dotQ4_1Q8_1Rows4VNNI(SB), NOSPLIT, $0-72
	Q41V_CONSTS
	VLOAD_ARGS

q41v4row:
	VPAIR_START(q41v4done)
	MOVQ   x+16(FP), DI
	LEAQ   (DI)(R10*2), DX
	LEAQ   (R9)(R8*8), R15
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z10, Z10, Z10

q41v4blk:
	PREFETCHT0      (AX)(R8*8)
	PREFETCHT0      (AX)(R15*1)
	VBROADCASTF32X4 16(BX), Z21
	Q41V_PAIR(Z21)
	Q41VPROD(0, 4(DI), Z0, Z22, Z23, Z24)
	Q41VPROD(4, 4(DI)(R10*1), Z1, Z25, Z26, Z27)
	Q41VPROD(8, 4(DX), Z2, Z28, Z29, Z30)
	Q41VPROD(12, 4(DX)(R10*1), Z3, Z22, Z23, Z24)
	ADDQ            $20, AX
	ADDQ            $36, DI
	ADDQ            $36, DX
	ADDQ            $32, BX
	DECQ            CX
	JNZ             q41v4blk

	VEXTRACTF32X4 $2, Z10, X11
	SAVE_HIGH4
	VHSUM4
	Q41V_MS4(X10, X0, X1, X2, X3)
	VSTORE4(0)
	TESTQ R9, R9
	JEQ   q41v4done
	RESTORE_HIGH4
	VHSUM4
	Q41V_MS4(X11, X0, X1, X2, X3)
	VSTORE4(4)
	VPAIR_NEXT(q41v4row, q41v4done)

q41v4done:
	VZEROUPPER
	RET

// func dotQ4_1Q8_1Rows8VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
// sc per block: [dx0..dx7 s0..s7]; Z21 [s0..s7]×2, so lanes 0..7 of Z10
// hold row r's Σ m·s_j and lanes 8..15 row r+1's.
TEXT ·dotQ4_1Q8_1Rows8VNNI(SB), NOSPLIT, $0-72
	Q41V_CONSTS
	VLOAD_ARGS

q41v8row:
	VPAIR_START(q41v8done)
	MOVQ   x+16(FP), DI
	LEAQ   (DI)(R10*2), DX
	ADDQ   R10, DX
	LEAQ   (DX)(R10*2), R11
	ADDQ   R10, R11
	LEAQ   (R9)(R8*8), R15
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	VXORPS Z10, Z10, Z10

q41v8blk:
	PREFETCHT0      (AX)(R8*8)
	PREFETCHT0      (AX)(R15*1)
	VBROADCASTF64X4 32(BX), Z21
	Q41V_PAIR(Z21)
	Q41VPROD(0, 4(DI), Z0, Z22, Z23, Z24)
	Q41VPROD(4, 4(DI)(R10*1), Z1, Z25, Z26, Z27)
	Q41VPROD(8, 4(DI)(R10*2), Z2, Z28, Z29, Z30)
	Q41VPROD(12, 4(DX), Z3, Z11, Z12, Z13)
	Q41VPROD(16, 4(DI)(R10*4), Z4, Z22, Z23, Z24)
	Q41VPROD(20, 4(DX)(R10*2), Z5, Z25, Z26, Z27)
	Q41VPROD(24, 4(R11), Z6, Z28, Z29, Z30)
	Q41VPROD(28, 4(DX)(R10*4), Z7, Z11, Z12, Z13)
	ADDQ            $20, AX
	ADDQ            $36, DI
	ADDQ            $36, DX
	ADDQ            $36, R11
	ADDQ            $64, BX
	DECQ            CX
	JNZ             q41v8blk

	VEXTRACTF64X4 $1, Z10, Y11
	SAVE_HIGH8
	VHSUM8
	Q41V_MS4(X10, X0, X1, X2, X3)
	VEXTRACTF128  $1, Y10, X10
	Q41V_MS4(X10, X4, X5, X6, X7)
	VSTORE8(0)
	TESTQ R9, R9
	JEQ   q41v8done
	RESTORE_HIGH8
	VHSUM8
	Q41V_MS4(X11, X0, X1, X2, X3)
	VEXTRACTF128  $1, Y11, X11
	Q41V_MS4(X11, X4, X5, X6, X7)
	VSTORE8(4)
	VPAIR_NEXT(q41v8row, q41v8done)

q41v8done:
	VZEROUPPER
	RET

// The grouped forms (q41pack.go) of the two kernels above, rows a multiple
// of eight. A pass takes two row pairs, A and B (rows 4q..4q+3 of a
// group), so each activation block is loaded once for four rows: A's
// [d m] words at AX = group + 16q and its quants at R9 = group + 32 + 64q,
// B's 8 and 32 bytes on, each block 160 bytes on. SI and R15 hold AX and
// R9 at block 0.

// Q41G_PAIR_START points the pass's registers at its block 0.
#define Q41G_PAIR_START \
	MOVQ SI, AX; \
	MOVQ R15, R9; \
	MOVQ nb+40(FP), CX; \
	MOVQ sc+32(FP), BX

// Q41G_STEP steps the pass's weight registers to the next block, having
// prefetched the next group's block whole: in a group's first pass that
// is the next group's bytes two passes ahead; in its second it costs only
// load slots.
#define Q41G_STEP \
	PREFETCHT0 (AX)(R8*8); \
	PREFETCHT0 64(AX)(R8*8); \
	PREFETCHT0 128(AX)(R8*8); \
	ADDQ       $160, AX; \
	ADDQ       $160, R9

// Q41G_PASS_NEXT moves on to the next four rows, from a group's second
// pass to the next group's first (8·wstride on from the group), and loops.
#define Q41G_PASS_NEXT(loop, done) \
	ADDQ  $16, R12; \
	ADDQ  $16, SI; \
	ADDQ  $64, R15; \
	SUBQ  $4, R14; \
	JEQ   done; \
	TESTQ $7, R14; \
	JNZ   loop; \
	LEAQ  -32(SI)(R8*8), SI; \
	LEAQ  -128(R15)(R8*8), R15; \
	JMP   loop

// Q41G_PROD2: Q41VPROD for two pairs at once, the activation block at
// mem loaded once (into q): accA += pair A's (levels Z16, factors Z19)
// products, accB += pair B's (levels lvB, factors dB); cA, tA, cB and tB
// are scratch.
#define Q41G_PROD2(off, mem, accA, accB, lvB, dB, q, cA, tA, cB, tB) \
	VBROADCASTI64X4 mem, q; \
	VPXORD          cA, cA, cA; \
	VPDPBUSD        q, Z16, cA; \
	VCVTDQ2PS       cA, cA; \
	VMULPS.BCST     off(BX), Z19, tA; \
	VFMADD231PS     cA, tA, accA; \
	VPXORD          cB, cB, cB; \
	VPDPBUSD        q, lvB, cB; \
	VCVTDQ2PS       cB, cB; \
	VMULPS.BCST     off(BX), dB, tB; \
	VFMADD231PS     cB, tB, accB

// Q41G4_PROD: the four-activation kernel's (B in Z24, Z27).
#define Q41G4_PROD(off, mem, accA, accB) Q41G_PROD2(off, mem, accA, accB, Z24, Z27, Z22, Z23, Z29, Z30, Z31)

// Q41G8_PROD: the eight-activation kernel's, which has registers for fewer
// temporaries (B in Z20, Z12).
#define Q41G8_PROD(off, mem, accA, accB) Q41G_PROD2(off, mem, accA, accB, Z20, Z12, Z23, Z13, Z14, Z15, Z17)

// Q41G4_FINISH stores a pair's four activations' results (accumulators
// Z0..Z3, Σ m·s Z10) for rows off/4 and off/4 + 1.
#define Q41G4_FINISH(off) \
	VEXTRACTF32X4 $2, Z10, X11; \
	SAVE_HIGH4; \
	VHSUM4; \
	Q41V_MS4(X10, X0, X1, X2, X3); \
	VSTORE4(off); \
	RESTORE_HIGH4; \
	VHSUM4; \
	Q41V_MS4(X11, X0, X1, X2, X3); \
	VSTORE4(off+4)

// dotQ4_1Q8_1Rows4GVNNI: pair A in the one-pair kernel's registers, B's
// accumulators in Z4..Z7, its Σ m·s in Z12. One pair a pass, as the file
// layout's kernel goes, ran 4-10% slower than it at the step (SmolLM2, 2
// threads): each pass then walked every line of the group for a quarter of
// its bytes.
// func dotQ4_1Q8_1Rows4GVNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ4_1Q8_1Rows4GVNNI(SB), NOSPLIT, $0-72
	Q41V_CONSTS
	VLOAD_ARGS
	LEAQ 32(SI), R15

q41g4row:
	Q41G_PAIR_START
	MOVQ   x+16(FP), DI
	LEAQ   (DI)(R10*2), DX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	VXORPS Z10, Z10, Z10
	VXORPS Z12, Z12, Z12

q41g4blk:
	VBROADCASTF32X4 16(BX), Z21
	Q41V_PAIRAT(Z21, (R9), 16(R9), (AX), 4(AX))
	Q41V_PAIRR(Z21, 32(R9), 48(R9), 8(AX), 12(AX), Z24, Y24, Z25, Z26, Y26, Z27, Z28, Z12)
	Q41G4_PROD(0, 4(DI), Z0, Z4)
	Q41G4_PROD(4, 4(DI)(R10*1), Z1, Z5)
	Q41G4_PROD(8, 4(DX), Z2, Z6)
	Q41G4_PROD(12, 4(DX)(R10*1), Z3, Z7)
	Q41G_STEP
	ADDQ            $36, DI
	ADDQ            $36, DX
	ADDQ            $32, BX
	DECQ            CX
	JNZ             q41g4blk

	Q41G4_FINISH(0)
	VMOVAPS Z4, Z0
	VMOVAPS Z5, Z1
	VMOVAPS Z6, Z2
	VMOVAPS Z7, Z3
	VMOVAPS Z12, Z10
	Q41G4_FINISH(8)
	Q41G_PASS_NEXT(q41g4row, q41g4done)

q41g4done:
	VZEROUPPER
	RET

// Q41G8_FINISH stores a pair's eight activations' results (accumulators
// Z0..Z7, Σ m·s Z10) for rows off/4 and off/4 + 1.
#define Q41G8_FINISH(off) \
	VEXTRACTF64X4 $1, Z10, Y11; \
	SAVE_HIGH8; \
	VHSUM8; \
	Q41V_MS4(X10, X0, X1, X2, X3); \
	VEXTRACTF128  $1, Y10, X10; \
	Q41V_MS4(X10, X4, X5, X6, X7); \
	VSTORE8(off); \
	RESTORE_HIGH8; \
	VHSUM8; \
	Q41V_MS4(X11, X0, X1, X2, X3); \
	VEXTRACTF128  $1, Y11, X11; \
	Q41V_MS4(X11, X4, X5, X6, X7); \
	VSTORE8(off+4)

// dotQ4_1Q8_1Rows8GVNNI: pair A's accumulators in Z0..Z7 and Σ m·s in
// Z10, B's in Z24..Z31 and Z11.
// func dotQ4_1Q8_1Rows8GVNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)
TEXT ·dotQ4_1Q8_1Rows8GVNNI(SB), NOSPLIT, $0-72
	Q41V_CONSTS
	VLOAD_ARGS
	LEAQ 32(SI), R15

q41g8row:
	Q41G_PAIR_START
	MOVQ   x+16(FP), DI
	LEAQ   (DI)(R10*2), DX
	ADDQ   R10, DX
	LEAQ   (DX)(R10*2), R11
	ADDQ   R10, R11
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	VXORPS Z10, Z10, Z10
	VXORPS Z11, Z11, Z11
	VXORPS Z24, Z24, Z24
	VXORPS Z25, Z25, Z25
	VXORPS Z26, Z26, Z26
	VXORPS Z27, Z27, Z27
	VXORPS Z28, Z28, Z28
	VXORPS Z29, Z29, Z29
	VXORPS Z30, Z30, Z30
	VXORPS Z31, Z31, Z31

q41g8blk:
	VBROADCASTF64X4 32(BX), Z21
	Q41V_PAIRAT(Z21, (R9), 16(R9), (AX), 4(AX))
	Q41V_PAIRR(Z21, 32(R9), 48(R9), 8(AX), 12(AX), Z20, Y20, Z17, Z18, Y18, Z12, Z22, Z11)
	Q41G8_PROD(0, 4(DI), Z0, Z24)
	Q41G8_PROD(4, 4(DI)(R10*1), Z1, Z25)
	Q41G8_PROD(8, 4(DI)(R10*2), Z2, Z26)
	Q41G8_PROD(12, 4(DX), Z3, Z27)
	Q41G8_PROD(16, 4(DI)(R10*4), Z4, Z28)
	Q41G8_PROD(20, 4(DX)(R10*2), Z5, Z29)
	Q41G8_PROD(24, 4(R11), Z6, Z30)
	Q41G8_PROD(28, 4(DX)(R10*4), Z7, Z31)
	Q41G_STEP
	ADDQ            $36, DI
	ADDQ            $36, DX
	ADDQ            $36, R11
	ADDQ            $64, BX
	DECQ            CX
	JNZ             q41g8blk

	VMOVAPS Z11, Z15
	Q41G8_FINISH(0)
	VMOVAPS Z24, Z0
	VMOVAPS Z25, Z1
	VMOVAPS Z26, Z2
	VMOVAPS Z27, Z3
	VMOVAPS Z28, Z4
	VMOVAPS Z29, Z5
	VMOVAPS Z30, Z6
	VMOVAPS Z31, Z7
	VMOVAPS Z15, Z10
	Q41G8_FINISH(8)
	Q41G_PASS_NEXT(q41g8row, q41g8done)

q41g8done:
	VZEROUPPER
	RET
