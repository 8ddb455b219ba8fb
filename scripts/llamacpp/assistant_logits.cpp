// assistant_logits: llama.cpp v0.5.0's Gemma 4 assistant drafts, for the
// golden of Sluice's gemma4-assistant forward (TestGemma4AssistantGolden,
// scripts/golden/make_assistant_golden.py runs it).
//
//   assistant-logits TARGET.gguf ASSISTANT.gguf N_GEN N_DRAFT TOKEN...
//
// The prompt goes into the target as one batch; then, N_GEN times: the
// target's greedy token t (argmax, lowest id on a tie) is drafted from as
// llama.cpp's draft-mtp driver does with shared memory (common/speculative.cpp):
// the assistant context (ctx_other = the target's) decodes t at the next
// position with the target's post-norm hidden row of the last position
// (llama_get_embeddings_nextn_ith), then N_DRAFT−1 more times its own greedy
// draft at the same position with its own h_nextn row; then t is fed to the
// target. Output: "tok <id>" for every token the target is fed, "draft
// <pos> <id>" for every token the assistant is fed, each followed by
// "logits ..." (%.9g) of that row. Built by `build-newest.sh golden`.
#include "llama.h"
#include "llama-ext.h" // llama_set_embeddings_nextn, llama_get_embeddings_nextn_ith

#include <cstdio>
#include <cstdlib>
#include <cstring>
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

static llama_context_params ctx_params() {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 256;
    cp.n_ubatch = 256;
    cp.n_seq_max = 1;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.swa_full = true;
    return cp;
}

int main(int argc, char ** argv) {
    if (argc < 6) {
        std::fprintf(stderr, "usage: %s TARGET.gguf ASSISTANT.gguf N_GEN N_DRAFT TOKEN...\n", argv[0]);
        return 2;
    }
    const int n_gen = std::atoi(argv[3]);
    const int n_draft = std::atoi(argv[4]);
    std::vector<llama_token> prompt;
    for (int i = 5; i < argc; i++) {
        prompt.push_back((llama_token) std::atoi(argv[i]));
    }
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.use_extra_bufts = false;
    llama_model * tgt = llama_model_load_from_file(argv[1], mp);
    llama_model * dft = llama_model_load_from_file(argv[2], mp);
    if (!tgt || !dft) {
        std::fprintf(stderr, "cannot load %s or %s\n", argv[1], argv[2]);
        return 1;
    }
    llama_context * ctx_tgt = llama_init_from_model(tgt, ctx_params());
    if (!ctx_tgt) {
        std::fprintf(stderr, "cannot make the target context\n");
        return 1;
    }
    llama_set_embeddings_nextn(ctx_tgt, true, /*masked*/ false);
    llama_context_params cpd = ctx_params();
    cpd.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
    cpd.ctx_other = ctx_tgt;
    llama_context * ctx_dft = llama_init_from_model(dft, cpd);
    if (!ctx_dft) {
        std::fprintf(stderr, "cannot make the assistant context\n");
        return 1;
    }
    llama_set_embeddings_nextn(ctx_dft, true, /*masked*/ true);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(tgt));
    const int n_embd = llama_model_n_embd_out(dft);

    llama_batch batch = llama_batch_init((int32_t) prompt.size(), 0, 1);
    for (size_t i = 0; i < prompt.size(); i++) {
        batch.token[i] = prompt[i];
        batch.pos[i] = (llama_pos) i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = i + 1 == prompt.size();
        std::printf("tok %d\n", prompt[i]);
    }
    batch.n_tokens = (int32_t) prompt.size();
    if (llama_decode(ctx_tgt, batch) != 0) {
        std::fprintf(stderr, "target prompt decode failed\n");
        return 1;
    }
    print_logits(llama_get_logits_ith(ctx_tgt, -1), n_vocab);
    int last_row = batch.n_tokens - 1;
    llama_pos pos = (llama_pos) prompt.size();

    llama_batch db = llama_batch_init(1, n_embd, 1);
    db.token = (llama_token *) std::malloc(sizeof(llama_token));
    std::vector<float> h(n_embd);
    for (int g = 0; g < n_gen; g++) {
        llama_token t = (llama_token) argmax(llama_get_logits_ith(ctx_tgt, -1), n_vocab);
        std::memcpy(h.data(), llama_get_embeddings_nextn_ith(ctx_tgt, last_row), n_embd * sizeof(float));
        llama_token d = t;
        for (int k = 0; k < n_draft; k++) {
            db.token[0] = d;
            db.pos[0] = pos;
            db.n_seq_id[0] = 1;
            db.seq_id[0][0] = 0;
            db.logits[0] = 1;
            std::memcpy(db.embd, h.data(), n_embd * sizeof(float));
            db.n_tokens = 1;
            if (llama_decode(ctx_dft, db) != 0) {
                std::fprintf(stderr, "assistant decode failed at %d\n", pos);
                return 1;
            }
            const float * l = llama_get_logits_ith(ctx_dft, 0);
            std::printf("draft %d %d\n", pos, d);
            print_logits(l, n_vocab);
            d = (llama_token) argmax(l, n_vocab);
            std::memcpy(h.data(), llama_get_embeddings_nextn_ith(ctx_dft, 0), n_embd * sizeof(float));
        }
        batch.token[0] = t;
        batch.pos[0] = pos;
        batch.n_seq_id[0] = 1;
        batch.seq_id[0][0] = 0;
        batch.logits[0] = 1;
        batch.n_tokens = 1;
        std::printf("tok %d\n", t);
        if (llama_decode(ctx_tgt, batch) != 0) {
            std::fprintf(stderr, "target decode failed at %d\n", pos);
            return 1;
        }
        print_logits(llama_get_logits_ith(ctx_tgt, -1), n_vocab);
        last_row = 0;
        pos++;
    }
    llama_free(ctx_dft);
    llama_free(ctx_tgt);
    llama_model_free(dft);
    llama_model_free(tgt);
    return 0;
}
