# --- Constrained decoding (issue 13) --------------------------------------------
# llguidance, the Rust structured-output library behind package constrain, is built
# from the crate registry's source by scripts/build-llguidance.sh into
# .build/lib/libllguidance.a (beside libtokenizers.a, so the CGO_LDFLAGS above covers
# it) and .build/include/llguidance.h. Every target that compiles or links the
# server depends on it; each names it itself so that `make -j` orders it too.
LLGUIDANCE_LIB := .build/lib/libllguidance.a

$(LLGUIDANCE_LIB): scripts/build-llguidance.sh
	./scripts/build-llguidance.sh

build vet test test-unit test-race bench cuda cuda-check cuda-emu cuda-device: $(LLGUIDANCE_LIB)
