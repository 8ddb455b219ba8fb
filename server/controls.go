package server

import (
	"strconv"

	"github.com/sluicehq/sluice/server/stream"
)

// controlParams reads logit_bias (OpenAI's shape: token ids as JSON object
// keys), min_tokens, ignore_eos and stop_token_ids (vLLM's) for the stream
// core, which validates their ranges; the engine checks the ids against the
// vocabulary.
func (wr *wireRequest) controlParams(p *stream.Params) error {
	if n := len(wr.LogitBias); n > stream.MaxLogitBiasEntries {
		return stream.InvalidParam("logit_bias", "logit_bias has at most %d entries, got %d", stream.MaxLogitBiasEntries, n)
	}
	for k, v := range wr.LogitBias {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			return stream.InvalidParam("logit_bias", "logit_bias keys must be token ids, got %q", k)
		}
		if p.LogitBias == nil {
			p.LogitBias = make(map[int32]float64, len(wr.LogitBias))
		}
		p.LogitBias[int32(id)] = v
	}
	p.MinTokens, p.IgnoreEOS, p.StopTokenIDs = wr.MinTokens, wr.IgnoreEOS, wr.StopTokenIDs
	return nil
}
