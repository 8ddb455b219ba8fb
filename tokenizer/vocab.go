package tokenizer

import "github.com/sluicehq/sluice/tokenizer/vocab"

// Vocab is the vocabulary New builds a tokenizer from. It lives in the
// cgo-free package vocab so that models (which reads it from files) does not
// link this package's Rust library; the alias keeps tokenizer.Vocab usable.
type Vocab = vocab.Vocab
