package responses

import (
	"time"

	"github.com/sluicehq/sluice/server/stream"
)

// response is the Response object, as the SDKs read it. Fields the
// request set are echoed; the tool fields say what this server does (no
// tools, text output).
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
	Output             []message         `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	ToolChoice         string            `json:"tool_choice"`
	Tools              []any             `json:"tools"`
	Text               map[string]any    `json:"text"`
	Truncation         string            `json:"truncation"`
	Store              bool              `json:"store"`
	Metadata           map[string]string `json:"metadata"`
	User               *string           `json:"user"`
	Usage              *usage            `json:"usage"`

	inputTokens int
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
func newResponse(id, model string, wr *wireRequest, inputTokens int) *response {
	r := &response{
		ID: id, Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
		Instructions: wr.Instructions, MaxOutputTokens: wr.MaxOutputTokens, Model: model,
		Output:            []message{{Type: "message", ID: "msg_" + id[len("resp_"):], Status: "in_progress", Role: "assistant", Content: []outputText{}}},
		ParallelToolCalls: true, PreviousResponseID: wr.PreviousResponseID,
		Temperature: wr.Temperature, TopP: wr.TopP, ToolChoice: "auto", Tools: []any{},
		Text:       map[string]any{"format": map[string]string{"type": "text"}},
		Truncation: "disabled", Store: wr.Store == nil || *wr.Store, Metadata: wr.Metadata, User: wr.User,
		inputTokens: inputTokens,
	}
	if r.Metadata == nil {
		r.Metadata = map[string]string{}
	}
	return r
}

// end fills in the output: completed, or incomplete when the token limit
// (max_output_tokens, or the context) cut it.
func (r *response) end(out stream.Outcome, ts *stream.TextStream, text string) {
	r.Status = "completed"
	if out.Finish == "length" {
		r.Status, r.IncompleteDetails = "incomplete", &incomplete{Reason: "max_output_tokens"}
	}
	r.Output[0].Status = r.Status
	r.Output[0].Content = []outputText{newText(text)}
	n := len(ts.IDs())
	r.Usage = &usage{
		InputTokens: r.inputTokens, InputTokensDetails: map[string]int{"cached_tokens": out.Result.CachedTokens},
		OutputTokens: n, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}, TotalTokens: r.inputTokens + n,
	}
}

// fail marks the response failed, keeping the text sent before the error.
func (r *response) fail(code, msg, text string) {
	r.Status, r.Error = "failed", &responseError{Code: code, Message: msg}
	r.Output[0].Status = "incomplete"
	r.Output[0].Content = []outputText{newText(text)}
}

func (r *response) text() string {
	if len(r.Output[0].Content) == 0 {
		return ""
	}
	return r.Output[0].Content[0].Text
}
