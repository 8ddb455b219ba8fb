// Shared by the quantized dot kernels (dotq_amd64.s, dotk_amd64.s).

#include "textflag.h"

// HSUM leaves in lane 0 of accX the sum of accY's eight lanes.
#define HSUM(accY, accX, tX) \
	VEXTRACTF128 $1, accY, tX; \
	VADDPS       tX, accX, accX; \
	VHADDPS      accX, accX, accX; \
	VHADDPS      accX, accX, accX

// ONES_I16 fills dY with int16 ones (VPMADDWD by it widens pairs to int32).
#define ONES_I16(dY, dX) \
	MOVL         $0x00010001, DX; \
	VMOVD        DX, dX; \
	VPBROADCASTD dX, dY

// NIBBLE_MASK fills dY with 0x0f bytes.
#define NIBBLE_MASK(dY, dX) \
	MOVL         $0x0f0f0f0f, DX; \
	VMOVD        DX, dX; \
	VPBROADCASTD dX, dY

// Constants for the 5-bit types: expanding qh's 32 bits into 32 bytes
// (ggml's bytes_from_bits_32): broadcast the word, give byte k a copy of
// qh byte k/8, set every bit but bit k%8, compare with all-ones.
DATA bitsShuf<>+0(SB)/8, $0x0000000000000000
DATA bitsShuf<>+8(SB)/8, $0x0101010101010101
DATA bitsShuf<>+16(SB)/8, $0x0202020202020202
DATA bitsShuf<>+24(SB)/8, $0x0303030303030303
GLOBL bitsShuf<>(SB), RODATA|NOPTR, $32

DATA bitsMask<>+0(SB)/8, $0x7fbfdfeff7fbfdfe
DATA bitsMask<>+8(SB)/8, $0x7fbfdfeff7fbfdfe
DATA bitsMask<>+16(SB)/8, $0x7fbfdfeff7fbfdfe
DATA bitsMask<>+24(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL bitsMask<>(SB), RODATA|NOPTR, $32

DATA bytesF0<>+0(SB)/8, $0xf0f0f0f0f0f0f0f0
DATA bytesF0<>+8(SB)/8, $0xf0f0f0f0f0f0f0f0
DATA bytesF0<>+16(SB)/8, $0xf0f0f0f0f0f0f0f0
DATA bytesF0<>+24(SB)/8, $0xf0f0f0f0f0f0f0f0
GLOBL bytesF0<>(SB), RODATA|NOPTR, $32

DATA bytes10<>+0(SB)/8, $0x1010101010101010
DATA bytes10<>+8(SB)/8, $0x1010101010101010
DATA bytes10<>+16(SB)/8, $0x1010101010101010
DATA bytes10<>+24(SB)/8, $0x1010101010101010
GLOBL bytes10<>(SB), RODATA|NOPTR, $32

DATA bytes08<>+0(SB)/8, $0x0808080808080808
DATA bytes08<>+8(SB)/8, $0x0808080808080808
DATA bytes08<>+16(SB)/8, $0x0808080808080808
DATA bytes08<>+24(SB)/8, $0x0808080808080808
GLOBL bytes08<>(SB), RODATA|NOPTR, $32

DATA bytesFF<>+0(SB)/8, $0xffffffffffffffff
DATA bytesFF<>+8(SB)/8, $0xffffffffffffffff
DATA bytesFF<>+16(SB)/8, $0xffffffffffffffff
DATA bytesFF<>+24(SB)/8, $0xffffffffffffffff
GLOBL bytesFF<>(SB), RODATA|NOPTR, $32

// NIBBLES loads 16 bytes at off(wp) into uY as 32 levels: low nibbles, then
// high nibbles (vX is scratch).
#define NIBBLES(wp, off, uX, uY, vX) \
	VMOVDQU     off(wp), uX; \
	VPSRLW      $4, uX, vX; \
	VINSERTI128 $1, vX, uY, uY; \
	VPAND       Y9, uY, uY // Y9: NIBBLE_MASK

// HIGHBITS puts 32 bytes in hY: 0xff where bit k of the word at off(wp) is set.
#define HIGHBITS(wp, off, hY) \
	VPBROADCASTD off(wp), hY; \
	VPSHUFB      bitsShuf<>(SB), hY, hY; \
	VPOR         bitsMask<>(SB), hY, hY; \
	VPCMPEQB     bytesFF<>(SB), hY, hY

// SCALE_D puts d·dx (d the f16 at (wp), dx in X2) in every lane of tY.
#define SCALE_D(wp, tX, tY) \
	VMOVD        (wp), tX; \
	VCVTPH2PS    tX, tX; \
	VMULSS       tX, X2, tX; \
	VBROADCASTSS tX, tY

// SIGNED_DOT: accY += tY · Σ pairs of (signed levels uY)·(signed quants Y5),
// through |u|·(x·sign u) since VPMADDUBSW wants one unsigned operand.
#define SIGNED_DOT(accY, tY, uY, vY) \
	VPSIGNB     uY, uY, vY; \
	VPSIGNB     uY, Y5, uY; \
	VPMADDUBSW  uY, vY, vY; \
	VPMADDWD    Y10, vY, vY; \
	VCVTDQ2PS   vY, vY; \
	VFMADD231PS vY, tY, accY

// UNSIGNED_DOT: accY += tY · Σ pairs of (levels 0..31 in uY)·(quants Y5).
#define UNSIGNED_DOT(accY, tY, uY) \
	VPMADDUBSW  Y5, uY, uY; \
	VPMADDWD    Y10, uY, uY; \
	VCVTDQ2PS   uY, uY; \
	VFMADD231PS uY, tY, accY

// SCALE_DM: [d·dx, m·s] from the f16 pair at (wp) and [dx, s] in X2; the
// pair is added to msX and d·dx broadcast into tY.
#define SCALE_DM(wp, msX, tX, tY) \
	VMOVD        (wp), tX; \
	VCVTPH2PS    tX, tX; \
	VMULPS       tX, X2, tX; \
	VADDPS       tX, msX, msX; \
	VBROADCASTSS tX, tY
