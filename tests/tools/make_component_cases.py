#!/usr/bin/env python3
"""Makes tests/data/tokenizer_components/: small tokenizer.json files, each exercising tokenizer components
the GLM fixtures do not (added-token flags, normalizers, Metaspace, Digits, Split behaviours, byte fallback,
subword prefixes, TemplateProcessing, decoders), plus cases.jsonl with Hugging Face tokenizers' own ids and
decoded text for each text:
  {"text", "ids" (special tokens parsed), "ids_no_special" (encode_special_tokens=True),
   "decoded" (decode(ids)), "decoded_skip" (decode(ids, skip_special_tokens=True))}

Run: python3 -m venv /tmp/v && /tmp/v/bin/pip install tokenizers==0.23.3 && /tmp/v/bin/python THIS_FILE
(the repo copy was made with tokenizers 0.23.3). The BPE vocabularies are trained here on the fixture texts;
HF's trainer breaks ties in hash order, so a rerun may give different (equally valid) files."""
import json
import os
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "data", "tokenizer_components")
FIXTURE_CASES = os.path.join(ROOT, "data", "fixtures", "tokenizers", "glm-style", "cases.jsonl")

EXTRA_TEXTS = [
    "hello <mask> world", "a<mask>b", " <mask> ", "<mask>", "ab abc ab", "xab abx", "<s>hi</s>", "[SEP][SEP]",
    "Ünïcödé ﬁ ΣΑΣ İstanbul ＡＢＣ", "12345 abc-def 3.14", "  multiple   spaces  ", "\tTabs\tand\nnewlines\n",
    "don't STOP-believing", "数字123和汉字", "emoji 👩‍👩‍👧 ok", "   ", "", "a", "<|user|>hi<|assistant|>",
    "café naïve résumé", "ǅ ǆ Ǆ ẞ ß", "x" * 300, "ab" * 150, " " * 300, "a-b-c--d", "--lead and trail--",
]


def texts():
    with open(FIXTURE_CASES, encoding="utf-8") as f:
        base = [json.loads(line)["text"] for line in f if line.strip()]
    return base + EXTRA_TEXTS


def train(tok, trainer, corpus):
    tok.train_from_iterator(corpus, trainer=trainer)
    return tok


def bytelevel_gpt2(corpus):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    train(tok, trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                   special_tokens=["<s>", "</s>"]), corpus)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, special=True)])
    tok.add_tokens([AddedToken("ab", single_word=True, normalized=True), AddedToken(" world", normalized=False)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    return tok


def sentencepiece_like(corpus):
    # Llama-2 style: Prepend + Replace normalizer, byte fallback, decoder chain Replace/ByteFallback/Fuse/Strip.
    tok = Tokenizer(models.BPE(byte_fallback=True, fuse_unk=True, unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)],
                                  limit_alphabet=60)
    train(tok, trainer, corpus)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken("<|user|>", special=True), AddedToken("<|assistant|>", special=True, rstrip=True)])
    return tok


def metaspace_digits(corpus):
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase(), normalizers.Strip(left=False, right=True)])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=False),
                                                 pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    train(tok, trainers.BpeTrainer(vocab_size=700, special_tokens=["[UNK]"], limit_alphabet=200), corpus)
    tok.add_tokens([AddedToken("istanbul", normalized=True, lstrip=True, rstrip=True)])
    tok.add_special_tokens([AddedToken("[SEP]", special=True)])
    return tok


def split_behaviours(corpus):
    tok = Tokenizer(models.BPE(unk_token="[UNK]", ignore_merges=True))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.Replace(Regex(r"\p{Mn}"), ""), normalizers.NFC()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Split(Regex(r"\d+"), behavior="merged_with_previous"),
        pre_tokenizers.Split("-", behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"[aeiou]"), behavior="contiguous"),
        pre_tokenizers.Split(Regex(r"'"), behavior="removed", invert=False),
        pre_tokenizers.Digits(individual_digits=True),
    ])
    tok.decoder = decoders.Fuse()
    train(tok, trainers.BpeTrainer(vocab_size=500, special_tokens=["[UNK]"], limit_alphabet=150), corpus)
    return tok


def subword_prefix(corpus):
    tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence([normalizers.Strip(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.Sequence([decoders.Replace("</w>", " "), decoders.Replace("##", ""), decoders.Fuse(),
                                     decoders.Strip(" ", 0, 1)])
    train(tok, trainers.BpeTrainer(vocab_size=600, special_tokens=["[UNK]"], limit_alphabet=120,
                                   continuing_subword_prefix="##", end_of_word_suffix="</w>"), corpus)
    tok.post_processor = processors.BertProcessing(("[SEP]", 1), ("[UNK]", 0))
    return tok


def split_removed_invert(corpus):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\w+|[^\w\s]+"), behavior="removed", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    train(tok, trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()), corpus)
    return tok


VARIANTS = {
    "bytelevel-gpt2": bytelevel_gpt2,
    "sentencepiece-like": sentencepiece_like,
    "metaspace-digits": metaspace_digits,
    "split-behaviours": split_behaviours,
    "subword-prefix": subword_prefix,
    "split-removed-invert": split_removed_invert,
}


def regex_classes():
    """Code points (1..0x2FFFF, no surrogates) that HF's Split regex (Oniguruma) matches with \\s, \\w, \\d,
    \\h, as [first, last] ranges: the reference for our PCRE2 rewrite of those escapes."""
    cps = [c for c in range(1, 0x30000) if not (0xD800 <= c <= 0xDFFF)]
    text = "".join(chr(c) for c in cps)
    out = {}
    for esc in ["\\s", "\\w", "\\d", "\\h", "\\p{L}", "\\p{N}"]:
        split = pre_tokenizers.Split(Regex(esc), behavior="removed", invert=True)
        members = sorted({ord(ch) for piece, _ in split.pre_tokenize_str(text) for ch in piece})
        ranges = []
        for c in members:
            if ranges and ranges[-1][1] == c - 1:
                ranges[-1][1] = c
            else:
                ranges.append([c, c])
        out[esc] = ranges
    with open(os.path.join(OUT, "regex_classes.json"), "w") as f:
        json.dump(out, f)


def main():
    regex_classes()
    if "--classes-only" in sys.argv:
        return 0
    corpus = texts()
    for name, make in VARIANTS.items():
        tok = make(corpus)
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"))
        with open(os.path.join(d, "cases.jsonl"), "w", encoding="utf-8") as f:
            for text in corpus:
                tok.encode_special_tokens = False
                ids = tok.encode(text).ids
                tok.encode_special_tokens = True
                ids_ns = tok.encode(text).ids
                tok.encode_special_tokens = False
                f.write(json.dumps({"text": text, "ids": ids, "ids_no_special": ids_ns,
                                    "decoded": tok.decode(ids, skip_special_tokens=False),
                                    "decoded_skip": tok.decode(ids, skip_special_tokens=True)},
                                   ensure_ascii=False) + "\n")
        print(f"{name}: {len(corpus)} cases, vocab {tok.get_vocab_size()}")
    print(f"tokenizers {tokenizers.__version__}")


if __name__ == "__main__":
    sys.exit(main())
