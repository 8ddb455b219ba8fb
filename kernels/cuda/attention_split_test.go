//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestDecodeSplitK: a batch-1 decode step of the 8B shape (32 query heads
// over 8 KV heads of 128) cuts its context into about decodeSplits
// partitions (flash-decoding over the 132 SMs the emulator presents, not 8
// blocks per 256 positions), equals the CPU at contexts around the
// partition edges, and records the same launch at consecutive positions
// (so a decode step's CUDA graph replays as the context grows).
func TestDecodeSplitK(t *testing.T) {
	p := newPair(t)
	const heads, kvHeads, hd, blocks, bs, fill = 32, 8, 128, 80, 16, 1000
	cfg := kernels.KVConfig{Layers: 1, Blocks: blocks, BlockSize: bs, KVHeads: kvHeads, HeadDim: hd}
	kg, err := p.gpu.NewKVStore(cfg)
	must(t, err)
	kc, err := p.cpu.NewKVStore(cfg)
	must(t, err)
	table := make([][]int32, 1)
	for _, b := range p.rand.Perm(blocks)[:ceilDiv(fill, bs)] {
		table[0] = append(table[0], int32(b))
	}
	kvCols, qCols := kvHeads*hd, heads*hd
	scale := float32(1 / math.Sqrt(hd))
	run := func(from, to, heads int) (twin, launch) {
		b := buildBatch([]seqSpec{{from, to}}, table, bs)
		n := len(b.Tokens)
		q := p.scratch(p.randn(n*heads*hd, 1), n, heads*hd)
		k := p.scratch(p.randn(n*kvCols, 1), n, kvCols)
		v := p.scratch(p.randn(n*kvCols, 1), n, kvCols)
		out := p.scratch(nil, n, heads*hd)
		must(t, p.gpu.Attention(out.g, q.g, k.g, v.g, kg, 0, b, scale), p.cpu.Attention(out.c, q.c, k.c, v.c, kc, 0, b, scale))
		return out, p.gpu.step.launches[len(p.gpu.step.launches)-1]
	}
	run(0, fill, kvHeads) // the cache, through the prefill kernels
	must(t, p.gpu.Sync())
	splits := p.gpu.decodeSplits(1, kvHeads)
	if splits*kvHeads < 2*p.gpu.sms {
		t.Fatalf("decodeSplits(1 item, %d KV heads) = %d on %d SMs: fewer than two blocks an SM", kvHeads, splits, p.gpu.sms)
	}
	var prev launch
	for _, ctx := range []int{1, 64, 65, 300, 301, 1000} {
		out, l := run(ctx-1, ctx, heads)
		if l.fn != "paged_decode_128" || l.grid != [3]int{1, kvHeads, splits} || l.args[l.nargs-1] != uint64(splits) {
			t.Errorf("context %d: %s grid %v split-K %d; want paged_decode_128 grid [1 %d %d] split-K %d",
				ctx, l.fn, l.grid, l.args[l.nargs-1], kvHeads, splits, splits)
		}
		if dp := decodePartLen(ctx, splits); ctx > decodeMinPart && ceilDiv(ctx, dp) <= ceilDiv(ctx, decodePart) {
			t.Errorf("context %d: partitions of %d positions, no more than without split-K", ctx, dp)
		}
		// the step's own tensors (out, q, k, v) are fresh allocations here
		for _, a := range []int{0, 1, 4, 5} {
			l.args[a] = 0
		}
		if ctx == 301 && l != prev {
			t.Errorf("contexts 300 and 301 recorded different launches:\n%+v\n%+v", prev, l)
		}
		prev = l
		checkRows(t, p, fmt.Sprintf("context %d", ctx), out, 1, qCols, 2e-3)
	}
}

// TestDecodePartLen pins the host's partition lengths (which size the
// partial scratch) to attention.cu's decode_part rule.
func TestDecodePartLen(t *testing.T) {
	for _, tc := range []struct{ ctx, splits, want int }{
		{1, 0, 256}, {5000, 0, 256}, {1, 33, 64}, {64 * 33, 33, 64}, {64*33 + 1, 33, 128}, {256 * 33, 33, 256}, {100000, 33, 256}, {1000, 2, 512 - 256},
	} {
		if got := decodePartLen(tc.ctx, tc.splits); got != tc.want {
			t.Errorf("decodePartLen(%d, %d) = %d, want %d", tc.ctx, tc.splits, got, tc.want)
		}
	}
}
