package stream

import "strings"

// TextStream is the framing-independent core of the stream writer: it turns
// a sequence's tokens into text that is safe to send. Safe means complete
// UTF-8 (the Detokenizer's job) and never any part of a stop string: a suffix
// that could still grow into a stop string is held back until the next token
// decides it, and a matched stop string and everything after it are dropped.
//
// Invariant: Sent() is exactly the concatenation of the texts Push and
// Finish returned; held-back text is never counted as sent. IDs() is every
// token consumed, whether its text was sent, held or cut by a stop string,
// so a resumed generation can re-admit them.
//
// A TextStream is owned by one goroutine at a time.
type TextStream struct {
	dec     Detokenizer
	stops   []string
	held    string // pending text: a proper prefix of some stop string
	ids     []int32
	sent    int // bytes returned so far
	stopped bool
	matched string // the stop string that matched, once stopped
}

// NewTextStream returns a TextStream over dec that cuts at any of stops
// (empty strings are ignored).
func NewTextStream(dec Detokenizer, stops []string) *TextStream {
	t := &TextStream{dec: dec}
	for _, s := range stops {
		if s != "" {
			t.stops = append(t.stops, s)
		}
	}
	return t
}

// Push consumes one token and returns the text that may be sent now. stopped
// reports that a stop string matched: the text before it is returned, and
// every later Push returns "" (the caller aborts the sequence).
func (t *TextStream) Push(id int32) (text string, stopped bool) {
	if t.stopped {
		return "", true
	}
	t.ids = append(t.ids, id)
	return t.release(t.dec.Add(id))
}

// Finish ends the stream: the detokenizer's remainder and any held-back text
// that did not become a stop string are returned. A character the output
// ended in the middle of (generation stopped by length between the bytes of
// one character) can never complete: the detokenizer renders it as U+FFFD,
// and it is dropped rather than sent.
func (t *TextStream) Finish() string {
	if t.stopped {
		return ""
	}
	text, _ := t.release(strings.TrimRight(t.dec.Flush(), "\uFFFD"))
	text += t.held
	t.sent += len(t.held)
	t.held = ""
	return text
}

// release appends fresh text to the held text, cuts at the earliest stop
// string, and holds back the longest suffix that is a prefix of a stop string.
func (t *TextStream) release(fresh string) (string, bool) {
	if len(t.stops) == 0 {
		t.sent += len(fresh)
		return fresh, false
	}
	buf := fresh
	if t.held != "" {
		buf = t.held + fresh
	}
	if cut, stop := t.firstStop(buf); cut >= 0 {
		t.stopped = true
		t.matched = stop
		t.held = ""
		t.sent += cut
		return buf[:cut], true
	}
	keep := len(buf) - t.holdBack(buf)
	t.held = buf[keep:]
	t.sent += keep
	return buf[:keep], false
}

// firstStop finds the stop string that a reader scanning buf character by
// character would see complete first: the match ending earliest, and of
// those the one starting earliest. Which stop ends the text therefore does
// not depend on how the text was cut into tokens (with stops "N" and "END",
// "0ENDING" ends after "0E" whether it arrives as one token or seven). It
// returns the match's byte offset and the stop string, or -1.
func (t *TextStream) firstStop(buf string) (int, string) {
	cut, end, stop := -1, 0, ""
	for _, s := range t.stops {
		i := strings.Index(buf, s)
		if i < 0 {
			continue
		}
		// The earliest-starting occurrence of s also ends earliest.
		if e := i + len(s); cut < 0 || e < end || (e == end && i < cut) {
			cut, end, stop = i, e, s
		}
	}
	return cut, stop
}

// holdBack is the length of the longest suffix of buf that is a proper
// prefix of a stop string. The suffix starts where a stop string starts, so
// it begins on a UTF-8 boundary whenever buf is valid UTF-8.
func (t *TextStream) holdBack(buf string) int {
	longest := 0
	for _, s := range t.stops {
		n := min(len(s)-1, len(buf))
		for ; n > longest; n-- {
			if buf[len(buf)-n:] == s[:n] {
				longest = n
				break
			}
		}
	}
	return longest
}

// IDs returns every token consumed so far. The slice is shared; do not modify.
func (t *TextStream) IDs() []int32 { return t.ids }

// Sent returns how many bytes of text Push and Finish have returned.
func (t *TextStream) Sent() int { return t.sent }

// Held returns the text held back, waiting for the next token.
func (t *TextStream) Held() string { return t.held }

// Stopped reports whether a stop string matched.
func (t *TextStream) Stopped() bool { return t.stopped }

// Matched returns the stop string that ended the stream ("" while none
// has): the Messages API reports it as stop_sequence.
func (t *TextStream) Matched() string { return t.matched }
