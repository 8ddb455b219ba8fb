// Package tokenizer owns text ↔ token id conversion for Sluice: encoding and
// decoding through the Hugging Face tokenizers library (Rust, via cgo in
// github.com/daulet/tokenizers), turning a GGUF vocabulary into the equivalent
// tokenizer.json in memory so a GGUF file is self-sufficient, incremental
// detokenization for streaming, and chat templates.
//
// Encoding must match llama.cpp's token ids for the same vocabulary; the
// tests compare against ids llama.cpp produced (testdata/golden).
//
// Concurrency: a Tokenizer is safe for concurrent use once built (the Rust
// tokenizer is immutable, and the Go side only reads its maps); Close must not
// race with other calls. A Decoder belongs to one stream and is not safe for
// concurrent use.
//
// Building: the Rust half is a static library made by
// scripts/build-tokenizers.sh; link it with CGO_LDFLAGS=-L<repo>/.build/lib.
package tokenizer
