"""Random test strings for the tokenizer fixtures (gen-llamacpp-fuzz.py,
gen-gemma-tokenizer-fixture.py): mixed scripts, combining marks, ZWJ emoji, whitespace
runs and CRLF, digits, contractions in both cases, special-token texts, random code points
from all planes. Deterministic for a given random.Random."""

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<unk>", "<|eot_id|>", "<|begin_of_text|>",
            "<|user|>", "<|end|>", "[PAD151650]", "<|reserved_special_token_1|>", "<|reserved_special_token_10|>",
            "<|startoftext|>", "<|tool_call_start|>", "<think>", "<reponame>", "<|im_start", "im_end|>"]
WORDS = "the of and to in is you that it he was for on are as with his they I at be this have from or one had by word but not what all were we when your can said there use an each which she do how their if will up other about out many then them these so some her would make like him into time has look two more write go see number no way could people my than first water been call who oil its now find long down day did get come made may part".split()
ALPHA = list("abcXYZ   \t\n\r''sStTdDmMlLrReEvV0123456789.,!?;:-_()[]{}\"#%&*/@\\$+<=>^~|`") + \
    ["é","ß","Ω","中","文","ア","ñ","\u0301","\ufe0f","\u200d","🚀","👨","😁","🏽","٣","४","½","①","Ⅻ","\u00a0","\u3000","\u2028","\u0085",
     "\u0001","\u007f","\u200b","\ue000","’","“","—","…","€","°","™","\u000b","\u000c","ا","ل","ह","ि","한","국","ไ","ท","ย","Ж","ж","ğ","İ","ı","ſ","K","Å"]

def rand_text(rng, specials=SPECIALS):
    kind = rng.random()
    if kind < 0.35:
        return "".join(rng.choice(ALPHA) for _ in range(rng.randint(1, 40)))
    if kind < 0.75:
        parts = []
        for _ in range(rng.randint(1, 30)):
            r = rng.random()
            if r < 0.6: w = rng.choice(WORDS); w = w.capitalize() if rng.random() < 0.2 else (w.upper() if rng.random() < 0.05 else w)
            elif r < 0.75: w = str(rng.randint(0, 10**rng.randint(1, 9)))
            elif r < 0.85: w = rng.choice([",", ".", "!", "?", "'s", "'ll", "'RE", "n't", " '", "...", "--", ":", ";", "(", ")", '"'])
            elif r < 0.92: w = rng.choice(specials)
            else: w = "".join(rng.choice(ALPHA) for _ in range(rng.randint(1, 4)))
            parts.append(w)
            parts.append(rng.choice([" ", " ", " ", "", "  ", "\n", "\n\n", "\t", " \n", "\r\n", "   "]))
        return "".join(parts)
    if kind < 0.9:
        # random scalars from the whole range (Unicode-version differences show up here)
        out = []
        for _ in range(rng.randint(1, 20)):
            while True:
                c = rng.choice([rng.randint(0x20, 0x7F), rng.randint(0xA0, 0x2FFF), rng.randint(0x3000, 0xD7FF), rng.randint(0xE000, 0xFFFD), rng.randint(0x10000, 0x1FFFF)])
                if not (0xD800 <= c <= 0xDFFF): break
            out.append(chr(c))
        return "".join(out)
    return rng.choice(specials) + rng.choice(["", " ", "\n", "  "]) + rng.choice(WORDS) + rng.choice(specials)
