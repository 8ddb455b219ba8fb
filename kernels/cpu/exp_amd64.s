//go:build amd64 && !noasm

#include "textflag.h"

// Vectorized exp for softmax and SwiGLU: the algorithm of ggml's AVX2
// ggml_v_expf (adapted there from Arm's optimized-routines expf; max error
// about 2 ulp): exp(x) = 2^n · p(b), n = round(x·log2 e), b = x − n·ln 2 in
// two parts, p a degree-5 polynomial; |n| > 126 takes a slower blend that
// scales in two steps so results under/overflow the way expf does.

DATA expR<>+0(SB)/8, $0x4b4000004b400000
DATA expR<>+8(SB)/8, $0x4b4000004b400000
DATA expR<>+16(SB)/8, $0x4b4000004b400000
DATA expR<>+24(SB)/8, $0x4b4000004b400000
GLOBL expR<>(SB), RODATA|NOPTR, $32

DATA expLog2e<>+0(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expLog2e<>+8(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expLog2e<>+16(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expLog2e<>+24(SB)/8, $0x3fb8aa3b3fb8aa3b
GLOBL expLog2e<>(SB), RODATA|NOPTR, $32

DATA expLn2Hi<>+0(SB)/8, $0x3f3172003f317200
DATA expLn2Hi<>+8(SB)/8, $0x3f3172003f317200
DATA expLn2Hi<>+16(SB)/8, $0x3f3172003f317200
DATA expLn2Hi<>+24(SB)/8, $0x3f3172003f317200
GLOBL expLn2Hi<>(SB), RODATA|NOPTR, $32

DATA expLn2Lo<>+0(SB)/8, $0x35bfbe8e35bfbe8e
DATA expLn2Lo<>+8(SB)/8, $0x35bfbe8e35bfbe8e
DATA expLn2Lo<>+16(SB)/8, $0x35bfbe8e35bfbe8e
DATA expLn2Lo<>+24(SB)/8, $0x35bfbe8e35bfbe8e
GLOBL expLn2Lo<>(SB), RODATA|NOPTR, $32

DATA expC0<>+0(SB)/8, $0x3c0720103c072010
DATA expC0<>+8(SB)/8, $0x3c0720103c072010
DATA expC0<>+16(SB)/8, $0x3c0720103c072010
DATA expC0<>+24(SB)/8, $0x3c0720103c072010
GLOBL expC0<>(SB), RODATA|NOPTR, $32

DATA expC1<>+0(SB)/8, $0x3d2b9f173d2b9f17
DATA expC1<>+8(SB)/8, $0x3d2b9f173d2b9f17
DATA expC1<>+16(SB)/8, $0x3d2b9f173d2b9f17
DATA expC1<>+24(SB)/8, $0x3d2b9f173d2b9f17
GLOBL expC1<>(SB), RODATA|NOPTR, $32

DATA expC2<>+0(SB)/8, $0x3e2aaf333e2aaf33
DATA expC2<>+8(SB)/8, $0x3e2aaf333e2aaf33
DATA expC2<>+16(SB)/8, $0x3e2aaf333e2aaf33
DATA expC2<>+24(SB)/8, $0x3e2aaf333e2aaf33
GLOBL expC2<>(SB), RODATA|NOPTR, $32

DATA expC3<>+0(SB)/8, $0x3efffedb3efffedb
DATA expC3<>+8(SB)/8, $0x3efffedb3efffedb
DATA expC3<>+16(SB)/8, $0x3efffedb3efffedb
DATA expC3<>+24(SB)/8, $0x3efffedb3efffedb
GLOBL expC3<>(SB), RODATA|NOPTR, $32

DATA expC4<>+0(SB)/8, $0x3f7ffff63f7ffff6
DATA expC4<>+8(SB)/8, $0x3f7ffff63f7ffff6
DATA expC4<>+16(SB)/8, $0x3f7ffff63f7ffff6
DATA expC4<>+24(SB)/8, $0x3f7ffff63f7ffff6
GLOBL expC4<>(SB), RODATA|NOPTR, $32

DATA expOne<>+0(SB)/8, $0x3f8000003f800000
DATA expOne<>+8(SB)/8, $0x3f8000003f800000
DATA expOne<>+16(SB)/8, $0x3f8000003f800000
DATA expOne<>+24(SB)/8, $0x3f8000003f800000
GLOBL expOne<>(SB), RODATA|NOPTR, $32

DATA exp126<>+0(SB)/8, $0x42fc000042fc0000
DATA exp126<>+8(SB)/8, $0x42fc000042fc0000
DATA exp126<>+16(SB)/8, $0x42fc000042fc0000
DATA exp126<>+24(SB)/8, $0x42fc000042fc0000
GLOBL exp126<>(SB), RODATA|NOPTR, $32

DATA exp192<>+0(SB)/8, $0x4340000043400000
DATA exp192<>+8(SB)/8, $0x4340000043400000
DATA exp192<>+16(SB)/8, $0x4340000043400000
DATA exp192<>+24(SB)/8, $0x4340000043400000
GLOBL exp192<>(SB), RODATA|NOPTR, $32

DATA expAbs<>+0(SB)/8, $0x7fffffff7fffffff
DATA expAbs<>+8(SB)/8, $0x7fffffff7fffffff
DATA expAbs<>+16(SB)/8, $0x7fffffff7fffffff
DATA expAbs<>+24(SB)/8, $0x7fffffff7fffffff
GLOBL expAbs<>(SB), RODATA|NOPTR, $32

DATA expG<>+0(SB)/8, $0x8200000082000000
DATA expG<>+8(SB)/8, $0x8200000082000000
DATA expG<>+16(SB)/8, $0x8200000082000000
DATA expG<>+24(SB)/8, $0x8200000082000000
GLOBL expG<>(SB), RODATA|NOPTR, $32

DATA expS1<>+0(SB)/8, $0x7f0000007f000000
DATA expS1<>+8(SB)/8, $0x7f0000007f000000
DATA expS1<>+16(SB)/8, $0x7f0000007f000000
DATA expS1<>+24(SB)/8, $0x7f0000007f000000
GLOBL expS1<>(SB), RODATA|NOPTR, $32

// EXP8 sets Y0 = exp(Y0), lanewise. Clobbers Y1-Y7; label is a unique
// prefix for its local jump.
#define EXP8(label) \
	VMOVUPS      expR<>(SB), Y1; \
	VFMADD231PS  expLog2e<>(SB), Y0, Y1; \
	VSUBPS       expR<>(SB), Y1, Y2; \
	VMOVAPS      Y0, Y3; \
	VFNMADD231PS expLn2Hi<>(SB), Y2, Y3; \
	VFNMADD231PS expLn2Lo<>(SB), Y2, Y3; \
	VPSLLD       $23, Y1, Y1; \
	VPADDD       expOne<>(SB), Y1, Y4; \
	VMULPS       Y3, Y3, Y5; \
	VMOVUPS      expC1<>(SB), Y6; \
	VFMADD231PS  expC0<>(SB), Y3, Y6; \
	VMOVUPS      expC3<>(SB), Y7; \
	VFMADD231PS  expC2<>(SB), Y3, Y7; \
	VFMADD213PS  Y7, Y5, Y6; \
	VMULPS       expC4<>(SB), Y3, Y3; \
	VFMADD213PS  Y3, Y5, Y6; \
	VMOVAPS      Y6, Y0; \
	VFMADD213PS  Y4, Y4, Y0; \
	VANDPS       expAbs<>(SB), Y2, Y5; \
	VCMPPS       $0x1e, exp126<>(SB), Y5, Y7; \
	VMOVMSKPS    Y7, AX; \
	TESTL        AX, AX; \
	JEQ          label; \
	VXORPS       Y3, Y3, Y3; \
	VCMPPS       $0x12, Y3, Y2, Y3; \
	VANDPS       expG<>(SB), Y3, Y3; \
	VPSUBD       Y3, Y1, Y1; \
	VPADDD       expS1<>(SB), Y3, Y3; \
	VFMADD213PS  Y1, Y6, Y1; \
	VMULPS       Y3, Y1, Y1; \
	VBLENDVPS    Y7, Y1, Y0, Y0; \
	VMULPS       Y3, Y3, Y3; \
	VCMPPS       $0x1e, exp192<>(SB), Y5, Y5; \
	VBLENDVPS    Y5, Y3, Y0, Y0; \
label:

// Register use in EXP8: Y1 z, then e = z<<23, then the slow path's s2 and its
// result; Y2 n; Y3 b, then c4·b, then g / s1; Y4 k; Y5 u, then |n|; Y6 j;
// Y7 (|n| > 126).

// func expF32AVX2(dst, x *float32, n int, sub float32) float32
// dst[i] = exp(x[i] − sub) for i < n (a multiple of 8); returns Σ dst[i]
// (softmax's numerators and their sum in one pass).
TEXT ·expF32AVX2(SB), NOSPLIT, $0-36
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS sub+24(FP), Y15
	VXORPS       Y14, Y14, Y14

exploop:
	CMPQ    CX, $8
	JLT     expdone
	VMOVUPS (SI), Y0
	VSUBPS  Y15, Y0, Y0
	EXP8(expfast)
	VMOVUPS Y0, (DI)
	VADDPS  Y0, Y14, Y14
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     exploop

expdone:
	VEXTRACTF128 $1, Y14, X1
	VADDPS       X1, X14, X14
	VHADDPS      X14, X14, X14
	VHADDPS      X14, X14, X14
	VZEROUPPER
	MOVSS        X14, ret+32(FP)
	RET

// func siluMulF32AVX2(dst, gate, up *float32, n int)
// dst[i] = gate[i] / (1 + exp(−gate[i])) · up[i] for i < n (a multiple of 8):
// SwiGLU, as ggml_vec_swiglu_f32 computes it.
TEXT ·siluMulF32AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX

siluloop:
	CMPQ    CX, $8
	JLT     siludone
	VMOVUPS (SI), Y8
	VXORPS  Y0, Y0, Y0
	VSUBPS  Y8, Y0, Y0
	EXP8(silufast)
	VADDPS  expOne<>(SB), Y0, Y0
	VDIVPS  Y0, Y8, Y8
	VMULPS  (DX), Y8, Y8
	VMOVUPS Y8, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     siluloop

siludone:
	VZEROUPPER
	RET
