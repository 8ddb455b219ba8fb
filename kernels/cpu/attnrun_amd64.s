//go:build amd64 && !noasm

#include "textflag.h"

// SREDUCE8 stores the scores of the eight positions whose sums A_i (the
// four accumulators added as dotF16F32AVX2 adds them) are at 32·i(SP), and
// advances dst by 8. c_i = lo(A_i) + hi(A_i), paired as [c_i | c_i+4]; two
// rounds of VHADDPS then give (c_i0+c_i1)+(c_i2+c_i3) for all eight in
// position order: the per-position reduction's adds, 3 VHADDPS per eight
// positions instead of 2 per position (VHADDPS bounded the loop). Then +0
// and the scale, as the per-position path.
#define SREDUCE8 \
	VMOVUPS    0(SP), Y0 \
	VPERM2F128 $0x20, 128(SP), Y0, Y4 \
	VPERM2F128 $0x31, 128(SP), Y0, Y5 \
	VADDPS     Y5, Y4, Y4 \
	VMOVUPS    32(SP), Y1 \
	VPERM2F128 $0x20, 160(SP), Y1, Y5 \
	VPERM2F128 $0x31, 160(SP), Y1, Y6 \
	VADDPS     Y6, Y5, Y5 \
	VMOVUPS    64(SP), Y2 \
	VPERM2F128 $0x20, 192(SP), Y2, Y6 \
	VPERM2F128 $0x31, 192(SP), Y2, Y7 \
	VADDPS     Y7, Y6, Y6 \
	VMOVUPS    96(SP), Y3 \
	VPERM2F128 $0x20, 224(SP), Y3, Y7 \
	VPERM2F128 $0x31, 224(SP), Y3, Y0 \
	VADDPS     Y0, Y7, Y7 \
	VHADDPS    Y5, Y4, Y4 \
	VHADDPS    Y7, Y6, Y6 \
	VHADDPS    Y6, Y4, Y4 \
	VXORPS     Y0, Y0, Y0 \
	VADDPS     Y0, Y4, Y4 \
	VBROADCASTSS scale+48(FP), Y1 \
	VMULPS     Y1, Y4, Y4 \
	VMOVUPS    Y4, (R8) \
	ADDQ       $32, R8 \
	SUBQ       $8, R11

// func attnScoresRunAVX2(dst *float32, k *uint16, n int, stride int, q *float32, hd int, scale float32)
// dst[i] = (Σ_j f16(k[i·stride + j])·q[j] + 0)·scale for i < n, n ≥ 1, hd a
// multiple of 8. Per position this is dotF16F32Fast's arithmetic in its
// order: dotF16F32AVX2's four accumulators and reduction, then the empty
// generic tail's +0 (which turns a −0 sum into +0), then the scale.
TEXT ·attnScoresRunAVX2(SB), NOSPLIT, $256-52
	MOVQ         dst+0(FP), R8
	MOVQ         k+8(FP), R9
	MOVQ         n+16(FP), R11
	MOVQ         stride+24(FP), R12
	SHLQ         $1, R12
	MOVQ         q+32(FP), R13
	MOVQ         hd+40(FP), R14
	VMOVSS       scale+48(FP), X9
	VXORPS       X10, X10, X10


	CMPQ         R14, $64
	JEQ          s64oct

soct:
	CMPQ R11, $8
	JLT  stail
	XORQ BX, BX
	MOVQ R9, SI

sopos:
	MOVQ   R13, DI
	MOVQ   R14, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

so32:
	CMPQ        CX, $32
	JLT         so8
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
	JMP         so32

