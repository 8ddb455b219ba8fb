package grpcserver

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server"
	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

// newReasonRig serves gRPC over a ScriptEngine whose tokenizer has a
// tool-capable template and Qwen3's <think> markup, generating pieces.
func newReasonRig(t *testing.T, pieces ...string) *rig {
	t.Helper()
	v := streamtest.NewPieceVocab()
	eng := &streamtest.ScriptEngine{Script: v.IDs(pieces...)}
	mk, err := stream.ReasoningMarkupFor("think-tags")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Addr: "127.0.0.1:0", HTTP: server.DefaultConfig()}
	cfg.HTTP.ModelID, cfg.HTTP.ShutdownTimeout = "script", time.Second
	srv, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	b := &stream.Backend{Engine: eng, Tokenizer: streamtest.Transcript{PieceVocab: v}, ContextLen: 1 << 16, Reasoning: mk}
	if err := srv.SetBackend(b, ModelInfo{}); err != nil {
		t.Fatal(err)
	}
	r := &rig{srv: srv}
	r.addr = r.serve(t)
	return r
}

// TestGenerateReasoning: a chat to a reasoning model has its reasoning in
// the chunks' reasoning field, without its markup and never in text, for
// one choice and for each of n; usage counts the reasoning tokens (5 a
// choice, markers included), summed over the choices.
func TestGenerateReasoning(t *testing.T) {
	r := newReasonRig(t, "<think>", "\nLet", " me think.", "\n", "</think>", "\n\n", "Checking", ".",
		"<tool_call>", "\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Oslo\"}}", "\n</tool_call>")
	type choice struct{ reasoning, text, calls string }
	want := choice{reasoning: "\nLet me think.\n", text: "Checking.", calls: `get_weather({"city": "Oslo"})`}
	for _, n := range []uint32{1, 3} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		call, err := r.client.Generate(ctx, &sluicev1.GenerateRequest{
			Input: &sluicev1.GenerateRequest_Chat{Chat: &sluicev1.Chat{Messages: []*sluicev1.ChatMessage{{Role: "user", Content: "Weather?"}}}},
			Tools: []*sluicev1.Tool{{Name: "get_weather", ParametersJson: `{"type":"object","properties":{"city":{"type":"string"}}}`}},
			N:     n,
		})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]choice, n)
		var usage *sluicev1.Usage
		for {
			resp, err := call.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("n %d: %v", n, err)
			}
			if c := resp.GetChunk(); c != nil {
				g := &got[c.GetIndex()]
				if c.GetReasoning() != "" && (g.text != "" || g.calls != "") {
					t.Errorf("n %d, choice %d: reasoning %q after the text", n, c.GetIndex(), c.GetReasoning())
				}
				g.reasoning += c.GetReasoning()
				g.text += c.GetText()
				for _, d := range c.GetToolCalls() {
					if d.GetName() != "" {
						g.calls += d.GetName() + "("
					}
					g.calls += d.GetArguments()
				}
			}
			if c := resp.GetComplete(); c != nil {
				usage = c.GetUsage()
			}
		}
		cancel()
		for i, g := range got {
			if g.calls != "" {
				g.calls += ")"
			}
			if g != want {
				t.Errorf("n %d, choice %d: %+v, want %+v", n, i, g, want)
			}
		}
		if usage.GetReasoningTokens() != 5*n {
			t.Errorf("n %d: usage %v, want %d reasoning tokens", n, usage, 5*n)
		}
	}
}
