package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// Decoding of the tokenizers New generates is done here in Go rather than by
// the library, for two reasons: the library's C interface returns text as a
// NUL-terminated string and so gives "" for any text containing a NUL byte (a
// model can emit the byte token for 0x00), and streaming decodes twice per
// generated token, where a cgo call and its allocations cost more than the
// work. These functions reproduce the decoder stages hfJSON writes into
// tokenizer.json (ByteLevel; Replace ▁, ByteFallback, Fuse, Strip); the tests
// check them against the library on random ids.

type decodeKind uint8

const (
	decodeLibrary   decodeKind = iota // an arbitrary tokenizer.json: ask the library
	decodeByteLevel                   // GPT-2 byte-level BPE
	decodeSPM                         // SentencePiece as BPE with byte fallback
)

// byteOfChar inverts GPT-2's bytes_to_unicode: the printable character a
// byte-level vocabulary uses for each byte. Characters outside it map to -1.
var byteOfChar = func() map[rune]int {
	m := make(map[rune]int, 256)
	n := 0
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			m[rune(b)] = b
		} else {
			m[rune(256+n)] = b
			n++
		}
	}
	return m
}()

// byteLevelBytes returns the bytes a byte-level token stands for. A token
// with a character outside the byte alphabet (an added token such as
// "<|im_start|>" maps through it unchanged, but one with other characters
// does not) stands for its own UTF-8 text, as in tokenizers' ByteLevel decoder.
func byteLevelBytes(piece string) []byte {
	out := make([]byte, 0, len(piece))
	for _, r := range piece {
		b, ok := byteOfChar[r]
		if !ok {
			return []byte(piece)
		}
		out = append(out, byte(b))
	}
	return out
}

// decodeGo decodes ids with the pipeline of t.kind; see Decode.
func (t *Tokenizer) decodeGo(ids []int32, skipSpecial bool) string {
	switch t.kind {
	case decodeByteLevel:
		var buf []byte
		for _, id := range ids {
			if t.dropped(id, skipSpecial) {
				continue
			}
			buf = append(buf, t.bytes[id]...)
		}
		return lossyUTF8(buf)
	case decodeSPM:
		return t.decodeSPM(ids, skipSpecial)
	}
	return ""
}

func (t *Tokenizer) dropped(id int32, skipSpecial bool) bool {
	return id < 0 || int(id) >= t.vocabSize || skipSpecial && t.special[id]
}

func (t *Tokenizer) decodeSPM(ids []int32, skipSpecial bool) string {
	var sb strings.Builder
	var group []byte // consecutive <0xNN> tokens
	flush := func() {
		if utf8.Valid(group) {
			sb.Write(group)
		} else {
			// tokenizers' ByteFallback: an invalid group is one U+FFFD per byte.
			for range group {
				sb.WriteString("\uFFFD")
			}
		}
		group = group[:0]
	}
	for _, id := range ids {
		if t.dropped(id, skipSpecial) {
			continue
		}
		if b, ok := fallbackByte(t.pieces[id]); ok {
			group = append(group, b)
			continue
		}
		flush()
		sb.WriteString(strings.ReplaceAll(t.pieces[id], "▁", " "))
	}
	flush()
	s := sb.String()
	if t.stripSpace {
		s = strings.TrimPrefix(s, " ")
	}
	return s
}

// fallbackByte parses a SentencePiece byte token "<0xNN>".
func fallbackByte(piece string) (byte, bool) {
	if len(piece) != 6 || piece[:3] != "<0x" || piece[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexDigit(piece[3])
	lo, ok2 := hexDigit(piece[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// lossyUTF8 converts b to a string as Rust's String::from_utf8_lossy does:
// each maximal ill-formed subpart (Unicode §3.9, Table 3-7) becomes one
// U+FFFD. Go's own conversions substitute per byte or per run, which would
// disagree with Decode's reference, the library.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r != utf8.RuneError || n > 1 {
			sb.Write(b[:n])
			b = b[n:]
			continue
		}
		sb.WriteString("\uFFFD")
		b = b[maximalSubpart(b):]
	}
	return sb.String()
}

// maximalSubpart returns the length of the longest prefix of b that starts a
// well-formed UTF-8 sequence (at least 1); b[0] does not start a complete one.
func maximalSubpart(b []byte) int {
	var need int
	lo, hi := byte(0x80), byte(0xBF) // allowed range of the second byte
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}
