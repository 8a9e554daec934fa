#!/usr/bin/env bash
# bench-gpu-mount.sh - wcodecfs reads served by the CUDA backend against the
# CPU backend on one GPU machine, in one go (docs/BENCHMARKS.md, section
# "Through the mount"). A benchmark, not a test: run it on a quiet machine
# with a GPU, as root (FUSE mounts, drop_caches). Steps:
#   1. build from this source tree with ./configure --with-cuda (out of tree,
#      in $WORK/build), then `make check` in the background (test_cuda and
#      qvq_cuda.sh must PASS there, not skip);
#   2. a ~2.1 GB transformer-shaped BF16 safetensors file drawn from
#      N(0, 0.02) by torch, packed with `wcodec pack`;
#   3. cold sequential reads of it through fresh mounts (`dd bs=1M`, one
#      reader, and 4 readers over 4 quarters), page cache dropped before
#      each, every configuration in $CONFIGS, median of $REPS, with the
#      daemon's CPU time (utime+stime of its /proc/PID/stat, before and
#      after the read), the machine's busy CPU time, and the cache's batch
#      statistics (logged at unmount); a ramfs mount of the original bytes
#      (the FUSE ceiling) and the original file on disk for reference;
#      `cmp` of the whole file through each backend;
#   4. a small LlamaForCausalLM made by transformers, packed, loaded through
#      the mount with safetensors.torch.load_file and
#      AutoModelForCausalLM.from_pretrained (contrib/bench/gpu_mount_model.py).
# Results: $OUT/summary.md (also printed last), logs beside it.
#
# Usage: bench-gpu-mount.sh     (environment: OUT, WORK, REPS, CONFIGS,
#        LAYERS, MODEL_BACKENDS, JOBS, PYTHON, BUDGET; defaults below; for a dry run
#        without a GPU or torch: BUILD=<configured build dir> skips the build
#        and make check, BIG=<file.safetensors> skips making the data,
#        MODEL=0 skips step 4, SRCWARM=1 puts the packed file in the page
#        cache before each wcodecfs run and wcodec cat, PACK_OPTS adds
#        options to the big file's `wcodec pack`, such as "--chunk 16384")
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
# lib.sh for wait_mount and drop_caches; BUILD keeps its meaning here (given:
# skip the build), so lib.sh's default for it is not kept.
build_given=${BUILD:-}
# shellcheck source=contrib/bench/lib.sh
. "$src/contrib/bench/lib.sh"
BUILD=$build_given
OUT=${OUT:-/tmp/bench-gpu-mount}
WORK=${WORK:-/var/tmp/bgm}
REPS=${REPS:-3}
LAYERS=${LAYERS:-4}
JOBS=${JOBS:-$(nproc)}
PYTHON=${PYTHON:-$(command -v python3)}
NCPU=$(nproc)
# one mount configuration per entry: the -o options of wcodecfs, optionally
# after VAR=VALUE@ (an environment variable for that daemon)
CONFIGS=${CONFIGS:-"backend=cpu,threads=$NCPU backend=cuda backend=cuda,readahead=16 backend=cuda,readahead=32 backend=cuda,readahead=64 backend=cpu,threads=$NCPU,readahead=16"}
MODEL_BACKENDS=${MODEL_BACKENDS:-"backend=cuda backend=cpu,threads=$NCPU"}
T0=$(date +%s)
mkdir -p "$OUT" "$WORK"
B=$WORK/build
SUM=$OUT/summary.md
LOG=$OUT/bench.log
DLOG=$OUT/daemon.log
: > "$SUM"
: > "$DLOG"
say() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$LOG" >&2; }
sum() { echo "$*" >> "$SUM"; }
die() { say "FATAL: $*"; cat "$SUM"; exit 1; }

# ---- 0. machine -------------------------------------------------------------
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
sum "# wcodecfs through the mount: CUDA vs CPU backend"
sum ""
sum "- GPU: ${gpu:-none}; host: $NCPU CPUs ($cpu), $(awk '/^MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r)"
sum "- data on: $(df -T "$WORK" | awk 'NR==2 {print $1" ("$2")"}'); fusermount3: $(command -v fusermount3 || echo none); nvcc $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p'); python $($PYTHON -c 'import torch, transformers, safetensors; print(torch.__version__, "transformers", transformers.__version__, "safetensors", safetensors.__version__)' 2>&1 | tail -1)"
sum "- date: $(date -u +%Y-%m-%dT%H:%MZ); source: $(cat "$src/.commit" 2>/dev/null || echo '?')"
command -v fusermount3 >/dev/null || say "no fusermount3: unmounting with umount"

