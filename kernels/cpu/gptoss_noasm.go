//go:build !amd64 || noasm

package cpu

func oaiSwiGLUPre(t, g []float32, alpha, limit float32) { oaiSwiGLUPreGeneric(t, g, alpha, limit) }

func oaiSwiGLUPost(g, u, t []float32, limit float32) { oaiSwiGLUPostGeneric(g, u, t, limit) }
