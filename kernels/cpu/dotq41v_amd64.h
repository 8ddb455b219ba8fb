// The AVX-512 VNNI Q4_1 kernels' constants and pair macros, shared by
// the one-row kernel (dotq41v_amd64.s: the tables) and the two- to
// eight-activation ones (dotq41v2_amd64.s, dotq41v4_amd64.s: all of it);
// dotq41v4_amd64.s's header gives the lane layout and the argument for
// bit-exactness. DATA symbols are file-local (<>), so each file that
// includes this gets its own copy of the tables.

// q41Mask keeps the low nibbles in dword lanes 0..3 and 8..11 and the
// high nibbles, in place (not shifted), in lanes 4..7 and 12..15.
DATA q41Mask<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q41Mask<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q41Mask<>+16(SB)/8, $0xf0f0f0f0f0f0f0f0
DATA q41Mask<>+24(SB)/8, $0xf0f0f0f0f0f0f0f0
DATA q41Mask<>+32(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q41Mask<>+40(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q41Mask<>+48(SB)/8, $0xf0f0f0f0f0f0f0f0
DATA q41Mask<>+56(SB)/8, $0xf0f0f0f0f0f0f0f0
GLOBL q41Mask<>(SB), RODATA|NOPTR, $64

// 1.0 (0x3f800000) for the low-nibble lanes, 1/16 (0x3d800000) for the high.
DATA q41Mul<>+0(SB)/8, $0x3f8000003f800000
DATA q41Mul<>+8(SB)/8, $0x3f8000003f800000
DATA q41Mul<>+16(SB)/8, $0x3d8000003d800000
DATA q41Mul<>+24(SB)/8, $0x3d8000003d800000
DATA q41Mul<>+32(SB)/8, $0x3f8000003f800000
DATA q41Mul<>+40(SB)/8, $0x3f8000003f800000
DATA q41Mul<>+48(SB)/8, $0x3d8000003d800000
DATA q41Mul<>+56(SB)/8, $0x3d8000003d800000
GLOBL q41Mul<>(SB), RODATA|NOPTR, $64

// Q41V_CONSTS loads the constants and masks; it comes before R15 is set
// (a global's address may clobber R15 when dynamically linking).
#define Q41V_CONSTS \
	VMOVUPS   q41Mul<>(SB), Z8; \
	VMOVDQU64 q41Mask<>(SB), Z9; \
	MOVL      $0xff00, AX; \
	KMOVW     AX, K1; \
	MOVL      $0xf0, AX; \
	KMOVW     AX, K2

// Q41V_PAIR reads the pair's blocks: levels into Z16 (zero-masked or
// zero-extending loads merged with the nibble masks by one VPTERNLOGD,
// (w|v)&mask), d into Z19 and m into Z20 as laid out above, and adds
// [m_r ×8, m_r+1 ×8] × the activations' s (S, a zmm of them) to Z10.
#define Q41V_PAIR(S) Q41V_PAIRAT(S, 4(AX), 4(AX)(R9*1), (AX), (AX)(R9*1))

// Q41V_PAIRAT is Q41V_PAIR with the rows' quants at q0 and q1 and their
// [d m] words at s0 and s1.
#define Q41V_PAIRAT(S, q0, q1, s0, s1) Q41V_PAIRR(S, q0, q1, s0, s1, Z16, Y16, Z17, Z18, Y18, Z19, Z20, Z10)

// Q41V_PAIRR is Q41V_PAIRAT into the registers given: levels lv (lvY its
// ymm), d·dx factors d, Σ m·s ms; t, f (fY) and m are scratch.
#define Q41V_PAIRR(S, q0, q1, s0, s1, lv, lvY, t, f, fY, d, m, ms) \
	VBROADCASTI32X4   q0, lvY; \
	VBROADCASTI32X4.Z q1, K1, t; \
	VPTERNLOGD        $0xa8, Z9, t, lv; \
	VPBROADCASTD      s0, fY; \
	VPBROADCASTD      s1, K2, fY; \
	VCVTPH2PS         fY, f; \
	VMOVSLDUP         f, d; \
	VMULPS            Z8, d, d; \
	VMOVSHDUP         f, m; \
	VMULPS            S, m, m; \
	VADDPS            m, ms, ms

// Q41VPROD: acc += [d·dx, d·dx/16] (dx at off(BX)) · Σ fours of the
// pair's levels × the activation block's quants at mem, for both rows.
#define Q41VPROD(off, mem, acc, q, c, t) \
	VBROADCASTI64X4 mem, q; \
	VPXORD          c, c, c; \
	VPDPBUSD        q, Z16, c; \
	VCVTDQ2PS       c, c; \
	VMULPS.BCST     off(BX), Z19, t; \
	VFMADD231PS     c, t, acc
