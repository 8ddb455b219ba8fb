package tokenizer

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// textTables are what the checks on untrusted text read, built once from
// the vocabulary on first use.
type textTables struct {
	// specials is a byte trie of the control tokens' texts: the tokens
	// Encode matches in text and EncodePlain does not.
	specials *trieNode
	first    [256]bool // first bytes of specials
	// missing marks the bytes a byte-level vocabulary has no token for:
	// the library drops such a byte without a trace (SmolLM2 lacks 0x04,
	// 0x06, 0x13, 0x14, 0x16 and 0x1d).
	missing    [256]bool
	hasMissing bool
	// maxTokenBytes is the most input bytes one token can stand for, or 0
	// when the pipeline does not bound it (see MinTokens).
	maxTokenBytes int
}

type trieNode struct {
	next map[byte]*trieNode
	text string // a whole special token's text ends here
}

func (t *Tokenizer) tables() *textTables {
	t.tablesOnce.Do(func() {
		tt := &textTables{specials: &trieNode{}}
		for s, id := range t.ids {
			if s == "" || !t.IsSpecial(id) {
				continue
			}
			tt.first[s[0]] = true
			n := tt.specials
			for i := range len(s) {
				c := n.next[s[i]]
				if c == nil {
					if n.next == nil {
						n.next = map[byte]*trieNode{}
					}
					c = &trieNode{}
					n.next[s[i]] = c
				}
				n = c
			}
			n.text = s
		}
		if t.kind == decodeByteLevel {
			for r, b := range byteOfChar {
				if _, ok := t.ids[string(r)]; !ok {
					tt.missing[b], tt.hasMissing = true, true
				}
			}
		}
		tt.maxTokenBytes = t.maxTokenBytes()
		t.textTables = tt
	})
	return t.textTables
}

// maxTokenBytes bounds the input bytes one token stands for, where the
// pipeline allows it: byte-level BPE (each token is its bytes, an added
// token its text) and GGUF SentencePiece with every byte-fallback token
// (a piece stands for its text with ▁ as one space byte; without all 256
// byte tokens a run of unknown characters fuses into one <unk>). A
// tokenizer.json with a normalizer of its own may expand its input (NFKC
// does), and any other model is not known: 0.
func (t *Tokenizer) maxTokenBytes() int {
	if t.normalizes {
		return 0
	}
	m := 0
	switch t.kind {
	case decodeByteLevel:
		for _, b := range t.bytes {
			m = max(m, len(b))
		}
	case decodeSPM:
		fallback := 0
		for id, p := range t.pieces {
			if t.isByteToken(int32(id)) {
				fallback++
			}
			m = max(m, len(strings.ReplaceAll(p, "▁", " ")))
		}
		if fallback < 256 {
			return 0
		}
	default:
		return 0
	}
	return m
}

// MinTokens is a lower bound on the tokens Encode gives text, computed
// from its length alone: no token stands for more than the vocabulary's
// longest token's bytes. 0 when the tokenizer offers no such bound. It
// lets a caller refuse a text that cannot fit a context without paying for
// its tokenization.
func (t *Tokenizer) MinTokens(text string) int {
	m := t.tables().maxTokenBytes
	if m == 0 {
		return 0
	}
	return (len(text) + m - 1) / m
}

// MaxTokenBytes is the bound MinTokens divides by (0: none).
func (t *Tokenizer) MaxTokenBytes() int { return t.tables().maxTokenBytes }

// Unencodable returns the first character of text that Encode would drop
// because the vocabulary has no token for one of its bytes, and its byte
// offset; ok is false when every character is kept.
func (t *Tokenizer) Unencodable(text string) (r rune, at int, ok bool) {
	tt := t.tables()
	if !tt.hasMissing {
		return 0, 0, false
	}
	for i := range len(text) {
		if tt.missing[text[i]] {
			start := i
			for start > 0 && !utf8.RuneStart(text[start]) && i-start < utf8.UTFMax {
				start--
			}
			r, _ := utf8.DecodeRuneInString(text[start:])
			return r, start, true
		}
	}
	return 0, 0, false
}

