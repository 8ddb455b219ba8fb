// Package models owns architecture definitions (the Llama family, written once
// against kernels.Backend) and weight loading: GGUF files read over mmap and
// Hugging Face directories (config.json + safetensors). Weights stay in their
// file's storage format; the backend computes with them as they are.
package models
