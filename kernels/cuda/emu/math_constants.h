// Stand-in for CUDA's math_constants.h when the kernels are compiled for the
// CPU emulator (kernels/cuda/emu.cpp, build tag cudaemu).
#pragma once
#include <math.h>
#define CUDART_INF_F INFINITY
#define CUDART_INF ((double)INFINITY)
