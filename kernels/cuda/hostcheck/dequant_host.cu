// Host harness for common.cuh's block decoders: reads one row of COLS
// elements of type TYPE (GGML id) from stdin and writes them decoded as
// float32 to stdout, 16 at a time through dequant16 — the very function the
// kernels call, compiled for the CPU.
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include "../common.cuh"

template <int T>
static void run(const uint8_t* row, int cols, float* out) {
    for (int k0 = 0; k0 < cols; k0 += 16) dequant16<T>(row, k0, out + k0);
}

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: dequant_host TYPE COLS < row > floats\n");
        return 2;
    }
    const int type = atoi(argv[1]), cols = atoi(argv[2]);
    std::vector<uint8_t> row;
    for (int c; (c = getchar()) != EOF;) row.push_back((uint8_t)c);
    row.resize(row.size() + 16); // room for the widest load past the end
    std::vector<float> out(cols);
    switch (type) {
#define CASE(T) \
    case T: run<T>(row.data(), cols, out.data()); break;
        CASE(T_F32) CASE(T_F16) CASE(T_BF16) CASE(T_Q4_0) CASE(T_Q4_1) CASE(T_Q5_0) CASE(T_Q5_1) CASE(T_Q8_0)
        CASE(T_Q4_K) CASE(T_Q5_K) CASE(T_Q6_K) CASE(T_MXFP4)
    default:
        fprintf(stderr, "dequant_host: unknown type %d\n", type);
        return 2;
    }
    fwrite(out.data(), sizeof(float), cols, stdout);
    return 0;
}
