#!/bin/sh
# Runs the deliberate-race program and checks that TSan reported exactly
# that race: exit status 66 (TSan's, for reports), a report naming
# RacyIncrement, and no report whose stack is in liblatte.
set -u
prog=$1
log=$2
echo "tsan: running a program with a deliberate data race (its TSan report, expected, goes to $log)"
"$prog" >"$log" 2>&1
rc=$?
if [ $rc -ne 66 ]; then echo "tsan: expected TSan's exit status 66, got $rc"; cat "$log"; exit 1; fi
if ! grep -q "WARNING: ThreadSanitizer: data race" "$log" || ! grep -q "RacyIncrement" "$log"; then
  echo "tsan: no report of the deliberate race in RacyIncrement"; cat "$log"; exit 1
fi
if grep -q "liblatte" "$log"; then echo "tsan: a report mentions liblatte"; cat "$log"; exit 1; fi
echo "tsan: the deliberate race was reported ($(grep -c 'WARNING: ThreadSanitizer' "$log") report(s)), none from latte: ok"
