"""Prompts for the llama.cpp golden data (make_golden.py) and strings for the
tokenizer-only golden file. Everything here is fixed text or built from fixed
text, so a rerun produces the same inputs."""

CHAT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chat(user, system=CHAT_SYSTEM):
    """SmolLM2-Instruct's chat template (ChatML), rendered by hand so the
    prompt text is explicit in the golden file."""
    return (
        f"<|im_start|>system\n{system}<|im_end|>\n"
        f"<|im_start|>user\n{user}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


# Sentences written for this file (public-domain style, no quoted source).
_RIVER = [
    "The river rose before dawn, grey and quiet, carrying leaves from the hills above the town.",
    "Millers along the bank had learned to read its colour the way sailors read the sky.",
    "When the water turned brown they lifted the sluice gates and let the flood run past the wheels.",
    "Children gathered on the stone bridge to count the branches that drifted underneath.",
    "An old ferryman kept a ledger of every spring flood, written in a careful, narrow hand.",
    "In the year of the great rain the ledger noted that the water reached the third step of the church.",
    "Merchants moved their grain to the upper floors and waited, playing cards by lamplight.",
    "By the fourth day the current slowed, and the fields lay under a sheet of still, bright water.",
    "Herons returned first, standing in the shallows as if nothing had happened at all.",
    "The town council met in the schoolhouse and argued for hours about building a higher wall.",
    "Some said the river had always given more than it took, and that walls would only anger it.",
    "Others pointed at the mud line on the bakery wall and asked who would pay for the next flood.",
    "In the end they agreed to dig a second channel, wide and shallow, through the eastern meadow.",
    "The work took three summers, and every family in the valley sent someone with a spade.",
    "When the channel opened, the river divided around the island of willows and grew calm.",
    "Years later, travellers asked why the meadow was crossed by a ditch lined with old stones.",
]

_NUMBERS = [
    "one", "two", "three", "four", "five", "six", "seven", "eight",
    "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
]


def long_text(paragraphs):
    """Deterministic long text: each paragraph takes the sentences in a rotated
    order with a stride that varies per paragraph, so the text repeats words
    but not whole paragraphs (a model cannot simply copy the previous one)."""
    n = len(_RIVER)
    out = []
    for p in range(paragraphs):
        stride = (3, 5, 7, 9, 11, 13)[p % 6]
        start = (p * 5) % n
        picked = [_RIVER[(start + i * stride) % n] for i in range(6)]
        out.append(f"Chapter {_NUMBERS[p % 16]}. " + " ".join(picked))
    return "\n\n".join(out)


# (name, text). The text is tokenized by llama.cpp with special tokens parsed
# and BOS added as the GGUF asks.
PROMPTS = [
    ("prose", "Once upon a time, in a small village by the sea, there lived an old fisherman who"),
    ("prose_fox", "The quick brown fox jumps over the lazy dog. The lazy dog, however, was not amused, and"),
    ("question_capital", "What is the capital of France?"),
    ("question_sky", "Question: Why is the sky blue? Answer in one sentence.\nAnswer:"),
    ("code_go", "package main\n\nimport \"fmt\"\n\n// fib returns the n-th Fibonacci number.\nfunc fib(n int) int {\n\tif n < 2 {\n\t\treturn n\n\t}\n"),
    ("code_python", "def is_prime(n: int) -> bool:\n    \"\"\"Return True if n is a prime number.\"\"\"\n    if n < 2:\n        return False\n    for i in range(2, int(n ** 0.5) + 1):\n"),
    ("json", "{\"name\": \"Sluice\", \"version\": 1, \"tags\": [\"llm\", \"go\"], \"nested\": {\"a\": [1, 2.5, null, true], \"b\": \"\\u00e9\"}, \"next\":"),
    ("japanese", "日本の首都は東京です。東京には多くの"),
    ("chinese", "今天天气很好，我们一起去公园散步吧。公园里"),
    ("emoji_zwj", "Family: 👨‍👩‍👧‍👦, flags: 🇯🇵🇫🇷, thumbs: 👍🏽, rainbow flag: 🏳️‍🌈, heart: ❤️. These emoji mean"),
    ("accents_combining", "Café, naïve, résumé, Ångström, Straße, Dvořák; e\u0301 is e + combining acute (U+0301), n\u0303 is"),
    ("numbers", "1 + 1 = 2, 12345 * 678 = 8369910, pi = 3.14159265358979, date 2026-11-29 17:30:00, next prime after 97 is"),
    ("whitespace_runs", "Hello   world\n\n\n\tIndented\t\ttabs    and     spaces\n    \n   end of   the\n\n\n\n"),
    ("chat_math", chat("What is 2+2?")),
    ("chat_haiku", chat("Write a haiku about a river.")),
    ("multilingual", "English: hello. Français: bonjour. Deutsch: hallo. Русский: привет. العربية: مرحبا. हिन्दी: नमस्ते. 한국어:"),
    ("markdown", "# Shopping list\n\n- apples\n- bread\n- milk\n-"),
    ("single_word", "Hello"),
    ("html_url", "<a href=\"https://example.com/path?q=1&x=y#frag\">link</a> &amp; <b>bold</b>"),
    ("sql", "SELECT id, name, COUNT(*) AS n FROM users WHERE age > 30 GROUP BY id, name ORDER BY n DESC"),
    ("repetition", "a b a b a b a b a b a b a b a b"),
    ("leading_space", "   leading spaces and a trailing space "),
    ("latex", "The integral $\\int_0^1 x^2\\,dx = \\frac{1}{3}$ and the sum $\\sum_{k=1}^{n} k ="),
    ("long_story", long_text(14) + "\n\nQuestion: what did the town build in the end?\nAnswer:"),
    ("long_chat", chat("Read the following story and say in one sentence what it is about.\n\n" + long_text(22))),
]

# (name, text) for the tokenizer-only golden file: tokenized both with and
# without special-token parsing, with and without BOS.
TOKENIZE = [
    ("empty", ""),
    ("space", " "),
    ("two_spaces", "  "),
    ("leading_space_word", " hello"),
    ("leading_spaces_words", "   hello world"),
    ("trailing_spaces", "hello   "),
    ("newline", "\n"),
    ("newlines_2", "\n\n"),
    ("newlines_3", "a\n\n\nb"),
    ("newlines_many", "a\n\n\n\n\n\n\n\nb"),
    ("crlf", "line1\r\nline2\r\n"),
    ("tabs", "\tx\t\ty"),
    ("mixed_ws", " \t \n \t\n  x"),
    ("im_start_inside", "text <|im_start|>user\nhi<|im_end|> more"),
    ("im_start_glued", "abc<|im_start|>def"),
    ("im_end_only", "<|im_end|>"),
    ("endoftext", "<|endoftext|>"),
    ("special_lookalike", "<|im_start|"),
    ("special_broken", "< |im_start| >"),
    ("digits_1", "7"),
    ("digits_3", "123"),
    ("digits_long", "12345678901234567890"),
    ("digits_mixed", "abc123def4567 8.90 -1e10 0x1F"),
    ("year", "In 2026, 1,000,000 people"),
    ("contractions", "I'm, you're, he's, they've, we'd, it'll, don't, DON'T"),
    ("punct", "Hello!!! What??? ...and... --- ;;; ::"),
    ("quotes", "\"double\" 'single' `back` «guillemets» „low“"),
    ("accents_nfc", "é à ü ñ ø å"),
    ("accents_nfd", "e\u0301 a\u0300 u\u0308 n\u0303"),
    ("japanese", "こんにちは、世界。カタカナとひらがな"),
    ("chinese", "你好，世界！"),
    ("korean", "안녕하세요 세계"),
    ("arabic", "مرحبا بالعالم"),
    ("hindi", "नमस्ते दुनिया"),
    ("emoji", "😀👍🏽"),
    ("emoji_zwj_family", "👨‍👩‍👧‍👦"),
    ("emoji_flag", "🇯🇵🇫🇷"),
    ("emoji_rainbow_flag", "🏳️‍🌈"),
    ("zero_width", "a\u200bb\u200cc\u200dd\ufeffe"),
    ("nul_ctrl", "a\u0001b\u007fc"),
    ("code_go", "func main() {\n\tfmt.Println(\"hi\")\n}"),
    ("code_python", "def f(x):\n    return x ** 2  # square\n"),
    ("json", "{\"a\": [1, 2, {\"b\": null}], \"c\": \"d\\n\"}"),
    ("url", "https://example.com/a/b?c=d&e=f#g"),
    ("chat_full", chat("Hello!")),
    ("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis"),
    ("camel_snake", "camelCaseName snake_case_name SCREAMING_CASE kebab-case"),
    # Gemma's control and user-defined tokens (plain text to other vocabularies).
    ("gemma_turns", "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n"),
    ("gemma_glued", "x<end_of_turn>y<bos>z"),
    ("gemma_spaces_run", "a" + " " * 31 + "b\t\t\t\tc"),
]
