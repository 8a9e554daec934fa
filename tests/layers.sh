#!/bin/sh
# layers.sh - the architecture's rules (docs/ARCHITECTURE.md), checked on the
# sources: each folder includes only its own headers and those of the layers
# below it (the engine and everything under it know no format), and no
# source file of src/, cuda/ or python/ is longer than 700 lines.
: "${top_srcdir:?}"
cd "$top_srcdir" || exit 1
bad=0

# allowed FILE-GLOB: the folders of src/ whose headers files matching the
# glob may include ("x.h" without a folder is the file's own folder).
check() {
	glob=$1
	shift
	for f in $glob; do
		[ -f "$f" ] || continue
		for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\)\/[^"]*".*/\1/p' "$f" | sort -u); do
			ok=0
			for a in "$@"; do
				[ "$inc" = "$a" ] && ok=1
			done
			if [ $ok = 0 ]; then
				echo "FAIL: $f includes $inc/ (allowed: $*)"
				bad=1
			fi
		done
	done
}

check 'src/core/*.[ch]' core
check 'src/source/*.[ch]' core source
check 'src/codec/*.[ch]' core codec
check 'src/engine/*.[ch]' core codec engine
check 'src/container/*.[ch]' core codec engine source container
check 'src/images/*.[ch]' core images
check 'src/qvq/*.[ch]' core codec engine images qvq
check 'src/loader/*.[ch]' core codec engine source container images qvq loader
check 'src/fuse/*.[ch]' core codec engine source container images qvq loader fuse
check 'src/cli/*.[ch]' core codec engine source container images qvq loader cli
# The CUDA plugin is a decode backend: the planes' pipeline and the loaders
# see no format but .wcodec's container; its .qvq kernels (vq_*: codebook
# mode, tx_*: transform mode) see the job kind's header alone.
check 'cuda/wcc_* cuda/plugin.c cuda/direct.c cuda/loader.c cuda/wcodec_cuda.h' core codec engine container loader
for f in cuda/vq_* cuda/tx_*; do
	if grep -n '#include "qvq/' "$f" | grep -v '"qvq/qvq_job.h"' >/dev/null; then
		echo "FAIL: $f includes a qvq header other than qvq/qvq_job.h"
		bad=1
	fi
done
check 'cuda/vq_* cuda/tx_*' core codec engine qvq

for f in src/*/*.[ch] cuda/*.[ch] cuda/*.cu python/wcodec/*.py; do
	n=$(wc -l < "$f")
	if [ "$n" -gt 700 ]; then
		echo "FAIL: $f has $n lines (at most 700)"
		bad=1
	fi
done
[ $bad = 0 ] && echo "PASS: layers.sh"
exit $bad
