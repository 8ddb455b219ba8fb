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
// into g. What the several-choices adapter (choices.go) does not frame is
// refused there rather than left out of its response.
func (wr *wireRequest) extensions(chat bool, g *stream.GenRequest) error {
	streaming := wr.Stream != nil && *wr.Stream
	several := wr.N != nil && *wr.N > 1 || len(g.Batch) > 0
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
		case several:
			return httpedge.Unsupported("prompt_logprobs", "prompt_logprobs with several choices (n > 1 or a list of prompts) is not supported")
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
		case several:
			return httpedge.Unsupported("stream_options.continuous_usage_stats", "stream_options.continuous_usage_stats with several choices (n > 1 or a list of prompts) is not supported")
		}
		g.ContinuousUsage = true
	}
	return nil
}

// echoLogprobs checks completions' echo beside logprobs: the prompt's
// tokens and logprobs precede the completion's (Prepare asks the engine for
// them), which only a single choice's framer writes.
func (wr *wireRequest) echoLogprobs(g *stream.GenRequest) error {
	if wr.N != nil && *wr.N > 1 || len(g.Batch) > 0 {
		return httpedge.Unsupported("echo", "echo with logprobs and several choices (n > 1 or a list of prompts) is not supported")
	}
	return nil
}
