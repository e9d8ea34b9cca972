"""Which machine a result or characterize file came from, for `ssd-analyze compare`.

Files written since issue C6 carry a `/machine` group (docs/hdf5-schema.md): the CPU's model
string, family and model numbers, the kernel-relevant flags, online CPUs and memory, the GPU's
name, SMs and memory, the CUDA driver and runtime, the host name and the Slurm job id. Older
files know only the root attributes `cpu_model`, `host_cpus`, `gpu_model` and `host`; their
identity is those fields, and they group with any newer file that agrees on them.

A machine here is a kind of host, not one node: two nodes of a partition with the same CPU,
CPUs, memory and GPU are one machine (their host names are listed, not compared), so their
files are averaged together; files that differ in any field both record never are.
"""
import re
from dataclasses import dataclass, field

GIB = 1024 ** 3

# The fields that tell machines apart, as `identity` names them; memory in whole GiB, since the
# kernel reserves a little of it differently from boot to boot.
IDENTITY = ("cpu_model", "cpu_family", "cpu_model_number", "cpu_flags", "cpus", "memory_gib",
            "gpu_name", "gpu_sm_count", "gpu_memory_gib")


def _gpu_name(text):
    """The GPU's name without what the run header adds to tell devices of a node apart:
    "NVIDIA H100 80GB HBM3 (cuda:0, PCI 0000:1B:00.0, cc 9.0)" -> "NVIDIA H100 80GB HBM3"."""
    text = str(text or "none")
    return re.sub(r"\s*\(cuda:.*\)$", "", text) or "none"


def identity(run):
    """{field: value} of IDENTITY that the file records (absent where it does not)."""
    m, a = run.machine, run.attrs
    if m:
        ident = {k: m[k] for k in ("cpu_model", "cpu_family", "cpu_model_number", "cpu_flags",
                                   "cpus", "gpu_name", "gpu_sm_count") if k in m}
        ident = {k: v for k, v in ident.items() if v not in (-1, "")}
        if "memory_bytes" in m and int(m["memory_bytes"]) > 0:
            ident["memory_gib"] = round(int(m["memory_bytes"]) / GIB)
        if "gpu_memory_bytes" in m and int(m["gpu_memory_bytes"]) > 0:
            ident["gpu_memory_gib"] = round(int(m["gpu_memory_bytes"]) / GIB)
        ident["gpu_name"] = _gpu_name(ident.get("gpu_name"))
        return ident
    ident = {"gpu_name": _gpu_name(a.get("gpu_model"))}
    if a.get("cpu_model"):
        ident["cpu_model"] = str(a["cpu_model"])
    if int(a.get("host_cpus", 0) or 0) > 0:
        ident["cpus"] = int(a["host_cpus"])
    return ident


def compatible(a, b):
    """Whether two identities can be one machine: every field both know agrees."""
    return all(a[k] == b[k] for k in a.keys() & b.keys())


@dataclass
class Machine:
    """One machine and its files: `ident` holds every field any of its files knows."""
    ident: dict
    files: list = field(default_factory=list)

    def details(self, key):
        """The distinct values of a /machine attribute (or root attribute, for `host`) over the
        machine's files, joined: host names, Slurm job ids, driver versions."""
        vals = []
        for f in self.files:
            v = f.machine.get(key) if f.machine else \
                {"hostname": f.attrs.get("host")}.get(key)
            if v not in (None, "", "none") and str(v) not in vals:
                vals.append(str(v))
        return ",".join(vals) or "-"

    def label(self):
        """A short name: the GPU where there is one, else the CPU, with its CPUs."""
        if self.ident.get("gpu_name", "none") != "none":
            return self.ident["gpu_name"]
        cpu = self.ident.get("cpu_model", "unknown CPU")
        fam = (f" f{self.ident['cpu_family']}m{self.ident['cpu_model_number']}"
               if "cpu_family" in self.ident else "")
        cpus = f", {self.ident['cpus']} CPUs" if "cpus" in self.ident else ""
        return f"{cpu}{fam}{cpus}"


def group(runs):
    """([Machine] in the order their first file appears, notes): each file joins the first
    machine it is compatible with, else starts one. Files with /machine are placed first, so
    that an older file, which knows fewer fields, meets every machine it might belong to; one
    that fits several joins the first, and a note says so."""
    machines, notes = [], []
    for run in sorted(runs, key=lambda r: not r.machine):
        ident = identity(run)
        homes = [m for m in machines if compatible(m.ident, ident)]
        if not homes:
            machines.append(Machine(dict(ident), [run]))
            continue
        if len(homes) > 1:
            notes.append(f"{run.name} predates /machine and fits {len(homes)} machines "
                         f"({'; '.join(m.label() for m in homes)}): counted with the first")
        homes[0].ident.update(ident)
        homes[0].files.append(run)
    order = {id(r): i for i, r in enumerate(runs)}
    machines.sort(key=lambda m: min(order[id(f)] for f in m.files))
    for m in machines:
        m.files.sort(key=lambda f: order[id(f)])
    return machines, notes
