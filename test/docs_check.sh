#!/usr/bin/env bash
# Checks the docs against the code where that is cheap (issue 32):
#  - every KOLO_* variable the runtime's C++ reads is listed in docs/knobs.md, and every
#    variable docs/knobs.md lists is read somewhere in the sources;
#  - the codec version in core/message.cc is the newest one docs/collectives.md lists.
# Usage: test/docs_check.sh [source root]   (exit 1 with a line per mismatch)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
fail=0
# Variables read by the C++ (and the Python binding's C++): quoted names in the sources.
code=$(grep -rhoE '"KOLO_[A-Z0-9_]*[A-Z0-9]"' --include='*.cc' --include='*.h' \
         core ops kernels kvstore training optimizer nn adapters python/src 2>/dev/null | tr -d '"' | sort -u)
docs=$(grep -ohE '`KOLO_[A-Z0-9_]*[A-Z0-9]`' docs/knobs.md | tr -d '`' | sort -u)
anywhere=$(grep -rhoE 'KOLO_[A-Z0-9_]*[A-Z0-9]' --include='*.cc' --include='*.h' --include='*.py' --include='*.in' \
             --include='*.sh' core ops kernels kvstore training optimizer nn adapters python tools 2>/dev/null | sort -u)
for v in $code; do
  grep -qx "$v" <<<"$docs" || { echo "docs/knobs.md does not list $v, which the code reads"; fail=1; }
done
for v in $docs; do
  grep -qx "$v" <<<"$anywhere" || { echo "docs/knobs.md lists $v, which no source reads"; fail=1; }
done
version=$(sed -nE 's/^constexpr uint8_t kVersion = ([0-9]+);.*/\1/p' core/message.cc)
# The list in docs/collectives.md: "(its codec version is ...: 6 added join, ..., 10 errors ...)".
newest=$(tr '\n' ' ' < docs/collectives.md | grep -oE 'codec version is[^)]*\)' | grep -oE '[0-9]+ [a-z]' |
         tail -1 | cut -d' ' -f1)
if [ -z "$version" ] || [ "$version" != "$newest" ]; then
  echo "core/message.cc's codec version is ${version:-?}, docs/collectives.md's list ends at ${newest:-?}"
  fail=1
fi
[ "$fail" = 0 ] && echo "docs check: $(wc -w <<<"$code") runtime knobs documented, codec version $version listed"
exit "$fail"
