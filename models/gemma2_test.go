package models

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

// TestGemma2Config: a Gemma 2 file's soft-caps, window and layout as
// llama.cpp reads them, its defaults (window 4096, caps 50 and 30, every
// other layer a window layer, one RoPE base) where the file is silent, and
// caps that are not positive refused.
func TestGemma2Config(t *testing.T) {
	base := []modeltest.KV{
		kv("general.architecture", "gemma2"),
		kv("gemma2.block_count", uint32(4)), kv("gemma2.embedding_length", uint32(8)), kv("gemma2.feed_forward_length", uint32(16)),
		kv("gemma2.attention.head_count", uint32(2)), kv("gemma2.context_length", uint32(8192)),
		kv("gemma2.attention.layer_norm_rms_epsilon", float32(1e-6)), kv("gemma2.rope.freq_base", float32(20000)),
	}
	tok := modeltest.Tensor{Name: "token_embd.weight", DType: kernels.F32, Shape: []int{5, 8}, Data: make([]byte, 160)}
	// A stray QK-norm tensor must not turn on Gemma 3's QK-norm.
	qn := modeltest.Tensor{Name: "blk.0.attn_q_norm.weight", DType: kernels.F32, Shape: []int{4}, Data: make([]byte, 16)}
	config := func(t *testing.T, kvs ...modeltest.KV) (Config, error) {
		t.Helper()
		g, err := parseGGUF("g2.gguf", encode(t, append(slices.Clone(base), kvs...), []modeltest.Tensor{tok, qn}))
		if err != nil {
			t.Fatal(err)
		}
		return g.Config()
	}
	cfg, err := config(t)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Window != 4096 || cfg.AttnSoftcap != 50 || cfg.FinalSoftcap != 30 || cfg.QKNorm || !cfg.TiedEmbeddings ||
		cfg.RopeThetaLocal != 20000 || !slices.Equal(cfg.WindowLayers, []bool{true, false, true, false}) {
		t.Errorf("defaults: %+v", cfg)
	}
	cfg, err = config(t, kv("gemma2.attention.sliding_window", uint32(7)), kv("gemma2.attn_logit_softcapping", float32(12)),
		kv("gemma2.final_logit_softcapping", float32(9)), kv("gemma2.rope.freq_base_swa", float32(5000)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Window != 7 || cfg.AttnSoftcap != 12 || cfg.FinalSoftcap != 9 || cfg.RopeThetaLocal != 5000 {
		t.Errorf("from the file: %+v", cfg)
	}
	for _, bad := range []modeltest.KV{kv("gemma2.attn_logit_softcapping", float32(0)), kv("gemma2.final_logit_softcapping", float32(-1))} {
		if _, err := config(t, bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s = %v: err %v, want ErrMalformed", bad.Key, bad.Value, err)
		}
	}
}
