#!/usr/bin/env python3
"""test_python.py - the Python package `wcodec` (python/wcodec) against the
safetensors layout: every dtype, slices, sharded directories, damaged files,
missing tensors, devices. Run by tests/python_loader.sh with WCODEC (the
CLI, to pack), WCODEC_LIBRARY and WCODEC_PLUGIN_DIR set; on a machine with
a usable GPU (and torch with CUDA) the GPU loader is checked against the CPU
one, every byte.

The reference for each tensor is its bytes as the safetensors format lays
them out (8-byte header length, JSON header, data section), read straight
from the original file, so no safetensors package is needed.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import wcodec  # noqa: E402
import wcodec.numpy as wnp  # noqa: E402

try:
    import torch
    import wcodec.torch as wpt
except ImportError:  # the numpy half still runs
    torch = None

GPU = torch is not None and torch.cuda.is_available() and wcodec._lib.cuda() is not None
WCODEC = os.environ.get("WCODEC", "wcodec")


def raw_tensors(path):
    """name -> (dtype, shape, bytes) straight from a safetensors file."""
    with open(path, "rb") as fh:
        blob = fh.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    data = blob[8 + n:]
    return {k: (v["dtype"], tuple(v["shape"]), data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


def pack(src, dst, *extra):
    subprocess.run([WCODEC, "pack", "-q", *extra, src, dst], check=True)


def pack_state(model, directory, name, skip=()):
    """model's state dict (less the names in skip) written as
    DIRECTORY/NAME.safetensors and packed into NAME.wcodec there; returns
    the .wcodec path."""
    from wcodec.packed import _write_safetensors
    st = os.path.join(directory, name + ".safetensors")
    _write_safetensors(st, [(k, v.contiguous()) for k, v in model.state_dict().items() if k not in skip])
    packed_path = os.path.join(directory, name + ".wcodec")
    pack(st, packed_path)
    return packed_path


def t_bytes(t):
    """A torch tensor's bytes (any dtype, any device)."""
    t = t.detach().cpu()
    if t.dtype == torch.bool:  # its bytes as stored (a copy would make them 0/1)
        t = t.view(torch.uint8)
    if t.numel() == 0:
        return b""
    flat = torch.empty(t.numel(), dtype=t.dtype)  # stride 1, whatever t's strides
    flat.copy_(t.reshape(-1))
    return flat.view(torch.uint8).numpy().tobytes()


def write_safetensors(path, arrays, metadata=None):
    """A safetensors file of numpy arrays (name -> (dtype name, array)), laid
    out as the format says: header length, JSON padded to 8, data."""
    header, data, off = {}, b"", 0
    for name, (dtype, a) in arrays.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    js = json.dumps(header).encode()
    js += b" " * (-len(js) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(js)) + js + data)


def flip_bytes(blob, count):
    """Copies of blob with one byte flipped, at `count` positions spread over
    its second half (where the payloads are)."""
    for k in range(count):
        b = bytearray(blob)
        pos = len(b) // 2 + (len(b) // 2 - 1) * k // max(count - 1, 1)
        b[pos] ^= 0x10
        yield pos, bytes(b)


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="wc_test_python.")
        cls.st = os.path.join(cls.dir, "all.safetensors")
        cls.wc = os.path.join(cls.dir, "all.wcodec")
        subprocess.run([sys.executable, os.path.join(HERE, "gen_safetensors.py"), "--profile", "all", cls.st],
                       check=True)
        pack(cls.st, cls.wc, "-t", "4K", "-c", "256")  # many tiles: tensors span several
        cls.ref = raw_tensors(cls.st)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)


