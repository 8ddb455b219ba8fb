package tokenizer

import "strings"

// contextTokens is how many tokens before the first generated one the decoder
// keeps in its window: enough for a merge or a leading-space rule to see its
// left neighbour (vLLM uses the same 5).
const contextTokens = 5

// Decoder turns a stream of token ids into text incrementally, the windowed
// way vLLM and TGI do. It keeps two offsets into the ids it has seen:
//
//	ids:   ... | prefix ........ read | new ...
//	             └ already emitted ┘   └ not yet emitted
//
// Each Add decodes ids[prefix:read] and ids[prefix:]; the text the second has
// beyond the first is new. It is emitted only when it does not end in U+FFFD
// (the next token may complete a UTF-8 character); then the window slides to
// prefix=read, read=len(ids). Decoding a few tokens of left context rather than
// the new token alone keeps merge and space rules right (a SentencePiece
// "▁word" decodes to " word" after text but to "word" at the start).
//
// The concatenation of all Add results and Flush equals
// Decode(context+ids, true) minus the context's own text. Control tokens are
// skipped. A Decoder is used by one goroutine.
type Decoder struct {
	t          *Tokenizer
	ids        []int32
	prefix     int
	read       int
	prefixText string // Decode(ids[prefix:read]), valid when havePrefix
	havePrefix bool
	inBytes    bool // the last non-special id is a byte-fallback token
}

// NewDecoder returns a decoder for the ids that follow context (typically the
// prompt; only its last few tokens matter and none of its text is emitted).
func (t *Tokenizer) NewDecoder(context ...int32) *Decoder {
	if len(context) > contextTokens {
		context = context[len(context)-contextTokens:]
	}
	d := &Decoder{t: t, ids: append(make([]int32, 0, 64), context...)}
	d.read = len(d.ids)
	return d
}

// Add appends id and returns the text that became final with it, possibly "".
func (d *Decoder) Add(id int32) string {
	d.ids = append(d.ids, id)
	if !d.t.IsSpecial(id) {
		d.inBytes = d.t.isByteToken(id)
	}
	// SentencePiece byte-fallback tokens are decoded as a group (skipped
	// special tokens do not end one), and a later invalid byte turns the whole
	// group into U+FFFDs: text ending in a group is final only when it ends.
	if d.inBytes {
		return ""
	}
	return d.emit(false)
}

// Flush returns whatever text is still held back (an incomplete UTF-8
// sequence at the end decodes to U+FFFD, as Decode does).
func (d *Decoder) Flush() string {
	if d.read == len(d.ids) {
		return ""
	}
	return d.emit(true)
}

func (d *Decoder) emit(final bool) string {
	if !d.havePrefix {
		d.prefixText = d.t.Decode(d.ids[d.prefix:d.read], true)
		d.havePrefix = true
	}
	text := d.t.Decode(d.ids[d.prefix:], true)
	if !final && (len(text) <= len(d.prefixText) || strings.HasSuffix(text, "\uFFFD")) {
		return ""
	}
	var out string
	if strings.HasPrefix(text, d.prefixText) {
		out = text[len(d.prefixText):]
	} else {
		// A decoder whose output for a window is not a prefix of its output
		// for a longer one (none of the generated pipelines): emit what
		// differs, the best that can be done once text has been sent.
		out = text[commonPrefix(text, d.prefixText):]
	}
	d.prefix, d.read = d.read, len(d.ids)
	d.havePrefix = false
	// Keep the buffer short: only ids[prefix:] are ever decoded again.
	if d.prefix > 4*contextTokens {
		n := copy(d.ids, d.ids[d.prefix:])
		d.ids = d.ids[:n]
		d.read -= d.prefix
		d.prefix = 0
	}
	return out
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
