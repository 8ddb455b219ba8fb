package server

import (
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// renderedRequest is vLLM's GenerateRequest (vllm/entrypoints/serve/disagg/
// protocol.py), what its /v1/chat/completions/render and
// /v1/completions/render answer: the request as the engine would receive
// it, token ids instead of text. llm-d's router reads token_ids (its
// tokenizer plugin and its render step) to compute the prefix it routes
// on, so they must be the very ids a generation of the same body is given.
type renderedRequest struct {
	RequestID        string          `json:"request_id"`
	TokenIDs         []int32         `json:"token_ids"`
	Features         any             `json:"features"` // multimodal: none here
	SamplingParams   renderedSampler `json:"sampling_params"`
	Model            string          `json:"model"`
	Stream           bool            `json:"stream"`
	StreamOptions    any             `json:"stream_options"`
	CacheSalt        *string         `json:"cache_salt"`
	Priority         int             `json:"priority"`
	KVTransferParams any             `json:"kv_transfer_params"`
}

// renderedSampler is the part of vLLM's SamplingParams a Sluice request
// sets, under vLLM's names; a field Sluice has no notion of is left out
// rather than reported with a value that would mean something else.
type renderedSampler struct {
	N                 int      `json:"n"`
	Temperature       float32  `json:"temperature"`
	TopP              float32  `json:"top_p"`
	TopK              int      `json:"top_k"`
	MinP              float32  `json:"min_p"`
	PresencePenalty   float32  `json:"presence_penalty"`
	FrequencyPenalty  float32  `json:"frequency_penalty"`
	RepetitionPenalty float32  `json:"repetition_penalty"`
	Seed              *uint64  `json:"seed"`
	MaxTokens         *int     `json:"max_tokens"`
	MinTokens         int      `json:"min_tokens"`
	StopTokenIDs      []int32  `json:"stop_token_ids"`
	IgnoreEOS         bool     `json:"ignore_eos"`
	Logprobs          *int     `json:"logprobs"`
	LogitBias         any      `json:"logit_bias"`
	Stop              []string `json:"stop"`
}

// handleRender serves POST /v1/chat/completions/render (chat) and POST
// /v1/completions/render: the body a generation takes, parsed, checked and
// tokenized by the same code (ParseRequest, stream.Prepare), nothing
// generated. Chat answers one rendered request, completions a list, one per
// prompt, as vLLM does. A body a generation would refuse is refused the
// same way.
func (s *Server) handleRender(w http.ResponseWriter, r *http.Request, chat bool) {
	b := s.backend.Load()
	if b == nil {
		writeError(w, fmt.Errorf("%w: model still loading", engine.ErrClosed))
		return
	}
	body, err := httpedge.ReadBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	g, err := ParseRequest(body, chat)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := stream.CheckModel(g.Model, s.cfg.ModelID, s.cfg.Aliases); err != nil {
		writeError(w, err)
		return
	}
	prompts := g.Batch
	if len(prompts) == 0 {
		prompts = []stream.BatchPrompt{{Text: g.Prompt, IDs: g.PromptIDs}}
	}
	out := make([]renderedRequest, 0, len(prompts))
	for i, p := range prompts {
		gi := *g
		gi.Batch, gi.Prompt, gi.PromptIDs, gi.N = nil, p.Text, p.IDs, 1
		req, err := stream.Prepare(b, &gi)
		if err != nil {
			if pe, ok := err.(*stream.ParamError); ok && len(prompts) > 1 && pe.Param == "prompt" {
				pe.Param = fmt.Sprintf("prompt[%d]", i)
			}
			writeError(w, err)
			return
		}
		out = append(out, s.rendered(g, req, responseID(chat)))
	}
	if chat {
		writeJSON(w, out[0])
		return
	}
	writeJSON(w, out)
}

func (s *Server) rendered(g *stream.GenRequest, req engine.Request, id string) renderedRequest {
	sp := req.Sampling
	rr := renderedRequest{
		RequestID: id,
		TokenIDs:  req.Prompt,
		Model:     s.modelName(g.Model),
		Stream:    g.Stream,
		Priority:  req.Priority,
		SamplingParams: renderedSampler{
			N: max(g.N, 1), Temperature: sp.Temperature, TopP: sp.TopP, TopK: sp.TopK, MinP: sp.MinP,
			PresencePenalty: sp.PresencePenalty, FrequencyPenalty: sp.FrequencyPenalty, RepetitionPenalty: sp.RepetitionPenalty,
			Seed: sp.Seed, MinTokens: req.MinTokens, StopTokenIDs: req.StopTokens, IgnoreEOS: req.IgnoreEOS,
			LogitBias: req.LogitBias, Stop: g.Stop,
		},
	}
	if rr.TokenIDs == nil {
		rr.TokenIDs = []int32{}
	}
	if rr.SamplingParams.StopTokenIDs == nil {
		rr.SamplingParams.StopTokenIDs = []int32{}
	}
	if rr.SamplingParams.Stop == nil {
		rr.SamplingParams.Stop = []string{}
	}
	if req.MaxTokens > 0 {
		rr.SamplingParams.MaxTokens = &req.MaxTokens
	}
	if req.Logprobs {
		rr.SamplingParams.Logprobs = &req.TopLogprobs
	}
	if g.CacheSalt != "" {
		rr.CacheSalt = &g.CacheSalt
	}
	return rr
}

// The render endpoints' routes, vLLM's paths.
const (
	ChatRenderRoute       = "POST /v1/chat/completions/render"
	CompletionRenderRoute = "POST /v1/completions/render"
)

// RenderHandler serves vLLM's render endpoint for chat (ChatRenderRoute) or
// for completions (CompletionRenderRoute). It checks the API key itself,
// as every /v1 route does, whatever route table it is added to: the ids
// it returns are a tokenizer oracle like /tokenize. Config.RenderPublic
// lifts the check for these two routes only, because llm-d's picker calls
// them for precise prefix routing and cannot send a key: they read no
// model state and answer only with the caller's own text as token ids
// (SECURITY.md says what that still shows).
func (s *Server) RenderHandler(chat bool) http.Handler {
	h := func(w http.ResponseWriter, r *http.Request) { s.handleRender(w, r, chat) }
	if s.cfg.RenderPublic {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s.checkFields(w, r, writeError) { // as guard does (fields.go)
				h(w, r)
			}
		})
	}
	return s.api(h)
}
