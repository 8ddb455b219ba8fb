// Package modeltest holds the CUDA backend's model-level tests, built only
// with the cuda tag: a whole Llama forward pass on the CUDA and CPU backends
// compared on a random SmolLM2-shaped model, and the decode benchmark of a
// random Llama-3-8B-shaped BF16 model. Both models are generated in memory
// (no download, nothing carried), so they run as they are on a GPU machine:
//
//	go test -tags cuda -c -o bin/cuda-model.test ./kernels/cuda/modeltest
//	bin/cuda-model.test -test.run . -test.v               (on the GPU machine)
//
// It is a separate package from kernels/cuda because models links the
// tokenizer library, which the op tests do not need.
package modeltest
