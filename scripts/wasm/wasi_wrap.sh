#!/usr/bin/env bash
# Wraps emcc's JS glue (argument 1) as the library-provider class tvmjs bundles as
# `tvmjs_runtime_wasi.js` (written to argument 2): `new EmccWASI()` runs the glue, whose
# --pre-js (scripts/wasm/preload.js) captured the import object, and exposes `imports`,
# `start` and `wasiImport`; CommonJS exports it when loaded by node.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 GLUE.js OUT.wasi.js" >&2; exit 2; }
{
  echo "function EmccWASI() {"
  cat "$1"
  cat <<'TAIL'
  this.Module = Module;
  this.imports = Module.wasmLibraryProvider.imports;
  this.start = Module.wasmLibraryProvider.start;
  this.wasiImport = this.imports["wasi_snapshot_preview1"];
}
if (typeof module !== "undefined" && module.exports) {
  module.exports = EmccWASI;
}
TAIL
} >"$2"
