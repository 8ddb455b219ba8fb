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

// func sinkScoresAVX2(dst *float32, k *uint16, slots *int32, n int, stride int, q *float32, hd int, scale float32)
// dst[i] = (Σ_j f16(k[slots[i]·stride + j])·q[j])·scale for i < n, hd a
// multiple of 8: per position, dotF16F32AVX2's loops and reduction in its
// order, then the scale, so the scores are the per-call loop's.
TEXT ·sinkScoresAVX2(SB), NOSPLIT, $0-60
	MOVQ dst+0(FP), R8
	MOVQ k+8(FP), R9
	MOVQ slots+16(FP), R10
	MOVQ n+24(FP), R11
	MOVQ stride+32(FP), R12
	MOVQ q+40(FP), R13
	MOVQ hd+48(FP), R14

scpos:
	TESTQ   R11, R11
	JEQ     scdone
	MOVLQSX (R10), AX
	IMULQ   R12, AX
	LEAQ    (R9)(AX*2), SI
	MOVQ    R13, DI
	MOVQ    R14, CX
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3

sc32:
	CMPQ        CX, $32
	JLT         sc8
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   16(SI), Y5
	VCVTPH2PS   32(SI), Y6
	VCVTPH2PS   48(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $64, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         sc32

sc8:
	CMPQ        CX, $8
	JLT         scsum
	VCVTPH2PS   (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         sc8

scsum:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMULSS       scale+56(FP), X0, X0
	VMOVSS       X0, (R8)
	ADDQ         $4, R8
	ADDQ         $4, R10
	DECQ         R11
	JMP          scpos

scdone:
	VZEROUPPER
	RET

// func sinkValuesAVX2(o *float32, v *uint16, slots *int32, e *float32, n int, stride int, hd int, inv float32)
// o[j] += (e[i]·inv)·f16(v[slots[i]·stride + j]) for i < n in order, hd a
// multiple of 8: axpyF16AVX2 per position, so the sums are the per-call
// loop's.
TEXT ·sinkValuesAVX2(SB), NOSPLIT, $0-60
	MOVQ o+0(FP), R8
	MOVQ v+8(FP), R9
	MOVQ slots+16(FP), R10
	MOVQ e+24(FP), R11
	MOVQ n+32(FP), R12
	MOVQ stride+40(FP), R13
	MOVQ hd+48(FP), R14

vapos:
	TESTQ        R12, R12
	JEQ          vadone
	VMOVSS       (R11), X0
	VMULSS       inv+56(FP), X0, X0
	VBROADCASTSS X0, Y0
	MOVLQSX      (R10), AX
	IMULQ        R13, AX
	LEAQ         (R9)(AX*2), SI
	MOVQ         R8, DI
	MOVQ         R14, CX

va8:
	CMPQ        CX, $8
	JLT         vanext
	VCVTPH2PS   (SI), Y1
	VMOVUPS     (DI), Y2
	VFMADD231PS Y1, Y0, Y2
	VMOVUPS     Y2, (DI)
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         va8

vanext:
	ADDQ $4, R10
	ADDQ $4, R11
	DECQ R12
	JMP  vapos

vadone:
	VZEROUPPER
	RET
