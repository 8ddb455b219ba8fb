//go:build amd64 && !noasm

#include "textflag.h"

// func f32ToF16AVX2(dst *uint16, src *float32, n int)
// Rounds to nearest even (VCVTPS2PH imm 0), as ggml's FP32→FP16 does; n must
// be a multiple of 8.
TEXT ·f32ToF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

h8:
	CMPQ      CX, $8
	JLT       hdone
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, X1
	VMOVDQU   X1, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	SUBQ      $8, CX
	JMP       h8

hdone:
	VZEROUPPER
	RET

// func axpyF16AVX2(dst *float32, a float32, x *uint16, n int)
// dst[i] += a·f16(x[i]); n must be a multiple of 8.
TEXT ·axpyF16AVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	VBROADCASTSS a+8(FP), Y0
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX

a8:
	CMPQ        CX, $8
	JLT         adone
	VCVTPH2PS   (SI), Y1
	VMOVUPS     (DI), Y2
	VFMADD231PS Y1, Y0, Y2
	VMOVUPS     Y2, (DI)
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         a8

adone:
	VZEROUPPER
	RET
