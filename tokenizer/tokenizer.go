package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ardanlabs/jinja"
	"github.com/daulet/tokenizers"
)

// ErrUnsupported reports a vocabulary this package cannot turn into a
// tokenizer (an unknown tokenizer model or pre-tokenizer type).
var ErrUnsupported = errors.New("unsupported")

// Tokenizer encodes text to token ids and back. See the package comment for
// its concurrency rules.
type Tokenizer struct {
	hf *tokenizers.Tokenizer

	// A second instance that encodes control tokens written in text as plain
	// text, built on first use from the same tokenizer.json.
	json      []byte
	plainOnce sync.Once
	plain     *tokenizers.Tokenizer
	plainErr  error

	ids       map[string]int32 // token text (as the vocabulary spells it) → id
	special   []bool           // by id: control tokens, dropped by Decode(skipSpecial)
	byteToken []bool           // by id: SentencePiece byte-fallback tokens <0xNN>; nil for byte-level BPE

	// Decoding in Go (detok.go) for generated tokenizers.
	kind       decodeKind
	pieces     []string // by id: token text (SentencePiece)
	bytes      [][]byte // by id: the bytes a byte-level token stands for
	stripSpace bool     // SentencePiece add_space_prefix: decoding drops one leading space
	vocabSize  int
	bos, eos   int32 // -1 when absent
	nul        int32 // what a NUL byte encodes to (encode); -1: nothing
	eog        []int32

	// Chat template variables bos_token and eos_token.
	bosText, eosText string

	// Checks on untrusted text (plaintext.go). normalizes: the
	// tokenizer.json has a normalizer, which may change the text's length.
	tablesOnce sync.Once
	textTables *textTables
	normalizes bool

	template     string
	templateOnce sync.Once
	compiled     *jinja.Template
	compileErr   error
}

// New builds a tokenizer from a GGUF vocabulary by generating the equivalent
// Hugging Face tokenizer.json in memory.
func New(v *Vocab) (*Tokenizer, error) {
	v = harmonyVocab(v) // harmony.go
	data, err := hfJSON(v)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: GGUF %s vocabulary: %w", v.Model, err)
	}
	hf, err := tokenizers.FromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: loading the generated tokenizer.json: %w", err)
	}
	t := &Tokenizer{
		hf:        hf,
		json:      data,
		ids:       make(map[string]int32, len(v.Tokens)),
		special:   make([]bool, len(v.Tokens)),
		vocabSize: len(v.Tokens),
		bos:       validID(v.BOS, len(v.Tokens)),
		eos:       validID(v.EOS, len(v.Tokens)),
		template:  v.ChatTemplate,
	}
	for i, s := range v.Tokens {
		if _, dup := t.ids[s]; !dup {
			t.ids[s] = int32(i)
		}
		typ := tokenType(v, i)
		t.special[i] = typ == typeControl || typ == typeUnknown
		if v.Model == "llama" && typ == typeByte {
			if t.byteToken == nil {
				t.byteToken = make([]bool, len(v.Tokens))
			}
			t.byteToken[i] = true
		}
	}
	switch v.Model {
	case "gpt2":
		t.kind = decodeByteLevel
		t.bytes = make([][]byte, len(v.Tokens))
		for i, s := range v.Tokens {
			t.bytes[i] = byteLevelBytes(s)
		}
	case "llama":
		t.kind = decodeSPM
		t.pieces = v.Tokens
		t.stripSpace = v.AddSpacePrefix
	}
	t.eog = t.findEOG(validID(v.EOT, len(v.Tokens)), validID(v.EOM, len(v.Tokens)))
	t.nul = t.nulID()
	if t.bos >= 0 {
		t.bosText = v.Tokens[t.bos]
	}
	if t.eos >= 0 {
		t.eosText = v.Tokens[t.eos]
	}
	return t, nil
}

func validID(id int32, n int) int32 {
	if id < 0 || int(id) >= n {
		return -1
	}
	return id
}

