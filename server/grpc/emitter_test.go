package grpcserver

import (
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/stream"
)

// TestChunkEmitterOrder: a message's text comes before its tool calls, so
// text after a call starts a new message; logprobs go with the ids of the
// Text they preceded, whichever message carries those ids; nothing empty is
// sent.
func TestChunkEmitterOrder(t *testing.T) {
	var sent []piece
	e := &chunkEmitter{send: func(p *piece) error {
		c := *p
		c.ids, c.lps, c.calls = append([]int32(nil), p.ids...), append([]engine.Logprob(nil), p.lps...), append([]stream.ToolCallDelta(nil), p.calls...)
		sent = append(sent, c)
		return nil
	}}
	lp := func(v float32) engine.Logprob { return engine.Logprob{Logprob: v} }
	e.Logprobs([]engine.Logprob{lp(-1), lp(-2)})
	_ = e.Text("Sure. ", []int32{1, 2})
	_ = e.ToolCall(stream.ToolCallDelta{Index: 0, ID: "call_1", Name: "f"})
	_ = e.ToolCall(stream.ToolCallDelta{Index: 0, Arguments: `{"a":`})
	e.Logprobs([]engine.Logprob{lp(-3)})
	_ = e.Text("", []int32{3}) // ids of held-back call text: no new message
	_ = e.Text("Done.", nil)
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 || sent[0].text != "Sure. " || len(sent[0].calls) != 2 || sent[1].text != "Done." {
		t.Fatalf("sent %+v", sent)
	}
	// The ids of the held-back text went with the message holding the
	// calls (no text after them yet), and so did their logprob.
	if !reflect.DeepEqual(sent[0].ids, []int32{1, 2, 3}) || len(sent[0].lps) != 3 || sent[0].lps[2].Logprob != -3 || len(sent[1].ids) != 0 {
		t.Fatalf("ids and logprobs: %+v", sent)
	}
	if err := e.Flush(); err != nil || len(sent) != 2 {
		t.Fatalf("an empty Flush sent %d messages (err %v)", len(sent)-2, err)
	}
}
