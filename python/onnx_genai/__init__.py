"""onnx-genai's Python API, shaped like onnxruntime_genai's: a script written for it runs here
after changing ``import onnxruntime_genai as og`` to ``import onnx_genai as og``.

The classes are those of onnxruntime_genai (Config, Model, Tokenizer, TokenizerStream, Tensor,
GeneratorParams, Generator, and for batched use Engine and Request) over onnx-genai's C API
(libonnx_genai.so, shipped beside this file). Errors raise RuntimeError with the library's
message.
"""

from ._onnx_genai import (  # noqa: F401
    Config,
    Engine,
    Generator,
    GeneratorParams,
    Model,
    Request,
    Tensor,
    Tokenizer,
    TokenizerStream,
)

__version__ = "@PROJECT_VERSION@"
