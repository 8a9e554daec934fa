#!/bin/sh
# The bash completion: commands, a command's options, backends, the files a
# command reads, and wcodecfs's -o options after a comma.
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }
: "${top_srcdir:?}"
command -v bash >/dev/null 2>&1 || { echo "SKIP: no bash"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/wcfs-compl.XXXXXX") || fail mktemp
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/d/sub" && touch "$T/d/m.wcodec" "$T/d/m.safetensors" "$T/d/notes.txt"
# complete WORDS...: what completing the last word gives, sorted, one line
complete_words() {
	bash -c '. "$1"; shift; cd "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); "$F"
		printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' \
		_ "$top_srcdir/contrib/completion/wcodec" "$T/d" "$@"
}
F=_wcodec; export F
[ "$(complete_words wcodec pa)" = "pack pack-images " ] || fail "commands: $(complete_words wcodec pa)"
complete_words wcodec pack --up | grep -q -- "--update" || fail "pack options"
[ "$(complete_words wcodec unpack -b c)" = "cpu cuda " ] || fail "backends: $(complete_words wcodec unpack -b c)"
[ "$(complete_words wcodec verify "")" = "m.wcodec sub " ] || fail "verify operands: $(complete_words wcodec verify "")"
[ "$(complete_words wcodec pack m)" = "m.safetensors " ] || fail "pack operands: $(complete_words wcodec pack m)"
F=_wcodecfs; export F
[ "$(complete_words wcodecfs src mnt -o cache_size=1G,ui)" = "cache_size=1G,uid= " ] ||
	fail "-o options: $(complete_words wcodecfs src mnt -o cache_size=1G,ui)"
echo "PASS: cli_completion.sh"
