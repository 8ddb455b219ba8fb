// tiny_logits: llama.cpp's logits for every position of a prompt and of its
// greedy continuation, for the tiny-model goldens of the architectures only
// llama.cpp v0.5.0 knows (scripts/golden/make_tiny_golden_newest.py runs it).
//
//   tiny-logits MODEL.gguf N_GEN TOKEN...
//
// The prompt goes in as one batch (as make_tiny_golden.py feeds its models),
// then N_GEN tokens are picked greedily (argmax, lowest id on a tie) and fed
// back one at a time. Output, one line each: "tok <id>" for every token fed
// (prompt, then generated), and after each a line "logits <v0> <v1> ..." of
// the logits at that position (%.9g). Built by `build-newest.sh golden`
// against the static libllama of v0.5.0.
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

static void print_logits(const float * l, int n) {
    std::printf("logits");
    for (int i = 0; i < n; i++) {
        std::printf(" %.9g", l[i]);
    }
    std::printf("\n");
}

static int argmax(const float * l, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (l[i] > l[best]) {
            best = i;
        }
    }
    return best;
}

static void quiet(ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) {
        std::fputs(text, stderr);
    }
}

int main(int argc, char ** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s MODEL.gguf N_GEN TOKEN...\n", argv[0]);
        return 2;
    }
    const int n_gen = std::atoi(argv[2]);
    std::vector<llama_token> prompt;
    for (int i = 3; i < argc; i++) {
        prompt.push_back((llama_token) std::atoi(argv[i]));
    }
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.use_extra_bufts = false; // no repacked weights: the plain ggml kernels
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        std::fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 256;
    cp.n_ubatch = 256;
    cp.n_seq_max = 1;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.swa_full = true;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        std::fprintf(stderr, "cannot make a context for %s\n", argv[1]);
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    llama_batch batch = llama_batch_init((int32_t) prompt.size(), 0, 1);
    for (size_t i = 0; i < prompt.size(); i++) {
        batch.token[i] = prompt[i];
        batch.pos[i] = (llama_pos) i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = (int32_t) prompt.size();
    if (llama_decode(ctx, batch) != 0) {
        std::fprintf(stderr, "decode of the prompt failed\n");
        return 1;
    }
    int next = 0;
    for (size_t i = 0; i < prompt.size(); i++) {
        const float * l = llama_get_logits_ith(ctx, (int32_t) i);
        std::printf("tok %d\n", prompt[i]);
        print_logits(l, n_vocab);
        next = argmax(l, n_vocab);
    }
    llama_batch_free(batch);

    llama_batch one = llama_batch_init(1, 0, 1);
    for (int g = 0; g < n_gen; g++) {
        one.token[0] = next;
        one.pos[0] = (llama_pos) (prompt.size() + g);
        one.n_seq_id[0] = 1;
        one.seq_id[0][0] = 0;
        one.logits[0] = 1;
        one.n_tokens = 1;
        if (llama_decode(ctx, one) != 0) {
            std::fprintf(stderr, "decode of generated token %d failed\n", g);
            return 1;
        }
        const float * l = llama_get_logits_ith(ctx, 0);
        std::printf("tok %d\n", next);
        print_logits(l, n_vocab);
        next = argmax(l, n_vocab);
    }
    llama_batch_free(one);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
