"""The command-line tools a wheel carries (wcodec/_native/wcodec and
wcodecfs), as the environment's `wcodec` and `wcodecfs` commands: pip
writes a script for each entry point of pyproject.toml, and the script
replaces itself with the tool (exec), so signals, exit codes, standard
streams and wcodecfs's daemon behave exactly as the tool's own. The tools
find the CUDA plugin beside them through WCODEC_PLUGIN_DIR (set here unless
the caller set it). Installed otherwise (make install, Debian packages)
the tools are on PATH themselves and this module is not used.
"""
import os
import sys

from ._lib import NATIVE_DIR


def _exec(tool):
    path = os.path.join(NATIVE_DIR, tool)
    if not os.access(path, os.X_OK):
        sys.stderr.write(f"{tool}: this installation of the Python package wcodec carries no {tool} "
                         f"({path} is missing: the wheel was built without "
                         f"{'libfuse3' if tool == 'wcodecfs' else 'its tools'})\n")
        sys.exit(127)
    env = dict(os.environ)
    env.setdefault("WCODEC_PLUGIN_DIR", NATIVE_DIR)
    os.execve(path, [tool] + sys.argv[1:], env)


def wcodec():
    """Entry point of the `wcodec` command (wcodec(1))."""
    _exec("wcodec")


def wcodecfs():
    """Entry point of the `wcodecfs` command (wcodecfs(1))."""
    _exec("wcodecfs")
