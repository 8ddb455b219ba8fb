package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The built-ins render each family's markup; expected strings written out by
// hand from the families' published formats.
func TestBuiltinTemplates(t *testing.T) {
	sys := Message{"system", "You are terse."}
	u1 := Message{"user", "Hi!"}
	a1 := Message{"assistant", "Hello."}
	u2 := Message{"user", "  Name a river.\n"}
	tests := []struct {
		name     string
		bos, eos string
		msgs     []Message
		want     string
	}{
		{"chatml", "", "<|im_end|>", []Message{sys, u1},
			"<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"},
		{"gemma", "<bos>", "<eos>", []Message{u1, a1, u2},
			"<bos><start_of_turn>user\nHi!<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n" +
				"<start_of_turn>user\nName a river.<end_of_turn>\n<start_of_turn>model\n"},
		{"gemma", "<bos>", "<eos>", []Message{sys, u1, a1, u2},
			"<bos><start_of_turn>user\nYou are terse.\n\nHi!<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n" +
				"<start_of_turn>user\nName a river.<end_of_turn>\n<start_of_turn>model\n"},
		{"llama3", "<|begin_of_text|>", "<|eot_id|>", []Message{sys, u1},
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
	}
	for _, tc := range tests {
		src, err := ChatTemplate(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		tok := &Tokenizer{bosText: tc.bos, eosText: tc.eos}
		if tok.HasChatTemplate() {
			t.Fatal("a tokenizer without a template claims one")
		}
		if _, err := tok.ApplyChatTemplate(tc.msgs, true); !errors.Is(err, ErrNoChatTemplate) {
			t.Fatalf("before SetChatTemplate: err = %v, want ErrNoChatTemplate", err)
		}
		tok.SetChatTemplate(src)
		got, err := tok.ApplyChatTemplate(tc.msgs, true)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestChatTemplateArgument(t *testing.T) {
	for _, name := range BuiltinTemplates() {
		if !strings.Contains(ErrNoChatTemplate.Error(), name) {
			t.Errorf("ErrNoChatTemplate does not name the built-in %q", name)
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "t.jinja")
	if err := os.WriteFile(file, []byte("{{ messages[0]['content'] }}!"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := ChatTemplate(file)
	if err != nil {
		t.Fatal(err)
	}
	tok := &Tokenizer{}
	tok.SetChatTemplate(src)
	if got, err := tok.ApplyChatTemplate([]Message{{"user", "hey"}}, true); err != nil || got != "hey!" {
		t.Errorf("file template: %q, %v", got, err)
	}
	broken := filepath.Join(dir, "broken.jinja")
	if err := os.WriteFile(broken, []byte("{% for m in messages %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ChatTemplate(broken); err == nil {
		t.Error("a template with an unclosed for compiled")
	}
	if _, err := ChatTemplate(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "chatml") {
		t.Errorf("missing file: %v (want an error listing the built-ins)", err)
	}
}
