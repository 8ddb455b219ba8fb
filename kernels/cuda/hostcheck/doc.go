// Package hostcheck tests the CUDA kernels' block decoders (common.cuh) on
// the CPU: nvcc compiles them into a host program, whose output must match
// kernels/quant's reference dequantization for every weight type. It needs
// nvcc but no GPU, so CI runs it where the device tests can only be built:
//
//	go test -tags cuda ./kernels/cuda/hostcheck/
package hostcheck
