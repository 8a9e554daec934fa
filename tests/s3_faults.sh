#!/bin/sh
# Loads from a real S3-compatible server (tests/s3_lib.sh) when things go
# wrong; none may give a wrong tensor:
#  - the server stopped in the middle of wcodec.numpy.load_file and started
#    again 4 s later: the load completes, every tensor equal;
#  - the server stopped for good: the load raises within 60 s, naming the
#    object;
#  - an object truncated, or altered, on the server: the load raises,
#    naming the object (truncated) or the tensor and tile (altered);
#  - an access key without its secret, or a missing bucket: an error naming
#    what is missing, no secret in it.
# Skips (77) without s3rver, curl, numpy, or a build with s3:// sources.
. "$top_srcdir/tests/s3_lib.sh"
"$PYTHON3" -c 'import numpy' 2>/dev/null || { echo "SKIP: no numpy"; exit 77; }
. "$top_srcdir/tests/python_env.sh"

"$PYTHON3" "$top_srcdir/tests/gen_safetensors.py" --profile weights --dtype BF16 --params 20000000 "$T/a.safetensors" ||
	fail "gen"
"$WCODEC" pack -q "$T/a.safetensors" "$T/a.wcodec" || fail "pack"
head -c "$(($(stat -c %s "$T/a.wcodec") * 3 / 5))" "$T/a.wcodec" >"$T/cut.wcodec"
cp "$T/a.wcodec" "$T/bad.wcodec"
"$PYTHON3" - "$T/bad.wcodec" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
b[struct.unpack_from("<Q", b, 64)[0] + 5000000] ^= 0x10   # a byte of a payload in the middle
open(sys.argv[1], "wb").write(b)
PY
put "$T/a.wcodec" f/a.wcodec
put "$T/cut.wcodec" f/cut.wcodec
put "$T/bad.wcodec" f/bad.wcodec
"$WCODEC" info s3://models/f/a.wcodec >/dev/null 2>"$T/err" || {
	grep -q "reads no s3://" "$T/err" && { echo "SKIP: built without s3:// sources"; exit 77; }
	fail "info: $(cat "$T/err")"
}

check() { # check WHAT: run the Python on stdin with the args after it
	what=$1
	shift
	"$PYTHON3" - "$@" || fail "$what"
}

proxy slow
"$PYTHON3" - "$T/a.safetensors" >"$T/out" 2>&1 <<'PY' &
import sys, time
import numpy as np
import wcodec.numpy as wn
want = wn.load_file(sys.argv[1])
t0 = time.monotonic()
got = wn.load_file("s3://models/f/a.wcodec")
assert set(got) == set(want) and all(np.array_equal(got[k], want[k]) for k in want), "tensors differ"
print(f"loaded in {time.monotonic() - t0:.1f} s")
PY
LOADER=$!
sleep 0.5
s3_stop
sleep 4
s3_start
wait $LOADER || fail "the load across a restart: $(cat "$T/out")"
grep -q "^down " "$T/faults" || fail "the server's restart came after the load: $(cat "$T/out")"
echo "# the server stopped mid-load for 4 s: $(cat "$T/out"), $(grep -c '^down ' "$T/faults") requests refused meanwhile"
AWS_ENDPOINT_URL="http://127.0.0.1:$PORT"

s3_stop
check "the server stopped for good" <<'PY'
import time
import wcodec.numpy as wn
from wcodec import WcodecError
t0 = time.monotonic()
try:
    wn.load_file("s3://models/f/a.wcodec")
    raise AssertionError("loaded from a stopped server")
except (WcodecError, OSError) as e:
    took = time.monotonic() - t0
    assert took < 60 and "s3://models/f/a.wcodec" in str(e), (took, e)
    print(f"# the server stopped for good: raised after {took:.1f} s: {str(e)[:150]}")
PY
s3_start

check "a truncated object" <<'PY'
import wcodec.numpy as wn
from wcodec import WcodecError
try:
    wn.load_file("s3://models/f/cut.wcodec")
    raise AssertionError("a truncated object loaded")
except WcodecError as e:
    assert "s3://models/f/cut.wcodec" in str(e), e
    print(f"# a truncated object: {str(e)[:160]}")
PY
check "an altered object" <<'PY'
import re
import wcodec.numpy as wn
from wcodec import WcodecError
try:
    wn.load_file("s3://models/f/bad.wcodec")
    raise AssertionError("an altered object loaded")
except WcodecError as e:
    assert "s3://models/f/bad.wcodec" in str(e) and re.search(r"tensor '[^']+'.*tile \d+", str(e)), e
    print(f"# an altered object: {str(e)[:200]}")
PY
check "a key without its secret" <<'PY'
import os
import wcodec.numpy as wn
from wcodec import WcodecError
os.environ["AWS_SECRET_ACCESS_KEY"] = ""
try:
    wn.load_file("s3://models/f/a.wcodec")
    raise AssertionError("loaded without a secret")
except WcodecError as e:
    assert "secret" in str(e) and "S3RVER" not in str(e), e
    print(f"# a key without its secret: {str(e)[:160]}")
PY
check "a missing bucket" <<'PY'
import wcodec.numpy as wn
from wcodec import WcodecError
try:
    wn.load_file("s3://no-such-bucket/a.wcodec")
    raise AssertionError("loaded from a missing bucket")
except WcodecError as e:
    assert "no such bucket" in str(e), e
    print(f"# a missing bucket: {str(e)[:160]}")
PY
echo "PASS: s3_faults.sh"
