//go:build !amd64 || noasm

package cpu

func toHalf(dst []uint16, src []float32)            { toHalfGeneric(dst, src) }
func axpyHalf(dst []float32, a float32, x []uint16) { axpyHalfGeneric(dst, a, x[:len(dst)]) }
