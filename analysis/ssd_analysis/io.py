"""Load one ssd-bench HDF5 file (docs/hdf5-schema.md, version 1.1) into a `Run`.

Everything is read eagerly into numpy arrays and plain Python values, so the rest of the
package never touches h5py. Tables (`/steps`, `/reps`, `/rounds`, characterize's `/gemm`,
`/forward`, ...) become dicts of column name -> 1-D array (`/rounds/fanout` is 2-D). What a file
should hold, and the checks of it, are in schema.py.
"""
import hashlib
import json
import math
import os
from dataclasses import dataclass, field

import h5py
import numpy as np

from . import metrics as M


class AnalysisError(Exception):
    """A file that cannot be analysed (missing, not HDF5, incomplete)."""


def _plain(value):
    """h5py attribute -> str / int / float / list."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()] if value.ndim else _plain(value.item())
    if isinstance(value, np.generic):
        return value.item()
    return value


def _table(group):
    return {name: ds[...] for name, ds in group.items() if isinstance(ds, h5py.Dataset)}


def _number(text, default=math.nan):
    try:
        return float(text)
    except (TypeError, ValueError):
        return default


@dataclass
class Run:
    """One result file. `config` holds the resolved settings as strings (root config_json)."""
    path: str
    mode: str
    attrs: dict
    config: dict
    summary: dict = field(default_factory=dict)
    reps: dict = field(default_factory=dict)
    steps: dict = field(default_factory=dict)
    rounds: dict = field(default_factory=dict)
    draft_ranks: dict = field(default_factory=dict)  # /draft_ranks: per draft rank per round
    models: dict = field(default_factory=dict)   # "target"/"draft" -> attribute dict
    ranks: dict = field(default_factory=dict)    # rank number -> attribute dict
    prompt_digest: str = ""
    prompt_lengths: list = field(default_factory=list)  # /prompt_lengths: each prompt's tokens
    gemm: dict = field(default_factory=dict)     # characterize: /gemm columns
    gemm_attrs: dict = field(default_factory=dict)
    # characterize: its other tables (/memory, /forward, /all_reduce, /p2p, /node_read) as columns, and
    # every table's dataset attributes (the `names` of id columns), by table name
    tables: dict = field(default_factory=dict)
    table_attrs: dict = field(default_factory=dict)
    machine: dict = field(default_factory=dict)  # /machine: where it ran (machine.py)

    # --- identification -------------------------------------------------------------
    @property
    def name(self):
        return os.path.basename(self.path)

    @property
    def is_characterize(self):
        return self.mode == "characterize"

    @property
    def target(self):
        return self.config.get("target") or self.attrs.get("target", "?")

    @property
    def draft(self):
        d = self.config.get("draft", "none")
        return "-" if self.mode == "ar" or d in ("", "none") else d

    @property
    def lookahead(self):
        """K (0 for AR)."""
        if self.mode == "ar":
            return 0
        return int(_number(self.config.get("lookahead"), 0))

    @property
    def batch_size(self):
        return int(_number(self.config.get("batch_size"), 1))

    @property
    def temperature(self):
        return _number(self.config.get("temperature"), 0.0)

    @property
    def max_new_tokens(self):
        return int(_number(self.config.get("max_new_tokens"), 0))

    @property
    def fanout(self):
        return self.config.get("fanout", "-") if self.mode == "ssd" else "-"

    @property
    def fanout_kind(self):
        """uniform / geometric / list (the part before ':')."""
        return self.fanout.split(":")[0]

    @property
    def saguaro_c(self):
        return _number(self.config.get("saguaro_c"), 1.0) if self.mode == "ssd" else math.nan

    @property
    def fallback(self):
        return self.config.get("fallback", "-") if self.mode == "ssd" else "-"

    @property
    def backup(self):
        return self.config.get("backup", "-") if self.mode == "ssd" else "-"

    @property
    def synthetic_outcomes(self):
        return int(self.attrs.get("synthetic_outcomes", 0))

    @property
    def threads(self):
        """Threads of the target's leader rank (world rank 0)."""
        r0 = self.ranks.get(0, {})
        return int(r0.get("threads", _number(self.config.get("threads"), 0)))

    @property
    def tok_s(self):
        return float(self.summary.get("decode_tokens_per_s", math.nan))

    @property
    def tok_s_std(self):
        return float(self.summary.get("decode_tokens_per_s_std", math.nan))

    @property
    def ms_per_token(self):
        return float(self.summary.get("ms_per_token_mean", math.nan))

    @property
    def has_rounds(self):
        return bool(self.rounds) and len(self.rounds.get("rep", [])) > 0

    def sweep_key(self):
        """Runs comparable to one AR baseline: same target, batch size, temperature,
        token limit and prompts (by content)."""
        return (self.target, self.batch_size, self.temperature, self.max_new_tokens,
                self.prompt_digest)

    @property
    def lookahead_auto(self):
        """Whether ssd-bench chose K itself (-k auto: /config lookahead_choice "auto: ...")."""
        return str(self.config.get("lookahead_choice", "")).startswith("auto")

    def label(self):
        """Short description of the decoding configuration (not the sweep key)."""
        if self.mode == "ar":
            return "AR"
        # -k auto: one configuration whatever K it chose at each batch size (series over b)
        parts = [self.mode.upper(), "K=auto" if self.lookahead_auto else f"K={self.lookahead}"]
        if self.mode == "ssd":
            parts.append(self.fanout)
            if not math.isnan(self.saguaro_c) and self.saguaro_c != 1.0:
                parts.append(f"C={self.saguaro_c:g}")
            parts.append(f"fb={self.fallback}")
        return " ".join(parts)


