package web

import (
	"encoding/json"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// statusJSON is the wire shape of a frame: durations in milliseconds,
// times in Unix milliseconds, names the page reads.
type statusJSON struct {
	Frame     uint64  `json:"frame"`
	At        int64   `json:"at"`
	Steps     int64   `json:"steps"`
	BlockSize int     `json:"block_size"`
	Running   int     `json:"running"`
	Waiting   int     `json:"waiting"`
	KV        kvJSON  `json:"kv"`
	Step      stepRow `json:"step"`
	Busy      float64 `json:"busy_ms"` // total time in steps

	PromptTokens    int64   `json:"prompt_tokens"`
	GenTokens       int64   `json:"gen_tokens"`
	Finished        int64   `json:"finished"`
	Aborted         int64   `json:"aborted"`
	Preemptions     int64   `json:"preemptions"`
	PrefixHitTokens int64   `json:"prefix_hit_tokens"`
	Evictions       int64   `json:"evictions"`
	Reclaims        int64   `json:"reclaims"`
	ReclaimMax      float64 `json:"reclaim_max_ms"`

	Seqs []seqJSON `json:"seqs"`
	Ends []endJSON `json:"ends"`
}

type kvJSON struct {
	Total  int `json:"total"`
	Free   int `json:"free"`
	Used   int `json:"used"`
	Cached int `json:"cached"`
}

type stepRow struct {
	MS     float64 `json:"ms"`
	Rows   int     `json:"rows"`
	Seqs   int     `json:"seqs"`
	Prompt int     `json:"prompt"`
	Decode int     `json:"decode"`
}

type seqJSON struct {
	ID       uint64  `json:"id"`
	Running  bool    `json:"running"`
	Prompt   int     `json:"prompt"`
	Tokens   int     `json:"tokens"`
	Computed int     `json:"computed"`
	Cached   int     `json:"cached"`
	Blocks   []int32 `json:"blocks"`
}

type endJSON struct {
	N       uint64  `json:"n"`
	ID      uint64  `json:"id"`
	Step    int64   `json:"step"`
	At      int64   `json:"at"`
	Finish  string  `json:"finish"`
	Cause   string  `json:"cause,omitempty"`
	Blocks  int     `json:"blocks"`
	Reclaim float64 `json:"reclaim_ms"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func encodeStatus(st *engine.Status) []byte { return encodeStatusFor(st, "") }

// encodeStatusFor is the frame as tenant sees it: the engine-wide figures
// (counts, KV use, step times: no request's content) and only tenant's own
// sequences and ends ("" = every one).
func encodeStatusFor(st *engine.Status, tenant string) []byte {
	j := statusJSON{
		Frame: st.Frame, At: st.At.UnixMilli(), Steps: st.Steps, BlockSize: st.BlockSize,
		Running: st.Running, Waiting: st.Waiting,
		KV:   kvJSON{Total: st.KV.Total, Free: st.KV.Free, Used: st.KV.Used, Cached: st.KV.Cached},
		Step: stepRow{MS: ms(st.LastStep), Rows: st.LastBatchRows, Seqs: st.LastBatchSeqs, Prompt: st.StepPromptTokens, Decode: st.StepDecodeTokens},
		Busy: ms(st.BusyTime), PromptTokens: st.PromptTokens, GenTokens: st.GenTokens,
		Finished: st.Finished, Aborted: st.Aborted, Preemptions: st.Preemptions,
		PrefixHitTokens: st.PrefixHitTokens, Evictions: st.KVEvicts,
		Reclaims: st.Reclaims, ReclaimMax: ms(st.ReclaimMax),
		Seqs: make([]seqJSON, 0, len(st.Seqs)), Ends: make([]endJSON, 0, len(st.Ends)),
	}
	for _, q := range st.Seqs {
		if tenant != "" && q.Tenant != tenant {
			continue
		}
		blocks := q.Blocks
		if blocks == nil {
			blocks = []int32{}
		}
		j.Seqs = append(j.Seqs, seqJSON{ID: q.ID, Running: q.Running, Prompt: q.Prompt, Tokens: q.Tokens, Computed: q.Computed, Cached: q.Cached, Blocks: blocks})
	}
	for _, e := range st.Ends {
		if tenant != "" && e.Tenant != tenant {
			continue
		}
		j.Ends = append(j.Ends, endJSON{N: e.N, ID: e.ID, Step: e.Step, At: e.At.UnixMilli(), Finish: string(e.Finish), Cause: string(e.Cause), Blocks: e.Blocks, Reclaim: ms(e.Reclaim)})
	}
	b, err := json.Marshal(j)
	if err != nil {
		panic(err) // plain numbers, strings and slices: cannot fail
	}
	return b
}
