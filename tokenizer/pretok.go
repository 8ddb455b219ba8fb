package tokenizer

import "fmt"

// Pre-tokenizer regexes, as the models' own tokenizer.json files spell them.
// llama.cpp (llama-vocab.cpp, llm_tokenizer_bpe) rewrites some of them for its
// regex engine (e.g. (?i:'s) as '[sS]); tokenizers runs the originals.
const (
	reGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	reLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// reGPT4o is GPT-4o's (o200k): gpt-oss's pre-tokenizer, as its
	// tokenizer.json writes it.
	reGPT4o = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// DeepSeek LLM splits in stages; each regex isolates its matches inside the
// pieces the previous one left (llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM).
var reDeepSeekLLM = []string{
	`[\r\n]`,
	`\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+`,
	`\s?[!-/:-~！-／：-～‘-‟　-。]+`,
	`\s+$`,
	`[一-龥ࠀ-一가-퟿]+`,
	`\p{N}+`,
}

// bytePreTokenizer returns tokenizer.json's pre_tokenizer for a GGUF "gpt2"
// vocabulary whose tokenizer.ggml.pre is pre, and whether BPE should take a
// whole pre-token that is itself in the vocabulary without merging
// (llama.cpp's ignore_merges, set for Llama 3). The names follow llama.cpp's
// llama_vocab::impl::load.
func bytePreTokenizer(pre string) (any, bool, error) {
	byteLevel := func(useRegex bool) any {
		return obj{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": useRegex}
	}
	split := func(re string) any {
		return obj{"type": "Split", "pattern": obj{"Regex": re}, "behavior": "Isolated", "invert": false}
	}
	seq := func(stages ...any) any { return obj{"type": "Sequence", "pretokenizers": stages} }
	switch pre {
	case "", "default", "gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling",
		"jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "exaone4":
		return byteLevel(true), false, nil
	case "smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2":
		// \p{N} first: every digit is its own pre-token.
		return seq(obj{"type": "Digits", "individual_digits": true}, byteLevel(true)), false, nil
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano":
		return seq(split(reLlama3), byteLevel(false)), true, nil
	case "dbrx", "smaug-bpe", "chatglm-bpe", "glm4":
		return seq(split(reLlama3), byteLevel(false)), false, nil
	case "qwen2", "stablelm2", "hunyuan", "megrez", "deepseek-r1-qwen", "kormo", "f2llmv2", "solar-open":
		return seq(split(reQwen2), byteLevel(false)), false, nil
	case "gpt-4o": // llama.cpp's LLAMA_VOCAB_PRE_TYPE_GPT4O, without ignore_merges
		return seq(split(reGPT4o), byteLevel(false)), false, nil
	case "deepseek-llm":
		stages := make([]any, 0, len(reDeepSeekLLM)+1)
		for _, re := range reDeepSeekLLM {
			stages = append(stages, split(re))
		}
		return seq(append(stages, byteLevel(false))...), false, nil
	}
	return nil, false, fmt.Errorf("pre-tokenizer %q: %w", pre, ErrUnsupported)
}
