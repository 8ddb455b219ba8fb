package modeltest

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The tiny vocabulary is a GPT-2 byte-level BPE laid out like SmolLM2's:
//
//	0 <|endoftext|> (unknown)   1 <|im_start|> (BOS)   2 <|im_end|> (EOS, pad)
//	3..258   the 256 bytes, in byte order, as GPT-2's byte→rune mapping spells them
//	259..    merges learnt from trainingText, most frequent first
//	...      <unused_N> fillers if the text runs out of pairs before Vocab
//
// The pre-tokenizer is SmolLM2's ("smollm": each digit alone, then GPT-2's regex).

// Special tokens and their ids.
const (
	EndOfText = "<|endoftext|>"
	ImStart   = "<|im_start|>"
	ImEnd     = "<|im_end|>"

	UnknownID = 0
	BOSID     = 1
	EOSID     = 2
)

// MinVocab is the smallest vocabulary a Spec may ask for: the specials and the bytes.
const MinVocab = 3 + 256

// ChatTemplate is SmolLM2-Instruct's ChatML template.
const ChatTemplate = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}" +
	"{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}" +
	"{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}" +
	"{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"

const trainingText = `The quick brown fox jumps over the lazy dog. The model reads the prompt, then
writes the answer one token at a time. In the beginning there was nothing, and then there was
the server: it listens, it schedules, it streams. Every request gets its own sequence; every
sequence owns the blocks of its cache until it ends. When the client goes away, the blocks return
to the pool before the next step starts. This is the contract, and the tests check it.
func main() { fmt.Println("hello, world") } // the first program
for i := 0; i < n; i++ { sum += x[i] * y[i] }
Tokens are pieces of words: the, then, there, these, those, this, that, thing, think, thinking.
Attention is all you need; normalization keeps the activations in range; the rotary embedding
turns positions into angles. Quantization stores weights in four or eight bits with a scale.
She sells sea shells on the sea shore, and the shells she sells are surely sea shells.
An engineer measures before optimizing, and writes down what was measured and how.`

// bytesToUnicode is GPT-2's reversible byte→rune map: printable bytes stand for
// themselves, the rest are shifted to U+0100 and up.
func bytesToUnicode() [256]rune {
	var m [256]rune
	n := rune(0)
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[b] = rune(b)
		} else {
			m[b] = 256 + n
			n++
		}
	}
	return m
}

// preTokenize splits ASCII text roughly as the smollm pre-tokenizer does:
// single digits, an optional space followed by letters, or by punctuation,
// and runs of whitespace.
func preTokenize(text string) []string {
	var out []string
	class := func(c byte) int {
		switch {
		case c >= '0' && c <= '9':
			return 0
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			return 1
		case c == ' ' || c == '\n' || c == '\t':
			return 2
		}
		return 3
	}
	for i := 0; i < len(text); {
		j := i
		if text[j] == ' ' && j+1 < len(text) && class(text[j+1]) != 2 && class(text[j+1]) != 0 {
			j++
		}
		c := class(text[j])
		j++
		if c != 0 {
			for j < len(text) && class(text[j]) == c {
				j++
			}
		}
		out = append(out, text[i:j])
		i = j
	}
	return out
}

// Vocabulary returns the tiny vocabulary's tokens (id order) and merges ("a b").
func Vocabulary(vocab int) (tokens, merges []string) {
	b2u := bytesToUnicode()
	tokens = []string{EndOfText, ImStart, ImEnd}
	for b := range 256 {
		tokens = append(tokens, string(b2u[b]))
	}
	type word struct {
		syms  []string
		count int
	}
	counts := map[string]int{}
	var order []string
	for _, w := range preTokenize(trainingText) {
		var sb strings.Builder
		for i := 0; i < len(w); i++ {
			sb.WriteRune(b2u[w[i]])
		}
		k := sb.String()
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	words := make([]word, 0, len(order))
	for _, k := range order {
		var syms []string
		for _, r := range k {
			syms = append(syms, string(r))
		}
		words = append(words, word{syms, counts[k]})
	}
	for len(tokens) < vocab {
		pairs := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.syms); i++ {
				pairs[[2]string{w.syms[i], w.syms[i+1]}] += w.count
			}
		}
		best, bestN := [2]string{}, 0
		for p, n := range pairs {
			if n > bestN || (n == bestN && p[0]+" "+p[1] < best[0]+" "+best[1]) {
				best, bestN = p, n
			}
		}
		if bestN == 0 {
			break
		}
		merges = append(merges, best[0]+" "+best[1])
		tokens = append(tokens, best[0]+best[1])
		for wi := range words {
			s := words[wi].syms
			var m []string
			for i := 0; i < len(s); i++ {
				if i+1 < len(s) && s[i] == best[0] && s[i+1] == best[1] {
					m = append(m, best[0]+best[1])
					i++
				} else {
					m = append(m, s[i])
				}
			}
			words[wi].syms = m
		}
	}
	for i := 0; len(tokens) < vocab; i++ {
		tokens = append(tokens, fmt.Sprintf("<unused_%d>", i))
	}
	return tokens, merges
}

// ggufVocab is the tokenizer.* metadata of the tiny vocabulary.
func ggufVocab(vocab int) []KV {
	tokens, merges := Vocabulary(vocab)
	types := make([]int32, len(tokens))
	for i := range types {
		types[i] = 1 // normal
	}
	types[0], types[1], types[2] = 3, 3, 3 // control
	return []KV{
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", "smollm"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.merges", merges},
		{"tokenizer.ggml.bos_token_id", uint32(BOSID)},
		{"tokenizer.ggml.eos_token_id", uint32(EOSID)},
		{"tokenizer.ggml.unknown_token_id", uint32(UnknownID)},
		{"tokenizer.ggml.padding_token_id", uint32(EOSID)},
		{"tokenizer.ggml.add_bos_token", false},
		{"tokenizer.ggml.add_space_prefix", false},
		{"tokenizer.chat_template", ChatTemplate},
	}
}

// tokenizerJSON is the Hugging Face tokenizer.json of the tiny vocabulary,
// laid out as SmolLM2's.
func tokenizerJSON(vocab int) ([]byte, error) {
	tokens, merges := Vocabulary(vocab)
	ids := make(map[string]int, len(tokens))
	for i, t := range tokens {
		ids[t] = i
	}
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var specials []added
	for i, t := range tokens[:3] {
		specials = append(specials, added{ID: i, Content: t, Special: true})
	}
	byteLevel := func(prefix bool) map[string]any {
		return map[string]any{"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": true, "use_regex": true}
	}
	doc := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": specials,
		"normalizer":   nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Digits", "individual_digits": true},
			byteLevel(false),
		}},
		"post_processor": byteLevel(true),
		"decoder":        byteLevel(true),
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": ids, "merges": merges,
		},
	}
	return json.MarshalIndent(doc, "", " ")
}

// tokenizerConfigJSON is tokenizer_config.json: special tokens and the chat template.
func tokenizerConfigJSON(contextLen int) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"add_prefix_space":             false,
		"bos_token":                    ImStart,
		"eos_token":                    ImEnd,
		"pad_token":                    ImEnd,
		"unk_token":                    EndOfText,
		"chat_template":                ChatTemplate,
		"model_max_length":             contextLen,
		"tokenizer_class":              "GPT2Tokenizer",
		"clean_up_tokenization_spaces": false,
	}, "", " ")
}
