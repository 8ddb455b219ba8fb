//go:build amd64 && !noasm

#include "textflag.h"

// unpackQ5_0AVX512 is unpackQ5_0 (amx.go) for the tiled path: each Q5_0
// block [d qh qs16] of rows [0, rows) becomes 32 signed levels q − 16 in
// its row of lv, and d's f16 bits go to half[b·step + r]. The fifth bits
// come from qh through a mask register: levels whose bit is clear get the
// sign fill 0xF0 over their low nibble, which is q − 16 as an int8.

DATA q5Nibbles<>+0(SB)/4, $0x0f0f0f0f
GLOBL q5Nibbles<>(SB), RODATA|NOPTR, $4

DATA q5Fill<>+0(SB)/4, $0xf0f0f0f0
GLOBL q5Fill<>(SB), RODATA|NOPTR, $4

// func unpackQ5_0AVX512(lv *byte, lstride int, half *uint16, step int, w *byte, wstride, rows, nb int)
TEXT ·unpackQ5_0AVX512(SB), NOSPLIT, $0-64
	MOVQ lv+0(FP), DI
	MOVQ half+16(FP), R8
	MOVQ w+32(FP), SI
	MOVQ rows+48(FP), R9
	VPBROADCASTD q5Nibbles<>(SB), Y9
	VPBROADCASTD q5Fill<>(SB), Y10
	MOVQ step+24(FP), R12
	SHLQ $1, R12 // bytes from one block's scales to the next

row:
	MOVQ DI, R10 // this row's levels
	MOVQ SI, R11 // this row's blocks
	MOVQ R8, R13 // this row's scale slot in block 0
	MOVQ nb+56(FP), CX

block:
	MOVWLZX (R11), AX
	MOVW    AX, (R13)
	MOVL    2(R11), AX
	KMOVD   AX, K1
	KNOTD   K1, K2
	VMOVDQU 6(R11), X0
	VPSRLW  $4, X0, X1
	VINSERTI128 $1, X1, Y0, Y0
	VPAND   Y9, Y0, Y0
	VMOVDQU8.Z Y10, K2, Y3
	VPOR    Y3, Y0, Y0
	VMOVDQU Y0, (R10)
	ADDQ    $22, R11
	ADDQ    $32, R10
	ADDQ    R12, R13
	DECQ    CX
	JNZ     block

	ADDQ lstride+8(FP), DI
	ADDQ wstride+40(FP), SI
	ADDQ $2, R8
	DECQ R9
	JNZ  row
	VZEROUPPER
	RET
