package grpcserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/engine"
	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	"github.com/sluicehq/sluice/server/stream"
)

// SubmitGroup lets the spy pass the choices path's one-prefill submission
// through (stream.GroupEngine is found by type assertion).
func (e *spyEngine) SubmitGroup(ctx context.Context, reqs []engine.Request) ([]stream.Sequence, error) {
	ge, ok := e.Engine.(stream.GroupEngine)
	if !ok {
		return nil, errors.New("spy: the engine has no SubmitGroup")
	}
	seqs, err := ge.SubmitGroup(ctx, reqs)
	if err == nil {
		select {
		case e.submitted <- ctx:
		default:
		}
	}
	return seqs, err
}

// choices is what a Generate call with n > 1 delivered, by choice index.
type choices struct {
	text     []string
	ids      [][]uint32
	finish   []string // from each choice's finish chunk
	complete *sluicev1.GenerateComplete
	err      error
}

func drainChoices(t *testing.T, call sluicev1.Inference_GenerateClient, n int) choices {
	t.Helper()
	c := choices{text: make([]string, n), ids: make([][]uint32, n), finish: make([]string, n)}
	for {
		msg, err := call.Recv()
		if errors.Is(err, io.EOF) {
			return c
		}
		if err != nil {
			c.err = err
			return c
		}
		switch r := msg.GetResponse().(type) {
		case *sluicev1.GenerateResponse_Chunk:
			i := int(r.Chunk.GetIndex())
			if i >= n {
				t.Fatalf("chunk for choice %d of %d", i, n)
			}
			if c.finish[i] != "" {
				t.Fatalf("choice %d: a chunk after its finish chunk: %v", i, r.Chunk)
			}
			c.text[i] += r.Chunk.GetText()
			c.ids[i] = append(c.ids[i], r.Chunk.GetTokenIds()...)
			c.finish[i] = r.Chunk.GetFinishReason()
		case *sluicev1.GenerateResponse_Complete:
			c.complete = r.Complete
		case *sluicev1.GenerateResponse_Error:
			t.Fatalf("in-band error: %v", r.Error)
		}
	}
}

