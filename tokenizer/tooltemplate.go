package tokenizer

import (
	"fmt"

	"github.com/ardanlabs/jinja"
)

// ApplyChatTemplateDicts renders messages given as Hugging Face's message
// dicts (role, content, and for tool turns tool_calls and tool_call_id)
// with tools (OpenAI tool objects; nil: none), the way apply_chat_template
// passes them, with add_generation_prompt set. A template that reads
// neither renders as ApplyChatTemplate would.
func (t *Tokenizer) ApplyChatTemplateDicts(msgs []map[string]any, tools []any) (string, error) {
	if t.template == "" {
		return "", ErrNoChatTemplate
	}
	t.templateOnce.Do(func() { // the same compilation ApplyChatTemplate shares
		t.compiled, t.compileErr = jinja.Compile(t.template)
	})
	if t.compileErr != nil {
		return "", fmt.Errorf("tokenizer: compiling chat template: %w", t.compileErr)
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		list[i] = m
	}
	vars := map[string]any{
		"messages":              list,
		"add_generation_prompt": true,
		"bos_token":             t.bosText,
		"eos_token":             t.eosText,
	}
	if tools != nil {
		vars["tools"] = tools
	}
	out, err := t.compiled.Render(vars)
	if err != nil {
		return "", fmt.Errorf("tokenizer: rendering chat template: %w", err)
	}
	return out, nil
}
