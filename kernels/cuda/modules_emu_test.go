//go:build cudaemu && !cuda

package cuda

import (
	"encoding/hex"
	"fmt"
	"maps"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/sluicehq/sluice/kernels"
)

// withImages runs the rest of a test with prebuilt cubins cubins (nil: the
// embedded ones) and an empty image cache, both restored after.
func withImages(t *testing.T, cubins fstest.MapFS) {
	t.Helper()
	images.Lock()
	saved := images.m
	images.m = nil
	images.Unlock()
	savedFS := cubinFS
	if cubins != nil {
		cubinFS = cubins
	}
	t.Cleanup(func() {
		cubinFS = savedFS
		images.Lock()
		images.m = saved
		images.Unlock()
	})
}

// checkLoads fails unless every module of b came the way want says (a
// prefix of ModuleLoad.From), and b's kernels still compute what the CPU's
// do.
func checkLoads(t *testing.T, p *pair, want string) {
	t.Helper()
	loads := p.gpu.Modules()
	if len(loads) != len(modules) {
		t.Fatalf("%d modules loaded, want %d", len(loads), len(modules))
	}
	for _, ml := range loads {
		if !strings.HasPrefix(ml.From, want) {
			t.Errorf("module %s: loaded from %q, want %q", ml.Name, ml.From, want)
		}
	}
	const n, cols = 3, 256
	x := p.scratch(p.randn(n*cols, 1), n, cols)
	w := p.upload(kernels.F32, p.randn(cols, 1), cols)
	h := p.scratch(nil, n, cols)
	must(t, p.gpu.RMSNorm(h.g, x.g, w.g, n, 1e-5), p.cpu.RMSNorm(h.c, x.c, w.c, n, 1e-5))
	p.check("rms_norm after a load from "+want, h, n*cols, 1e-6)
}

// TestModuleCache: the first backend of a process compiles each module's
// PTX once; a second backend on the same device loads the cached images,
// with no JIT at all.
func TestModuleCache(t *testing.T) {
	withImages(t, fstest.MapFS{})
	before := emuPTXCompiles()
	p := newPairWith(t, Options{})
	checkLoads(t, p, "PTX JIT")
	if got := emuPTXCompiles() - before; got != int64(len(modules)) {
		t.Errorf("first backend: %d PTX compiles, want %d", got, len(modules))
	}
	before = emuPTXCompiles()
	p2 := newPairWith(t, Options{})
	checkLoads(t, p2, "cache")
	if got := emuPTXCompiles() - before; got != 0 {
		t.Errorf("second backend: %d PTX compiles, want none", got)
	}
	if compile, load := p2.gpu.JITTime(); compile != 0 || load <= 0 {
		t.Errorf("second backend: JIT compile %v, load %v; want none and some", compile, load)
	}
}

// jitImages compiles every module for a device of compute capability cc
// (SLUICE_EMU_CC) and returns the images by the file name a prebuilt
// cubin for sm_90 would have.
func jitImages(t *testing.T, cc string) fstest.MapFS {
	t.Setenv("SLUICE_EMU_CC", cc)
	withImages(t, fstest.MapFS{})
	newPairWith(t, Options{})
	images.Lock()
	imgs := maps.Clone(images.m)
	images.Unlock()
	fsys := fstest.MapFS{}
	for _, name := range modules {
		src, err := readPTX("", name)
		if err != nil {
			t.Fatal(err)
		}
		sum := ptxSum("", name, src)
		img := imgs[imageKey{sum, int(cc[0]-'0')*10 + int(cc[2]-'0')}]
		if img == nil {
			t.Fatalf("no image of %s for %s", name, cc)
		}
		fsys[fmt.Sprintf("cubin/%s.%s.sm_90.cubin", name, hex.EncodeToString(sum[:8]))] = &fstest.MapFile{Data: img}
	}
	return fsys
}

// TestCubinSelection: prebuilt sm_90 cubins load without a JIT on an sm_90
// device; on another device they are not tried (the PTX is compiled), and
// a cubin that claims sm_90 but is built for another arch is refused by
// the driver and falls back to the PTX.
func TestCubinSelection(t *testing.T) {
	sm90, sm80 := jitImages(t, "9.0"), jitImages(t, "8.0")
	t.Run("sm_90 device", func(t *testing.T) {
		t.Setenv("SLUICE_EMU_CC", "9.0")
		withImages(t, sm90)
		before := emuPTXCompiles()
		checkLoads(t, newPairWith(t, Options{}), "cubin ")
		if got := emuPTXCompiles() - before; got != 0 {
			t.Errorf("%d PTX compiles with prebuilt cubins, want none", got)
		}
	})
	t.Run("sm_89 device", func(t *testing.T) {
		t.Setenv("SLUICE_EMU_CC", "8.9")
		withImages(t, sm90)
		checkLoads(t, newPairWith(t, Options{}), "PTX JIT")
	})
	t.Run("wrong-arch cubin", func(t *testing.T) {
		t.Setenv("SLUICE_EMU_CC", "9.0")
		withImages(t, sm80)
		p := newPairWith(t, Options{})
		checkLoads(t, p, "PTX JIT (")
		if from := p.gpu.Modules()[0].From; !strings.Contains(from, "CUDA_ERROR_NO_BINARY_FOR_GPU") {
			t.Errorf("fallback %q does not say why the cubin was refused", from)
		}
	})
	t.Run("sm_90 device, later minor", func(t *testing.T) {
		t.Setenv("SLUICE_EMU_CC", "9.1")
		withImages(t, sm90)
		checkLoads(t, newPairWith(t, Options{}), "cubin ")
	})
}

// TestPrebuiltCubins: the cubins build-cubin.sh made with ptxas for the
// committed PTX (when they were built: make cuda-cubin) are what an sm_90
// device loads, every module of them.
func TestPrebuiltCubins(t *testing.T) {
	src, err := readPTX("", modules[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := prebuilt(modules[0], ptxSum("", modules[0], src), 90); !ok {
		t.Skip("no prebuilt cubins for the embedded PTX (make cuda-cubin)")
	}
	t.Setenv("SLUICE_EMU_CC", "9.0")
	withImages(t, nil)
	checkLoads(t, newPairWith(t, Options{}), "cubin ")
}