class NumpyLoader(Base):
    def supported(self):
        out = {}
        for name, v in self.ref.items():
            try:
                wnp.numpy_dtype(v[0])
            except TypeError:
                continue
            out[name] = v
        return out

    def test_every_dtype_matches_the_layout(self):
        sup = self.supported()
        self.assertGreater(len(sup), 100)
        for path in (self.wc, self.st):
            with wnp.safe_open(path, framework="np") as f:
                got = {name: f.get_tensor(name) for name in f.offset_keys() if name in sup}
            self.assertEqual(list(got), [k for k in self.ref if k in sup])  # data order
            for name, (dtype, shape, raw) in sup.items():
                a = got[name]
                self.assertEqual(a.shape, shape, name)
                self.assertEqual(a.dtype, wnp.numpy_dtype(dtype), name)
                self.assertEqual(a.tobytes(), raw, f"{path}: {name}")

    def test_load_file_and_sub_byte_dtypes(self):
        with self.assertRaises(TypeError):  # F4 and F6 have no element of their own
            wnp.load_file(self.wc)
        for dtype in ("F4", "F6_E2M3", "F6_E3M2"):
            with self.assertRaises(TypeError):
                wnp.numpy_dtype(dtype)
        p = os.path.join(self.dir, "np.safetensors")
        rng = np.random.default_rng(3)
        arrays = {"a": ("F32", rng.standard_normal((33, 7)).astype(np.float32)),
                  "b": ("I64", np.arange(10, dtype=np.int64)),
                  "c": ("BF16", rng.integers(0, 65535, (4, 4, 4)).astype(np.uint16))}
        write_safetensors(p, arrays, {"format": "np"})
        pack(p, p[:-12] + ".wcodec", "-t", "4K")
        for path in (p, p[:-12] + ".wcodec"):
            got = wnp.load_file(path)
            self.assertEqual(list(got), ["a", "b", "c"])
            for k, (_, a) in arrays.items():
                np.testing.assert_array_equal(got[k], a)

    def test_bf16_is_returned_as_its_bits(self):
        with wnp.safe_open(self.wc, framework="np") as f:
            got = {k: f.get_tensor(k) for k in f.keys() if self.ref[k][0] == "BF16"}
        names = [k for k, v in self.ref.items() if v[0] == "BF16"]
        self.assertTrue(names)
        for name in names:
            self.assertEqual(got[name].dtype, np.uint16)

    def test_safe_open_keys_metadata_tensors(self):
        with open(self.st, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            meta = json.loads(fh.read(n)).get("__metadata__")
        with wnp.safe_open(self.wc, framework="np") as f:
            self.assertEqual(f.keys(), sorted(self.ref))
            self.assertEqual(f.metadata(), meta)
            for name in f.keys():
                if name in self.supported():
                    self.assertEqual(f.get_tensor(name).tobytes(), self.ref[name][2], name)
            with self.assertRaises(KeyError):
                f.get_tensor("no.such.tensor")
            with self.assertRaises(KeyError):
                f.get_slice("no.such.tensor")

    def test_slices_match_numpy_indexing(self):
        sup = self.supported()
        with wnp.safe_open(self.st, framework="np") as f:
            full = {k: f.get_tensor(k) for k in sup}
        indices = [np.s_[:], np.s_[1:3], np.s_[-2:], np.s_[::2], np.s_[3:1:-1], np.s_[0], np.s_[-1],
                   np.s_[..., 0:1], np.s_[1:4, 1:], np.s_[5:5], np.s_[2:100]]
        with wnp.safe_open(self.wc, framework="np") as f:
            for name in sup:
                a = full[name]
                sl = f.get_slice(name)
                self.assertEqual(sl.get_shape(), list(a.shape))
                self.assertEqual(sl.get_dtype(), self.ref[name][0])
                if a.ndim == 0:
                    continue
                for idx in indices:
                    if a.ndim < 2 and isinstance(idx, tuple) and len(idx) > 1 and idx[0] is not Ellipsis:
                        continue
                    try:
                        want = a[idx]
                    except IndexError:
                        with self.assertRaises(IndexError):
                            sl[idx]
                        continue
                    got = sl[idx]
                    self.assertEqual(got.shape, want.shape, f"{name}{idx}")
                    self.assertEqual(got.tobytes(), np.ascontiguousarray(want).tobytes(), f"{name}{idx}")

    def test_damaged_payloads_raise_and_never_give_wrong_bytes(self):
        with open(self.wc, "rb") as fh:
            blob = fh.read()
        bad = os.path.join(self.dir, "bad.wcodec")
        sup, raised = self.supported(), 0
        for pos, b in flip_bytes(blob, 24):
            with open(bad, "wb") as fh:
                fh.write(b)
            try:
                with wnp.safe_open(bad, framework="np") as f:
                    for name in sup:
                        self.assertEqual(f.get_tensor(name).tobytes(), self.ref[name][2],
                                         f"byte {pos}: {name} differs and no error")
            except wcodec.WcodecError as e:
                raised += 1
                self.assertIn(e.code, ("CORRUPT", "FORMAT"))
                self.assertIn(bad, str(e))
                if "tile" in str(e):
                    self.assertIn("tensor '", str(e))
        self.assertGreater(raised, 12)

    def test_unreadable_inputs_raise(self):
        with self.assertRaises(wcodec.WcodecError) as cm:
            wnp.load_file(os.path.join(self.dir, "missing.wcodec"))
        self.assertEqual(cm.exception.code, "IO")
        junk = os.path.join(self.dir, "junk.safetensors")
        with open(junk, "wb") as fh:
            fh.write(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
        with self.assertRaises(wcodec.WcodecError) as cm:
            wnp.load_file(junk)
        self.assertEqual(cm.exception.code, "FORMAT")
        with self.assertRaises(ValueError):
            wnp.safe_open(self.wc, framework="np", device="cuda")


@unittest.skipIf(torch is None, "torch is not installed")
class TorchLoader(Base):
    def supported(self):
        out = {}
        for name, (dtype, shape, raw) in self.ref.items():
            try:
                wpt.torch_dtype(dtype)
            except TypeError:
                continue
            out[name] = (dtype, shape, raw)
        return out

    def test_every_dtype_torch_has_matches(self):
        sup = self.supported()
        self.assertGreater(len(sup), 10)
        for path in (self.wc, self.st):
            with wpt.safe_open(path, framework="pt") as f:
                for name, (dtype, shape, raw) in sup.items():
                    t = f.get_tensor(name)
                    self.assertEqual(tuple(t.shape), shape)
                    self.assertEqual(t.dtype, wpt.torch_dtype(dtype))
                    self.assertEqual(t_bytes(t), raw, f"{path}: {name}")

    def test_load_file_of_a_file_of_supported_dtypes(self):
        w = os.path.join(self.dir, "w.safetensors")
        subprocess.run([sys.executable, os.path.join(HERE, "gen_safetensors.py"), "--profile", "weights",
                        "--dtype", "BF16", "--params", "300000", w], check=True)
        pack(w, w[:-12] + ".wcodec", "-t", "16K")
        ref = raw_tensors(w)
        got = wpt.load_file(w[:-12] + ".wcodec")
        self.assertEqual(list(got), list(ref))
        for name, (dtype, shape, raw) in ref.items():
            self.assertEqual(got[name].dtype, wpt.torch_dtype(dtype))
            self.assertEqual(t_bytes(got[name]), raw, name)

    def test_shared_tiles_of_many_small_tensors(self):
        """A file of 2,418 mostly tiny tensors packed with shared tiles
        (format 2): every tensor torch has a dtype for equals the original,
        on the CPU and, where usable, the GPU."""
        src = os.path.join(self.dir, "many.safetensors")
        subprocess.run([sys.executable, os.path.join(HERE, "gen_safetensors.py"), "--profile", "many", src],
                       check=True)
        packed = src[:-12] + ".wcodec"
        pack(src, packed)
        ref = raw_tensors(src)
        for device in ["cpu"] + (["cuda"] if GPU else []):
            n = 0
            with wpt.safe_open(packed, framework="pt", device=device) as f:
                for name, (dtype, shape, raw) in ref.items():
                    try:
                        wpt.torch_dtype(dtype)
                    except TypeError:
                        continue
                    self.assertEqual(t_bytes(f.get_tensor(name)), raw, f"{device}: {name}")
                    n += 1
            self.assertGreater(n, 1500)

    def test_lossy_tensors_load_as_unpack_writes_them(self):
        """A file packed with --lossy int8 (and int4 in groups) loads as
        `wcodec unpack` writes it (the decoded values, in the original
        dtypes), on the CPU and, where usable, the GPU (lossy tiles decoded
        by its kernels)."""
        w = os.path.join(self.dir, "lw.safetensors")
        subprocess.run([sys.executable, os.path.join(HERE, "gen_safetensors.py"), "--profile", "weights",
                        "--dtype", "BF16", "--params", "300000", w], check=True)
        packed, out = w[:-12] + ".wcodec", w[:-12] + ".out.safetensors"
        pack(w, packed, "-t", "16K", "--lossy", "int8", "--lossy-include", "*")
        subprocess.run([WCODEC, "unpack", "-q", packed, out], check=True)
        ref, orig = raw_tensors(out), raw_tensors(w)
        self.assertTrue(any(ref[k][2] != orig[k][2] for k in ref), "nothing went lossy")
        for device in ["cpu"] + (["cuda"] if GPU else []):
            got = wpt.load_file(packed, device=device)
            for name, (dtype, shape, raw) in ref.items():
                self.assertEqual(t_bytes(got[name]), raw, f"{device}: {name}")
        # the codes and scales as stored give the same values (int8: one
        # scale per output channel on the first or the last axis)
        n = 0
        with wpt.safe_open(packed, framework="pt") as f:
            for name in f.keys():
                c = f.get_codes(name)
                if c is None:
                    self.assertEqual(ref[name][2], orig[name][2], name)
                    continue
                n += 1
                self.assertEqual((c["codes"].dtype, tuple(c["codes"].shape), c["bits"]), (torch.int8, ref[name][1], 8))
                codes = c["codes"].reshape(-1, c["codes"].shape[-1]) if c["axis"] else c["codes"].reshape(c["codes"].shape[0], -1)
                s = c["scales"].reshape(1, -1) if c["axis"] else c["scales"].reshape(-1, 1)
                want = (codes.float() * s).reshape(ref[name][1]).to(torch.bfloat16)
                self.assertEqual(t_bytes(want), ref[name][2], name)
        self.assertGreater(n, 0)
        with self.assertRaises(KeyError):
            with wpt.safe_open(packed, framework="pt") as f:
                f.get_codes("no such tensor")
        packed4, out4 = w[:-12] + ".int4.wcodec", w[:-12] + ".int4.out.safetensors"
        pack(w, packed4, "-t", "16K", "--lossy", "int4", "--group", "64", "--lossy-include", "*")
        subprocess.run([WCODEC, "unpack", "-q", packed4, out4], check=True)
        ref4 = raw_tensors(out4)
        self.assertTrue(any(ref4[k][2] != ref[k][2] for k in ref4), "int4 gave the int8 values")
        for device in ["cpu"] + (["cuda"] if GPU else []):
            got = wpt.load_file(packed4, device=device)
            for name, (dtype, shape, raw) in ref4.items():
                self.assertEqual(t_bytes(got[name]), raw, f"int4, {device}: {name}")

    def test_pack_module_gives_the_same_outputs(self):
        """pack_module keeps a tiny model's weights packed (tied embedding
        and output weights packed once) and its outputs stay bit for bit
        those of the plain model, call after call; the parameters it
        packed hold nothing between calls; close() removes its file."""
        torch.manual_seed(0)

        class Tiny(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(300, 64)
                self.up = torch.nn.Linear(64, 256)
                self.down = torch.nn.Linear(256, 64, bias=False)
                self.norm = torch.nn.LayerNorm(64)
                self.head = torch.nn.Linear(64, 300, bias=False)
                self.head.weight = self.emb.weight  # tied

            def forward(self, ids):
                x = self.emb(ids)
                x = x + self.down(torch.nn.functional.gelu(self.up(x)))
                return self.head(self.norm(x))

        for dtype in (torch.float32, torch.bfloat16):
            model = Tiny().to(dtype).eval()
            ids = torch.randint(0, 300, (3, 17))
            with torch.no_grad():
                want = model(ids)
            packed = wpt.pack_module(model)
            self.assertEqual(packed.names, ["down.weight", "emb.weight", "up.weight"])
            self.assertEqual(model.up.weight.numel(), 0)
            self.assertEqual(model.head.weight.numel(), 0)
            self.assertEqual(packed.original_bytes, (300 * 64 + 64 * 256 * 2) * (4 if dtype == torch.float32 else 2))
            with torch.no_grad():
                for _ in range(2):
                    got = model(ids)
                    self.assertTrue(torch.equal(got, want), dtype)
                    self.assertEqual(model.down.weight.numel(), 0)  # dropped after the call
            path = packed.path
            self.assertTrue(os.path.exists(path))
            packed.close()
            self.assertFalse(os.path.exists(path))

    def test_load_packed_attaches_a_packed_checkpoint(self):
        """load_packed puts a packed checkpoint's weights into a model built
        apart (its tied output layer found under the embedding's name): the
        same outputs as the model the checkpoint came from, large weights
        left packed, small ones loaded; a missing or misshapen tensor is
        refused."""

        class Tiny(torch.nn.Module):
            def __init__(self, out=300):
                super().__init__()
                self.emb = torch.nn.Embedding(300, 64)
                self.up = torch.nn.Linear(64, 256)
                self.norm = torch.nn.LayerNorm(64)
                self.head = torch.nn.Linear(64, out, bias=False)
                if out == 300:
                    self.head.weight = self.emb.weight

            def forward(self, ids):
                x = self.emb(ids)
                return self.head(self.norm(self.up(x)[..., :64] + x))

        torch.manual_seed(2)
        src = Tiny().eval()
        ids = torch.randint(0, 300, (2, 11))
        with torch.no_grad():
            want = src(ids)
        packed_path = pack_state(src, self.dir, "tiny", skip=("head.weight",))
        torch.manual_seed(3)
        dst = Tiny().eval()
        packed = wpt.load_packed(dst, packed_path)
        self.assertEqual(packed.names, ["emb.weight", "up.weight"])
        self.assertEqual(dst.up.weight.numel(), 0)
        self.assertTrue(torch.equal(dst.norm.weight, src.norm.weight))
        with torch.no_grad():
            self.assertTrue(torch.equal(dst(ids), want))
        packed.close()
        self.assertTrue(os.path.exists(packed_path))  # not pack_module's own file
        with self.assertRaises(KeyError):
            wpt.load_packed(Tiny(out=299), packed_path)  # head.weight: no tensor, not tied
        bad = Tiny()
        bad.up = torch.nn.Linear(64, 128)
        with self.assertRaises(ValueError):
            wpt.load_packed(bad, packed_path)

    def test_load_packed_into_a_model_built_without_weights(self):
        """Under empty_weights() a model's parameters take no memory while a
        buffer it computes (no checkpoint holds it) is real; load_packed
        then gives the source model's outputs. The same buffer on the meta
        device (a model moved there whole) is refused."""

        class Rot(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(200, 64)
                self.proj = torch.nn.Linear(64, 200, bias=False)
                self.register_buffer("freq", 1.0 + torch.arange(64.0) / 64, persistent=False)

            def forward(self, ids):
                return self.proj(self.emb(ids) * self.freq)

        torch.manual_seed(4)
        src = Rot().eval()
        ids = torch.randint(0, 200, (3, 7))
        with torch.no_grad():
            want = src(ids)
        packed_path = pack_state(src, self.dir, "rot")
        with wpt.empty_weights():
            dst = Rot().eval()
        self.assertTrue(dst.proj.weight.is_meta)
        self.assertFalse(dst.freq.is_meta)
        self.assertFalse(torch.nn.Linear(2, 2).weight.is_meta)  # the patch is gone after
        packed = wpt.load_packed(dst, packed_path)
        with torch.no_grad():
            self.assertTrue(torch.equal(dst(ids), want))
        packed.close()
        meta = Rot().to("meta")
        with self.assertRaises(ValueError):
            wpt.load_packed(meta, packed_path)

    def test_pack_module_blocks_decoded_ahead(self):
        """With blocks, each block's weights are decoded in one call and
        the next one's while it runs: at most two at once, the outputs
        those of the plain model."""
        torch.manual_seed(1)

        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = torch.nn.Linear(48, 96), torch.nn.Linear(96, 48)

            def forward(self, x):
                return x + self.b(torch.relu(self.a(x)))

        class Stack(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(50, 48)
                self.layers = torch.nn.ModuleList(Block() for _ in range(5))
                self.out = torch.nn.Linear(48, 50)

            def forward(self, ids):
                x = self.emb(ids)
                for blk in self.layers:
                    x = blk(x)
                return self.out(x)

        model = Stack().eval()
        ids = torch.randint(0, 50, (2, 9))
        with torch.no_grad():
            want = model(ids)
        packed = wpt.pack_module(model, blocks=model.layers)
        with torch.no_grad():
            for _ in range(2):
                self.assertTrue(torch.equal(model(ids), want))
        self.assertEqual(packed.max_live, 2)
        self.assertEqual(model.layers[3].a.weight.numel(), 0)
        packed.close()
        with self.assertRaises(ValueError):
            wpt.pack_module(Stack(), blocks=[model.layers[0], model.layers[0]])
        with self.assertRaises(ValueError):  # not a module of the model packed
            wpt.pack_module(Stack(), blocks=[model.layers[0]])

    def test_unsupported_dtypes_raise_type_error(self):
        missing = [v[0] for v in self.ref.values() if v[0] not in {d for d, _, _ in self.supported().values()}]
        for dtype in missing:
            with self.assertRaises(TypeError):
                wpt.torch_dtype(dtype)

    def test_slices(self):
        sup = self.supported()
        with wpt.safe_open(self.wc, framework="pt") as f:
            for name, (dtype, shape, raw) in sup.items():
                if len(shape) < 1 or dtype == "BOOL":
                    continue
                full = f.get_tensor(name)
                for idx in (slice(1, 3), slice(None, None, 3), 0, -1, (slice(0, 2), Ellipsis)):
                    try:
                        want = full[idx]
                    except IndexError:
                        continue
                    got = f.get_slice(name)[idx]
                    self.assertEqual(t_bytes(got), t_bytes(want), f"{name}[{idx}]")

    def test_sharded_directory(self):
        src = os.path.join(self.dir, "model")
        os.makedirs(src, exist_ok=True)
        rng = np.random.default_rng(7)
        ref, weight_map = {}, {}
        for i in range(2):
            shard = f"model-0000{i + 1}-of-00002.safetensors"
            arrays = {f"layers.{i}.{n}": ("F16", (rng.standard_normal((64, 48)) * 0.02).astype(np.float16))
                      for n in ("q", "k", "v")}
            write_safetensors(os.path.join(src, shard), arrays, {"format": "pt"})
            for k, (_, a) in arrays.items():
                ref[k] = a.tobytes()
                weight_map[k] = shard
        with open(os.path.join(src, "model.safetensors.index.json"), "w") as fh:
            json.dump({"metadata": {}, "weight_map": weight_map}, fh)
        out = os.path.join(self.dir, "packed")
        pack(src, out)
        self.assertFalse([p for p in os.listdir(out) if p.endswith(".safetensors")])
        for d in (out, src):
            sd = wpt.load_checkpoint(d)
            self.assertEqual(sorted(sd), sorted(ref))
            for name, raw in ref.items():
                self.assertEqual(t_bytes(sd[name]), raw, name)
        # without an index: every file of the directory
        os.unlink(os.path.join(out, "model.safetensors.index.json"))
        self.assertEqual(sorted(wpt.load_checkpoint(out)), sorted(ref))
        # an index that names a shard that is not there
        broken = os.path.join(self.dir, "broken")
        shutil.copytree(src, broken)
        os.unlink(os.path.join(broken, "model-00002-of-00002.safetensors"))
        with self.assertRaises(FileNotFoundError):
            wpt.load_checkpoint(broken)
        # an index that names a tensor its shard lacks
        weight_map["not.there"] = "model-00001-of-00002.safetensors"
        with open(os.path.join(src, "model.safetensors.index.json"), "w") as fh:
            json.dump({"weight_map": weight_map}, fh)
        with self.assertRaises(KeyError):
            wpt.load_checkpoint(src)

    def damaged_loads(self, device, count):
        """Load every supported tensor of copies of the file with one byte
        flipped at `count` spread positions onto `device`: each load raises
        WcodecError or gives the original bytes. Returns how many raised."""
        with open(self.wc, "rb") as fh:
            blob = fh.read()
        bad = os.path.join(self.dir, f"bad-{device}.wcodec")
        raised = 0
        for pos, b in flip_bytes(blob, count):
            with open(bad, "wb") as fh:
                fh.write(b)
            try:
                with wpt.safe_open(bad, framework="pt", device=device) as f:
                    for name, (_, _, raw) in self.supported().items():
                        self.assertEqual(t_bytes(f.get_tensor(name)), raw, f"byte {pos}: {name}")
            except wcodec.WcodecError:
                raised += 1
        return raised

    def test_damaged_file_raises(self):
        self.assertGreater(self.damaged_loads("cpu", 8), 3)

    @unittest.skipIf(GPU, "a GPU is usable here")
    def test_cuda_without_a_gpu_raises_clearly(self):
        with self.assertRaises(wcodec.WcodecError) as cm:
            wpt.load_file(self.wc, device="cuda")
        self.assertEqual(cm.exception.code, "BACKEND")

    @unittest.skipUnless(GPU, "no usable GPU")
    def test_gpu_loads_equal_cpu_loads(self):
        sup = self.supported()
        for path in (self.wc, self.st):
            with wpt.safe_open(path, framework="pt", device="cuda:0") as g:
                for name, (dtype, shape, raw) in sup.items():
                    t = g.get_tensor(name)
                    self.assertEqual(t.device.type, "cuda")
                    self.assertEqual(t_bytes(t), raw, f"{path}: {name}")
                    if len(shape) and dtype != "BOOL":
                        full = t.cpu()
                        for idx in (slice(1, 3), 0, -1):
                            try:
                                want = full[idx]
                            except IndexError:
                                continue
                            self.assertEqual(t_bytes(g.get_slice(name)[idx]), t_bytes(want), name)

    @unittest.skipUnless(GPU, "no usable GPU")
    def test_gpu_damaged_tile_raises(self):
        self.assertGreater(self.damaged_loads("cuda", 12), 5)


try:
    import transformers
except ImportError:
    transformers = None


@unittest.skipIf(torch is None or transformers is None, "torch or transformers is not installed")
class Transformers(unittest.TestCase):
    """A small random LlamaForCausalLM saved by save_pretrained, packed with
    `wcodec pack`, loaded by wcodec.transformers.from_pretrained: logits equal
    the original's, on the CPU and (where usable) the GPU."""

    def test_logits_equal_the_original(self):
        import wcodec.transformers as wtf
        d = tempfile.mkdtemp(prefix="wc_test_hf.")
        try:
            cfg = transformers.LlamaConfig(vocab_size=1000, hidden_size=128, intermediate_size=256,
                                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                           tie_word_embeddings=True)
            torch.manual_seed(0)
            orig = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
            src, out = os.path.join(d, "orig"), os.path.join(d, "packed")
            orig.save_pretrained(src, max_shard_size="1MB")
            pack(src, out)
            self.assertTrue([p for p in os.listdir(out) if p.endswith(".wcodec")])
            ids = torch.arange(1, 17).reshape(1, 16)
            devices = ["cpu"] + (["cuda"] if GPU else [])
            for dev in devices:
                ref_model = transformers.AutoModelForCausalLM.from_pretrained(src, torch_dtype=torch.bfloat16)
                ref_model = ref_model.to(dev).eval()
                model = wtf.from_pretrained(transformers.AutoModelForCausalLM, out, device_map=dev,
                                            dtype=torch.bfloat16)
                with torch.no_grad():
                    want = ref_model(ids.to(dev)).logits
                    got = model(ids.to(dev)).logits
                self.assertTrue(torch.equal(want, got), dev)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main(verbosity=2)
