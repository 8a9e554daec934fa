"""The package's one layer of foreign declarations: every ctypes structure
and function prototype of libwcodec (src/loader/loader.h,
src/loader/images.h, src/container/container.h) and of the CUDA plugin
(cuda/wcodec_cuda.h). No other module declares a structure or sets
argtypes; tests/test_bindings.py compares each structure's fields, offsets
and size with the C compiler's layout (its debug information), so a header
that changes without this file fails the tests instead of misreading memory.

Where the libraries are found, first match wins:
  libwcodec:  $WCODEC_LIBRARY (a path); the copy a wheel carries
              (wcodec/_native/libwcodec.so.0, beside this file); the libdir
              `make install` wrote into _paths.py; the dynamic linker's search
              (libwcodec.so.0: a Debian package, ldconfig).
  the plugin: $WCODEC_PLUGIN_DIR/wcodec-cuda.so, then wcodec/_native/ (the
              wheel's), then the installed pkglibdir.
The plugin is optional: without it (or without a GPU) only device="cpu" works.
"""
import ctypes
import ctypes.util
import os
import threading

try:  # written by `make install`; absent in the source tree and in wheels
    from . import _paths
except ImportError:  # pragma: no cover - depends on the installation
    _paths = None

# A wheel's compiled parts: libwcodec, the plugin and the command-line tools
# (python/native_build.py puts them there, their own dependencies beside).
NATIVE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")

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


# ---- structures: each names its C type and the header that defines it ------

c = ctypes
_vp = c.c_void_p


class LossyDesc(c.Structure):
    """wc_lossy_desc: a lossy tensor's code width, scale axis and counts."""
    c_name, header = "wc_lossy_desc", "container/container.h"
    _fields_ = [("bits", c.c_uint32), ("axis", c.c_uint32), ("channels", c.c_uint32),
                ("group", c.c_uint32), ("nscales", c.c_uint64), ("elems", c.c_uint64)]


class LoadRange(c.Structure):
    """wc_load_range: `length` bytes at data-section `offset` of files[file] into dst."""
    c_name, header = "wc_load_range", "loader/loader.h"
    _fields_ = [("file", c.c_uint32), ("reserved", c.c_uint32), ("offset", c.c_uint64),
                ("length", c.c_uint64), ("dst", _vp)]


class PayloadRun(c.Structure):
    """wc_payload_run: the payloads of tiles first_tile..last_tile of files[file], in memory."""
    c_name, header = "wc_payload_run", "loader/loader.h"
    _fields_ = [("file", c.c_uint32), ("first_tile", c.c_uint32), ("last_tile", c.c_uint32),
                ("reserved", c.c_uint32), ("bytes", _vp)]


class ImageInfo(c.Structure):
    """wc_image_info: one image of a .qvq archive (pixels, label, tile)."""
    c_name, header = "wc_image_info", "loader/images.h"
    _fields_ = [("width", c.c_uint32), ("height", c.c_uint32), ("channels", c.c_uint32),
                ("label", c.c_int32), ("tile", c.c_uint32), ("reserved", c.c_uint32),
                ("tile_off", c.c_uint64)]


class PackOpts(c.Structure):
    """wc_pack_opts: wc_pack_safetensors's options (callbacks left NULL)."""
    c_name, header = "wc_pack_opts", "container/container.h"
    _fields_ = [("tile_size", c.c_uint32), ("chunk_symbols", c.c_uint32), ("threads", c.c_uint),
                ("verify", c.c_int), ("progress", _vp), ("progress_ctx", _vp),
                ("temp_file", _vp), ("lossy_bits", c.c_int), ("lossy_group", c.c_uint32),
                ("lossy_select", _vp), ("lossy_ctx", _vp)]


class CudaLoadOpts(c.Structure):
    """wcodec_cuda_load_opts: the pipelined GPU loader's ring (bytes) and readers."""
    c_name, header = "wcodec_cuda_load_opts", "wcodec_cuda.h"
    _fields_ = [("staging_bytes", c.c_size_t), ("readers", c.c_uint)]


class CudaLoadStats(c.Structure):
    """wcodec_cuda_load_stats: bytes one wcodec_cuda_load moved and held."""
    c_name, header = "wcodec_cuda_load_stats", "wcodec_cuda.h"
    _fields_ = [("file_bytes", c.c_uint64), ("out_bytes", c.c_uint64),
                ("pinned_bytes", c.c_size_t), ("device_bytes", c.c_size_t)]


STRUCTURES = (LossyDesc, LoadRange, PayloadRun, ImageInfo, PackOpts, CudaLoadOpts, CudaLoadStats)

