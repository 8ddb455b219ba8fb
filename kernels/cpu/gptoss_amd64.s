//go:build amd64 && !noasm

#include "textflag.h"

// oaiSwiGLU's two elementwise loops around expF32, eight lanes at a time,
// with the scalar loops' operations in their order (so their bits): the
// minimum and maximum take the activation as the second operand, which
// VMINPS/VMAXPS return when either is NaN, so a NaN passes through as Go's
// min and max pass it.

// func oaiSwiGLUPreAVX2(t, gate *float32, n int, alpha, limit float32)
// t[i] = alpha · −min(g[i], limit) for i < n (a multiple of 8).
TEXT ·oaiSwiGLUPreAVX2(SB), NOSPLIT, $0-32
	MOVQ         t+0(FP), DI
	MOVQ         gate+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS alpha+24(FP), Y1
	VBROADCASTSS limit+28(FP), Y2
	MOVL         $0x80000000, AX
	VMOVD        AX, X3
	VPBROADCASTD X3, Y3

preloop:
	CMPQ    CX, $8
	JLT     predone
	VMOVUPS (SI), Y0
	VMINPS  Y0, Y2, Y0 // min(limit, g): g where g is NaN
	VXORPS  Y3, Y0, Y0
	VMULPS  Y0, Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     preloop

predone:
	VZEROUPPER
	RET

// func oaiSwiGLUPostAVX2(gate, up, t *float32, n int, limit float32)
// g[i] = min(g[i], limit) / (1 + t[i]) · (clamp(u[i], −limit, limit) + 1)
// for i < n (a multiple of 8).
TEXT ·oaiSwiGLUPostAVX2(SB), NOSPLIT, $0-36
	MOVQ         gate+0(FP), DI
	MOVQ         up+8(FP), SI
	MOVQ         t+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS limit+32(FP), Y2
	MOVL         $0x80000000, AX
	VMOVD        AX, X3
	VPBROADCASTD X3, Y3
	VXORPS       Y2, Y3, Y4 // −limit
	MOVL         $0x3f800000, AX
	VMOVD        AX, X5
	VPBROADCASTD X5, Y5 // 1

postloop:
	CMPQ    CX, $8
	JLT     postdone
	VMOVUPS (DI), Y0
	VMINPS  Y0, Y2, Y0 // x = min(g, limit)
	VMOVUPS (SI), Y1
	VMINPS  Y1, Y2, Y1
	VMAXPS  Y1, Y4, Y1 // y = max(min(u, limit), −limit)
	VADDPS  (DX), Y5, Y6
	VDIVPS  Y6, Y0, Y0 // x / (1 + t)
	VADDPS  Y5, Y1, Y1
	VMULPS  Y1, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	SUBQ    $8, CX
	JMP     postloop

postdone:
	VZEROUPPER
	RET
