//go:build cudaemu && !cuda

// The kernels' own .cu sources compiled for the CPU emulator (emu/runtime.h),
// and the driver API subset of emu/cuda.h over them: modules are checked
// against the registry below, a launch runs the kernel to completion. Go
// (cudrv.h through driver_emu.go) and Python (scripts/device/torchcupy.py,
// emucupy) call it as they call libcuda on a GPU.
#include "emu/runtime.h"

#include "attention.cu"
#include "blas.cu"
#include "deltanet.cu"
#include "elementwise.cu"
#include "gptoss.cu"
#include "logprobs.cu"
#include "mask.cu"
#include "matmul.cu"
#include "modelops.cu"
#include "sample.cu"

#include <atomic>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>

#include "emu/api.h"
#include "emu/cuda.h"
#include "emu/image.h"

namespace {

// arg converts one 8-byte launch argument as the driver would: a pointer, an
// integer, or a float32 in the low half.
template <typename T>
T arg(uint64_t v) {
    if constexpr (std::is_pointer_v<T>) {
        return reinterpret_cast<T>(v);
    } else if constexpr (std::is_same_v<T, float>) {
        return __uint_as_float((uint32_t)v);
    } else {
        return (T)(int64_t)v;
    }
}

// A kernel takes its arguments as 8-byte values (emu_launch) or, as
// cuLaunchKernel does, as pointers to each parameter's bytes (param reads
// its parameter's size from there, as the driver reads the PTX signature).
struct Kernel {
    int nargs;
    std::function<void(const uint64_t*)> call;
    std::function<void(void* const*)> callp;
};

template <typename T>
T param(void* p) {
    T v;
    memcpy(&v, p, sizeof(T));
    return v;
}

template <typename... A, size_t... I>
void invoke(void (*f)(A...), const uint64_t* a, std::index_sequence<I...>) {
    f(arg<A>(a[I])...);
}

template <typename... A, size_t... I>
void invokep(void (*f)(A...), void* const* p, std::index_sequence<I...>) {
    f(param<A>(p[I])...);
}

template <typename... A>
Kernel kernel(void (*f)(A...)) {
    return {(int)sizeof...(A), [f](const uint64_t* a) { invoke(f, a, std::index_sequence_for<A...>{}); },
            [f](void* const* p) { invokep(f, p, std::index_sequence_for<A...>{}); }};
}

#define K(name) {#name, kernel(name)},
#define TYPES(p) K(p##f16) K(p##bf16) K(p##q4_0) K(p##q4_1) K(p##q5_0) K(p##q5_1) K(p##q8_0) K(p##q4_k) K(p##q5_k) K(p##q6_k) K(p##mxfp4)
#define GEMV(t) K(gemv_##t##_1) K(gemv_##t##_2) K(gemv_##t##_4) K(gemv_##t##_8) K(gemv_glu_##t##_1)

const std::map<std::string, Kernel>& registry() {
    static const std::map<std::string, Kernel> r = {
        TYPES(get_rows_) K(get_rows_f32) K(get_rows_f32_any) K(rms_norm) K(add_rms_norm) K(rope) K(rope_kv) K(swiglu) K(add) K(kv_write)
        GEMV(f32) GEMV(f16) GEMV(bf16) GEMV(q4_0) GEMV(q4_1) GEMV(q5_0) GEMV(q5_1) GEMV(q8_0) GEMV(q4_k) GEMV(q5_k) GEMV(q6_k) GEMV(mxfp4)
        TYPES(mma_) TYPES(skinny16_) TYPES(skinny32_) TYPES(skinny64_) K(paged_attention) K(paged_decode_64) K(paged_decode_80) K(paged_decode_96) K(paged_decode_128) K(paged_decode_256) K(paged_prefill_64) K(paged_prefill_80) K(paged_prefill_96) K(paged_prefill_128) K(sample)
        K(to_half_bf16) K(to_half_f16) K(bias_rows) // blas.cu
        K(head_rms_norm) K(geglu) K(scale_rows) K(moe_route) K(moe_scatter) K(zero_f32) K(soft_cap) K(capped_attention) K(gated_add) // modelops.cu
        K(mask_logits) // mask.cu
        K(topk_logprobs) // logprobs.cu
        K(dn_conv) K(dn_l2norm) K(dn_recur) K(dn_copy) K(sigmoid_mul) // deltanet.cu
        K(sink_attention) K(oai_swiglu) // gptoss.cu
        K(paged_decode_sink_64) K(paged_decode_sink_80) K(paged_decode_sink_96) K(paged_decode_sink_128) K(paged_decode_sink_256)
        K(paged_prefill_sink_64) K(paged_prefill_sink_80) K(paged_prefill_sink_96) K(paged_prefill_sink_128) // attention.cu, gpt-oss
    };
    return r;
}

} // namespace

