//go:build !amd64 || noasm

package cpu

func scoresRun(dst []float32, k []uint16, stride int, q []float32, scale float32) {
	scoresRunGeneric(dst, k, stride, q, scale)
}

func valuesRun(o []float32, v []uint16, stride int, e []float32, inv float32) {
	valuesRunGeneric(o, v, stride, e, inv)
}
