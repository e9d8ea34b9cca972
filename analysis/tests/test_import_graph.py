#!/usr/bin/python3
"""ssd_analysis without import circles: the graph of which module imports which (at module level
or inside a function alike) has no cycle, and no module imports or reaches a private (`_name`)
name of another; a piece several modules share lives in the module it belongs to, under a public
name. Read from the sources, nothing imported. Run: /usr/bin/python3 -m unittest discover -s
analysis/tests"""
import ast
import os
import shutil
import tempfile
import unittest

PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ssd_analysis")
NAME = "ssd_analysis"


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _source(node, package, modules):
    """What `from X import ...` imports from: "" for the package itself (its names are modules),
    the package's module X names, or None for anything else (stdlib, other packages)."""
    if node.level == 1:
        base = node.module or ""
    elif node.level == 0 and node.module and node.module.split(".")[0] == package:
        base = node.module[len(package) + 1:]
    else:
        return None
    head = base.split(".")[0]
    return head if head in modules else ("" if not base else None)


def import_graph(directory, package=NAME):
    """({module: set of modules it imports}, [(module, line, what)] private names it takes from
    another module: `from .x import _y`, or `X._y` where X is another module of the package)."""
    modules = sorted(f[:-3] for f in os.listdir(directory) if f.endswith(".py"))
    edges, private = {}, []
    for m in modules:
        with open(os.path.join(directory, m + ".py")) as f:
            tree = ast.parse(f.read(), filename=m + ".py")
        out = edges.setdefault(m, set())
        aliases = {}   # local name -> module of the package
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _source(node, package, modules)
                if base is None:
                    continue
                for a in node.names:
                    if not base:                  # from . import x [as X]
                        if a.name in modules:
                            out.add(a.name)
                            aliases[a.asname or a.name] = a.name
                    else:                         # from .x import y
                        out.add(base)
                        if _private(a.name):
                            private.append((m, node.lineno, f"{a.name} from {base}"))
            elif isinstance(node, ast.Import):
                for a in node.names:
                    parts = a.name.split(".")
                    if parts[0] == package and len(parts) > 1 and parts[1] in modules:
                        out.add(parts[1])
                        if a.asname:
                            aliases[a.asname] = parts[1]
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and aliases[node.value.id] != m
                    and _private(node.attr)):
                private.append((m, node.lineno, f"{node.value.id}.{node.attr} of "
                                                f"{aliases[node.value.id]}"))
        out.discard(m)
    return edges, private


def cycles(edges):
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


class ImportGraph(unittest.TestCase):
    def test_read_the_package(self):
        edges, _ = import_graph(PACKAGE)
        self.assertGreater(len(edges), 15)
        self.assertIn("metrics", edges["predict"])
        self.assertIn("hardware", edges["measured"])

    def test_no_cycle(self):
        edges, _ = import_graph(PACKAGE)
        found = cycles(edges)
        self.assertEqual(found, [], "import cycles in ssd_analysis: " + "; ".join(
            " <-> ".join(c) for c in found) + " (move what the modules share to where it "
            "belongs, see analysis/tests/test_import_graph.py)")

    def test_no_private_name_across_modules(self):
        _, private = import_graph(PACKAGE)
        self.assertEqual(private, [], "private names used across modules (give them a public "
                         "name in the module they belong to): " + "; ".join(
                             f"{m}.py:{line}: {what}" for m, line, what in private))


class TheCheckFails(unittest.TestCase):
    """The checks above on a package made to break them."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        files = {"__init__.py": "",
                 "a.py": "from . import b as B\nfrom .c import _helper\n\n\n"
                         "def f():\n    return B._secret\n",
                 "b.py": "import math\n\n\ndef g():\n    from .c import h\n    return h\n",
                 "c.py": "from ssd_analysis import a\n_helper = h = 1\n",
                 "d.py": "from . import c\n"}
        for name, text in files.items():
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(text)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_finds_a_cycle_through_a_function_level_import(self):
        edges, _ = import_graph(self.dir)
        self.assertEqual(edges["b"], {"c"})
        self.assertEqual(cycles(edges), [["a", "b", "c"]])

    def test_finds_private_names(self):
        _, private = import_graph(self.dir)
        self.assertEqual(sorted(private), [("a", 2, "_helper from c"), ("a", 6, "B._secret of b")])


if __name__ == "__main__":
    unittest.main()
