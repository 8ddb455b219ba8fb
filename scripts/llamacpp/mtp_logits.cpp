// mtp_logits: llama.cpp v0.5.0's Qwen3.5 MTP (nextn) head logits on a tiny
// model, the golden of models' TestQwen35MTPLlamaCpp (scripts/golden/
// make_mtp_golden.sh builds and runs it).
//
//   mtp-logits MODEL.gguf N_GEN K TOKEN...
//
// The trunk decodes the prompt as one batch and then N_GEN greedy tokens
// one at a time, keeping its h_nextn row (final-normed hidden state) at
// every position. The MTP context then decodes every position p in one
// batch, pairing token p with the trunk's row of p-1 (zeros at 0), as
// common/speculative.cpp's draft-mtp process() does, and from the last
// position chains K greedy drafts on its own h_nextn rows, as its draft()
// does. Output, JSON on stdout:
//
//   {"tokens": [...], "prompt_len": P,
//    "mtp": [[logits at 0], ...],            one row per position
//    "chain": [{"token": d, "logits": [...]}, ...]}   chain[i] is the
//                                            forward fed draft i (chain[0]
//                                            the last position's argmax)
#include "llama.h"
#include "../../src/llama-ext.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static int argmax(const float * l, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (l[i] > l[best]) {
            best = i;
        }
    }
    return best;
}

static void print_row(const float * l, int n) {
    std::printf("[");
    for (int i = 0; i < n; i++) {
        std::printf(i ? ",%.9g" : "%.9g", l[i]);
    }
    std::printf("]");
}

static void quiet(ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) {
        std::fputs(text, stderr);
    }
}

static llama_context_params params(bool mtp) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 256;
    cp.n_ubatch = 256;
    cp.n_seq_max = 1;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    if (mtp) {
        cp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
    }
    return cp;
}

int main(int argc, char ** argv) {
    if (argc < 5) {
        std::fprintf(stderr, "usage: %s MODEL.gguf N_GEN K TOKEN...\n", argv[0]);
        return 2;
    }
    const int n_gen = std::atoi(argv[2]);
    const int k = std::atoi(argv[3]);
    std::vector<llama_token> toks;
    for (int i = 4; i < argc; i++) {
        toks.push_back((llama_token) std::atoi(argv[i]));
    }
    const int n_prompt = (int) toks.size();
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.use_extra_bufts = false;
    mp.load_mtp = true;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        std::fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    const int n_embd = llama_model_n_embd_out(model);
    llama_context * tgt = llama_init_from_model(model, params(false));
    llama_context_params dp = params(true);
    dp.ctx_other = tgt;
    llama_context * dft = llama_init_from_model(model, dp);
    if (!tgt || !dft) {
        std::fprintf(stderr, "cannot make the contexts\n");
        return 1;
    }
    llama_set_embeddings_nextn(tgt, true, /*masked*/ false);
    llama_set_embeddings_nextn(dft, true, /*masked*/ true);

    std::vector<float> h; // [position][n_embd], the trunk's h_nextn
    llama_batch b = llama_batch_init(256, 0, 1);
    auto add = [&](llama_token t, int pos) {
        b.token[b.n_tokens] = t;
        b.pos[b.n_tokens] = pos;
        b.n_seq_id[b.n_tokens] = 1;
        b.seq_id[b.n_tokens][0] = 0;
        b.logits[b.n_tokens] = 1;
        b.n_tokens++;
    };
    for (int i = 0; i < n_prompt; i++) {
        add(toks[i], i);
    }
    int next = 0;
    for (int g = 0; g <= n_gen; g++) {
        if (llama_decode(tgt, b) != 0) {
            std::fprintf(stderr, "trunk decode %d failed\n", g);
            return 1;
        }
        for (int i = 0; i < b.n_tokens; i++) {
            const float * row = llama_get_embeddings_nextn_ith(tgt, i);
            h.insert(h.end(), row, row + n_embd);
        }
        next = argmax(llama_get_logits_ith(tgt, b.n_tokens - 1), n_vocab);
        if (g == n_gen) {
            break;
        }
        toks.push_back(next);
        b.n_tokens = 0;
        add(next, (int) toks.size() - 1);
    }
    llama_batch_free(b);

    const int n = (int) toks.size();
    llama_batch m = llama_batch_init(n + k, n_embd, 1);
    m.token = (llama_token *) std::malloc(sizeof(llama_token) * (n + k));
    auto add_m = [&](llama_token t, int pos, const float * row) {
        m.token[m.n_tokens] = t;
        m.pos[m.n_tokens] = pos;
        m.n_seq_id[m.n_tokens] = 1;
        m.seq_id[m.n_tokens][0] = 0;
        m.logits[m.n_tokens] = 1;
        if (row) {
            std::memcpy(m.embd + (size_t) m.n_tokens * n_embd, row, sizeof(float) * n_embd);
        } else {
            std::memset(m.embd + (size_t) m.n_tokens * n_embd, 0, sizeof(float) * n_embd);
        }
        m.n_tokens++;
    };
    for (int p = 0; p < n; p++) {
        add_m(toks[p], p, p == 0 ? nullptr : h.data() + (size_t) (p - 1) * n_embd);
    }
    if (llama_decode(dft, m) != 0) {
        std::fprintf(stderr, "MTP decode failed\n");
        return 1;
    }
    std::printf("{\"tokens\":[");
    for (int p = 0; p < n; p++) {
        std::printf(p ? ",%d" : "%d", toks[p]);
    }
    std::printf("],\"prompt_len\":%d,\"mtp\":[", n_prompt);
    for (int p = 0; p < n; p++) {
        std::printf(p ? "," : "");
        print_row(llama_get_logits_ith(dft, p), n_vocab);
    }
    std::printf("],\"chain\":[");
    std::vector<float> hc(llama_get_embeddings_nextn_ith(dft, n - 1), llama_get_embeddings_nextn_ith(dft, n - 1) + n_embd);
    int d = argmax(llama_get_logits_ith(dft, n - 1), n_vocab);
    for (int i = 0; i < k; i++) {
        m.n_tokens = 0;
        add_m(d, n + i, hc.data());
        if (llama_decode(dft, m) != 0) {
            std::fprintf(stderr, "MTP chain decode %d failed\n", i);
            return 1;
        }
        const float * l = llama_get_logits_ith(dft, 0);
        std::printf(i ? ",{\"token\":%d,\"logits\":" : "{\"token\":%d,\"logits\":", d);
        print_row(l, n_vocab);
        std::printf("}");
        const float * row = llama_get_embeddings_nextn_ith(dft, 0);
        hc.assign(row, row + n_embd);
        d = argmax(l, n_vocab);
    }
    std::printf("]}\n");
    std::free(m.token);
    m.token = nullptr;
    llama_batch_free(m);
    llama_free(dft);
    llama_free(tgt);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