# ---- 1. build, then make check in the background ------------------------------
check_pid=
if [ -n "${BUILD:-}" ]; then
	B=$BUILD
	echo "make check: skipped (BUILD given)" > "$OUT/check.log"
else
[ -f "$src/../deps/install.sh" ] && bash "$src/../deps/install.sh" >> "$LOG" 2>&1
say "build"
( cd "$src" && autoreconf -fi ) > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; die "autoreconf"; }
mkdir -p "$B"
( cd "$B" && "$src/configure" --with-cuda --enable-werror PYTHON3="$PYTHON" ) >> "$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; die "configure"; }
( cd "$B" && make -j"$JOBS" ) >> "$OUT/build.log" 2>&1 || { grep -B2 -A5 -E 'error|Error' "$OUT/build.log" | head -60; die "make"; }
say "build ok"
if [ "${CHECK:-1}" != 0 ]; then
	( cd "$B" && timeout 300 make -j"$JOBS" check > "$OUT/check.log" 2>&1; echo "make check rc=$?" >> "$OUT/check.log" ) &
	check_pid=$!
else
	echo "make check: skipped (CHECK=0)" > "$OUT/check.log"
fi
fi

# ---- 2. data ------------------------------------------------------------------
WCODEC=$B/wcodec WCODECFS=$B/wcodecfs RAMFS=$B/contrib/bench/ramfs
export WCODEC_PLUGIN_DIR=$B/cuda/.libs
[ -e "$WCODEC_PLUGIN_DIR/wcodec-cuda.so" ] || say "no CUDA plugin in $WCODEC_PLUGIN_DIR"
say "data"
if [ -n "${BIG:-}" ]; then
	big=$BIG
else
	big=$WORK/big.safetensors
	$PYTHON "$src/contrib/bench/gpu_mount_model.py" gen-big "$big" --layers "$LAYERS" >> "$LOG" 2>&1 || die "gen-big"
