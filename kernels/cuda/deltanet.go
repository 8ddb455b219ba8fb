//go:build cuda || cudaemu

package cuda

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
)

// The hybrid models' ops (kernels/deltanet.go) with the kernels of
// deltanet.cu: the recurrent form, as the CPU backend computes it. Each
// call checks its arguments as kernels/cpu does, then records launches.

var _ kernels.DeltaNetOps = (*Backend)(nil)

// stateStore holds every layer's slots in two allocations, float32:
//
//	conv [layers][slots][(K−1)·channels]   ssm [layers][slots][Hv·S·S]
type stateStore struct {
	cfg       kernels.StateConfig
	conv, ssm devPtr
}

func (s *stateStore) Config() kernels.StateConfig { return s.cfg }

// layer returns layer l's conv and ssm bases (slot 0).
func (s *stateStore) layer(l int) (conv, ssm devPtr) {
	c := s.cfg
	return s.conv + devPtr(4*int64(l)*int64(c.Slots)*int64(c.Conv)), s.ssm + devPtr(4*int64(l)*int64(c.Slots)*int64(c.SSM))
}

func (b *Backend) NewStateStore(cfg kernels.StateConfig) (kernels.StateStore, error) {
	if cfg.Layers <= 0 || cfg.Slots <= 0 || cfg.Conv < 0 || cfg.SSM <= 0 {
		return nil, fmt.Errorf("cuda backend: invalid state config %+v", cfg)
	}
	s := &stateStore{cfg: cfg}
	conv := 4 * int64(cfg.Layers) * int64(cfg.Slots) * int64(max(cfg.Conv, 1))
	ssm := 4 * int64(cfg.Layers) * int64(cfg.Slots) * int64(cfg.SSM)
	err := b.do(func() error {
		var err error
		if s.conv, err = b.alloc(conv); err != nil {
			return fmt.Errorf("recurrent state: %w", err)
		}
		if s.ssm, err = b.alloc(ssm); err != nil {
			return fmt.Errorf("recurrent state: %w", err)
		}
		return firstErr(b.drv.zero(s.conv, conv), b.drv.zero(s.ssm, ssm))
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func asStateStore(st kernels.StateStore) (*stateStore, error) {
	s, ok := st.(*stateStore)
	if !ok {
		return nil, fmt.Errorf("cuda backend: state store %T was not made by this backend", st)
	}
	return s, nil
}

func (b *Backend) CopyState(st kernels.StateStore, dst, src int32) error {
	s, err := asStateStore(st)
	if err != nil {
		return err
	}
	c := s.cfg
	if dst < 0 || src < 0 || int(dst) >= c.Slots || int(src) >= c.Slots {
		return fmt.Errorf("cuda backend: CopyState %d → %d of %d slots", src, dst, c.Slots)
	}
	if dst == src {
		return nil
	}
	for l := range c.Layers {
		conv, ssm := s.layer(l)
		for _, p := range []struct {
			base devPtr
			per  int
		}{{conv, c.Conv}, {ssm, c.SSM}} {
			if p.per == 0 {
				continue
			}
			n := int64(p.per)
			if err := b.launch("dn_copy", elementGrid(n), [3]int{256, 1, 1}, ptrArg(p.base+devPtr(4*n*int64(dst))),
				ptrArg(p.base+devPtr(4*n*int64(src))), arg{v: uint64(n)}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *Backend) SigmoidMul(dst, gate kernels.Tensor, n int) error {
	d, err := f32Of(dst, "SigmoidMul dst")
	if err != nil {
		return err
	}
	g, err := f32Of(gate, "SigmoidMul gate")
	if err != nil {
		return err
	}
	m := int64(n * d.cols())
	if d.cols() != g.cols() || n < 0 || m > d.elems() || m > g.elems() {
		return fmt.Errorf("cuda backend: SigmoidMul: %d rows of %v and %v", n, d.shape, g.shape)
	}
	if m == 0 {
		return nil
	}
	return b.launch("sigmoid_mul", elementGrid(m), [3]int{256, 1, 1}, ptrArg(d.ptr), ptrArg(g.ptr), arg{v: uint64(m)})
}

// DeltaNet records the three launches of a Gated DeltaNet layer: the
// convolution, the q/k norms, the recurrence with its gated norm.
func (b *Backend) DeltaNet(out, qkv, z, beta, alpha kernels.Tensor, w kernels.DeltaNetWeights, sh kernels.DeltaNetShape,
	st kernels.StateStore, layer int, bt *kernels.Batch) error {
	s, err := asStateStore(st)
	if err != nil {
		return err
	}
	ch, vd := sh.Channels(), sh.VHeads*sh.HeadDim
	if sh.KHeads <= 0 || sh.VHeads%max(sh.KHeads, 1) != 0 || sh.HeadDim <= 0 || sh.HeadDim > 1024 || sh.Kernel < 1 || sh.Kernel > 17 || len(bt.Seqs) == 0 {
		return fmt.Errorf("cuda backend: DeltaNet: shape %+v, %d sequences", sh, len(bt.Seqs))
	}
	c := s.cfg
	if layer < 0 || layer >= c.Layers || c.Conv != (sh.Kernel-1)*ch || c.SSM != vd*sh.HeadDim {
		return fmt.Errorf("cuda backend: DeltaNet: layer %d of state %+v for shape %+v", layer, c, sh)
	}
	n := bt.Seqs[len(bt.Seqs)-1].End
	ts := make([]*tensor, 9)
	for i, x := range []struct {
		t        kernels.Tensor
		name     string
		cols     int
		perBatch bool
	}{{out, "out", vd, true}, {qkv, "qkv", ch, true}, {z, "z", vd, true}, {beta, "beta", sh.VHeads, true}, {alpha, "alpha", sh.VHeads, true},
		{w.Conv, "conv weight", sh.Kernel, false}, {w.DtBias, "dt bias", sh.VHeads, false}, {w.A, "A", sh.VHeads, false}, {w.Norm, "norm weight", sh.HeadDim, false}} {
		t, err := f32Of(x.t, "DeltaNet "+x.name)
		if err != nil {
			return err
		}
		if t.cols() != x.cols || x.perBatch && int64(n*x.cols) > t.elems() {
			return fmt.Errorf("cuda backend: DeltaNet: %s is %v, want %d columns for %d rows", x.name, t.shape, x.cols, n)
		}
		ts[i] = t
	}
	if ts[5].elems() != int64(ch*sh.Kernel) || len(bt.Positions) < n {
		return fmt.Errorf("cuda backend: DeltaNet: conv weight of %d values for %d×%d, %d positions for %d rows", ts[5].elems(), ch, sh.Kernel, len(bt.Positions), n)
	}
	tab := make([]int32, 0, 6*len(bt.Seqs))
	prev := 0
	for _, q := range bt.Seqs {
		if q.Start != prev || q.End <= q.Start || q.State < 0 || int(q.State) >= c.Slots ||
			q.CheckpointAt > 0 && (q.Checkpoint < 0 || int(q.Checkpoint) >= c.Slots || q.Checkpoint == q.State) ||
			q.Seeded && (q.Seed < 0 || int(q.Seed) >= c.Slots || q.Seed == q.State) {
			return fmt.Errorf("cuda backend: DeltaNet: sequence rows [%d, %d) after %d, state slot %d, checkpoint slot %d, of %d",
				q.Start, q.End, prev, q.State, q.Checkpoint, c.Slots)
		}
		prev = q.End
		ck := int32(-1)
		if q.CheckpointAt > 0 {
			if r := int32(q.Start) + q.CheckpointAt - bt.Positions[q.Start]; r >= int32(q.Start) && r <= int32(q.End) {
				ck = r
			}
		}
		src := q.State
		switch {
		case bt.Positions[q.Start] == 0:
			src = -1
		case q.Seeded:
			src = q.Seed
		}
		tab = append(tab, int32(q.Start), int32(q.End), q.State, ck, q.Checkpoint, src)
	}
	off := b.step.push(tab)
	conv, ssm := s.layer(layer)
	nSeq := len(bt.Seqs)
	return firstErr(
		b.launch("dn_conv", [3]int{ceilDiv(ch, 128), nSeq, 1}, [3]int{128, 1, 1}, ptrArg(ts[1].ptr), ptrArg(ts[5].ptr), ptrArg(conv),
			tabArg(off), intArg(ch), intArg(sh.Kernel), intArg(c.Conv)),
		b.launch("dn_l2norm", [3]int{n * 2 * sh.KHeads, 1, 1}, [3]int{32, 1, 1}, ptrArg(ts[1].ptr), intArg(ch), intArg(2*sh.KHeads),
			intArg(sh.HeadDim), f32Arg(sh.Eps)),
		b.launch("dn_recur", [3]int{nSeq, sh.VHeads, 1}, [3]int{ceilDiv(sh.HeadDim, 32) * 32, 1, 1}, ptrArg(ts[1].ptr), ptrArg(ts[2].ptr), ptrArg(ts[3].ptr),
			ptrArg(ts[4].ptr), ptrArg(ts[6].ptr), ptrArg(ts[7].ptr), ptrArg(ts[8].ptr), ptrArg(ssm), ptrArg(ts[0].ptr), tabArg(off),
			intArg(ch), intArg(sh.KHeads), intArg(sh.VHeads), intArg(sh.HeadDim), intArg(c.SSM), f32Arg(sh.Eps)),
	)
}
