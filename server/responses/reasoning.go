package responses

import (
	"fmt"
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

// reasoningItem is a reasoning output item: the model's reasoning as its
// content (reasoning_text, as open-weight servers give it), as its summary
// when reasoning.summary asked for one (the reasoning itself: no second
// model summarizes it), and sealed as encrypted_content when include
// asked (httpedge.Seal), for a stateless client to send back.
type reasoningItem struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	Status           string          `json:"status"`
	Summary          []reasoningPart `json:"summary"`
	Content          []reasoningPart `json:"content"`
	EncryptedContent *string         `json:"encrypted_content,omitempty"`

	text []byte
}

type reasoningPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// summarized reports whether the request asked for a reasoning summary.
func (r *response) summarized() bool {
	rc := r.Reasoning
	if rc == nil {
		return false
	}
	s := rc.Summary
	if s == nil {
		s = rc.GenerateSummary
	}
	return s != nil && *s != "none"
}

// newReasoning adds an empty reasoning item to the output.
func (r *response) newReasoning() *reasoningItem {
	it := &reasoningItem{Type: "reasoning", ID: fmt.Sprintf("rs_%s_%d", r.ID[len("resp_"):], r.items), Status: "in_progress",
		Summary: []reasoningPart{}, Content: []reasoningPart{}}
	r.items++
	r.Output = append(r.Output, it)
	return it
}

// settle fills in the item's parts from its text.
func (it *reasoningItem) settle(r *response, status string) {
	it.Status = status
	text := string(it.text)
	it.Content = []reasoningPart{{Type: "reasoning_text", Text: text}}
	if r.summarized() {
		it.Summary = []reasoningPart{{Type: "summary_text", Text: text}}
	}
	if r.sealReasoning && it.EncryptedContent == nil {
		s := httpedge.Seal(text)
		it.EncryptedContent = &s
	}
}

// Reasoning implements stream.ReasoningEmitter: a reasoning item opens with
// the reply, its text in reasoning_text.delta events (and
// reasoning_summary_text.delta when a summary was asked for).
func (e *emitter) Reasoning(text string) error {
	if text == "" {
		return e.err()
	}
	it := e.reasoning()
	it.text = append(it.text, text...)
	e.event("response.reasoning_text.delta", map[string]any{"output_index": e.index, "content_index": 0,
		"item_id": it.ID, "delta": text})
	if e.resp.summarized() {
		e.event("response.reasoning_summary_text.delta", map[string]any{"output_index": e.index, "summary_index": 0,
			"item_id": it.ID, "delta": text})
	}
	return e.err()
}

// reasoning is the open reasoning item, opened (its added events written)
// unless it is.
func (e *emitter) reasoning() *reasoningItem {
	if it, ok := e.open.(*reasoningItem); ok {
		return it
	}
	e.closeOpen("completed")
	it := e.resp.newReasoning()
	e.open, e.index = it, len(e.resp.Output)-1
	e.event("response.output_item.added", map[string]any{"output_index": e.index, "item": it})
	if e.resp.summarized() {
		e.event("response.reasoning_summary_part.added", map[string]any{"output_index": e.index, "summary_index": 0,
			"item_id": it.ID, "part": reasoningPart{Type: "summary_text"}})
	}
	return it
}

// closeReasoning writes the done events of a reasoning item.
func (e *emitter) closeReasoning(it *reasoningItem, status string) {
	it.settle(e.resp, status)
	e.event("response.reasoning_text.done", map[string]any{"output_index": e.index, "content_index": 0,
		"item_id": it.ID, "text": string(it.text)})
	if e.resp.summarized() {
		e.event("response.reasoning_summary_text.done", map[string]any{"output_index": e.index, "summary_index": 0,
			"item_id": it.ID, "text": string(it.text)})
		e.event("response.reasoning_summary_part.done", map[string]any{"output_index": e.index, "summary_index": 0,
			"item_id": it.ID, "part": it.Summary[0]})
	}
	e.event("response.output_item.done", map[string]any{"output_index": e.index, "item": it})
}
