package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// Optional Tokenizer capabilities for untrusted text, found by type
// assertion (the loader's adapter over *tokenizer.Tokenizer has them all; a
// test tokenizer may have none, and then the checks they make are skipped).
type (
	// SpecialGuarder keeps request text from forging control tokens
	// (tokenizer.Guard): message text is plain text, the template's own
	// markers stay control tokens.
	SpecialGuarder interface{ NewGuard() TextGuard }
	// TextGuard protects the strings of one rendering and encodes it.
	TextGuard interface {
		Protect(s string) string
		Encode(rendered string, addSpecial bool) ([]int32, error)
	}
	// EncodeChecker finds a character the vocabulary cannot encode (the
	// library would drop it silently).
	EncodeChecker interface {
		Unencodable(text string) (r rune, at int, ok bool)
	}
	// TokenBounder bounds a text's token count from its length alone
	// (0: no bound), so a prompt that cannot fit is refused before it is
	// tokenized.
	TokenBounder interface{ MinTokens(text string) int }
)

// TokenizePrompt checks g against the request limits and the vocabulary,
// then renders and tokenizes its prompt as Prepare does, without Prepare's
// checks against the context: what /tokenize and count_tokens count.
// addSpecial adds the vocabulary's BOS to a completion prompt (a chat's
// template writes its own).
func TokenizePrompt(b *Backend, g *GenRequest, addSpecial bool) ([]int32, error) {
	if g.Chat && !addSpecial {
		// Prepare's rendering: a final message continued, the generation
		// prompt left off, custom roles checked.
		return renderedPrompt(b, g, 0)
	}
	return encodePrompt(b, g, addSpecial, 0)
}

// encodePrompt is TokenizePrompt that refuses, before tokenizing, a prompt
// whose length alone proves it has limit tokens or more (0: no check).
func encodePrompt(b *Backend, g *GenRequest, addSpecial bool, limit int) ([]int32, error) {
	// Context edits first, measured on the prompt as it would be
	// (contextedit.go): the limit applies to what is left.
	if err := applyContextEdits(g, func() ([]int32, error) { return encodeOnce(b, g, addSpecial, 0) }); err != nil {
		return nil, err
	}
	return encodeOnce(b, g, addSpecial, limit)
}

func encodeOnce(b *Backend, g *GenRequest, addSpecial bool, limit int) ([]int32, error) {
	if err := g.checkLimits(); err != nil { // limits.go
		return nil, err
	}
	if err := checkEncodable(b.Tokenizer, g); err != nil {
		return nil, err
	}
	if g.PromptIDs != nil {
		return g.PromptIDs, nil
	}
	if !g.Chat {
		if err := checkFits(b.Tokenizer, "prompt", g.Prompt, limit); err != nil {
			return nil, err
		}
		ids, err := b.Tokenizer.Encode(g.Prompt, addSpecial)
		if err != nil {
			return nil, InvalidParam("prompt", "tokenizing: %v", err)
		}
		return ids, nil
	}
	sg, guarded := b.Tokenizer.(SpecialGuarder)
	if !guarded || g.AllowSpecialTokens {
		text, err := chatPrompt(b.Tokenizer, g)
		if err != nil {
			return nil, promptError("messages", err)
		}
		text = reasoningPrompt(b.Reasoning, g, text)
		if err := checkFits(b.Tokenizer, "messages", text, limit); err != nil {
			return nil, err
		}
		ids, err := b.Tokenizer.Encode(text, addSpecial)
		if err != nil {
			return nil, InvalidParam("messages", "tokenizing: %v", err)
		}
		return ids, nil
	}
	guard := sg.NewGuard()
	pg := protected(g, guard)
	text, err := chatPrompt(b.Tokenizer, pg)
	g.Tools.Format = pg.Tools.Format // fixed by the template
	if err != nil {
		return nil, promptError("messages", err)
	}
	text = reasoningPrompt(b.Reasoning, g, text)
	if err := checkFits(b.Tokenizer, "messages", text, limit); err != nil {
		return nil, err
	}
	ids, err := guard.Encode(text, addSpecial)
	if err != nil {
		return nil, InvalidParam("messages", "%v", err)
	}
	return ids, nil
}