# ---- functions: name -> (restype, argtypes) ------------------------------

_P = c.POINTER
# wc_object_list's callback: (ctx, key, size) -> nonzero to stop
OBJECT_FN = c.CFUNCTYPE(c.c_int, _vp, c.c_char_p, c.c_uint64)
LIB_FUNCTIONS = {
    "wc_last_detail": (c.c_char_p, []),
    "wc_strerror": (c.c_char_p, [c.c_int]),
    "wc_tensor_file_open": (c.c_int, [c.c_char_p, _P(_vp)]),
    "wc_tensor_file_close": (None, [_vp]),
    "wc_tensor_file_header": (_vp, [_vp, _P(c.c_size_t)]),
    "wc_tensor_file_data_size": (c.c_uint64, [_vp]),
    "wc_tensor_file_container": (_vp, [_vp]),
    "wc_tensor_file_tile_span": (c.c_int, [_vp, c.c_uint64, c.c_uint64, _P(c.c_uint64), _P(c.c_uint64)]),
    "wc_object_list": (c.c_int, [c.c_char_p, OBJECT_FN, _vp]),
    "wc_tensor_file_tiles": (c.c_int, [_vp, c.c_uint64, c.c_uint64, _P(c.c_uint32), _P(c.c_uint32)]),
    "wc_tensor_file_tile_extent": (c.c_int, [_vp, c.c_uint32, c.c_uint32, _P(c.c_uint64), _P(c.c_uint64),
                                             _P(c.c_uint64), _P(c.c_uint64)]),
    "wc_tensor_file_read_payloads": (c.c_int, [_vp, c.c_uint32, c.c_uint32, _vp]),
    "wc_container_ntiles": (c.c_uint32, [_vp]),
    "wc_load_host": (c.c_int, [_P(_vp), c.c_size_t, _P(LoadRange), c.c_size_t]),
    "wc_load_host_payloads": (c.c_int, [_P(_vp), c.c_size_t, _P(PayloadRun), c.c_size_t, _P(LoadRange),
                                        c.c_size_t]),
    "wc_container_find_tensor": (c.c_int, [_vp, c.c_char_p, _P(c.c_uint32)]),
    "wc_container_lossy_desc": (c.c_int, [_vp, c.c_uint32, _P(LossyDesc)]),
    "wc_container_lossy_codes": (c.c_int, [_vp, c.c_uint32, _vp, _vp]),
    "wc_pack_safetensors": (c.c_int, [c.c_char_p, c.c_char_p, _P(PackOpts), _vp]),
    "wc_image_set_open": (c.c_int, [c.c_char_p, c.c_char_p, c.c_uint, _P(_vp)]),
    "wc_image_set_close": (None, [_vp]),
    "wc_image_set_count": (c.c_uint32, [_vp]),
    "wc_image_set_backend": (c.c_char_p, [_vp]),
    "wc_image_set_info": (c.c_int, [_vp, c.c_uint32, _P(ImageInfo)]),
    "wc_image_set_name": (c.c_char_p, [_vp, c.c_uint32]),
    "wc_image_set_nlabels": (c.c_uint32, [_vp]),
    "wc_image_set_label": (c.c_char_p, [_vp, c.c_uint32]),
    "wc_image_set_decode": (c.c_int, [_vp, _P(c.c_uint32), c.c_size_t, c.c_int, _P(_vp)]),
    "wc_image_set_decode_device": (c.c_int, [_vp, _P(c.c_uint32), c.c_size_t, c.c_int, _P(_vp), _vp]),
    "wc_image_set_resident": (c.c_int, [_vp, c.c_uint64]),
    "wc_image_set_decode_resident": (c.c_int, [_vp, _vp, c.c_size_t, c.c_int, _P(c.c_float), _P(c.c_float), _vp,
                                               c.c_size_t, _vp]),
    "wc_image_set_decode_resident_start": (c.c_int, [_vp, _vp, c.c_size_t, c.c_int, _P(c.c_float), _P(c.c_float),
                                                     _vp, c.c_size_t, _vp, _P(c.c_uint64)]),
    "wc_image_set_decode_resident_finish": (c.c_int, [_vp, c.c_uint64]),
    "wc_image_set_decode_device_f32": (c.c_int, [_vp, _P(c.c_uint32), c.c_size_t, c.c_int, _P(c.c_float),
                                                 _P(c.c_float), _P(_vp), _vp]),
}

