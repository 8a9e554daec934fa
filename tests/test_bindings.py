"""The Python package's binding layer against the C headers.

1. Every ctypes structure of wcodec._lib (the one module of foreign
   declarations) has the C type's members, in order, at the same offsets
   and sizes, and the same total size. The C layout is read from the
   compiler's debug information (gdb's `ptype /o` of an object file that
   includes the headers), so a member added to a C structure, even one
   that fits in its tail padding, fails here until its mirror has it.
2. The comparison itself catches such a member (a probe structure with
   one member more than its mirror must be reported).
3. No other module of the package declares foreign structures or function
   prototypes (ctypes.Structure subclasses, argtypes, restype, CDLL).
4. The package's modules import each other without a cycle (imports
   inside functions included).

Usage: test_bindings.py SRCDIR BUILDDIR [CUDA_INCDIR]; exits 77 (skip)
without gdb or a C compiler, says which structures it could not check
(the CUDA plugin's without cuda_runtime_api.h) and fails on any mismatch.
"""
import ast
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC, BUILD = sys.argv[1], sys.argv[2]
CUDA_INC = sys.argv[3] if len(sys.argv) > 3 else ""
sys.path.insert(0, os.path.join(SRC, "python"))
from wcodec import _lib  # noqa: E402

CC = os.environ.get("CC", "cc").split()
MEMBER = re.compile(r"^/\*\s+(\d+)\s+\|\s+(\d+)\s+\*/(\s+)(.*);$")
TOTAL = re.compile(r"/\* total size \(bytes\):\s+(\d+) \*/")


def c_layouts(headers, types, include_dirs):
    """{type: (members [(name, offset, size)], sizeof)} of the C types,
    compiled with CC -g from the headers; None for a type gdb does not know."""
    d = tempfile.mkdtemp()
    try:
        src = os.path.join(d, "layout.c")
        with open(src, "w") as f:
            f.writelines(f'#include "{h}"\n' for h in headers)
            f.writelines(f"{t} probe_{i};\n" for i, t in enumerate(types))
        obj = os.path.join(d, "layout.o")
        cmd = CC + ["-g", "-O0", "-c", src, "-o", obj] + [f"-I{i}" for i in include_dirs]
        subprocess.run(cmd, check=True)
        args = ["gdb", "-batch", "-nx"]
        for t in types:
            args += ["-ex", f"echo @@{t}\\n", "-ex", f"ptype /o {t}"]
        out = subprocess.run(args + [obj], check=True, capture_output=True, text=True).stdout
    finally:
        shutil.rmtree(d)
    result = {}
    for block in out.split("@@")[1:]:
        lines = block.splitlines()
        name, members, total, indent = lines[0].strip(), [], None, None
        for line in lines[1:]:
            m = MEMBER.match(line)
            if m:
                if indent is None:
                    indent = len(m.group(3))
                if len(m.group(3)) != indent:  # a nested aggregate's own members
                    continue
                decl = m.group(4)
                fp = re.search(r"\(\*(\w+)\)", decl)
                ident = fp.group(1) if fp else re.search(r"(\w+)(\[\d+\])*$", decl).group(1)
                members.append((ident, int(m.group(1)), int(m.group(2))))
            t = TOTAL.search(line)
            if t and total is None:
                total = int(t.group(1))
        result[name] = (members, total) if total is not None else None
    return result


def mirror_layout(cls):
    """The ctypes structure's members [(name, offset, size)] and size."""
    return [(n, getattr(cls, n).offset, getattr(cls, n).size) for n, _ in cls._fields_], ctypes.sizeof(cls)


