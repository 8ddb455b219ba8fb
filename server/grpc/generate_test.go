package grpcserver

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/engine"
	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
)

// collected is everything one Generate stream delivered.
type collected struct {
	text     string
	ids      []uint32
	chunks   int
	complete *sluicev1.GenerateComplete
	inband   *sluicev1.GenerateError
	err      error // the call's final status (nil: OK)
}

func drain(stream interface {
	Recv() (*sluicev1.GenerateResponse, error)
}) collected {
	return drainThen(stream, nil)
}

// drainThen is drain that runs first, when set, after the first message.
func drainThen(stream interface {
	Recv() (*sluicev1.GenerateResponse, error)
}, first func()) collected {
	var c collected
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return c
		}
		if err != nil {
			c.err = err
			return c
		}
		if first != nil {
			first()
			first = nil
		}
		switch r := msg.GetResponse().(type) {
		case *sluicev1.GenerateResponse_Chunk:
			c.chunks++
			c.text += r.Chunk.GetText()
			c.ids = append(c.ids, r.Chunk.GetTokenIds()...)
		case *sluicev1.GenerateResponse_Complete:
			c.complete = r.Complete
		case *sluicev1.GenerateResponse_Error:
			c.inband = r.Error
		}
	}
}

func greedy(maxTokens uint32, stop ...string) *sluicev1.SamplingParams {
	return &sluicev1.SamplingParams{Temperature: ptr[float32](0), MaxTokens: ptr(maxTokens), Stop: stop}
}

func textInput(s string) *sluicev1.GenerateRequest_Text {
	return &sluicev1.GenerateRequest_Text{Text: s}
}

// TestCancelMidwayFreesBlocks is the SSE disconnect test's twin: a client
// cancels a stream mid-generation, the sequence ends with cause
// client_disconnect and its KV blocks are back in the pool.
func TestCancelMidwayFreesBlocks(t *testing.T) {
	r := newRig(t, rigOptions{})
	held, release := r.rec.hold(5)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := r.client.Generate(ctx, &sluicev1.GenerateRequest{RequestId: "cancel-me",
		Input: textInput("Once upon a time"), Sampling: greedy(4000)})
	if err != nil {
		t.Fatal(err)
	}
	engineCtx := r.waitSubmitted(t)
	wait(t, "the loop holding at token 5", held)
	first, err := stream.Recv()
	if err != nil || first.GetChunk() == nil || first.GetRequestId() != "cancel-me" {
		t.Fatalf("first message %v, %v; want a chunk of cancel-me", first, err)
	}
	if st := r.model.Engine.Stats(); st.Running != 1 || st.KV.Used == 0 {
		t.Fatalf("mid-generation: running %d, KV blocks used %d; want 1 and > 0", st.Running, st.KV.Used)
	}
	cancel()
	// The engine sees the cancellation through the call's context, exactly
	// as a dropped SSE connection cancels the HTTP request's context.
	wait(t, "the server-side context ending", engineCtx.Done())
	release()
	res := r.waitFinish(t)
	if res.Finish != engine.FinishAbort || res.Cause != engine.CauseClientDisconnect {
		t.Fatalf("sequence ended %s/%s, want abort/client_disconnect", res.Finish, res.Cause)
	}
	if res.CompletionTokens >= 4000 {
		t.Fatalf("%d tokens generated: the cancel did not stop the generation", res.CompletionTokens)
	}
	reclaim := <-r.rec.reclaims
	st := r.idle(t)
	if st.KV.Free+st.KV.Cached != st.KV.Total {
		t.Errorf("after the cancel: %+v; want every block free or cached", st.KV)
	}
	if c := drain(stream); status.Code(c.err) != codes.Canceled {
		t.Errorf("client saw status %v, want Canceled", c.err)
	}
	t.Logf("cancelled after %d tokens; blocks back in the pool %v after the cancellation", res.CompletionTokens, reclaim)
}

func TestAbortRPC(t *testing.T) {
	r := newRig(t, rigOptions{})
	held, release := r.rec.hold(3)
	defer release()
	stream, err := r.client.Generate(context.Background(), &sluicev1.GenerateRequest{RequestId: "abort-me",
		Input: textInput("Hello"), Sampling: greedy(4000)})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, "the loop holding at token 3", held)
	if _, err := r.client.Abort(context.Background(), &sluicev1.AbortRequest{RequestId: "abort-me"}); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	release()
	c := drain(stream)
	if c.err != nil || c.complete.GetFinishReason() != "abort" {
		t.Fatalf("stream ended with %v, complete %v; want OK and finish_reason abort", c.err, c.complete)
	}
	if n := c.complete.GetUsage().GetCompletionTokens(); n < 3 || int(n) != len(c.ids) {
		t.Errorf("usage reports %d completion tokens, chunks carried %d; want the same, at least 3", n, len(c.ids))
	}
	if res := r.waitFinish(t); res.Finish != engine.FinishAbort {
		t.Errorf("engine result %s, want abort", res.Finish)
	}
	r.idle(t)
	_, err = r.client.Abort(context.Background(), &sluicev1.AbortRequest{RequestId: "abort-me"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("second Abort: %v, want NotFound", err)
	}
}

// TestTextMatchesTokens checks the stream writer's contract through gRPC:
// the text deltas concatenate to the detokenized token ids, and a stop
// string cuts the text exactly before its first occurrence.
func TestTextMatchesTokens(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := context.Background()
	gen := func(sp *sluicev1.SamplingParams, first func()) collected {
		t.Helper()
		stream, err := r.client.Generate(ctx, &sluicev1.GenerateRequest{Input: textInput("The quick brown fox"), Sampling: sp})
		if err != nil {
			t.Fatal(err)
		}
		c := drainThen(stream, first)
		if c.err != nil || c.complete == nil {
			t.Fatalf("stream: %v, complete %v", c.err, c.complete)
		}
		return c
	}
	// The loop holds at the third token until the first chunk is out: at
	// least two chunks however fast the model is. (Not with a stop string:
	// its hold-back may keep the first tokens' text, and so the first chunk.)
	held, release := r.rec.hold(3)
	defer release()
	full := gen(greedy(48), func() { wait(t, "the hold", held); release() })
	det, err := r.client.Detokenize(ctx, &sluicev1.DetokenizeRequest{TokenIds: full.ids})
	if err != nil {
		t.Fatal(err)
	}
	if full.text != det.GetText() {
		t.Errorf("streamed text %q != detokenized ids %q", full.text, det.GetText())
	}
	if u := full.complete.GetUsage(); int(u.GetCompletionTokens()) != len(full.ids) || u.GetPromptTokens() == 0 {
		t.Errorf("usage %v for %d streamed ids", u, len(full.ids))
	}
	if full.chunks < 2 {
		t.Errorf("%d chunks for %d tokens: the stream did not stream", full.chunks, len(full.ids))
	}

	// A stop string taken from the middle of the greedy output.
	runes := []rune(full.text)
	if len(runes) < 12 {
		t.Skipf("greedy output too short for a stop-string check: %q", full.text)
	}
	stop := string(runes[len(runes)/2 : len(runes)/2+3])
	want := full.text[:strings.Index(full.text, stop)]
	cut := gen(greedy(48, stop), nil)
	if cut.text != want || cut.complete.GetFinishReason() != "stop" {
		t.Errorf("with stop %q: text %q finish %q; want %q, stop", stop, cut.text, cut.complete.GetFinishReason(), want)
	}
}
