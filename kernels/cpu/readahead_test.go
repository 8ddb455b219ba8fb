package cpu

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestReadAheadLearnsSuccessor: products run in the same order twice, and
// each product's read-ahead is then the first bytes of the weights of the
// product that followed it, in the order its chunks reach them, within
// readAheadBytes; nothing is read ahead of a weight left in the file's
// layout (it may be the model file's mmap) or with one thread.
func TestReadAheadLearnsSuccessor(t *testing.T) {
	if !groupedRuns(kernels.Q8_0) || !groupedRuns(kernels.Q4_1) {
		t.Skip("no grouped kernels on this CPU")
	}
	r := rand.New(rand.NewPCG(26, 12))
	const in = 576
	for _, threads := range []int{1, 2} {
		b := New(threads)
		t.Cleanup(func() { b.Close() })
		upload := func(dt kernels.DType, out int) *tensor {
			h := kernels.HostTensor{Name: "w", DType: dt, Shape: []int{out, in}, Data: mustQuantize(t, dt, randVec(r, out*in))}
			w, err := b.Upload(h)
			if err != nil {
				t.Fatal(err)
			}
			return w.(*tensor)
		}
		// big's rows take more than the budget: its read-ahead is cut.
		a, gate, up, file := upload(kernels.Q8_0, 64), upload(kernels.Q4_1, 96), upload(kernels.Q4_1, 96), upload(kernels.Q5_0, 64)
		big := upload(kernels.Q8_0, readAheadBytes/kernels.Q8_0.RowBytes(in)+64)
		if file.layout != nil {
			t.Fatalf("Q5_0 was regrouped: %v", file.layout)
		}
		x := scratch(t, b, randVec(r, in), 1, in)
		out := func(rows int) kernels.Tensor { return scratch(t, b, nil, 1, rows) }
		steps := []struct {
			name string
			run  func() error
			want [][]byte // the read-ahead once the order is learned
		}{
			{"a", func() error { return b.MatMul(out(64), x, a, nil, 1) }, [][]byte{gate.raw, up.raw}},
			{"gate+up", func() error {
				return b.MatMuls([]kernels.Tensor{out(96), out(96)}, x, []kernels.Tensor{gate, up}, nil, 1)
			}, [][]byte{big.raw[:readAheadBytes]}},
			{"big", func() error { return b.MatMul(out(big.rows()), x, big, nil, 1) }, nil},
			{"file layout", func() error { return b.MatMul(out(64), x, file, nil, 1) }, [][]byte{a.raw}},
		}
		for pass := range 2 {
			for _, s := range steps {
				if err := s.run(); err != nil {
					t.Fatal(err)
				}
				want := s.want
				if pass == 0 || threads == 1 {
					want = nil
				}
				if pass == 0 && s.name == "gate+up" && threads > 1 {
					want = nil // a's successor is learned now, big's not yet
				}
				var got [][]byte
				for _, r := range b.after {
					if r != nil {
						got = append(got, r)
					}
				}
				if len(got) != len(want) {
					t.Fatalf("threads %d, pass %d, after %s: %d ranges read ahead, want %d", threads, pass, s.name, len(got), len(want))
				}
				for i := range got {
					if &got[i][0] != &want[i][0] || len(got[i]) != len(want[i]) {
						t.Fatalf("threads %d, pass %d, after %s: range %d is %d bytes at %p, want %d at %p",
							threads, pass, s.name, i, len(got[i]), &got[i][0], len(want[i]), &want[i][0])
					}
				}
			}
		}
		if threads > 1 && (a.next != opWeights{gate, up} || file.next != opWeights{a}) {
			t.Fatalf("successors: a's %v, the Q5_0 matrix's %v", a.next, file.next)
		}
		b.SetReadAhead(false)
		if err := steps[0].run(); err != nil {
			t.Fatal(err)
		}
		for _, r := range b.after {
			if r != nil {
				t.Fatalf("threads %d: read ahead with SetReadAhead(false)", threads)
			}
		}
	}
}

// TestReadAheadStops: a helper reads ahead only while the operation it took
// part in is the current one and the pool is not stopping, so it joins the
// next operation (or exits) within a page of reads.
func TestReadAheadStops(t *testing.T) {
	p := &pool{}
	ones := bytes.Repeat([]byte{1}, 3*4096)
	ahead := readAhead{ones[:4096], ones[4096:]}
	p.claim.Store(7 << genShift)
	if got := p.readAheadUntil(&ahead, 7); got != 3*4096/64 {
		t.Fatalf("current operation: read %d lines, want %d", got, 3*4096/64)
	}
	if got := p.readAheadUntil(&ahead, 6); got != 0 {
		t.Fatalf("a later operation has come: read %d lines, want none", got)
	}
	p.quit.Store(true)
	if got := p.readAheadUntil(&ahead, 7); got != 0 {
		t.Fatalf("stopping: read %d lines, want none", got)
	}
}
