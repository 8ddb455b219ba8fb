package models

import "github.com/sluicehq/sluice/kernels"

// Config is a Llama-family architecture's shape, read from GGUF metadata
// (llama.*, qwen2.*) or from a Hugging Face config.json.
type Config struct {
	Arch       string // "llama" (also Mistral, TinyLlama, SmolLM2) or "qwen2"
	Layers     int
	Hidden     int // embedding width
	FFN        int // feed-forward width
	Heads      int
	KVHeads    int
	HeadDim    int // Hidden / Heads unless the file says otherwise
	Vocab      int
	ContextLen int

	RMSEps      float32
	RopeTheta   float32
	RopeStyle   kernels.RoPEStyle
	RopeScaling *RopeScaling // nil: none

	TiedEmbeddings bool // output head shares token_embd
	QKVBias        bool // Qwen2: attn_q/k/v carry biases
}

// RopeScaling is Llama 3's frequency-dependent RoPE scaling ("rope_type": "llama3").
type RopeScaling struct {
	Factor          float32
	LowFreqFactor   float32
	HighFreqFactor  float32
	OriginalContext int
}
