"""An installed wcodec, as a user meets it: run from / by the Python that
has it installed (a venv with the wheel, or Debian's python3 with
python3-wcodec), with no WCODEC_* variables and no LD_LIBRARY_PATH.

  installed_check.py KIND SAFETENSORS [SAFETENSORS...]
  KIND: wheel (the package carries its library, tools and their libraries
        in wcodec/_native) or system (libwcodec from the dynamic linker's
        search, the tools on PATH)

For each safetensors file: `wcodec pack` (the command this installation
put on PATH) packs it, `wcodec verify` checks it, and wcodec.numpy's
load_file returns every tensor with the original's dtype, shape and bytes
(read from the original by the safetensors layout, not by wcodec); with
torch, wcodec.torch too. For a wheel: every shared library and tool in
wcodec/_native finds each dependency beside it or among the C runtime's
(ldd), the CUDA plugin, where carried, is the one beside the library, and
`wcodec --version` names it. Prints PASS or FAIL lines; exits 1 on any
failure.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

KIND, FILES = sys.argv[1], [os.path.abspath(p) for p in sys.argv[2:]]
assert KIND in ("wheel", "system"), KIND
failures = []


def check(ok, what):
    print(("PASS: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def original_tensors(path):
    """{name: (dtype, shape, bytes)} of a safetensors file, by its layout."""
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack_from("<Q", blob, 0)[0]
    head = json.loads(blob[8:8 + n])
    return {k: (v["dtype"], v["shape"], blob[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in head.items() if k != "__metadata__"}


def main():
    os.chdir("/")
    for var in ("LD_LIBRARY_PATH", "PYTHONPATH", "WCODEC_LIBRARY", "WCODEC_PLUGIN_DIR"):
        if os.environ.get(var):
            sys.exit(f"{var} is set: this check runs without it")
    import wcodec
    import wcodec.numpy
    from wcodec import _lib
    pkg = os.path.dirname(os.path.abspath(wcodec.__file__))
    lib = _lib.lib()._name
    print(f"# package {pkg}, library {lib}")
    tool = shutil.which("wcodec")
    check(tool is not None, f"a wcodec command on PATH ({tool})")
    if KIND == "wheel":
        native = os.path.join(pkg, "_native")
        check(lib == os.path.join(native, "libwcodec.so.0"), "the library is the wheel's own")
        check(os.path.dirname(sys.executable) == os.path.dirname(tool or ""),
              "wcodec is a command of this environment")
        system = ("libc.so", "libm.so", "libdl.so", "librt.so", "libpthread.so", "libutil.so", "libresolv.so",
                  "libnsl.so", "libcrypt.so", "ld-linux", "linux-vdso", "libgcc_s.so", "libstdc++.so")
        for name in sorted(os.listdir(native)):
            out = subprocess.run(["ldd", os.path.join(native, name)], capture_output=True, text=True).stdout
            outside = [ln.strip() for ln in out.splitlines() if "=>" in ln and native not in ln
                       and not ln.strip().startswith(system)]
            check(not outside and "not found" not in out, f"_native/{name} finds its libraries beside it" +
                  (f": not {outside}" if outside else ""))
        if os.path.exists(os.path.join(native, "wcodec-cuda.so")):
            v = subprocess.run(["wcodec", "--version"], capture_output=True, text=True).stdout
            check(os.path.join(native, "wcodec-cuda.so") in v, "wcodec --version names the wheel's plugin")
            check(os.path.join(native, "wcodec-cuda.so") == os.path.join(_lib.plugin_dirs()[0], "wcodec-cuda.so"),
                  "the package looks for the plugin beside its library first")
    else:
        check(not lib.startswith(pkg), f"the library comes from the system ({lib})")
    try:
        import torch
        import wcodec.torch
    except ImportError:
        torch = None
        print("# no torch here: wcodec.torch not checked")
    work = tempfile.mkdtemp()
    try:
        for src in FILES:
            packed = os.path.join(work, os.path.basename(src).replace(".safetensors", ".wcodec"))
            r = subprocess.run(["wcodec", "pack", "-q", src, packed], capture_output=True, text=True)
            check(r.returncode == 0, f"wcodec pack {os.path.basename(src)} {r.stderr.strip()}")
            r = subprocess.run(["wcodec", "verify", packed], capture_output=True, text=True)
            check(r.returncode == 0, f"wcodec verify {os.path.basename(packed)}")
            want = original_tensors(src)
            got = wcodec.numpy.load_file(packed)
            bad = [k for k, (dt, shape, data) in want.items()
                   if k not in got or list(got[k].shape) != shape or got[k].tobytes() != data]
            check(set(got) == set(want) and not bad,
                  f"wcodec.numpy.load_file: {len(want)} tensors equal to the original" + (f": not {bad[:3]}" if bad else ""))
            if torch is not None:
                got = wcodec.torch.load_file(packed)
                bad = [k for k, (dt, shape, data) in want.items()
                       if list(got[k].shape) != shape or
                       got[k].contiguous().view(-1).view(torch.uint8).numpy().tobytes() != data]
                check(not bad, f"wcodec.torch.load_file: {len(want)} tensors equal to the original" + (f": not {bad[:3]}" if bad else ""))
    finally:
        shutil.rmtree(work)
    print(f"{len(failures) and 'FAILED' or 'OK'}: {KIND} installation, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
