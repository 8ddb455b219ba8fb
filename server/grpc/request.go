package grpcserver

import (
	"encoding/json"
	"fmt"

	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	"github.com/sluicehq/sluice/server/stream"
)

// genRequest validates a sluice.v1 GenerateRequest with the stream core's
// rules, the ones the HTTP API applies, so both accept exactly the same
// values with the same messages.
func genRequest(r *sluicev1.GenerateRequest) (*stream.GenRequest, error) {
	g := &stream.GenRequest{Model: r.GetModel()}
	var kwargs map[string]json.RawMessage
	var err error
	switch in := r.GetInput().(type) {
	case *sluicev1.GenerateRequest_Text:
		g.Prompt = in.Text
	case *sluicev1.GenerateRequest_TokenIds:
		var ids []int32
		if ids, err = int32s("token_ids", in.TokenIds.GetIds()); err == nil {
			err = g.SetPromptIDs(ids)
		}
	case *sluicev1.GenerateRequest_Chat:
		var msgs []stream.ChatMessage
		if msgs, err = chatMessages(in.Chat.GetMessages()); err == nil {
			err = g.SetMessages(msgs)
		}
		if err == nil {
			kwargs, err = setTemplateKwargs(g, in.Chat.GetChatTemplateKwargs()) // reasoning.go
		}
	default:
		err = stream.InvalidParam("prompt", "prompt is required: text, token_ids or chat")
	}
	if err != nil {
		return nil, err
	}
	sp := r.GetSampling()
	if sp == nil {
		sp = &sluicev1.SamplingParams{} // presence is read from the fields below
	}
	p := stream.Params{
		Temperature: f64(sp.Temperature), TopP: f64(sp.TopP), MinP: f64(sp.MinP),
		PresencePenalty: f64(sp.PresencePenalty), FrequencyPenalty: f64(sp.FrequencyPenalty),
		RepetitionPenalty: f64(sp.RepetitionPenalty), Stop: sp.GetStop(), Seed: sp.Seed,
	}
	if r.GetLogprobs() || r.GetTopLogprobs() > 0 {
		on, k := r.GetLogprobs(), int(min(r.GetTopLogprobs(), 1<<20))
		p.Logprobs, p.TopLogprobs = &on, &k
	}
	if r.N != 0 { // 0 is proto3's unset: one choice
		n := int(min(r.GetN(), 1<<20))
		p.N = &n
	}
	if k := int(sp.GetTopK()); k != 0 {
		p.TopK = &k
	}
	if sp.MaxTokens != nil {
		n := int(sp.GetMaxTokens())
		p.MaxTokens = &n
	}
	if err := g.SetParams(p); err != nil {
		return nil, err
	}
	if err := setFeatures(g, r); err != nil { // features.go
		return nil, err
	}
	if err := setReasoning(g, r.GetReasoning(), kwargs); err != nil { // reasoning.go
		return nil, err
	}
	g.StopTokens, err = int32s("stop_token_ids", sp.GetStopTokenIds())
	return g, err
}

func chatMessages(in []*sluicev1.ChatMessage) ([]stream.ChatMessage, error) {
	msgs := make([]stream.ChatMessage, len(in))
	for i, m := range in {
		calls, err := toolCalls(fmt.Sprintf("messages[%d].tool_calls", i), m.GetToolCalls())
		if err != nil {
			return nil, err
		}
		msgs[i] = stream.ChatMessage{Role: m.GetRole(), Content: m.GetContent(), ToolCalls: calls, ToolCallID: m.GetToolCallId()}
	}
	return msgs, nil
}

// f64 widens an optional proto float; nil stays absent.
func f64(v *float32) *float64 {
	if v == nil {
		return nil
	}
	f := float64(*v)
	return &f
}

func uint32s(ids []int32) []uint32 {
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = uint32(id)
	}
	return out
}

// int32s converts the wire token ids of field param; ids beyond int32
// cannot name a token.
func int32s(param string, ids []uint32) ([]int32, error) {
	out := make([]int32, len(ids))
	for i, id := range ids {
		if id > 1<<31-1 {
			return nil, stream.InvalidParam(param, "%s[%d]: token id %d is out of range", param, i, id)
		}
		out[i] = int32(id)
	}
	return out, nil
}
