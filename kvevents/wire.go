package kvevents

import (
	"bytes"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/sluicehq/sluice/kvcache"
)

// encodeBatch writes one EventBatch in vLLM's positional layout (see doc.go).
// Consecutive stored blocks that chain (each one's parent the previous hash)
// share one BlockStored, as vLLM groups a request's blocks.
func encodeBatch(now time.Time, evs []event, blockSize int, medium string) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	runs := groupRuns(evs)
	err := first(
		enc.EncodeArrayLen(3),
		enc.EncodeFloat64(float64(now.UnixNano())/1e9),
		enc.EncodeArrayLen(len(runs)),
	)
	for _, r := range runs {
		if err != nil {
			break
		}
		err = encodeRun(enc, r, blockSize, medium)
	}
	if err == nil {
		err = enc.EncodeInt(0) // data_parallel_rank: one engine per process
	}
	return buf.Bytes(), err
}

// groupRuns splits evs into runs of one block group: a chain of stored
// blocks, consecutive removed blocks or a clear. Runs keep the events'
// order, so a consumer never sees a removal before a store that preceded it.
func groupRuns(evs []event) [][]event {
	var runs [][]event
	for i := 0; i < len(evs); {
		j := i + 1
		for evs[i].kind == stored && j < len(evs) && evs[j].kind == stored && evs[j].group == evs[i].group && evs[j].parent == evs[j-1].hash {
			j++
		}
		if evs[i].kind == removed {
			for j < len(evs) && evs[j].kind == removed && evs[j].group == evs[i].group {
				j++
			}
		}
		runs = append(runs, evs[i:j])
		i = j
	}
	return runs
}

func encodeRun(enc *msgpack.Encoder, run []event, blockSize int, medium string) error {
	g := run[0].group
	switch run[0].kind {
	case cleared:
		return first(enc.EncodeArrayLen(1), enc.EncodeString("AllBlocksCleared"))
	case removed:
		n := 3
		if g.Groups > 1 {
			n = 4
		}
		if err := first(enc.EncodeArrayLen(n), enc.EncodeString("BlockRemoved"), encodeHashes(enc, run)); err != nil {
			return err
		}
		if err := enc.EncodeString(medium); err != nil || n == 3 {
			return err
		}
		return enc.EncodeInt(int64(g.Index)) // group_idx
	}
	n := 8
	if g.Groups > 1 {
		n = 12
	}
	err := first(enc.EncodeArrayLen(n), enc.EncodeString("BlockStored"), encodeHashes(enc, run))
	if err != nil {
		return err
	}
	if run[0].parent == 0 {
		err = enc.EncodeNil()
	} else {
		err = enc.EncodeUint64(run[0].parent)
	}
	if err == nil {
		err = enc.EncodeArrayLen(len(run) * blockSize)
	}
	for _, ev := range run {
		for _, t := range ev.tokens {
			if err != nil {
				return err
			}
			err = enc.EncodeInt(int64(t))
		}
	}
	err = first(err,
		enc.EncodeInt(int64(blockSize)),
		enc.EncodeNil(), // lora_id: no adapters
		enc.EncodeString(medium),
		enc.EncodeNil(), // lora_name
	)
	if err != nil || n == 8 {
		return err
	}
	return encodeGroup(enc, g)
}

// encodeGroup writes BlockStored's trailing fields for a pool of two block
// groups, as vLLM names a hybrid model's KV cache groups (see doc.go).
func encodeGroup(enc *msgpack.Encoder, g kvcache.Group) error {
	err := first(
		enc.EncodeNil(), // extra_keys: no multimodal inputs, LoRA or salt enter the hash
		enc.EncodeInt(int64(g.Index)),
	)
	if g.Window == 0 {
		return first(err, enc.EncodeString("full_attention"), enc.EncodeNil())
	}
	return first(err, enc.EncodeString("sliding_window"), enc.EncodeInt(int64(g.Window)))
}

// encodeHashes writes fixed-width uint64s (see doc.go on llm-d's types).
func encodeHashes(enc *msgpack.Encoder, run []event) error {
	if err := enc.EncodeArrayLen(len(run)); err != nil {
		return err
	}
	for _, ev := range run {
		if err := enc.EncodeUint64(ev.hash); err != nil {
			return err
		}
	}
	return nil
}

// first returns the first non-nil error. Its arguments are all evaluated, so
// the encoder keeps writing after a failure; bytes.Buffer never fails, and
// the batch is discarded on error anyway.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
