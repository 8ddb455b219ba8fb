//go:build cudaemu && !cuda

package cuda

import (
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var refBLAS struct {
	once sync.Once
	dir  string
	err  error
}

// testBLAS builds emu/cublas.cpp, the reference cuBLAS, as libcublas.so.13
// in a directory of its own (laid out as a pip wheel's lib/) and returns
// that directory, for Options.BLAS.
func testBLAS(t *testing.T) string {
	t.Helper()
	refBLAS.once.Do(func() {
		dir, err := mkdirTemp()
		if err != nil {
			refBLAS.err = err
			return
		}
		out, err := exec.Command("g++", "-std=c++20", "-O2", "-shared", "-fPIC", "emu/cublas.cpp",
			"-o", filepath.Join(dir, "libcublas.so.13")).CombinedOutput()
		if err != nil {
			refBLAS.err = &buildError{err, string(out)}
			return
		}
		refBLAS.dir = dir
	})
	if refBLAS.err != nil {
		t.Fatalf("reference cuBLAS: %v", refBLAS.err)
	}
	return refBLAS.dir
}
