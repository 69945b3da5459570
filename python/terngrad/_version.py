"""The package version: equal to the top-level CMakeLists.txt's project VERSION (python/tests/test_version.py)."""
__version__ = "0.1.0"
