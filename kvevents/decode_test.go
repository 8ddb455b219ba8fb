package kvevents

import (
	"encoding/binary"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// The decoding below follows llm-d's vLLM adapter (llm-d-kv-cache,
// pkg/kvevents/engineadapter/vllm_adapter.go): the batch as a positional
// array, each event decoded into []any and read by position with the same
// type switches, so a field llm-d could not read fails here too.

type wireBatch struct {
	_      struct{} `msgpack:",array"`
	TS     float64
	Events []msgpack.RawMessage
	Rank   *int `msgpack:",omitempty"`
}

type decoded struct {
	topic  string
	seq    uint64
	ts     float64
	events []any // *storedEv, *removedEv or clearedEv
}

type storedEv struct {
	hashes    []uint64
	parent    uint64 // 0: none
	tokens    []uint32
	blockSize int
	medium    string
	// A hybrid model's KV cache group, as vLLM names it (fields 9–11);
	// kind "" when the event has none.
	group  int
	kind   string
	window int
}

type removedEv struct {
	hashes  []uint64
	medium  string
	group   int
	grouped bool // the event names its group (field 3)
}

type clearedEv struct{}

func decodeMessage(frames [][]byte) (decoded, error) {
	if len(frames) != 3 || len(frames[1]) != 8 {
		return decoded{}, fmt.Errorf("want 3 frames with an 8-byte sequence, got %d", len(frames))
	}
	d := decoded{topic: string(frames[0]), seq: binary.BigEndian.Uint64(frames[1])}
	var b wireBatch
	if err := msgpack.Unmarshal(frames[2], &b); err != nil {
		return d, fmt.Errorf("batch: %w", err)
	}
	d.ts = b.TS
	for _, raw := range b.Events {
		var f []any
		if err := msgpack.Unmarshal(raw, &f); err != nil {
			return d, fmt.Errorf("event: %w", err)
		}
		ev, err := decodeEvent(f)
		if err != nil {
			return d, err
		}
		d.events = append(d.events, ev)
	}
	return d, nil
}

func decodeEvent(f []any) (any, error) {
	tag, _ := f[0].(string)
	switch tag {
	case "BlockStored":
		if len(f) < 5 {
			return nil, fmt.Errorf("BlockStored: %d fields", len(f))
		}
		ev := &storedEv{}
		var err error
		if ev.hashes, err = hashes(f[1]); err != nil {
			return nil, err
		}
		if f[2] != nil {
			if ev.parent, err = hash(f[2]); err != nil {
				return nil, err
			}
		}
		arr, ok := f[3].([]any)
		if !ok {
			return nil, fmt.Errorf("token_ids %T", f[3])
		}
		for _, v := range arr {
			n, err := toInt(v)
			if err != nil {
				return nil, err
			}
			ev.tokens = append(ev.tokens, uint32(n))
		}
		if ev.blockSize, err = toInt(f[4]); err != nil {
			return nil, err
		}
		if len(f) > 6 && f[6] != nil {
			ev.medium, _ = f[6].(string)
		}
		if len(f) > 5 && f[5] != nil || len(f) > 7 && f[7] != nil {
			return nil, fmt.Errorf("BlockStored: a LoRA id or name %v %v", f[5], f[7])
		}
		if len(f) == 8 {
			return ev, nil
		}
		if len(f) != 12 || f[8] != nil {
			return nil, fmt.Errorf("BlockStored: %d fields, extra_keys %v", len(f), f[min(8, len(f)-1)])
		}
		if ev.group, err = toInt(f[9]); err != nil {
			return nil, err
		}
		ev.kind, _ = f[10].(string)
		if f[11] != nil {
			if ev.window, err = toInt(f[11]); err != nil {
				return nil, err
			}
		}
		return ev, nil
	case "BlockRemoved":
		ev := &removedEv{}
		var err error
		if ev.hashes, err = hashes(f[1]); err != nil {
			return nil, err
		}
		if len(f) > 2 && f[2] != nil {
			ev.medium, _ = f[2].(string)
		}
		if len(f) > 3 {
			ev.grouped = true
			if ev.group, err = toInt(f[3]); err != nil {
				return nil, err
			}
		}
		return ev, nil
	case "AllBlocksCleared":
		return clearedEv{}, nil
	}
	return nil, fmt.Errorf("unknown tag %v", f[0])
}

func hashes(raw any) ([]uint64, error) {
	arr, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("block_hashes %T", raw)
	}
	out := make([]uint64, len(arr))
	for i, v := range arr {
		h, err := hash(v)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// hash accepts what llm-d's getHashAsUint64 accepts (bytes aside: Sluice
// never sends them).
func hash(raw any) (uint64, error) {
	switch v := raw.(type) {
	case uint64:
		return v, nil
	case int64:
		return uint64(v), nil
	}
	return 0, fmt.Errorf("hash of type %T: llm-d rejects it", raw)
}

func toInt(raw any) (int, error) {
	switch v := raw.(type) {
	case int8:
		return int(v), nil
	case int16:
		return int(v), nil
	case int32:
		return int(v), nil
	case int64:
		return int(v), nil
	case uint8:
		return int(v), nil
	case uint16:
		return int(v), nil
	case uint32:
		return int(v), nil
	case uint64:
		return int(v), nil
	}
	return 0, fmt.Errorf("number of type %T", raw)
}
