package tokenizer_test

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/tokenizer"
)

// refSPM is llama.cpp's SentencePiece tokenizer (llm_tokenizer_spm_session in
// llama-vocab.cpp) ported as directly as Go allows, for text without special
// tokens: prefix a space, spaces to ▁, then repeatedly merge the adjacent pair
// whose concatenation is the highest-scoring piece (leftmost on ties), and
// spell what is left without a piece as <0xNN> byte tokens.
func refSPM(ids map[string]int32, scores []float32, text string, addSpacePrefix bool) []int32 {
	if text == "" {
		return nil // llama.cpp makes no fragment of empty text
	}
	if addSpacePrefix {
		text = " " + text
	}
	text = strings.ReplaceAll(text, " ", "▁")
	type symbol struct {
		start, n   int
		prev, next int
	}
	var syms []symbol
	for off := 0; off < len(text); {
		_, n := utf8.DecodeRuneInString(text[off:])
		syms = append(syms, symbol{start: off, n: n, prev: len(syms) - 1, next: len(syms) + 1})
		off += n
	}
	if len(syms) == 0 {
		return nil
	}
	syms[len(syms)-1].next = -1
	q := &bigramQueue{}
	revMerge := map[string][2]int{}
	tryAdd := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		s := text[syms[l].start : syms[l].start+syms[l].n+syms[r].n]
		id, ok := ids[s]
		if !ok {
			return
		}
		heap.Push(q, bigram{left: l, right: r, score: scores[id], size: len(s)})
		revMerge[s] = [2]int{l, r}
	}
	for i := 1; i < len(syms); i++ {
		tryAdd(i-1, i)
	}
	for q.Len() > 0 {
		b := heap.Pop(q).(bigram)
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		tryAdd(l.prev, b.left)
		tryAdd(b.left, l.next)
	}
	var out []int32
	var resegment func(i int)
	resegment = func(i int) {
		s := text[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := ids[s]; ok {
			out = append(out, id)
			return
		}
		if p, ok := revMerge[s]; ok {
			resegment(p[0])
			resegment(p[1])
			return
		}
		for j := range len(s) {
			out = append(out, ids[fmt.Sprintf("<0x%02X>", s[j])])
		}
	}
	for i := 0; i != -1; i = syms[i].next {
		resegment(i)
	}
	return out
}

type bigram struct {
	left, right int
	score       float32
	size        int
}

// bigramQueue pops the highest score first, then the leftmost.
type bigramQueue []bigram

func (q bigramQueue) Len() int { return len(q) }
func (q bigramQueue) Less(i, j int) bool {
	return q[i].score > q[j].score || q[i].score == q[j].score && q[i].left < q[j].left
}
func (q bigramQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *bigramQueue) Push(x any)   { *q = append(*q, x.(bigram)) }
func (q *bigramQueue) Pop() any {
	old := *q
	b := old[len(old)-1]
	*q = old[:len(old)-1]
	return b
}

// spmFromSmol turns SmolLM2's byte-level BPE vocabulary into a SentencePiece
// one laid out like Llama's (<unk>, <s>, </s>, 256 byte tokens, pieces):
// every piece that is whole UTF-8 text, spaces as ▁, scored by BPE rank, plus
// every character they use as a low-scoring single-character piece, as
// SentencePiece guarantees. 48k real pieces exercise the merge derivation far
// beyond a hand-made vocabulary.
func spmFromSmol(tb testing.TB) *tokenizer.Vocab {
	tb.Helper()
	smolTokenizer(tb) // skips without the model file
	f, err := models.OpenGGUF(smolPath())
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	bpe, err := f.Vocab()
	if err != nil {
		tb.Fatal(err)
	}
	v := &tokenizer.Vocab{Model: "llama", BOS: 1, EOS: 2, EOT: -1, EOM: -1, Unknown: 0, Pad: -1, AddBOS: true, AddSpacePrefix: true}
	seen := map[string]bool{}
	add := func(s string, typ int32, score float32) {
		if seen[s] {
			return
		}
		seen[s] = true
		v.Tokens = append(v.Tokens, s)
		v.TokenTypes = append(v.TokenTypes, typ)
		v.Scores = append(v.Scores, score)
	}
	add("<unk>", 2, 0)
	add("<s>", 3, 0)
	add("</s>", 3, 0)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), 6, 0)
	}
	var pieces []string
	chars := map[rune]bool{}
	for i, s := range bpe.Tokens {
		if bpe.TokenTypes[i] != 1 {
			continue
		}
		text := string(byteLevelDecode(s))
		if !utf8.ValidString(text) || text == "" {
			continue
		}
		piece := strings.ReplaceAll(text, " ", "▁")
		pieces = append(pieces, piece)
		for _, r := range piece {
			chars[r] = true
		}
	}
	sorted := make([]rune, 0, len(chars))
	for r := range chars {
		sorted = append(sorted, r)
	}
	slices.Sort(sorted)
	for _, r := range sorted {
		add(string(r), 1, -1e6)
	}
	for i, p := range pieces {
		add(p, 1, -float32(i))
	}
	return v
}

// byteLevelDecode maps a byte-level token back to its bytes.
func byteLevelDecode(s string) []byte {
	var out []byte
	for _, r := range s {
		out = append(out, byteOfRune[r])
	}
	return out
}

// byteOfRune inverts GPT-2's bytes_to_unicode.
var byteOfRune = func() map[rune]byte {
	inv := map[rune]byte{}
	n := 0
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			inv[rune(b)] = byte(b)
		} else {
			inv[rune(256+n)] = byte(b)
			n++
		}
	}
	return inv
}()

// The SentencePiece tokenizer New builds (BPE with merges derived from the
// scores) gives llama.cpp's ids.
func TestSPMMatchesLlamaCpp(t *testing.T) {
	v := spmFromSmol(t)
	start := time.Now()
	tok, err := tokenizer.New(v)
	t.Logf("New: %v", time.Since(start))
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	ids := map[string]int32{}
	for i, s := range v.Tokens {
		ids[s] = int32(i)
	}
	texts := append(slices.Clone(smolTexts[2:]), // without the control tokens
		"Hello, world! 12345 items.",
		"The quick brown fox jumps over the lazy dog. The lazy dog, however, was not amused, and",
		"package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
		"今天天气很好，我们一起去公园散步吧。", "Русский: привет. العربية: مرحبا. हिन्दी: नमस्ते.",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "    four spaces and a tab\there", "",
	)
	for _, text := range texts {
		want := refSPM(ids, v.Scores, text, true)
		if got := tok.Encode(text, false); !slices.Equal(got, want) {
			t.Errorf("Encode(%q)\n got %v\nwant %v (llama.cpp's algorithm)", text, got, want)
		}
		if got := tok.Decode(tok.Encode(text, true), true); got != text {
			t.Errorf("round trip %q: %q", text, got)
		}
	}
}
