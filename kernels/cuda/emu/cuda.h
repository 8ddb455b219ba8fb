// Stand-in for the CUDA driver API's cuda.h under the CPU emulator: the
// subset cudrv.h calls, with the driver's names, types and enum values, so
// that the same C (cudrv.h) and the same Python (scripts/device/torchcupy.py,
// through ctypes) drive the emulator as they drive a GPU. emu.cpp implements
// it; libcudaemu.so exports it under the driver's symbol names.
#pragma once
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphExec_st* CUgraphExec;
typedef struct CUlinkState_st* CUlinkState;
typedef int CUdevice;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_INVALID_IMAGE 200
#define CUDA_ERROR_NO_BINARY_FOR_GPU 209
#define CUDA_ERROR_INVALID_PTX 218
#define CUDA_ERROR_INVALID_HANDLE 400
#define CUDA_ERROR_NOT_FOUND 500
#define CUDA_ERROR_LAUNCH_FAILED 719
#define CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED 900
#define CUDA_ERROR_STREAM_CAPTURE_INVALIDATED 901

typedef enum CUjit_option_enum {
    CU_JIT_MAX_REGISTERS = 0,
    CU_JIT_THREADS_PER_BLOCK = 1,
    CU_JIT_WALL_TIME = 2,
    CU_JIT_INFO_LOG_BUFFER = 3,
    CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    CU_JIT_LOG_VERBOSE = 12,
} CUjit_option;

typedef enum CUstreamCaptureMode_enum {
    CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
    CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
    CU_STREAM_CAPTURE_MODE_RELAXED = 2,
} CUstreamCaptureMode;

typedef enum CUjitInputType_enum {
    CU_JIT_INPUT_CUBIN = 0,
    CU_JIT_INPUT_PTX = 1,
} CUjitInputType;

typedef enum CUdevice_attribute_enum {
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
} CUdevice_attribute;

#define CU_STREAM_DEFAULT 0

CUresult cuGetErrorString(CUresult error, const char** pStr);
CUresult cuGetErrorName(CUresult error, const char** pStr);
CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions, CUjit_option* options,
                            void** optionValues);
CUresult cuModuleUnload(CUmodule hmod);
// The JIT linker: PTX in, a cubin (emu/image.h) for the device out.
CUresult cuLinkCreate(unsigned int numOptions, CUjit_option* options, void** optionValues, CUlinkState* stateOut);
CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void* data, size_t size, const char* name,
                       unsigned int numOptions, CUjit_option* options, void** optionValues);
CUresult cuLinkComplete(CUlinkState state, void** cubinOut, size_t* sizeOut);
CUresult cuLinkDestroy(CUlinkState state);
CUresult cuCtxGetDevice(CUdevice* device);
CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev);
CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name);
CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                        unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra);
CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags);
CUresult cuStreamDestroy(CUstream hStream);
CUresult cuStreamSynchronize(CUstream hStream);
CUresult cuCtxSynchronize(void);
CUresult cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount, CUstream hStream);
// Graphs: a capture records the stream's launches (each parameter as the 8
// bytes its kernelParams entry points to: every caller here passes 8-byte
// slots) instead of running them; an instantiated graph replays them.
CUresult cuStreamBeginCapture(CUstream hStream, CUstreamCaptureMode mode);
CUresult cuStreamEndCapture(CUstream hStream, CUgraph* phGraph);
CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags);
CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream);
CUresult cuGraphExecDestroy(CUgraphExec hGraphExec);
CUresult cuGraphDestroy(CUgraph hGraph);

// Not in the driver: the emulator's check that a launch passes as many
// arguments as the kernel takes (the driver reads what the kernel's
// signature says, whatever was passed).
int emu_check_args(CUfunction f, int nargs, char* err, int errLen);
// Not in the driver: how many PTX modules this process has compiled
// (cuModuleLoadDataEx of PTX text, cuLinkAddData of PTX), so that a test
// sees whether a module came from a cache or a cubin instead.
long long emu_ptx_compiles(void);
// Not in the driver: when s is being captured, records a host call
// fn(args, NULL, err, errLen) as a node of the graph (a library's work, as
// cuBLAS's kernels would be) and returns 1; else 0, and the caller runs it.
int emu_capture_call(CUstream s, int (*fn)(const uint64_t*, void*, char*, int), const uint64_t* args, int nargs);

#ifdef __cplusplus
}
#endif
