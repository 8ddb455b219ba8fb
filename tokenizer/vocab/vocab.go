// Package vocab holds a tokenizer's vocabulary as a model file describes it.
// It has no cgo and no dependencies, so that packages which read model files
// (models) or only pass vocabularies along link without the Rust tokenizer
// library; package tokenizer turns a Vocab into a working tokenizer.
package vocab

// Vocab is a tokenizer as a GGUF file describes it (the tokenizer.ggml.* keys).
// models reads it from the file; tokenizer.New turns it into a working
// Tokenizer by generating the equivalent Hugging Face tokenizer.json in memory.
type Vocab struct {
	Model          string    // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece)
	Pre            string    // tokenizer.ggml.pre: pre-tokenizer type ("smollm", "llama-bpe", "qwen2", ...)
	Tokens         []string  // tokenizer.ggml.tokens
	Scores         []float32 // tokenizer.ggml.scores (SentencePiece), may be nil
	TokenTypes     []int32   // tokenizer.ggml.token_type: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
	Merges         []string  // tokenizer.ggml.merges ("a b"), BPE only
	BOS, EOS       int32     // -1 when absent
	EOT, EOM       int32     // -1 when absent
	Unknown, Pad   int32     // -1 when absent
	AddBOS         bool
	AddEOS         bool
	AddSpacePrefix bool
	ChatTemplate   string // tokenizer.chat_template, may be empty
}
