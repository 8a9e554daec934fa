#!/bin/sh
# contrib/demo.sh after the README's own in-tree build: it builds in the
# source tree when that was configured there (autoconf refuses an
# out-of-tree build of such a tree), in build/demo otherwise
# (demo.sh --build-dir prints which, and does nothing else).
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }
: "${top_srcdir:?}"
T=$(mktemp -d "${TMPDIR:-/tmp}/wcfs-demo.XXXXXX") || fail mktemp
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/tree/contrib"
cp "$top_srcdir/contrib/demo.sh" "$T/tree/contrib/"
tree=$(cd "$T/tree" && pwd -P)
got=$(timeout 20 bash "$T/tree/contrib/demo.sh" --build-dir </dev/null) || fail "demo.sh --build-dir failed"
[ "$got" = "$tree/build/demo" ] || fail "an unconfigured tree: builds in '$got'"
touch "$T/tree/config.status" # what ./configure in the tree leaves
got=$(timeout 20 bash "$T/tree/contrib/demo.sh" --build-dir </dev/null) || fail "demo.sh --build-dir failed"
[ "$got" = "$tree" ] || fail "a tree configured in place: builds in '$got', not in the tree"
echo "PASS: cli_demo.sh"
