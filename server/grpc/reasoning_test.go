package grpcserver

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/engine"
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

// thinkOpener is a chat template that opens the reasoning itself, as
// DeepSeek-R1's does: the reply starts inside it.
type thinkOpener struct{ *streamtest.PieceVocab }

func (o thinkOpener) ChatPrompt(msgs []stream.ChatMessage) (string, error) {
	p, err := o.PieceVocab.ChatPrompt(msgs)
	return p + "<think>\n", err
}

// newEndlessThinker serves gRPC over the real engine and a model that
// would reason forever (streamtest.SlowModel writes 'x' after the opened
// <think>, never the closing marker), the stream core's budget test model:
// only the reasoning controls can end its reasoning.
func newEndlessThinker(t *testing.T) *rig {
	t.Helper()
	e, err := engine.New(&streamtest.SlowModel{}, engine.Config{Blocks: 64, BlockSize: 16, MaxSeqs: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) }) // after the server's cleanup (LIFO)
	mk, err := stream.ReasoningMarkupFor("think-tags")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Addr: "127.0.0.1:0", HTTP: server.DefaultConfig()}
	cfg.HTTP.ModelID, cfg.HTTP.ShutdownTimeout = "thinker", time.Second
	srv, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	b := &stream.Backend{Engine: stream.FromEngine(e), Tokenizer: thinkOpener{streamtest.NewPieceVocab()}, ContextLen: 1024, Reasoning: mk}
	if err := srv.SetBackend(b, ModelInfo{}); err != nil {
		t.Fatal(err)
	}
	r := &rig{srv: srv}
	r.addr = r.serve(t)
	return r
}

// reasoned is one generation's reasoning, text and usage.
type reasoned struct {
	reasoning, text string
	tokens          uint32 // Usage.reasoning_tokens
	completion      uint32
}

func generateReasoned(t *testing.T, r *rig, req *sluicev1.GenerateRequest) reasoned {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call, err := r.client.Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var got reasoned
	for {
		resp, err := call.Recv()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatalf("%v: %v", req.GetReasoning(), err)
		}
		if c := resp.GetChunk(); c != nil {
			got.reasoning += c.GetReasoning()
			got.text += c.GetText()
		}
		if c := resp.GetComplete(); c != nil {
			got.tokens, got.completion = c.GetUsage().GetReasoningTokens(), c.GetUsage().GetCompletionTokens()
		}
	}
}

// TestGenerateReasoningControls: GenerateRequest.reasoning reaches the
// model as the HTTP API's reasoning fields do. Over a model that never
// closes its reasoning: a budget (given, or an effort's: minimal is 256)
// makes it close after that many tokens, so the reasoning takes the budget
// plus the closing marker and the answer follows; an explicit budget wins
// over the effort's; thinking off (enabled false, effort none) closes the
// reasoning in the prompt, so all is answer; nothing set, enabled true or
// an effort whose budget exceeds max_tokens leave it reasoning to the end.
func TestGenerateReasoningControls(t *testing.T) {
	r := newEndlessThinker(t)
	closeLen := uint32(len("</think>")) // the piece vocabulary spells it byte by byte
	for _, c := range []struct {
		name      string
		reasoning *sluicev1.Reasoning
		max       uint32
		want      uint32 // reasoning tokens
	}{
		{"unset", nil, 40, 40},
		{"budget 8", &sluicev1.Reasoning{BudgetTokens: ptr[uint32](8)}, 40, 8 + closeLen},
		{"budget 1", &sluicev1.Reasoning{BudgetTokens: ptr[uint32](1)}, 40, 1 + closeLen},
		{"budget wins over effort", &sluicev1.Reasoning{Effort: ptr("high"), BudgetTokens: ptr[uint32](8)}, 40, 8 + closeLen},
		{"effort minimal", &sluicev1.Reasoning{Effort: ptr("minimal")}, 300, 256 + closeLen},
		{"effort low over max_tokens", &sluicev1.Reasoning{Effort: ptr("low")}, 40, 40},
		{"enabled", &sluicev1.Reasoning{Enabled: ptr(true)}, 40, 40},
		{"disabled", &sluicev1.Reasoning{Enabled: ptr(false)}, 40, 0},
		{"disabled, effort none", &sluicev1.Reasoning{Enabled: ptr(false), Effort: ptr("none")}, 40, 0},
		{"effort none", &sluicev1.Reasoning{Effort: ptr("none")}, 40, 0},
	} {
		got := generateReasoned(t, r, &sluicev1.GenerateRequest{Input: chatInput("hi"), Sampling: greedy(c.max), Reasoning: c.reasoning})
		// The prompt opened the reasoning, so its tokens are 'x's and, when
		// the budget closed it, the closing marker.
		want := reasoned{tokens: c.want, completion: c.max, text: strings.Repeat("x", int(c.max-c.want)),
			reasoning: strings.Repeat("x", int(c.want))}
		if c.want > 0 && c.want < c.max {
			want.reasoning = strings.Repeat("x", int(c.want-closeLen))
		}
		if got != want {
			t.Errorf("%s: %d reasoning tokens of %d, reasoning %q, text %q; want %d of %d, %q, %q", c.name,
				got.tokens, got.completion, got.reasoning, got.text, want.tokens, want.completion, want.reasoning, want.text)
		}
	}
}

