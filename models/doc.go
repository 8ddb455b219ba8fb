// Package models owns architecture definitions, written once against
// kernels.Backend, and weight loading: GGUF files read over mmap and Hugging
// Face directories (config.json + safetensors). Weights stay in their file's
// storage format; the backend computes with them as they are.
//
// Architectures: the Llama family (llama.go: Llama 2/3, Mistral, TinyLlama,
// SmolLM2, Qwen2; Qwen3 adds QK-norm; Qwen3-MoE and Mixtral a mixture-of-
// experts feed-forward; Qwen2-MoE a shared expert, qwen2moe.go; OLMoE a
// whole-projection QK-norm, olmoe.go; SmolLM3 its NoPE layers, smollm3.go),
// Gemma 3 and 2 (gemma3.go: window and global layers; Gemma 2's soft-capped
// scores and logits), Gemma 4 (gemma4.go: heads of two shapes, V norm,
// proportional RoPE; gemma4_small.go: E2B/E4B's per-layer inputs and shared
// K/V) and gpt-oss (gptoss.go: attention sinks, YaRN, biased experts with a
// clamped SwiGLU, MXFP4 weights). Each architecture names its reasoning
// markup (reasoning.go) for the layer that streams it.
// What a model needs beyond kernels.Ops (QK-norm, GeGLU, sliding-window
// attention, MoE) it finds on the backend as optional interfaces at Load,
// and a backend without them is refused there, never mid-step.
package models
