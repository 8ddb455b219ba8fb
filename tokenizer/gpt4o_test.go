package tokenizer_test

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/models/modeltest"
	"github.com/sluicehq/sluice/tokenizer"
)

// TestGPT4oPreTokenizer: a vocabulary with gpt-oss's pre-tokenizer
// (tokenizer.ggml.pre "gpt-4o", o200k's split) loads and encodes as
// llama.cpp v0.5.0 encodes it: the ids below are its /tokenize answers for
// modeltest's 313-token vocabulary plus harmony's 7 tokens with pre
// "gpt-4o" (modeltest.Spec.Harmony's file with the pre key changed). The
// tiny vocabulary has no merge across a boundary where o200k's split and
// Llama 3's differ, so this pins the wiring and the markers more than the
// regex, which is o200k's as gpt-oss's tokenizer.json writes it.
func TestGPT4oPreTokenizer(t *testing.T) {
	tokens, merges := modeltest.Vocabulary(320 - len(modeltest.HarmonyTokens))
	types := make([]int32, len(tokens), 320)
	for i := range types {
		types[i] = 1
	}
	types[0], types[1], types[2] = 3, 3, 3
	for _, s := range modeltest.HarmonyTokens {
		tokens, types = append(tokens, s), append(types, 3)
	}
	tok, err := tokenizer.New(&tokenizer.Vocab{Model: "gpt2", Pre: "gpt-4o", Tokens: tokens, TokenTypes: types, Merges: merges,
		BOS: 1, EOS: 318, EOT: -1, EOM: -1, Unknown: 0, Pad: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	for _, c := range []struct {
		text string
		want []int32
	}{
		{"Hello World", []int32{75, 104, 273, 114, 35, 90, 301, 111, 103}},
		{"don't DON'T We've they'RE", []int32{103, 278, 42, 119, 35, 71, 82, 81, 42, 87, 35, 90, 104, 42, 121, 104, 261, 124, 42, 85, 72}},
		{"12345 678 9", []int32{52, 53, 54, 55, 56, 35, 57, 58, 59, 35, 60}},
		{"  leading\n\n  spaces\t\ttabs  ", []int32{35, 35, 111, 104, 100, 103, 277, 13, 13, 35, 262, 115, 100, 102, 270, 12, 12, 119, 100, 101, 118, 35, 35}},
		{"über Straße ÄÖÜ", []int32{198, 191, 101, 272, 35, 86, 119, 302, 198, 162, 104, 35, 198, 135, 198, 153, 198, 159}},
		{"日本語のテキスト", []int32{233, 154, 168, 233, 159, 175, 235, 173, 161, 230, 132, 177, 230, 134, 137, 230, 133, 176, 230, 133, 188, 230, 134, 139}},
		{"a.b/c\\d\r\n\r\nend", []int32{100, 49, 101, 50, 102, 95, 103, 16, 13, 16, 13, 267, 103}},
		{"<|channel|>analysis<|message|>Hi<|end|>", []int32{316, 100, 113, 100, 111, 124, 118, 283, 315, 75, 108, 314}},
		{"emoji 😀 test", []int32{104, 112, 114, 109, 108, 35, 243, 162, 155, 131, 260, 270, 119}},
		{"func main() { fmt.Println(\"hello, world\") }", []int32{105, 120, 113, 102, 296, 100, 264, 43, 44, 35, 126, 35, 105, 112, 119, 49, 83, 117, 264, 119, 111, 113, 43, 37, 259, 273, 114, 47, 269, 301, 111, 103, 37, 44, 35, 128}},
		{"...!!!???\n\n\n", []int32{49, 49, 49, 36, 36, 36, 66, 66, 66, 13, 13, 13}},
		{"$100,000.00 vs 1e-5", []int32{39, 52, 51, 51, 47, 51, 51, 51, 49, 51, 51, 35, 121, 118, 35, 52, 104, 48, 56}},
	} {
		if got := tok.Encode(c.text, false); !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, llama.cpp %v", c.text, got, c.want)
		}
	}
}
