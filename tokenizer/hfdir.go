package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/daulet/tokenizers"
)

// hfFile is the part of a tokenizer.json this package reads itself: the
// library offers no token → id lookup, and decoding byte-level vocabularies is
// done in Go (detok.go).
type hfFile struct {
	AddedTokens []hfAddedToken  `json:"added_tokens"`
	Normalizer  json.RawMessage `json:"normalizer"`
	Decoder     *struct {
		Type string `json:"type"`
	} `json:"decoder"`
	Model struct {
		Type         string          `json:"type"`
		Vocab        json.RawMessage `json:"vocab"`
		ByteFallback bool            `json:"byte_fallback"`
	} `json:"model"`
}

// hfConfig is tokenizer_config.json; only the fields that matter here.
type hfConfig struct {
	BOS          hfTokenRef      `json:"bos_token"`
	EOS          hfTokenRef      `json:"eos_token"`
	ChatTemplate json.RawMessage `json:"chat_template"`
}

// hfTokenRef is a special token in tokenizer_config.json: either its text or
// an AddedToken object with a "content" field.
type hfTokenRef string

func (r *hfTokenRef) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*r = hfTokenRef(s)
		return nil
	}
	var o struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	*r = hfTokenRef(o.Content)
	return nil
}

// FromHFDir loads a Hugging Face tokenizer directory: tokenizer.json, and
// when present tokenizer_config.json (BOS/EOS tokens, chat template) and
// generation_config.json (extra end-of-generation ids). Whether Encode adds
// BOS is decided by tokenizer.json's post-processor, as in Hugging Face.
func FromHFDir(dir string) (*Tokenizer, error) {
	path := filepath.Join(dir, "tokenizer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	var f hfFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	vocab, err := hfVocab(f.Model.Type, f.Model.Vocab)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	var cfg hfConfig
	if err := readOptionalJSON(filepath.Join(dir, "tokenizer_config.json"), &cfg); err != nil {
		return nil, err
	}
	var gen struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := readOptionalJSON(filepath.Join(dir, "generation_config.json"), &gen); err != nil {
		return nil, err
	}
	hf, err := tokenizers.FromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: loading %s: %w", path, err)
	}

	t := &Tokenizer{hf: hf, json: data, ids: make(map[string]int32, len(vocab)+len(f.AddedTokens)),
		normalizes: len(f.Normalizer) > 0 && string(f.Normalizer) != "null"}
	for s, id := range vocab {
		t.ids[s] = id
	}
	for _, a := range f.AddedTokens {
		t.ids[a.Content] = int32(a.ID)
	}
	for _, id := range t.ids {
		t.vocabSize = max(t.vocabSize, int(id)+1)
	}
	t.special = make([]bool, t.vocabSize)
	for _, a := range f.AddedTokens {
		t.special[a.ID] = a.Special
	}
	if f.Model.ByteFallback {
		t.byteToken = make([]bool, t.vocabSize)
		for s, id := range vocab {
			_, t.byteToken[id] = fallbackByte(s)
		}
	}
	if f.Decoder != nil && f.Decoder.Type == "ByteLevel" {
		t.kind = decodeByteLevel
		t.bytes = make([][]byte, t.vocabSize)
		for s, id := range t.ids {
			t.bytes[id] = byteLevelBytes(s)
		}
	}

	t.bos, t.bosText = t.lookup(string(cfg.BOS))
	t.eos, t.eosText = t.lookup(string(cfg.EOS))
	t.template, err = chatTemplate(cfg.ChatTemplate)
	if err != nil {
		hf.Close()
		return nil, fmt.Errorf("tokenizer: %s/tokenizer_config.json: chat_template: %w", dir, err)
	}
	t.eog = t.findEOG(generationEOS(gen.EOS, t.vocabSize)...)
	t.nul = t.nulID()
	return t, nil
}

func (t *Tokenizer) lookup(s string) (int32, string) {
	if id, ok := t.ids[s]; ok && s != "" {
		return id, s
	}
	return -1, ""
}

func readOptionalJSON(path string, dst any) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		err = json.Unmarshal(data, dst)
	}
	if err != nil {
		return fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return nil
}

// hfVocab reads model.vocab: an object {token: id} for BPE, WordPiece and
// WordLevel, a list of [piece, score] pairs (ids by position) for Unigram.
func hfVocab(modelType string, raw json.RawMessage) (map[string]int32, error) {
	if modelType == "Unigram" {
		var pieces [][2]any
		if err := json.Unmarshal(raw, &pieces); err != nil {
			return nil, fmt.Errorf("model.vocab: %w", err)
		}
		m := make(map[string]int32, len(pieces))
		for i, p := range pieces {
			if s, ok := p[0].(string); ok {
				m[s] = int32(i)
			}
		}
		return m, nil
	}
	var m map[string]int32
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("model.vocab: %w", err)
	}
	return m, nil
}

// chatTemplate reads tokenizer_config.json's chat_template: a string, or a
// list of named templates of which "default" is the chat one.
func chatTemplate(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var named []struct{ Name, Template string }
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", err
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", nil
}

// generationEOS reads generation_config.json's eos_token_id: one id or a list.
func generationEOS(raw json.RawMessage, n int) []int32 {
	var one int32
	if err := json.Unmarshal(raw, &one); err == nil {
		return []int32{validID(one, n)}
	}
	var list []int32
	_ = json.Unmarshal(raw, &list) // absent or malformed: no extra ids
	for i, id := range list {
		list[i] = validID(id, n)
	}
	return list
}
