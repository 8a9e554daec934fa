#!/usr/bin/env python3
"""test_python_packed.py - models whose weights stay packed in GPU memory
(wcodec.torch.pack_module / load_packed with the CUDA plugin,
python/wcodec/packed_cuda.py): outputs and generated token ids equal the
plain model's for several batch sizes, the next block is decoded ahead,
the tiles take less device memory than the weights, a damaged file is
refused at load naming its tensor. Run by tests/python_packed.sh; skips
(77) without torch, a usable GPU or the plugin. The CPU reference path is
tested in test_python.py.
"""
import ctypes
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

try:
    import torch
    import wcodec
    import wcodec.torch as wpt
except ImportError:
    print("SKIP: no torch")
    sys.exit(77)

if not (torch.cuda.is_available() and wcodec._lib.cuda() is not None):
    print("SKIP: no usable GPU or CUDA plugin")
    sys.exit(77)


class Block(torch.nn.Module):
    """A transformer-like block: attention-shaped and MLP projections, a norm."""

    def __init__(self, h, m):
        super().__init__()
        self.norm = torch.nn.LayerNorm(h)
        self.q, self.o = torch.nn.Linear(h, h, bias=False), torch.nn.Linear(h, h, bias=False)
        self.up, self.down = torch.nn.Linear(h, m, bias=False), torch.nn.Linear(m, h, bias=False)

    def forward(self, x):
        y = self.norm(x)
        x = x + self.o(torch.tanh(self.q(y)))
        return x + self.down(torch.relu(self.up(y)))


class Stack(torch.nn.Module):
    def __init__(self, vocab=300, h=256, m=704, layers=6):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, h)
        self.layers = torch.nn.ModuleList(Block(h, m) for _ in range(layers))
        self.head = torch.nn.Linear(h, vocab, bias=False)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.layers:
            x = blk(x)
        return self.head(x)


def make(dtype=torch.bfloat16, seed=3):
    torch.manual_seed(seed)
    m = Stack()
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0.0, 0.02)
    return m.to(dtype).cuda().eval()


class TileInfo(ctypes.Structure):
    """wc_tile_info (src/container/container.h)."""
    _fields_ = [("voff", ctypes.c_uint64), ("coff", ctypes.c_uint64), ("csize", ctypes.c_uint32),
                ("dsize", ctypes.c_uint32), ("tensor", ctypes.c_uint32), ("flags", ctypes.c_uint32),
                ("chash", ctypes.c_uint64), ("dhash", ctypes.c_uint64)]


def payload_offset(path, name):
    """File offset of the first tile payload of tensor `name`."""
    L = wcodec._lib.lib()
    L.wc_container_ntiles.restype = ctypes.c_uint32
    L.wc_container_ntiles.argtypes = [ctypes.c_void_p]
    L.wc_container_tile.restype = ctypes.POINTER(TileInfo)
    L.wc_container_tile.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    f = wcodec.TensorFile(path)
    try:
        c = L.wc_tensor_file_container(f.handle)
        i = ctypes.c_uint32()
        wcodec._lib.check(L.wc_container_find_tensor(c, name.encode(), ctypes.byref(i)))
        for k in range(L.wc_container_ntiles(c)):
            t = L.wc_container_tile(c, k).contents
            if t.tensor == i.value:
                return t.coff
    finally:
        f.close()
    raise KeyError(name)


def chunk_symbols(path):
    """The rANS chunk of a .wcodec file, in symbols."""
    L = wcodec._lib.lib()
    L.wc_container_chunk_symbols.restype = ctypes.c_uint32
    L.wc_container_chunk_symbols.argtypes = [ctypes.c_void_p]
    f = wcodec.TensorFile(path)
    try:
        return L.wc_container_chunk_symbols(L.wc_tensor_file_container(f.handle))
    finally:
        f.close()


