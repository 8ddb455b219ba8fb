//go:build cuda || cudaemu

package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestJITErrorLog: a PTX module the driver cannot build fails New with the
// module's name, the call, and the JIT's own error log (ptxas's parse error
// on a GPU; the emulator names the kernel its registry lacks).
func TestJITErrorLog(t *testing.T) {
	dir := t.TempDir()
	for _, name := range modules {
		src, err := readPTX("", name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "sample" {
			src = append(src, "\n.visible .entry sluice_not_a_kernel( this is not PTX\n"...)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".ptx"), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := New(Options{PTXDir: dir})
	if err == nil {
		b.Close()
		t.Fatal("New loaded a corrupt PTX module")
	}
	var de *DriverError
	if !errors.As(err, &de) || !strings.HasPrefix(de.Call, "cuLink") {
		t.Errorf("error %q does not wrap the JIT linker's failure", err)
	}
	for _, want := range []string{"module sample", dir, "JIT error log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	t.Logf("%v", err)
}

// TestSyncEach runs fused ops with a wait after every launch (SLUICE_CUDA_SYNC=1)
// and checks they still agree with the CPU, and that a launch the driver
// refuses fails its step naming the kernel, its place in the step and its
// arguments.
func TestSyncEach(t *testing.T) {
	t.Setenv("SLUICE_CUDA_SYNC", "1")
	p := newPair(t)
	if !p.gpu.opts.SyncEach {
		t.Fatal("SLUICE_CUDA_SYNC=1 did not set SyncEach")
	}
	const n, cols = 3, 512
	x := p.scratch(p.randn(n*cols, 1), n, cols)
	o := p.scratch(p.randn(n*cols, 1), n, cols)
	w := p.upload(kernels.F32, p.randn(cols, 1), cols)
	h := p.scratch(nil, n, cols)
	before := p.gpu.Launches()
	must(t, p.gpu.Add(x.g, o.g, n), p.gpu.RMSNorm(h.g, x.g, w.g, n, 1e-5), p.cpu.Add(x.c, o.c, n), p.cpu.RMSNorm(h.c, x.c, w.c, n, 1e-5))
	p.check("add+norm, synchronized", h, n*cols, 1e-6)
	if got := p.gpu.Launches() - before; got != 1 {
		t.Errorf("Add then RMSNorm issued %d launches, want 1", got)
	}
	if !emulated {
		return // a GPU reads whatever a short argument list leaves: only the emulator refuses it
	}
	hg := h.g.(*tensor)
	must(t, p.gpu.launch("rms_norm", [3]int{n, 1, 1}, [3]int{256, 1, 1}, ptrArg(hg.ptr), ptrArg(hg.ptr)))
	err := p.gpu.Sync()
	var le *LaunchError
	if !errors.As(err, &le) || le.Kernel != "rms_norm" || le.Index != 0 || len(le.Args) != 2 {
		t.Fatalf("a launch with 2 of rms_norm's 5 arguments: error %v, want a LaunchError naming rms_norm", err)
	}
	if !strings.Contains(err.Error(), "kernel rms_norm (launch 1 of 1") {
		t.Errorf("error %q does not say which launch failed", err)
	}
	// the failed step is gone: the next one runs
	must(t, p.gpu.RMSNorm(h.g, x.g, w.g, n, 1e-5))
	p.check("norm after a failed step", h, n*cols, 1e-6)
}