extern "C" int emu_has(const char* name) { return registry().count(name) != 0; }

extern "C" int emu_launch(const char* name, int gx, int gy, int gz, int bx, int by, int bz, const uint64_t* args,
                          int nargs, char* err, int errLen) {
    auto it = registry().find(name);
    std::string msg;
    if (it == registry().end()) {
        msg = "no kernel ";
        msg += name;
    } else if (it->second.nargs != nargs) {
        msg = std::string(name) + ": " + std::to_string(nargs) + " arguments, the kernel takes " +
              std::to_string(it->second.nargs);
    } else {
        try {
            const Kernel& k = it->second;
            std::vector<uint64_t> a(args, args + nargs);
            emu::launch(dim3{(unsigned)gx, (unsigned)gy, (unsigned)gz}, dim3{(unsigned)bx, (unsigned)by, (unsigned)bz},
                        [&k, &a] { k.call(a.data()); });
            return 0;
        } catch (const std::exception& e) {
            msg = std::string(name) + ": " + e.what();
        }
    }
    snprintf(err, errLen, "%s", msg.c_str());
    return 1;
}

// ---- the driver API subset (emu/cuda.h) ------------------------------------

struct CUmod_st {
    std::vector<std::string> entries;
};
struct CUfunc_st {
    std::string name;
    const Kernel* k;
};
// A graph node: one launch with its parameters' bytes, or a host call
// (emu_capture_call) with its arguments.
struct EmuNode {
    CUfunction f;
    dim3 grid, block;
    std::vector<uint64_t> params;
    int (*host)(const uint64_t*, void*, char*, int) = nullptr;
};
struct CUgraph_st {
    std::vector<EmuNode> nodes;
};
struct CUgraphExec_st {
    std::vector<EmuNode> nodes;
};
struct CUstream_st {
    CUgraph capture = nullptr; // the graph being recorded, while capturing
};
struct CUlinkState_st {
    std::vector<std::string> entries;
    std::vector<uint8_t> image; // cuLinkComplete's cubin, alive until cuLinkDestroy
    char *info = nullptr, *err = nullptr;
    void **infoSize = nullptr, **errSize = nullptr;
};

namespace {

// lastError is the message behind the last CUDA_ERROR_LAUNCH_FAILED of this
// thread, which cuGetErrorString returns (the driver's string says less).
thread_local std::string lastError;

// ptxEntries lists the kernel names a PTX text defines (".entry name(").
std::vector<std::string> ptxEntries(const char* ptx) {
    std::vector<std::string> names;
    for (const char* p = ptx; (p = strstr(p, ".entry ")) != nullptr;) {
        p += 7;
        while (*p == ' ') p++;
        const char* e = p;
        while (*e && *e != '(' && *e != ' ' && *e != '\n') e++;
        names.emplace_back(p, e);
        p = e;
    }
    return names;
}

// putLog copies msg into a JIT log buffer option pair and writes back the
// bytes used, as the driver does.
void putLog(const std::string& msg, char* buf, void** sizeSlot) {
    if (buf == nullptr || sizeSlot == nullptr) return;
    size_t cap = (size_t)(uintptr_t)*sizeSlot;
    if (cap == 0) return;
    size_t n = std::min(cap - 1, msg.size());
    memcpy(buf, msg.data(), n);
    buf[n] = 0;
    *sizeSlot = (void*)(uintptr_t)(n + 1);
}

} // namespace

