"""wcodec: load .wcodec checkpoints (and plain safetensors files) straight
into CPU or GPU memory with the safetensors API.

    from wcodec.torch import load_file, safe_open      # torch tensors
    from wcodec.numpy import load_file                 # numpy arrays

A .wcodec file is read through libwcodec: only the tiles a read touches are
decoded, every payload and decoded tile is checked against its XXH3-64, and
a damaged tile raises WcodecError (code "CORRUPT"), never returns wrong
bytes. device="cuda" decodes on the GPU through the CUDA plugin
(wcodec-cuda.so): payloads are read into a bounded ring of page-locked
buffers, uploaded and decoded straight into the returned tensors
(cuda/loader.c). Plain .safetensors paths work with every function too.
"""
from ._lib import WcodecError
from ._file import TensorFile, cuda_loader_memory, open_checkpoint_dir

__all__ = ["WcodecError", "TensorFile", "cuda_loader_memory", "open_checkpoint_dir"]
__version__ = "0.1.0"
