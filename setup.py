"""setuptools' side of pyproject.toml: the version from configure.ac, the
compiled parts built by the Autotools build into wcodec/_native
(python/native_build.py), and a wheel tagged py3-none-<platform>: the package
loads its libraries with ctypes, so it holds no CPython extension and one
wheel serves every Python 3 of that platform."""
import os
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:  # setuptools >= 70 carries bdist_wheel; older ones use the wheel package's
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "python"))
import native_build  # noqa: E402


class BuildPyWithNative(build_py):
    """build_py, then the C build's products into wcodec/_native."""

    def run(self):
        super().run()
        try:
            products = native_build.build(HERE, log=self.announce_info)
            native_build.bundle(products, os.path.join(self.build_lib, "wcodec", "_native"),
                                log=self.announce_info)
        except native_build.BuildError as e:
            sys.exit(f"error: building the compiled parts of wcodec: {e}")

    def announce_info(self, msg):
        self.announce(msg, level=2)


class NativeDistribution(Distribution):
    """Holds compiled files: installed into platlib, the wheel not pure."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """Platform-specific (the libraries), Python-version independent (ctypes)."""

    def get_tag(self):
        return "py3", "none", super().get_tag()[2]


setup(version=native_build.version(HERE), distclass=NativeDistribution, cmdclass={"build_py": BuildPyWithNative, "bdist_wheel": PlatformWheel})