fi
rm -rf "$WORK/src" "$WORK/model" "$WORK/model-src"
mkdir -p "$WORK/src" "$WORK/mnt"
s=$(date +%s%N)
# shellcheck disable=SC2086 # PACK_OPTS: extra `wcodec pack` options, split on spaces
"$WCODEC" pack -q -f ${PACK_OPTS:-} "$big" "$WORK/src/big.wcodec" >> "$LOG" 2>&1 || die "pack"
pack_ms=$((($(date +%s%N) - s) / 1000000))
size=$(stat -c %s "$big") packed=$(stat -c %s "$WORK/src/big.wcodec")
if [ "${MODEL:-1}" != 0 ]; then
	$PYTHON "$src/contrib/bench/gpu_mount_model.py" make-model "$WORK/model" >> "$LOG" 2>&1 || die "make-model"
	mkdir -p "$WORK/model-src"
	for f in "$WORK/model"/*; do
		case $f in
		*.safetensors) "$WCODEC" pack -q -f "$f" "$WORK/model-src/$(basename "$f" .safetensors).wcodec" >> "$LOG" 2>&1 || die "pack model" ;;
		*) cp "$f" "$WORK/model-src/" ;;
		esac
	done
fi
say "data ok: big $size bytes -> $packed packed in $pack_ms ms; model: $(ls "$WORK/model" 2>/dev/null | tr '\n' ' ')"

say "waiting for make check"
[ -n "$check_pid" ] && wait $check_pid
tail -1 "$OUT/check.log" | tee -a "$LOG"
for t in tests/test_cuda tests/qvq_cuda; do # (automake drops the .sh of tests/qvq_cuda.sh)
	echo "$t: $(sed -n 's/^:test-result: //p' "$B/$t.trs" 2>/dev/null || echo 'no result')"
done > "$WORK/check-cuda.txt"
cat "$WORK/check-cuda.txt" >> "$LOG"
{ echo "--- test-suite.log"; cat "$B/test-suite.log" 2>/dev/null | head -300
  echo "--- tests/test_cuda.log"; tail -30 "$B/tests/test_cuda.log" 2>/dev/null
  echo "--- tests/qvq_cuda.log"; tail -30 "$B/tests/qvq_cuda.log" 2>/dev/null; } >> "$OUT/check.log"

# ---- 3. cold sequential reads ---------------------------------------------------
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
# SRCWARM=1: after the drop, read the packed file once so that its bytes are
# in the page cache (the mount's own pages stay cold): the read then measures
# decode + FUSE, not the disk, which otherwise bounds both backends alike.
warm_src() { [ "${SRCWARM:-0}" = 1 ] && cat "$WORK/src/big.wcodec" > /dev/null; return 0; }
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; } # user nice system irq softirq, ticks
dcpu() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; } # utime + stime, ticks
HZ=$(getconf CLK_TCK)
daemon=
mount_wc() { # mount_wc SRC [VAR=VALUE@]OPTS: fresh daemon in the foreground, pid in $daemon
	local o=$2 env=
	case $o in *@*) env=${o%%@*}; o=${o#*@} ;; esac
	echo "=== wcodecfs -f $1 $WORK/mnt -o $2" >> "$DLOG"
	env $env "$WCODECFS" -f "$1" "$WORK/mnt" -o "$o" >> "$DLOG" 2>&1 &
	daemon=$!
	wait_mount "$WORK/mnt" "$daemon" 30
}
mount_ramfs() {
	echo "=== ramfs -f $big $WORK/mnt" >> "$DLOG"
	"$RAMFS" -f "$big" "$WORK/mnt" >> "$DLOG" 2>&1 &
	daemon=$!
	wait_mount "$WORK/mnt" "$daemon" 30
}
unmount() {
	fusermount3 -u "$WORK/mnt" 2>/dev/null || umount "$WORK/mnt" 2>/dev/null || umount -l "$WORK/mnt"
	wait $daemon 2>/dev/null
	daemon=
}
# read_file FILE NREADERS -> "ms" (wall time of 1 dd, or of NREADERS dd's over equal ranges)
read_file() {
	local f=$1 n=$2 mib q s i
	mib=$((($(stat -c %s "$f") + 1048575) / 1048576))
	q=$(((mib + n - 1) / n))
	s=$(date +%s%N)
	: > "$WORK/readers.txt"
	for ((i = 0; i < n; i++)); do
		# each reader's own time too, to tell a lagging stream from a slow mount
		{ timeout 120 dd if="$f" of=/dev/null bs=1M skip=$((i * q)) count=$q status=none
		  echo "$(ms "$s")" >> "$WORK/readers.txt"; } &
	done
	wait # (a subshell: only the dd's are its children)
	ms "$s"
}
# one cold run: KIND (wc OPTS | ramfs | disk), NREADERS -> appends "ms dcpu_ticks busy_ticks batches tiles" to $WORK/r.KEY
run_one() {
	local key=$1 kind=$2 opts=$3 n=$4 f t c0 c1 b0 b1 st l0
	l0=$(wc -l < "$DLOG")
	case $kind in
	wc) mount_wc "$WORK/src" "$opts" || { say "mount failed: $opts"; tail -5 "$DLOG"; return 1; }
	    f=$WORK/mnt/big.safetensors ;;
	ramfs) mount_ramfs || { say "ramfs mount failed"; return 1; }; f=$WORK/mnt/$(basename "$big") ;;
	disk) f=$big ;;
	cat) # decoding without FUSE: wcodec cat -b BACKEND to /dev/null; its own CPU time
		drop_caches
		warm_src
		b0=$(busy)
		TIMEFORMAT='%R %U %S'
		{ time "$WCODEC" cat -b "$opts" "$WORK/src/big.wcodec" > /dev/null 2>> "$LOG"; } 2> "$WORK/time.txt" ||
			{ say "$key: wcodec cat -b $opts failed"; return 1; }
		t=$(tail -1 "$WORK/time.txt")
		b1=$(busy)
		echo "$t" | awk -v h="$HZ" -v m=$((b1 - b0)) '{ printf "%.0f %.0f %d 0 0\n", $1 * 1000, ($2 + $3) * h, m }' >> "$WORK/r.$key"
		say "$key: wcodec cat -b $opts: real user sys = $t"
		return 0 ;;
	esac
	drop_caches
	[ "$kind" = wc ] && warm_src
	c0=0; [ -n "$daemon" ] && c0=$(dcpu $daemon)
	b0=$(busy)
	t=$(read_file "$f" "$n")
	b1=$(busy)
	c1=0; [ -n "$daemon" ] && c1=$(dcpu $daemon)
	[ -n "$daemon" ] && unmount
	st="0 0"
	if [ "$kind" = wc ]; then
		# "cache: ... N batches of M tiles" at unmount
		st=$(tail -n +$((l0 + 1)) "$DLOG" | grep 'cache: ' | tail -1 | sed -n 's/.* \([0-9]*\) batches of \([0-9]*\) tiles.*/\1 \2/p')
	fi
	echo "$t $((c1 - c0)) $((b1 - b0)) ${st:-0 0}" >> "$WORK/r.$key"
	say "$key: $kind '$opts' x$n: $t ms (readers done at $(sort -n "$WORK/readers.txt" | tr '\n' ' ')ms), daemon CPU $((c1 - c0)) ticks, machine busy $((b1 - b0)) ticks, batches/tiles ${st:-?}"
}

