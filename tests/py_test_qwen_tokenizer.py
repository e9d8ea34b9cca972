#!/usr/bin/python3
"""The Qwen2.5 tokenizer that scripts/gguf_to_checkpoint.py (scripts/gguf_tokenizer.py) builds
from the real pair's GGUF files (scripts/get-model.sh qwen2.5-coder-1.5b and -0.5b), checked
against an independent implementation: transformers' pure-Python Qwen2Tokenizer (its split is
Python's `regex`, its BPE a Python loop: none of the `tokenizers` library's code), made from a
vocab.json and merges.txt this test writes from the GGUF's own vocabulary and merges, with HF's
added tokens. Both must give
the same ids on every prompt of every sweeps/prompts/*.jsonl file through the chat template (as
analysis/ssd-prompts renders it) and on raw texts with the hard cases of Qwen2's split (digits,
contractions, CJK, emoji, runs of spaces and newlines, tabs, indentation, NFD input, special
tokens inside text); decoding gives the text back. The two models' tokenizer.json are one file.

transformers 5 dropped the pure-Python tokenizers (its Qwen2Tokenizer is the `tokenizers`
library under test), so the reference is transformers 4.57, which pins tokenizers<=0.23.0 and
huggingface-hub<1.0 while the venv has newer ones that its slow tokenizer never calls: this test
installs it once with pip --no-deps into .venv/reference-transformers-4.57.6 (a folder beside the
venv's own site-packages, added to sys.path here only, so the venv's packages stay as
scripts/python-env.sh made them) and skips its import-time version check.

  /usr/bin/python3 tests/py_test_qwen_tokenizer.py --ssd-bench PATH --work DIR
(--ssd-bench and --mpiexec are accepted as every Python test gets them, and unused.)
Re-executes itself under the project's venv (scripts/python-env.sh) for gguf, tokenizers and
jinja2. About 16 s on one core once the checkpoints and the reference are installed, 12 s of it
reading the GGUF's metadata; the first run adds the reference's install (~15 s) and
get-model.sh's conversions."""
import filecmp
import json
import os
import subprocess
import sys
import types
import unicodedata
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from real_models import ROOT, get_model, use_venv, write_gguf  # noqa: E402

use_venv("gguf", "tokenizers", "jinja2")

import gguf  # noqa: E402

from ssd_analysis import text  # noqa: E402

import gguf_to_checkpoint as convert  # noqa: E402
import mpi_run  # noqa: E402

ARGS = None
TARGET, DRAFT = "qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"
REFERENCE = "transformers==4.57.6"
PROMPTS = os.path.join(ROOT, "sweeps", "prompts")

# Hugging Face's Qwen2.5 tokenizer.json: its added tokens (ids 151643 on), and which of them
# it marks special; the GGUF does not say (llama.cpp marks every <|...|> CONTROL).
HF_ADDED = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
            "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>",
            "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
            "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
            "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]
HF_SPECIAL = set(HF_ADDED[:14])
FIRST_ADDED_ID = 151643

# The cases where a byte-level BPE with the wrong split still gives valid, different ids.
TRICKY_TEXTS = [
    "12345 + 678 = 13023; 3.14159, 1,000,000 and 2**64 = 18446744073709551616",
    "Call 555-0199 at 09:45pm on 2024-02-29 (ISO 8601), v1.2.3-rc4, 0x1F and 1e-9",
    "I'm sure you'll see it's what they've said: we'd, he's, DON'T, She'LL, it’s (curly)",
    "你好，世界！这是一个分词测试。東京は日本の首都です。カタカナとひらがな。안녕하세요 세계",
    "Deploy 🚀🚀🚀 done ✅ 👩‍💻 (a ZWJ sequence) 🇫🇷🇯🇵 👍🏽 and ∑∫√∞≠≈ λx.x",
    "a  b   c    d\n\n\n e \n \n  trailing   \n\n",
    "   leading spaces, then\ttabs\t\tdouble\n\tindented\n\t\ttwice\t",
    "def area(w, h):\n    if w < 0:\n        raise ValueError('w')\n\n    return w * h\n",
    "fn main() {\r\n    let v: Vec<u32> = (0..10).collect();\r\n}\r\n",
    "```python\nprint(\"hi\")  # comment\n```\n\n```bash\nls -la | grep -c '.txt'\n```",
    "Cafe\u0301 nai\u0308ve re\u0301sume\u0301 (decomposed: NFC composes them)",
    "\u00a0non-breaking\u2003em space\u3000ideographic\u200bzero-width",
    "Привет, мир! Γειά σου κόσμε. مرحبا بالعالم. שלום עולם. नमस्ते दुनिया",
    "!!!???...---===>>> <<< ||| &&& ### $$$ %%% ^^^ ~~~ @@@ ``` '''",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|fim_prefix|>def f(x):\n    <|fim_suffix|>\n    return y<|fim_middle|>"
    "<tool_call>x</tool_call>",
    "<|endoftext|><|endoftext|>text<|file_sep|>path/to/file.py\n<|repo_name|>demo",
    "x" * 300 + " " + "ab" * 150,
    "",
]


