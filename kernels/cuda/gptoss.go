//go:build cuda || cudaemu

package cuda

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
)

// gpt-oss's ops (models/gptoss.go's gptossOps) with gptoss.cu's kernels;
// its MXFP4 experts run on matmul.cu's kernels like any other weight type.

// SinkAttention is SlidingAttention (window ≤ 0: the whole context) whose
// softmax over each head's scores has one more logit, sinks[h], with no
// value. A step of decode rows alone, of a head size paged_decode is built
// for, runs paged_decode_sink (split-K as any decode step); other steps run
// sink_attention, a block per row and head, over the slots windowBatch lays
// out for each row, as CappedAttention does (paged_prefill and
// paged_attention have no sinks yet).
func (b *Backend) SinkAttention(out, q, k, v kernels.Tensor, kv kernels.KVStore, layer int, batch *kernels.Batch, scale float32, window int, sinks kernels.Tensor) error {
	st, err := f32Of(sinks, "SinkAttention sinks")
	if err != nil {
		return err
	}
	qt, err := f32Of(q, "SinkAttention q")
	if err != nil {
		return err
	}
	store, ok := kv.(*kvStore)
	if !ok {
		return fmt.Errorf("cuda backend: KV store %T was not made by this backend", kv)
	}
	// the kernel reads sinks[h] for every query head
	if hd := store.cfg.HeadDim; qt.cols()%hd != 0 || st.elems() < int64(qt.cols()/hd) {
		return fmt.Errorf("cuda backend: SinkAttention: %d sinks for q %v of heads of %d", st.elems(), qt.shape, hd)
	}
	if sinkDecodes(batch, store.cfg.HeadDim) {
		return b.slidingAttention(out, q, k, v, kv, layer, batch, scale, window, st.ptr)
	}
	return b.rowAttention("SinkAttention", "sink_attention", out, q, k, v, kv, layer, batch, scale, window, ptrArg(st.ptr))
}

// sinkDecodes says whether paged_decode_sink takes every sequence of batch:
// one row each (a window row, too, is then a sequence of one row), of a
// head size it is built for.
func sinkDecodes(batch *kernels.Batch, hd int) bool {
	if _, ok := decodeShape(hd); !ok {
		return false
	}
	for _, sq := range batch.Seqs {
		if sq.End-sq.Start > 1 {
			return false
		}
	}
	return true
}

// OAIMoEFFN is MoEFFN with the top k weighted by a softmax over their
// logits, per-expert biases, and gpt-oss's clamped SwiGLU (oai_swiglu).
func (b *Backend) OAIMoEFFN(dst, x, logits, gate, up, down, gateB, upB, downB kernels.Tensor, n, k int, alpha, limit float32) error {
	var oai oaiExperts
	var err error
	if oai.gateB, err = f32Of(gateB, "OAIMoEFFN gate bias"); err != nil {
		return err
	}
	if oai.upB, err = f32Of(upB, "OAIMoEFFN up bias"); err != nil {
		return err
	}
	if oai.downB, err = f32Of(downB, "OAIMoEFFN down bias"); err != nil {
		return err
	}
	oai.alpha, oai.limit = alpha, limit
	return b.moeFFN(dst, x, logits, gate, up, down, n, k, true, &oai)
}
