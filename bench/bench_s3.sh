#!/bin/sh
# bench_s3.sh - checkpoints loaded from an S3-compatible server over a
# loopback link shaped to a given rate (docs/BENCHMARKS.md, "Object
# stores"): the packed files and the originals loaded as one checkpoint by
# wcodec.torch.load_checkpoint("s3://BUCKET/PREFIX/") and object by object
# with wcodec.numpy.load_file("s3://..."), and the originals read through
# s3fs-fuse (Debian's s3fs, `cat` of every file), and the packed ones read
# as X.safetensors through a wcodecfs mount of the bucket (`cat`). A real S3 server (s3rver,
# npm) on 127.0.0.1 serves both sets from its own directory.
#
#   bench_s3.sh ORIG_DIR PACKED_DIR [RATE_MBPS ...]   (default: 100 200 0; 0 = unshaped)
#
# ORIG_DIR: *.safetensors; PACKED_DIR: the same packed (wcodec pack -u).
# Shaping uses tc's htb on lo (root; removed at exit). Each figure is the
# median of 3 runs; the bytes are the objects' sizes. Needs s3rver, s3fs,
# curl, tc, and the built package (WCODEC_LIBRARY, PYTHONPATH as for the
# tests).
set -eu
orig=$1 packed=$2
shift 2
rates=${*:-100 200 0}
PY=${PYTHON3:-/usr/bin/python3}
T=$(mktemp -d "${TMPDIR:-/tmp}/bench-s3.XXXXXX")
S3PID=
cleanup() {
	tc qdisc del dev lo root 2>/dev/null || true
	mountpoint -q "$T/mnt" 2>/dev/null && fusermount -u "$T/mnt"
	mountpoint -q "$T/wmnt" 2>/dev/null && fusermount3 -u "$T/wmnt"
	[ -n "$S3PID" ] && kill "$S3PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$T/data" "$T/mnt" "$T/wmnt"
s3rver -d "$T/data" -a 127.0.0.1 -p "$PORT" -s --configure-bucket models >"$T/s3rver.log" 2>&1 &
S3PID=$!
until curl -s -o /dev/null "http://127.0.0.1:$PORT/"; do sleep 0.1; done
put() { curl -sf -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" --aws-sigv4 "aws:amz:us-east-1:s3" \
	--user S3RVER:S3RVER -T "$1" "http://127.0.0.1:$PORT/models/$2"; }
ob=0 pb=0 n=0
for f in "$orig"/*.safetensors; do
	b=$(basename "$f" .safetensors)
	put "$f" "orig/$b.safetensors"
	put "$packed/$b.wcodec" "packed/$b.wcodec"
	ob=$((ob + $(stat -c %s "$f"))) pb=$((pb + $(stat -c %s "$packed/$b.wcodec"))) n=$((n + 1))
done
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_ENDPOINT_URL="http://127.0.0.1:$PORT"
echo "S3RVER:S3RVER" >"$T/passwd" && chmod 600 "$T/passwd"
keys() { for f in "$orig"/*.safetensors; do b=$(basename "$f" .safetensors); echo "$1/$b.$2"; done; }
keys orig safetensors >"$T/orig.keys"
keys packed wcodec >"$T/packed.keys"

load() { # load KEYS: seconds to load every object with wcodec.numpy.load_file, one after another
	"$PY" - "$1" <<'PY'
import sys, time
import wcodec.numpy as wn
keys = open(sys.argv[1]).read().split()
t0 = time.perf_counter()
for k in keys:
    wn.load_file("s3://models/" + k)
print(f"{time.perf_counter() - t0:.3f}")
PY
}
load_ckpt() { # load_ckpt PREFIX: seconds for wcodec.torch.load_checkpoint("s3://models/PREFIX/"), and
	# the loader's peak RSS beyond the tensors it returned (MiB)
	"$PY" - "$1" <<'PY'
import resource, sys, time
import wcodec.torch as wt
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
out = wt.load_checkpoint(f"s3://models/{sys.argv[1]}/")
t = time.perf_counter() - t0
extra = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base * 1024 - sum(v.numel() * v.element_size() for v in out.values())
print(f"{t:.3f} {max(extra, 0) / 2**20:.0f}")
PY
}
s3fs_read() { # seconds to cat every original through a fresh s3fs mount
	s3fs models "$T/mnt" -o url="http://127.0.0.1:$PORT",use_path_request_style,passwd_file="$T/passwd"
	t0=$(date +%s.%N)
	cat "$T"/mnt/orig/*.safetensors >/dev/null
	t1=$(date +%s.%N)
	fusermount -u "$T/mnt"
	echo "$t1 - $t0" | bc
}
WCODECFS=${WCODECFS:-wcodecfs}
wcodecfs_read() { # seconds to cat every packed file as X.safetensors through a fresh wcodecfs mount of the bucket
	"$WCODECFS" s3://models/packed "$T/wmnt" -o log="$T/wfs.log"
	t0=$(date +%s.%N)
	cat "$T"/wmnt/*.safetensors >/dev/null
	t1=$(date +%s.%N)
	fusermount3 -u "$T/wmnt"
	sleep 0.2
	echo "$t1 - $t0" | bc
}
median() { sort -n | sed -n 2p; }

echo "$n files: originals $(echo "scale=1; $ob / 1000000" | bc) MB, packed $(echo "scale=1; $pb / 1000000" | bc) MB"
echo "| link | packed, load_checkpoint | originals, load_checkpoint | packed, load_file each | originals, load_file each | packed, wcodecfs + cat | originals, s3fs + cat |"
echo "|---|---:|---:|---:|---:|---:|---:|"
rss=0
for r in $rates; do
	tc qdisc del dev lo root 2>/dev/null || true
	if [ "$r" != 0 ]; then
		tc qdisc add dev lo root handle 1: htb default 10
		tc class add dev lo parent 1: classid 1:10 htb rate $((r * 8))mbit ceil $((r * 8))mbit burst 256k cburst 256k
	fi
	pc=$(for i in 1 2 3; do load_ckpt packed; done | sort -n | sed -n 2p)
	rss=$(echo "$pc" | cut -d' ' -f2) pc=$(echo "$pc" | cut -d' ' -f1)
	oc=$(for i in 1 2 3; do load_ckpt orig | cut -d' ' -f1; done | median)
	p=$(for i in 1 2 3; do load "$T/packed.keys"; done | median)
	o=$(for i in 1 2 3; do load "$T/orig.keys"; done | median)
	w=$(for i in 1 2 3; do wcodecfs_read; done | median)
	s=$(for i in 1 2 3; do s3fs_read; done | median)
	rate=$([ "$r" = 0 ] && echo "unshaped" || echo "$r MB/s")
	mbs() { echo "scale=0; $1 / $2 / 1000000" | bc; }
	echo "| $rate | $pc s ($(mbs $pb $pc) MB/s) | $oc s ($(mbs $ob $oc) MB/s) | $p s ($(mbs $pb $p) MB/s) | $o s ($(mbs $ob $o) MB/s) | $w s ($(mbs $ob $w) MB/s decoded) | $s s ($(mbs $ob $s) MB/s) |"
done
echo "load_checkpoint of the packed files: peak RSS beyond the returned tensors $rss MiB (last rate)"
echo "wcodecfs: $(grep -o 'daemon RSS [^;]*' "$T/wfs.log" | tail -1) (last mount)"
