// The emulator's cubins: what cuLinkComplete "compiles" a PTX module into
// and what cuModuleLoadDataEx accepts besides PTX text. A cubin here is the
// ELF a real ptxas writes, cut to what a loader checks: the CUDA machine
// (EM_CUDA), the SASS arch in e_flags' low byte, and one .text.<kernel>
// section per entry point. ptxas's own cubins (kernels/cuda/build-cubin.sh)
// read the same way, so the prebuilt ones load under the emulator too.
#pragma once
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

namespace emuimg {

constexpr uint16_t EM_CUDA = 190;

// isELF reports whether an image starts with the ELF magic (a cubin, not
// PTX text).
inline bool isELF(const void* image) { return memcmp(image, "\x7f" "ELF", 4) == 0; }

// cc is the emulated device's compute capability as major·10 + minor:
// SLUICE_EMU_CC ("8.9"), read at each call so that a test can change it;
// 9.0 (an H200's) by default.
inline int cc() {
    const char* s = getenv("SLUICE_EMU_CC");
    int major = 9, minor = 0;
    if (s != nullptr && s[0] >= '1' && s[0] <= '9' && s[1] == '.' && s[2] >= '0' && s[2] <= '9') {
        major = s[0] - '0', minor = s[2] - '0';
    }
    return major * 10 + minor;
}

template <typename T>
void put(std::vector<uint8_t>& b, size_t at, T v) {
    memcpy(b.data() + at, &v, sizeof v);
}
template <typename T>
T get(const uint8_t* b, size_t at) {
    T v;
    memcpy(&v, b + at, sizeof v);
    return v;
}

// write builds a cubin for SASS arch sm (90 for sm_90) holding kernels:
// the ELF header, the section-name table, an empty .text section per kernel.
inline std::vector<uint8_t> write(int sm, const std::vector<std::string>& kernels) {
    std::string names(1, '\0');
    std::vector<uint32_t> nameAt;
    nameAt.push_back((uint32_t)names.size());
    names += ".shstrtab";
    names += '\0';
    for (const std::string& k : kernels) {
        nameAt.push_back((uint32_t)names.size());
        names += ".text." + k;
        names += '\0';
    }
    const size_t shoff = (64 + names.size() + 7) / 8 * 8, shnum = 2 + kernels.size();
    std::vector<uint8_t> b(shoff + 64 * shnum);
    memcpy(b.data(), "\x7f" "ELF", 4);
    b[4] = 2, b[5] = 1, b[6] = 1, b[7] = 0x33, b[8] = 7; // 64-bit, little-endian, version 1, CUDA ABI 7
    put<uint16_t>(b, 16, 2);                            // ET_EXEC
    put<uint16_t>(b, 18, EM_CUDA);
    put<uint32_t>(b, 20, 1);
    put<uint32_t>(b, 48, (80u << 16) | 0x500u | (uint32_t)sm); // PTX ISA target compute_80, SASS sm
    put<uint64_t>(b, 40, shoff);
    put<uint16_t>(b, 52, 64); // e_ehsize
    put<uint16_t>(b, 58, 64); // e_shentsize
    put<uint16_t>(b, 60, (uint16_t)shnum);
    put<uint16_t>(b, 62, 1); // e_shstrndx
    memcpy(b.data() + 64, names.data(), names.size());
    for (size_t i = 1; i < shnum; i++) {
        const size_t sh = shoff + 64 * i;
        put<uint32_t>(b, sh, nameAt[i - 1]);
        put<uint32_t>(b, sh + 4, i == 1 ? 3 : 1); // SHT_STRTAB, SHT_PROGBITS
        if (i == 1) {
            put<uint64_t>(b, sh + 24, 64);
            put<uint64_t>(b, sh + 32, names.size());
        } else {
            put<uint64_t>(b, sh + 8, 6); // SHF_ALLOC | SHF_EXECINSTR
        }
    }
    return b;
}

// read parses a cubin: its SASS arch and the kernels of its .text sections.
// The ELF header gives its size (cuModuleLoadDataEx takes none); the
// section table is bounds-checked against it.
inline bool read(const uint8_t* b, int* sm, std::vector<std::string>* kernels, std::string* why) {
    if (b[4] != 2 || b[5] != 1 || get<uint16_t>(b, 18) != EM_CUDA) {
        *why = "not a 64-bit little-endian CUDA ELF";
        return false;
    }
    *sm = (int)(get<uint32_t>(b, 48) & 0xff);
    const uint64_t shoff = get<uint64_t>(b, 40);
    const unsigned shnum = get<uint16_t>(b, 60), entsize = get<uint16_t>(b, 58), strndx = get<uint16_t>(b, 62);
    if (entsize != 64 || strndx >= shnum || shoff > (1ull << 32)) {
        *why = "a malformed section table";
        return false;
    }
    const uint8_t* str = b + shoff + 64 * (size_t)strndx;
    const uint8_t* names = b + get<uint64_t>(str, 24);
    const uint64_t namesLen = get<uint64_t>(str, 32);
    for (unsigned i = 0; i < shnum; i++) {
        const uint32_t at = get<uint32_t>(b + shoff + 64 * (size_t)i, 0);
        if (at >= namesLen) continue;
        const char* n = (const char*)names + at;
        if (strncmp(n, ".text.", 6) == 0) kernels->emplace_back(n + 6, strnlen(n + 6, namesLen - at - 6));
    }
    return true;
}

} // namespace emuimg
