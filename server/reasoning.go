package server

import (
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// reasoning reads reasoning_effort and chat_template_kwargs into the
// stream core's reasoning controls and the template's variables. Every
// kwarg goes to the chat template, as vLLM and llama-server pass them
// (stream.GenRequest.SetTemplateKwargs refuses a name the server sets
// itself). Two also steer the reasoning on any model: enable_thinking
// (Qwen3's and SmolLM3's switch) and reasoning_effort (gpt-oss's, which
// llama.cpp's and vLLM's users pass there), the latter as the top-level
// field, which must then agree.
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
	if err := g.SetTemplateKwargs("chat_template_kwargs", wr.ChatTemplateKwargs); err != nil {
		return err
	}
	if err := stream.KwargsReasoning("chat_template_kwargs", wr.ChatTemplateKwargs, &ask); err != nil {
		return err
	}
	return g.SetReasoning(ask)
}
