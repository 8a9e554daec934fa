#!/usr/bin/env python3
"""bench_images.py - image batches from a .qvq archive into a training loop
(docs/BENCHMARKS.md, "Images from Python"). Needs torch, PIL; torchvision
for the JPEG rows; a GPU for the cuda rows.

  bench_images.py gen DIR --photos PHOTODIR [--images 20000] [-k 4096 | --quality Q]
      224x224 crops of the photographs under PHOTODIR (contrib/fetch-photos.sh:
      a random square of 1/2 to all of the shorter side, mirrored at random,
      resized), labelled by photograph (10 classes), as PPM files in
      DIR/ppm/<label>/ packed by `wcodec pack-images -k K` (the codebook
      mode) or `--quality Q` (the transform mode) into DIR/set.qvq (one
      image per tile), and as JPEG q=90 in DIR/jpeg/<label>/.
  bench_images.py decode DIR [--batches 64,128,256,512,1024] [--workers 4]
      Decode alone, no training step: QVQLoader into GPU tensors against
      batch size, streamed and (transform mode) resident in GPU memory;
      torchvision's JPEG DataLoader (16 workers) and the CPU backend at the
      largest batch. Pixels of a batch checked against the
      CPU decoder's.
  bench_images.py kernels DIR [--batches 512,1024]
      A transform-mode archive resident in GPU memory: ImageSet.read_resident
      alone (random image numbers on the GPU, 30 batches, best of 3), then
      each kernel's GPU time in a batch of the first size (torch profiler).
  bench_images.py train DIR [--steps 300] [--batch 512] [--mount MNT]
      The small CNN (conv 7x7 stride 2, 64 channels, ReLU, global average
      pool, linear 10, SGD) fed by (a) QVQLoader, (b) the JPEG DataLoader,
      (c) images.npy through a wcodecfs mount of DIR at MNT (if given),
      (d) the images already on the GPU (the ceiling): images/s each.
Environment: WCODEC, WCODECFS: the programs (default: from PATH).
"""
import argparse
import glob
import multiprocessing
import os
import subprocess
import sys
import time

import numpy as np
import torch

import wcodec.torch as wpt

SIZE = 224
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _crop(job):
    from PIL import Image
    i, photo, label, d = job
    r = np.random.default_rng(i)
    im = Image.open(photo).convert("RGB")
    w, h = im.size
    side = int(min(w, h) * r.uniform(0.5, 1.0))
    x, y = int(r.integers(0, w - side + 1)), int(r.integers(0, h - side + 1))
    im = im.crop((x, y, x + side, y + side)).resize((SIZE, SIZE), Image.BILINEAR)
    if r.random() < 0.5:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    a = np.asarray(im)
    with open(os.path.join(d, "ppm", str(label), "%06d.ppm" % i), "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (SIZE, SIZE) + a.tobytes())
    im.save(os.path.join(d, "jpeg", str(label), "%06d.jpg" % i), quality=90)


def gen(d, photos, n, k, quality=0):
    files = sorted(glob.glob(os.path.join(photos, "**", "*.jp*g"), recursive=True))
    if not files:
        sys.exit(f"no JPEG photographs under {photos}")
    for sub in ("ppm", "jpeg"):
        for label in range(10):
            os.makedirs(os.path.join(d, sub, str(label)), exist_ok=True)
    jobs = [(i, files[i % len(files)], (i % len(files)) % 10, d) for i in range(n)]
    with multiprocessing.Pool() as p:
        p.map(_crop, jobs, chunksize=64)
    t0 = time.perf_counter()
    mode = ["--quality", str(quality)] if quality else ["-k", str(k)]
    subprocess.run([os.environ.get("WCODEC", "wcodec"), "pack-images", "-q", "-f"] + mode +
                   ["--tile-size", str(SIZE * SIZE * 3), os.path.join(d, "ppm"), os.path.join(d, "set.qvq")],
                   check=True)
    print(f"{n} crops of {len(files)} photographs; packed with {' '.join(mode)} in {time.perf_counter() - t0:.1f} s: "
          f"{os.path.getsize(os.path.join(d, 'set.qvq')) / n:,.0f} bytes per image")


def rate(batches, epochs, sync, limit=None):
    """Images per second over `epochs` passes of the iterable factory."""
    n = 0
    t0 = time.perf_counter()
    for _ in range(epochs):
        for k, (imgs, labels) in enumerate(batches()):
            n += len(labels)
            if limit and k + 1 >= limit:
                break
    sync()
    return n / (time.perf_counter() - t0)


def jpeg_loader(d, batch):
    import torchvision
    ds = torchvision.datasets.ImageFolder(os.path.join(d, "jpeg"), transform=torchvision.transforms.PILToTensor())
    return torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=16, persistent_workers=True,
                                       pin_memory=torch.cuda.is_available(), drop_last=True)


