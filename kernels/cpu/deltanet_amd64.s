//go:build amd64 && !noasm

#include "textflag.h"

// AVX2 + FMA kernels of the Gated DeltaNet recurrence (deltanet.go): each
// fuses an update of one row of the state with the dot product that reads
// it, so the row is loaded once. NOSPLIT leaf functions, ABI0 arguments;
// n must be a multiple of 8.

// func scaleDotAVX2(m, k *float32, n int, s float32) float32
// m[i] *= s; returns Σ m[i]·k[i].
TEXT ·scaleDotAVX2(SB), NOSPLIT, $0-36
	MOVQ         m+0(FP), SI
	MOVQ         k+8(FP), DI
	MOVQ         n+16(FP), CX
	VBROADCASTSS s+24(FP), Y7
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1

sd16:
	CMPQ        CX, $16
	JLT         sd8
	VMULPS      (SI), Y7, Y2
	VMULPS      32(SI), Y7, Y3
	VMOVUPS     Y2, (SI)
	VMOVUPS     Y3, 32(SI)
	VFMADD231PS (DI), Y2, Y0
	VFMADD231PS 32(DI), Y3, Y1
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         sd16

sd8:
	CMPQ        CX, $8
	JLT         sddone
	VMULPS      (SI), Y7, Y2
	VMOVUPS     Y2, (SI)
	VFMADD231PS (DI), Y2, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         sd8

sddone:
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+32(FP)
	RET

// func axpyDotAVX2(m, k, q *float32, n int, d float32) float32
// m[i] += d·k[i]; returns Σ m[i]·q[i].
TEXT ·axpyDotAVX2(SB), NOSPLIT, $0-44
	MOVQ         m+0(FP), SI
	MOVQ         k+8(FP), DI
	MOVQ         q+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS d+32(FP), Y7
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1

ad16:
	CMPQ        CX, $16
	JLT         ad8
	VMOVUPS     (SI), Y2
	VMOVUPS     32(SI), Y3
	VFMADD231PS (DI), Y7, Y2
	VFMADD231PS 32(DI), Y7, Y3
	VMOVUPS     Y2, (SI)
	VMOVUPS     Y3, 32(SI)
	VFMADD231PS (DX), Y2, Y0
	VFMADD231PS 32(DX), Y3, Y1
	ADDQ        $64, SI
	ADDQ        $64, DI
	ADDQ        $64, DX
	SUBQ        $16, CX
	JMP         ad16

ad8:
	CMPQ        CX, $8
	JLT         addone
	VMOVUPS     (SI), Y2
	VFMADD231PS (DI), Y7, Y2
	VMOVUPS     Y2, (SI)
	VFMADD231PS (DX), Y2, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	ADDQ        $32, DX
	SUBQ        $8, CX
	JMP         ad8

addone:
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+40(FP)
	RET
