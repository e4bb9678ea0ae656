// Speed of the WebAssembly build under node (scripts/bench_wasm.sh runs it and prints the
// native side beside it): JS -> wasm packed calls through the npm tvmjs and through the bare
// TVMFuncCall export, a TVM 0.27 kernel call, and the Relax MLP's forward.
//   node benches/wasm_bench.js           (needs target/wasm/test_model.wasm and the fixtures)
"use strict";
const fs = require("fs");
const path = require("path");
const { instance, fixtures } = require("../tests/wasm/common.js");

const tvm = instance("test_model");
const now = () => Number(process.hrtime.bigint());

/** Median over `rounds` of the mean ns per call of `n` calls. */
function timeit(f, n, rounds = 7) {
  for (let i = 0; i < Math.min(n, 1000); ++i) f();
  const per = [];
  for (let r = 0; r < rounds; ++r) {
    const t0 = now();
    for (let i = 0; i < n; ++i) f();
    per.push((now() - t0) / n);
  }
  per.sort((a, b) => a - b);
  return per[rounds >> 1];
}

const out = {};
tvm.beginScope();
const addOne = tvm.getGlobalFunc("testing.add_one");
const one = tvm.scalar(1, "int32");
out.packed_call_tvmjs_ns = timeit(() => addOne(one), 200000);

// The wasm boundary alone: TVMFuncCall from JS with a prepared argument block.
const ex = tvm.exports;
const handle = addOne._tvmPackedCell.getHandle();
const p = ex.TVMWasmAllocSpace(32);
const view = new DataView(tvm.memory.memory.buffer);
view.setBigInt64(p, 41n, true);
view.setInt32(p + 8, 0, true);
out.packed_call_raw_ns = timeit(() => ex.TVMFuncCall(handle, p, p + 8, 1, p + 16, p + 24), 1000000);
if (new DataView(tvm.memory.memory.buffer).getBigInt64(p + 16, true) !== 42n) {
  throw new Error("TVMFuncCall returned the wrong value");
}
ex.TVMWasmFreeSpace(p);

const kernel = tvm.systemLib().getFunction("add_one");
const a = tvm.empty([1], "float32");
const b = tvm.empty([1], "float32");
out.kernel_call_tvmjs_ns = timeit(() => kernel(a, b), 100000);

const data = JSON.parse(fs.readFileSync(path.join(fixtures, "data.json"), "utf8")).mlp;
const meta = JSON.parse(fs.readFileSync(path.join(fixtures, "mlp/ndarray-cache.json"), "utf8"));
const shard = fs.readFileSync(path.join(fixtures, "mlp/params_shard_0.bin"));
const params = meta.records[0].records.map((r) => {
  const t = tvm.empty(r.shape, r.dtype);
  tvm.getGlobalFunc("tvmjs.array.decode_storage")(
    t, new Uint8Array(shard.subarray(r.byteOffset, r.byteOffset + r.nbytes)), r.format, r.dtype);
  return t;
});
const vm = tvm.createVirtualMachine(tvm.cpu());
const main = vm.getFunction("main");
const x = tvm.empty(data.x_shape, "float32").copyFrom(data.x);
const runs = [];
for (let i = 0; i < 220; ++i) {
  tvm.beginScope();
  const t0 = now();
  main(x, params[0], params[1]);
  const dt = now() - t0;
  tvm.endScope();
  if (i >= 20) runs.push(dt);
}
runs.sort((u, v) => u - v);
out.mlp_forward_median_us = runs[runs.length >> 1] / 1e3;
out.mlp_forward_min_us = runs[0] / 1e3;
tvm.endScope();
out.node = process.version;
console.log(JSON.stringify(out));
