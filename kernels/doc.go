// Package kernels owns the Backend interface: the small set of operations a model
// forward pass needs, written so that one model definition runs on any device.
//
// Tensors are opaque handles owned by the backend that made them (host memory on
// the CPU, device memory on a GPU). Operations may be queued and run
// asynchronously; only Read moves data to the host, and it waits for everything
// queued before it. The KV block pool's storage also belongs to the backend
// (KVStore); the kvcache package deals only in block ids.
//
// Concurrency: a Backend is driven by one goroutine (the engine loop). Backends
// may use worker goroutines internally but every call returns with its effects
// ordered before the next call.
//
// Implementations live in kernels/cpu (Go + assembly, the reference) and
// kernels/cuda (build tag cuda).
package kernels
