package grpcserver

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	vllmpb "github.com/sluicehq/sluice/server/grpc/proto/vllm"
)

type vllmRun struct {
	chunks   [][]uint32
	lastSeen int32 // completion_tokens of the last chunk
	complete *vllmpb.GenerateComplete
	err      error
}

// vllmGenerate runs req to its end; first, when set, runs after the first message.
func (r *rig) vllmGenerate(t *testing.T, req *vllmpb.GenerateRequest, first func()) vllmRun {
	t.Helper()
	stream, err := r.vllm.Generate(context.Background(), req)
	if err != nil {
		return vllmRun{err: err}
	}
	var out vllmRun
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			out.err = err
			return out
		}
		if first != nil {
			first()
			first = nil
		}
		if msg.GetRequestId() != req.GetRequestId() {
			t.Errorf("response for %q, want %q", msg.GetRequestId(), req.GetRequestId())
		}
		switch x := msg.GetResponse().(type) {
		case *vllmpb.GenerateResponse_Chunk:
			out.chunks = append(out.chunks, x.Chunk.GetTokenIds())
			out.lastSeen = x.Chunk.GetCompletionTokens()
		case *vllmpb.GenerateResponse_Complete:
			out.complete = x.Complete
		}
	}
}

// TestVLLMService drives the vLLM-compatible service as the SGLang model
// gateway does: token ids in, token ids out, streamed or not.
func TestVLLMService(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := context.Background()
	tok, err := r.client.Tokenize(ctx, &sluicev1.TokenizeRequest{Input: &sluicev1.TokenizeRequest_Text{Text: "Hello there"}})
	if err != nil {
		t.Fatal(err)
	}
	maxTokens := int32(24)
	req := func(id string, stream bool) *vllmpb.GenerateRequest {
		return &vllmpb.GenerateRequest{RequestId: id, Stream: stream,
			Tokenized:      &vllmpb.TokenizedInput{InputIds: tok.GetTokenIds()},
			SamplingParams: &vllmpb.SamplingParams{Temperature: 0, MaxTokens: &maxTokens}}
	}
	// Hold the loop at the third token until the first chunk is out, so the
	// stream has at least two chunks however fast the model is.
	held, release := r.rec.hold(3)
	defer release()
	streamed := r.vllmGenerate(t, req("s", true), func() { wait(t, "the hold", held); release() })
	if streamed.err != nil || streamed.complete == nil {
		t.Fatalf("streamed: %v, complete %v", streamed.err, streamed.complete)
	}
	all := slices.Concat(streamed.chunks...)
	c := streamed.complete
	if !slices.Equal(all, c.GetOutputIds()) || int(c.GetCompletionTokens()) != len(all) || streamed.lastSeen != c.GetCompletionTokens() {
		t.Errorf("chunks carried %v (last count %d), complete says %v (%d tokens)", all, streamed.lastSeen, c.GetOutputIds(), c.GetCompletionTokens())
	}
	if int(c.GetPromptTokens()) != len(tok.GetTokenIds()) || (c.GetFinishReason() != "length" && c.GetFinishReason() != "stop") {
		t.Errorf("complete: prompt %d (sent %d), finish %q", c.GetPromptTokens(), len(tok.GetTokenIds()), c.GetFinishReason())
	}
	if len(streamed.chunks) < 2 {
		t.Errorf("%d chunks: stream=true did not stream", len(streamed.chunks))
	}

	whole := r.vllmGenerate(t, req("w", false), nil)
	if whole.err != nil || len(whole.chunks) != 0 || !slices.Equal(whole.complete.GetOutputIds(), all) {
		t.Errorf("stream=false: %v, %d chunks, output %v; want one complete with %v", whole.err, len(whole.chunks), whole.complete.GetOutputIds(), all)
	}

	for _, c := range []struct {
		name string
		edit func(*vllmpb.SamplingParams)
		want codes.Code
	}{
		{"n=2", func(sp *vllmpb.SamplingParams) { sp.N = 2 }, codes.InvalidArgument},
		{"logprobs", func(sp *vllmpb.SamplingParams) { sp.Logprobs = ptr[int32](1) }, codes.InvalidArgument},
		{"regex", func(sp *vllmpb.SamplingParams) { sp.Constraint = &vllmpb.SamplingParams_Regex{Regex: "a+"} }, codes.InvalidArgument},
		{"temperature 5", func(sp *vllmpb.SamplingParams) { sp.Temperature = 5 }, codes.InvalidArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			rq := req("bad", true)
			c.edit(rq.SamplingParams)
			if got := r.vllmGenerate(t, rq, nil); status.Code(got.err) != c.want {
				t.Errorf("status %v, want %v", got.err, c.want)
			}
		})
	}

	info, err := r.vllm.GetModelInfo(ctx, &vllmpb.GetModelInfoRequest{})
	if err != nil || !info.GetIsGeneration() || info.GetMaxContextLength() != int32(tinySpec.ContextLen) || info.GetVocabSize() != int32(tinySpec.Vocab) {
		t.Errorf("GetModelInfo: %v, %v", info, err)
	}
	if h, err := r.vllm.HealthCheck(ctx, &vllmpb.HealthCheckRequest{}); err != nil || !h.GetHealthy() {
		t.Errorf("HealthCheck: %v, %v", h, err)
	}
	if si, err := r.vllm.GetServerInfo(ctx, &vllmpb.GetServerInfoRequest{}); err != nil || si.GetActiveRequests() != 0 || si.GetLastReceiveTimestamp() == 0 {
		t.Errorf("GetServerInfo after two requests: %v, %v", si, err)
	}
	if a, err := r.vllm.Abort(ctx, &vllmpb.AbortRequest{RequestId: "gone"}); err != nil || a.GetSuccess() {
		t.Errorf("Abort of an unknown id: %v, %v; want success=false, no error", a, err)
	}
	if _, err := r.vllm.Embed(ctx, &vllmpb.EmbedRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("Embed: %v, want Unimplemented", err)
	}
}

// TestNilSampling: a request without sampling parameters (the message is
// optional on the wire) takes the defaults instead of crashing the server.
func TestNilSampling(t *testing.T) {
	short := tinySpec
	short.ContextLen = 64 // no max_tokens: generation runs to the context
	r := newRig(t, rigOptions{spec: &short})
	if got := r.vllmGenerate(t, &vllmpb.GenerateRequest{RequestId: "n", Tokenized: &vllmpb.TokenizedInput{InputIds: []uint32{1, 2, 3}}}, nil); got.err != nil {
		t.Errorf("vLLM Generate without sampling_params: %v", got.err)
	}
	stream, err := r.client.Generate(context.Background(), &sluicev1.GenerateRequest{Input: textInput("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if c := drain(stream); c.err != nil || c.complete == nil {
		t.Errorf("Generate without sampling: %v, complete %v", c.err, c.complete)
	}
}
