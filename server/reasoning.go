package server

import (
	"encoding/json"
	"slices"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// reasoning reads reasoning_effort and chat_template_kwargs into the
// stream core's reasoning controls. Of the template's keyword arguments
// enable_thinking (Qwen3's and SmolLM3's switch) and reasoning_effort
// (gpt-oss's, which llama.cpp's and vLLM's users pass there) are served,
// the latter as the top-level field, which must then agree; any other is
// refused by name, since the server's template renders without it.
func (wr *wireRequest) reasoning(chat bool, g *stream.GenRequest) error {
	ask := stream.ReasoningAsk{Effort: wr.ReasoningEffort, EffortParam: "reasoning_effort"}
	if len(wr.ChatTemplateKwargs) > 0 && !chat {
		return httpedge.Unsupported("chat_template_kwargs", "chat_template_kwargs applies to chat messages only")
	}
	// A completions prompt goes to the model as written, and its reply is
	// not split into reasoning: there is nothing an effort could set.
	if wr.ReasoningEffort != nil && !chat {
		return httpedge.Unsupported("reasoning_effort", "reasoning_effort applies to chat messages only; a completions prompt is sent as written")
	}
	keys := make([]string, 0, len(wr.ChatTemplateKwargs))
	for k := range wr.ChatTemplateKwargs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		raw := wr.ChatTemplateKwargs[k]
		if k == "reasoning_effort" {
			const param = "chat_template_kwargs.reasoning_effort"
			var effort string
			if err := json.Unmarshal(raw, &effort); err != nil {
				return stream.InvalidParam(param, "%s must be a string", param)
			}
			if ask.Effort != nil && *ask.Effort != effort {
				return stream.InvalidParam(param, "%s %q differs from reasoning_effort %q", param, effort, *ask.Effort)
			}
			ask.Effort, ask.EffortParam = &effort, param
			continue
		}
		if k != "enable_thinking" {
			return httpedge.Unsupported("chat_template_kwargs."+k, "chat_template_kwargs.%s is not supported; enable_thinking and reasoning_effort are", k)
		}
		var on *bool
		if err := json.Unmarshal(raw, &on); err != nil {
			return stream.InvalidParam("chat_template_kwargs.enable_thinking", "chat_template_kwargs.enable_thinking must be a boolean")
		}
		ask.Enabled = on
	}
	return g.SetReasoning(ask)
}
