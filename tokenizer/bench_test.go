package tokenizer_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/tokenizer"
)

// benchTexts are about 1,000 tokens each of prose, code and Japanese.
var benchTexts = []struct{ name, text string }{
	{"prose", strings.Repeat("The river rose before dawn, grey and quiet, carrying leaves from the hills above the town. ", 50)},
	{"code", strings.Repeat("func fib(n int) int {\n\tif n < 2 {\n\t\treturn n\n\t}\n\treturn fib(n-1) + fib(n-2)\n}\n", 40)},
	{"japanese", strings.Repeat("日本の首都は東京です。東京には多くの人が住んでいます。", 40)},
}

// BenchmarkEncode reports prompt tokenization speed in tokens/s.
func BenchmarkEncode(b *testing.B) {
	tok := smolTokenizer(b)
	for _, bt := range benchTexts {
		b.Run(bt.name, func(b *testing.B) {
			n := len(tok.Encode(bt.text, false))
			b.SetBytes(int64(len(bt.text)))
			b.ReportAllocs()
			for b.Loop() {
				tok.Encode(bt.text, false)
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkDecode reports whole-sequence detokenization speed in tokens/s.
func BenchmarkDecode(b *testing.B) {
	tok := smolTokenizer(b)
	for _, bt := range benchTexts {
		ids := tok.Encode(bt.text, false)
		b.Run(bt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tok.Decode(ids, true)
			}
			b.ReportMetric(float64(len(ids)*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkDecoderAdd reports the cost of streaming one token through the
// incremental Decoder, the work the server does per generated token.
func BenchmarkDecoderAdd(b *testing.B) {
	tok := smolTokenizer(b)
	for _, bt := range benchTexts {
		ids := tok.Encode(bt.text, false)
		b.Run(bt.name, func(b *testing.B) {
			b.ReportAllocs()
			var d = tok.NewDecoder()
			i := 0
			for b.Loop() {
				if i == len(ids) {
					d, i = tok.NewDecoder(), 0
				}
				d.Add(ids[i])
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkNew reports the cost of building the tokenizer from the GGUF
// vocabulary at model load (tokenizer.json generation plus the library's
// parse).
func BenchmarkNew(b *testing.B) {
	smolTokenizer(b) // skips without the model
	f, err := models.OpenGGUF(smolPath())
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	v, err := f.Vocab()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		tok, err := tokenizer.New(v)
		if err != nil {
			b.Fatal(err)
		}
		tok.Close()
	}
}
