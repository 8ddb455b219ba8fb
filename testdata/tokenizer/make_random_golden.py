#!/usr/bin/env python3
"""Writes smollm2-random-tokenize.json: llama.cpp's token ids for 1,000
random strings drawn from an alphabet chosen to stress the tokenizer
(whitespace runs, contractions in both cases, digits of several scripts,
combining marks, ZWJ emoji, NBSP and ideographic spaces, control tokens
glued to text). Complements testdata/golden's hand-picked cases.

Run with the llama.cpp bindings scripts/llamacpp/build.sh sets up:
  .build/venv/bin/python testdata/tokenizer/make_random_golden.py
"""
import hashlib
import json
import pathlib
import random

import llama_cpp
from llama_cpp import Llama

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
OUT = pathlib.Path(__file__).resolve().parent / "smollm2-random-tokenize.json"

ALPHABET = list("abcXYZ  \t\n\r'’\".,;!?-_0123456789") + [
    "'s", "'LL", "'re", " the", " The", "日本", "語", "😀", "👍🏽", "\u200d", "é", "e\u0301",
    "\u00a0", "\u3000", "Ω", "ß", "ﬁ", "🇯🇵", "<|im_start|>", "<|im_end|>", "<|endoftext|>",
    "\u200b", "١٢٣", "Ⅻ", "½", "²",
]


def main():
    llm = Llama(model_path=str(MODEL), vocab_only=True, verbose=False)
    rng = random.Random(7)
    cases = []
    for _ in range(1000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 30)))
        raw = text.encode("utf-8")
        cases.append({
            "text": text,
            "ids": llm.tokenize(raw, add_bos=False, special=True),
            "ids_no_special": llm.tokenize(raw, add_bos=False, special=False),
        })
    doc = {
        "generator": "testdata/tokenizer/make_random_golden.py",
        "llama_cpp_python": llama_cpp.__version__,
        "model": MODEL.name,
        "model_sha256": hashlib.sha256(MODEL.read_bytes()).hexdigest(),
        "conventions": "ids: llama_tokenize(text, add_special=false, parse_special=true); "
                       "ids_no_special: parse_special=false",
        "cases": cases,
    }
    lines = ",\n".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cases)
    head = json.dumps({k: v for k, v in doc.items() if k != "cases"}, ensure_ascii=False, indent=1)
    OUT.write_text(head[:-2] + ',\n "cases": [\n' + lines + "\n ]\n}\n", encoding="utf-8")


if __name__ == "__main__":
    main()
