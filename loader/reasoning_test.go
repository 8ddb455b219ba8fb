package loader

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
	"github.com/sluicehq/sluice/server/stream"
)

// TestReasoningFormat: the model's reasoning markup reaches the Backend:
// none for a llama without a thinking template, think-tags when its chat
// template writes </think> (a Qwen3-like template), --reasoning-format over
// either, and an unknown format refused.
func TestReasoningFormat(t *testing.T) {
	spec := modeltest.Spec{Layers: 1, Hidden: 32, Heads: 2, KVHeads: 1, FFN: 64, Vocab: 300, Seed: 1}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modeltest.WriteGGUF(path, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	const qwenLike = `{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}` +
		`{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}`
	think, _ := stream.ReasoningMarkupFor("think-tags")
	for _, c := range []struct {
		template, format string
		want             stream.ReasoningMarkup
		err              bool
	}{
		{"", "", stream.ReasoningMarkup{}, false},
		{qwenLike, "", think, false},
		{qwenLike, "none", stream.ReasoningMarkup{}, false},
		{"", "think-tags", think, false},
		{"", "bogus", stream.ReasoningMarkup{}, true},
	} {
		m, err := Load(path, Options{Threads: 1, KVBlocks: 8, MaxSeqs: 1, ChatTemplate: c.template, ReasoningFormat: c.format})
		if c.err {
			if err == nil || !strings.Contains(err.Error(), "bogus") {
				t.Errorf("format %q: %v, want an error naming it", c.format, err)
			}
			if m != nil {
				_ = m.Close(t.Context())
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Backend().Reasoning; got != c.want {
			t.Errorf("template %t, format %q: %+v, want %+v", c.template != "", c.format, got, c.want)
		}
		_ = m.Close(t.Context())
	}
}