extern "C" CUresult cuGetErrorString(CUresult e, const char** s) {
    switch (e) {
    case CUDA_SUCCESS: *s = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument"; break;
    case CUDA_ERROR_INVALID_IMAGE: *s = "device kernel image is invalid"; break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: *s = "no kernel image is available for execution on the device"; break;
    case CUDA_ERROR_INVALID_PTX: *s = "a PTX JIT compilation failed"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "invalid resource handle"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "named symbol not found"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *s = lastError.empty() ? "unspecified launch failure" : lastError.c_str(); break;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: *s = "operation not permitted when stream is capturing"; break;
    default: *s = nullptr; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

extern "C" CUresult cuGetErrorName(CUresult e, const char** s) {
    switch (e) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: *s = "CUDA_ERROR_NO_BINARY_FOR_GPU"; break;
    case CUDA_ERROR_INVALID_PTX: *s = "CUDA_ERROR_INVALID_PTX"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *s = "CUDA_ERROR_LAUNCH_FAILED"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; break;
    default: *s = nullptr; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

// ptxCompiles counts the PTX modules compiled (emu_ptx_compiles).
std::atomic<long long> ptxCompiles{0};

extern "C" long long emu_ptx_compiles(void) { return ptxCompiles.load(); }

namespace {

// jitLogs finds the log buffer options of a JIT call.
void jitLogs(unsigned n, const CUjit_option* opts, void** vals, char** info, void*** infoSize, char** err,
             void*** errSize) {
    for (unsigned i = 0; i < n; i++) {
        switch (opts[i]) {
        case CU_JIT_INFO_LOG_BUFFER: *info = (char*)vals[i]; break;
        case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: *infoSize = &vals[i]; break;
        case CU_JIT_ERROR_LOG_BUFFER: *err = (char*)vals[i]; break;
        case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: *errSize = &vals[i]; break;
        default: break;
        }
    }
}

// missing names the first of entries the registry lacks ("" if none): the
// kernel ptxas could not build.
std::string missing(const std::vector<std::string>& entries) {
    for (const std::string& e : entries)
        if (registry().count(e) == 0) return "emulator: kernel " + e + " of this module is not in emu.cpp's registry";
    return "";
}

} // namespace

// cuModuleLoadDataEx "compiles" PTX by finding each of its kernels in the
// registry: one that is missing fails the load with the error log naming it,
// as ptxas would name a kernel it cannot build. A cubin (emu/image.h) loads
// only on a device of its SASS arch's major version and at least its minor,
// as on a GPU; its kernels must be in the registry too.
extern "C" CUresult cuModuleLoadDataEx(CUmodule* m, const void* image, unsigned int n, CUjit_option* opts,
                                       void** vals) {
    char *info = nullptr, *err = nullptr;
    void **infoSize = nullptr, **errSize = nullptr;
    jitLogs(n, opts, vals, &info, &infoSize, &err, &errSize);
    putLog("", info, infoSize);
    putLog("", err, errSize);
    std::vector<std::string> entries;
    if (emuimg::isELF(image)) {
        int sm = 0;
        std::string why;
        if (!emuimg::read((const uint8_t*)image, &sm, &entries, &why)) {
            putLog("emulator: " + why, err, errSize);
            return CUDA_ERROR_INVALID_IMAGE;
        }
        const int cc = emuimg::cc();
        if (sm / 10 != cc / 10 || sm % 10 > cc % 10) {
            putLog("emulator: a cubin for sm_" + std::to_string(sm) + " on a device of compute capability " +
                       std::to_string(cc / 10) + "." + std::to_string(cc % 10),
                   err, errSize);
            return CUDA_ERROR_NO_BINARY_FOR_GPU;
        }
    } else {
        ptxCompiles++;
        entries = ptxEntries((const char*)image);
    }
    if (std::string why = missing(entries); !why.empty()) {
        putLog(why, err, errSize);
        return emuimg::isELF(image) ? CUDA_ERROR_INVALID_IMAGE : CUDA_ERROR_INVALID_PTX;
    }
    putLog("emulator: " + std::to_string(entries.size()) + " kernels", info, infoSize);
    *m = new CUmod_st{std::move(entries)};
    return CUDA_SUCCESS;
}

// The linker takes one PTX module and "compiles" it (as cuModuleLoadDataEx
// does) into a cubin for the current device's arch, as the driver's JIT
// targets the context's device.
extern "C" CUresult cuLinkCreate(unsigned int n, CUjit_option* opts, void** vals, CUlinkState* st) {
    auto* l = new CUlinkState_st;
    jitLogs(n, opts, vals, &l->info, &l->infoSize, &l->err, &l->errSize);
    // the logs start empty; their sizes are written back once written
    if (l->info != nullptr) l->info[0] = 0;
    if (l->err != nullptr) l->err[0] = 0;
    *st = l;
    return CUDA_SUCCESS;
}

extern "C" CUresult cuLinkAddData(CUlinkState l, CUjitInputType type, void* data, size_t size, const char*,
                                  unsigned int, CUjit_option*, void**) {
    if (l == nullptr || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_JIT_INPUT_PTX || strnlen((const char*)data, size) == size) return CUDA_ERROR_INVALID_VALUE;
    ptxCompiles++;
    std::vector<std::string> entries = ptxEntries((const char*)data);
    if (std::string why = missing(entries); !why.empty()) {
        putLog(why, l->err, l->errSize);
        return CUDA_ERROR_INVALID_PTX;
    }
    l->entries.insert(l->entries.end(), entries.begin(), entries.end());
    return CUDA_SUCCESS;
}

extern "C" CUresult cuLinkComplete(CUlinkState l, void** cubin, size_t* size) {
    if (l == nullptr) return CUDA_ERROR_INVALID_VALUE;
    l->image = emuimg::write(emuimg::cc(), l->entries);
    putLog("emulator: linked " + std::to_string(l->entries.size()) + " kernels for sm_" + std::to_string(emuimg::cc()),
           l->info, l->infoSize);
    *cubin = l->image.data();
    *size = l->image.size();
    return CUDA_SUCCESS;
}

extern "C" CUresult cuLinkDestroy(CUlinkState l) {
    delete l;
    return CUDA_SUCCESS;
}

extern "C" CUresult cuCtxGetDevice(CUdevice* d) {
    *d = 0;
    return CUDA_SUCCESS;
}

extern "C" CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
    if (d != 0) return CUDA_ERROR_INVALID_VALUE;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = emuimg::cc() / 10; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = emuimg::cc() % 10; return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

extern "C" CUresult cuModuleUnload(CUmodule m) {
    delete m;
    return CUDA_SUCCESS;
}

extern "C" CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
    if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    bool in = false;
    for (const std::string& e : m->entries) in = in || e == name;
    if (!in) return CUDA_ERROR_NOT_FOUND;
    // one handle per name for the life of the process, as small as the registry
    static std::mutex mu;
    static std::map<std::string, CUfunc_st> fns;
    std::lock_guard<std::mutex> lock(mu);
    auto it = fns.try_emplace(name, CUfunc_st{name, &registry().at(name)}).first;
    *f = &it->second;
    return CUDA_SUCCESS;
}

extern "C" int emu_check_args(CUfunction f, int nargs, char* err, int errLen) {
    if (f->k->nargs == nargs) return 0;
    snprintf(err, errLen, "%s: %d arguments, the kernel takes %d", f->name.c_str(), nargs, f->k->nargs);
    return 1;
}

extern "C" CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned shared, CUstream s, void** params, void** extra) {
    if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (shared != 0 || extra != nullptr || (params == nullptr && f->k->nargs > 0)) return CUDA_ERROR_INVALID_VALUE;
    if (s != nullptr && s->capture != nullptr) {
        EmuNode node{f, dim3{gx, gy, gz}, dim3{bx, by, bz}, std::vector<uint64_t>(f->k->nargs)};
        for (int i = 0; i < f->k->nargs; i++) memcpy(&node.params[i], params[i], 8);
        s->capture->nodes.push_back(std::move(node));
        return CUDA_SUCCESS;
    }
    try {
        const Kernel* k = f->k;
        emu::launch(dim3{gx, gy, gz}, dim3{bx, by, bz}, [k, params] { k->callp(params); });
    } catch (const std::exception& e) {
        lastError = f->name + ": " + e.what();
        return CUDA_ERROR_LAUNCH_FAILED;
    }
    return CUDA_SUCCESS;
}

extern "C" CUresult cuStreamCreate(CUstream* s, unsigned int) {
    *s = new CUstream_st;
    return CUDA_SUCCESS;
}

extern "C" CUresult cuStreamDestroy(CUstream s) {
    delete s;
    return CUDA_SUCCESS;
}

// Every emulated launch and copy has finished when it returns. Waiting on,
// or copying through, a stream being captured is an error, as on a GPU.
extern "C" CUresult cuStreamSynchronize(CUstream s) {
    return s != nullptr && s->capture != nullptr ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}
extern "C" CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }

