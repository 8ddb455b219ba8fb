// The AVX-512 VNNI Q8_0 kernels' PAIR_LOAD (dotqv_amd64.h's weight-type
// hook), shared by dotq8v_amd64.s (four and eight activations) and
// dotq80v2_amd64.s (two and three).

// PAIR_LOAD reads the two rows' blocks: quants, magnitudes, signs, scales.
#define PAIR_LOAD \
	VMOVDQU64       2(AX), Y16; \
	VINSERTI64X4    $1, 2(AX)(R9*1), Z16, Z16; \
	VPMOVB2M        Z16, K1; \
	VPABSB          Z16, Z17; \
	VPBROADCASTW    (AX), X18; \
	VPBROADCASTW    (AX)(R9*1), X19; \
	VINSERTI32X4    $1, X19, Y18, Y18; \
	VCVTPH2PS       Y18, Z18
