#!/bin/sh
# s3:// sources against a real S3-compatible server on 127.0.0.1 (s3rver,
# from the npm registry; .ci/run installs it), objects put with curl's own
# SigV4 signing:
#  - wcodec info, verify, cat and unpack of s3://BUCKET/KEY give what they
#    give for the local file; wcodec.numpy loads packed and plain objects
#    equal to the original; a prefix of shards is listed (ListObjectsV2)
#    and loaded by wcodec.torch.load_checkpoint("s3://BUCKET/PREFIX/"),
#    which names the object and tile of a damaged one in a prefix;
#  - a missing object is an error naming HTTP 404; an unknown access key one
#    naming HTTP 403, and the secret appears in no message;
#  - a damaged object is reported damaged by verify and never read as bytes
#    by cat;
#  - credentials, region and endpoint from the AWS files of a profile
#    (AWS_PROFILE, ~/.aws/credentials, ~/.aws/config) when the environment
#    has none;
#  - through a proxy that fails each request's first attempt (a 503, a
#    connection closed, a body cut short), verify and cat still give the
#    right bytes; a proxy that cuts every body makes cat fail, with no
#    wrong byte written.
# Skips (77) without s3rver, curl, or a build with s3:// sources.
. "$top_srcdir/tests/s3_lib.sh"

"$PYTHON3" "$top_srcdir/tests/gen_safetensors.py" --profile weights --dtype BF16 --params 600000 "$T/a.safetensors" ||
	fail "gen"
"$WCODEC" pack -q --tile-size 64K "$T/a.safetensors" "$T/a.wcodec" || fail "pack"
cp "$T/a.wcodec" "$T/bad.wcodec"
"$PYTHON3" - "$T/bad.wcodec" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
b[struct.unpack_from("<Q", b, 64)[0] + 50] ^= 0x04   # a byte of the first payload
open(sys.argv[1], "wb").write(b)
PY
"$PYTHON3" "$top_srcdir/tests/gen_safetensors.py" --profile weights --dtype F16 --params 200000 --seed 5 \
	"$T/b.safetensors" || fail "gen"
"$WCODEC" pack -q "$T/b.safetensors" "$T/b.wcodec" || fail "pack"
put "$T/a.wcodec" "ckpt/model-1.wcodec"
put "$T/b.wcodec" "ckpt/model-2.wcodec"
put "$T/a.safetensors" "ckpt/sub/ignored.safetensors"
echo '{}' >"$T/config.json" && put "$T/config.json" "ckpt/config.json"
put "$T/a.wcodec" "dir/a.wcodec"
put "$T/a.safetensors" "dir/plain.safetensors"
put "$T/bad.wcodec" "dir/bad.wcodec"
put "$T/b.wcodec" "badck/model-1.wcodec"
put "$T/bad.wcodec" "badck/model-2.wcodec"

if ! "$WCODEC" info s3://models/dir/a.wcodec >"$T/info.txt" 2>&1; then
	grep -q "reads no s3://" "$T/info.txt" && { echo "SKIP: built without s3:// sources"; exit 77; }
	fail "info: $(cat "$T/info.txt")"
fi
"$WCODEC" verify s3://models/dir/a.wcodec >/dev/null || fail "verify"
"$WCODEC" cat s3://models/dir/a.wcodec | cmp - "$T/a.safetensors" || fail "cat differs from the original"
"$WCODEC" unpack s3://models/dir/a.wcodec "$T/out.safetensors" && cmp "$T/out.safetensors" "$T/a.safetensors" ||
	fail "unpack"
