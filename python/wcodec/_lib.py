"""ctypes bindings of libwcodec's loader API (src/loader/loader.h) and of the
CUDA plugin's wcodec_cuda_load (cuda/wcodec_cuda.h).

Where the libraries are found, first match wins:
  libwcodec:  $WCODEC_LIBRARY (a path), the libdir this package was installed
              with (_paths.py), then the dynamic linker's search (libwcodec.so.0).
  the plugin: $WCODEC_PLUGIN_DIR/wcodec-cuda.so, then the installed pkglibdir.
The plugin is optional: without it (or without a GPU) only device="cpu" works.
"""
import ctypes
import ctypes.util
import os
import threading

try:  # written by `make install`; absent in the source tree
    from . import _paths
except ImportError:  # pragma: no cover - depends on the installation
    _paths = None

# wc_err (src/core/wc_error.h), in order.
ERROR_NAMES = ("OK", "NOMEM", "IO", "FORMAT", "CORRUPT", "UNSUPPORTED", "INVAL", "RANGE", "NOTFOUND",
               "BACKEND")
WC_E_NOTFOUND = 8


class WcodecError(OSError):
    """A libwcodec failure: `code` is the wc_err name ("CORRUPT", "IO",
    "FORMAT", "BACKEND", ...), the message the library's reason (it names
    the file, and for a damaged tile the tensor and the tile)."""

    def __init__(self, code, reason):
        super().__init__(f"{reason} [{code}]" if reason else code)
        self.code = code
        self.reason = reason


class LossyDesc(ctypes.Structure):
    """wc_lossy_desc (src/container/container.h)."""
    _fields_ = [("bits", ctypes.c_uint32), ("axis", ctypes.c_uint32), ("channels", ctypes.c_uint32),
                ("group", ctypes.c_uint32), ("nscales", ctypes.c_uint64), ("elems", ctypes.c_uint64)]


class LoadRange(ctypes.Structure):
    """wc_load_range: `length` bytes at data-section `offset` of files[file] into dst."""
    _fields_ = [("file", ctypes.c_uint32), ("reserved", ctypes.c_uint32), ("offset", ctypes.c_uint64),
                ("length", ctypes.c_uint64), ("dst", ctypes.c_void_p)]


class CudaLoadOpts(ctypes.Structure):
    _fields_ = [("staging_bytes", ctypes.c_size_t), ("readers", ctypes.c_uint)]


class CudaLoadStats(ctypes.Structure):
    _fields_ = [("file_bytes", ctypes.c_uint64), ("out_bytes", ctypes.c_uint64),
                ("pinned_bytes", ctypes.c_size_t), ("device_bytes", ctypes.c_size_t)]


_lock = threading.Lock()
_lib = None
_cuda = None
_cuda_error = None


def _candidates_lib():
    env = os.environ.get("WCODEC_LIBRARY")
    if env:
        yield env
    if _paths is not None:
        yield os.path.join(_paths.LIBDIR, "libwcodec.so.0")
    yield "libwcodec.so.0"
    found = ctypes.util.find_library("wcodec")
    if found:
        yield found


