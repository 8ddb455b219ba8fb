//go:build amd64 && !noasm

#include "textflag.h"

// Activation quantizers, bit-identical to quant.ActQ8_0/ActQ8_1 (which follow
// ggml's x86 quantize_row_q8_0/q8_1): per 32 floats amax, d = amax/127 → f16,
// q = round-half-even(x·(127/amax)), and for Q8_1 s = f16(d·Σq).

DATA absMask<>+0(SB)/4, $0x7fffffff
GLOBL absMask<>(SB), RODATA|NOPTR, $4

DATA f127<>+0(SB)/4, $127.0
GLOBL f127<>(SB), RODATA|NOPTR, $4

// VPACKSS* interleave 128-bit lanes; this VPERMD puts the dwords back in order.
DATA packPerm<>+0(SB)/4, $0
DATA packPerm<>+4(SB)/4, $4
DATA packPerm<>+8(SB)/4, $1
DATA packPerm<>+12(SB)/4, $5
DATA packPerm<>+16(SB)/4, $2
DATA packPerm<>+20(SB)/4, $6
DATA packPerm<>+24(SB)/4, $3
DATA packPerm<>+28(SB)/4, $7
GLOBL packPerm<>(SB), RODATA|NOPTR, $32

// QBLOCK quantizes the 32 floats at (SI): Y0..Y3 end as int32 quants, X5 = d.
// Constants: Y15 abs mask, X14 127.0, X13 zero.
#define QBLOCK \
	VMOVUPS      (SI), Y0; \
	VMOVUPS      32(SI), Y1; \
	VMOVUPS      64(SI), Y2; \
	VMOVUPS      96(SI), Y3; \
	VANDPS       Y15, Y0, Y4; \
	VANDPS       Y15, Y1, Y5; \
	VANDPS       Y15, Y2, Y6; \
	VANDPS       Y15, Y3, Y7; \
	VMAXPS       Y5, Y4, Y4; \
	VMAXPS       Y7, Y6, Y6; \
	VMAXPS       Y6, Y4, Y4; \
	VEXTRACTF128 $1, Y4, X5; \
	VMAXPS       X5, X4, X4; \
	VMOVHLPS     X4, X4, X5; \
	VMAXPS       X5, X4, X4; \
	VMOVSHDUP    X4, X5; \
	VMAXSS       X5, X4, X4; \
	VDIVSS       X14, X4, X5; \
	VDIVSS       X4, X14, X6; \
	VCMPPS       $4, X13, X4, X7; \
	VANDPS       X7, X6, X6; \
	VBROADCASTSS X6, Y6; \
	VMULPS       Y6, Y0, Y0; \
	VMULPS       Y6, Y1, Y1; \
	VMULPS       Y6, Y2, Y2; \
	VMULPS       Y6, Y3, Y3; \
	VCVTPS2DQ    Y0, Y0; \
	VCVTPS2DQ    Y1, Y1; \
	VCVTPS2DQ    Y2, Y2; \
	VCVTPS2DQ    Y3, Y3

// PACKSTORE writes the quants in Y0..Y3 as 32 int8 at off(DI).
#define PACKSTORE(off) \
	VPACKSSDW Y1, Y0, Y8; \
	VPACKSSDW Y3, Y2, Y9; \
	VPACKSSWB Y9, Y8, Y8; \
	VPERMD    Y8, Y12, Y8; \
	VMOVDQU   Y8, off(DI)

#define SETUP \
	MOVQ         dst+0(FP), DI; \
	MOVQ         x+8(FP), SI; \
	MOVQ         nb+16(FP), CX; \
	VBROADCASTSS absMask<>(SB), Y15; \
	VMOVSS       f127<>(SB), X14; \
	VXORPS       X13, X13, X13; \
	VMOVDQU      packPerm<>(SB), Y12

// func actQ8_0AVX2(dst *byte, x *float32, nb int)
TEXT ·actQ8_0AVX2(SB), NOSPLIT, $0-24
	SETUP
	TESTQ CX, CX
	JEQ   q80done

q80loop:
	QBLOCK
	VCVTPS2PH $0, X5, X5
	VMOVD     X5, AX
	MOVW      AX, (DI)
	PACKSTORE(2)
	ADDQ      $128, SI
	ADDQ      $34, DI
	DECQ      CX
	JNZ       q80loop

q80done:
	VZEROUPPER
	RET

// func actQ8_1AVX2(dst *byte, x *float32, nb int)
TEXT ·actQ8_1AVX2(SB), NOSPLIT, $0-24
	SETUP
	TESTQ CX, CX
	JEQ   q81done

q81loop:
	QBLOCK
	VPADDD       Y1, Y0, Y8
	VPADDD       Y3, Y2, Y9
	VPADDD       Y9, Y8, Y8
	VEXTRACTI128 $1, Y8, X9
	VPADDD       X9, X8, X8
	VPHADDD      X8, X8, X8
	VPHADDD      X8, X8, X8
	VCVTDQ2PS    X8, X8
	VMULSS       X5, X8, X8
	VCVTPS2PH    $0, X5, X5
	VMOVD        X5, AX
	MOVW         AX, (DI)
	VCVTPS2PH    $0, X8, X8
	VMOVD        X8, AX
	MOVW         AX, 2(DI)
	PACKSTORE(4)
	ADDQ         $128, SI
	ADDQ         $36, DI
	DECQ         CX
	JNZ          q81loop

q81done:
	VZEROUPPER
	RET
