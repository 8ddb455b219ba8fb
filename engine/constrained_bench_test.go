package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/constrain"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/tokenizer"
)

// benchSchema is constrain's 10-property benchmark schema; its documents
// are longer than the 32 tokens decoded here, so every constrained stream
// runs the full length, as the unconstrained ones do.
const benchSchema = `{"type":"object","properties":{"id":{"type":"integer","minimum":0},"name":{"type":"string","maxLength":40},"email":{"type":"string","pattern":"^[a-z]+@[a-z]+\\.[a-z]{2,3}$"},"age":{"type":"integer","minimum":0,"maximum":150},"score":{"type":"number"},"active":{"type":"boolean"},"role":{"enum":["admin","user","guest"]},"tags":{"type":"array","items":{"type":"string"},"maxItems":5},"address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string"}},"required":["city","zip"],"additionalProperties":false},"note":{"type":"string"}},"required":["id","name","email","age","score","active","role","tags","address","note"],"additionalProperties":false}`

// BenchmarkSmolLM2Constrained: aggregate decode tokens/s of 16 streams on
// the default model, every stream constrained to benchSchema or none; the
// masks run beside the forward pass (Request.Constraint). The ratio of the
// two is what structured outputs cost a full batch.
func BenchmarkSmolLM2Constrained(b *testing.B) {
	path := smolPath(b)
	src, err := models.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	v, err := src.Vocab()
	src.Close()
	if err != nil {
		b.Fatal(err)
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		b.Fatal(err)
	}
	defer tok.Close()
	vocab, err := constrain.NewVocab(tok.HFJSON(), tok.VocabSize(), tok.EOGIDs())
	if err != nil {
		b.Fatal(err)
	}
	const c, plen, gen = 16, 16, 32
	blocks := c*(plen+gen+15)/16 + 8
	m := loadModel(b, path, 2, blocks, 16, 512, c)
	e := newEngineOn(b, m, Config{Blocks: blocks, BlockSize: 16, MaxBatchTokens: 512, MaxSeqs: c, MaxQueue: c, EOG: tok.EOGIDs()})
	for _, constrained := range []bool{false, true} {
		b.Run(fmt.Sprintf("constrained=%v", constrained), func(b *testing.B) {
			var decode time.Duration
			tokens := 0
			for b.Loop() {
				seqs := make([]*Sequence, c)
				for i := range seqs {
					req := Request{Prompt: prompt(plen, int32(i), 49152), MaxTokens: gen}
					if constrained {
						mt, err := vocab.NewMatcher(constrain.Grammar{Kind: constrain.JSONSchema, Data: benchSchema})
						if err != nil {
							b.Fatal(err)
						}
						req.Constraint = mt
					}
					seqs[i] = submit(b, e, req)
				}
				var lastFirst time.Time
				for _, s := range seqs {
					<-s.Tokens()
					lastFirst = time.Now()
				}
				for _, s := range seqs {
					for range s.Tokens() {
						tokens++
					}
					if r := s.Result(); r.Finish != FinishLength {
						b.Fatalf("a stream ended with %v (%v) before %d tokens", r.Finish, r.Err, gen)
					}
				}
				decode += time.Since(lastFirst)
			}
			b.ReportMetric(float64(tokens)/decode.Seconds(), "decode-tok/s")
		})
	}
}