// eogTexts are the tokens that end a generation wherever a vocabulary has
// them, the list llama.cpp keeps (llama_vocab::impl::load): model files do not
// mark them, so they are found by their text.
var eogTexts = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
	"<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
	"<end_of_utterance>", "<｜end▁of▁sentence｜>",
	// fill-in-the-middle padding, repository and file separators: llama.cpp
	// stops on these too, since a chat model emitting one has left the chat.
	"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "<|fim_repo|>", "<|repo_name|>",
	"<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
}

func (t *Tokenizer) findEOG(extra ...int32) []int32 {
	var eog []int32
	add := func(id int32) {
		if id >= 0 && !slices.Contains(eog, id) {
			eog = append(eog, id)
		}
	}
	add(t.eos)
	for _, id := range extra {
		add(id)
	}
	for _, s := range eogTexts {
		if id, ok := t.ids[s]; ok && !(s == "<|end|>" && t.harmonyEnds()) {
			add(id)
		}
	}
	slices.Sort(eog)
	return eog
}

// Encode returns the token ids of text. With addSpecial it also adds what the
// vocabulary asks for around a whole input (BOS when AddBOS). Control tokens
// written in text (e.g. "<|im_start|>") are always encoded as one token, as
// chat templates need; EncodePlain and Guard are for text that must not
// forge them. Invalid UTF-8 is encoded as U+FFFD. A NUL byte is encoded as
// the vocabulary's token for that byte (see encode).
func (t *Tokenizer) Encode(text string, addSpecial bool) []int32 {
	if t.hf == nil {
		return nil
	}
	return t.encode(t.hf, text, addSpecial)
}

// EncodePlain is Encode for untrusted text: control tokens written in it
// (such as "<|im_end|>" inside a user's message) are encoded as the plain text
// they are, as llama.cpp does with parse_special=false. User-defined tokens
// still match. It never adds BOS.
func (t *Tokenizer) EncodePlain(text string) ([]int32, error) {
	if t.hf == nil {
		return nil, nil
	}
	t.plainOnce.Do(func() {
		t.plain, t.plainErr = tokenizers.FromBytes(t.json, tokenizers.WithEncodeSpecialTokens())
		if t.plainErr != nil {
			t.plainErr = fmt.Errorf("tokenizer: loading the plain-text instance: %w", t.plainErr)
		}
	})
	if t.plainErr != nil {
		return nil, t.plainErr
	}
	return t.encode(t.plain, text, false), nil
}

// encode runs one of the library's instances on text. The library's C
// interface takes C strings, which end at the first NUL byte: given whole,
// a NUL in one message would silently drop every later turn and the
// generation prompt. So the text is encoded piece by piece between NULs,
// and each NUL becomes the vocabulary's token for the byte 0 (byte-level
// "Ā", SentencePiece's byte fallback "<0x00>"), or the unknown token where
// there is none: nothing after a NUL is lost. The pieces are encoded
// apart, so a NUL also ends any merge across it, which only a text with a
// NUL can notice. addSpecial adds the vocabulary's BOS/EOS once, around
// the whole text.
func (t *Tokenizer) encode(hf *tokenizers.Tokenizer, text string, addSpecial bool) []int32 {
	if strings.IndexByte(text, 0) < 0 {
		return encodeCString(hf, text, addSpecial)
	}
	bos, eos := t.specialAround(hf, addSpecial)
	out := slices.Clone(bos)
	for i, piece := range strings.Split(text, "\x00") {
		if i > 0 && t.nul >= 0 {
			out = append(out, t.nul)
		}
		if piece != "" {
			out = append(out, encodeCString(hf, piece, false)...)
		}
	}
	return append(out, eos...)
}

