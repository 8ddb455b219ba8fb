package loader

// The tokenizer side of tool calling (stream.ToolTemplater).

func (a tokAdapter) RenderChat(msgs []map[string]any, tools []any) (string, error) {
	return a.t.ApplyChatTemplateDicts(msgs, tools)
}

func (a tokAdapter) ChatTemplateSource() string { return a.t.ChatTemplate() }
