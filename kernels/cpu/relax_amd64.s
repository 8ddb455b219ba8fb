//go:build amd64 && !noasm

#include "textflag.h"

// func cpuRelax()
// PAUSE tells the core this is a spin-wait loop: it saves power, frees the
// pipeline for a sibling hyperthread, and avoids the memory-order mis-
// speculation penalty when the awaited cache line finally changes.
TEXT ·cpuRelax(SB), NOSPLIT, $0-0
	PAUSE
	RET
