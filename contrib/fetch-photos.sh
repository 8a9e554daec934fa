#!/usr/bin/env bash
# fetch-photos.sh - real photographs for the .qvq benchmarks, from Debian
# packages that ship them (wallpapers, scikit-image sample data), fetched
# with `apt-get download` and unpacked with `dpkg -x` (nothing is installed).
#
# usage: contrib/fetch-photos.sh [--held-out] [DATA_DIR]   (default: data/photos)
#
# --held-out: the 15 photographs of lomiri-wallpapers-16.04 instead, none of
# them in the default set: for measuring what was tuned on that set (the
# image archives' transform mode fitted its quality scale on it).
#
# Result: DATA_DIR/photos/<package>/<name>.jpg - photographs, picked by
# type: files whose content `file` identifies as JPEG image data (the
# packages' PNGs and SVGs are mostly rendered art, diagrams and text), at
# least 256x256 pixels; from opencv-doc only its sample data (not the HTML
# manual's figures); from Plasma's wallpapers one size per wallpaper
# (1920x1080 where shipped). Prints how many it kept; fails below 50.
set -euo pipefail

pkgs=(mate-backgrounds lomiri-wallpapers-20.04 plasma-workspace-wallpapers python3-skimage opencv-doc)
least=50
if [ "${1:-}" = --held-out ]; then
	pkgs=(lomiri-wallpapers-16.04)
	least=15
	shift
fi
data=${1:-data/photos}
mkdir -p "$data/debs" "$data/root" "$data/photos"
data=$(cd "$data" && pwd)

cd "$data/debs"
for p in "${pkgs[@]}"; do
	if ! ls "${p}"_*.deb >/dev/null 2>&1; then
		echo "fetch-photos: apt-get download $p" >&2
		apt-get download "$p" >/dev/null
	fi
done
for deb in "$data"/debs/*.deb; do
	pkg=$(basename "$deb" | cut -d_ -f1)
	[ -d "$data/root/$pkg" ] || dpkg -x "$deb" "$data/root/$pkg"
done

# Keep JPEG files of at least 256x256 pixels, by content type.
while IFS= read -r -d '' f; do
	rel=${f#"$data/root/"}
	pkg=${rel%%/*}
	name=$(basename "$f")
	name=${name%.*}
	case $pkg/$rel in
		opencv-doc/*/examples/data/*) ;;
		opencv-doc/*) continue ;;
		plasma-workspace-wallpapers/*/wallpapers/*/contents/images/*)
			wp=${rel#*/wallpapers/}
			wp=${wp%%/*}
			imgs=$(dirname "$f")
			# one size per wallpaper: 1920x1080 if shipped, else the first
			if [ -e "$imgs/1920x1080.jpg" ]; then
				[ "$f" = "$imgs/1920x1080.jpg" ] || continue
			else
				first=$(find "$imgs" -name '*.jpg' | sort | head -1)
				[ "$f" = "$first" ] || continue
			fi
			name=$wp ;;
		plasma-workspace-wallpapers/*) continue ;; # dark variants, previews
	esac
	info=$(file -b "$f")
	case $info in
		JPEG\ image\ data*) ;;
		*) continue ;;
	esac
	dims=$(printf '%s\n' "$info" | grep -oE '[0-9]+x[0-9]+' | tail -1)
	w=${dims%x*}
	h=${dims#*x}
	if [ -z "$dims" ] || [ "$w" -lt 256 ] || [ "$h" -lt 256 ]; then
		continue
	fi
	mkdir -p "$data/photos/$pkg"
	dst="$data/photos/$pkg/$name.jpg"
	[ -e "$dst" ] || cp "$f" "$dst"
done < <(find "$data/root" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) -print0 | sort -z)

kept=$(find "$data/photos" -type f -name '*.jpg' | wc -l)
echo "fetch-photos: $kept photographs under $data/photos"
[ "$kept" -ge "$least" ] || { echo "fetch-photos: fewer than $least photographs" >&2; exit 1; }
