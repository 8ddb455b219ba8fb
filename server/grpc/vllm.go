package grpcserver

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	vllmpb "github.com/sluicehq/sluice/server/grpc/proto/vllm"
	"github.com/sluicehq/sluice/server/stream"
)

// vllmEngine implements vllm.grpc.engine.VllmEngine: token ids in, token ids
// out. It shares the Inference service's path (validation, Pump, in-flight
// table), so stop strings, cancellation and errors behave the same; only the
// framing differs.
type vllmEngine struct {
	vllmpb.UnimplementedVllmEngineServer // Embed: UNIMPLEMENTED (no embedding models)
	s                                    *Server
}

// vllmRequest refuses what Sluice cannot honour and validates the rest with
// the stream core's rules (see genRequest). proto3 zero means "unset" for
// the fields whose zero is out of range.
func vllmRequest(r *vllmpb.GenerateRequest) (*stream.GenRequest, error) {
	sp := r.GetSamplingParams()
	if sp == nil {
		sp = &vllmpb.SamplingParams{} // presence is read from the fields below
	}
	for _, c := range []struct {
		bad   bool
		field string
	}{
		{sp.GetN() > 1, "n > 1"},
		{sp.Logprobs != nil, "logprobs"},
		{sp.PromptLogprobs != nil, "prompt_logprobs"},
		{sp.GetConstraint() != nil, "structured output constraints"},
		{len(sp.GetLogitBias()) > 0, "logit_bias"},
		{sp.GetMinTokens() > 0, "min_tokens"},
		{sp.GetIgnoreEos(), "ignore_eos"},
		{sp.TruncatePromptTokens != nil, "truncate_prompt_tokens"},
		{sp.GetIncludeStopStrInOutput(), "include_stop_str_in_output"},
	} {
		if c.bad {
			return nil, fmt.Errorf("%w: %s", stream.ErrUnsupported, c.field)
		}
	}
	g := &stream.GenRequest{}
	ids, err := int32s("input_ids", r.GetTokenized().GetInputIds())
	if err == nil {
		err = g.SetPromptIDs(ids)
	}
	if err != nil {
		return nil, err
	}
	// set is the field when the client sent a non-zero value.
	set := func(v float32, ok bool) *float64 {
		if !ok {
			return nil
		}
		f := float64(v)
		return &f
	}
	p := stream.Params{
		Temperature:       set(sp.GetTemperature(), true),
		TopP:              set(sp.GetTopP(), sp.GetTopP() > 0),
		MinP:              set(sp.GetMinP(), sp.GetMinP() != 0),
		PresencePenalty:   set(sp.GetPresencePenalty(), sp.GetPresencePenalty() != 0),
		FrequencyPenalty:  set(sp.GetFrequencyPenalty(), sp.GetFrequencyPenalty() != 0),
		RepetitionPenalty: set(sp.GetRepetitionPenalty(), sp.GetRepetitionPenalty() > 0),
		Stop:              sp.GetStop(),
	}
	if k := int(sp.GetTopK()); k != 0 {
		p.TopK = &k
	}
	if sp.MaxTokens != nil {
		n := int(sp.GetMaxTokens())
		p.MaxTokens = &n
	}
	if sp.Seed != nil {
		seed := uint64(int64(sp.GetSeed())) // the bits, as the HTTP API reads a negative seed
		p.Seed = &seed
	}
	if err := g.SetParams(p); err != nil {
		return nil, err
	}
	g.StopTokens, err = int32s("stop_token_ids", sp.GetStopTokenIds())
	return g, err
}

func (v *vllmEngine) Generate(r *vllmpb.GenerateRequest, call grpc.ServerStreamingServer[vllmpb.GenerateResponse]) error {
	s := v.s
	g, err := vllmRequest(r)
	if err != nil {
		return toStatus(err)
	}
	run, err := s.start(call.Context(), g, r.GetRequestId(), "vllm-")
	if err != nil {
		return err
	}
	defer run.done()
	id, prompt := run.req.ID, int32(len(run.req.Prompt))
	send := func(p *piece) error {
		if !r.GetStream() {
			return nil // one GenerateComplete at the end
		}
		return call.Send(&vllmpb.GenerateResponse{RequestId: id, Response: &vllmpb.GenerateResponse_Chunk{
			Chunk: &vllmpb.GenerateStreamChunk{TokenIds: uint32s(p.ids), PromptTokens: prompt, CompletionTokens: int32(len(run.ts.IDs()))}}})
	}
	complete := func(out stream.Outcome, finish string) error {
		return call.Send(&vllmpb.GenerateResponse{RequestId: id, Response: &vllmpb.GenerateResponse_Complete{
			Complete: &vllmpb.GenerateComplete{OutputIds: uint32s(run.ts.IDs()), FinishReason: finish, PromptTokens: prompt,
				CompletionTokens: int32(len(run.ts.IDs())), CachedTokens: int32(out.Result.CachedTokens)}}})
	}
	sendErr := func(err error, code codes.Code, httpStatus int) {
		_ = call.Send(&vllmpb.GenerateResponse{RequestId: id, Response: &vllmpb.GenerateResponse_Error{
			Error: &vllmpb.GenerateError{Message: err.Error(), HttpStatusCode: strconv.Itoa(httpStatus), Details: code.String()}}})
	}
	return s.stream(run, r.GetStream(), send, complete, sendErr)
}

// Abort answers success=false for an unknown id instead of NOT_FOUND: routers
// abort fire-and-forget, often after the request has already finished.
func (v *vllmEngine) Abort(ctx context.Context, r *vllmpb.AbortRequest) (*vllmpb.AbortResponse, error) {
	if err := v.s.inflight.abort(ctx, r.GetRequestId()); err != nil {
		return &vllmpb.AbortResponse{Success: false, Message: err.Error()}, nil
	}
	return &vllmpb.AbortResponse{Success: true}, nil
}

func (v *vllmEngine) HealthCheck(context.Context, *vllmpb.HealthCheckRequest) (*vllmpb.HealthCheckResponse, error) {
	select {
	case <-v.s.drain:
		return &vllmpb.HealthCheckResponse{Healthy: false, Message: "shutting down"}, nil
	default:
	}
	if v.s.model.Load() == nil {
		return &vllmpb.HealthCheckResponse{Healthy: false, Message: "model loading"}, nil
	}
	return &vllmpb.HealthCheckResponse{Healthy: true, Message: "ok"}, nil
}

func (v *vllmEngine) GetModelInfo(context.Context, *vllmpb.GetModelInfoRequest) (*vllmpb.GetModelInfoResponse, error) {
	m, err := v.s.loadedModel()
	if err != nil {
		return nil, err
	}
	return &vllmpb.GetModelInfoResponse{ModelPath: m.info.Path, IsGeneration: true,
		MaxContextLength: int32(m.backend.ContextLen), VocabSize: int32(m.info.VocabSize)}, nil
}

func (v *vllmEngine) GetServerInfo(context.Context, *vllmpb.GetServerInfoRequest) (*vllmpb.GetServerInfoResponse, error) {
	last := 0.0
	if ns := v.s.lastRecv.Load(); ns > 0 {
		last = float64(ns) / 1e9
	}
	return &vllmpb.GetServerInfoResponse{ActiveRequests: int32(v.s.inflight.len()), LastReceiveTimestamp: last,
		UptimeSeconds: time.Since(v.s.started).Seconds(), ServerType: "sluice-grpc"}, nil
}
