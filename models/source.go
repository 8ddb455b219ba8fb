package models

import (
	"errors"
	"fmt"
	"os"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tokenizer/vocab"
)

// Sentinel errors of the weight readers. Every error they return wraps one of
// these and names the file (and the tensor or key where there is one).
var (
	// ErrMalformed: the file does not follow its format (bad magic, truncated,
	// offsets out of range, inconsistent sizes, duplicate names).
	ErrMalformed = errors.New("malformed model file")
	// ErrUnsupported: a well-formed file asks for something Sluice does not
	// implement (architecture, tensor type, format version, rope scaling).
	ErrUnsupported = errors.New("unsupported")
	// ErrNoTensor: the tensor is not in the file.
	ErrNoTensor = errors.New("no such tensor")
	// ErrMissingKey: a metadata key the configuration needs is absent or has
	// the wrong type.
	ErrMissingKey = errors.New("missing metadata")
	// ErrClosed: the source was closed; its tensors' memory is gone.
	ErrClosed = errors.New("model file closed")
)

// WeightSource is a model on disk as the loader sees it, whatever the format.
// Tensor names follow GGUF's convention:
//
//	token_embd.weight, output_norm.weight, output.weight,
//	blk.N.{attn_norm,attn_q,attn_k,attn_v,attn_output,ffn_norm,ffn_gate,ffn_up,ffn_down}.weight,
//	blk.N.attn_{q,k,v}.bias
//
// A tensor's Data aliases the source's mmap: it stays valid until Close.
type WeightSource interface {
	Config() (Config, error)
	Tensor(name string) (kernels.HostTensor, error)
	Has(name string) bool
	// Vocab is the tokenizer stored in the file; nil, nil for Hugging Face
	// directories, whose tokenizer is tokenizer.json beside the weights.
	Vocab() (*vocab.Vocab, error)
	Path() string
	Close() error
}

// Open opens a .gguf file or a Hugging Face model directory.
func Open(path string) (WeightSource, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open model: %w", err)
	}
	if st.IsDir() {
		return OpenHF(path)
	}
	return OpenGGUF(path)
}