so8:
	CMPQ        CX, $8
	JLT         socomb
	VCVTPH2PS   (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         so8

socomb:
	VADDPS  Y1, Y0, Y0
	VADDPS  Y3, Y2, Y2
	VADDPS  Y2, Y0, Y0
	VMOVUPS Y0, (SP)(BX*1)
	ADDQ    R12, R9
	MOVQ    R9, SI
	ADDQ    $32, BX
	CMPQ    BX, $256
	JLT     sopos

	SREDUCE8
	JMP        soct

// Head size 64: q lives in Y8-Y15, so a position's dot product loads only
// its K row. The same FMAs into the same four accumulators as below.
s64oct:
	CMPQ    R11, $8
	JLT     s64tail
	VMOVUPS (R13), Y8
	VMOVUPS 32(R13), Y9
	VMOVUPS 64(R13), Y10
	VMOVUPS 96(R13), Y11
	VMOVUPS 128(R13), Y12
	VMOVUPS 160(R13), Y13
	VMOVUPS 192(R13), Y14
	VMOVUPS 224(R13), Y15
	XORQ    BX, BX

s64pos:
	VXORPS      Y0, Y0, Y0
	VXORPS      Y1, Y1, Y1
	VXORPS      Y2, Y2, Y2
	VXORPS      Y3, Y3, Y3
	VCVTPH2PS   (R9), Y4
	VCVTPH2PS   16(R9), Y5
	VCVTPH2PS   32(R9), Y6
	VCVTPH2PS   48(R9), Y7
	VFMADD231PS Y8, Y4, Y0
	VFMADD231PS Y9, Y5, Y1
	VFMADD231PS Y10, Y6, Y2
	VFMADD231PS Y11, Y7, Y3
	VCVTPH2PS   64(R9), Y4
	VCVTPH2PS   80(R9), Y5
	VCVTPH2PS   96(R9), Y6
	VCVTPH2PS   112(R9), Y7
	VFMADD231PS Y12, Y4, Y0
	VFMADD231PS Y13, Y5, Y1
	VFMADD231PS Y14, Y6, Y2
	VFMADD231PS Y15, Y7, Y3
	VADDPS      Y1, Y0, Y0
	VADDPS      Y3, Y2, Y2
	VADDPS      Y2, Y0, Y0
	VMOVUPS     Y0, (SP)(BX*1)
	ADDQ        R12, R9
	ADDQ        $32, BX
	CMPQ        BX, $256
	JLT         s64pos
	SREDUCE8
	JMP         s64oct

s64tail:
	VMOVSS scale+48(FP), X9
	VXORPS X10, X10, X10
	JMP    stail

stail:
	TESTQ R11, R11
	JEQ   sdone
spos:
	MOVQ   R9, SI
	MOVQ   R13, DI
	MOVQ   R14, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

s32:
	CMPQ        CX, $32
	JLT         s8
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
	JMP         s32

s8:
	CMPQ        CX, $8
	JLT         ssum
	VCVTPH2PS   (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         s8

ssum:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VADDSS       X10, X0, X0
	VMULSS       X9, X0, X0
	VMOVSS       X0, (R8)
	ADDQ         $4, R8
	ADDQ         R12, R9
	DECQ         R11
	JNZ          spos

sdone:
	VZEROUPPER
	RET

// func attnValuesRunAVX2(o *float32, v *uint16, n int, stride int, e *float32, hd int, inv float32)
// o[j] += (e[i]·inv)·f16(v[i·stride + j]) for i < n in order, n ≥ 1, hd a
// multiple of 8: axpyF16AVX2's FMA per position, so the sums are the
// per-call loop's, but with a strip of o (64, 32 or 8 floats) held in
// registers across all n positions instead of loaded and stored at each.
TEXT ·attnValuesRunAVX2(SB), NOSPLIT, $0-52
	MOVQ         o+0(FP), DI
	MOVQ         v+8(FP), R9
	MOVQ         n+16(FP), R11
	MOVQ         stride+24(FP), R12
	SHLQ         $1, R12
	MOVQ         e+32(FP), R10
	MOVQ         hd+40(FP), CX
	VBROADCASTSS inv+48(FP), Y15

v64:
	CMPQ    CX, $64
	JLT     v32
	VMOVUPS (DI), Y6
	VMOVUPS 32(DI), Y7
	VMOVUPS 64(DI), Y8
	VMOVUPS 96(DI), Y9
	VMOVUPS 128(DI), Y10
	VMOVUPS 160(DI), Y11
	VMOVUPS 192(DI), Y12
	VMOVUPS 224(DI), Y13
	MOVQ    R9, SI
	MOVQ    R10, BX
	MOVQ    R11, DX

v64p:
	VBROADCASTSS (BX), Y0
	VMULPS       Y15, Y0, Y0
	VCVTPH2PS    (SI), Y1
	VCVTPH2PS    16(SI), Y2
	VCVTPH2PS    32(SI), Y3
	VCVTPH2PS    48(SI), Y4
	VFMADD231PS  Y1, Y0, Y6
	VFMADD231PS  Y2, Y0, Y7
	VFMADD231PS  Y3, Y0, Y8
	VFMADD231PS  Y4, Y0, Y9
	VCVTPH2PS    64(SI), Y1
	VCVTPH2PS    80(SI), Y2
	VCVTPH2PS    96(SI), Y3
	VCVTPH2PS    112(SI), Y4
	VFMADD231PS  Y1, Y0, Y10
	VFMADD231PS  Y2, Y0, Y11
	VFMADD231PS  Y3, Y0, Y12
	VFMADD231PS  Y4, Y0, Y13
	ADDQ         R12, SI
	ADDQ         $4, BX
	DECQ         DX
	JNZ          v64p
	VMOVUPS      Y6, (DI)
	VMOVUPS      Y7, 32(DI)
	VMOVUPS      Y8, 64(DI)
	VMOVUPS      Y9, 96(DI)
	VMOVUPS      Y10, 128(DI)
	VMOVUPS      Y11, 160(DI)
	VMOVUPS      Y12, 192(DI)
	VMOVUPS      Y13, 224(DI)
	ADDQ         $256, DI
	ADDQ         $128, R9
	SUBQ         $64, CX
	JMP          v64

v32:
	CMPQ    CX, $32
	JLT     v8
	VMOVUPS (DI), Y6
	VMOVUPS 32(DI), Y7
	VMOVUPS 64(DI), Y8
	VMOVUPS 96(DI), Y9
	MOVQ    R9, SI
	MOVQ    R10, BX
	MOVQ    R11, DX

v32p:
	VBROADCASTSS (BX), Y0
	VMULPS       Y15, Y0, Y0
	VCVTPH2PS    (SI), Y1
	VCVTPH2PS    16(SI), Y2
	VCVTPH2PS    32(SI), Y3
	VCVTPH2PS    48(SI), Y4
	VFMADD231PS  Y1, Y0, Y6
	VFMADD231PS  Y2, Y0, Y7
	VFMADD231PS  Y3, Y0, Y8
	VFMADD231PS  Y4, Y0, Y9
	ADDQ         R12, SI
	ADDQ         $4, BX
	DECQ         DX
	JNZ          v32p
	VMOVUPS      Y6, (DI)
	VMOVUPS      Y7, 32(DI)
	VMOVUPS      Y8, 64(DI)
	VMOVUPS      Y9, 96(DI)
	ADDQ         $128, DI
	ADDQ         $64, R9
	SUBQ         $32, CX
	JMP          v32

v8:
	CMPQ    CX, $8
	JLT     vdone
	VMOVUPS (DI), Y6
	MOVQ    R9, SI
	MOVQ    R10, BX
	MOVQ    R11, DX

v8p:
	VBROADCASTSS (BX), Y0
	VMULPS       Y15, Y0, Y0
	VCVTPH2PS    (SI), Y1
	VFMADD231PS  Y1, Y0, Y6
	ADDQ         R12, SI
	ADDQ         $4, BX
	DECQ         DX
	JNZ          v8p
	VMOVUPS      Y6, (DI)
	ADDQ         $32, DI
	ADDQ         $16, R9
	SUBQ         $8, CX
	JMP          v8

vdone:
	VZEROUPPER
	RET