extern "C" CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
    if (s != nullptr && s->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    memcpy((void*)(uintptr_t)dst, src, n);
    return CUDA_SUCCESS;
}

extern "C" CUresult cuStreamBeginCapture(CUstream s, CUstreamCaptureMode) {
    if (s == nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; // the legacy stream cannot be captured
    if (s->capture != nullptr) return CUDA_ERROR_INVALID_VALUE;
    s->capture = new CUgraph_st;
    return CUDA_SUCCESS;
}

extern "C" int emu_capture_call(CUstream s, int (*fn)(const uint64_t*, void*, char*, int), const uint64_t* args,
                                int nargs) {
    if (s == nullptr || s->capture == nullptr) return 0;
    EmuNode node{nullptr, dim3{}, dim3{}, std::vector<uint64_t>(args, args + nargs)};
    node.host = fn;
    s->capture->nodes.push_back(std::move(node));
    return 1;
}

extern "C" CUresult cuStreamEndCapture(CUstream s, CUgraph* g) {
    if (s == nullptr || s->capture == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *g = s->capture;
    s->capture = nullptr;
    return CUDA_SUCCESS;
}

extern "C" CUresult cuGraphInstantiateWithFlags(CUgraphExec* e, CUgraph g, unsigned long long) {
    if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *e = new CUgraphExec_st{g->nodes};
    return CUDA_SUCCESS;
}

extern "C" CUresult cuGraphLaunch(CUgraphExec e, CUstream s) {
    if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (s != nullptr && s->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    for (EmuNode& n : e->nodes) {
        if (n.host != nullptr) {
            char err[256] = "";
            if (n.host(n.params.data(), nullptr, err, sizeof err) != 0) {
                lastError = err;
                return CUDA_ERROR_LAUNCH_FAILED;
            }
            continue;
        }
        void* p[64];
        for (size_t i = 0; i < n.params.size(); i++) p[i] = &n.params[i];
        CUresult r = cuLaunchKernel(n.f, n.grid.x, n.grid.y, n.grid.z, n.block.x, n.block.y, n.block.z, 0, nullptr,
                                    n.params.empty() ? nullptr : p, nullptr);
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}

extern "C" CUresult cuGraphExecDestroy(CUgraphExec e) {
    delete e;
    return CUDA_SUCCESS;
}

extern "C" CUresult cuGraphDestroy(CUgraph g) {
    delete g;
    return CUDA_SUCCESS;
}
