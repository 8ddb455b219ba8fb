package relay

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/server/stream"
)

// Tool calls through the relay: each API's streamed call deltas are read
// into stream.ToolCallDelta, the stream core's one shape (a call's first
// delta carries its id and name, the rest argument fragments), and the
// client's edge writes them back in its API's shape. The upstream's ids are
// kept as it gave them: the client answers a call by its id, and that
// answer goes to the same upstream.

// wireToolDelta is one entry of a chat chunk's delta.tool_calls.
type wireToolDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function *struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// toolCalls follows a stream's calls by their index: the first delta of a
// call must name it, and its argument fragments are joined as text is (a
// character split across chunks).
type toolCalls struct {
	calls   map[int]*toolCall
	resumed bool // a call may continue from before this stream
}

type toolCall struct {
	id, name string
	joiner   stream.TextJoiner
}

// open starts call i (id and name given) or returns the started one.
func (t *toolCalls) open(i int, id, name string) (*toolCall, bool, error) {
	if c, ok := t.calls[i]; ok {
		if (id != "" && id != c.id) || (name != "" && name != c.name) {
			return nil, false, fmt.Errorf("tool call %d renamed mid-stream (%q %q after %q %q)", i, id, name, c.id, c.name)
		}
		return c, false, nil
	}
	if t.calls == nil {
		t.calls = map[int]*toolCall{}
	}
	if id == "" && name == "" && t.resumed {
		c := &toolCall{} // the call's start went out before the resume
		t.calls[i] = c
		return c, false, nil
	}
	if id == "" || name == "" {
		return nil, false, fmt.Errorf("tool call %d's first delta has no id or no function name", i)
	}
	c := &toolCall{id: id, name: name}
	t.calls[i] = c
	return c, true, nil
}

var errArgs = errors.New("tool call arguments are not a string")

// delta is call i's next delta: its id and name the first time, and the
// arguments fragment raw (a JSON string) joined.
func (t *toolCalls) delta(i int, id, name string, raw json.RawMessage) (stream.ToolCallDelta, error) {
	c, first, err := t.open(i, id, name)
	if err != nil {
		return stream.ToolCallDelta{}, err
	}
	b, ok := decodeString(raw)
	if !ok {
		return stream.ToolCallDelta{}, errArgs
	}
	d := stream.ToolCallDelta{Index: i, Arguments: c.joiner.Add(b)}
	if first {
		d.ID, d.Name = c.id, c.name
	}
	return d, nil
}

// chatTool reads one delta.tool_calls entry.
func (p *parser) chatTool(w wireToolDelta) (stream.ToolCallDelta, error) {
	if w.Index == nil || *w.Index < 0 {
		return stream.ToolCallDelta{}, errors.New("a tool call delta without its index")
	}
	if w.Type != "" && w.Type != "function" {
		return stream.ToolCallDelta{}, fmt.Errorf("a tool call of type %q (the relay carries functions)", w.Type)
	}
	var name string
	var args json.RawMessage
	if f := w.Function; f != nil {
		if f.Name != nil {
			name = *f.Name
		}
		args = f.Arguments
	}
	return p.calls.delta(*w.Index, w.ID, name, args)
}
