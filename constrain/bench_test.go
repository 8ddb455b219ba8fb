package constrain_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/constrain"
)

// benchSchema has ten properties of the kinds agents send: strings (one
// with a pattern), integers with bounds, a number, a boolean, an enum, an
// array of strings and a nested object.
const benchSchema = `{"type":"object","properties":{
"id":{"type":"integer","minimum":0},
"name":{"type":"string","maxLength":40},
"email":{"type":"string","pattern":"^[a-z]+@[a-z]+\\.[a-z]{2,3}$"},
"age":{"type":"integer","minimum":0,"maximum":150},
"score":{"type":"number"},
"active":{"type":"boolean"},
"role":{"enum":["admin","user","guest"]},
"tags":{"type":"array","items":{"type":"string"},"maxItems":5},
"address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string"}},"required":["city","zip"],"additionalProperties":false},
"note":{"type":"string"}},
"required":["id","name","email","age","score","active","role","tags","address","note"],"additionalProperties":false}`

// benchDoc is a document of benchSchema in the layout the grammar fixes;
// its tokenization is the "model output" each stream replays.
const benchDoc = `{"id": 4182, "name": "Ada Lovelace", "email": "ada@example.org", "age": 36, "score": 97.25, "active": true, "role": "admin", "tags": ["math", "engines", "poetry"], "address": {"city": "London", "zip": "W1J 7NT"}, "note": "First to publish an algorithm meant for a machine."}`

// BenchmarkMask measures what constrained decoding adds per token: the
// mask computation for each stream (what the engine runs beside the
// forward pass) and the commit of the sampled token (on the loop). With 16
// streams the masks of one step run on 16 goroutines at once, as the
// engine runs them; us/mask is each mask's own latency then, and
// us/step the wall time of the whole step's masks.
func BenchmarkMask(b *testing.B) {
	tok, v := smolVocab(b)
	ids := tok.Encode(benchDoc, false)
	g := constrain.Grammar{Kind: constrain.JSONSchema, Data: benchSchema}
	for _, streams := range []int{1, 16} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			masks := make([][]uint32, streams)
			for i := range masks {
				masks[i] = make([]uint32, v.MaskWords())
			}
			var lat, steps, commits []time.Duration
			var mu sync.Mutex
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				ms := make([]*constrain.Matcher, streams)
				for i := range ms {
					m, err := v.NewMatcher(g)
					if err != nil {
						b.Fatal(err)
					}
					ms[i] = m
				}
				b.StartTimer()
				for _, id := range ids {
					start := time.Now()
					var wg sync.WaitGroup
					for i, m := range ms {
						wg.Go(func() {
							t0 := time.Now()
							if err := m.Mask(masks[i]); err != nil {
								b.Error(err)
							}
							d := time.Since(t0)
							mu.Lock()
							lat = append(lat, d)
							mu.Unlock()
						})
					}
					wg.Wait()
					steps = append(steps, time.Since(start))
					if masks[0][id/32]>>(id%32)&1 == 0 {
						b.Fatalf("the document's token %d is not allowed", id)
					}
					t0 := time.Now()
					for _, m := range ms {
						if err := m.Commit(id); err != nil {
							b.Fatal(err)
						}
					}
					commits = append(commits, time.Since(t0)/time.Duration(streams))
				}
			}
			report := func(ds []time.Duration, unit string) {
				slices.Sort(ds)
				var sum time.Duration
				for _, d := range ds {
					sum += d
				}
				b.ReportMetric(float64(sum.Microseconds())/float64(len(ds)), unit+"-mean")
				b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), unit+"-p99")
			}
			report(lat, "us/mask")
			report(steps, "us/step")
			report(commits, "us/commit")
			b.ReportMetric(float64(len(ids)), "tokens/doc")
		})
	}
}

// BenchmarkCompile is the cost a request pays in Prepare: the vocabulary's
// trie once per server (first line), the schema's grammar per request.
func BenchmarkCompile(b *testing.B) {
	tok, v := smolVocab(b)
	b.Run("vocab", func(b *testing.B) {
		for b.Loop() {
			if _, err := constrain.NewVocab(tok.HFJSON(), tok.VocabSize(), tok.EOGIDs()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tools", func(b *testing.B) { // what tool_choice "required" compiles for two tools
		for b.Loop() {
			if _, err := v.NewMatcher(constrain.Grammar{Kind: constrain.Lark, Data: toolsGrammar}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("schema", func(b *testing.B) {
		for b.Loop() {
			if _, err := v.NewMatcher(constrain.Grammar{Kind: constrain.JSONSchema, Data: benchSchema}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// toolsGrammar is server/stream's grammar for tool_choice "required" over
// two tools with parallel calls (toolGrammar's output for the e2e tests' tools).
const toolsGrammar = `start: block ("\n" block)*
block: "<tool_call>\n" call "\n</tool_call>"
call: %json {"x-guidance":{"whitespace_flexible":false,"item_separator":", ","key_separator":": "},"anyOf":[{"type":"object","properties":{"name":{"const":"get_weather"},"arguments":{"type":"object","properties":{"city":{"type":"string","maxLength":30},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false},{"type":"object","properties":{"name":{"const":"get_time"},"arguments":{"type":"object","properties":{"tz":{"type":"string","maxLength":30}},"required":["tz"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false}]}`

// BenchmarkMaskNoCall is the mask a tool_choice "none" reply pays per
// token (server/stream's noCallGrammar for the Hermes format): free text,
// so nearly every token is allowed, the dense case of the trie walk.
func BenchmarkMaskNoCall(b *testing.B) {
	tok, v := smolVocab(b)
	ids := tok.Encode(`I can't call tools here, but Paris is usually mild in spring: 12-18 °C, some rain. `+
		`Pack a light jacket; evenings cool down quickly. Would you like tips for <museums> or <cafés> near the Seine?`, false)
	g := constrain.TextWithout([]string{"<tool_call"}, nil)
	mask := make([]uint32, v.MaskWords())
	var lat []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		m, err := v.NewMatcher(g)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for _, id := range ids {
			t0 := time.Now()
			if err := m.Mask(mask); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			if mask[id/32]>>(id%32)&1 == 0 {
				b.Fatalf("the reply's token %d is not allowed", id)
			}
			if err := m.Commit(id); err != nil {
				b.Fatal(err)
			}
		}
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	b.ReportMetric(float64(sum.Microseconds())/float64(len(lat)), "us/mask-mean")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "us/mask-p99")
	b.ReportMetric(float64(len(ids)), "tokens/doc")
}
