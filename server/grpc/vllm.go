package grpcserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server"
	vllmpb "github.com/sluicehq/sluice/server/grpc/proto/vllm"
)

// vllmEngine implements vllm.grpc.engine.VllmEngine: token ids in, token ids
// out. It shares the Inference service's path (validation, Pump, in-flight
// table), so stop strings, cancellation and errors behave the same; only the
// framing differs.
type vllmEngine struct {
	vllmpb.UnimplementedVllmEngineServer // Embed: UNIMPLEMENTED (no embedding models)
	s                                    *Server
}

// vllmRequest checks what Sluice cannot honour and validates the rest with
// the HTTP API's validator (see genRequest).
func vllmRequest(r *vllmpb.GenerateRequest) (*server.GenRequest, error) {
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
			return nil, fmt.Errorf("%w: %s", ErrUnsupported, c.field)
		}
	}
	body := map[string]any{"prompt": r.GetTokenized().GetInputIds()}
	// proto3 zero means "unset" for the fields whose zero is out of range.
	optional := func(name string, set bool, v any) {
		if set {
			body[name] = v
		}
	}
	body["temperature"] = sp.GetTemperature()
	optional("top_p", sp.GetTopP() > 0, sp.GetTopP())
	optional("top_k", sp.GetTopK() != 0, sp.GetTopK())
	optional("min_p", sp.GetMinP() != 0, sp.GetMinP())
	optional("presence_penalty", sp.GetPresencePenalty() != 0, sp.GetPresencePenalty())
	optional("frequency_penalty", sp.GetFrequencyPenalty() != 0, sp.GetFrequencyPenalty())
	optional("repetition_penalty", sp.GetRepetitionPenalty() > 0, sp.GetRepetitionPenalty())
	optional("max_tokens", sp.MaxTokens != nil, sp.GetMaxTokens())
	optional("stop", len(sp.GetStop()) > 0, sp.GetStop())
	optional("seed", sp.Seed != nil, sp.GetSeed())
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", engine.ErrInvalidRequest, err)
	}
	return server.ParseRequest(raw, false)
}

func (v *vllmEngine) Generate(r *vllmpb.GenerateRequest, stream grpc.ServerStreamingServer[vllmpb.GenerateResponse]) error {
	s := v.s
	b, err := s.loaded()
	if err != nil {
		return err
	}
	g, err := vllmRequest(r)
	if err != nil {
		return toStatus(err)
	}
	run, err := s.start(stream.Context(), b, g, r.GetSamplingParams().GetStopTokenIds(), r.GetRequestId(), "vllm-")
	if err != nil {
		return err
	}
	defer run.done()
	id, prompt := run.req.ID, int32(len(run.req.Prompt))
	send := func(_ string, ids []int32) error {
		if !r.GetStream() {
			return nil // one GenerateComplete at the end
		}
		return stream.Send(&vllmpb.GenerateResponse{RequestId: id, Response: &vllmpb.GenerateResponse_Chunk{
			Chunk: &vllmpb.GenerateStreamChunk{TokenIds: uint32s(ids), PromptTokens: prompt, CompletionTokens: int32(len(run.ts.IDs()))}}})
	}
	complete := func(out server.Outcome, finish string) error {
		return stream.Send(&vllmpb.GenerateResponse{RequestId: id, Response: &vllmpb.GenerateResponse_Complete{
			Complete: &vllmpb.GenerateComplete{OutputIds: uint32s(run.ts.IDs()), FinishReason: finish, PromptTokens: prompt,
				CompletionTokens: int32(len(run.ts.IDs())), CachedTokens: int32(out.Result.CachedTokens)}}})
	}
	sendErr := func(err error, code codes.Code, httpStatus int) {
		_ = stream.Send(&vllmpb.GenerateResponse{RequestId: id, Response: &vllmpb.GenerateResponse_Error{
			Error: &vllmpb.GenerateError{Message: err.Error(), HttpStatusCode: strconv.Itoa(httpStatus), Details: code.String()}}})
	}
	return s.stream(run, r.GetStream(), send, complete, sendErr)
}

// Abort answers success=false for an unknown id instead of NOT_FOUND: routers
// abort fire-and-forget, often after the request has already finished.
func (v *vllmEngine) Abort(_ context.Context, r *vllmpb.AbortRequest) (*vllmpb.AbortResponse, error) {
	if err := v.s.inflight.abort(r.GetRequestId()); err != nil {
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