def differences(c_layout, cls):
    """Human-readable mismatches between a C layout and a ctypes mirror."""
    if c_layout is None:
        return [f"{cls.c_name}: the C compiler knows no such type"]
    (cm, csize), (pm, psize) = c_layout, mirror_layout(cls)
    out = []
    if [m[0] for m in cm] != [m[0] for m in pm]:
        out.append(f"{cls.c_name}: members {[m[0] for m in cm]} in C, {[m[0] for m in pm]} in {cls.__name__}")
    for a, b in zip(cm, pm):
        if a[0] == b[0] and a[1:] != b[1:]:
            out.append(f"{cls.c_name}.{a[0]}: offset/size {a[1:]} in C, {b[1:]} in {cls.__name__}")
    if csize != psize:
        out.append(f"{cls.c_name}: sizeof {csize} in C, {psize} in {cls.__name__}")
    return out


def check_structures():
    include = [os.path.join(SRC, "src"), os.path.join(SRC, "cuda"), BUILD]
    checked = [s for s in _lib.STRUCTURES if s.header != "wcodec_cuda.h" or CUDA_INC]
    skipped = [s.c_name for s in _lib.STRUCTURES if s not in checked]
    if CUDA_INC:
        include.append(CUDA_INC)
    headers = sorted({s.header for s in checked})
    layouts = c_layouts(headers, [s.c_name for s in checked], include)
    bad = [d for s in checked for d in differences(layouts.get(s.c_name), s)]
    for s in checked:
        print(f"  {s.c_name}: {len(s._fields_)} members, {ctypes.sizeof(s)} bytes")
    if skipped:
        print(f"  not checked (no cuda_runtime_api.h): {', '.join(skipped)}")
    return bad, len(checked)


def check_probe():
    """A C member the mirror lacks, in the tail padding: must be caught."""
    d = tempfile.mkdtemp()
    try:
        with open(os.path.join(d, "probe.h"), "w") as f:
            f.write("#include <stdint.h>\ntypedef struct probe { uint64_t a; uint32_t b; uint32_t added; } probe;\n")

        class Probe(ctypes.Structure):
            c_name, header = "probe", "probe.h"
            _fields_ = [("a", ctypes.c_uint64), ("b", ctypes.c_uint32)]
        layout = c_layouts(["probe.h"], ["probe"], [d])["probe"]
    finally:
        shutil.rmtree(d)
    found = differences(layout, Probe)
    return [] if found else ["a member added in C (in the tail padding) went unnoticed"]


def check_declarations():
    """Foreign declarations outside _lib.py."""
    pkg, bad = os.path.join(SRC, "python", "wcodec"), []
    for name in sorted(os.listdir(pkg)):
        if not name.endswith(".py") or name in ("_lib.py",):
            continue
        tree = ast.parse(open(os.path.join(pkg, name)).read(), name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("argtypes", "restype", "CDLL", "Structure"):
                bad.append(f"{name}:{node.lineno}: {node.attr} outside wcodec/_lib.py")
    return bad


def import_graph():
    """{module: {modules of the package it imports}} from the sources."""
    pkg, graph = os.path.join(SRC, "python", "wcodec"), {}
    for name in sorted(os.listdir(pkg)):
        if not name.endswith(".py"):
            continue
        mod = name[:-3]
        deps = graph.setdefault(mod, set())
        for node in ast.walk(ast.parse(open(os.path.join(pkg, name)).read(), name)):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("wcodec."):
                deps.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                deps.update(a.name.split(".")[1] for a in node.names if a.name.startswith("wcodec."))
        deps.discard(mod)
    return graph


def check_cycles():
    graph, bad, state = import_graph(), [], {}

    def visit(m, path):
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if d == "__init__" or d not in graph:
                continue
            if state.get(d) == 1:
                bad.append("import cycle: " + " -> ".join(path[path.index(d):] + [d]))
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return bad


def main():
    if not shutil.which("gdb") or not shutil.which(CC[0]):
        print("SKIP: gdb or the C compiler is missing (the layouts are read from debug information)")
        return 77
    bad, n = check_structures()
    bad += check_probe()
    bad += check_declarations()
    bad += check_cycles()
    for b in bad:
        print("FAIL:", b)
    if bad:
        return 1
    print(f"PASS: {n} structures match their C layouts; the probe's extra member was caught; "
          f"no foreign declaration outside _lib.py; no import cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
