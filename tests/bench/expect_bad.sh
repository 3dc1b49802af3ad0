#!/usr/bin/env bash
# Sourced by the benchmarks' command-line tests: expect_bad WANT ARGS... runs "$bench" with ARGS and
# checks that it exits 2 with WANT and its usage ("usage: $name") in its output; a miss prints
# the run and sets fail=1.
# shellcheck disable=SC2034,SC2154  # bench and name are the sourcing test's, which reads fail
fail=0
expect_bad() {
  local want=$1
  shift
  local out rc
  out=$("$bench" "$@" 2>&1)
  rc=$?
  if [[ $rc -ne 2 ]] || ! grep -qF -- "$want" <<<"$out" || ! grep -q "usage: $name" <<<"$out"; then
    echo "FAIL: $name $*: exit $rc, output: $out"
    fail=1
  fi
}
