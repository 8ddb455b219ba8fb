package tokenizer

import "testing"

// GenerationPrompt is the header of the assistant's turn each built-in
// family appends; a template whose generation prompt is not at the end has
// none to take off.
func TestGenerationPrompt(t *testing.T) {
	for name, want := range map[string]string{
		"chatml": "<|im_start|>assistant\n",
		"gemma":  "<start_of_turn>model\n",
		"llama3": "<|start_header_id|>assistant<|end_header_id|>\n\n",
	} {
		src, err := ChatTemplate(name)
		if err != nil {
			t.Fatal(err)
		}
		tok := &Tokenizer{bosText: "<s>", eosText: "</s>"}
		tok.SetChatTemplate(src)
		if got, err := tok.GenerationPrompt(); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	tok := &Tokenizer{}
	tok.SetChatTemplate("{% if add_generation_prompt %}A: {% endif %}{% for m in messages %}{{ m.content }}{% endfor %}")
	if got, err := tok.GenerationPrompt(); err == nil {
		t.Errorf("a generation prompt before the messages: %q, want an error", got)
	}
}
