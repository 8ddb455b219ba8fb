//go:build cudaemu && !cuda

package cuda

// emulated: the tests run on the CPU emulator (build tag cudaemu), where
// the longest shapes are cut down to keep the run short.
const emulated = true
