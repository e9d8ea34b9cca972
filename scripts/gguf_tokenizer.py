"""A Hugging Face tokenizer (tokenizer.json + tokenizer_config.json) built from a GGUF file's
tokenizer metadata with the `tokenizers` library, so that text -> ids is what the model's own HF
tokenizer gives. scripts/gguf_to_checkpoint.py writes it beside the converted weights.

Every supported GGUF holds a byte-level BPE (tokenizer.ggml.model 'gpt2'): its vocabulary and
merges are the model's. What the GGUF names rather than stores is how text is split into words
before BPE, `tokenizer.ggml.pre` (llama.cpp's name for the pre-tokenizer), so each known name is
mapped here onto the pre-tokenizer HF's tokenizer.json of that family has:

  qwen2                          Qwen2 / Qwen2.5: NFC, then Qwen2's split regex (digits one by
                                 one), byte-level without GPT-2's regex
  absent, default, gpt-2, smollm GPT-2's byte-level BPE with GPT-2's regex (the converter's first
                                 form, for SmolLM2 and the tests' small llama files; kept
                                 byte-identical). SmolLM2's own file also splits digits one by
                                 one first; its merges join no two digits, so the ids agree.

Any other name is an error: a wrong split would still give valid ids, silently not the model's.
"""
import json
import os


class TokenizerError(Exception):
    pass


# llama.cpp's GGUF token types (llama_token_type / gguf.TokenType).
NORMAL, CONTROL, USER_DEFINED = 1, 3, 4

GPT2_STYLE_PRE = (None, "default", "gpt-2", "smollm")

# Hugging Face's Qwen2Tokenizer (transformers' tokenization_qwen2.py PRETOKENIZE_REGEX).
QWEN2_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
                 r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

# Qwen2.5's tokenizer.json adds these with "special": false (tool calls, fill-in-the-middle, repo
# prompts: text a model is meant to read and write, so a decode that skips special tokens keeps
# them). llama.cpp's converter marks any <|...|> token CONTROL whatever HF says, so the GGUF's
# token types alone cannot tell these from <|im_end|>.
QWEN2_NOT_SPECIAL = frozenset({
    "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
    "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"})

_REQUIRED = object()


def _field(reader, key, default=_REQUIRED):
    f = reader.fields.get(key)
    if f is None:
        if default is _REQUIRED:
            raise TokenizerError(f"missing metadata key {key}")
        return default
    return f.contents()


def _bpe_parts(reader):
    """(tokens, token types, merges as pairs) of the GGUF's byte-level BPE."""
    if _field(reader, "tokenizer.ggml.model") != "gpt2":
        raise TokenizerError("tokenizer.ggml.model is not gpt2 (byte-level BPE)")
    tokens = _field(reader, "tokenizer.ggml.tokens")
    types = [int(t) for t in _field(reader, "tokenizer.ggml.token_type", [NORMAL] * len(tokens))]
    merges = [tuple(m.split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges")]
    return tokens, types, merges


def _gpt2_tokenizer(tokens, types, merges):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    vocab = {tok: i for i, tok in enumerate(tokens)}
    try:
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    except Exception as e:  # the tokenizers library raises plain Exception
        raise TokenizerError(f"tokenizer: {e}") from None
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # Token type 3 is CONTROL in GGUF: special tokens (<|im_start|>, <|endoftext|>, ...).
    special = [t for t, ty in zip(tokens, types) if ty == CONTROL]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    return tok


def _qwen2_tokenizer(tokens, types, merges):
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                            pre_tokenizers, processors)
    # The whole GGUF vocabulary, ids as the model's rows: HF's vocab stops at 151665 entries,
    # the GGUF pads to the embedding's 151936 rows with [PAD...] tokens (type UNUSED) that no
    # merge builds, kept so that every id the model can emit still decodes.
    vocab = {tok: i for i, tok in enumerate(tokens)}
    try:
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=None, fuse_unk=False,
                                   continuing_subword_prefix="", end_of_word_suffix="",
                                   byte_fallback=False, ignore_merges=False))
    except Exception as e:  # the tokenizers library raises plain Exception
        raise TokenizerError(f"tokenizer: {e}") from None
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                              use_regex=False)
    # The binding takes no options for this decoder, so its flags serialize as true where HF's
    # file says false; decoding reads none of them (bytes back from their characters).
    tok.decoder = decoders.ByteLevel()
    # HF's added tokens are exactly the GGUF's CONTROL and USER_DEFINED ones (<tool_call>);
    # matched in raw text before normalization, as HF's "normalized": false has them.
    for i, (t, ty) in enumerate(zip(tokens, types)):
        if ty not in (CONTROL, USER_DEFINED):
            continue
        added = AddedToken(t, special=ty == CONTROL and t not in QWEN2_NOT_SPECIAL,
                           normalized=False)
        (tok.add_special_tokens if added.special else tok.add_tokens)([added])
        if tok.token_to_id(t) != i:
            raise TokenizerError(f"tokenizer: added token {t!r} is not id {i}")
    return tok


def build(reader):
    """(tokenizers.Tokenizer, tokenizer_config dict) for a gguf.GGUFReader."""
    pre = _field(reader, "tokenizer.ggml.pre", None)
    if pre == "qwen2":
        make = _qwen2_tokenizer
    elif pre in GPT2_STYLE_PRE:
        make = _gpt2_tokenizer
    else:
        raise TokenizerError(f"tokenizer.ggml.pre is {pre!r}: no pre-tokenizer known for it "
                             "(known: qwen2; GPT-2's regex for default, gpt-2, smollm or none)")
    tokens, types, merges = _bpe_parts(reader)
    tok = make(tokens, types, merges)
    # The fields analysis/ssd_analysis/text.py reads: the GGUF's view of BOS (Qwen2 names
    # <|endoftext|> and prepends nothing, add_bos_token false) and the chat template.
    config = {"bos_token": tokens[int(_field(reader, "tokenizer.ggml.bos_token_id"))],
              "eos_token": tokens[int(_field(reader, "tokenizer.ggml.eos_token_id"))],
              "add_bos_token": bool(_field(reader, "tokenizer.ggml.add_bos_token", False)),
              "chat_template": _field(reader, "tokenizer.chat_template", "")}
    return tok, config


def write(reader, out_dir):
    """tokenizer.json and tokenizer_config.json of a gguf.GGUFReader, into out_dir."""
    tok, config = build(reader)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=1)
