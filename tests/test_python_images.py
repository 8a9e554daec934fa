#!/usr/bin/env python3
"""test_python_images.py - images of .qvq archives from Python
(python/wcodec/images.py, torch_images.py): every image's pixels equal
`wcodec unpack`'s PPM files, in every layout and dtype; batches of one size,
of several (lists, padding); labels; QVQDataset; QVQLoader's order
reproducible by seed and new each epoch, every image in exactly one rank's
batches per epoch, drop_last, prefetching; a damaged tile raises; all of
it for archives of both modes (codebook and transform). Run by
tests/python_images.sh (WCODEC, WCODEC_LIBRARY, WCODEC_PLUGIN_DIR set); on
a machine with a usable GPU the cuda device gives the CPU's pixels.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import wcodec  # noqa: E402
from wcodec.images import ImageSet  # noqa: E402

try:
    import torch
    import wcodec.torch as wpt
except ImportError:
    torch = None

GPU = torch is not None and torch.cuda.is_available() and wcodec._lib.cuda() is not None
WCODEC = os.environ.get("WCODEC", "wcodec")


def write_ppm(path, a):
    h, w, _ = a.shape
    with open(path, "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (w, h) + a.astype(np.uint8).tobytes())


def read_ppm(path):
    with open(path, "rb") as f:
        blob = f.read()
    m = re.match(rb"P6\s+(\d+)\s+(\d+)\s+255\s", blob)  # one whitespace byte ends the header
    w, h = int(m.group(1)), int(m.group(2))
    return np.frombuffer(blob[m.end():m.end() + w * h * 3], dtype=np.uint8).reshape(h, w, 3)


class Base(unittest.TestCase):
    PACK = []  # pack-images options: the codebook mode

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="wc_test_images.")
        src = os.path.join(cls.dir, "src")
        r = np.random.RandomState(7)
        # two labels; 14 images of 24x16, 3 of 10x6, one odd 7x5
        sizes = [(16, 24)] * 14 + [(6, 10)] * 3 + [(5, 7)]
        for i, (h, w) in enumerate(sizes):
            d = os.path.join(src, "cat" if i % 2 else "dog")
            os.makedirs(d, exist_ok=True)
            yy, xx = np.mgrid[0:h, 0:w]
            a = np.stack([(xx * 9 + i * 13) % 256, (yy * 7 + i * 29) % 256, r.randint(0, 256, (h, w))], -1)
            write_ppm(os.path.join(d, "img%02d.ppm" % i), a)
        cls.qvq = os.path.join(cls.dir, "set.qvq")
        # small tiles: the images spread over several
        subprocess.run([WCODEC, "pack-images", "-q", "--tile-size", "4K"] + cls.PACK + [src, cls.qvq], check=True,
                       stdout=subprocess.DEVNULL)
        out = os.path.join(cls.dir, "unpacked")
        subprocess.run([WCODEC, "unpack", "-q", cls.qvq, out], check=True)
        cls.set = ImageSet(cls.qvq)
        cls.ref = [read_ppm(os.path.join(out, n if n.endswith(".ppm") else n + ".ppm"))
                   for n in cls.set.names]

    @classmethod
    def tearDownClass(cls):
        cls.set.close()
        shutil.rmtree(cls.dir)


class Images(Base):
    def test_image_set_matches_unpack(self):
        s = self.set
        self.assertEqual(len(s), 18)
        self.assertEqual(sorted(s.label_names), ["cat", "dog"])
        for i, (a, ref) in enumerate(zip(s.read(), self.ref)):
            self.assertEqual(a.shape, ref.shape, s.names[i])
            self.assertTrue(np.array_equal(a, ref), s.names[i])
            self.assertEqual(tuple(s.sizes[i]), ref.shape[:2])
            self.assertEqual(s.label_names[s.labels[i]], s.names[i].split("/")[0])
        # any order, repeats, negative indices
        got = s.read([17, 0, 17, -1])
        for a, i in zip(got, [17, 0, 17, 17]):
            self.assertTrue(np.array_equal(a, self.ref[i]))
        with self.assertRaises(IndexError):
            s.read([18])

    def test_backend_names(self):
        # "auto:N" names GPU N (the CPU where none is usable); malformed names are refused
        with ImageSet(self.qvq, backend="auto:0") as s:
            self.assertTrue(np.array_equal(s.read([3])[0], self.ref[3]))
        for bad in ("cpu:1", "cuda:", "cuda:x", "auto:-1", "gpu"):
            with self.assertRaises(wcodec.WcodecError, msg=bad):
                ImageSet(self.qvq, backend=bad)

    def test_damaged_tile_raises(self):
        bad = os.path.join(self.dir, "bad.qvq")
        with open(self.qvq, "rb") as f:
            b = bytearray(f.read())
        b[192 + 3] ^= 0x10  # the first tile's payload starts after the 192-byte header
        with open(bad, "wb") as f:
            f.write(b)
        with ImageSet(bad) as s:
            with self.assertRaises(wcodec.WcodecError) as cm:
                s.read([0])  # tile 0 holds the first images
            self.assertEqual(cm.exception.code, "CORRUPT")
            self.assertIn("tile 0", str(cm.exception))
            self.assertIn(s.names[0], str(cm.exception))
            # the last image lies in another tile: it reads right
            self.assertTrue(np.array_equal(s.read([17])[0], self.ref[17]))
        # the CPU backend cannot write into device memory: said, not done
        with self.assertRaises(wcodec.WcodecError) as cm:
            self.set.read_into_device([0], [1 << 40])
        self.assertEqual(cm.exception.code, "UNSUPPORTED")


@unittest.skipIf(torch is None, "torch is not installed")
class TorchImages(Base):
    def same_size(self):
        return [i for i in range(len(self.set)) if self.ref[i].shape == (16, 24, 3)]

    def test_load_images_layouts_and_dtypes(self):
        idx = self.same_size()
        ref = torch.from_numpy(np.stack([self.ref[i] for i in idx]))
        imgs, labels = wpt.load_images(self.qvq, idx, device="cpu")
        self.assertEqual(imgs.dtype, torch.uint8)
        self.assertTrue(torch.equal(imgs, ref.permute(0, 3, 1, 2)))
        self.assertTrue(torch.equal(labels, torch.as_tensor(self.set.labels[idx])))
        nhwc, _ = wpt.load_images(self.qvq, idx, device="cpu", layout="NHWC")
        self.assertTrue(torch.equal(nhwc, ref))
        mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
        f, _ = wpt.load_images(self.qvq, idx, device="cpu", dtype=torch.float32, mean=mean, std=std)
        want = (ref.permute(0, 3, 1, 2).float() / 255 - torch.tensor(mean).view(1, 3, 1, 1)) / \
            torch.tensor(std).view(1, 3, 1, 1)
        self.assertTrue(torch.allclose(f, want, atol=1e-6))

    def test_mixed_sizes_list_and_pad(self):
        imgs, _ = wpt.load_images(self.qvq, None, device="cpu")
        self.assertIsInstance(imgs, list)
        for t, ref in zip(imgs, self.ref):
            self.assertTrue(torch.equal(t, torch.from_numpy(ref).permute(2, 0, 1)))
        padded, _ = wpt.load_images(self.qvq, [0, 17], device="cpu", pad=True, layout="NHWC")
        self.assertEqual(tuple(padded.shape), (2, 16, 24, 3))
        h, w, _ = self.ref[17].shape
        self.assertTrue(torch.equal(padded[1, :h, :w], torch.from_numpy(self.ref[17])))
        self.assertEqual(int(padded[1, h:].sum()) + int(padded[1, :, w:].sum()), 0)

    def test_dataset(self):
        ds = wpt.QVQDataset(self.qvq)
        self.assertEqual(len(ds), 18)
        for i in (0, 5, 17):
            img, label = ds[i]
            self.assertTrue(torch.equal(img, torch.from_numpy(self.ref[i]).permute(2, 0, 1)))
            self.assertEqual(label, int(self.set.labels[i]))
        loader = torch.utils.data.DataLoader(ds, batch_size=None, shuffle=False)
        self.assertEqual(sum(1 for _ in loader), 18)

    def test_loader_order_epochs_and_ranks(self):
        n = len(self.set)
        a = wpt.QVQLoader(self.qvq, batch_size=4, shuffle=True, seed=3, device="cpu", pad=True)
        b = wpt.QVQLoader(self.qvq, batch_size=4, shuffle=True, seed=3, device="cpu", pad=True, prefetch=0)
        e0a, e0b = a.indices(0), b.indices(0)
        self.assertTrue(np.array_equal(e0a, e0b))  # reproducible by seed
        self.assertFalse(np.array_equal(a.indices(0), a.indices(1)))  # a new order each epoch
        self.assertEqual(sorted(e0a.tolist()), list(range(n)))
        seen = []
        for imgs, labels in a:  # epoch 0, prefetched
            self.assertEqual(imgs.shape[1:], (3, 16, 24))
            seen.append(labels)
        self.assertEqual(a.epoch, 1)
        self.assertTrue(torch.equal(torch.cat(seen), torch.as_tensor(self.set.labels[e0a])))
        for epoch in range(3):  # every image in exactly one rank's batches
            got = []
            for rank in range(3):
                ld = wpt.QVQLoader(self.qvq, batch_size=4, shuffle=True, seed=1, rank=rank, world_size=3,
                                   device="cpu", pad=True)
                ld.set_epoch(epoch)
                mine = ld.indices()
                self.assertEqual(len(ld), -(-len(mine) // 4))
                got += mine.tolist()
            self.assertEqual(sorted(got), list(range(n)))
        d = wpt.QVQLoader(self.qvq, batch_size=4, drop_last=True, device="cpu", pad=True)
        batches = list(d)
        self.assertEqual(len(batches), n // 4)
        self.assertTrue(all(len(lab) == 4 for _, lab in batches))

    def test_loader_pixels(self):
        ld = wpt.QVQLoader(self.qvq, batch_size=5, device="cpu", layout="NHWC", pad=True)
        k = 0
        for imgs, _ in ld:
            for t in imgs:
                h, w, _ = self.ref[k].shape
                self.assertTrue(torch.equal(t[:h, :w], torch.from_numpy(self.ref[k])))
                k += 1
        self.assertEqual(k, len(self.set))

    @unittest.skipUnless(GPU, "no usable GPU")
    def test_gpu_gives_cpu_pixels(self):
        idx = self.same_size()
        for layout in ("NCHW", "NHWC"):
            cpu, lc = wpt.load_images(self.qvq, idx, device="cpu", layout=layout)
            gpu, lg = wpt.load_images(self.qvq, idx, device="cuda", backend="cuda", layout=layout)
            self.assertEqual(gpu.device.type, "cuda")
            self.assertTrue(torch.equal(gpu.cpu(), cpu), layout)
            self.assertTrue(torch.equal(lg.cpu(), lc))
        # float32, normalised by the gather itself: the CPU's two-pass result, bit for bit
        mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
        for layout in ("NCHW", "NHWC"):
            cpu, _ = wpt.load_images(self.qvq, idx, device="cpu", layout=layout, dtype=torch.float32, mean=mean,
                                     std=std)
            gpu, _ = wpt.load_images(self.qvq, idx, device="cuda", backend="cuda", layout=layout,
                                     dtype=torch.float32, mean=mean, std=std)
            self.assertEqual(gpu.dtype, torch.float32)
            self.assertTrue(torch.equal(gpu.cpu(), cpu), layout)
        ld = wpt.QVQLoader(self.qvq, batch_size=len(idx), device="cuda", backend="cuda", dtype=torch.float32)
        ld.indices = lambda epoch=None: np.asarray(idx)
        fl, _ = next(iter(ld))
        unit, _ = wpt.load_images(self.qvq, idx, device="cpu", dtype=torch.float32)
        self.assertTrue(torch.equal(fl.cpu(), unit))
        # several sizes: a list, or padded; in any order with repeats
        lst, _ = wpt.load_images(self.qvq, [17, 0, 15, 0], device="cuda", backend="cuda")
        for t, i in zip(lst, [17, 0, 15, 0]):
            self.assertTrue(torch.equal(t.cpu(), torch.from_numpy(self.ref[i]).permute(2, 0, 1)))
        pg, _ = wpt.load_images(self.qvq, None, device="cuda", backend="cuda", pad=True)
        pc, _ = wpt.load_images(self.qvq, None, device="cpu", pad=True)
        self.assertTrue(torch.equal(pg.cpu(), pc))
        ld = wpt.QVQLoader(self.qvq, batch_size=4, device="cuda", dtype=torch.float16, pad=True,
                           backend="cuda")
        n = 0
        for imgs, _ in ld:
            self.assertEqual((imgs.device.type, imgs.dtype), ("cuda", torch.float16))
            n += len(imgs)
        self.assertEqual(n, 18)

    @unittest.skipUnless(GPU, "no usable GPU")
    def test_gpu_damaged_tile_raises(self):
        bad = os.path.join(self.dir, "bad_gpu.qvq")
        with open(self.qvq, "rb") as f:
            b = bytearray(f.read())
        b[192 + 3] ^= 0x10
        with open(bad, "wb") as f:
            f.write(b)
        with self.assertRaises(wcodec.WcodecError) as cm:
            wpt.load_images(bad, [0], device="cuda", backend="cuda")
        self.assertEqual(cm.exception.code, "CORRUPT")
        last, _ = wpt.load_images(bad, [17], device="cuda", backend="cuda")
        self.assertTrue(torch.equal(last.cpu()[0], torch.from_numpy(self.ref[17]).permute(2, 0, 1)))


class TransformImages(Images):
    """Every test of Images on a transform-mode archive (docs/FORMAT.md 6.8):
    the CPU decoder's pixels through every reader, and the GPU's equal to them."""
    PACK = ["--quality", "90"]

    def test_is_transform(self):
        self.assertEqual(self.set.mode, "transform")


class TransformTorchImages(TorchImages):
    """Every test of TorchImages on a transform-mode archive: on a GPU, its
    kernels (cuda/tx_kernels.cu) give the CPU decoder's pixels; resident in
    GPU memory too."""
    PACK = ["--quality", "90"]

    @unittest.skipUnless(GPU, "no usable GPU")
    def test_resident(self):
        src = os.path.join(self.dir, "uniform")
        r = np.random.RandomState(3)
        for i in range(11):
            d = os.path.join(src, "ab"[i % 2])
            os.makedirs(d, exist_ok=True)
            yy, xx = np.mgrid[0:16, 0:24]
            a = np.stack([(xx * 11 + i * 7) % 256, (yy * 5 + i * 31) % 256, r.randint(0, 256, (16, 24))], -1)
            write_ppm(os.path.join(d, "u%02d.ppm" % i), a)
        uni = os.path.join(self.dir, "uniform.qvq")
        subprocess.run([WCODEC, "pack-images", "-q", "--quality", "85", src, uni], check=True, stdout=subprocess.DEVNULL)
        mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
        for layout in ("NCHW", "NHWC"):
            for dtype, norm in ((torch.uint8, {}), (torch.float32, {"mean": mean, "std": std}),
                                (torch.float16, {})):
                ld = wpt.QVQLoader(uni, batch_size=4, shuffle=True, seed=5, device="cuda", backend="cuda",
                                   layout=layout, dtype=dtype, resident=True, **norm)
                self.assertTrue(ld.resident)
                order, k = ld.indices(), 0
                for imgs, labels in ld:  # last batch of 3
                    want, wl = wpt.load_images(uni, order[k:k + len(labels)], device="cpu", layout=layout,
                                               dtype=dtype, **norm)
                    self.assertEqual((imgs.device.type, imgs.dtype), ("cuda", dtype))
                    self.assertTrue(torch.equal(imgs.cpu(), want), (layout, dtype, k))
                    self.assertTrue(torch.equal(labels.cpu(), wl))
                    k += len(labels)
                self.assertEqual(k, 11)
        with ImageSet(uni, backend="cuda") as s:
            with self.assertRaises(wcodec.WcodecError) as cm:
                s.make_resident(100)  # past the budget
            self.assertEqual(cm.exception.code, "RANGE")
            s.make_resident(1 << 30)
            out = torch.empty((2, 3, 16, 24), dtype=torch.uint8, device="cuda")
            idx = torch.tensor([3, 11], dtype=torch.int64, device="cuda")
            with self.assertRaises(wcodec.WcodecError) as cm:
                s.read_resident(idx.data_ptr(), 2, out.data_ptr(), 3 * 16 * 24, "CHW")
            self.assertEqual(cm.exception.code, "RANGE")
            # batches launched, then waited for: two in flight at most, each with its own errors
            good = torch.tensor([3, 5], dtype=torch.int64, device="cuda")
            ref = torch.empty_like(out)
            s.read_resident(good.data_ptr(), 2, ref.data_ptr(), 3 * 16 * 24, "CHW")
            a, b = torch.zeros_like(out), torch.zeros_like(out)
            t1 = s.read_resident(good.data_ptr(), 2, a.data_ptr(), 3 * 16 * 24, "CHW", wait=False)
            t2 = s.read_resident(idx.data_ptr(), 2, b.data_ptr(), 3 * 16 * 24, "CHW", wait=False)
            with self.assertRaises(wcodec.WcodecError) as cm:
                s.read_resident(good.data_ptr(), 2, b.data_ptr(), 3 * 16 * 24, "CHW", wait=False)
            self.assertEqual(cm.exception.code, "INVAL")
            s.finish_resident(t1)
            self.assertTrue(torch.equal(a, ref))
            with self.assertRaises(wcodec.WcodecError) as cm:
                s.finish_resident(t2)
            self.assertEqual(cm.exception.code, "RANGE")
            with self.assertRaises(wcodec.WcodecError) as cm:
                s.finish_resident(t2)  # no longer in flight
            self.assertEqual(cm.exception.code, "INVAL")
        # several sizes, or the codebook mode: read as without it
        ld = wpt.QVQLoader(self.qvq, batch_size=4, device="cuda", backend="cuda", pad=True, resident=True)
        self.assertFalse(ld.resident)
        self.assertEqual(sum(len(lb) for _, lb in ld), 18)
        with ImageSet(self.qvq, backend="cuda") as s:
            with self.assertRaises(wcodec.WcodecError) as cm:
                s.make_resident(1 << 30)
            self.assertEqual(cm.exception.code, "UNSUPPORTED")
        # a damaged payload is refused when the archive is made resident
        bad = os.path.join(self.dir, "uniform_bad.qvq")
        with open(uni, "rb") as f:
            b = bytearray(f.read())
        b[192 + 5] ^= 0x20
        with open(bad, "wb") as f:
            f.write(b)
        with ImageSet(bad, backend="cuda") as s:
            with self.assertRaises(wcodec.WcodecError) as cm:
                s.make_resident(1 << 30)
            self.assertEqual(cm.exception.code, "CORRUPT")


if __name__ == "__main__":
    unittest.main(verbosity=2)
