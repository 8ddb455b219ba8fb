package tokenizer

import (
	"errors"
	"slices"
	"testing"
)

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Vocab)
		is   error // nil: any error
	}{
		{"unknown model", func(v *Vocab) { v.Model = "bert" }, ErrUnsupported},
		{"unknown pre-tokenizer", func(v *Vocab) { v.Pre = "no-such-pre" }, ErrUnsupported},
		{"empty vocabulary", func(v *Vocab) { v.Tokens, v.TokenTypes = nil, nil }, ErrUnsupported},
		{"token types do not match tokens", func(v *Vocab) { v.TokenTypes = v.TokenTypes[:3] }, nil},
		{"SentencePiece without scores", func(v *Vocab) { v.Model = "llama" }, nil},
	}
	for _, tt := range tests {
		v := tinyByteVocab(t)
		tt.edit(v)
		tok, err := New(v)
		if err == nil {
			tok.Close()
			t.Errorf("%s: New succeeded", tt.name)
			continue
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.is)
		}
	}
}

// The pre-tokenizer decides where merges may not cross. With merges for
// "12" and "34" (ranked before "123"), "1234" shows each rule: GPT-2 keeps
// digit runs whole, Llama 3 cuts them in threes, SmolLM/StarCoder and Qwen2
// isolate every digit (llama.cpp's regexes for these pre types).
func TestPreTokenizers(t *testing.T) {
	tests := []struct {
		pre  string
		want []string
	}{
		{"gpt2", []string{"12", "34"}},
		{"default", []string{"12", "34"}},
		{"llama-bpe", []string{"123", "4"}},
		{"smollm", []string{"1", "2", "3", "4"}},
		{"starcoder", []string{"1", "2", "3", "4"}},
		{"qwen2", []string{"1", "2", "3", "4"}},
		{"deepseek-llm", []string{"12", "34"}},
	}
	for _, tt := range tests {
		tok := newTiny(t, func(v *Vocab) {
			v.Pre = tt.pre
			for _, m := range [][2]string{{"1", "2"}, {"3", "4"}, {"12", "3"}} {
				v.Merges = append(v.Merges, m[0]+" "+m[1])
				v.Tokens = append(v.Tokens, m[0]+m[1])
				v.TokenTypes = append(v.TokenTypes, typeNormal)
			}
		})
		var got []string
		for _, id := range tok.Encode("1234", false) {
			got = append(got, tok.Decode([]int32{id}, false))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("pre %q: %q, want %q", tt.pre, got, tt.want)
		}
	}
}

// AddBOS puts BOS first when Encode is asked for special tokens, only then.
func TestEncodeAddsBOS(t *testing.T) {
	tok := newTiny(t, func(v *Vocab) { v.AddBOS = true })
	if got := tok.Encode("a", true); !slices.Equal(got, []int32{1, tok.ids["a"]}) {
		t.Errorf("Encode(a, true) = %v", got)
	}
	if got := tok.Encode("a", false); !slices.Equal(got, []int32{tok.ids["a"]}) {
		t.Errorf("Encode(a, false) = %v", got)
	}
}
