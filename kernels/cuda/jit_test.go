//go:build cuda || cudaemu

package cuda

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestJITTime reports what loading the modules costs, twice in one process
// (scripts/device/first.sh runs it in two processes over an empty driver
// cache), where each module came from (a prebuilt cubin on an sm_90 GPU,
// else the PTX's JIT; the second backend from this process's cache), and
// which GEMM path the backend took. A load of no time at all would mean
// nothing was timed.
func TestJITTime(t *testing.T) {
	for i := range 2 {
		b, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		compile, load := b.JITTime()
		if load <= 0 || compile > load {
			t.Errorf("JIT compile %v, load %v: want 0 ≤ compile ≤ load, load > 0", compile, load)
		}
		from := map[string]int{}
		for _, ml := range b.Modules() {
			kind, _, _ := strings.Cut(ml.From, " (")
			kind, _, _ = strings.Cut(kind, " ")
			from[kind]++
			if i == 0 && strings.Contains(ml.From, "(") {
				t.Logf("module %s: %s", ml.Name, ml.From) // a prebuilt cubin refused
			}
		}
		t.Logf("JIT: %d modules, load %.0f ms (compile %.0f ms), backend %d of this process (driver cache %s); from: %d cubin, %d PTX JIT, %d cache",
			len(modules), load.Seconds()*1e3, compile.Seconds()*1e3, i+1, cacheDir(), from["cubin"], from["PTX"], from["cache"])
		if i == 0 {
			t.Logf("GEMM path: %s", b.GEMMPath())
		}
		if i == 1 && (compile != 0 || from["cache"] != len(modules)) {
			t.Errorf("backend 2 of the process: %v compiling, %d of %d modules from the cache; want all cached", compile, from["cache"], len(modules))
		}
		b.Close()
	}
}

func cacheDir() string {
	if d := os.Getenv("CUDA_CACHE_PATH"); d != "" {
		return d
	}
	return "default, ~/.nv/ComputeCache"
}

// TestTrace: SLUICE_CUDA_TRACE=1 names each launch before issuing it, in
// the step's order, and waits after each as SLUICE_CUDA_SYNC=1 does; a
// launch the driver refuses is still reported as the launch it is.
func TestTrace(t *testing.T) {
	t.Setenv("SLUICE_CUDA_TRACE", "1")
	var out bytes.Buffer
	traceOut = &out
	t.Cleanup(func() { traceOut = os.Stderr })
	p := newPair(t)
	if !p.gpu.opts.SyncEach {
		t.Fatal("SLUICE_CUDA_TRACE=1 did not set SyncEach")
	}
	const n, cols = 2, 256
	x := p.scratch(p.randn(n*cols, 1), n, cols)
	w := p.upload(kernels.F32, p.randn(cols, 1), cols)
	h := p.scratch(nil, n, cols)
	must(t, p.gpu.RMSNorm(h.g, x.g, w.g, n, 1e-5), p.gpu.Add(h.g, x.g, n), p.cpu.RMSNorm(h.c, x.c, w.c, n, 1e-5), p.cpu.Add(h.c, x.c, n))
	p.check("norm+add, traced", h, n*cols, 1e-6)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "cuda trace: launch 1/2 rms_norm grid") ||
		!strings.HasPrefix(lines[1], "cuda trace: launch 2/2 add") {
		t.Errorf("trace:\n%s\nwant rms_norm then add, launches 1/2 and 2/2", out.String())
	}
}
