package server

import (
	"encoding/json"
	"net/http"
	"time"
)

type choiceMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// The reasoning, under both names clients read (absent when none).
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	Reasoning        string         `json:"reasoning,omitempty"`
	ToolCalls        []toolCallJSON `json:"tool_calls,omitempty"` // toolcalls.go
}

type choice struct {
	Index        int            `json:"index"`
	Message      *choiceMessage `json:"message,omitempty"`
	Text         *string        `json:"text,omitempty"`
	Logprobs     any            `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
}

// completionResponse is a non-streaming chat.completion or text_completion.
type completionResponse struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   Usage    `json:"usage"`
}

func completionBody(chat bool, id, model, text, finish string, u Usage) *completionResponse {
	c := choice{FinishReason: finish}
	object := "text_completion"
	if chat {
		object = "chat.completion"
		c.Message = &choiceMessage{Role: "assistant", Content: text}
	} else {
		c.Text = &text
	}
	return &completionResponse{ID: id, Object: object, Created: time.Now().Unix(), Model: model, Choices: []choice{c}, Usage: u}
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
