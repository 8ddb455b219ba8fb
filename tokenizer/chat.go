package tokenizer

import (
	"errors"
	"fmt"

	"github.com/ardanlabs/jinja"
)

// ErrNoChatTemplate reports a chat request for a model that ships no template
// (a base model). Its text is what a client reads in the 400 it gets.
var ErrNoChatTemplate = errors.New("the model has no chat template (a base model): use /v1/completions, " +
	"or start the server with --chat-template FILE or a built-in (chatml, gemma, llama3)")

// Message is one turn of a conversation.
type Message struct {
	Role    string // "system", "user", "assistant", ...
	Content string
}

// ApplyChatTemplate renders msgs with the model's chat template into the
// prompt text the model was trained on. With addGenerationPrompt the text ends
// with the header of an assistant turn, ready for the model to continue. The
// template sees the variables Hugging Face's apply_chat_template passes:
// messages, add_generation_prompt, bos_token, eos_token, and the functions
// raise_exception and strftime_now.
//
// The result usually starts with special tokens written as text; encode it
// with Encode(prompt, false) when the template already writes BOS.
func (t *Tokenizer) ApplyChatTemplate(msgs []Message, addGenerationPrompt bool) (string, error) {
	if t.template == "" {
		return "", ErrNoChatTemplate
	}
	t.templateOnce.Do(func() {
		t.compiled, t.compileErr = jinja.Compile(t.template)
	})
	if t.compileErr != nil {
		return "", fmt.Errorf("tokenizer: compiling chat template: %w", t.compileErr)
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		list[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	out, err := t.compiled.Render(map[string]any{
		"messages":              list,
		"add_generation_prompt": addGenerationPrompt,
		"bos_token":             t.bosText,
		"eos_token":             t.eosText,
	})
	if err != nil {
		return "", fmt.Errorf("tokenizer: rendering chat template: %w", err)
	}
	return out, nil
}

// GenerationPrompt is the text the template appends for
// add_generation_prompt (the header of the assistant's turn), found as
// the difference between a one-message chat rendered with and without it.
// A template whose rendering with it does not extend the one without it
// (or that renders nothing different) has none to take off: an error.
func (t *Tokenizer) GenerationPrompt() (string, error) {
	probe := []Message{{Role: "user", Content: "x"}}
	with, err := t.ApplyChatTemplate(probe, true)
	if err != nil {
		return "", err
	}
	without, err := t.ApplyChatTemplate(probe, false)
	if err != nil {
		return "", err
	}
	if len(with) <= len(without) || with[:len(without)] != without {
		return "", errors.New("tokenizer: the chat template's generation prompt is not a suffix of its rendering")
	}
	return with[len(without):], nil
}
