"""Re-running a tool under the project's venv (scripts/python-env.sh) when it needs a PyPI
package (tokenizers, jinja2) that Debian's python3 lacks."""
import importlib.util
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def ensure(*modules):
    """Returns when every module imports here; otherwise re-executes this process under the
    venv's python (creating the venv once), or exits 2 with one line if that cannot work."""
    if all(importlib.util.find_spec(m) for m in modules):
        return
    # Whether this is the venv's interpreter, from the interpreter itself: an environment
    # variable would be inherited by the tools this process starts under Debian's python.
    if os.path.realpath(sys.prefix) == os.path.realpath(os.path.join(ROOT, ".venv")):
        print(f"{os.path.basename(sys.argv[0])}: the venv lacks {', '.join(modules)}",
              file=sys.stderr)
        sys.exit(2)
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "python-env.sh")],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        sys.exit(2)
    python = proc.stdout.split()[-1]
    os.execv(python, [python, os.path.abspath(sys.argv[0]), *sys.argv[1:]])