class PackedOnGpu(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="wcodec-packed-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_outputs_equal_at_every_batch_and_pass(self):
        for dtype in (torch.bfloat16, torch.float16, torch.float32):
            model = make(dtype)
            batches = [torch.randint(0, 300, (b, 17), device="cuda") for b in (1, 4, 16)]
            with torch.no_grad():
                want = [model(ids) for ids in batches]
            orig = sum(p.numel() * p.element_size() for p in model.parameters())
            packed = wpt.pack_module(model, blocks=model.layers)
            du = packed.device_units
            self.assertIsNotNone(du)
            self.assertEqual(chunk_symbols(packed.path), wcodec.packed.GPU_CHUNK)
            self.assertEqual(du.fixed_bytes, 0)  # every weight's tiles on the GPU
            self.assertGreater(du.scratch_bytes, 0)
            self.assertEqual(model.layers[2].up.weight.numel(), 0)
            with torch.no_grad():
                for _ in range(3):
                    for ids, w in zip(batches, want):
                        self.assertTrue(torch.equal(model(ids), w), f"{dtype}, batch {ids.shape[0]}")
            torch.cuda.synchronize()
            du.check()
            self.assertLessEqual(packed.max_live, 2)
            self.assertGreater(du.prefetched, 10)  # blocks, head and embedding decoded ahead
            if dtype != torch.float32:
                self.assertLess(du.resident_bytes, 0.9 * orig)
            packed.close()

    def test_units_of_unequal_sizes_share_smaller_scratch(self):
        """Blocks alternating a small and a large module: the second
        scratch buffer holds the small ones only; the large ones that follow
        a large one are decoded when they start. Outputs stay equal, the
        modules' parameters are the same objects from pass to pass (made
        once per buffer) and placeholders between calls."""
        model = make()
        ids = torch.randint(0, 300, (3, 13), device="cuda")
        with torch.no_grad():
            want = model(ids)
        order = [m for blk in model.layers for m in (blk.q, blk.up)]
        packed = wpt.pack_module(model, blocks=order)
        du = packed.device_units
        up, q = model.layers[0].up, model.layers[0].q
        self.assertEqual(du.scratch_bytes, 704 * 256 * 2)  # an up (or down), the largest unit
        self.assertEqual(du.scratch_total, du.scratch_bytes + 256 * 256 * 2)  # and a q
        seen = set()
        up.register_forward_pre_hook(lambda m, a: seen.add(id(m.weight)))
        with torch.no_grad():
            for _ in range(4):
                self.assertTrue(torch.equal(model(ids), want))
                self.assertEqual(up.weight.numel(), 0)  # a placeholder between calls
        self.assertLessEqual(len(seen), 2)  # one parameter per scratch buffer
        self.assertGreater(du.prefetched, 0)
        self.assertEqual(q.weight.numel(), 0)
        torch.cuda.synchronize()
        du.check()
        packed.close()

    def test_decode_into_gives_each_units_weights(self):
        model = make()
        want = {k: v.clone() for k, v in model.state_dict().items()}
        packed = wpt.pack_module(model, blocks=model.layers)
        du = packed.device_units
        units = du.units
        self.assertIn(model.layers[3], units)
        self.assertEqual(len(units), len(set(units)))
        s = torch.cuda.current_stream()
        seen = 0
        for u in units:
            buf = torch.empty(du.unit_bytes(u) + 512, dtype=torch.uint8, device="cuda")
            du.decode_into(u, buf, s)
            torch.cuda.synchronize()
            for name, (off, info) in du._units[u].where.items():  # state-dict names
                w = want[name]
                got = buf[off:off + info.nbytes].view(w.dtype).view(w.shape)
                self.assertTrue(torch.equal(got, w), name)
                seen += 1
        self.assertGreaterEqual(seen, 6 * 3)
        with self.assertRaises(ValueError):
            du.decode_into(units[0], torch.empty(8, dtype=torch.uint8, device="cuda"))
        du.check()
        packed.close()

    def test_generate_like_loop_token_ids_equal(self):
        """Greedy decoding one token at a time (every step decodes all the
        weights): the same token ids as the plain model."""
        model = make()
        prompt = torch.randint(0, 300, (3, 5), device="cuda")

        def greedy(m, steps=12):
            ids = prompt
            with torch.no_grad():
                for _ in range(steps):
                    nxt = m(ids)[:, -1].argmax(-1, keepdim=True)
                    ids = torch.cat([ids, nxt], 1)
            return ids

        want = greedy(model)
        packed = wpt.pack_module(model, blocks=model.layers)
        self.assertTrue(torch.equal(greedy(model), want))
        packed.close()

    def test_load_packed_on_the_gpu_and_damage_refused(self):
        model = make()
        ids = torch.randint(0, 300, (2, 11), device="cuda")
        with torch.no_grad():
            want = model(ids)
        path = os.path.join(self.tmp, "m.wcodec")
        wpt.pack_module(model.cpu(), path=path, min_bytes=0).close()  # every parameter; model unusable
        fresh = Stack().to(torch.bfloat16)
        packed = wpt.load_packed(fresh, path, device="cuda", blocks=fresh.layers, min_bytes=0)
        self.assertIsNotNone(packed.device_units)
        self.assertEqual(packed.device_units.fixed_bytes, 0)  # norms too, in tiles they share
        with torch.no_grad():
            self.assertTrue(torch.equal(fresh(ids), want))
        packed.close()
        # the host path on request
        fresh = Stack().to(torch.bfloat16)
        packed = wpt.load_packed(fresh, path, device="cuda", blocks=fresh.layers, resident=False)
        self.assertIsNone(packed.device_units)
        with torch.no_grad():
            self.assertTrue(torch.equal(fresh(ids), want))
        packed.close()
        # one payload byte flipped: refused when loading, naming the tensor
        off = payload_offset(path, "layers.3.up.weight") + 200
        bad = os.path.join(self.tmp, "bad.wcodec")
        with open(path, "rb") as fh:
            blob = bytearray(fh.read())
        blob[off] ^= 0x40
        with open(bad, "wb") as fh:
            fh.write(blob)
        fresh = Stack().to(torch.bfloat16)
        with self.assertRaises(wcodec.WcodecError) as cm:
            wpt.load_packed(fresh, bad, device="cuda", blocks=fresh.layers)
        self.assertEqual(cm.exception.code, "CORRUPT")
        self.assertIn("layers.3.up.weight", str(cm.exception))

    def test_transformers_llama_generate(self):
        try:
            import transformers
        except ImportError:
            self.skipTest("no transformers")
        cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=688,
                                       num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
                                       max_position_embeddings=256)
        torch.manual_seed(5)
        model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).cuda().eval()
        prompt = torch.randint(0, 512, (4, 9), device="cuda")
        with torch.no_grad():
            logits = model(prompt).logits
        want = model.generate(prompt, max_new_tokens=16, do_sample=False, pad_token_id=0)
        packed = wpt.pack_module(model, blocks=model.model.layers)
        with torch.no_grad():
            self.assertTrue(torch.equal(model(prompt).logits, logits))
        got = model.generate(prompt, max_new_tokens=16, do_sample=False, pad_token_id=0)
        self.assertTrue(torch.equal(got, want))
        self.assertGreater(packed.device_units.prefetched, 0)
        packed.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
