# --- Fuzzing in CI --------------------------------------------------------------
# Every Fuzz target for FUZZTIME each (scripts/fuzz.sh finds them).
.PHONY: fuzz
FUZZTIME ?= 8s

fuzz: $(TOKENIZERS_LIB) $(LLGUIDANCE_LIB)
	./scripts/fuzz.sh $(FUZZTIME)

test: fuzz
