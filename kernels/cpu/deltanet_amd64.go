//go:build amd64 && !noasm

package cpu

//go:noescape
func scaleDotAVX2(m, k *float32, n int, s float32) float32

//go:noescape
func axpyDotAVX2(m, k, q *float32, n int, d float32) float32

// deltaScaleDot: m *= s, then Σ m·k (deltanet_amd64.s for whole lanes of 8).
func deltaScaleDot(m, k []float32, s float32) float32 {
	n := len(m)
	k = k[:n]
	if !useAVX2 || n < 8 {
		return deltaScaleDotGeneric(m, k, s)
	}
	w := n &^ 7
	r := scaleDotAVX2(&m[0], &k[0], w, s)
	return r + deltaScaleDotGeneric(m[w:], k[w:], s)
}

// deltaAxpyDot: m += d·k, then Σ m·q.
func deltaAxpyDot(m, k, q []float32, d float32) float32 {
	n := len(m)
	k, q = k[:n], q[:n]
	if !useAVX2 || n < 8 {
		return deltaAxpyDotGeneric(m, k, q, d)
	}
	w := n &^ 7
	r := axpyDotAVX2(&m[0], &k[0], &q[0], w, d)
	return r + deltaAxpyDotGeneric(m[w:], k[w:], q[w:], d)
}
