#!/usr/bin/env bash
# RPC benchmarks (issue 14; results in benches/README.md, section RPC):
#   1. benches/rpc_bench.py: round trip of an empty call and 64 MiB copies, the reference's
#      server and ours side by side in alternating rounds, clients on the reference runtime;
#   2. benches/rpc_tracker_bench.py: TVM's tracker with 16 of our servers and 64 requests from
#      8 client processes, once with the clients on our runtime and once on the reference's.
#
#   scripts/bench_rpc.sh [--only rt|tracker] [--no-build]
#
# Takes a few minutes (not part of scripts/test.sh). Servers and the tracker run on 127.0.0.1
# with a bounded lifetime and are stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
only=all
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "usage: $0 [--only rt|tracker] [--no-build]" >&2; exit 2 ;;
  esac
done
[ "$build" = 1 ] && cargo build --release --quiet
export TVMRT_BIN="$PWD/target/release/tvmrt"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/tvmrt-bench-rpc.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/ref" "$tmp/ours"
ln -s "$TVMRT_REF_LIB" "$tmp/ref/libtvm_runtime.so"
cp target/release/libtvm_runtime.so "$tmp/ours/libtvm_runtime.so"
run_on() {
  local which="$1"
  shift
  TVM_LIBRARY_PATH="$tmp/$which" TVM_USE_RUNTIME_LIB=1 TVM_FFI=ctypes "$TVMRT_PYTHON" "$@"
}
echo "machine: $(nproc) cores; $(uptime)"
if [ "$only" = all ] || [ "$only" = rt ]; then
  echo "## round trip and copies (clients on the reference runtime)"
  run_on ref benches/rpc_bench.py
fi
if [ "$only" = all ] || [ "$only" = tracker ]; then
  for which in ours ref; do
    echo "## tracker at scale (clients on the $which runtime)"
    run_on "$which" benches/rpc_tracker_bench.py
  done
fi
echo "done: $(uptime)"
