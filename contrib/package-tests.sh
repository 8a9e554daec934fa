#!/usr/bin/env bash
# Install the project the ways its users do, and check what got installed.
#
#  wheel: `python3 -m build --wheel --no-isolation` (Debian's python3-build,
#    setuptools and wheel: nothing fetched); a fresh venv made with
#    --system-site-packages (numpy from Debian); `pip install` of the wheel
#    offline; from /, tests/installed_check.py wheel (the package loads its
#    own library, the tools run, packed files load equal to the originals);
#    the venv's wcodecfs mounts and serves the original bytes.
#  deb: `dpkg-buildpackage -us -uc -b` in a clean copy of the tree (the
#    files git tracks), with the CUDA plugin (build profile
#    pkg.wcodecfs.cuda) where nvcc exists; lintian reports no error;
#    `apt-get install` of the .debs; `mount -t fuse.wcodecfs` with uid= and
#    gid=, and an fstab line (mount -T FILE); the systemd unit, man pages
#    and the Python package in place; a program built with pkg-config
#    against libwcodec-dev; `apt-get purge` leaves no file of the packages;
#    then the same install, mount, fstab line and purge on a clean minimal
#    Debian 12 made by debootstrap (where debootstrap and a mirror are).
#
# Usage: contrib/package-tests.sh [wheel] [deb]   (default: both)
# Needs root (apt-get, mount) and the build dependencies (.ci/run installs
# them). The mount checks skip, saying so, where /dev/fuse is unusable.
# Prints "N passed, N failed".
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
steps=${*:-wheel deb}
T=$(mktemp -d "${TMPDIR:-/tmp}/wcodec-packages.XXXXXX")
pass=0 failed=0
MNT=$T/mnt
PKGS="wcodecfs libwcodec0 libwcodec-dev python3-wcodec wcodecfs-cuda"
cleanup() {
	mountpoint -q "$MNT" 2>/dev/null && umount "$MNT"
	for m in "$T/clean/mnt" "$T/clean/dev" "$T/clean/proc"; do
		mountpoint -q "$m" 2>/dev/null && umount "$m"
	done
	rm -rf --one-file-system "$T"
}
trap cleanup EXIT
ok() { echo "PASS: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
check() { # check WHAT COMMAND...
	local what=$1
	shift
	if "$@" >"$T/out" 2>&1; then ok "$what"; else bad "$what"; tail -20 "$T/out"; fi
}
fuse_usable() { [ -c /dev/fuse ] && (exec 3<>/dev/fuse) 2>/dev/null; }
[ "$(id -u)" = 0 ] || { echo "package-tests: run as root (apt-get, mount)"; exit 1; }
export DEBIAN_FRONTEND=noninteractive
unset WCODEC_LIBRARY WCODEC_PLUGIN_DIR PYTHONPATH LD_LIBRARY_PATH
PY=/usr/bin/python3

# Checkpoints to pack and load: realistic BF16 and F32 weights, and
# quantized TF.js-style tensors (dictionary layout).
mkdir -p "$T/data" "$MNT"
$PY "$top/tests/gen_safetensors.py" --profile weights --dtype BF16 --params 3000000 "$T/data/bf16.safetensors"
$PY "$top/tests/gen_safetensors.py" --profile weights --dtype F32 --params 500000 --seed 2 "$T/data/f32.safetensors"
$PY "$top/tests/gen_safetensors.py" --profile quantized --seed 3 "$T/data/quantized.safetensors"
DATA=("$T/data/bf16.safetensors" "$T/data/f32.safetensors" "$T/data/quantized.safetensors")

# mount_serves WCODEC_TOOL MOUNT_COMMAND...: pack bf16 into a source
# directory, mount it with the command (its last argument the mount point),
# compare the virtual file with the original, check its owner, unmount.
mount_serves() {
	local tool=$1
	shift
	rm -rf "$T/srv" && mkdir -p "$T/srv" && "$tool" pack -q "$T/data/bf16.safetensors" "$T/srv/model.wcodec" &&
		echo '{}' >"$T/srv/config.json" && "$@" &&
		cmp "$T/data/bf16.safetensors" "$MNT/model.safetensors" && cmp "$T/srv/config.json" "$MNT/config.json" &&
		[ "$(stat -c %u:%g "$MNT/model.safetensors")" = 65534:65534 ] && umount "$MNT"
}

if [[ " $steps " == *" wheel "* ]]; then
	echo "# wheel"
	rm -rf "$top/dist"
	check "python3 -m build --wheel --no-isolation" bash -c "cd '$top' && $PY -m build --wheel --no-isolation"
	whl=$(ls "$top"/dist/wcodec-*-py3-none-linux_*.whl 2>/dev/null | head -1)
	[ -n "$whl" ] && ok "a platform wheel: $(basename "$whl")" || bad "no py3-none-linux wheel in dist/"
	check "a fresh venv (--system-site-packages)" $PY -m venv --system-site-packages "$T/venv"
	check "pip install of the wheel, offline" "$T/venv/bin/pip" install -q --no-index --no-deps "$whl"
	check "the installed package, from / (tests/installed_check.py wheel)" \
		env PATH="$T/venv/bin:$PATH" "$T/venv/bin/python" "$top/tests/installed_check.py" wheel "${DATA[@]}"
	if [ -x "$T/venv/bin/wcodecfs" ] && fuse_usable; then
		check "the venv's wcodecfs serves the original bytes" mount_serves "$T/venv/bin/wcodec" \
			"$T/venv/bin/wcodecfs" "$T/srv" "$MNT" -o uid=65534,gid=65534
	else
		echo "# the venv's wcodecfs not mounted (no wcodecfs in the wheel, or no usable /dev/fuse)"
	fi
fi

if [[ " $steps " == *" deb "* ]]; then
	echo "# Debian packages"
	for p in $PKGS; do # a leftover of an earlier run
		dpkg -s "$p" >/dev/null 2>&1 && apt-get purge -y -qq "$p" >/dev/null
	done
	mkdir -p "$T/deb/wcodecfs"
	(cd "$top" && git ls-files -z -co --exclude-standard | xargs -0 cp --parents -t "$T/deb/wcodecfs")
	profile=
	if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null; then profile=-Ppkg.wcodecfs.cuda; fi
	check "dpkg-buildpackage -us -uc -b $profile" \
		bash -c "cd '$T/deb/wcodecfs' && DEB_BUILD_OPTIONS='nocheck parallel=$(nproc)' dpkg-buildpackage -us -uc -b $profile"
	ls "$T"/deb/*.deb 2>/dev/null | sed 's|.*/|# built |'
	check "lintian: no errors" lintian --fail-on error "$T"/deb/wcodecfs_*.changes
	cat "$T/out" | sed 's/^/# lintian: /'
	debs=$(ls "$T"/deb/*.deb | grep -v dbgsym)
	check "apt-get install of the packages" apt-get install -y -qq $debs
	dpkg -L $PKGS 2>/dev/null | sort -u >"$T/files"
	check "wcodec and wcodecfs in /usr/bin, the mount helper in /sbin" \
		test -x /usr/bin/wcodec -a -x /usr/bin/wcodecfs -a -x /sbin/mount.fuse.wcodecfs
	check "the systemd unit and man pages" test -f /lib/systemd/system/wcodecfs@.service \
		-a -f /usr/share/man/man1/wcodec.1.gz -a -f /usr/share/man/man1/wcodecfs.1.gz
	check "the unit starts the packaged wcodecfs" grep -q "ExecStart=/usr/bin/wcodecfs" /lib/systemd/system/wcodecfs@.service
	check "a program built against libwcodec-dev with pkg-config" bash -c \
		"cc '$top/contrib/examples/wcodec_extract.c' \$(pkg-config --cflags --libs wcodec) -o '$T/extract' &&
		 /usr/bin/wcodec pack -q '$T/data/f32.safetensors' '$T/f32.wcodec' &&
		 '$T/extract' '$T/f32.wcodec' | cmp - '$T/data/f32.safetensors'"
	check "python3-wcodec, from / (tests/installed_check.py system)" \
		env PATH=/usr/bin:/bin $PY "$top/tests/installed_check.py" system "${DATA[@]}"
	if dpkg -s wcodecfs-cuda >/dev/null 2>&1; then
		check "wcodec finds the packaged CUDA plugin" bash -c \
			"/usr/bin/wcodec --version | grep -q 'CUDA plugin: /usr/lib/.*/wcodecfs/wcodec-cuda.so (loads'"
	fi
	if fuse_usable; then
		check "mount -t fuse.wcodecfs SRC MNT -o uid=N,gid=N serves the original bytes" \
			mount_serves /usr/bin/wcodec mount -t fuse.wcodecfs "$T/srv" "$MNT" -o uid=65534,gid=65534
		echo "$T/srv $MNT fuse.wcodecfs ro,nofail,uid=65534,gid=65534,umask=022,cache_size=256M 0 0" >"$T/fstab"
		check "an fstab line of type fuse.wcodecfs (mount -T)" mount_serves /usr/bin/wcodec mount -T "$T/fstab" "$MNT"
	else
		echo "# no usable /dev/fuse: the packaged mount not checked"
	fi
	mkdir -p "$T/srv" && /usr/bin/wcodec pack -q -f "$T/data/bf16.safetensors" "$T/srv/model.wcodec"
	installed=$(for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 && echo "$p"; done)
	check "apt-get purge" apt-get purge -y -qq $installed
	left=$(while read -r f; do { [ -f "$f" ] || { [ -L "$f" ] && [ ! -d "$f" ]; }; } && echo "$f"; done <"$T/files")
	for d in /usr/lib/python3/dist-packages/wcodec /usr/include/wcodecfs /usr/share/doc/wcodecfs \
		/usr/lib/x86_64-linux-gnu/wcodecfs /etc/wcodecfs; do
		[ -e "$d" ] && left="$left $d"
	done
	[ -z "$left" ] && ok "nothing of the packages left after purge ($(wc -l <"$T/files") paths)" ||
		bad "left after purge: $left"

	# The same on a clean Debian: a minimal bookworm (debootstrap) gets
	# wcodecfs and libwcodec0 and nothing else of ours; apt brings the
	# dependencies; the mount, the fstab line and the purge as above.
	if command -v debootstrap >/dev/null && fuse_usable; then
		R=$T/clean
		if debootstrap --variant=minbase bookworm "$R" http://deb.debian.org/debian >"$T/out" 2>&1; then
			ok "debootstrap of a clean bookworm"
			mkdir -p "$R/debs" "$R/srv" "$R/mnt"
			cp "$T"/deb/wcodecfs_*.deb "$T"/deb/libwcodec0_*.deb "$R/debs/"
			cp "$T/srv/model.wcodec" "$R/srv/" # packed by the packages' wcodec above
			cp "$T/data/bf16.safetensors" "$R/orig.safetensors"
			mount --bind /dev "$R/dev" && mount -t proc proc "$R/proc"
			check "on the clean system: apt-get install ./wcodecfs_*.deb ./libwcodec0_*.deb, mount -t fuse.wcodecfs with uid/gid, an fstab line, purge leaving nothing" \
				chroot "$R" /bin/sh -ec '
				apt-get update -qq
				apt-get install -y -qq ./debs/wcodecfs_*.deb ./debs/libwcodec0_*.deb >/dev/null
				mount -t fuse.wcodecfs /srv /mnt -o uid=65534,gid=65534
				[ "$(stat -c %u:%g /mnt/model.safetensors)" = 65534:65534 ]
				cmp /mnt/model.safetensors /orig.safetensors
				umount /mnt
				echo "/srv /mnt fuse.wcodecfs ro,nofail,uid=65534,gid=65534,umask=022 0 0" >/etc/fstab.test
				mount -T /etc/fstab.test /mnt
				cmp /mnt/model.safetensors /orig.safetensors
				umount /mnt
				dpkg -L wcodecfs libwcodec0 >/files
				apt-get purge -y -qq wcodecfs libwcodec0 >/dev/null
				while read -r f; do
					if [ -f "$f" ] || { [ -L "$f" ] && [ ! -d "$f" ]; }; then echo "left: $f"; exit 1; fi
				done </files'
			mountpoint -q "$R/mnt" && umount "$R/mnt" # a failed check's mount; its daemon then exits
			sleep 1
			umount "$R/dev" "$R/proc"
		else
			echo "# debootstrap failed (no mirror?): the clean system not checked"; tail -3 "$T/out"
		fi
	else
		echo "# no debootstrap or no usable /dev/fuse: the clean system not checked"
	fi
fi

echo "packages: $pass passed, $failed failed"
[ "$failed" = 0 ]
