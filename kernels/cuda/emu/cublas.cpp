// A reference cuBLAS for the emulator: the entry points blas.h calls, with
// cuBLAS's semantics (column-major, op(A) and op(B), leading dimensions,
// alpha and beta from host pointers, f32 accumulation) over host memory,
// which is the emulator's device memory. The tests build it as a shared
// library and name it in Options.BLAS, so the backend dlopens it exactly as
// it dlopens libcublas.so.13 on a GPU. It checks its arguments as cuBLAS
// documents (CUBLAS_STATUS_INVALID_VALUE, NOT_SUPPORTED), so a wrong leading
// dimension or type fails the call instead of reading past a buffer.
#include <stdint.h>
#include <string.h>

#include <vector>

namespace {

enum { OP_N = 0, OP_T = 1, R_32F = 0, R_16F = 2, R_16BF = 14, COMPUTE_32F = 68 };
enum { OK = 0, NOT_INITIALIZED = 1, INVALID_VALUE = 7, NOT_SUPPORTED = 15 };

struct Handle {
    uint32_t magic = 0x5c0b1a5;
    void* stream = nullptr;
    size_t workspace = 0;
    // the caller's workspace was reset by a cublasSetStream after it
    bool dropped = false;
};

float f16(uint16_t h) {
    const uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023;
    uint32_t u;
    if (e == 31) {
        u = s | 0x7f800000u | (m << 13);
    } else if (e != 0) {
        u = s | ((e + 112) << 23) | (m << 13);
    } else if (m == 0) {
        u = s;
    } else { // subnormal: m · 2^-24
        float f = (float)m * (1.0f / 16777216.0f);
        memcpy(&u, &f, 4);
        u |= s;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float load(const void* p, int type, long long i) {
    if (type == R_32F) return ((const float*)p)[i];
    const uint16_t h = ((const uint16_t*)p)[i];
    if (type == R_16F) return f16(h);
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

bool known(int t) { return t == R_32F || t == R_16F || t == R_16BF; }

} // namespace

extern "C" {

int cublasCreate_v2(void** h) {
    *h = new Handle;
    return OK;
}

int cublasDestroy_v2(void* h) {
    if (h == nullptr || ((Handle*)h)->magic != 0x5c0b1a5) return NOT_INITIALIZED;
    ((Handle*)h)->magic = 0;
    delete (Handle*)h;
    return OK;
}

// As cuBLAS documents, setting the stream resets the workspace to the
// library's own pool.
int cublasSetStream_v2(void* h, void* s) {
    if (h == nullptr || ((Handle*)h)->magic != 0x5c0b1a5) return NOT_INITIALIZED;
    Handle* hd = (Handle*)h;
    hd->stream = s;
    if (hd->workspace > 0) hd->dropped = true;
    hd->workspace = 0;
    return OK;
}

// The workspace is only checked: the reference needs none.
int cublasSetWorkspace_v2(void* h, void* ws, size_t bytes) {
    if (h == nullptr || ((Handle*)h)->magic != 0x5c0b1a5) return NOT_INITIALIZED;
    if (ws == nullptr && bytes > 0) return INVALID_VALUE;
    ((Handle*)h)->workspace = bytes;
    ((Handle*)h)->dropped = false;
    return OK;
}

int cublasGetVersion_v2(void* h, int* v) {
    if (h == nullptr || ((Handle*)h)->magic != 0x5c0b1a5) return NOT_INITIALIZED;
    *v = 0; // not a cuBLAS release
    return OK;
}

// C (m × n, ldc) = alpha · op(A) (m × k) · op(B) (k × n) + beta · C.
int cublasGemmEx(void* h, int ta, int tb, int m, int n, int k, const void* alpha, const void* A, int at, int lda,
                 const void* B, int bt, int ldb, const void* beta, void* C, int ct, int ldc, int compute, int algo) {
    (void)algo;
    if (h == nullptr || ((Handle*)h)->magic != 0x5c0b1a5) return NOT_INITIALIZED;
    // Stricter than cuBLAS, for what would go wrong only on a GPU: a GEMM on
    // the legacy stream is not ordered with the caller's stream, and one
    // whose handle lost the caller's workspace to a later cublasSetStream
    // allocates from cuBLAS's pool, which a graph capture cannot.
    if (((Handle*)h)->stream == nullptr || ((Handle*)h)->dropped) return NOT_SUPPORTED;
    if (m < 0 || n < 0 || k < 0 || (ta != OP_N && ta != OP_T) || (tb != OP_N && tb != OP_T)) return INVALID_VALUE;
    // lda ≥ rows of A as stored: m for op N, k for op T; likewise B, and C's m
    if (lda < (ta == OP_N ? m : k) || lda < 1 || ldb < (tb == OP_N ? k : n) || ldb < 1 || ldc < m || ldc < 1)
        return INVALID_VALUE;
    if (!known(at) || !known(bt) || at != bt || ct != R_32F || compute != COMPUTE_32F) return NOT_SUPPORTED;
    if (alpha == nullptr || beta == nullptr) return INVALID_VALUE;
    const float al = *(const float*)alpha, be = *(const float*)beta;
    float* c = (float*)C;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int p = 0; p < k; p++) {
                const long long ia = ta == OP_N ? i + (long long)p * lda : p + (long long)i * lda;
                const long long ib = tb == OP_N ? p + (long long)j * ldb : j + (long long)p * ldb;
                s += (double)load(A, at, ia) * load(B, bt, ib);
            }
            float* o = &c[i + (long long)j * ldc];
            // beta = 0 ignores C, as cuBLAS does (it may hold NaNs)
            *o = be == 0 ? al * (float)s : al * (float)s + be * *o;
        }
    return OK;
}

} // extern "C"
