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
// value. At the head sizes paged_decode is built for (gpt-oss's 64 among
// them) it runs as Attention does, on paged_decode_sink (decode rows,
// split-K) and paged_prefill_sink (prompt chunks, tensor cores); at other
// sizes on sink_attention, a block per row and head, over the slots
// windowBatch lays out for each row, as CappedAttention does (paged_attention
// has no sinks).
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
	if sinkPaged(store.cfg.HeadDim) {
		return b.slidingAttention(out, q, k, v, kv, layer, batch, scale, window, st.ptr)
	}
	return b.rowAttention("SinkAttention", "sink_attention", out, q, k, v, kv, layer, batch, scale, window, ptrArg(st.ptr))
}

// sinkPaged says whether the paged sink kernels take every sequence of a
// head size hd: paged_decode's sizes, where Attention's plan sends single
// rows (and all rows of 256) to paged_decode and the other rows of 64, 80,
// 96 and 128 to paged_prefill, none to paged_attention.
func sinkPaged(hd int) bool {
	_, ok := decodeShape(hd)
	return ok && (hd > 128 || prefillShape(hd))
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