// TestGenerateReasoningNoReasoningModel: a model without reasoning markup
// takes every reasoning control, as on HTTP, and reports no reasoning.
func TestGenerateReasoningNoReasoningModel(t *testing.T) {
	r := newRig(t, rigOptions{})
	for _, rs := range []*sluicev1.Reasoning{
		{Effort: ptr("high")}, {BudgetTokens: ptr[uint32](4)}, {Enabled: ptr(false)}, {Enabled: ptr(true), Effort: ptr("max")},
	} {
		got := generateReasoned(t, r, &sluicev1.GenerateRequest{Input: chatInput("hi"), Sampling: greedy(6), Reasoning: rs})
		if got.reasoning != "" || got.tokens != 0 || got.completion == 0 {
			t.Errorf("%v: reasoning %q, %d reasoning tokens of %d", rs, got.reasoning, got.tokens, got.completion)
		}
	}
}

// TestGenerateReasoningInvalid: a bad reasoning control ends the call with
// INVALID_ARGUMENT naming its field, before any chunk.
func TestGenerateReasoningInvalid(t *testing.T) {
	r := newReasonRig(t, "Hi.")
	chat := func(rs *sluicev1.Reasoning) *sluicev1.GenerateRequest {
		return &sluicev1.GenerateRequest{Input: chatInput("hi"), Sampling: greedy(8), Reasoning: rs}
	}
	for _, c := range []struct {
		name string
		req  *sluicev1.GenerateRequest
		want string
	}{
		{"unknown effort", chat(&sluicev1.Reasoning{Effort: ptr("extreme")}), `reasoning.effort must be one of`},
		{"empty effort", chat(&sluicev1.Reasoning{Effort: ptr("")}), `reasoning.effort must be one of`},
		{"budget 0", chat(&sluicev1.Reasoning{BudgetTokens: ptr[uint32](0)}), "reasoning.budget_tokens must be between 1 and"},
		{"budget over the cap", chat(&sluicev1.Reasoning{BudgetTokens: ptr[uint32](1 << 30)}), "reasoning.budget_tokens must be between 1 and"},
		{"disabled with a budget", chat(&sluicev1.Reasoning{Enabled: ptr(false), BudgetTokens: ptr[uint32](8)}), "reasoning.budget_tokens"},
		{"disabled with an effort", chat(&sluicev1.Reasoning{Enabled: ptr(false), Effort: ptr("high")}), "reasoning.effort"},
		{"text prompt", &sluicev1.GenerateRequest{Input: textInput("hi"), Reasoning: &sluicev1.Reasoning{Effort: ptr("low")}}, "reasoning needs chat input"},
	} {
		got := drain(mustGenerate(t, r, c.req))
		st, _ := status.FromError(got.err)
		if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), c.want) || got.chunks != 0 {
			t.Errorf("%s: %v after %d chunks, want INVALID_ARGUMENT containing %q", c.name, got.err, got.chunks, c.want)
		}
	}
}
