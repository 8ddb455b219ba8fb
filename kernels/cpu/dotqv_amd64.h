// Macros shared by the AVX-512 VNNI multi-activation kernels
// (dotq8v_amd64.s, dotq5v_amd64.s, and moe_amd64.s's offset Q8_0 kernels):
// a zmm holds two weight rows' products with one activation block, in
// dotq8v_amd64.s's registers. The weight type's PAIR_LOAD leaves the pair's
// magnitudes in Z17, signs in K1 and scales in Z18.

// VPROD: acc += d·dx (dx at off(BX)) · Σ fours of |level| × the
// activation block at mem signed by the level, for both rows.
#define VPROD(off, mem, acc, q, s, t) \
	VBROADCASTI64X4 mem, q; \
	VPSUBB          q, Z31, K1, q; \
	VPXORD          s, s, s; \
	VPDPBUSD        q, Z17, s; \
	VCVTDQ2PS       s, s; \
	VMULPS.BCST     off(BX), Z18, t; \
	VFMADD231PS     s, t, acc

// SAVE_HIGH keeps row r+1's halves of the accumulators in Z16..Z23 before
// HSUM's VEX forms clear the upper lanes.
#define SAVE_HIGH4 \
	VEXTRACTF64X4 $1, Z0, Y16; \
	VEXTRACTF64X4 $1, Z1, Y17; \
	VEXTRACTF64X4 $1, Z2, Y18; \
	VEXTRACTF64X4 $1, Z3, Y19

#define SAVE_HIGH8 \
	SAVE_HIGH4; \
	VEXTRACTF64X4 $1, Z4, Y20; \
	VEXTRACTF64X4 $1, Z5, Y21; \
	VEXTRACTF64X4 $1, Z6, Y22; \
	VEXTRACTF64X4 $1, Z7, Y23

#define RESTORE_HIGH4 \
	VMOVAPS Y16, Y0; \
	VMOVAPS Y17, Y1; \
	VMOVAPS Y18, Y2; \
	VMOVAPS Y19, Y3

#define RESTORE_HIGH8 \
	RESTORE_HIGH4; \
	VMOVAPS Y20, Y4; \
	VMOVAPS Y21, Y5; \
	VMOVAPS Y22, Y6; \
	VMOVAPS Y23, Y7

#define VHSUM4 \
	HSUM(Y0, X0, X13); \
	HSUM(Y1, X1, X13); \
	HSUM(Y2, X2, X13); \
	HSUM(Y3, X3, X13)

#define VHSUM8 \
	VHSUM4; \
	HSUM(Y4, X4, X13); \
	HSUM(Y5, X5, X13); \
	HSUM(Y6, X6, X13); \
	HSUM(Y7, X7, X13)

// VSTORE4/VSTORE8 write one row's results at dst+off (BX is free by now).
#define VSTORE4(off) \
	VMOVSS X0, off(R12); \
	VMOVSS X1, off(R12)(R13*1); \
	VMOVSS X2, off(R12)(R13*2); \
	LEAQ   (R12)(R13*2), BX; \
	VMOVSS X3, off(BX)(R13*1)

#define VSTORE8(off) \
	VMOVSS X0, off(R12); \
	VMOVSS X1, off(R12)(R13*1); \
	VMOVSS X2, off(R12)(R13*2); \
	VMOVSS X4, off(R12)(R13*4); \
	LEAQ   (R12)(R13*2), BX; \
	ADDQ   R13, BX; \
	VMOVSS X3, off(BX); \
	VMOVSS X5, off(BX)(R13*2); \
	VMOVSS X7, off(BX)(R13*4); \
	ADDQ   R13, BX; \
	ADDQ   R13, BX; \
	ADDQ   R13, BX; \
	VMOVSS X6, off(BX)

#define VLOAD_ARGS \
	MOVQ   w+0(FP), SI; \
	MOVQ   wstride+8(FP), R8; \
	MOVQ   xstride+24(FP), R10; \
	MOVQ   dst+48(FP), R12; \
	MOVQ   dstride+56(FP), R13; \
	SHLQ   $2, R13; \
	MOVQ   rows+64(FP), R14; \
	VPXORD Z31, Z31, Z31

// VPAIR_START picks row r+1 (or row r again for a lone last row).
#define VPAIR_START(done) \
	TESTQ  R14, R14; \
	JEQ    done; \
	MOVQ   R8, R9; \
	XORQ   AX, AX; \
	CMPQ   R14, $1; \
	CMOVQEQ AX, R9; \
	MOVQ   SI, AX; \
	MOVQ   nb+40(FP), CX; \
	MOVQ   sc+32(FP), BX

// VPAIR_NEXT moves on past the pair (or ends after a lone row).
#define VPAIR_NEXT(loop, done) \
	TESTQ R9, R9; \
	JEQ   done; \
	ADDQ  $8, R12; \
	LEAQ  (SI)(R8*2), SI; \
	SUBQ  $2, R14; \
	JMP   loop
