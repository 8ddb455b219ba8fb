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
	return t.RenderChatTemplate(msgs, tools, true, nil)
}

// RenderChatTemplate is ApplyChatTemplateDicts with add_generation_prompt
// as given and kwargs, a request's chat_template_kwargs, added to the
// template's variables as apply_chat_template adds its keyword arguments
// (values as encoding/json decodes them; json.Number keeps an integer an
// integer). The variables the renderer sets itself win over a kwarg of the
// same name: a caller that means to refuse such a kwarg checks it first
// (the server does, naming it).
func (t *Tokenizer) RenderChatTemplate(msgs []map[string]any, tools []any, addGenerationPrompt bool, kwargs map[string]any) (string, error) {
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
	vars := make(map[string]any, len(kwargs)+5)
	for k, v := range kwargs {
		vars[k] = v
	}
	vars["messages"] = list
	vars["add_generation_prompt"] = addGenerationPrompt
	vars["bos_token"] = t.bosText
	vars["eos_token"] = t.eosText
	if tools != nil {
		vars["tools"] = tools
	} else {
		delete(vars, "tools")
	}
	out, err := t.compiled.Render(vars)
	if err != nil {
		return "", fmt.Errorf("tokenizer: rendering chat template: %w", err)
	}
	return out, nil
}
