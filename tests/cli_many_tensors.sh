#!/bin/sh
# Files of thousands of small tensors (docs/FORMAT.md 1.6, shared tiles):
# gen_safetensors.py --profile many (2,418 tensors of every dtype, most under
# 1 KiB, some to 70 KiB, among large BF16 weights), packed with 1 MiB and
# 64 KiB tiles: the files are format version 3 with shared tiles, unpack to
# the original, verify, and (with numpy) every tensor boundary read through
# libwcodec's loader (3 bytes on either side, and whole tensors) equals the
# original. Files of format versions 1 (tests/data/all-v1.wcodec, every
# small tensor in a tile of its own) and 2 (all-v2.wcodec, JSON metadata)
# still read byte-exact, with info, verify, unpack and cat.
. "$top_srcdir/tests/cli_lib.sh"

"$PY" "$GEN" --profile many "$T/many.safetensors"
for tile in 1M 64K; do
	"$WCODEC" pack -q -t "$tile" "$T/many.safetensors" "$T/many-$tile.wcodec" || fail "pack -t $tile"
	"$WCODEC" info --json "$T/many-$tile.wcodec" > "$T/info.json" || fail "info"
	"$PY" - "$T/info.json" "$tile" <<'PY' || fail "info of the $tile file"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["version"] == 3, d["version"]
ntiles, ntensors = d["ntiles"], d["ntensors"]
assert ntensors == 2418 and ntiles < ntensors / (2 if sys.argv[2] == "1M" else 1), (ntiles, ntensors)
# per-tensor figures are still shown, and the shared tiles' coded bytes add up
coded = sum(t["coded_bytes"] for t in d["tensors"])
assert abs(coded - d["coded_data_bytes"]) <= ntensors, (coded, d["coded_data_bytes"])
print("# %s tiles: %d tiles for %d tensors, %.2f%% of the entropy bound" %
      (sys.argv[2], ntiles, ntensors, 100 * d["coded_over_bound"]))
PY
	"$WCODEC" unpack -f "$T/many-$tile.wcodec" "$T/back.safetensors" || fail "unpack -t $tile"
	cmp "$T/many.safetensors" "$T/back.safetensors" || fail "the $tile file unpacks to other bytes"
	"$WCODEC" verify -q "$T/many-$tile.wcodec" || fail "verify -t $tile"
done

if "$PY" -c 'import numpy' 2>/dev/null && [ -n "${top_builddir:-}" ]; then
	( . "$top_srcdir/tests/python_env.sh"
	  exec "$PY" - "$T/many.safetensors" "$T/many-1M.wcodec" "$T/many-64K.wcodec" ) <<'PY' || fail "boundary reads"
import ctypes, sys
import numpy as np
from wcodec import TensorFile
from wcodec._file import load_host
orig = open(sys.argv[1], "rb").read()
for path in sys.argv[2:]:
    with TensorFile(path) as f:
        base = len(orig) - f.data_size
        items, bufs = [], []
        for t in f.tensors.values():
            for lo, hi in ((t.begin - 3, t.begin + 3), (t.end - 3, t.end + 3), (t.begin, t.end)):
                lo, hi = max(lo, 0), min(hi, f.data_size)
                if hi > lo:
                    b = np.empty(hi - lo, np.uint8)
                    bufs.append((lo, b))
                    items.append((0, lo, hi - lo, b.ctypes.data))
        load_host([f], items)
        for lo, b in bufs:
            assert b.tobytes() == orig[base + lo: base + lo + len(b)], (path, lo)
    print("# %s: %d boundary and tensor reads equal the original" % (path.rsplit("/", 1)[1], len(bufs)))
PY
fi

# Files of versions 1 (no shared tiles) and 2 (JSON metadata) read as they did.
"$PY" "$GEN" --profile all --seed 11 "$T/v1.safetensors"
for v in 1 2; do
	f="$top_srcdir/tests/data/all-v$v.wcodec"
	"$WCODEC" info --json "$f" | grep -q "\"version\": *$v" || fail "the fixture is not version $v"
	"$WCODEC" verify -q "$f" || fail "verify of the version-$v file"
	"$WCODEC" unpack "$f" "$T/v${v}back.safetensors" || fail "unpack of the version-$v file"
	cmp "$T/v1.safetensors" "$T/v${v}back.safetensors" || fail "the version-$v file unpacks to other bytes"
	"$WCODEC" cat "$f" | cmp - "$T/v1.safetensors" || fail "cat of the version-$v file"
done
echo "PASS: cli_many_tensors.sh"
