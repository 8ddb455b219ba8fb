//go:build amd64 && !noasm

#include "textflag.h"

// AVX2 + FMA + F16C kernels. Register use is documented per function; none
// touches the stack, so all are NOSPLIT leaf functions with ABI0 arguments.

// func dotF32AVX2(a, b *float32, n int) float32
// n must be a multiple of 8. Four accumulators hide the FMA latency.
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

dot32:
	CMPQ        CX, $32
	JLT         dot8
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         dot32

dot8:
	CMPQ        CX, $8
	JLT         dotdone
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         dot8

dotdone:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func axpyF32AVX2(dst *float32, a float32, x *float32, n int)
// dst[i] += a·x[i]; n must be a multiple of 8.
TEXT ·axpyF32AVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	VBROADCASTSS a+8(FP), Y0
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX

axpy32:
	CMPQ        CX, $32
	JLT         axpy8
	VMOVUPS     (DI), Y1
	VMOVUPS     32(DI), Y2
	VMOVUPS     64(DI), Y3
	VMOVUPS     96(DI), Y4
	VFMADD231PS (SI), Y0, Y1
	VFMADD231PS 32(SI), Y0, Y2
	VFMADD231PS 64(SI), Y0, Y3
	VFMADD231PS 96(SI), Y0, Y4
	VMOVUPS     Y1, (DI)
	VMOVUPS     Y2, 32(DI)
	VMOVUPS     Y3, 64(DI)
	VMOVUPS     Y4, 96(DI)
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         axpy32