def decode(d, batches, workers):
    qvq = os.path.join(d, "set.qvq")
    sync = torch.cuda.synchronize
    ref, _ = wpt.load_images(qvq, range(256), device="cpu")
    got, _ = wpt.load_images(qvq, range(256), device="cuda")
    assert torch.equal(got.cpu(), ref), "GPU pixels differ from the CPU decoder's"
    n = len(wpt.QVQDataset(qvq))
    print(f"archive {qvq}: {n} images, {os.path.getsize(qvq) / n:,.0f} bytes each; CPUs {os.cpu_count()}, "
          f"GPU {torch.cuda.get_device_name()}")
    print("| reader | batch | images/s |\n|---|---:|---:|")
    for b in batches:
        ld = wpt.QVQLoader(qvq, batch_size=b, shuffle=True, seed=0, device="cuda", workers=workers,
                           prefetch=2 * workers, drop_last=True)
        rate(lambda: ld, 1, sync)  # warm: the backend starts, the archive is in the page cache
        epochs = max(2, 200000 // n)
        print(f"| QVQLoader, uint8 NCHW on the GPU | {b} | {rate(lambda: ld, epochs, sync):,.0f} |", flush=True)
    for b in batches:  # payloads in GPU memory (transform mode): kernel launches only
        ld = wpt.QVQLoader(qvq, batch_size=b, shuffle=True, seed=0, device="cuda", drop_last=True, resident=True)
        if not ld.resident:
            break
        rate(lambda: ld, 1, sync)
        epochs = max(2, 400000 // n)
        print(f"| QVQLoader, resident in GPU memory, uint8 NCHW | {b} | {rate(lambda: ld, epochs, sync):,.0f} |",
              flush=True)
    b = batches[-1]
    f32 = wpt.QVQLoader(qvq, batch_size=b, shuffle=True, seed=0, device="cuda", workers=workers,
                        prefetch=2 * workers, drop_last=True, dtype=torch.float32, mean=MEAN, std=STD)
    rate(lambda: f32, 1, sync)
    print(f"| QVQLoader, float32 normalised on the GPU | {b} | {rate(lambda: f32, 2, sync):,.0f} |", flush=True)
    s = wpt.QVQLoader(qvq, batch_size=b, shuffle=True, seed=0, device="cuda", workers=workers, prefetch=0)
    print(f"| QVQLoader, one thread, no read-ahead | {b} | {rate(lambda: s, 1, sync):,.0f} |", flush=True)
    cpu = wpt.QVQLoader(qvq, batch_size=b, shuffle=True, seed=0, device="cuda", backend="cpu", workers=workers,
                        prefetch=2 * workers, drop_last=True)
    print(f"| QVQLoader, CPU backend, copied to the GPU | {b} | {rate(lambda: cpu, 1, sync):,.0f} |", flush=True)
    try:
        dl = jpeg_loader(d, b)
    except (ImportError, FileNotFoundError):  # no torchvision, or no DIR/jpeg (an archive alone)
        return
    rate(lambda: dl, 1, lambda: None, limit=4)
    print(f"| JPEG q=90, torchvision DataLoader, 16 workers (PIL) | {b} | "
          f"{rate(lambda: dl, 1, lambda: None):,.0f} |", flush=True)


def kernels(d, batches):
    from torch.profiler import ProfilerActivity, profile

    from wcodec.images import ImageSet
    s = ImageSet(os.path.join(d, "set.qvq"), backend="cuda")
    s.make_resident(1 << 33)
    n = len(s)
    h, w = (int(v) for v in s.sizes[0])
    out = torch.empty((max(batches), 3, h, w), dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    g = torch.Generator(device="cuda")
    g.manual_seed(0)
    idx = [torch.randperm(n, device="cuda", generator=g)[:max(batches)].contiguous() for _ in range(30)]

    def run(b, k):
        s.read_resident(idx[k].data_ptr(), b, out.data_ptr(), 3 * h * w, "CHW", stream)

    print(f"archive {d}/set.qvq: {n} images, {os.path.getsize(os.path.join(d, 'set.qvq')) / n:,.0f} bytes each")
    print("| ImageSet.read_resident, batch | images/s |\n|---:|---:|")
    for b in batches:
        for k in range(3):
            run(b, k)
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for k in range(30):
                run(b, k)
            torch.cuda.synchronize()
            best = min(best, (time.perf_counter() - t0) / 30)
        print(f"| {b} | {b / best:,.0f} |", flush=True)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for k in range(10):
            run(batches[0], k)
        torch.cuda.synchronize()
    print(f"\n| kernel, batch {batches[0]} | us |\n|---|---:|")
    for e in prof.key_averages():
        if "tx_" in e.key:
            print(f"| {e.key.split('(')[0]} | {e.device_time_total / e.count:.0f} |")


class SmallCNN(torch.nn.Module):
    """conv 7x7 stride 2, 64 channels, ReLU, global average pool, linear 10."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 64, 7, stride=2, padding=3)
        self.fc = torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


def _normalise(x):
    m = torch.tensor(MEAN, device=x.device).view(1, 3, 1, 1)
    s = torch.tensor(STD, device=x.device).view(1, 3, 1, 1)
    return (x.float() / 255 - m) / s


def train_rate(batches, steps):
    """Images/s of SGD steps of the small CNN fed by `batches` (an iterator
    of (float NCHW on the GPU or uint8, labels)), after 20 warm-up steps."""
    torch.manual_seed(0)
    model = SmallCNN().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    n, t0 = 0, None
    for k, (x, y) in enumerate(batches):
        if k == 20:
            torch.cuda.synchronize()
            t0, n = time.perf_counter(), 0
        x = x.cuda(non_blocking=True)
        if x.dtype == torch.uint8:
            x = _normalise(x)
        loss = torch.nn.functional.cross_entropy(model(x), y.cuda(non_blocking=True))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        n += len(y)
        if k + 1 >= steps + 20:
            break
    torch.cuda.synchronize()
    return n / (time.perf_counter() - t0)


def forever(make):
    while True:
        yield from make()


class NpyBatches(torch.utils.data.Dataset):
    """Batches of images.npy (memory-mapped, read through the mount): item
    k is the sorted image numbers of batch k, read with one fancy index."""

    def __init__(self, path, labels, batch, seed):
        self.path, self.labels, self.batch = path, labels, batch
        g = torch.Generator()
        g.manual_seed(seed)
        self.order = torch.randperm(len(labels), generator=g).numpy()
        self.a = None

    def __len__(self):
        return len(self.order) // self.batch

    def __getitem__(self, k):
        if self.a is None:
            self.a = np.load(self.path, mmap_mode="r")
        idx = np.sort(self.order[k * self.batch:(k + 1) * self.batch])
        return torch.from_numpy(np.ascontiguousarray(self.a[idx])).permute(0, 3, 1, 2), \
            torch.as_tensor(self.labels[idx])


def train(d, steps, batch, mount):
    qvq = os.path.join(d, "set.qvq")
    torch.backends.cudnn.benchmark = True
    rows = []
    # (d) the ceiling: every image already decoded on the GPU
    ds = wpt.QVQDataset(qvq)
    allimg, alllab = wpt.load_images(qvq, device="cuda")

    def resident():
        g = torch.Generator(device="cuda")
        g.manual_seed(0)
        perm = torch.randperm(len(alllab), device="cuda", generator=g)
        for b in range(0, len(perm) - batch + 1, batch):
            i = perm[b:b + batch]
            yield _normalise(allimg[i]), alllab[i]
    ceiling = train_rate(forever(resident), steps)
    # (a) this loader
    ld = wpt.QVQLoader(qvq, batch_size=batch, shuffle=True, seed=0, device="cuda", dtype=torch.float32,
                       mean=MEAN, std=STD, drop_last=True, workers=4, prefetch=8)
    rows.append(("wcodec QVQLoader, GPU decode, float32 normalised", train_rate(forever(lambda: ld), steps)))
    # (b) JPEG DataLoader
    try:
        dl = jpeg_loader(d, batch)
        rows.append(("JPEG q=90, torchvision ImageFolder + DataLoader, 16 workers",
                     train_rate(forever(lambda: dl), steps)))
    except (ImportError, FileNotFoundError):  # no torchvision, or no DIR/jpeg (an archive alone)
        pass
    # (c) images.npy through the mount
    if mount:
        npy = os.path.join(mount, "set", "images.npy")
        nb = NpyBatches(npy, ds.labels.numpy(), batch, 0)
        dl = torch.utils.data.DataLoader(nb, batch_size=None, shuffle=True, num_workers=8, pin_memory=True,
                                         persistent_workers=True)
        rows.append(("images.npy through wcodecfs (8 workers, one fancy index per batch)",
                     train_rate(forever(lambda: dl), steps)))
    rows.append(("images already on the GPU (ceiling)", ceiling))
    print(f"small CNN, batch {batch}, {steps} SGD steps after 20; GPU {torch.cuda.get_device_name()}")
    print("| fed by | images/s | of the ceiling |\n|---|---:|---:|")
    for name, r in rows:
        print(f"| {name} | {r:,.0f} | {r / ceiling:.2f} |")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("dir")
    g.add_argument("--photos", required=True)
    g.add_argument("--images", type=int, default=20000)
    g.add_argument("-k", type=int, default=4096)
    g.add_argument("--quality", type=int, default=0, help="the transform mode at this quality (0: codebook)")
    r = sub.add_parser("decode")
    r.add_argument("dir")
    r.add_argument("--batches", default="64,128,256,512,1024")
    r.add_argument("--workers", type=int, default=4, help="QVQLoader's decoding threads")
    k = sub.add_parser("kernels")
    k.add_argument("dir")
    k.add_argument("--batches", default="512,1024")
    t = sub.add_parser("train")
    t.add_argument("dir")
    t.add_argument("--steps", type=int, default=300)
    t.add_argument("--batch", type=int, default=512)
    t.add_argument("--mount", help="a wcodecfs mount of DIR")
    a = p.parse_args()
    if a.cmd == "gen":
        gen(a.dir, a.photos, a.images, a.k, a.quality)
    elif a.cmd == "decode":
        decode(a.dir, [int(x) for x in a.batches.split(",")], a.workers)
    elif a.cmd == "kernels":
        kernels(a.dir, [int(x) for x in a.batches.split(",")])
    else:
        train(a.dir, a.steps, a.batch, a.mount)


if __name__ == "__main__":
    sys.exit(main())
