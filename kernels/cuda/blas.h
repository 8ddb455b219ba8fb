// cuBLAS, loaded at run time: the host's libcublas.so (major 13 or 12) is
// dlopen'ed, never linked, so a binary built against CUDA 11.8 uses whatever
// cuBLAS the GPU machine has and runs without one. The few enum values used
// are cuBLAS's stable ABI (cublas_api.h, library_types.h), written out here
// so that no cuBLAS header is needed to build.
//
// A GEMM is recorded as one launch of the step (sl_launch with kind
// SL_KIND_GEMM) whose arguments carry everything the call needs, the entry
// points included: cgo compiles each Go file's preamble on its own, so no
// state may live in this header's statics.
#pragma once
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define SL_KIND_GEMM 1

enum {
    SL_CUBLAS_OP_N = 0,
    SL_CUBLAS_OP_T = 1,
    SL_CUDA_R_32F = 0,
    SL_CUDA_R_16F = 2,
    SL_CUDA_R_16BF = 14,
    SL_CUBLAS_COMPUTE_32F = 68,
    SL_CUBLAS_GEMM_DEFAULT = -1,
};

typedef int (*sl_cublasCreate_t)(void** handle);
typedef int (*sl_cublasDestroy_t)(void* handle);
typedef int (*sl_cublasSetStream_t)(void* handle, void* stream);
typedef int (*sl_cublasGetVersion_t)(void* handle, int* version);
typedef int (*sl_cublasGemmEx_t)(void* handle, int transa, int transb, int m, int n, int k, const void* alpha,
                                 const void* A, int Atype, int lda, const void* B, int Btype, int ldb, const void* beta,
                                 void* C, int Ctype, int ldc, int computeType, int algo);

typedef int (*sl_cublasSetWorkspace_t)(void* handle, void* workspace, size_t bytes);
// sl_blas is one loaded cuBLAS and a handle on the backend's context.
// setWorkspace is optional (NULL when the library lacks it): with a
// workspace of the backend's own, cuBLAS allocates nothing while a stream
// is captured, so its GEMMs can be recorded into a CUDA graph.
typedef struct {
    void* lib;
    void* handle;
    sl_cublasGemmEx_t gemm;
    sl_cublasSetStream_t setStream;
    sl_cublasDestroy_t destroy;
    sl_cublasSetWorkspace_t setWorkspace;
    int version;
} sl_blas;

// sl_blas_open dlopens path and creates a handle (on the calling thread's
// current context). A directory's libcublasLt is loaded first, globally:
// libcublas needs it and a wheel's directory is not on the loader's path.
// Returns 0, or writes why not to err.
static int sl_blas_open(sl_blas* b, const char* path, const char* ltPath, char* err, int errLen) {
    memset(b, 0, sizeof *b);
    if (ltPath != NULL && ltPath[0] != 0) dlopen(ltPath, RTLD_NOW | RTLD_GLOBAL); // best effort: libcublas says if it is missing
    b->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (b->lib == NULL) {
        snprintf(err, errLen, "%s", dlerror());
        return 1;
    }
    sl_cublasCreate_t create = (sl_cublasCreate_t)dlsym(b->lib, "cublasCreate_v2");
    sl_cublasGetVersion_t version = (sl_cublasGetVersion_t)dlsym(b->lib, "cublasGetVersion_v2");
    b->gemm = (sl_cublasGemmEx_t)dlsym(b->lib, "cublasGemmEx");
    b->setStream = (sl_cublasSetStream_t)dlsym(b->lib, "cublasSetStream_v2");
    b->destroy = (sl_cublasDestroy_t)dlsym(b->lib, "cublasDestroy_v2");
    b->setWorkspace = (sl_cublasSetWorkspace_t)dlsym(b->lib, "cublasSetWorkspace_v2");
    if (create == NULL || version == NULL || b->gemm == NULL || b->setStream == NULL || b->destroy == NULL) {
        snprintf(err, errLen, "%s lacks cublasCreate_v2, cublasGetVersion_v2, cublasGemmEx, cublasSetStream_v2 or cublasDestroy_v2", path);
        dlclose(b->lib);
        b->lib = NULL;
        return 1;
    }
    int st = create(&b->handle);
    if (st != 0) {
        snprintf(err, errLen, "cublasCreate_v2: status %d", st);
        dlclose(b->lib);
        b->lib = NULL;
        return 1;
    }
    version(b->handle, &b->version);
    return 0;
}

