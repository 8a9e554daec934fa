"""ratio_table.py - the markdown table of bench-ratio.sh.

Usage: ratio_table.py ROWS.tsv

Each row: path, original bytes, zstd -19 bytes, zstd wall and CPU seconds,
.wcodec bytes, pack wall and CPU seconds, path of `wcodec info --json` output. From the info JSON it
takes the data-section totals (data_bytes, coded_data_bytes,
entropy_bound_bytes: the sum over tensor-planes of order-0 entropy x symbols
/ 8) and the same per dtype ("dtypes"), and prints:
  ratio        original file bytes / compressed file bytes (whole files)
  data ratio   tensor bytes / coded tile payload bytes
  bound ratio  tensor bytes / entropy bound (what an order-0 coder of the
               same planes could reach at best)
Standard library only.
"""

import json
import os
import sys


def r(a, b):
    return "%.3f" % (a / b) if b else "-"


def dtype_cell(dts):
    # largest dtypes first; "BF16 1.412 / 1.430" = data ratio / bound ratio
    items = sorted(dts.items(), key=lambda kv: -kv[1]["bytes"])
    return ", ".join("%s %s / %s" % (dt, r(d["bytes"], d["coded_bytes"]), r(d["bytes"], d["entropy_bound_bytes"]))
                     for dt, d in items if d["bytes"] >= 4096) or "-"


def add_dtypes(acc, dts):
    for dt, d in dts.items():
        a = acc.setdefault(dt, {"bytes": 0, "coded_bytes": 0, "entropy_bound_bytes": 0.0})
        for k in a:
            a[k] += d[k]


def main():
    rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
    print("| model file | bytes | zstd -19 | ratio | CPU s | wcodec | ratio | wall s | CPU s | data ratio "
          "| bound ratio | per dtype: data ratio / bound ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    groups = {}
    for path, size, zs, _zw, zt, ws, ww, wt, js in rows:
        size, zs, ws, zt, ww, wt = int(size), int(zs), int(ws), float(zt), float(ww), float(wt)
        info = json.load(open(js))
        data, coded, bound = info["data_bytes"], info["coded_data_bytes"], info["entropy_bound_bytes"]
        print("| %s | %d | %d | %s | %.2f | %d | %s | %.2f | %.2f | %s | %s | %s |" % (
            os.path.basename(path), size, zs, r(size, zs), zt, ws, r(size, ws), ww, wt, r(data, coded), r(data, bound),
            dtype_cell(info["dtypes"])))
        g = "BF16" if path.endswith(".bf16.safetensors") else ("F16" if path.endswith(".f16.safetensors") else "F32")
        t = groups.setdefault(g, {"n": 0, "size": 0, "zs": 0, "zt": 0.0, "ws": 0, "ww": 0.0, "wt": 0.0, "data": 0,
                                  "coded": 0, "bound": 0.0, "dtypes": {}})
        for k, v in (("n", 1), ("size", size), ("zs", zs), ("zt", zt), ("ws", ws), ("ww", ww), ("wt", wt),
                     ("data", data),
                     ("coded", coded), ("bound", bound)):
            t[k] += v
        add_dtypes(t["dtypes"], info["dtypes"])
    if len(rows) > 1:
        for g, t in sorted(groups.items()):
            print("| **%d %s files** | %d | %d | %s | %.2f | %d | %s | %.2f | %.2f | %s | %s | %s |" % (
                t["n"], g, t["size"], t["zs"], r(t["size"], t["zs"]), t["zt"], t["ws"], r(t["size"], t["ws"]),
                t["ww"], t["wt"], r(t["data"], t["coded"]), r(t["data"], t["bound"]), dtype_cell(t["dtypes"])))


if __name__ == "__main__":
    main()
