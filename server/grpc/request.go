package grpcserver

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server"
	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
)

// genRequest validates a sluice.v1 GenerateRequest with the HTTP API's own
// validator: the request is restated in the OpenAI JSON schema and parsed by
// server.ParseRequest, so both APIs accept exactly the same values with the
// same messages, and a rule added on the HTTP side holds here too.
func genRequest(r *sluicev1.GenerateRequest) (*server.GenRequest, error) {
	body := map[string]any{"model": r.GetModel()}
	chat := false
	switch in := r.GetInput().(type) {
	case *sluicev1.GenerateRequest_Text:
		body["prompt"] = in.Text
	case *sluicev1.GenerateRequest_TokenIds:
		body["prompt"] = in.TokenIds.GetIds() // an empty list is rejected as an empty prompt
	case *sluicev1.GenerateRequest_Chat:
		chat = true
		msgs := make([]map[string]string, len(in.Chat.GetMessages()))
		for i, m := range in.Chat.GetMessages() {
			msgs[i] = map[string]string{"role": m.GetRole(), "content": m.GetContent()}
		}
		body["messages"] = msgs
	default:
		// prompt absent: ParseRequest names the field
	}
	sp := r.GetSampling()
	if sp == nil {
		sp = &sluicev1.SamplingParams{} // presence is read from the fields below
	}
	optional := func(name string, set bool, v any) {
		if set {
			body[name] = v
		}
	}
	optional("temperature", sp.Temperature != nil, sp.GetTemperature())
	optional("top_p", sp.TopP != nil, sp.GetTopP())
	optional("top_k", sp.GetTopK() != 0, sp.GetTopK())
	optional("min_p", sp.MinP != nil, sp.GetMinP())
	optional("presence_penalty", sp.PresencePenalty != nil, sp.GetPresencePenalty())
	optional("frequency_penalty", sp.FrequencyPenalty != nil, sp.GetFrequencyPenalty())
	optional("repetition_penalty", sp.RepetitionPenalty != nil, sp.GetRepetitionPenalty())
	optional("max_tokens", sp.MaxTokens != nil, sp.GetMaxTokens())
	optional("stop", len(sp.GetStop()) > 0, sp.GetStop())
	// The HTTP schema's seed is an int64; the bits survive the round trip.
	optional("seed", sp.Seed != nil, int64(sp.GetSeed()))
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", engine.ErrInvalidRequest, err)
	}
	return server.ParseRequest(raw, chat)
}

// engineRequest tokenizes g's prompt and checks it against the context, as
// the HTTP handlers do.
func engineRequest(b *server.Backend, g *server.GenRequest) (engine.Request, error) {
	prompt := g.PromptIDs
	param := "prompt"
	if prompt == nil {
		text, addSpecial := g.Prompt, true
		if g.Chat {
			param = "messages"
			var err error
			if text, err = b.Tokenizer.ChatPrompt(g.Messages); err != nil {
				return engine.Request{}, fmt.Errorf("%w: messages: applying the chat template: %v", engine.ErrInvalidRequest, err)
			}
			addSpecial = false // the template writes any BOS itself
		}
		var err error
		if prompt, err = b.Tokenizer.Encode(text, addSpecial); err != nil {
			return engine.Request{}, fmt.Errorf("%w: %s: tokenizing: %v", engine.ErrInvalidRequest, param, err)
		}
	}
	switch n := len(prompt); {
	case n == 0:
		return engine.Request{}, fmt.Errorf("%w: %s: the prompt is empty after tokenization", engine.ErrInvalidRequest, param)
	case n >= b.ContextLen:
		return engine.Request{}, fmt.Errorf("%w: the prompt is %d tokens long; the model's context is %d tokens", engine.ErrPromptTooLong, n, b.ContextLen)
	case g.MaxTokens > 0 && n+g.MaxTokens > b.ContextLen:
		return engine.Request{}, fmt.Errorf("%w: the model's context is %d tokens; the prompt (%d tokens) plus max_tokens (%d) exceed it",
			engine.ErrPromptTooLong, b.ContextLen, n, g.MaxTokens)
	}
	sp := g.Sampling
	if sp.Seed == nil {
		seed := randUint64()
		sp.Seed = &seed
	}
	return engine.Request{Prompt: prompt, MaxTokens: g.MaxTokens, Sampling: sp}, nil
}

func uint32s(ids []int32) []uint32 {
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = uint32(id)
	}
	return out
}

// int32s converts wire token ids; ids beyond int32 cannot name a token.
func int32s(ids []uint32) ([]int32, error) {
	out := make([]int32, len(ids))
	for i, id := range ids {
		if id > 1<<31-1 {
			return nil, fmt.Errorf("%w: token id %d out of range", engine.ErrInvalidRequest, id)
		}
		out[i] = int32(id)
	}
	return out, nil
}

func randID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails
	return fmt.Sprintf("%x", b)
}

func randUint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}