def load_run(path):
    """Reads `path`; raises AnalysisError if it is missing, not HDF5 or not complete."""
    if not os.path.exists(path):
        raise AnalysisError(f"{path}: no such file")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise AnalysisError(f"{path}: not an HDF5 file ({e})")
    with f:
        attrs = {k: _plain(v) for k, v in f.attrs.items()}
        if int(attrs.get("complete", 0)) != 1:
            raise AnalysisError(f"{path}: incomplete (root attribute complete != 1)")
        mode = attrs.get("mode") or attrs.get("command") or ""
        machine = {k: _plain(v) for k, v in f["machine"].attrs.items()} if "machine" in f else {}
        if mode == "characterize" or (not attrs.get("mode") and "gemm" in f):
            run = Run(path=path, mode="characterize", attrs=attrs, config={}, machine=machine)
            for name in ("gemm", "memory", "forward", "all_reduce", "p2p", "node_read"):
                if name in f:
                    run.tables[name] = _table(f[name])
                    run.table_attrs[name] = {k: {a: _plain(v) for a, v in ds.attrs.items()}
                                             for k, ds in f[name].items()}
            run.gemm = run.tables.get("gemm", {})
            run.gemm_attrs = run.table_attrs.get("gemm", {})
            if "models" in f:
                run.models = {k: {a: _plain(v) for a, v in g.attrs.items()}
                              for k, g in f["models"].items()}
            return run
        try:
            config = json.loads(attrs.get("config_json", "{}"))
        except json.JSONDecodeError:
            config = {}
        if not config and "config" in f:
            config = {k: str(_plain(v)) for k, v in f["config"].attrs.items()}
        run = Run(path=path, mode=mode, attrs=attrs, config=config, machine=machine)
        if "summary" in f:
            run.summary = {k: _plain(v) for k, v in f["summary"].attrs.items()}
        for name in ("reps", "steps", "rounds", "draft_ranks"):
            if name in f:
                setattr(run, name, _table(f[name]))
        if "rounds/source" in f and "names" in f["rounds/source"].attrs:
            names = tuple(str(_plain(f["rounds/source"].attrs["names"])).split(","))
            if names != M.SOURCE_NAMES:
                raise AnalysisError(f"{path}: /rounds/source codes {names} differ from this "
                                    f"analysis's {M.SOURCE_NAMES}")
        if "models" in f:
            run.models = {k: {a: _plain(v) for a, v in g.attrs.items()}
                          for k, g in f["models"].items()}
        if "ranks" in f:
            run.ranks = {int(k): {a: _plain(v) for a, v in g.attrs.items()}
                         for k, g in f["ranks"].items() if k.isdigit()}
        if "prompt_lengths" in f:
            run.prompt_lengths = [int(n) for n in f["prompt_lengths"][...]]
        if "prompt_tokens" in f:
            run.prompt_digest = hashlib.sha1(
                np.ascontiguousarray(f["prompt_tokens"][...]).tobytes()).hexdigest()[:12]
        else:
            run.prompt_digest = "{prompts}/{num_prompts}/{prompt_len}/{seed}".format(
                **{k: config.get(k, "") for k in ("prompts", "num_prompts", "prompt_len",
                                                  "seed")})
        return run


def load_runs(paths):
    """(runs, errors): every file that loads, and one message per file that does not."""
    runs, errors = [], []
    for p in paths:
        try:
            runs.append(load_run(p))
        except AnalysisError as e:
            errors.append(str(e))
    return runs, errors
