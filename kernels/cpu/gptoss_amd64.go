//go:build amd64 && !noasm

package cpu

//go:noescape
func oaiSwiGLUPreAVX2(t, gate *float32, n int, alpha, limit float32)

//go:noescape
func oaiSwiGLUPostAVX2(gate, up, t *float32, n int, limit float32)

// oaiSwiGLUPre and oaiSwiGLUPost: gptoss_amd64.s for the multiple-of-8
// prefix, the generic loops for the tail.
func oaiSwiGLUPre(t, g []float32, alpha, limit float32) {
	m := len(g) &^ 7
	if useAVX2 && m > 0 {
		_ = t[m-1]
		oaiSwiGLUPreAVX2(&t[0], &g[0], m, alpha, limit)
		t, g = t[m:], g[m:]
	}
	oaiSwiGLUPreGeneric(t, g, alpha, limit)
}

func oaiSwiGLUPost(g, u, t []float32, limit float32) {
	m := len(g) &^ 7
	if useAVX2 && m > 0 {
		_, _ = u[m-1], t[m-1]
		oaiSwiGLUPostAVX2(&g[0], &u[0], &t[0], m, limit)
		g, u, t = g[m:], u[m:], t[m:]
	}
	oaiSwiGLUPostGeneric(g, u, t, limit)
}