def lib():
    """The loaded libwcodec (ctypes.CDLL), its functions typed. Raises
    WcodecError("NOTFOUND") naming the places tried when it cannot load."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for cand in _candidates_lib():
            try:
                # RTLD_GLOBAL: the plugin, loaded later, links against it
                L = ctypes.CDLL(cand, mode=ctypes.RTLD_GLOBAL)
                break
            except OSError as e:
                tried.append(f"{cand} ({e})")
        else:
            raise WcodecError("NOTFOUND", "libwcodec not found: tried " + "; ".join(tried))
        c = ctypes
        L.wc_last_detail.restype = c.c_char_p
        L.wc_last_detail.argtypes = []
        L.wc_strerror.restype = c.c_char_p
        L.wc_strerror.argtypes = [c.c_int]
        L.wc_tensor_file_open.restype = c.c_int
        L.wc_tensor_file_open.argtypes = [c.c_char_p, c.POINTER(c.c_void_p)]
        L.wc_tensor_file_close.restype = None
        L.wc_tensor_file_close.argtypes = [c.c_void_p]
        L.wc_tensor_file_header.restype = c.c_void_p
        L.wc_tensor_file_header.argtypes = [c.c_void_p, c.POINTER(c.c_size_t)]
        L.wc_tensor_file_data_size.restype = c.c_uint64
        L.wc_tensor_file_data_size.argtypes = [c.c_void_p]
        L.wc_tensor_file_container.restype = c.c_void_p
        L.wc_tensor_file_container.argtypes = [c.c_void_p]
        L.wc_tensor_file_tile_span.restype = c.c_int
        L.wc_tensor_file_tile_span.argtypes = [c.c_void_p, c.c_uint64, c.c_uint64, c.POINTER(c.c_uint64),
                                               c.POINTER(c.c_uint64)]
        L.wc_load_host.restype = c.c_int
        L.wc_load_host.argtypes = [c.POINTER(c.c_void_p), c.c_size_t, c.POINTER(LoadRange), c.c_size_t]
        L.wc_container_find_tensor.restype = c.c_int
        L.wc_container_find_tensor.argtypes = [c.c_void_p, c.c_char_p, c.POINTER(c.c_uint32)]
        L.wc_container_lossy_desc.restype = c.c_int
        L.wc_container_lossy_desc.argtypes = [c.c_void_p, c.c_uint32, c.POINTER(LossyDesc)]
        L.wc_container_lossy_codes.restype = c.c_int
        L.wc_container_lossy_codes.argtypes = [c.c_void_p, c.c_uint32, c.c_void_p, c.c_void_p]
        _lib = L
        return L


def cuda():
    """The CUDA plugin (ctypes.CDLL) with wcodec_cuda_load typed, or None
    when it cannot be loaded; cuda_error() then says why."""
    global _cuda, _cuda_error
    lib()  # the plugin links against libwcodec: load it first
    with _lock:
        if _cuda is not None or _cuda_error is not None:
            return _cuda
        dirs = []
        if os.environ.get("WCODEC_PLUGIN_DIR"):
            dirs.append(os.environ["WCODEC_PLUGIN_DIR"])
        if _paths is not None:
            dirs.append(_paths.PLUGINDIR)
        tried = []
        for d in dirs:
            path = os.path.join(d, "wcodec-cuda.so")
            try:
                P = ctypes.CDLL(path)
                P.wcodec_cuda_load.restype = ctypes.c_int
                P.wcodec_cuda_load.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                               ctypes.POINTER(LoadRange), ctypes.c_size_t, ctypes.c_int,
                                               ctypes.POINTER(CudaLoadOpts), ctypes.POINTER(CudaLoadStats)]
                P.wcodec_cuda_loader_memory.restype = ctypes.c_int
                P.wcodec_cuda_loader_memory.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_size_t),
                                                        ctypes.POINTER(ctypes.c_size_t)]
                P.wcodec_cuda_resident_create.restype = ctypes.c_int
                P.wcodec_cuda_resident_create.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p),
                                                          ctypes.c_size_t, ctypes.c_int, ctypes.c_uint,
                                                          ctypes.POINTER(ctypes.c_void_p)]
                P.wcodec_cuda_resident_decode.restype = ctypes.c_int
                P.wcodec_cuda_resident_decode.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                                          ctypes.c_void_p]
                P.wcodec_cuda_resident_check.restype = ctypes.c_int
                P.wcodec_cuda_resident_check.argtypes = [ctypes.c_void_p]
                P.wcodec_cuda_resident_out_bytes.restype = ctypes.c_uint64
                P.wcodec_cuda_resident_out_bytes.argtypes = [ctypes.c_void_p]
                P.wcodec_cuda_resident_offset.restype = ctypes.c_uint64
                P.wcodec_cuda_resident_offset.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
                P.wcodec_cuda_resident_device_bytes.restype = ctypes.c_size_t
                P.wcodec_cuda_resident_device_bytes.argtypes = [ctypes.c_void_p]
                P.wcodec_cuda_resident_free.restype = None
                P.wcodec_cuda_resident_free.argtypes = [ctypes.c_void_p]
                _cuda = P
                return P
            except (OSError, AttributeError) as e:
                tried.append(f"{path} ({e})")
        _cuda_error = ("the CUDA plugin wcodec-cuda.so could not be loaded: " +
                       ("; ".join(tried) if tried else "no plugin directory (set WCODEC_PLUGIN_DIR)"))
        return None


def cuda_error():
    """Why cuda() returned None ("" if it did not)."""
    return _cuda_error or ""


def check(err):
    """Raise WcodecError for a non-zero wc_err, with the calling thread's reason."""
    if err == 0:
        return
    L = lib()
    reason = (L.wc_last_detail() or b"").decode("utf-8", "replace")
    name = ERROR_NAMES[err] if 0 <= err < len(ERROR_NAMES) else str(err)
    raise WcodecError(name, reason or L.wc_strerror(err).decode())