"$WCODEC" info --json s3://models/dir/a.wcodec | "$PYTHON3" -c '
import json, os, sys
d = json.load(sys.stdin)
assert d["file_bytes"] == os.path.getsize(sys.argv[1]) and d["decoded_bytes"] == os.path.getsize(sys.argv[2]), d
' "$T/a.wcodec" "$T/a.safetensors" || fail "info --json sizes"
"$WCODEC" verify s3://models/ckpt/ >"$T/v.txt" || fail "verify of a prefix: $(cat "$T/v.txt")"
[ "$(grep -c ': OK' "$T/v.txt")" = 2 ] || fail "verify of a prefix: $(cat "$T/v.txt")"
"$WCODEC" info --json s3://models/ckpt/ | "$PYTHON3" -c '
import json, os, sys
d = json.load(sys.stdin)
assert [f["file"] for f in d["files"]] == ["s3://models/ckpt/model-1.wcodec", "s3://models/ckpt/model-2.wcodec"], d
assert d["file_bytes"] == os.path.getsize(sys.argv[1]) + os.path.getsize(sys.argv[2]), d
' "$T/a.wcodec" "$T/b.wcodec" || fail "info --json of a prefix"
"$WCODEC" verify s3://models/nothing/ 2>"$T/err" && fail "verify of an empty prefix succeeded"
grep -q "no .wcodec objects" "$T/err" || fail "empty prefix: $(cat "$T/err")"
echo "# info, verify, cat, unpack of s3://models/dir/a.wcodec; info and verify of a prefix"

if "$PYTHON3" -c 'import numpy' 2>/dev/null; then
	. "$top_srcdir/tests/python_env.sh"
	"$PYTHON3" - "$T/a.safetensors" <<'PY' || fail "wcodec.numpy from s3://"
import sys
import numpy as np
import wcodec.numpy as wn
want = wn.load_file(sys.argv[1])
for uri in ("s3://models/dir/a.wcodec", "s3://models/dir/plain.safetensors"):
    got = wn.load_file(uri)
    assert set(got) == set(want) and all(np.array_equal(got[k], want[k]) for k in want), uri
with wn.safe_open("s3://models/dir/a.wcodec", framework="np") as f:
    name = max(f.keys(), key=lambda k: want[k].size)
    assert np.array_equal(f.get_slice(name)[3:7], want[name][3:7])
PY
	"$PYTHON3" - "$T/a.safetensors" "$T/b.safetensors" <<'PY' || fail "load_checkpoint of an s3:// prefix"
import sys
import numpy as np
import wcodec.numpy as wn
from wcodec import WcodecError
from wcodec._file import TensorFile, list_objects, open_checkpoint_dir
want = {**wn.load_file(sys.argv[1]), **wn.load_file(sys.argv[2])}
paths, _ = open_checkpoint_dir("s3://models/ckpt")
assert paths == ["s3://models/ckpt/model-1.wcodec", "s3://models/ckpt/model-2.wcodec"], paths
got = {}
for p in paths:
    got.update(wn.load_file(p))
assert set(got) == set(want) and all(np.array_equal(got[k], want[k]) for k in want)
keys = [k for k, _ in list_objects("s3://models/ckpt/")]
assert keys == sorted(keys) and "ckpt/sub/ignored.safetensors" in keys and len(keys) == 4, keys
try:
    open_checkpoint_dir("s3://models/nothing/")
    raise AssertionError("an empty prefix")
except FileNotFoundError:
    pass
try:
    list_objects("s3://no-such-bucket/x/")
    raise AssertionError("a missing bucket listed")
except WcodecError as e:
    assert "404" in str(e), e
PY
	if "$PYTHON3" -c 'import torch' 2>/dev/null; then
		"$PYTHON3" - "$T/a.safetensors" "$T/b.safetensors" <<'PY' || fail "wcodec.torch.load_checkpoint of s3://"
import sys
import torch
import wcodec.torch as wt
want = {**wt.load_file(sys.argv[1]), **wt.load_file(sys.argv[2])}
got = wt.load_checkpoint("s3://models/ckpt/")
assert set(got) == set(want) and all(torch.equal(got[k], want[k]) for k in want)
from wcodec import WcodecError
try:
    wt.load_checkpoint("s3://models/badck/")
    raise AssertionError("a prefix with a damaged object loaded")
