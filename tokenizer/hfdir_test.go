package tokenizer

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeHFDir writes the tiny vocabulary as a Hugging Face directory, with the
// config files in the less common of their accepted shapes.
func writeHFDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	data, err := hfJSON(tinyByteVocab(t))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"tokenizer.json": string(data),
		"tokenizer_config.json": `{"add_bos_token": false,
			"bos_token": {"content": "<|im_start|>", "lstrip": false},
			"eos_token": "<|im_end|>",
			"chat_template": [{"name": "tool_use", "template": "no"}, {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}"}]}`,
		"generation_config.json": `{"eos_token_id": [2, 0]}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestFromHFDir(t *testing.T) {
	dir := writeHFDir(t)
	hf, err := FromHFDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	gguf := newTiny(t, nil)

	for _, text := range append(decoderTexts, "<|im_start|>user the hello<|im_end|>") {
		ids := hf.Encode(text, true)
		if want := gguf.Encode(text, true); !slices.Equal(ids, want) {
			t.Errorf("Encode(%q) = %v, the same vocabulary from GGUF gives %v", text, ids, want)
		}
		if got := hf.Decode(ids, false); got != text {
			t.Errorf("Decode(Encode(%q)) = %q", text, got)
		}
	}
	if hf.BOS() != 1 || hf.EOS() != 2 {
		t.Errorf("BOS %d EOS %d, want 1 2", hf.BOS(), hf.EOS())
	}
	if got := hf.EOGIDs(); !slices.Equal(got, []int32{0, 2}) {
		t.Errorf("EOGIDs = %v, want [0 2]", got)
	}
	if id, ok := hf.TokenID("Ġthe"); !ok || id != gguf.ids["Ġthe"] {
		t.Errorf("TokenID(Ġthe) = %d, %v", id, ok)
	}
	if hf.VocabSize() != gguf.VocabSize() {
		t.Errorf("VocabSize %d, want %d", hf.VocabSize(), gguf.VocabSize())
	}
	got, err := hf.ApplyChatTemplate([]Message{{"user", "x"}}, true)
	if err != nil || got != "<|im_start|>x" {
		t.Errorf("ApplyChatTemplate = %q, %v", got, err)
	}
}

func TestFromHFDirErrors(t *testing.T) {
	if _, err := FromHFDir(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("empty dir: err = %v, want not-exist", err)
	}
	dir := writeHFDir(t)
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FromHFDir(dir); err == nil {
		t.Error("malformed tokenizer_config.json accepted")
	}
}
