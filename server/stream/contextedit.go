package stream

import "slices"

// Anthropic's context_management edits, applied for real to the prompt:
// the server renders the conversation, so it is the server that clears.
// clear_tool_uses clears the results (and, asked, the inputs) of the
// oldest tool uses once the prompt reaches its trigger, keeping the most
// recent ones; clear_thinking drops the thinking of earlier assistant turns.
// What was cleared is reported back (ContextEdits.Applied): the tool
// clearings, then the thinking ones.

// ContextEdits are a request's edits; the parser fills them in its order.
type ContextEdits struct {
	Edits []ContextEdit
	// Applied is what each edit cleared, set when the prompt is rendered;
	// an edit that cleared nothing is not listed.
	Applied []AppliedEdit
	done    bool
}

// ContextEdit is one edit. Kind is the wire type.
type ContextEdit struct {
	Kind string // "clear_tool_uses_20250919" or "clear_thinking_20251015"
	// clear_tool_uses: clear once the prompt has Trigger tokens, keep the
	// Keep most recent tool uses, clear only when at least ClearAtLeast
	// tokens go, never clear the tools named in Exclude, and with
	// ClearInputs clear the calls' inputs too.
	Trigger, Keep, ClearAtLeast int
	Exclude                     []string
	ClearInputs                 bool
	// clear_thinking: the thinking turns kept (-1: all); ThinkingTurns is
	// how many assistant turns of the conversation carried thinking (the
	// parser counts them: a turn's thinking is not a ChatMessage field).
	KeepThinking, ThinkingTurns int
}

// AppliedEdit reports one edit's clearing, as Anthropic's
// context_management.applied_edits does.
type AppliedEdit struct {
	Kind                 string
	ClearedToolUses      int
	ClearedThinkingTurns int
	ClearedInputTokens   int
}

// ClearedToolResult stands in for a cleared tool result, so the model
// still sees that the call was answered.
const ClearedToolResult = "[tool result cleared to save context]"

// applyThinking settles the clear_thinking edits, which need no token
// count: past thinking is never rendered into the prompt here (the chat
// templates drop it), so clearing it changes nothing the model reads and
// only the count is reported.
func (e *ContextEdits) applyThinking() {
	for _, ed := range e.Edits {
		if ed.Kind != "clear_thinking_20251015" || ed.KeepThinking < 0 {
			continue
		}
		if n := ed.ThinkingTurns - ed.KeepThinking; n > 0 {
			e.Applied = append(e.Applied, AppliedEdit{Kind: ed.Kind, ClearedThinkingTurns: n})
		}
	}
}

// clearToolUses returns msgs with the results (and, asked, inputs) of all
// but the ed.Keep most recent tool uses cleared, and how many it cleared.
func clearToolUses(msgs []ChatMessage, ed ContextEdit) ([]ChatMessage, int) {
	names := map[string]string{} // call id → tool name
	var order []string           // call ids, oldest first
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Name
			order = append(order, c.ID)
		}
	}
	clear := map[string]bool{}
	if n := len(order) - ed.Keep; n > 0 {
		for _, id := range order[:n] {
			if !slices.Contains(ed.Exclude, names[id]) {
				clear[id] = true
			}
		}
	}
	if len(clear) == 0 {
		return msgs, 0
	}
	out := make([]ChatMessage, len(msgs))
	for i, m := range msgs {
		if m.Role == "tool" && clear[m.ToolCallID] {
			m.Content = ClearedToolResult
		}
		if ed.ClearInputs && len(m.ToolCalls) > 0 {
			calls := slices.Clone(m.ToolCalls)
			for j := range calls {
				if clear[calls[j].ID] {
					calls[j].Arguments = "{}"
				}
			}
			m.ToolCalls = calls
		}
		out[i] = m
	}
	return out, len(clear)
}

// applyContextEdits runs g's edits once, before the prompt is encoded for
// good: encode renders and tokenizes g as it stands.
func applyContextEdits(g *GenRequest, encode func() ([]int32, error)) error {
	e := g.ContextEdits
	if e == nil || e.done || !g.Chat {
		return nil
	}
	e.done = true
	for _, ed := range e.Edits {
		if ed.Kind != "clear_tool_uses_20250919" {
			continue
		}
		before, err := encode()
		if err != nil {
			return err
		}
		if len(before) < ed.Trigger {
			continue
		}
		msgs, n := clearToolUses(g.Messages, ed)
		if n == 0 {
			continue
		}
		kept := g.Messages
		g.Messages = msgs
		after, err := encode()
		if err != nil {
			return err
		}
		freed := len(before) - len(after)
		if freed < max(ed.ClearAtLeast, 1) {
			g.Messages = kept // not worth a cache miss, as Anthropic rules
			continue
		}
		e.Applied = append(e.Applied, AppliedEdit{Kind: ed.Kind, ClearedToolUses: n, ClearedInputTokens: freed})
	}
	e.applyThinking()
	return nil
}
