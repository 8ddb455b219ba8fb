// Package quant owns GGML's storage formats: the byte layout of every block type
// a GGUF file may hold (as in llama.cpp's ggml-common.h), their exact
// dequantization, reference quantizers (round-to-nearest, following ggml's
// quantize_row_*_ref), and the activation formats (Q8_0, Q8_1, Q8_K) that the
// CPU kernels quantize activations into before integer dot products.
//
// API: Dequantize and Quantize/QuantizeInto for every storage type; ActQ8_0,
// ActQ8_1, ActQ8_K for activations; F16/BF16 ⇄ F32 conversions (round to
// nearest even, bit-identical to ggml and F16C). Quantizers and dequantizers
// are checked byte for byte against gguf-py and ggml's C code (testdata/).
//
// Everything here is pure Go, allocation-free except Quantize, and safe for
// concurrent use: there is no mutable package state after init.
package quant