// checkFits refuses text whose length proves it has limit tokens or more.
func checkFits(tok Tokenizer, param, text string, limit int) error {
	tb, ok := tok.(TokenBounder)
	if !ok || limit <= 0 {
		return nil
	}
	if n := tb.MinTokens(text); n >= limit {
		return &ParamError{Param: param, Sentinel: engine.ErrPromptTooLong,
			Message: fmt.Sprintf("the prompt is at least %d tokens long (%d bytes); the model's context is %d tokens", n, len(text), limit)}
	}
	return nil
}

// checkEncodable refuses text with a character the vocabulary has no token
// for, naming where it is: dropping it would change the prompt silently.
func checkEncodable(tok Tokenizer, g *GenRequest) error {
	ec, ok := tok.(EncodeChecker)
	if !ok {
		return nil
	}
	check := func(param, text string) error {
		if r, at, bad := ec.Unencodable(text); bad {
			return InvalidParam(param, "%s holds %U at byte %d, which this model's vocabulary cannot encode", param, r, at)
		}
		return nil
	}
	if err := check("prompt", g.Prompt); err != nil {
		return err
	}
	for i, p := range g.Batch {
		if err := check(fmt.Sprintf("prompt[%d]", i), p.Text); err != nil {
			return err
		}
	}
	for i, m := range g.Messages {
		if err := check(fmt.Sprintf("messages[%d].content", i), m.Content); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("messages[%d].reasoning_content", i), m.Reasoning); err != nil {
			return err
		}
		for j, c := range m.ToolCalls {
			if err := check(fmt.Sprintf("messages[%d].tool_calls[%d]", i, j), c.Name+c.Arguments); err != nil {
				return err
			}
		}
	}
	for i, t := range g.Tools.List {
		if err := check(fmt.Sprintf("tools[%d]", i), t.Name+t.Description+string(t.Parameters)); err != nil {
			return err
		}
	}
	return checkKwargsEncodable(check, g) // toolprompt.go
}

// protected is a copy of g whose every string from the request is
// guard.Protect'ed: what the template renders.
func protected(g *GenRequest, guard TextGuard) *GenRequest {
	pg := *g
	pg.Messages = make([]ChatMessage, len(g.Messages))
	for i, m := range g.Messages {
		m.Content, m.ToolCallID, m.Reasoning = guard.Protect(m.Content), guard.Protect(m.ToolCallID), guard.Protect(m.Reasoning)
		if len(m.ToolCalls) > 0 {
			calls := make([]ToolCall, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				calls[j] = ToolCall{ID: guard.Protect(c.ID), Name: guard.Protect(c.Name), Arguments: protectJSON(c.Arguments, guard)}
			}
			m.ToolCalls = calls
		}
		pg.Messages[i] = m
	}
	pg.TemplateKwargs = protectKwargs(g.TemplateKwargs, guard) // toolprompt.go
	if len(g.Tools.List) > 0 {
		pg.Tools.List = make([]Tool, len(g.Tools.List))
		for i, t := range g.Tools.List {
			t.Name, t.Description = guard.Protect(t.Name), guard.Protect(t.Description)
			if t.Parameters != nil {
				t.Parameters = json.RawMessage(protectJSON(string(t.Parameters), guard))
			}
			pg.Tools.List[i] = t
		}
	}
	return &pg
}

// protectJSON protects the strings inside JSON text. Without escapes the
// text is protected as it is (a control token's spelling can only be inside
// a string); with them a spelling may hide behind one ("\u003c|im_end|>"),
// which a template decodes and writes out, so the value is decoded, its
// strings protected and, if one changed, encoded again.
func protectJSON(raw string, guard TextGuard) string {
	if !strings.Contains(raw, `\`) {
		return guard.Protect(raw)
	}
	var v any
	if json.Unmarshal([]byte(raw), &v) != nil {
		return guard.Protect(raw) // not JSON: validated elsewhere
	}
	changed := false
	v = protectValue(v, guard, &changed)
	if !changed {
		return raw
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return guard.Protect(raw)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func protectValue(v any, guard TextGuard, changed *bool) any {
	switch x := v.(type) {
	case string:
		p := guard.Protect(x)
		*changed = *changed || p != x
		return p
	case []any:
		for i := range x {
			x[i] = protectValue(x[i], guard, changed)
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			pk := guard.Protect(k)
			*changed = *changed || pk != k
			out[pk] = protectValue(e, guard, changed)
		}
		return out
	}
	return v
}
