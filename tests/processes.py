"""Shared by the Python tests that kill ranks or check none outlived a job: processes seen
through /proc (children, every descendant, an environment variable, alive or not, the signals
it handles), and a started process signalled, waited for and never left running."""
import contextlib
import os
import time


def _parent(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def children(pid):
    """Pids whose parent is `pid`."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if _parent(entry) == pid:
                    out.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return out


def descendants(pid):
    """Pids of every process below `pid`."""
    out, todo = [], [pid]
    while todo:
        found = children(todo.pop())
        out += found
        todo += found
    return out


def environ_int(pid, name):
    """The integer value of environment variable `name` of process `pid`, or None."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(name.encode() + b"="):
                    return int(item.split(b"=", 1)[1])
    except (OSError, ValueError):
        pass
    return None


def world_ranks(launcher):
    """{MPI world rank: pid} of the ranks mpiexec `launcher` has started so far."""
    ranks = {}
    for pid in children(launcher):
        rank = environ_int(pid, "OMPI_COMM_WORLD_RANK")
        if rank is not None:
            ranks[rank] = pid
    return ranks


def alive(pid):
    """True unless the process is gone or a zombie (dead, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def catches(pid, sig):
    """True when process `pid` has a handler installed for signal `sig` (SigCgt in its status)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (int(sig) - 1) & 1)
    except (OSError, ValueError):
        pass
    return False


@contextlib.contextmanager
def killed_on_exit(proc):
    """Yields subprocess.Popen `proc`; on the way out (a failed assertion or wait included)
    kills and reaps it if it still runs, so that no test leaves a job behind."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def signal_and_wait(proc, sig, timeout):
    """Sends `sig` to subprocess.Popen `proc` and waits up to `timeout` s for it to end; returns
    (stdout, stderr, seconds from the signal to its end)."""
    start = time.monotonic()
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=timeout)
    return stdout, stderr, time.monotonic() - start