CUDA_FUNCTIONS = {
    "wcodec_cuda_load": (c.c_int, [_P(_vp), c.c_size_t, _P(LoadRange), c.c_size_t, c.c_int,
                                   _P(CudaLoadOpts), _P(CudaLoadStats)]),
    "wcodec_cuda_load_payloads": (c.c_int, [_P(_vp), c.c_size_t, _P(PayloadRun), c.c_size_t, _P(LoadRange),
                                            c.c_size_t, c.c_int, _P(CudaLoadOpts), _P(CudaLoadStats)]),
    "wcodec_cuda_loader_memory": (c.c_int, [c.c_int, _P(c.c_size_t), _P(c.c_size_t)]),
    "wcodec_cuda_resident_create": (c.c_int, [_vp, _P(c.c_char_p), c.c_size_t, c.c_int, c.c_uint, _P(_vp)]),
    "wcodec_cuda_resident_decode": (c.c_int, [_vp, _vp, c.c_size_t, _vp]),
    "wcodec_cuda_resident_check": (c.c_int, [_vp]),
    "wcodec_cuda_resident_out_bytes": (c.c_uint64, [_vp]),
    "wcodec_cuda_resident_offset": (c.c_uint64, [_vp, c.c_size_t]),
    "wcodec_cuda_resident_device_bytes": (c.c_size_t, [_vp]),
    "wcodec_cuda_resident_free": (None, [_vp]),
    "wcodec_cuda_resident_decode_work": (c.c_int, [_vp, _vp, c.c_size_t, _vp, c.c_size_t, _vp]),
    "wcodec_cuda_resident_work_bytes": (c.c_size_t, [_vp]),
    "wcodec_cuda_units_create": (c.c_int, [c.c_int, _vp, c.c_size_t, _vp, c.c_size_t, _P(_vp)]),
    "wcodec_cuda_units_add": (c.c_int, [_vp, _P(_vp), _P(c.c_uint64), c.c_size_t, _P(c.c_uint32)]),
    "wcodec_cuda_units_set_next": (c.c_int, [_vp, c.c_uint32, c.c_uint32]),
    "wcodec_cuda_units_begin": (c.c_int, [_vp, c.c_uint32, _vp, _P(c.c_int)]),
    "wcodec_cuda_units_end": (c.c_int, [_vp, c.c_uint32]),
    "wcodec_cuda_units_counts": (None, [_vp, _P(c.c_uint64), _P(c.c_uint64)]),
    "wcodec_cuda_units_device_bytes": (c.c_size_t, [_vp]),
    "wcodec_cuda_units_free": (None, [_vp]),
}

# wcodec_cuda_resident_create's flags (cuda/wcodec_cuda.h)
CUDA_RESIDENT_VERIFY = 1


def _declare(L, table):
    """Set restype and argtypes of every function of table on L
    (AttributeError naming the first one L lacks)."""
    for name, (res, args) in table.items():
        f = getattr(L, name)
        f.restype, f.argtypes = res, args


_lock = threading.Lock()
_lib = None
_cuda = None
_cuda_error = None


def _candidates_lib():
    env = os.environ.get("WCODEC_LIBRARY")
    if env:
        yield env
    wheel = os.path.join(NATIVE_DIR, "libwcodec.so.0")
    if os.path.exists(wheel):
        yield wheel
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
                _declare(L, LIB_FUNCTIONS)
                break
            except (OSError, AttributeError) as e:
                tried.append(f"{cand} ({e})")
        else:
            raise WcodecError("NOTFOUND", "libwcodec not found: tried " + "; ".join(tried))
        _lib = L
        return L


def plugin_dirs():
    """The directories searched for wcodec-cuda.so, in order."""
    dirs = []
    if os.environ.get("WCODEC_PLUGIN_DIR"):
        dirs.append(os.environ["WCODEC_PLUGIN_DIR"])
    if os.path.isdir(NATIVE_DIR):
        dirs.append(NATIVE_DIR)
    if _paths is not None:
        dirs.append(_paths.PLUGINDIR)
    return dirs


def cuda():
    """The CUDA plugin (ctypes.CDLL) with its functions typed, or None
    when it cannot be loaded; cuda_error() then says why."""
    global _cuda, _cuda_error
    lib()  # the plugin links against libwcodec: load it first
    with _lock:
        if _cuda is not None or _cuda_error is not None:
            return _cuda
        tried = []
        for d in plugin_dirs():
            path = os.path.join(d, "wcodec-cuda.so")
            if not os.path.exists(path):
                tried.append(f"{path} (absent)")
                continue
            try:
                P = ctypes.CDLL(path)
                _declare(P, CUDA_FUNCTIONS)
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
