//go:build cudaemu && !cuda

package cuda

// blasAuto: under the emulator only a named library is loaded (the
// reference cuBLAS of emu/cublas.cpp, in the tests): a real one would be
// handed host addresses as device pointers.
const blasAuto = false
