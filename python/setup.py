"""terngrad-bench: setuptools hook that builds the extension terngrad._core with the project's CMake.

`pip install ./python` (from a clone) and `pip install terngrad-<version>.tar.gz` (an sdist made by
`python -m build --sdist python/`) both configure the repository's top-level CMakeLists.txt with every
module but the codec, the battery library and the bindings turned off, in setuptools' build_temp (pip's
temporary build folder for an sdist; python/build/ in a clone, ignored by git), and build only the
target tg_python_core. Needs cmake, a C++20 compiler and the headers of Random123, Boost.Math and
nlohmann-json (Debian: cmake g++ librandom123-dev libboost-math-dev nlohmann-json3-dev python3-dev;
bash scripts/setup.sh installs them); not GTest, rapidcheck, Google Benchmark, CLI11 or LibTorch.

C++ sources: the clone around this folder, or, in an sdist, the copy under _cpp/ that the sdist
command below puts there (CPP_PARTS).
"""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.sdist import sdist

HERE = pathlib.Path(__file__).resolve().parent
BUNDLED = "_cpp"
# What the CMake build of tg_python_core reads, relative to the repository root.
CPP_PARTS = ["CMakeLists.txt", "cmake", "codec/CMakeLists.txt", "codec/include", "codec/src", "common",
             "verify/CMakeLists.txt", "verify/include", "verify/src", "python/CMakeLists.txt", "python/src"]
# Every module that is not needed is off, so its dependencies are never looked for.
CMAKE_OPTIONS = ["-DTG_BUILD_TESTS=OFF", "-DTG_BUILD_BENCH=OFF", "-DTG_BUILD_APPS=OFF", "-DTG_BUILD_CONVEX=OFF",
                 "-DTG_BUILD_TRAIN=OFF", "-DTG_BUILD_VERIFY=ON", "-DTG_BUILD_PYTHON=ON", "-DTG_ENABLE_CUDA=OFF",
                 "-DCMAKE_BUILD_TYPE=Release"]


def clone_root():
    """The repository root when this setup.py is python/setup.py of a clone, else None."""
    root = HERE.parent
    if (root / "codec" / "CMakeLists.txt").is_file() and (root / "python" / "setup.py").resolve() == HERE / "setup.py":
        return root
    return None


def cpp_root():
    root = clone_root()
    if root is not None:
        return root
    if (HERE / BUNDLED / "CMakeLists.txt").is_file():
        return HERE / BUNDLED
    raise SystemExit(f"terngrad: no C++ sources: {HERE} is neither python/ of a terngrad-bench clone nor an "
                     f"sdist with {BUNDLED}/ (build the sdist with `python -m build --sdist python/` in a clone)")


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if shutil.which("cmake") is None:
            raise SystemExit("terngrad: cmake not found (Debian: apt-get install cmake; or bash scripts/setup.sh)")
        source = cpp_root()
        build = pathlib.Path(self.build_temp).resolve() / "cmake"
        build.mkdir(parents=True, exist_ok=True)
        # The interpreter and nanobind (pip's isolated build environment) change between builds: a fresh
        # configure every time; the object files of an earlier build stay and are reused when unchanged.
        (build / "CMakeCache.txt").unlink(missing_ok=True)
        env = dict(os.environ)
        # ccache (used when the project's CMake finds it): paths relative to the folder holding both the
        # sources and the build, so an sdist unpacked in another temporary folder hits the same entries.
        env.setdefault("CCACHE_BASEDIR", os.path.commonpath([str(source), str(build)]))
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.check_call(["cmake", "-S", str(source), "-B", str(build), *generator, *CMAKE_OPTIONS,
                               f"-DTG_PYTHON={sys.executable}", f"-DPython_EXECUTABLE={sys.executable}"], env=env)
        jobs = env.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.check_call(["cmake", "--build", str(build), "--target", "tg_python_core", "--parallel", jobs],
                              env=env)
        built = sorted((build / "python" / "package" / "terngrad").glob("_core*"))
        if not built:
            raise SystemExit(f"terngrad: CMake did not build terngrad._core in {build} (see the messages above)")
        dest = pathlib.Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[0], dest)


class SdistWithSources(sdist):
    """The sdist of a clone carries the C++ sources it builds from under _cpp/."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        root = clone_root()
        if root is None:  # an sdist of an sdist: _cpp/ came in through MANIFEST.in
            return
        for part in CPP_PARTS:
            src, dst = root / part, pathlib.Path(base_dir) / BUNDLED / part
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True)
            else:
                shutil.copy2(src, dst)


setup(ext_modules=[Extension("terngrad._core", sources=[])],
      cmdclass={"build_ext": CMakeBuild, "sdist": SdistWithSources})
