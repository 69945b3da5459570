"""terngrad-bench: setuptools hook that builds the extension terngrad._core with the project's CMake
(target tg_python_core, in build/python/pip-build at the repository root) for `pip install ./python`.
Needs the project's build dependencies (bash scripts/setup.sh) and nanobind in the building environment."""
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent.parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = ROOT / "build" / "python" / "pip-build"
        subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                               "-DTG_ENABLE_CUDA=OFF", "-DTG_BUILD_BENCH=OFF", f"-DTG_PYTHON={sys.executable}",
                               f"-DPython_EXECUTABLE={sys.executable}"])
        subprocess.check_call(["cmake", "--build", str(build), "--target", "tg_python_core"])
        built = sorted((build / "python" / "package" / "terngrad").glob("_core*"))
        if not built:
            raise RuntimeError(f"CMake did not build terngrad._core in {build} (is nanobind installed for "
                               f"{sys.executable}? see the CMake messages above)")
        dest = pathlib.Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[0], dest)


setup(ext_modules=[Extension("terngrad._core", sources=[])], cmdclass={"build_ext": CMakeBuild})