except WcodecError as e:
    assert "s3://models/badck/model-2.wcodec" in str(e) and "tile" in str(e), e
PY
	fi
	echo "# wcodec.numpy: packed and plain objects, a slice; a checkpoint prefix listed and loaded"
fi

"$WCODEC" verify s3://models/dir/missing.wcodec 2>"$T/err" && fail "a missing object verified"
grep -q "HTTP 404" "$T/err" || fail "missing object: $(cat "$T/err")"
AWS_ACCESS_KEY_ID=NOBODY AWS_SECRET_ACCESS_KEY=sEcReT-0123456789 "$WCODEC" verify s3://models/dir/a.wcodec 2>"$T/err" &&
	fail "an unknown key was let in"
grep -q "HTTP 403" "$T/err" || fail "unknown key: $(cat "$T/err")"
grep -q "sEcReT" "$T/err" && fail "the secret is in the message"
"$WCODEC" verify s3://models/dir/bad.wcodec >"$T/out" 2>&1 && fail "a damaged object verified"
"$WCODEC" cat s3://models/dir/bad.wcodec >"$T/cat" 2>"$T/err" && fail "cat of a damaged object succeeded"
grep -qi "checksum" "$T/err" || fail "damaged object: $(cat "$T/err")"
cmp -s "$T/cat" "$T/a.safetensors" && fail "damaged object: cat wrote all the bytes"
echo "# errors: 404, 403 without the secret, a damaged object"

# The same configuration from a profile's files.
mkdir -p "$HOME/.aws"
printf '[other]\naws_access_key_id = NOBODY\naws_secret_access_key = x\n[bench]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n' \
	>"$HOME/.aws/credentials"
printf '[profile bench]\nregion = eu-west-1\nendpoint_url = http://127.0.0.1:%s\n' "$PORT" >"$HOME/.aws/config"
env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_ENDPOINT_URL AWS_PROFILE=bench \
	"$WCODEC" verify s3://models/dir/a.wcodec >/dev/null 2>"$T/err" || fail "profile bench: $(cat "$T/err")"
env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_ENDPOINT_URL AWS_PROFILE=other AWS_ENDPOINT_URL_S3="http://127.0.0.1:$PORT" \
	"$WCODEC" verify s3://models/dir/a.wcodec >/dev/null 2>&1 && fail "profile other's key was let in"
echo "# credentials, region and endpoint of a profile from ~/.aws"

# Through a proxy that spoils answers.
proxy flaky
"$WCODEC" verify s3://models/dir/a.wcodec >/dev/null 2>"$T/err" || fail "verify through a flaky proxy: $(cat "$T/err")"
"$WCODEC" cat s3://models/dir/a.wcodec | cmp - "$T/a.safetensors" || fail "cat through a flaky proxy"
for f in 503 reset truncate; do
	grep -q "^$f " "$T/faults" || fail "the flaky proxy injected no $f: $(cat "$T/faults")"
done
echo "# $(wc -l <"$T/faults") spoiled answers retried (503, closed connections, short bodies)"
proxy short
AWS_MAX_ATTEMPTS=3 "$WCODEC" cat s3://models/dir/a.wcodec >"$T/cat" 2>"$T/err" &&
	fail "cat with every body cut short succeeded"
grep -q "attempt 3" "$T/err" || fail "AWS_MAX_ATTEMPTS=3 not followed: $(cat "$T/err")"
[ -s "$T/cat" ] && fail "cat wrote $(wc -c <"$T/cat") bytes from cut bodies"
grep -q "s3://models/dir/a.wcodec" "$T/err" || fail "short bodies: $(cat "$T/err")"
echo "# every body cut short: an error ($(head -c 160 "$T/err"))"
echo "PASS: s3_source.sh"
