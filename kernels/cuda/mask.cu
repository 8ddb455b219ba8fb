// Constraint masks on the device: the logits of the tokens a row's grammar
// does not allow become −inf, so the device sampler (sample.cu) picks among
// the allowed ones, as the engine's host path does (engine/constraint.go).
// Only the bitsets cross to the device (vocab/32 words a row, in the step's
// table upload), not the logits to the host.
//
//   tab    [n] logits row of each masked row, then n bitsets of `words`
//          uint32 (token t allowed ⇔ bit t%32 of word t/32), in that order
//   grid   x strides over the vocabulary, y is the masked row
// Rows not listed are left as they are; bits past vocab are ignored.
#include <math_constants.h>

#include <stdint.h>

extern "C" __global__ void mask_logits(float* logits, const int* tab, int n, int vocab, int words) {
    const int r = blockIdx.y;
    if (r >= n) return;
    const uint32_t* bits = (const uint32_t*)(tab + n) + (size_t)r * words;
    float* l = logits + (size_t)tab[r] * vocab;
    // A warp's 32 threads read one word: a broadcast, one load a warp.
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < vocab; i += gridDim.x * blockDim.x) {
        if (!((bits[i >> 5] >> (i & 31)) & 1u)) l[i] = -CUDART_INF_F;
    }
}
