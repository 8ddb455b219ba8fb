package tokenizer

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRenderChatTemplateKwargs: kwargs are template variables beside the
// renderer's own, JSON numbers keep integers integers, and a kwarg cannot
// replace what the renderer sets (messages, add_generation_prompt,
// bos_token, tools even when no tools are given).
func TestRenderChatTemplateKwargs(t *testing.T) {
	tok := &Tokenizer{bosText: "<s>", template: "{{ bos_token }}{{ messages | length }} {{ flag }} {{ n }} {{ big }} " +
		"{{ add_generation_prompt }} {{ tools is defined }} {{ cfg.k | tojson }}"}
	var big any
	d := json.NewDecoder(strings.NewReader("9007199254740993"))
	d.UseNumber()
	if err := d.Decode(&big); err != nil {
		t.Fatal(err)
	}
	kw := map[string]any{
		"flag": "on", "n": json.Number("3"), "big": big, "cfg": map[string]any{"k": []any{true, nil}},
		"messages": []any{}, "add_generation_prompt": true, "bos_token": "X", "tools": []any{1},
	}
	got, err := tok.RenderChatTemplate([]map[string]any{{"role": "user", "content": "hi"}}, nil, false, kw)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<s>1 on 3 9007199254740993 False False [true, null]"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	plain, err := tok.ApplyChatTemplateDicts([]map[string]any{{"role": "user", "content": "hi"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<s>1    True False null"; plain != want {
		t.Errorf("without kwargs: %q, want %q", plain, want)
	}
}
