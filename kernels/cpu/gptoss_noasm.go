//go:build !amd64 || noasm

package cpu

func oaiSwiGLUPre(t, g []float32, alpha, limit float32) { oaiSwiGLUPreGeneric(t, g, alpha, limit) }

func oaiSwiGLUPost(g, u, t []float32, limit float32) { oaiSwiGLUPostGeneric(g, u, t, limit) }

func sinkScores(scores []float32, kc []uint16, slots []int32, kvCols, off int, q []float32, scale float32) {
	sinkScoresGeneric(scores, kc, slots, kvCols, off, q, scale)
}

func sinkValues(o []float32, vc []uint16, slots []int32, kvCols, off int, e []float32, inv float32) {
	sinkValuesGeneric(o, vc, slots, kvCols, off, e, inv)
}
