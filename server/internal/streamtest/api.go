package streamtest

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// ScriptBackend is a Backend whose engine produces pieces, over a fresh
// PieceVocab wrapped by wrap (nil: the vocabulary itself) as the tokenizer.
func ScriptBackend(wrap func(*PieceVocab) stream.Tokenizer, pieces ...string) (*stream.Backend, *ScriptEngine) {
	vocab := NewPieceVocab()
	eng := &ScriptEngine{Script: vocab.IDs(pieces...)}
	var tok stream.Tokenizer = vocab
	if wrap != nil {
		tok = wrap(vocab)
	}
	return &stream.Backend{Engine: eng, Tokenizer: tok, ContextLen: 4096}, eng
}

// Env is the httpedge.Env the API adapters' tests serve b through: model
// "smol" (the default name), a pump that neither pings nor stalls within
// a test, abort on disconnect.
func Env(b *stream.Backend) *httpedge.Env {
	return &httpedge.Env{
		Backend:    func() *stream.Backend { return b },
		CheckModel: func(name string) error { return stream.CheckModel(name, "smol", nil) },
		ModelName: func(r string) string {
			if r == "" {
				return "smol"
			}
			return r
		},
		Pump:         stream.PumpConfig{KeepAlive: time.Hour, StallTimeout: time.Minute},
		MaxBodyBytes: 1 << 20,
		WriteTimeout: time.Minute,
	}
}

// Transcript is a tokenizer whose chat template renders a transcript of
// what it is given, "<role>content\n" a message, then "<assistant>". Its
// source reads no tools, so calls are offered and written in the Hermes
// form.
type Transcript struct{ *PieceVocab }

func (Transcript) ChatTemplateSource() string { return "{{ messages }}" }
func (Transcript) RenderChat(msgs []map[string]any, _ []any) (string, error) {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "<%s>%v\n", m["role"], m["content"])
	}
	return b.String() + "<assistant>", nil
}

// PromptText is a prompt a ScriptBackend's engine was given, as text: the
// vocabulary encodes prompts byte by byte.
func PromptText(ids []int32) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b)
}