// Guard keeps text taken from a request from forging control tokens when
// it is rendered into a chat template. Protect each string before it goes
// into the template, then Encode the rendered text: the template's own
// markers ("<|im_start|>", written by the template) are control tokens,
// while a control token's text inside a protected string ("<|im_end|>" in
// a user's message or a tool's result) is encoded as the plain text it is,
// so a message cannot close its turn and open another.
//
// Protect replaces each control token's text in a string with a sentinel
// (U+E000, a random 64-bit nonce, the index of the text, U+E001) that no
// client can guess and that templates pass through unchanged (it has no
// case, no whitespace, and JSON leaves it as it is). Encode splits the
// rendered text at the sentinels: the text between them is encoded by
// Encode, each sentinel's text by EncodePlain. A string with no control
// token text is left as it is, and a rendered text with no sentinel is
// encoded by Encode alone, exactly as before: only text that spells a
// control token is tokenized differently. A Guard serves one request; it
// is not safe for concurrent use.
type Guard struct {
	t     *Tokenizer
	open  string   // "\uE000" + nonce + ":"
	texts []string // by sentinel index: the control token texts replaced
}

const sentinelClose = "\uE001"

// NewGuard starts a Guard for one rendering.
func (t *Tokenizer) NewGuard() *Guard {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails
	return &Guard{t: t, open: "\uE000" + strconv.FormatUint(binary.LittleEndian.Uint64(b[:]), 10) + ":"}
}

// Protect returns s with every control token's text replaced by a sentinel.
func (g *Guard) Protect(s string) string {
	tt := g.t.tables()
	var b strings.Builder
	done := 0 // s[:done] is in b
	for i := 0; i < len(s); i++ {
		if !tt.first[s[i]] {
			continue
		}
		text := tt.longestSpecial(s[i:])
		if text == "" {
			continue
		}
		if b.Len() == 0 {
			b.Grow(len(s) + 32)
		}
		b.WriteString(s[done:i])
		b.WriteString(g.open)
		b.WriteString(strconv.Itoa(len(g.texts)))
		b.WriteString(sentinelClose)
		g.texts = append(g.texts, text)
		i += len(text) - 1
		done = i + 1
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// longestSpecial is the longest control token text s starts with, or "".
func (tt *textTables) longestSpecial(s string) string {
	n, found := tt.specials, ""
	for i := 0; i < len(s) && n != nil; i++ {
		if n = n.next[s[i]]; n != nil && n.text != "" {
			found = n.text
		}
	}
	return found
}

// Protected reports whether Protect replaced anything.
func (g *Guard) Protected() bool { return len(g.texts) > 0 }

// Encode tokenizes a text rendered from protected strings (see Guard).
// It fails if the template changed a sentinel (sliced or rewrote the
// string it was in): the text it stood for would otherwise be lost.
func (g *Guard) Encode(rendered string, addSpecial bool) ([]int32, error) {
	if !g.Protected() || !strings.Contains(rendered, g.open) {
		return g.t.Encode(rendered, addSpecial), nil
	}
	var before, after []int32
	if g.t.hf != nil {
		before, after = g.t.specialAround(g.t.hf, addSpecial)
	}
	out := append([]int32(nil), before...)
	for rest := rendered; ; {
		i := strings.Index(rest, g.open)
		if i < 0 {
			out = append(out, g.t.Encode(rest, false)...)
			break
		}
		out = append(out, g.t.Encode(rest[:i], false)...)
		rest = rest[i+len(g.open):]
		j := strings.Index(rest, sentinelClose)
		k, err := strconv.Atoi(rest[:max(j, 0)])
		if j < 0 || err != nil || k < 0 || k >= len(g.texts) {
			return nil, fmt.Errorf("tokenizer: the chat template altered a message's text around a control token's spelling")
		}
		plain, err := g.t.EncodePlain(g.texts[k])
		if err != nil {
			return nil, err
		}
		out = append(out, plain...)
		rest = rest[j+len(sentinelClose):]
	}
	return append(out, after...), nil
}
