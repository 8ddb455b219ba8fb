//go:build !amd64 || noasm

package cpu

func deltaScaleDot(m, k []float32, s float32) float32   { return deltaScaleDotGeneric(m, k, s) }
func deltaAxpyDot(m, k, q []float32, d float32) float32 { return deltaAxpyDotGeneric(m, k, q, d) }
