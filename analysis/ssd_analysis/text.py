"""Text in and out of ssd-bench, which itself only sees token ids.

prompts_to_ids: prompt files (.txt, one prompt per line, or .jsonl) -> {"ids", "text"} lines,
tokenized with a checkpoint directory's tokenizer.json (what scripts/get-model.sh writes).
run_texts: an HDF5 result's prompts and generations, decoded back to text.

JSONL fields understood, first match wins, covering the common prompt sets:
  "messages"                 chat: [{"role": "system"|"user"|"assistant", "content": ...}]
                             (ShareGPT-style conversations converted to this form; MT-Bench
                             turns as one user message each), always through the chat template
  "text" or "prompt"         plain text (e.g. HumanEval's "prompt")
  "question"                 GSM8K and most QA sets
  "instruction" [+ "input"]  Alpaca-style: the two joined by a blank line when "input" is set
Plain text goes through the chat template too with --chat (as one user message).

Needs the `tokenizers` package (and jinja2 for chat templates): the venv of
scripts/python-env.sh has both.
"""
import json
import os


class TextError(Exception):
    pass


def load_tokenizer(model_dir):
    from tokenizers import Tokenizer
    path = os.path.join(model_dir, "tokenizer.json")
    if not os.path.isfile(path):
        raise TextError(f"--tokenizer {model_dir}: no tokenizer.json (scripts/get-model.sh "
                        "writes one)")
    config = {}
    config_path = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.isfile(config_path):
        with open(config_path) as f:
            config = json.load(f)
    return Tokenizer.from_file(path), config


def read_prompts(path):
    """Yields ("text", str) or ("messages", list) per prompt of a .txt or .jsonl file."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if not path.endswith(".jsonl"):
        for line in lines:
            if line.strip():
                yield "text", line
        return
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            raise TextError(f"{path} line {n}: not valid JSON") from None
        if not isinstance(doc, dict):
            raise TextError(f"{path} line {n}: expected a JSON object")
        if isinstance(doc.get("messages"), list):
            yield "messages", doc["messages"]
        elif isinstance(doc.get("text"), str) or isinstance(doc.get("prompt"), str):
            yield "text", doc.get("text", doc.get("prompt"))
        elif isinstance(doc.get("question"), str):
            yield "text", doc["question"]
        elif isinstance(doc.get("instruction"), str):
            extra = doc.get("input") or ""
            yield "text", doc["instruction"] + ("\n\n" + extra if extra else "")
        else:
            raise TextError(f"{path} line {n}: no \"messages\", \"text\", \"prompt\", "
                            "\"question\" or \"instruction\" field")


def apply_chat_template(config, messages):
    template = config.get("chat_template")
    if not template:
        raise TextError("the tokenizer has no chat template (tokenizer_config.json)")
    import jinja2
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, add_generation_prompt=True,
                                            bos_token=config.get("bos_token", ""),
                                            eos_token=config.get("eos_token", ""))


def prompts_to_ids(tokenizer, config, path, chat):
    out = []
    bos = tokenizer.token_to_id(config["bos_token"]) if config.get("add_bos_token") else None
    for kind, value in read_prompts(path):
        if kind == "messages":
            text = apply_chat_template(config, value)
        elif chat:
            text = apply_chat_template(config, [{"role": "user", "content": value}])
        else:
            text = value
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        if bos is not None and (not ids or ids[0] != bos):
            ids = [bos] + ids
        if not ids:
            raise TextError(f"{path}: a prompt tokenizes to nothing")
        out.append({"ids": ids, "text": text})
    if not out:
        raise TextError(f"{path}: no prompts")
    return out


def run_texts(tokenizer, h5_path):
    """[(prompt text, generated text)] per sequence of a result file."""
    import h5py
    with h5py.File(h5_path, "r") as f:
        if "generated_tokens" not in f or "prompt_tokens" not in f:
            raise TextError(f"{h5_path}: no /generated_tokens or /prompt_tokens")
        prompts, generated = f["prompt_tokens"][...], f["generated_tokens"][...]
    texts = []
    for p, g in zip(prompts, generated):
        texts.append((tokenizer.decode([int(t) for t in p if t >= 0], skip_special_tokens=False),
                      tokenizer.decode([int(t) for t in g if t >= 0],
                                       skip_special_tokens=False)))
    return texts
