package stream_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	. "github.com/sluicehq/sluice/server/stream"
)

// smallPool is an engine whose KV pool holds fewer tokens than the model's
// context, as a small --kv-blocks makes it.
type smallPool struct{ streamtest.ScriptEngine }

func (*smallPool) MaxSequenceLen() int { return 32 }

func TestPrepare(t *testing.T) {
	b := &Backend{Engine: &smallPool{}, Tokenizer: streamtest.NewPieceVocab(), ContextLen: 64}
	seven := uint64(7)
	for _, tt := range []struct {
		name  string
		g     GenRequest
		param string // "" when Prepare accepts g
		msg   string
	}{
		{"fits", GenRequest{Prompt: strings.Repeat("x", 20), MaxTokens: 12}, "", ""},
		{"over the KV pool, under the context", GenRequest{Prompt: strings.Repeat("x", 40)}, "prompt", "context is 32"},
		{"prompt plus max_tokens over the pool", GenRequest{Prompt: strings.Repeat("x", 20), MaxTokens: 13}, "max_tokens", "32"},
		{"chat names messages", GenRequest{Chat: true, Messages: []ChatMessage{{Role: "user", Content: strings.Repeat("x", 40)}}}, "messages", "context is 32"},
		{"a given seed is kept", GenRequest{Prompt: "x", Sampling: engine.SamplingParams{Seed: &seven}}, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := Prepare(b, &tt.g)
			var pe *ParamError
			switch {
			case tt.param == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.param != "" && (!errors.As(err, &pe) || pe.Param != tt.param || !strings.Contains(pe.Message, tt.msg)):
				t.Fatalf("got %v, want a %s error saying %q", err, tt.param, tt.msg)
			case tt.param != "":
				return
			}
			if req.Sampling.Seed == nil {
				t.Fatal("no seed fixed: a resume would sample differently")
			}
			if tt.g.Sampling.Seed != nil && *req.Sampling.Seed != 7 {
				t.Errorf("seed %d, want the request's 7", *req.Sampling.Seed)
			}
		})
	}
}
