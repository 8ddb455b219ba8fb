package loader

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/sluicehq/sluice/server/stream"
	"github.com/sluicehq/sluice/tokenizer"
)

// A base model (Gemma 3 270M ships no chat template) refuses chat prompts
// with ErrNoChatTemplate, which the stream core turns into a 400; given
// Options.ChatTemplate, it renders them.
func TestChatTemplateOption(t *testing.T) {
	const path = "../models/gemma-3-270m-q4_k_m.gguf"
	if _, err := os.Stat(path); err != nil {
		t.Skipf("Gemma 3 absent (%v): run `make gemma-model`", err)
	}
	gemma, err := tokenizer.ChatTemplate("gemma")
	if err != nil {
		t.Fatal(err)
	}
	msgs := []stream.ChatMessage{{Role: "user", Content: "Hi"}}
	for _, tc := range []struct {
		template string
		want     string
	}{
		{"", ""},
		{gemma, "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"},
	} {
		m, err := Load(path, Options{Threads: 1, ContextLen: 256, KVBlocks: 32, MaxSeqs: 1, ChatTemplate: tc.template})
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Backend().Tokenizer.ChatPrompt(msgs)
		if tc.want == "" && !errors.Is(err, tokenizer.ErrNoChatTemplate) {
			t.Errorf("no template: %q, %v; want ErrNoChatTemplate", got, err)
		}
		if tc.want != "" && (err != nil || got != tc.want) {
			t.Errorf("gemma template: %q, %v; want %q", got, err, tc.want)
		}
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
