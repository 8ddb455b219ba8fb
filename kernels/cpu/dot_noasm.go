//go:build !amd64 || noasm

package cpu

// Without assembly (other architectures, or -tags noasm to test the pure-Go
// path on amd64) every kernel is the generic one.
const useAVX2 = false

func dotF32Fast(a, b []float32) float32 { return dotF32Generic(a, b) }

func dotF16F32Fast(w []byte, x []float32) float32  { return dotF16F32Generic(w, x) }
func dotBF16F32Fast(w []byte, x []float32) float32 { return dotBF16F32Generic(w, x) }

func expF32Fast(dst, x []float32, sub float32) float32 { return expF32Generic(dst, x, sub) }
func siluMulF32Fast(dst, gate, up []float32)           { siluMulF32Generic(dst, gate, up) }
