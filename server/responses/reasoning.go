package responses

import (
	"slices"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// reasoningConfig is the request's reasoning, echoed in the response:
// effort is the stream core's reasoning budget (stream.SetReasoning);
// summary asks for the reasoning's summary, which here is the reasoning
// itself (a model's own thinking, not a second model's summary of it).
type reasoningConfig struct {
	Effort          *string `json:"effort"`
	Summary         *string `json:"summary"`
	GenerateSummary *string `json:"generate_summary,omitempty"`
}

func setReasoning(g *stream.GenRequest, rc *reasoningConfig) error {
	if rc == nil {
		return nil
	}
	for _, f := range []struct {
		param string
		v     *string
	}{{"reasoning.summary", rc.Summary}, {"reasoning.generate_summary", rc.GenerateSummary}} {
		if f.v != nil && !slices.Contains([]string{"auto", "concise", "detailed", "none"}, *f.v) {
			return stream.InvalidParam(f.param, "%s must be auto, concise, detailed or none, got %q", f.param, *f.v)
		}
	}
	return g.SetReasoning(stream.ReasoningAsk{Effort: rc.Effort, EffortParam: "reasoning.effort"})
}

// includable are the include values: what Sluice adds (a reasoning item's
// encrypted_content), and the outputs of items it never makes (hosted
// tools' results, input images), which hold vacuously.
var includable = []string{
	"reasoning.encrypted_content",
	"web_search_call.action.sources", "web_search_call.results", "file_search_call.results",
	"code_interpreter_call.outputs", "computer_call_output.output.image_url", "message.input_image.image_url",
}

func checkInclude(include []string) error {
	for _, v := range include {
		switch {
		case v == "message.output_text.logprobs":
			return httpedge.Unsupported("include", "include %q is not supported: the Responses API here has no logprobs yet", v)
		case !slices.Contains(includable, v):
			return stream.InvalidParam("include", "include %q is not one of %v", v, append(slices.Clone(includable), "message.output_text.logprobs"))
		}
	}
	return nil
}
