#!/bin/sh
# expect_lines.sh N PATTERN command...: runs the command, shows its output, and passes only
# if exactly N lines match PATTERN (one per rank) and none matches "-WRONG".
n=$1 pattern=$2
shift 2
out=$("$@" 2>&1)
printf '%s\n' "$out"
got=$(printf '%s\n' "$out" | grep -c -- "$pattern")
if printf '%s\n' "$out" | grep -q -- "-WRONG"; then echo "EXPECT-FAILED: a rank said WRONG"; exit 1; fi
if [ "$got" -ne "$n" ]; then echo "EXPECT-FAILED: $got lines match '$pattern', expected $n"; exit 1; fi
echo "EXPECT-PASSED: $n lines match '$pattern'"
