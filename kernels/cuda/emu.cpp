//go:build cudaemu && !cuda

// The kernels' own .cu sources compiled for the CPU emulator (emu/runtime.h)
// and a C entry point per launch for driver_emu.go.
#include "emu/runtime.h"

#include "attention.cu"
#include "elementwise.cu"
#include "matmul.cu"
#include "sample.cu"

#include <map>
#include <type_traits>
#include <utility>

#include "emu/api.h"

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

struct Kernel {
    int nargs;
    std::function<void(const uint64_t*)> call;
};

template <typename... A, size_t... I>
void invoke(void (*f)(A...), const uint64_t* a, std::index_sequence<I...>) {
    f(arg<A>(a[I])...);
}

template <typename... A>
Kernel kernel(void (*f)(A...)) {
    return {(int)sizeof...(A), [f](const uint64_t* a) { invoke(f, a, std::index_sequence_for<A...>{}); }};
}

#define K(name) {#name, kernel(name)},
#define TYPES(p) K(p##f16) K(p##bf16) K(p##q4_0) K(p##q4_1) K(p##q5_0) K(p##q5_1) K(p##q8_0) K(p##q4_k) K(p##q5_k) K(p##q6_k)
#define GEMV(t) K(gemv_##t##_1) K(gemv_##t##_2) K(gemv_##t##_4) K(gemv_##t##_8)

const std::map<std::string, Kernel>& registry() {
    static const std::map<std::string, Kernel> r = {
        TYPES(get_rows_) K(get_rows_f32) K(get_rows_f32_any) K(rms_norm) K(add_rms_norm) K(rope) K(swiglu) K(add) K(kv_write)
        GEMV(f32) GEMV(f16) GEMV(bf16) GEMV(q4_0) GEMV(q4_1) GEMV(q5_0) GEMV(q5_1) GEMV(q8_0) GEMV(q4_k) GEMV(q5_k) GEMV(q6_k)
        TYPES(mma_) K(paged_attention) K(attention_combine) K(sample)
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