// specialAround is what addSpecial adds before and after a text: the ids
// around the encoding of a single character with and without it.
func (t *Tokenizer) specialAround(hf *tokenizers.Tokenizer, addSpecial bool) (before, after []int32) {
	if !addSpecial {
		return nil, nil
	}
	with, without := encodeCString(hf, "a", true), encodeCString(hf, "a", false)
	for i := range len(with) - len(without) + 1 {
		if slices.Equal(with[i:i+len(without)], without) {
			return with[:i], with[i+len(without):]
		}
	}
	return nil, nil
}

func encodeCString(hf *tokenizers.Tokenizer, text string, addSpecial bool) []int32 {
	enc := hf.EncodeWithOptions(text, addSpecial)
	out := make([]int32, len(enc.IDs))
	for i, id := range enc.IDs {
		out[i] = int32(id)
	}
	return out
}

// nulID is the token a NUL byte encodes to (encode), or -1.
func (t *Tokenizer) nulID() int32 {
	if t.kind == decodeByteLevel {
		if id, ok := t.ids[string(rune(0x100))]; ok { // GPT-2's byte→rune map sends 0 to U+0100
			return id
		}
	}
	if id, ok := t.ids["<0x00>"]; ok && t.isByteToken(id) {
		return id
	}
	for _, unk := range []string{"<unk>", "[UNK]"} {
		if id, ok := t.ids[unk]; ok {
			return id
		}
	}
	return -1
}

// Decode returns the text of ids. With skipSpecial, control tokens (BOS,
// <|im_end|>, ...) are left out. Ids outside the vocabulary are ignored.
// Bytes that do not form valid UTF-8 become U+FFFD.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	if t.hf == nil || len(ids) == 0 {
		return ""
	}
	if t.kind != decodeLibrary {
		return t.decodeGo(ids, skipSpecial)
	}
	return t.decodeLibrary(ids, skipSpecial)
}

// decodeLibrary decodes through the Rust library. Its C interface cannot
// return text containing a NUL byte: such text comes back as "".
func (t *Tokenizer) decodeLibrary(ids []int32, skipSpecial bool) string {
	u := make([]uint32, 0, len(ids))
	for _, id := range ids {
		if id >= 0 && (t.vocabSize == 0 || int(id) < t.vocabSize) {
			u = append(u, uint32(id))
		}
	}
	return t.hf.Decode(u, skipSpecial)
}

// TokenID returns the id of the token whose text, as the vocabulary spells it,
// is s (byte-level vocabularies spell a leading space "Ġ", SentencePiece "▁").
func (t *Tokenizer) TokenID(s string) (int32, bool) {
	id, ok := t.ids[s]
	return id, ok
}

// BOS returns the beginning-of-sequence id, or -1.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS returns the end-of-sequence id, or -1.
func (t *Tokenizer) EOS() int32 { return t.eos }

// EOGIDs returns every id that ends a generation (EOS, end-of-turn tokens such
// as <|im_end|> or <|eot_id|>), sorted. The caller must not modify it.
func (t *Tokenizer) EOGIDs() []int32 { return t.eog }

// IsEOG reports whether id ends a generation.
func (t *Tokenizer) IsEOG(id int32) bool {
	_, found := slices.BinarySearch(t.eog, id)
	return found
}

// IsSpecial reports whether id is a control token, which Decode drops when
// asked to skip special tokens.
func (t *Tokenizer) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.special) && t.special[id]
}

func (t *Tokenizer) isByteToken(id int32) bool {
	return id >= 0 && int(id) < len(t.byteToken) && t.byteToken[id]
}

// VocabSize returns the number of token ids (the model's logit count may be
// larger, padded).
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// ChatTemplate returns the model's Jinja chat template, or "".
func (t *Tokenizer) ChatTemplate() string { return t.template }

// Close frees the Rust tokenizer. The Tokenizer must not be used afterwards;
// Encode and Decode return nothing once closed.
func (t *Tokenizer) Close() {
	if t.hf != nil {
		t.hf.Close()
		t.hf = nil
	}
	if t.plain != nil {
		t.plain.Close()
		t.plain = nil
	}
}
