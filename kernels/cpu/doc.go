// Package cpu is the reference kernels.Backend: plain Go plus AVX2 and AVX-512
// assembly for the quantized dot products, and AMX-INT8 tiles for prompt rows
// where the CPU has them (amx.go; kernels.PromptRows says which rows are
// prompt tokens, so a row's arithmetic never depends on its batch). Tensors
// are host slices. Weight matrices are copied, still quantized, from the
// model file's mmap onto huge pages (weightarena.go); Q4_1 and Q8_0 ones,
// where the AVX-512 VNNI or AVX2 kernels run, into groups of sixteen or
// eight rows a block (x16pack.go), a lane a row, whose kernels sum each
// block's products in int32 before one scaling. Backend.KeepFileLayout
// keeps every weight in place in the file's layout.
//
// Concurrency: one goroutine drives the backend. Large operations split their
// rows over a fixed set of worker goroutines (Threads) and return only when all
// of them are done, so every call is synchronous from the caller's view.
package cpu
