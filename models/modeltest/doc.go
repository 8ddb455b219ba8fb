// Package modeltest writes tiny Llama-family models for tests: GGUF files
// (any quant type kernels/quant can encode) and Hugging Face directories
// (config.json, safetensors, tokenizer.json), with deterministic random
// weights and a small byte-level BPE vocabulary. One Spec and seed give the
// same f32 weights in both formats, so loaders and forward passes can be
// checked against each other and against Weights, the f32 reference.
//
// It also exposes the low-level GGUF encoder (EncodeGGUF) so reader tests can
// build malformed files. Nothing here is safe to call concurrently on the same
// path.
package modeltest