// sl_blas_bind puts the handle on the backend's one stream, once: every
// GEMM after runs there, inside a graph capture of that stream too. Then
// (bytes > 0) it gives the handle bytes of device memory at ptr as its
// workspace. The order matters: cublasSetStream resets the workspace to
// cuBLAS's own pool, which a capture cannot allocate from, so it is never
// called again. Returns -1 with cuBLAS's status in *st when the stream
// cannot be set, 0 with a workspace of ours, 1 without one.
static int sl_blas_bind(sl_blas* b, void* stream, uint64_t ptr, size_t bytes, int* st) {
    *st = b->setStream(b->handle, stream);
    if (*st != 0) return -1;
    if (bytes == 0 || b->setWorkspace == NULL) return 1;
    *st = b->setWorkspace(b->handle, (void*)(uintptr_t)ptr, bytes);
    return *st == 0 ? 0 : 1;
}
static void sl_blas_close(sl_blas* b) {
    if (b->handle != NULL) b->destroy(b->handle);
    // the library stays loaded: cuBLAS's own teardown runs at exit
    memset(b, 0, sizeof *b);
}

// A GEMM launch's arguments (blas.go's gemmArgs): the column-major
// C = alpha·op(A)·op(B) + beta·C of cublasGemmEx, f32 accumulation.
enum {
    SL_G_GEMM,
    SL_G_HANDLE,
    SL_G_TRANSA,
    SL_G_TRANSB,
    SL_G_M,
    SL_G_N,
    SL_G_K,
    SL_G_ALPHA, // float32 bits
    SL_G_A,
    SL_G_ATYPE,
    SL_G_LDA,
    SL_G_B,
    SL_G_BTYPE,
    SL_G_LDB,
    SL_G_BETA, // float32 bits
    SL_G_C,
    SL_G_CTYPE,
    SL_G_LDC,
    SL_G_NARGS
};

// sl_gemm issues one recorded GEMM on the handle's stream (sl_blas_bind:
// the backend's stream, which s is too). A cuBLAS failure is reported as
// CUDA_ERROR_LAUNCH_FAILED with cuBLAS's status in err.
static int sl_gemm(const uint64_t* a, void* s, char* err, int errLen) {
    (void)s;
    void* h = (void*)(uintptr_t)a[SL_G_HANDLE];
    float alpha, beta;
    uint32_t ab = (uint32_t)a[SL_G_ALPHA], bb = (uint32_t)a[SL_G_BETA];
    memcpy(&alpha, &ab, 4);
    memcpy(&beta, &bb, 4);
    int st = ((sl_cublasGemmEx_t)(uintptr_t)a[SL_G_GEMM])(
        h, (int)a[SL_G_TRANSA], (int)a[SL_G_TRANSB], (int)a[SL_G_M], (int)a[SL_G_N], (int)a[SL_G_K], &alpha,
        (const void*)(uintptr_t)a[SL_G_A], (int)a[SL_G_ATYPE], (int)a[SL_G_LDA], (const void*)(uintptr_t)a[SL_G_B],
        (int)a[SL_G_BTYPE], (int)a[SL_G_LDB], &beta, (void*)(uintptr_t)a[SL_G_C], (int)a[SL_G_CTYPE], (int)a[SL_G_LDC],
        SL_CUBLAS_COMPUTE_32F, SL_CUBLAS_GEMM_DEFAULT);
    if (st != 0) snprintf(err, errLen, "cublasGemmEx (m %d n %d k %d): cuBLAS status %d", (int)a[SL_G_M], (int)a[SL_G_N],
                          (int)a[SL_G_K], st);
    return st;
}