def reference_tokenizer_class():
    """transformers 4.57's pure-Python Qwen2Tokenizer, installed once (see the module doc)."""
    target = os.path.join(ROOT, ".venv", "reference-" + REFERENCE.replace("==", "-"))
    if not os.path.isdir(os.path.join(target, "transformers")):
        partial = target + ".partial"
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                               "--disable-pip-version-check", "--no-deps", "--upgrade",
                               "--target", partial, REFERENCE, "regex"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"could not install {REFERENCE} from PyPI:\n{proc.stderr}")
        os.replace(partial, target)
    sys.path.insert(0, target)
    # Its import-time check rejects the venv's newer tokenizers and huggingface-hub, which the
    # slow tokenizer does not use: an empty module in its place.
    sys.modules["transformers.dependency_versions_check"] = types.ModuleType(
        "transformers.dependency_versions_check")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # "no PyTorch found", expected
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AddedToken
    from transformers.models.qwen2.tokenization_qwen2 import Qwen2Tokenizer
    return Qwen2Tokenizer, AddedToken


def write_reference_files(gguf_path, out_dir):
    """vocab.json (the GGUF's NORMAL tokens, as HF's vocab.json has them) and merges.txt;
    returns the vocabulary, the GGUF's added tokens by id and its chat template."""
    reader = gguf.GGUFReader(gguf_path)
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    types_ = reader.fields["tokenizer.ggml.token_type"].contents()
    merges = reader.fields["tokenizer.ggml.merges"].contents()
    os.makedirs(out_dir, exist_ok=True)
    vocab = {t: i for i, (t, ty) in enumerate(zip(tokens, types_)) if ty == 1}
    added = {i: t for i, (t, ty) in enumerate(zip(tokens, types_)) if ty in (3, 4)}
    with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")
    return vocab, added, reader.fields["tokenizer.chat_template"].contents()


