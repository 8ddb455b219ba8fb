package loader

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// qwen35Tiny and its MoE variant: six layers with full attention every
// third, DeltaNet with 2 key heads tiled over 4 value heads.
var qwen35Tiny = modeltest.Qwen35Spec{Layers: 6, Hidden: 64, FFN: 128, Vocab: 300, Heads: 4, KVHeads: 2, HeadDim: 16,
	RopeDims: 8, Interval: 3, KHeads: 2, VHeads: 4, StateSize: 16, ContextLen: 512, Seed: 35}

func writeQwen35(t *testing.T, spec modeltest.Qwen35Spec) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), spec.Arch()+".gguf")
	if err := modeltest.WriteQwen35GGUF(path, spec, kernels.Q8_0); err != nil {
		t.Fatal(err)
	}
	return path
}

// A qwen35 or qwen35moe GGUF loads as the hybrid model behind an engine
// whose pool has the model's state slots, sized by the same options as its
// KV, and generates.
func TestLoadQwen35(t *testing.T) {
	moe := qwen35Tiny
	moe.Experts, moe.ExpertsUsed, moe.ExpertFFN, moe.SharedFFN = 8, 2, 64, 96
	for _, spec := range []modeltest.Qwen35Spec{qwen35Tiny, moe} {
		t.Run(spec.Arch(), func(t *testing.T) {
			m, err := Load(writeQwen35(t, spec), Options{Threads: 1, KVBlocks: 24, MaxSeqs: 2, ContextLen: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			q, ok := m.Net.(*models.Qwen35)
			if !ok {
				t.Fatalf("Net is %T, want *models.Qwen35", m.Net)
			}
			if c := q.Config(); c.Arch != spec.Arch() || c.ContextLen != 256 || m.Backend().ContextLen != 256 {
				t.Errorf("arch %q context %d, backend's context %d; want %s, 256", c.Arch, c.ContextLen, m.Backend().ContextLen, spec.Arch())
			}
			st := m.Engine.Stats()
			if st.KV.Total != 24 || st.KV.Total != q.Options().KVBlocks || st.KV.StatesTotal != q.StateSlots() || st.KV.StatesTotal < 2 ||
				st.StateSlotBytes != q.StateSlotBytes() || st.StateSlotBytes <= 0 {
				t.Fatalf("engine pool %+v, %d bytes a slot; model: %d blocks, %d slots of %d bytes",
					st.KV, st.StateSlotBytes, q.Options().KVBlocks, q.StateSlots(), q.StateSlotBytes())
			}
			ids, _ := m.Backend().Tokenizer.Encode(strings.Repeat("the river under the mill ", 3), true)
			seq, err := m.Engine.Submit(context.Background(), engine.Request{Prompt: ids, MaxTokens: 8, IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for range seq.Tokens() {
				n++
			}
			if r := seq.Result(); r.Err != nil || r.Finish != engine.FinishLength || n != 8 {
				t.Fatalf("%d tokens, finish %s %v", n, r.Finish, r.Err)
			}
		})
	}
}

// A model wrapper (the fault-injecting build's) that hides the recurrent
// state would have the engine run every sequence without a state slot:
// Load refuses it, and closes what it opened.
func TestLoadQwen35RefusesStatelessWrapper(t *testing.T) {
	_, err := Load(writeQwen35(t, qwen35Tiny), Options{Threads: 1, KVBlocks: 16, MaxSeqs: 1,
		WrapModel: func(m engine.Model) engine.Model { return plainModel{m} }})
	if err == nil || !strings.Contains(err.Error(), "recurrent state") {
		t.Fatalf("Load with a wrapper hiding the state: %v", err)
	}
	// A wrapper that keeps the interface is accepted.
	m, err := Load(writeQwen35(t, qwen35Tiny), Options{Threads: 1, KVBlocks: 16, MaxSeqs: 1,
		WrapModel: func(m engine.Model) engine.Model { return recurrentModel{m.(engine.RecurrentModel)} }})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

type plainModel struct{ engine.Model }

type recurrentModel struct{ engine.RecurrentModel }
