"""Installs the onnx_genai package that the CMake build put in build/python (the extension module
and libonnx_genai.so are already built): `pip install build/python` (offline, Debian's setuptools)."""

from setuptools import setup
from setuptools.dist import Distribution


class BinaryDistribution(Distribution):
    """The package carries compiled libraries: its wheel is platform-specific."""

    def has_ext_modules(self):
        return True


setup(
    name="onnx-genai",
    version="@PROJECT_VERSION@",
    description="onnxruntime_genai's Python API over onnx-genai's runtime",
    packages=["onnx_genai"],
    package_data={"onnx_genai": ["*.so", "*.so.*", "onnx-genai"]},
    install_requires=["numpy"],
    distclass=BinaryDistribution,
    zip_safe=False,
)
