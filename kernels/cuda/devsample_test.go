//go:build cuda || cudaemu

package cuda

import (
	"math"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// ReadRows copies exactly the listed rows, in the order listed (runs of
// consecutive rows, single rows, a row twice), bit for bit; DeviceToHostBytes
// grows by exactly what crossed, for it, Read and SampleRows alike; rows
// outside the tensor and a wrong dst are refused before anything runs.
func TestReadRowsAndDeviceToHostBytes(t *testing.T) {
	p := newPair(t)
	const rows, vocab = 9, 1001
	logits := p.randn(rows*vocab, 3)
	lt := p.scratch(logits, rows, vocab)
	var ds kernels.DeviceSampler = p.gpu
	before := ds.DeviceToHostBytes()
	for _, pick := range [][]int32{{0, 1, 2}, {8}, {3, 5, 6, 7, 1}, {4, 4}, {}} {
		got := make([]float32, len(pick)*vocab)
		must(t, ds.ReadRows(lt.g, pick, got))
		for i, r := range pick {
			for j := range vocab {
				if math.Float32bits(got[i*vocab+j]) != math.Float32bits(logits[int(r)*vocab+j]) {
					t.Fatalf("rows %v: value %d of row %d is %v, want %v", pick, j, r, got[i*vocab+j], logits[int(r)*vocab+j])
				}
			}
		}
		after := ds.DeviceToHostBytes()
		if want := int64(4 * len(pick) * vocab); after-before != want {
			t.Errorf("rows %v: %d bytes counted, want %d", pick, after-before, want)
		}
		before = after
	}
	all := make([]float32, rows*vocab)
	must(t, p.gpu.Read(lt.g, all))
	ids := make([]int32, rows)
	must(t, ds.SampleRows(lt.g, make([]kernels.SampleParams, rows), ids))
	if want := int64(4*rows*vocab + 4*rows); ds.DeviceToHostBytes()-before != want {
		t.Errorf("Read and SampleRows: %d bytes counted, want %d", ds.DeviceToHostBytes()-before, want)
	}
	for r, id := range ids { // the zero SampleParams are greedy
		row := logits[r*vocab : (r+1)*vocab]
		for j, v := range row {
			if v > row[id] || v == row[id] && int32(j) < id {
				t.Fatalf("row %d: SampleRows' greedy id %d (%v), but %d holds %v", r, id, row[id], j, v)
			}
		}
	}
	for _, bad := range []struct {
		rows []int32
		dst  int
		want string
	}{
		{[]int32{rows}, vocab, "out of range"},
		{[]int32{-1}, vocab, "out of range"},
		{[]int32{0, 1}, vocab, "into"},
	} {
		err := ds.ReadRows(lt.g, bad.rows, make([]float32, bad.dst))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ReadRows(%v into %d values): %v, want an error saying %q", bad.rows, bad.dst, err, bad.want)
		}
	}
}