// TestChoicesMatchHTTP: n=3 with a seed over gRPC gives the three choices
// the HTTP API gives for the same request (text and finish by index, usage
// with the prompt counted once), each choice's chunks naming its index and
// ending with its finish chunk.
func TestChoicesMatchHTTP(t *testing.T) {
	if _, err := os.Stat(smolLM); err != nil {
		t.Skipf("default model absent (%v): make model", err)
	}
	r := newRig(t, rigOptions{path: smolLM, ctxLen: 1024})
	msgs := []*sluicev1.ChatMessage{{Role: "user", Content: "Write a word."}}
	call := mustGenerate(t, r, &sluicev1.GenerateRequest{N: 3,
		Input:    &sluicev1.GenerateRequest_Chat{Chat: &sluicev1.Chat{Messages: msgs}},
		Sampling: &sluicev1.SamplingParams{Temperature: ptr[float32](1), Seed: ptr[uint64](11), MaxTokens: ptr[uint32](12)}})
	got := drainChoices(t, call, 3)
	if got.err != nil || got.complete == nil {
		t.Fatalf("gRPC: %v, complete %v", got.err, got.complete)
	}
	body := `{"messages":[{"role":"user","content":"Write a word."}],"n":3,"temperature":1,"seed":11,"max_tokens":12}`
	resp, err := http.Post(httpFor(t, r)+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var want struct {
		Choices []struct {
			Index        int
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens     uint32 `json:"prompt_tokens"`
			CompletionTokens uint32 `json:"completion_tokens"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&want); err != nil || len(want.Choices) != 3 {
		t.Fatalf("HTTP response: %v, %+v", err, want)
	}
	var tokens uint32
	for i, w := range want.Choices {
		if w.Index != i || got.text[i] != w.Message.Content || got.finish[i] != w.FinishReason ||
			got.complete.GetFinishReasons()[i] != w.FinishReason {
			t.Errorf("choice %d: gRPC %q %s (complete %v), HTTP %d %q %s", i, got.text[i], got.finish[i],
				got.complete.GetFinishReasons(), w.Index, w.Message.Content, w.FinishReason)
		}
		tokens += uint32(len(got.ids[i]))
	}
	if got.text[0] == got.text[1] && got.text[1] == got.text[2] {
		t.Errorf("three equal choices %q: the seeds did not differ (seed + index)", got.text[0])
	}
	u := got.complete.GetUsage()
	if u.GetPromptTokens() != want.Usage.PromptTokens || u.GetCompletionTokens() != want.Usage.CompletionTokens || u.GetCompletionTokens() != tokens {
		t.Errorf("usage: gRPC %v (chunks carried %d tokens), HTTP %+v", u, tokens, want.Usage)
	}
	if got.complete.GetFinishReason() != got.finish[0] {
		t.Errorf("complete.finish_reason %q, choice 0's %q", got.complete.GetFinishReason(), got.finish[0])
	}
	r.idle(t)
	t.Logf("%q, usage %v", got.text, u)
}

// TestChoicesCancel: a client cancelling an n=3 call mid-stream aborts every
// choice, the engine gets every KV block back, and the call's id is free.
func TestChoicesCancel(t *testing.T) {
	if _, err := os.Stat(smolLM); err != nil {
		t.Skipf("default model absent (%v): make model", err)
	}
	r := newRig(t, rigOptions{path: smolLM, ctxLen: 1024})
	held, release := r.rec.hold(4)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	call, err := r.client.Generate(ctx, &sluicev1.GenerateRequest{RequestId: "three", N: 3, Input: textInput("Once upon a time"),
		Sampling: &sluicev1.SamplingParams{Temperature: ptr[float32](1), Seed: ptr[uint64](3), MaxTokens: ptr[uint32](500)}})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, "the loop holding at token 4", held)
	if st := r.model.Engine.Stats(); st.KV.Used == 0 {
		t.Fatalf("mid-stream the engine holds no KV block: %+v", st.KV)
	}
	cancel()
	release()
	for range 3 {
		if res := r.waitFinish(t); res.Finish != engine.FinishAbort {
			t.Errorf("a choice ended %s, want abort", res.Finish)
		}
	}
	st := r.idle(t)
	if c := drainChoices(t, call, 3); status.Code(c.err) != codes.Canceled {
		t.Errorf("client saw %v, want Canceled", c.err)
	}
	// The client's cancel does not wait for the handler: poll until it has
	// returned and unregistered the id.
	for deadline := time.Now().Add(10 * time.Second); r.srv.inflight.len() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls still registered 10 s after the cancel", r.srv.inflight.len())
		}
	}
	t.Logf("after the cancel: %+v", st.KV)
}

// TestChoicesAbortRPC: Abort naming an n=2 call ends both choices, each
// with a finish chunk "abort", and GenerateComplete lists both.
func TestChoicesAbortRPC(t *testing.T) {
	r := newRig(t, rigOptions{})
	held, release := r.rec.hold(3)
	defer release()
	call := mustGenerate(t, r, &sluicev1.GenerateRequest{RequestId: "two", N: 2, Input: textInput("Hello"), Sampling: greedy(4000)})
	wait(t, "the loop holding at token 3", held)
	if _, err := r.client.Abort(context.Background(), &sluicev1.AbortRequest{RequestId: "two"}); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	release()
	c := drainChoices(t, call, 2)
	if c.err != nil || c.complete == nil {
		t.Fatalf("stream: %v, complete %v", c.err, c.complete)
	}
	if f := c.complete.GetFinishReasons(); len(f) != 2 || f[0] != "abort" || f[1] != "abort" || c.finish[0] != "abort" || c.finish[1] != "abort" {
		t.Errorf("finish chunks %q, complete %q; want abort for both", c.finish, f)
	}
	if n := c.complete.GetUsage().GetCompletionTokens(); int(n) != len(c.ids[0])+len(c.ids[1]) {
		t.Errorf("usage %d completion tokens, chunks carried %d+%d", n, len(c.ids[0]), len(c.ids[1]))
	}
	r.idle(t)
}

func TestChoicesN(t *testing.T) {
	r := newRig(t, rigOptions{})
	_, err := mustGenerate(t, r, &sluicev1.GenerateRequest{N: 17, Input: textInput("Hello"), Sampling: greedy(4)}).Recv()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "n must be between 1 and 16") {
		t.Errorf("n=17: %v, want InvalidArgument naming the range", err)
	}
}
