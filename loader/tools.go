package loader

// The tokenizer side of tool calling (stream.ToolTemplater).

func (a tokAdapter) RenderChat(msgs []map[string]any, tools []any) (string, error) {
	return a.t.ApplyChatTemplateDicts(msgs, tools)
}

func (a tokAdapter) ChatTemplateSource() string { return a.t.ChatTemplate() }

// RenderChatKwargs renders with a request's chat_template_kwargs
// (stream.KwargsTemplater).
func (a tokAdapter) RenderChatKwargs(msgs []map[string]any, tools []any, addGenerationPrompt bool, kwargs map[string]any) (string, error) {
	return a.t.RenderChatTemplate(msgs, tools, addGenerationPrompt, kwargs)
}