axpy8:
	CMPQ        CX, $8
	JLT         axpydone
	VMOVUPS     (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS     Y1, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         axpy8

axpydone:
	VZEROUPPER
	RET

// func dotQ4_1Q8_1AVX2(w, x *byte, nb int) float32
// w: nb Q4_1 blocks [d m f16][qs 16]; x: nb Q8_1 blocks [d s f16][qs int8 32].
// Per block: levels (0..15, low nibbles then high) × q8 via VPMADDUBSW, pairs
// widened to int32 by VPMADDWD with ones, scaled by d·dx into Y0; m·s goes to
// lane 1 of X8. nb ≥ 1.
TEXT ·dotQ4_1Q8_1AVX2(SB), NOSPLIT, $0-28
	MOVQ         w+0(FP), SI
	MOVQ         x+8(FP), DI
	MOVQ         nb+16(FP), CX
	VXORPS       Y0, Y0, Y0
	VXORPS       Y11, Y11, Y11
	VXORPS       X8, X8, X8
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X9
	VPBROADCASTD X9, Y9
	MOVL         $0x00010001, AX
	VMOVD        AX, X10
	VPBROADCASTD X10, Y10

q41pair:
	CMPQ        CX, $2
	JLT         q41one
	// block 0
	VMOVD        (SI), X1
	VCVTPH2PS    X1, X1
	VMOVD        (DI), X2
	VCVTPH2PS    X2, X2
	VMULPS       X1, X2, X3
	VADDPS       X3, X8, X8
	VBROADCASTSS X3, Y3
	VMOVDQU      4(SI), X4
	VPSRLW       $4, X4, X5
	VINSERTI128  $1, X5, Y4, Y4
	VPAND        Y9, Y4, Y4
	VPMADDUBSW   4(DI), Y4, Y6
	VPMADDWD     Y10, Y6, Y6
	VCVTDQ2PS    Y6, Y6
	VFMADD231PS  Y6, Y3, Y0
	// block 1
	VMOVD        20(SI), X1
	VCVTPH2PS    X1, X1
	VMOVD        36(DI), X2
	VCVTPH2PS    X2, X2
	VMULPS       X1, X2, X12
	VADDPS       X12, X8, X8
	VBROADCASTSS X12, Y12
	VMOVDQU      24(SI), X13
	VPSRLW       $4, X13, X14
	VINSERTI128  $1, X14, Y13, Y13
	VPAND        Y9, Y13, Y13
	VPMADDUBSW   40(DI), Y13, Y15
	VPMADDWD     Y10, Y15, Y15
	VCVTDQ2PS    Y15, Y15
	VFMADD231PS  Y15, Y12, Y11
	ADDQ         $40, SI
	ADDQ         $72, DI
	SUBQ         $2, CX
	JMP          q41pair

q41one:
	TESTQ        CX, CX
	JEQ          q41done
	VMOVD        (SI), X1
	VCVTPH2PS    X1, X1
	VMOVD        (DI), X2
	VCVTPH2PS    X2, X2
	VMULPS       X1, X2, X3
	VADDPS       X3, X8, X8
	VBROADCASTSS X3, Y3
	VMOVDQU      4(SI), X4
	VPSRLW       $4, X4, X5
	VINSERTI128  $1, X5, Y4, Y4
	VPAND        Y9, Y4, Y4
	VPMADDUBSW   4(DI), Y4, Y6
	VPMADDWD     Y10, Y6, Y6
	VCVTDQ2PS    Y6, Y6
	VFMADD231PS  Y6, Y3, Y0

q41done:
	VADDPS       Y11, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSHDUP    X8, X8
	VADDSS       X8, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func dotQ8_0Q8_0AVX2(w, x *byte, nb int) float32
// w, x: nb Q8_0 blocks [d f16][qs int8 32]. VPMADDUBSW needs one unsigned
// operand, so |w| is multiplied by x·sign(w) (ggml's trick; exact while no
// quant is −128, which ggml's quantizers never produce). nb ≥ 1.
TEXT ·dotQ8_0Q8_0AVX2(SB), NOSPLIT, $0-28
	MOVQ         w+0(FP), SI
	MOVQ         x+8(FP), DI
	MOVQ         nb+16(FP), CX
	VXORPS       Y0, Y0, Y0
	VXORPS       Y11, Y11, Y11
	MOVL         $0x00010001, AX
	VMOVD        AX, X10
	VPBROADCASTD X10, Y10

q80pair:
	CMPQ         CX, $2
	JLT          q80one
	VMOVD        (SI), X1
	VCVTPH2PS    X1, X1
	VMOVD        (DI), X2
	VCVTPH2PS    X2, X2
	VMULSS       X1, X2, X3
	VBROADCASTSS X3, Y3
	VMOVDQU      2(SI), Y4
	VMOVDQU      2(DI), Y5
	VPSIGNB      Y4, Y4, Y6
	VPSIGNB      Y4, Y5, Y7
	VPMADDUBSW   Y7, Y6, Y6
	VPMADDWD     Y10, Y6, Y6
	VCVTDQ2PS    Y6, Y6
	VFMADD231PS  Y6, Y3, Y0
	VMOVD        34(SI), X1
	VCVTPH2PS    X1, X1
	VMOVD        34(DI), X2
	VCVTPH2PS    X2, X2
	VMULSS       X1, X2, X12
	VBROADCASTSS X12, Y12
	VMOVDQU      36(SI), Y13
	VMOVDQU      36(DI), Y14
	VPSIGNB      Y13, Y13, Y15
	VPSIGNB      Y13, Y14, Y7
	VPMADDUBSW   Y7, Y15, Y15
	VPMADDWD     Y10, Y15, Y15
	VCVTDQ2PS    Y15, Y15
	VFMADD231PS  Y15, Y12, Y11
	ADDQ         $68, SI
	ADDQ         $68, DI
	SUBQ         $2, CX
	JMP          q80pair

q80one:
	TESTQ        CX, CX
	JEQ          q80done
	VMOVD        (SI), X1
	VCVTPH2PS    X1, X1
	VMOVD        (DI), X2
	VCVTPH2PS    X2, X2
	VMULSS       X1, X2, X3
	VBROADCASTSS X3, Y3
	VMOVDQU      2(SI), Y4
	VMOVDQU      2(DI), Y5
	VPSIGNB      Y4, Y4, Y6
	VPSIGNB      Y4, Y5, Y7
	VPMADDUBSW   Y7, Y6, Y6
	VPMADDWD     Y10, Y6, Y6
	VCVTDQ2PS    Y6, Y6
	VFMADD231PS  Y6, Y3, Y0

q80done:
	VADDPS       Y11, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET
