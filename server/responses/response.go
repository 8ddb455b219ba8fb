package responses

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// response is the Response object, as the SDKs read it. Fields the
// request set are echoed. Output holds *message and *functionCall items in
// the order the reply made them.
type response struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Error              *responseError    `json:"error"`
	IncompleteDetails  *incomplete       `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []any             `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	ToolChoice         any               `json:"tool_choice"`
	Tools              json.RawMessage   `json:"tools"`
	Text               map[string]any    `json:"text"`
	Truncation         string            `json:"truncation"`
	Store              bool              `json:"store"`
	Metadata           map[string]string `json:"metadata"`
	User               *string           `json:"user"`
	Usage              *usage            `json:"usage"`
	Reasoning          *reasoningConfig  `json:"reasoning,omitempty"`
	// SluiceWarnings says what of the request was left out (hosted tools
	// nothing here runs); absent when nothing was.
	SluiceWarnings []string `json:"sluice_warnings,omitempty"`

	inputTokens int
	ns          map[string]nsName // namespace tools by qualified name
	// sealReasoning: include asked for reasoning.encrypted_content.
	sealReasoning bool
	items         int    // output items made, for their ids
	tenant        string // whose request made it (auth.Tenant); its store entry is theirs
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incomplete struct {
	Reason string `json:"reason"`
}

type message struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`

	text []byte // the text so far; Content holds it once the item is done
}

// functionCall is a function_call output item: a call the model made.
type functionCall struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"` // a namespace tool's (tools.go)
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

func newText(s string) outputText {
	return outputText{Type: "output_text", Text: s, Annotations: []any{}, Logprobs: []any{}}
}

type usage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

// newResponse is the response in progress, before any output.
func newResponse(id, model string, wr *wireRequest, g *stream.GenRequest, inputTokens int) *response {
	r := &response{
		ID: id, Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
		Instructions: wr.Instructions, MaxOutputTokens: wr.MaxOutputTokens, Model: model,
		Output: []any{}, ParallelToolCalls: true, PreviousResponseID: wr.PreviousResponseID,
		Temperature: wr.Temperature, TopP: wr.TopP, ToolChoice: "auto", Tools: json.RawMessage("[]"),
		Text:       map[string]any{"format": map[string]string{"type": "text"}},
		Truncation: "disabled", Store: wr.Store == nil || *wr.Store, Metadata: wr.Metadata, User: wr.User,
		inputTokens: inputTokens,
	}
	if t := g.Tools; len(t.List) > 0 {
		r.Tools, r.ParallelToolCalls, r.ToolChoice = wr.Tools, t.Parallel, t.Choice
		if t.Choice == stream.ToolChoiceFunction {
			r.ToolChoice = map[string]string{"type": "function", "name": t.Function}
		}
	}
	if wr.Text != nil && httpedge.Present(wr.Text.Format) {
		r.Text["format"] = wr.Text.Format
	}
	if r.Metadata == nil {
		r.Metadata = map[string]string{}
	}
	return r
}

// newMessage adds an empty message item to the output.
func (r *response) newMessage() *message {
	id := "msg_" + r.ID[len("resp_"):]
	if r.items > 0 { // the first keeps the id a response without tools always had
		id = fmt.Sprintf("%s_%d", id, r.items)
	}
	m := &message{Type: "message", ID: id, Status: "in_progress", Role: "assistant", Content: []outputText{}}
	r.items++
	r.Output = append(r.Output, m)
	return m
}

// newCall adds a function_call item to the output.
func (r *response) newCall(d stream.ToolCallDelta) *functionCall {
	c := &functionCall{Type: "function_call", ID: fmt.Sprintf("fc_%s_%d", r.ID[len("resp_"):], r.items),
		CallID: d.ID, Name: d.Name, Status: "in_progress"}
	if n, ok := r.ns[d.Name]; ok {
		c.Name, c.Namespace = n.name, n.namespace
	}
	r.items++
	r.Output = append(r.Output, c)
	return c
}

// complete settles a finished response, local or relayed, from its finish
// and its token counts (the local stream's, or the upstream's): completed,
// or incomplete when the token limit (max_output_tokens, or the context)
// cut it. A reply with no item at all still has its (empty) message.
func (r *response) complete(finish string, n stream.Ending) {
	r.Status = "completed"
	if finish == "length" {
		r.Status, r.IncompleteDetails = "incomplete", &incomplete{Reason: "max_output_tokens"}
	}
	r.settle(r.Status)
	r.Usage = &usage{
		InputTokens: n.PromptTokens, InputTokensDetails: map[string]int{"cached_tokens": n.CachedTokens},
		OutputTokens: n.CompletionTokens, OutputTokensDetails: map[string]int{"reasoning_tokens": n.ReasoningTokens},
		TotalTokens: n.PromptTokens + n.CompletionTokens,
	}
}

// settle gives every item its final status and every message its text.
func (r *response) settle(status string) {
	if len(r.Output) == 0 {
		r.newMessage()
	}
	for _, it := range r.Output {
		switch it := it.(type) {
		case *message:
			it.Status, it.Content = status, []outputText{newText(string(it.text))}
		case *functionCall:
			it.Status = status
		case *reasoningItem:
			it.settle(r, status)
		}
	}
}

// fail marks the response failed, keeping the output sent before the error.
func (r *response) fail(code, msg string) {
	r.Status, r.Error = "failed", &responseError{Code: code, Message: msg}
	r.settle("incomplete")
}

// turn is the response as the assistant turn of the conversation that
// previous_response_id continues: its text and its calls.
func (r *response) turn() stream.ChatMessage {
	m := stream.ChatMessage{Role: "assistant"}
	var text []byte
	for _, it := range r.Output {
		switch it := it.(type) {
		case *message:
			text = append(text, it.text...)
		case *reasoningItem:
			m.Reasoning += string(it.text)
		case *functionCall:
			args := it.Arguments
			if args == "" {
				args = "{}"
			}
			m.ToolCalls = append(m.ToolCalls, stream.ToolCall{ID: it.CallID, Name: it.Name, Arguments: args})
		}
	}
	m.Content = string(text)
	return m
}
