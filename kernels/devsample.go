package kernels

import "os"

// DeviceSampler is an optional capability of a Backend that keeps the
// logits where they were computed: it samples rows of an F32 logits tensor
// ([rows, vocab], as a model's forward pass leaves it) on the device, so
// that only token ids cross to the host, and copies back only the rows the
// caller must sample itself. The engine finds it by type assertion
// (SamplerOf); a backend without it (the CPU's, whose logits are host
// memory already) is sampled on the host. Its methods are called from the
// backend's one goroutine, like the Ops.
type DeviceSampler interface {
	// MaskLogits sets to −Inf the logits of the tokens each row's bitset
	// does not allow (token t allowed when bit t%32 of masks[r][t/32] is
	// set, (vocab+31)/32 words); nil rows are left as they are. It is
	// recorded like an op and runs before a SampleRows or ReadRows that
	// follows.
	MaskLogits(logits Tensor, masks [][]uint32) error
	// SampleRows picks one token for each of the first len(params) rows of
	// logits and writes the ids to dst (len(dst) = len(params)), Undecided
	// for a row the device does not decide: the caller samples that row
	// from its logits with the same draw U. Logits are left as they were.
	SampleRows(logits Tensor, params []SampleParams, dst []int32) error
	// LogprobRows computes each asked row's logprobs (log_softmax of the
	// row, the sampled token's and its K most likely tokens') into dst, one
	// per LogprobRow: only those figures cross, not the row.
	LogprobRows(logits Tensor, rows []LogprobRow, dst []RowLogprobs) error
	// ReadRows waits for queued work and copies row rows[i] of logits to
	// dst[i*vocab:(i+1)*vocab].
	ReadRows(logits Tensor, rows []int32, dst []float32) error
	// Sync runs the recorded work and waits for it: a caller with host work
	// of its own to finish before sampling starts the forward pass with it.
	Sync() error
	// DeviceToHostBytes counts the bytes copied from the device to the host
	// since the backend was made (logits, token ids: every download).
	DeviceToHostBytes() int64
}

// SampleParams are one row's sampling settings, with the engine's meaning
// (llama.cpp's chain: penalties → top-k → top-p → min-p → temperature →
// draw). Temperature ≤ 0 is greedy; TopK ≤ 0 (or ≥ the vocabulary), TopP 0
// or ≥ 1 and MinP 0 switch those off. Penalized lists the tokens the
// penalties count (the window of the sequence's history, a token once per
// occurrence); penalties apply when RepetitionPenalty is neither 0 nor 1 or
// PresencePenalty or FrequencyPenalty is not 0. U is the draw in [0, 1)
// made by the caller's seeded PRNG, so that runs reproduce.
type SampleParams struct {
	Temperature, TopP, MinP float32
	TopK                    int32
	RepetitionPenalty       float32
	PresencePenalty         float32
	FrequencyPenalty        float32
	Penalized               []int32
	U                       float64
	Bias                    map[int32]float32 // logit_bias: added first, on a copy
}

// LogprobRow asks for logits row Row's logprobs: Token's and the K (0-20)
// most likely tokens'.
type LogprobRow struct {
	Row   int
	Token int32
	K     int
}

// RowLogprobs is a LogprobRow's answer: Top most likely first, ties to the
// lower id.
type RowLogprobs struct {
	Logprob float32
	Top     []TopLogprob
}

// TopLogprob is one of a row's most likely tokens.
type TopLogprob struct {
	ID      int32
	Logprob float32
}

// Undecided is the id SampleRows leaves for a row the caller must sample.
const Undecided = -1

// SamplerOf returns be's DeviceSampler, or nil when it has none or the
// environment says SLUICE_DEVICE_SAMPLE=0: on a device that samples every
// row on the host from logits read back whole, the path to compare against.
func SamplerOf(be Backend) DeviceSampler {
	ds, ok := be.(DeviceSampler)
	if !ok || os.Getenv("SLUICE_DEVICE_SAMPLE") == "0" {
		return nil
	}
	return ds
}
