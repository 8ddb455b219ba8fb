package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readTemplate(tb testing.TB, name string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "tokenizer", "templates", name))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// The expected strings are what Python's Jinja2 renders for the same
// template and messages (transformers' apply_chat_template), written out by
// hand so a rendering difference shows as a diff.
func TestApplyChatTemplate(t *testing.T) {
	sys := Message{"system", "You are terse."}
	u1 := Message{"user", "Hi!"}
	a1 := Message{"assistant", "Hello. How can I help?"}
	u2 := Message{"user", "  Name a river.\n"}
	tests := []struct {
		template string
		bos, eos string
		msgs     []Message
		addGen   bool
		want     string
	}{
		{"smollm2.jinja", "<|im_start|>", "<|im_end|>", []Message{u1}, true,
			"<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n" +
				"<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"},
		{"smollm2.jinja", "<|im_start|>", "<|im_end|>", []Message{sys, u1, a1, u2}, false,
			"<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n" +
				"<|im_start|>assistant\nHello. How can I help?<|im_end|>\n<|im_start|>user\n  Name a river.\n<|im_end|>\n"},
		{"qwen2.jinja", "", "<|im_end|>", []Message{u1, a1, u2}, true,
			"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n" +
				"<|im_start|>assistant\nHello. How can I help?<|im_end|>\n<|im_start|>user\n  Name a river.\n<|im_end|>\n" +
				"<|im_start|>assistant\n"},
		{"qwen2.jinja", "", "<|im_end|>", []Message{sys, u1}, false,
			"<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"},
		{"llama3.jinja", "<|begin_of_text|>", "<|eot_id|>", []Message{sys, u1}, true,
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"llama3.jinja", "<|begin_of_text|>", "<|eot_id|>", []Message{u1, a1, u2}, false,
			"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\nHello. How can I help?<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nName a river.<|eot_id|>"},
		{"mistral.jinja", "<s>", "</s>", []Message{u1, a1, u2}, true,
			"<s>[INST] Hi! [/INST]Hello. How can I help?</s>[INST]   Name a river.\n [/INST]"},
		{"mistral.jinja", "<s>", "</s>", []Message{u1}, false, "<s>[INST] Hi! [/INST]"},
		{"gemma.jinja", "<bos>", "<eos>", []Message{u1, a1, u2}, true,
			"<bos><start_of_turn>user\nHi!<end_of_turn>\n<start_of_turn>model\nHello. How can I help?<end_of_turn>\n" +
				"<start_of_turn>user\nName a river.<end_of_turn>\n<start_of_turn>model\n"},
		{"llama2.jinja", "<s>", "</s>", []Message{sys, u1, a1, u2}, false,
			"<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi! [/INST] Hello. How can I help? </s><s>[INST] Name a river. [/INST]"},
		{"llama2.jinja", "<s>", "</s>", []Message{u1}, true, "<s>[INST] Hi! [/INST]"},
		{"phi3.jinja", "<s>", "<|endoftext|>", []Message{sys, u1}, true,
			"<|system|>\nYou are terse.<|end|>\n<|user|>\nHi!<|end|>\n<|assistant|>\n"},
		{"phi3.jinja", "<s>", "<|endoftext|>", []Message{u1, a1}, false,
			"<|user|>\nHi!<|end|>\n<|assistant|>\nHello. How can I help?<|end|>\n<|endoftext|>"},
		// Llama 3.2 writes today's date through strftime_now ({date} below).
		{"llama3.2.jinja", "<|begin_of_text|>", "<|eot_id|>", []Message{sys, u1, a1, u2}, true,
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n" +
				"Today Date: {date}\n\nYou are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\nHello. How can I help?<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nName a river.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"llama3.2.jinja", "<|begin_of_text|>", "<|eot_id|>", []Message{u1}, false,
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n" +
				"Today Date: {date}\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"},
	}
	for _, tt := range tests {
		tok := &Tokenizer{template: readTemplate(t, tt.template), bosText: tt.bos, eosText: tt.eos}
		before := time.Now().Format("02 Jan 2006")
		got, err := tok.ApplyChatTemplate(tt.msgs, tt.addGen)
		if err != nil {
			t.Errorf("%s %v: %v", tt.template, tt.msgs, err)
			continue
		}
		if after := time.Now().Format("02 Jan 2006"); after != before && strings.Contains(got, after) {
			before = after // rendered just after midnight
		}
		if tt.want = strings.ReplaceAll(tt.want, "{date}", before); got != tt.want {
			t.Errorf("%s %v addGen=%v:\n got %q\nwant %q", tt.template, tt.msgs, tt.addGen, got, tt.want)
		}
	}
}

func TestApplyChatTemplateErrors(t *testing.T) {
	mistral := &Tokenizer{template: readTemplate(t, "mistral.jinja"), bosText: "<s>", eosText: "</s>"}
	// raise_exception must surface as an error carrying the template's message.
	_, err := mistral.ApplyChatTemplate([]Message{{"system", "x"}, {"user", "y"}}, true)
	if err == nil || !strings.Contains(err.Error(), "Conversation roles must alternate") {
		t.Errorf("system message on Mistral: err = %v, want the template's raise_exception", err)
	}
	gemma := &Tokenizer{template: readTemplate(t, "gemma.jinja")}
	_, err = gemma.ApplyChatTemplate([]Message{{"system", "x"}, {"user", "y"}}, true)
	if err == nil || !strings.Contains(err.Error(), "System role not supported") {
		t.Errorf("system message on Gemma: err = %v", err)
	}
	if _, err := (&Tokenizer{}).ApplyChatTemplate([]Message{{"user", "y"}}, true); !errors.Is(err, ErrNoChatTemplate) {
		t.Errorf("no template: err = %v, want ErrNoChatTemplate", err)
	}
	if _, err := (&Tokenizer{template: "{% for %}"}).ApplyChatTemplate(nil, true); err == nil {
		t.Error("malformed template rendered without error")
	}
}

// The template of the GGUF vocabulary reaches ApplyChatTemplate, with
// bos_token and eos_token taken from the vocabulary's ids.
func TestChatTemplateFromVocab(t *testing.T) {
	tok := newTiny(t, func(v *Vocab) { v.ChatTemplate = "{{ bos_token }}|{{ messages[0].content }}|{{ eos_token }}" })
	got, err := tok.ApplyChatTemplate([]Message{{"user", "x"}}, false)
	if want := "<|im_start|>|x|<|im_end|>"; err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}
