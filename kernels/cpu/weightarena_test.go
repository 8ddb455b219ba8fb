package cpu

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
)

// TestUploadPlacesWeightsOnHugePages: Upload copies a grouped matrix and a
// K-quant one (neither copy aliases the source, whose pages Upload gives
// back) into memory advised for huge pages: its mapping's VmFlags in
// /proc/self/smaps carry "hg", whether or not the kernel found free huge
// pages at that moment (AnonHugePages, logged, depends on fragmentation).
// Skipped where THP is off or this is not Linux.
func TestUploadPlacesWeightsOnHugePages(t *testing.T) {
	thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(thp), "[never]") {
		t.Skipf("transparent huge pages unavailable here (%q)", strings.TrimSpace(string(thp)))
	}
	be := New(1)
	defer be.Close()
	r := rand.New(rand.NewPCG(14, 26))
	const in = 2048
	for _, c := range []struct {
		dt   kernels.DType
		rows int
	}{{kernels.Q8_0, 3 << 20 / kernels.Q8_0.RowBytes(in)}, {kernels.Q4_K, 3 << 20 / kernels.Q4_K.RowBytes(in)}} {
		src := randomBlocks(r, c.dt, c.rows, in).raw
		up, err := be.Upload(kernels.HostTensor{Name: c.dt.String(), DType: c.dt, Shape: []int{c.rows, in}, Data: src})
		if err != nil {
			t.Fatal(err)
		}
		raw := up.(*tensor).raw
		if unsafe.SliceData(raw) == unsafe.SliceData(src) {
			t.Fatalf("%v: Upload used the source in place", c.dt)
		}
		flags, hugeKiB := smapsOf(t, unsafe.SliceData(raw))
		t.Logf("%v: VmFlags %v, AnonHugePages %d kB", c.dt, flags, hugeKiB)
		if !slices.Contains(flags, "hg") {
			t.Fatalf("%v: the weight's mapping is not advised for huge pages (VmFlags %v)", c.dt, flags)
		}
	}
}

// smapsOf is the VmFlags and AnonHugePages of the mapping in
// /proc/self/smaps that holds p.
func smapsOf(t *testing.T, p *byte) (flags []string, hugeKiB int) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	addr := uint64(uintptr(unsafe.Pointer(p)))
	in, found := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = a <= addr && addr < b
				found = found || in
				continue
			}
		}
		switch {
		case in && fields[0] == "AnonHugePages:":
			if hugeKiB, err = strconv.Atoi(fields[1]); err != nil {
				t.Fatal(err)
			}
		case in && fields[0] == "VmFlags:":
			flags = fields[1:]
		}
	}
	if !found {
		t.Fatalf("no mapping in /proc/self/smaps holds %#x", addr)
	}
	return flags, hugeKiB
}

// BenchmarkWeightPages: one SmolLM2-135M decode step's matmuls (smolStep,
// regrouped as Upload regroups them where the grouped kernels run) over
// weights on huge pages (weightArena, as Upload places them) and over the
// same bytes in ordinary Go heap memory, the two taking turns step by step
// so load on a shared machine falls on both alike. Each step's 96 MB
// stream from memory (the other copy's pass evicts them). Metrics: each
// placement's ms a step, and small/huge, the step's speed-up.
func BenchmarkWeightPages(b *testing.B) {
	const ffn, vocab = 1536, 49152
	r := rand.New(rand.NewPCG(3, 3))
	var arena weightArena
	var onHuge, onHeap []stepMatMul
	for _, m := range smolStep(r) {
		wt := m.wt
		h := &tensor{shape: wt.shape, dtype: wt.dtype}
		s := &tensor{shape: wt.shape, dtype: wt.dtype}
		if groupedRuns(wt.dtype) {
			nb := m.in / wt.dtype.BlockElems()
			h.layout, s.layout = grouped, grouped
			h.raw = packGroupedInto(arena.take, wt.dtype, wt.raw, m.out, nb, grouped)
			s.raw = packGrouped(wt.dtype, wt.raw, m.out, nb, grouped)
		} else {
			h.raw = arena.take(len(wt.raw))
			copy(h.raw, wt.raw)
			s.raw = wt.raw
		}
		onHuge = append(onHuge, stepMatMul{h, m.in, m.out})
		onHeap = append(onHeap, stepMatMul{s, m.in, m.out})
	}
	x := randVec(r, ffn)
	dst := make([]float32, vocab)
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("t=%d", threads), func(b *testing.B) {
			w := testWorkers(b, threads)
			step := func(s []stepMatMul) time.Duration {
				t0 := time.Now()
				for _, m := range s {
					matMul(w, dst, x, 1, m.in, m.wt, m.out, nil)
				}
				return time.Since(t0)
			}
			step(onHuge)
			step(onHeap)
			var huge, small time.Duration
			for b.Loop() {
				huge += step(onHuge)
				small += step(onHeap)
			}
			b.ReportMetric(huge.Seconds()*1e3/float64(b.N), "huge-ms/step")
			b.ReportMetric(small.Seconds()*1e3/float64(b.N), "small-ms/step")
			b.ReportMetric(small.Seconds()/huge.Seconds(), "speedup")
		})
	}
}
