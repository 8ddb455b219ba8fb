package server

// wireExtensions are vLLM's extensions to the chat and completions bodies
// that act on the prompt and its logprobs: embedded in wireRequest, so
// encoding/json decodes them as top-level fields and unservedFields counts
// them as declared.
type wireExtensions struct{}
