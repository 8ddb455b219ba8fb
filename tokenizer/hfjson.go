package tokenizer

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// GGUF token types (tokenizer.ggml.token_type), as llama.cpp numbers them.
const (
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

// hfAddedToken is one entry of tokenizer.json's added_tokens. Added tokens are
// matched in the raw input before any normalization or pre-tokenization, which
// is how llama.cpp treats control and user-defined tokens when it parses
// special tokens.
type hfAddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// hfBPE is tokenizer.json's "model" for both vocabulary kinds: GGUF's gpt2
// vocabularies are byte-level BPE already, and SentencePiece vocabularies are
// expressed as BPE with merges ranked by score (see spmMerges).
type hfBPE struct {
	Type                    string         `json:"type"`
	Dropout                 *float64       `json:"dropout"`
	UnkToken                *string        `json:"unk_token"`
	ContinuingSubwordPrefix *string        `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string        `json:"end_of_word_suffix"`
	FuseUnk                 bool           `json:"fuse_unk"`
	ByteFallback            bool           `json:"byte_fallback"`
	IgnoreMerges            bool           `json:"ignore_merges"`
	Vocab                   map[string]int `json:"vocab"`
	Merges                  []string       `json:"merges"`
}

type hfTokenizerJSON struct {
	Version       string         `json:"version"`
	Truncation    any            `json:"truncation"`
	Padding       any            `json:"padding"`
	AddedTokens   []hfAddedToken `json:"added_tokens"`
	Normalizer    any            `json:"normalizer"`
	PreTokenizer  any            `json:"pre_tokenizer"`
	PostProcessor any            `json:"post_processor"`
	Decoder       any            `json:"decoder"`
	Model         hfBPE          `json:"model"`
}

// obj is a JSON object literal; the pipeline stages of tokenizer.json are
// small enough that a struct per stage would only add noise.
type obj = map[string]any

// hfJSON renders v as the tokenizer.json that Hugging Face would ship for the
// same tokenizer.
func hfJSON(v *Vocab) ([]byte, error) {
	if len(v.Tokens) == 0 {
		return nil, fmt.Errorf("empty vocabulary: %w", ErrUnsupported)
	}
	if len(v.TokenTypes) != 0 && len(v.TokenTypes) != len(v.Tokens) {
		return nil, fmt.Errorf("%d token types for %d tokens", len(v.TokenTypes), len(v.Tokens))
	}
	t := hfTokenizerJSON{
		Version:     "1.0",
		AddedTokens: addedTokens(v),
		Model: hfBPE{
			Type:  "BPE",
			Vocab: vocabMap(v.Tokens),
		},
	}
	switch v.Model {
	case "gpt2":
		pre, ignoreMerges, err := bytePreTokenizer(v.Pre)
		if err != nil {
			return nil, err
		}
		t.PreTokenizer = pre
		t.Decoder = obj{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}
		t.Model.IgnoreMerges = ignoreMerges
		t.Model.Merges = v.Merges
		if t.Model.Merges == nil {
			t.Model.Merges = []string{}
		}
	case "llama":
		if len(v.Scores) != len(v.Tokens) {
			return nil, fmt.Errorf("SentencePiece vocabulary has %d scores for %d tokens", len(v.Scores), len(v.Tokens))
		}
		spmPipeline(&t, v)
	default:
		return nil, fmt.Errorf("tokenizer model %q: %w", v.Model, ErrUnsupported)
	}
	t.PostProcessor = templateProcessing(v)
	return json.Marshal(t)
}

// vocabMap maps token text to id. A text that occurs twice keeps its first id,
// as llama.cpp's text-to-token table does.
func vocabMap(tokens []string) map[string]int {
	m := make(map[string]int, len(tokens))
	for i, s := range tokens {
		if _, dup := m[s]; !dup {
			m[s] = i
		}
	}
	return m
}

func tokenType(v *Vocab, id int) int32 {
	if id < len(v.TokenTypes) {
		return v.TokenTypes[id]
	}
	return typeNormal
}

// addedTokens lists the tokens that must match as a whole wherever they appear
// in the input: control tokens (special, skipped by Decode with skipSpecial),
// user-defined tokens (kept by Decode) and the unknown token.
func addedTokens(v *Vocab) []hfAddedToken {
	var out []hfAddedToken
	for i, s := range v.Tokens {
		typ := tokenType(v, i)
		if (typ != typeControl && typ != typeUserDefined && typ != typeUnknown) || s == "" {
			continue
		}
		out = append(out, hfAddedToken{ID: i, Content: s, Special: typ != typeUserDefined})
	}
	return out
}

// templateProcessing adds BOS/EOS around the input when Encode is asked for
// special tokens and the vocabulary wants them (tokenizer.ggml.add_bos_token).
func templateProcessing(v *Vocab) any {
	var single, pair []any
	special := obj{}
	piece := func(id int32) any {
		s := v.Tokens[id]
		special[s] = obj{"id": s, "ids": []int32{id}, "tokens": []string{s}}
		return obj{"SpecialToken": obj{"id": s, "type_id": 0}}
	}
	seq := func(name string) any { return obj{"Sequence": obj{"id": name, "type_id": 0}} }
	valid := func(id int32) bool { return id >= 0 && int(id) < len(v.Tokens) }
	if v.AddBOS && valid(v.BOS) {
		single = append(single, piece(v.BOS))
	}
	single = append(single, seq("A"))
	pair = append(pair, single...)
	if v.AddEOS && valid(v.EOS) {
		single = append(single, piece(v.EOS))
	}
	pair = append(pair, seq("B"))
	if v.AddEOS && valid(v.EOS) {
		pair = append(pair, piece(v.EOS))
	}
	if len(special) == 0 {
		return nil
	}
	return obj{"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": special}
}

// spmPipeline fills in the SentencePiece stages the way llama.cpp's SPM
// tokenizer behaves: spaces become ▁, a ▁ is prepended to each run of plain
// text when add_space_prefix is set (llama.cpp prepends after every special
// token, and tokenizers normalizes each segment between added tokens on its
// own), text without a piece falls back to <0xNN> byte tokens, and decoding
// removes the one prepended space again.
func spmPipeline(t *hfTokenizerJSON, v *Vocab) {
	replace := obj{"type": "Replace", "pattern": obj{"String": " "}, "content": "▁"}
	if v.AddSpacePrefix {
		t.Normalizer = obj{"type": "Sequence", "normalizers": []any{obj{"type": "Prepend", "prepend": "▁"}, replace}}
	} else {
		t.Normalizer = replace
	}
	decoders := []any{
		obj{"type": "Replace", "pattern": obj{"String": "▁"}, "content": " "},
		obj{"type": "ByteFallback"},
		obj{"type": "Fuse"},
	}
	if v.AddSpacePrefix {
		decoders = append(decoders, obj{"type": "Strip", "content": " ", "start": 1, "stop": 0})
	}
	t.Decoder = obj{"type": "Sequence", "decoders": decoders}
	t.Model.FuseUnk = true
	t.Model.ByteFallback = true
	if v.Unknown >= 0 && int(v.Unknown) < len(v.Tokens) {
		unk := v.Tokens[v.Unknown]
		t.Model.UnkToken = &unk
	}
	t.Model.Merges = spmMerges(v)
}

// spmMerges derives BPE merges from SentencePiece scores as Hugging Face's
// SentencePieceExtractor does: every split of a piece into two pieces that are
// both in the vocabulary is a merge, ranked by the score of the merged piece
// (highest first; ties keep the order of the vocabulary, then of the pair's
// ids). This reproduces llama.cpp's SPM bigram merging, which always merges
// the adjacent pair whose concatenation has the highest score.
func spmMerges(v *Vocab) []string {
	ids := make(map[string]int, len(v.Tokens))
	for i, s := range v.Tokens {
		if typ := tokenType(v, i); typ != typeNormal && typ != typeUserDefined {
			continue
		}
		if _, dup := ids[s]; !dup {
			ids[s] = i
		}
	}
	type merge struct {
		left, right string
		l, r        int // ids of left and right
		piece       int // id of the merged piece
	}
	var merges []merge
	for i, s := range v.Tokens {
		if ids[s] != i {
			continue // not a mergeable piece, or a duplicate
		}
		start := len(merges)
		for off := 0; off < len(s); {
			_, n := utf8.DecodeRuneInString(s[off:])
			off += n
			if off >= len(s) {
				break
			}
			l, okL := ids[s[:off]]
			r, okR := ids[s[off:]]
			// tokenizers' merges are "left right" strings: a piece containing a
			// space cannot be expressed, and SentencePiece pieces never hold one.
			if okL && okR && !strings.Contains(s, " ") {
				merges = append(merges, merge{s[:off], s[off:], l, r, i})
			}
		}
		local := merges[start:]
		sort.SliceStable(local, func(a, b int) bool {
			if local[a].l != local[b].l {
				return local[a].l < local[b].l
			}
			return local[a].r < local[b].r
		})
	}
	sort.SliceStable(merges, func(a, b int) bool {
		return v.Scores[merges[a].piece] > v.Scores[merges[b].piece]
	})
	out := make([]string, len(merges))
	for i, m := range merges {
		out[i] = m.left + " " + m.right
	}
	return out
}
