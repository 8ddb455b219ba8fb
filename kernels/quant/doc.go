// Package quant owns GGML's storage formats: the byte layout of every block type
// a GGUF file may hold (as in llama.cpp's ggml-common.h), their exact
// dequantization, reference quantizers (round-to-nearest, following ggml's
// quantize_row_*_ref), and the activation formats (Q8_0, Q8_1, Q8_K) that the
// CPU kernels quantize activations into before integer dot products.
//
// Everything here is pure Go, allocation-free on the *Into paths, and safe for
// concurrent use: there is no mutable package state after init.
package quant
