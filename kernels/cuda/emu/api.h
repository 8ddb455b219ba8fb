// C entry points of the CPU emulator (kernels/cuda/emu.cpp) for driver_emu.go.
#pragma once
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
int emu_has(const char* name);
int emu_launch(const char* name, int gx, int gy, int gz, int bx, int by, int bz, const uint64_t* args, int nargs,
               char* err, int errLen);
#ifdef __cplusplus
}
#endif
