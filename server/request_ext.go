package server

import (
	"bytes"
	"encoding/json"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// wireExtensions are vLLM's extensions to the chat and completions bodies
// that act on the prompt and its logprobs: embedded in wireRequest, so
// encoding/json decodes them as top-level fields and unservedFields counts
// them as declared. They stay raw until extensions reads them: a type
// error of the typed decode would name the field under the embedded
// struct's Go name.
type wireExtensions struct {
	// PromptLogprobs: the logprob of every prompt token and this many
	// alternatives (0 to 20), in the response's prompt_logprobs.
	PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
	// TruncatePromptTokens keeps the prompt's last N tokens; -1 is the
	// model's context (stream.GenRequest.TruncatePromptTokens).
	TruncatePromptTokens json.RawMessage `json:"truncate_prompt_tokens"`
	// AddGenerationPrompt (default true) and ContinueFinalMessage: chat
	// only; false and true continue the final assistant message
	// (stream.GenRequest.ContinueFinalMessage).
	AddGenerationPrompt  json.RawMessage `json:"add_generation_prompt"`
	ContinueFinalMessage json.RawMessage `json:"continue_final_message"`
}

// optBool reads an optional boolean field: nil when absent or null.
func optBool(param string, raw json.RawMessage) (*bool, error) {
	if !httpedge.Present(raw) {
		return nil, nil
	}
	var v bool
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, stream.InvalidParam(param, "%s: expected a boolean, got JSON %s", param, bytes.TrimSpace(raw))
	}
	return &v, nil
}

// continuation reads add_generation_prompt and continue_final_message as
// vLLM does: the generation prompt is on unless turned off, so continuing
// needs it off explicitly; a continued message must be the assistant's;
// off alone, the prompt ends after the final message's turn.
func (wr *wireRequest) continuation(chat bool, g *stream.GenRequest) error {
	add, err := optBool("add_generation_prompt", wr.AddGenerationPrompt)
	if err != nil {
		return err
	}
	cont, err := optBool("continue_final_message", wr.ContinueFinalMessage)
	if err != nil {
		return err
	}
	addOn, contOn := add == nil || *add, cont != nil && *cont
	switch {
	case !chat && (add != nil || cont != nil):
		param := "add_generation_prompt"
		if cont != nil {
			param = "continue_final_message"
		}
		return stream.InvalidParam(param, "%s is a chat field: a completion's prompt is the client's own text", param)
	case contOn && addOn:
		return stream.InvalidParam("continue_final_message", "continue_final_message and add_generation_prompt cannot both be true (add_generation_prompt is true unless set to false)")
	case !addOn && !contOn:
		g.NoGenerationPrompt = true // the prompt ends after the final turn
	case contOn:
		last := len(g.Messages) - 1
		if r := g.Messages[last].Role; r != "assistant" {
			return stream.InvalidParam("continue_final_message", "continue_final_message continues the final message, which must be the assistant's; messages[%d] is %s's", last, r)
		}
		g.ContinueFinalMessage = true
	}
	return nil
}

// optInt reads an optional integer field: nil when absent or null.
func optInt(param string, raw json.RawMessage) (*int, error) {
	if !httpedge.Present(raw) {
		return nil, nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, stream.InvalidParam(param, "%s: expected an integer, got JSON %s", param, bytes.TrimSpace(raw))
	}
	return &n, nil
}

// extensions reads wireExtensions and stream_options.continuous_usage_stats
// into g.
func (wr *wireRequest) extensions(chat bool, g *stream.GenRequest) error {
	if err := wr.continuation(chat, g); err != nil {
		return err
	}
	streaming := wr.Stream != nil && *wr.Stream
	k, err := optInt("prompt_logprobs", wr.PromptLogprobs)
	if err != nil {
		return err
	}
	if k != nil {
		switch {
		case *k == -1:
			return httpedge.Unsupported("prompt_logprobs", "prompt_logprobs -1 (the whole vocabulary) is not supported: at most %d alternatives", engine.MaxTopLogprobs)
		case *k < 0 || *k > engine.MaxTopLogprobs:
			return stream.InvalidParam("prompt_logprobs", "prompt_logprobs must be between 0 and %d, got %d", engine.MaxTopLogprobs, *k)
		case streaming: // vLLM's rule and words: a stream has no place for them
			return stream.InvalidParam("prompt_logprobs", "`prompt_logprobs` are not available when `stream=True`.")
		}
		g.PromptLogprobs, g.PromptTopLogprobs = true, *k
	}
	n, err := optInt("truncate_prompt_tokens", wr.TruncatePromptTokens)
	if err != nil {
		return err
	}
	if n != nil {
		if *n < -1 || *n == 0 {
			return stream.InvalidParam("truncate_prompt_tokens", "truncate_prompt_tokens must be -1 (the model's context) or a positive number of tokens, got %d", *n)
		}
		g.TruncatePromptTokens = *n // checked against the model's context in Prepare
	}
	if o := wr.StreamOptions; o != nil && o.ContinuousUsageStats != nil && *o.ContinuousUsageStats {
		switch {
		case o.IncludeUsage == nil || !*o.IncludeUsage:
			return stream.InvalidParam("stream_options.continuous_usage_stats", "stream_options.continuous_usage_stats needs stream_options.include_usage: true")
		}
		g.ContinuousUsage = true
	}
	return nil
}
