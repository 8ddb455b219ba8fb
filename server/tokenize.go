package server

import (
	"encoding/json"
	"net/http"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// vocabSizer is a tokenizer that knows how many ids it has; /detokenize
// refuses ids outside it rather than decode garbage.
type vocabSizer interface{ VocabSize() int }

// tokenizeRequest is vLLM's POST /tokenize body: a completion prompt, or chat
// messages rendered through the template. The fields vLLM has and Sluice
// cannot honour are refused when they ask for something.
type tokenizeRequest struct {
	Model               string          `json:"model"`
	Prompt              *string         `json:"prompt"`
	Messages            json.RawMessage `json:"messages"`
	AddSpecialTokens    *bool           `json:"add_special_tokens"`
	AddGenerationPrompt json.RawMessage `json:"add_generation_prompt"` // with ContinueFinalMessage: chat's rules (continuation)
	ReturnTokenStrs     *bool           `json:"return_token_strs"`
	// AllowSpecialTokens as in chat: message text is plain text unless true.
	AllowSpecialTokens *bool `json:"allow_special_tokens"`

	ContinueFinalMessage json.RawMessage `json:"continue_final_message"`
	ChatTemplate         json.RawMessage `json:"chat_template"`
	// ChatTemplateKwargs as chat takes them (wireRequest.reasoning): the
	// template's variables, and the reasoning they steer, which can end
	// the prompt.
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
	Tools              json.RawMessage            `json:"tools"`
}

func (tr *tokenizeRequest) refusals() error {
	switch {
	case tr.ReturnTokenStrs != nil && *tr.ReturnTokenStrs:
		return httpedge.Unsupported("return_token_strs", "return_token_strs is not supported: the tokenizer keeps no id-to-piece table here")
	case httpedge.Present(tr.ChatTemplate):
		return httpedge.Unsupported("chat_template", "a per-request chat_template is not supported; the server's template applies")
	case httpedge.Present(tr.Tools):
		return httpedge.Unsupported("tools", "tools are not supported by /tokenize")
	}
	return nil
}

// handleTokenize serves POST /tokenize in vLLM's shape:
// {"count", "max_model_len", "tokens", "token_strs": null}. A chat is
// tokenized as generation would give it to the model (template, then no
// added BOS: the template writes its own), add_generation_prompt false and
// continue_final_message included, under chat's rules; a prompt gets the
// BOS unless add_special_tokens is false.
func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	b, tr, err := s.tokenizeBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	var ids []int32
	switch {
	case tr.Prompt != nil && httpedge.Present(tr.Messages):
		err = stream.InvalidParam("prompt", "give either prompt or messages, not both")
	case tr.Prompt != nil:
		g := &stream.GenRequest{Prompt: *tr.Prompt}
		if err = tr.continuation(false, g); err != nil { // chat fields: refused on a prompt
			break
		}
		if err = tr.kwargs(false, g); err != nil {
			break
		}
		if err = setAllowSpecial(g, tr.AllowSpecialTokens); err == nil {
			ids, err = stream.TokenizePrompt(b, g, tr.AddSpecialTokens == nil || *tr.AddSpecialTokens)
		}
	default:
		var msgs []stream.ChatMessage
		if msgs, err = messages(tr.Messages); err == nil {
			ids, err = chatIDs(b, msgs, tr)
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if ids == nil {
		ids = []int32{}
	}
	writeJSON(w, map[string]any{"count": len(ids), "max_model_len": b.Limit(), "tokens": ids, "token_strs": nil})
}

// chatIDs validates msgs as chat does and tokenizes them as generation
// would, with the request limits checked first.
func chatIDs(b *stream.Backend, msgs []stream.ChatMessage, tr *tokenizeRequest) ([]int32, error) {
	var g stream.GenRequest
	if err := g.SetMessages(msgs); err != nil {
		return nil, err
	}
	if err := setAllowSpecial(&g, tr.AllowSpecialTokens); err != nil {
		return nil, err
	}
	if err := tr.continuation(true, &g); err != nil {
		return nil, err
	}
	if err := tr.kwargs(true, &g); err != nil {
		return nil, err
	}
	addSpecial := tr.AddSpecialTokens != nil && *tr.AddSpecialTokens
	if addSpecial && (g.ContinueFinalMessage || g.NoGenerationPrompt) {
		// The rendering is cut at a token boundary of the template's own
		// tokens; a BOS added before them is not part of what generation
		// cuts.
		return nil, httpedge.Unsupported("add_special_tokens", "add_special_tokens true beside add_generation_prompt false or continue_final_message is not supported")
	}
	return stream.TokenizePrompt(b, &g, addSpecial)
}

// continuation reads add_generation_prompt and continue_final_message by
// chat's rules (wireRequest.continuation), so /tokenize counts the prompt
// a generation with the same fields is given.
func (tr *tokenizeRequest) continuation(chat bool, g *stream.GenRequest) error {
	wr := wireRequest{wireExtensions: wireExtensions{AddGenerationPrompt: tr.AddGenerationPrompt, ContinueFinalMessage: tr.ContinueFinalMessage}}
	return wr.continuation(chat, g)
}

// kwargs reads chat_template_kwargs by chat's rules, so the ids are the
// prompt a generation with the same kwargs is given: rendered with them,
// and ended for the reasoning they ask for (enable_thinking false).
func (tr *tokenizeRequest) kwargs(chat bool, g *stream.GenRequest) error {
	wr := wireRequest{ChatTemplateKwargs: tr.ChatTemplateKwargs}
	return wr.reasoning(chat, g)
}

func (s *Server) tokenizeBody(w http.ResponseWriter, r *http.Request) (*stream.Backend, *tokenizeRequest, error) {
	b, err := s.edgeEnv().LoadBackend()
	if err != nil {
		return nil, nil, err
	}
	body, err := httpedge.ReadBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return nil, nil, err
	}
	var tr tokenizeRequest
	if err := httpedge.Decode(body, &tr, ""); err != nil {
		return nil, nil, err
	}
	if err := tr.refusals(); err != nil {
		return nil, nil, err
	}
	if err := stream.CheckModel(tr.Model, s.cfg.ModelID, s.cfg.Aliases); err != nil {
		return nil, nil, err
	}
	return b, &tr, nil
}

// handleDetokenize serves POST /detokenize in vLLM's shape: {"tokens"} →
// {"prompt"}. Special tokens are left out, as in generated text.
func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	b, err := s.edgeEnv().LoadBackend()
	if err != nil {
		writeError(w, err)
		return
	}
	body, err := httpedge.ReadBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	var dr struct {
		Model  string  `json:"model"`
		Tokens []int32 `json:"tokens"`
	}
	if err := httpedge.Decode(body, &dr, ""); err != nil {
		writeError(w, err)
		return
	}
	if err := stream.CheckModel(dr.Model, s.cfg.ModelID, s.cfg.Aliases); err != nil {
		writeError(w, err)
		return
	}
	if n := len(dr.Tokens); n > stream.MaxTokenIDs {
		writeError(w, stream.InvalidParam("tokens", "at most %d tokens, got %d", stream.MaxTokenIDs, n))
		return
	}
	vs, ok := b.Tokenizer.(vocabSizer)
	for i, id := range dr.Tokens {
		if id < 0 || (ok && int(id) >= vs.VocabSize()) {
			writeError(w, stream.InvalidParam("tokens", "tokens[%d] = %d is not a token id of this model", i, id))
			return
		}
	}
	dec := b.Tokenizer.NewDetokenizer()
	var text []byte
	for _, id := range dr.Tokens {
		text = append(text, dec.Add(id)...)
	}
	text = append(text, dec.Flush()...)
	writeJSON(w, map[string]string{"prompt": string(text)})
}
