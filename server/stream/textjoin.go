package stream

import "unicode/utf8"

// TextJoiner is the detokenizer of a text stream: upstream chunks may split
// a character between them (raw bytes of a multi-byte character, or the two
// halves of a JSON surrogate pair, "\ud83d" then "\ude00"), and Add returns
// only complete UTF-8, holding back a tail that the next chunk may complete.
//
// Input is WTF-8: UTF-8 in which a lone surrogate is encoded in three bytes
// (ED A0..BF xx), which is how a JSON string decoder that keeps unpaired
// surrogates renders them. A high surrogate followed by a low one becomes the
// character they encode; a byte that can never be part of a character
// becomes U+FFFD, as it would in any JSON decoder. A TextJoiner is owned by
// one goroutine.
type TextJoiner struct {
	tail []byte // an incomplete character (at most 5 bytes: a high surrogate and a lead byte)
	out  []byte
}

// Add appends b and returns the complete UTF-8 text that is ready.
func (j *TextJoiner) Add(b []byte) string {
	buf := b
	if len(j.tail) > 0 {
		buf = append(j.tail, b...)
	}
	j.out = j.out[:0]
	i := 0
	for i < len(buf) {
		c := buf[i]
		if c < utf8.RuneSelf {
			j.out = append(j.out, c)
			i++
			continue
		}
		n, complete := j.next(buf[i:])
		if !complete {
			break
		}
		i += n
	}
	j.tail = append(j.tail[:0:0], buf[i:]...)
	return string(j.out)
}

// Flush ends the stream. A character left incomplete can never be completed;
// it is dropped, never sent as U+FFFD (the same rule as TextStream.Finish).
func (j *TextJoiner) Flush() string {
	j.tail = nil
	return ""
}

// next decodes the non-ASCII sequence at the start of b into j.out and
// reports its length; complete is false when b ends before the sequence
// does and more input could finish it.
func (j *TextJoiner) next(b []byte) (n int, complete bool) {
	if hi, ok := surrogate(b); ok {
		if hi < 0xDC00 { // high: wants a low surrogate next
			if len(b) < 6 && prefixOfSurrogate(b[3:]) {
				return 0, false
			}
			if lo, ok := surrogate(b[3:]); ok && lo >= 0xDC00 {
				j.out = utf8.AppendRune(j.out, 0x10000+(hi-0xD800)<<10+(lo-0xDC00))
				return 6, true
			}
		}
		j.out = utf8.AppendRune(j.out, utf8.RuneError)
		return 3, true
	}
	if !utf8.FullRune(b) {
		return 0, false
	}
	if len(b) >= 2 && b[0] == 0xED && b[1] >= 0xA0 && len(b) < 3 {
		return 0, false // a surrogate's first two bytes
	}
	r, size := utf8.DecodeRune(b)
	j.out = utf8.AppendRune(j.out, r) // RuneError for an invalid byte
	return size, true
}

// surrogate decodes a WTF-8 surrogate (ED A0..BF 80..BF) at the start of b.
func surrogate(b []byte) (rune, bool) {
	if len(b) < 3 || b[0] != 0xED || b[1] < 0xA0 || b[1] > 0xBF || b[2]&0xC0 != 0x80 {
		return 0, false
	}
	return 0xD000 | rune(b[1]&0x3F)<<6 | rune(b[2]&0x3F), true
}

// prefixOfSurrogate reports whether b (shorter than 3 bytes) could still
// become a low surrogate.
func prefixOfSurrogate(b []byte) bool {
	switch len(b) {
	case 0:
		return true
	case 1:
		return b[0] == 0xED
	default:
		return b[0] == 0xED && b[1] >= 0xB0 && b[1] <= 0xBF
	}
}