rm -f "$WORK"/r.* "$WORK/cmp.txt"
i=0
declare -a KEYS KINDS OPTS
for c in $CONFIGS; do KEYS[i]=c$i; KINDS[i]=wc; OPTS[i]=$c; i=$((i + 1)); done
KEYS[i]=ramfs; KINDS[i]=ramfs; OPTS[i]=-; i=$((i + 1))
for b in cpu cuda; do KEYS[i]=cat-$b; KINDS[i]=cat; OPTS[i]=$b; i=$((i + 1)); done
KEYS[i]=disk; KINDS[i]=disk; OPTS[i]=-; i=$((i + 1))
say "cold reads: ${#KEYS[@]} sources x $REPS reps x (1, 4 readers)"
# BUDGET: seconds since the start after which no new repetition begins (the
# device tool stops a command at 600 s)
for ((rep = 0; rep < REPS; rep++)); do
	if [ $rep -gt 0 ] && [ $(($(date +%s) - T0)) -gt "${BUDGET:-380}" ]; then
		say "time budget: stopping after $rep repetitions"; break
	fi
	for ((k = 0; k < ${#KEYS[@]}; k++)); do
		# rotate the order every repetition
		j=$(((k + rep) % ${#KEYS[@]}))
		for n in 1 4; do
			[ "${KINDS[j]}" = cat ] && [ $n = 4 ] && continue
			run_one "${KEYS[j]}.$n" "${KINDS[j]}" "${OPTS[j]}" $n
		done
	done
done

# byte identity through each backend, and the backend each daemon chose
for c in "backend=cpu,threads=$NCPU" backend=cuda; do
	mount_wc "$WORK/src" "$c" || { echo "$c: mount failed" >> "$WORK/cmp.txt"; continue; }
	if cmp "$big" "$WORK/mnt/big.safetensors"; then echo "$c: cmp identical"; else echo "$c: cmp DIFFERS"; fi >> "$WORK/cmp.txt"
	unmount
done
cat "$WORK/cmp.txt" >> "$LOG"

med() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { awk -v c="$2" '{ print $c }' "$WORK/r.$1" | med; }
backend_of() { # the backend the daemon logged for these options
	awk -v o="-o $1" '/^=== wcodecfs/ { want = (index($0, o) && substr($0, index($0, o) + length(o)) == "") ; next }
		want && /mounted .* backend / { sub(/.*: backend /, ""); sub(/,.*/, ""); print; exit }' "$DLOG"
}

sum ""
sum "## 1. Cold sequential read of one file through the mount"
sum ""
sum "File: $size bytes$([ -z "${BIG:-}" ] && echo " of BF16 (N(0, 0.02) by torch, $LAYERS LLaMA-7B-shaped layers + embedding + lm_head)"), packed by \`wcodec pack${PACK_OPTS:+ $PACK_OPTS}\` (1 MiB tiles) to $packed bytes in $pack_ms ms."
[ "${SRCWARM:-0}" = 1 ] && sum "**SRCWARM=1**: after each drop of the page cache the packed file was read once (\`cat big.wcodec > /dev/null\`), so the compressed bytes came from memory and the mount's pages were cold: decode + FUSE, without the disk."
sum "Each run: fresh mount, \`echo 3 > /proc/sys/vm/drop_caches\`, then \`dd bs=1M\` of the whole file (1 reader) or 4 \`dd bs=1M\` over its 4 quarters at once (4 readers); median of $REPS. CPU seconds: the daemon's utime+stime over the read (for \`wcodec cat\`: its own user+sys); 'machine' = all CPUs' busy time (user+nice+system+irq+softirq from /proc/stat; includes dd and the kernel's FUSE work)."
sum ""
sum "| source | -o options | backend (daemon log) | 1 reader MB/s | daemon CPU s | machine CPU s | tiles/batch | 4 readers MB/s | daemon CPU s | machine CPU s | tiles/batch |"
sum "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for ((k = 0; k < ${#KEYS[@]}; k++)); do
	key=${KEYS[k]}
	case ${KINDS[k]} in
	wc) row="| wcodecfs | ${OPTS[k]} | $(backend_of "${OPTS[k]}") " ;;
	cat) row="| \`wcodec cat -b ${OPTS[k]}\` > /dev/null (no FUSE) | - | ${OPTS[k]} " ;;
	ramfs) row="| ramfs (original bytes in RAM: the FUSE ceiling) | - | - " ;;
	disk) row="| original file on disk | - | - " ;;
	esac
	for n in 1 4; do
		[ -f "$WORK/r.$key.$n" ] || { row+="| - | - | - | - "; continue; }
		t=$(col "$key.$n" 1) dc=$(col "$key.$n" 2) mc=$(col "$key.$n" 3)
		bt=$(awk '{ b += $4; t += $5 } END { if (b) printf "%.1f", t / b; else print "-" }' "$WORK/r.$key.$n")
		row+="| $(awk -v b="$size" -v t="$t" 'BEGIN { printf "%.0f", b / (t / 1000) / 1e6 }') "
		row+="| $(case ${KINDS[k]} in wc | cat) awk -v x="$dc" -v h="$HZ" 'BEGIN { printf "%.2f", x / h }' ;; *) echo - ;; esac) "
		row+="| $(awk -v x="$mc" -v h="$HZ" 'BEGIN { printf "%.2f", x / h }') | $bt "
	done
	sum "$row|"
done
sum ""
sum "Raw runs (ms, daemon ticks, machine ticks, batches, tiles; CLK_TCK=$HZ):"
for f in "$WORK"/r.*; do sum "- ${f##*/r.}: $(tr '\n' ';' < "$f")"; done
sum ""
sum "Byte identity: $(tr '\n' ' ' < "$WORK/cmp.txt")"

# ---- 4. model loading -----------------------------------------------------------
if [ "${MODEL:-1}" != 0 ]; then
say "model load"
sum ""
sum "## 2. Loading a model through the mount"
sum ""
margs=()
for b in $MODEL_BACKENDS; do margs+=(--backend "$b"); done
mreps=$REPS
[ $(($(date +%s) - T0)) -gt "${BUDGET:-380}" ] && mreps=1
mt=$((570 - ($(date +%s) - T0)))
[ $mt -gt 240 ] && mt=240
PYTHONUNBUFFERED=1 timeout $mt $PYTHON "$src/contrib/bench/gpu_mount_model.py" load-bench --orig "$WORK/model" \
	--src "$WORK/model-src" --mnt "$WORK/mnt" --wcodecfs "$WCODECFS" "${margs[@]}" --reps "$mreps" \
	--md "$WORK/model.md" --log "$DLOG" >> "$LOG" 2>&1
echo "model load-bench rc=$?" >> "$LOG"
mountpoint -q "$WORK/mnt" && umount -l "$WORK/mnt"
cat "$WORK/model.md" >> "$SUM" 2>/dev/null || sum "(model benchmark failed: see bench.log)"
fi

sum ""
sum "## 3. make check of the --with-cuda build"
sum ""
sum "$(grep -m1 '^make check' "$OUT/check.log"); $(grep -E '^# (TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR)' "$OUT/check.log" | head -7 | tr '\n' ' ')"
sum ""
sum "$(sed 's/^/- /' "$WORK/check-cuda.txt")"
sum "- skipped: $(grep -l 'SKIP' "$B"/tests/*.trs "$B"/contrib/tests/*.trs 2>/dev/null | xargs -r grep -l ':test-result: SKIP' | xargs -r -n1 basename | tr '\n' ' ')"
sum ""
sum "Total time of this script: $(($(date +%s) - T0)) s"
say "done"
cat "$SUM"