class QwenTokenizer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dirs = {m: get_model(m) for m in (TARGET, DRAFT)}
        cls.tok, cls.config = text.load_tokenizer(cls.dirs[TARGET])
        ref_dir = os.path.join(ARGS.work, "reference")
        vocab, cls.gguf_added, cls.gguf_template = write_reference_files(
            os.path.join(cls.dirs[TARGET], "model.gguf"), ref_dir)
        cls.vocab_size = len(vocab)
        Qwen2Tokenizer, AddedToken = reference_tokenizer_class()
        # As HF's tokenizer_config.json declares them: ids, special flags, matched unnormalized.
        decoder = {FIRST_ADDED_ID + i: AddedToken(t, special=t in HF_SPECIAL, normalized=False)
                   for i, t in enumerate(HF_ADDED)}
        cls.ref = Qwen2Tokenizer(os.path.join(ref_dir, "vocab.json"),
                                 os.path.join(ref_dir, "merges.txt"),
                                 added_tokens_decoder=decoder)
        cls.compared = 0

    def check(self, text_, what):
        ours = self.tok.encode(text_, add_special_tokens=False).ids
        ref = self.ref.encode(text_, add_special_tokens=False)
        self.assertEqual(ours, ref, f"{what}: {text_!r}")
        self.assertEqual(self.tok.decode(ours, skip_special_tokens=False),
                         unicodedata.normalize("NFC", text_), what)
        type(self).compared += 1
        return ours

    def test_the_reference_is_the_pure_python_tokenizer(self):
        self.assertFalse(self.ref.is_fast)
        self.assertEqual(type(self.ref).__module__,
                         "transformers.models.qwen2.tokenization_qwen2")
        self.assertTrue(callable(getattr(self.ref, "bpe", None)))  # its own BPE loop
        self.assertEqual(len(self.ref), FIRST_ADDED_ID + len(HF_ADDED))

    def test_added_tokens_are_hfs(self):
        self.assertEqual(self.vocab_size, FIRST_ADDED_ID)  # every NORMAL token precedes them
        self.assertEqual(self.gguf_added, {FIRST_ADDED_ID + i: t for i, t in enumerate(HF_ADDED)})
        with open(os.path.join(self.dirs[TARGET], "tokenizer.json")) as f:
            added = json.load(f)["added_tokens"]
        self.assertEqual([(a["id"], a["content"], a["special"], a["normalized"]) for a in added],
                         [(FIRST_ADDED_ID + i, t, t in HF_SPECIAL, False)
                          for i, t in enumerate(HF_ADDED)])

    def test_both_models_have_one_tokenizer(self):
        self.assertTrue(filecmp.cmp(os.path.join(self.dirs[TARGET], "tokenizer.json"),
                                    os.path.join(self.dirs[DRAFT], "tokenizer.json"),
                                    shallow=False))

    def test_config_and_chat_template(self):
        self.assertEqual(self.config["eos_token"], "<|im_end|>")
        self.assertEqual(self.tok.token_to_id(self.config["eos_token"]), 151645)
        self.assertEqual(self.config["bos_token"], "<|endoftext|>")
        self.assertFalse(self.config["add_bos_token"])
        self.assertEqual(self.config["chat_template"], self.gguf_template)
        rendered = text.apply_chat_template(self.config, [{"role": "user", "content": "Hi"}])
        self.assertEqual(rendered, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. "
                                   "You are a helpful assistant.<|im_end|>\n"
                                   "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
        ids = self.check(rendered, "chat template")
        self.assertEqual(ids[0], 151644)
        self.assertEqual(ids.count(151645), 2)

    def test_every_shipped_prompt_matches_the_reference(self):
        files = sorted(f for f in os.listdir(PROMPTS) if f.endswith(".jsonl"))
        self.assertIn("code.jsonl", files)
        for name in files:
            path = os.path.join(PROMPTS, name)
            # What ssd-prompts writes for ssd-bench: the same ids as the reference's.
            rows = text.prompts_to_ids(self.tok, self.config, path, chat=True)
            prompts = list(text.read_prompts(path))
            self.assertEqual(len(rows), len(prompts))
            for n, ((kind, value), row) in enumerate(zip(prompts, rows), 1):
                self.assertEqual(kind, "messages", f"{name} line {n}")
                rendered = text.apply_chat_template(self.config, value)
                self.assertEqual(row["ids"], self.check(rendered, f"{name} line {n}"))
                for message in value:  # the content alone too: no template around it
                    self.check(message["content"], f"{name} line {n}, content")

    def test_tricky_texts_match_the_reference(self):
        for n, t in enumerate(TRICKY_TEXTS):
            self.check(t, f"tricky text {n}")
        # Qwen2 splits digits one by one: no token holds two.
        ids = self.check("12345", "digits")
        self.assertEqual(len(ids), 5)

    @classmethod
    def tearDownClass(cls):
        print(f"\n{cls.compared} texts tokenized alike by both", file=sys.stderr)


class UnknownPreTokenizer(unittest.TestCase):
    def test_an_unknown_pre_tokenizer_is_one_clear_error(self):
        path = os.path.join(ARGS.work, "unknown-pre.gguf")
        w = gguf.GGUFWriter(path, "llama")
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("llama-bpe")  # Llama 3's split, not one the converter knows
        w.add_token_list(["a", "b", "ab"])
        w.add_token_merges(["a b"])
        w.add_bos_token_id(0)
        w.add_eos_token_id(1)
        write_gguf(w)
        with self.assertRaises(convert.ConvertError) as e:
            convert.write_tokenizer(gguf.GGUFReader(path), ARGS.work)
        self.assertIn("'llama-bpe'", str(e.exception))
        self.assertNotIn("\n", str(e.exception))


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__])
