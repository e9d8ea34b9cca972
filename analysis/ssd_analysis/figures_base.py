"""What every figures module (figures.py, figures_cache.py, figures_detail.py,
figures_fallback.py, figures_scale.py) shares: matplotlib's Agg backend and the figures' style,
both set on import, the colour cycle and each mode's colour, the exception of a skipped figure,
two helpers over runs and a model's short name."""
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PALETTE = plt.rcParams["axes.prop_cycle"].by_key()["color"]
plt.rcParams.update({"font.size": 10, "axes.grid": True, "grid.alpha": 0.3,
                     "savefig.dpi": 150, "figure.constrained_layout.use": True})
MODE_COLORS = {"ar": "#7f7f7f", "sd": "#1f77b4", "ssd": "#d62728"}


class Skip(Exception):
    """A figure whose inputs are missing; the message says what is missing."""


def short(spec):
    return str(spec).removeprefix("synthetic:")


def speculative(runs, mode=None):
    """The SD and SSD runs (or those of `mode`) that have /rounds records."""
    return [r for r in runs if r.mode in ((mode,) if mode else ("sd", "ssd")) and r.has_rounds]


def model_name(spec):
    """A model's name without its directory: checkpoints are given as paths."""
    return os.path.basename(short(spec).rstrip("/"))
