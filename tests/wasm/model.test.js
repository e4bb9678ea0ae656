// Kernels compiled by TVM v0.27 for wasm32 (scripts/wasm/build_wasm_fixtures.py), linked into
// target/wasm/test_model.wasm by `scripts/build_wasm.sh --link`: the add_one kernel through the
// system library, the Relax MLP through tvmjs's VirtualMachine with its weights fetched into
// the NDArray cache; bad input (corrupt shard, wrong argument count, kernel errors).
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("fs");
const path = require("path");
const os = require("os");
const { instance, stderrLines, installCacheApi, serve, fixtures, hasModel } = require("./common.js");

if (!hasModel()) {
  // scripts/test_wasm.sh reports the skip (tvmrt_skip) before running node.
  test("model tests", { skip: "target/wasm/test_model.wasm or the fixtures are missing" }, () => {});
} else {
  const data = JSON.parse(fs.readFileSync(path.join(fixtures, "data.json"), "utf8")).mlp;
  const tvm = instance("test_model");
  const i32 = (v) => tvm.scalar(v, "int32");
  installCacheApi();

  const close = (got, want, tol = 1e-4) => {
    assert.equal(got.length, want.length);
    for (let i = 0; i < want.length; ++i) {
      assert.ok(Math.abs(got[i] - want[i]) <= tol * (1 + Math.abs(want[i])),
        `element ${i}: ${got[i]} vs ${want[i]}`);
    }
  };

  test("add_one: a TVM 0.27 kernel in the system library", () => tvm.withNewScope(() => {
    const f = tvm.systemLib().getFunction("add_one");
    for (const n of [1, 7, 1000]) {
      const a = tvm.empty([n], "float32").copyFrom(Float32Array.from({ length: n }, (_, i) => i * 0.5));
      const b = tvm.empty([n], "float32");
      f(a, b);
      assert.deepEqual(Array.from(b.toArray()), Array.from({ length: n }, (_, i) => i * 0.5 + 1));
    }
  }));

  test("a kernel error is a JS exception with the kernel's message", () => tvm.withNewScope(() => {
    const f = tvm.systemLib().getFunction("add_one");
    const a = tvm.empty([4], "float32");
    assert.throws(() => f(a), /TVMError: .*(Expected 2 arguments|arguments)/);
    assert.throws(() => f(a, tvm.empty([4], "int32")), /TVMError: .*dtype/);
    assert.throws(() => f(a, tvm.empty([5], "float32")), /TVMError: .*shape/);
    const b = tvm.empty([4], "float32");
    f(a.copyFrom([1, 2, 3, 4]), b);
    assert.deepEqual(Array.from(b.toArray()), [2, 3, 4, 5]);
  }));

  test("the Relax MLP through tvmjs's VirtualMachine, weights from the NDArray cache", async () => {
    const server = await serve(path.join(fixtures, "mlp"));
    try {
      await tvm.fetchNDArrayCache(server.url, tvm.cpu(), "tvmrt-mlp");
    } finally {
      await server.close();
    }
    tvm.withNewScope(() => {
      const vm = tvm.createVirtualMachine(tvm.cpu());
      const params = tvm.getParamsFromCacheByName(["w1", "w2"]);
      assert.equal(params.size(), 2);
      const x = tvm.empty(data.x_shape, "float32").copyFrom(data.x);
      const main = vm.getFunction("main");
      const y = main(x, params.get(0), params.get(1));
      assert.deepEqual(y.shape, data.y_shape);
      close(Array.from(y.toArray()), data.y);
      // Again (the pooled allocator reuses its blocks), and with a wrong argument count.
      close(Array.from(main(x, params.get(0), params.get(1)).toArray()), data.y);
      assert.throws(() => main(x, params.get(0)), /TVMError: .*requires 3 inputs but only 2/);
      assert.throws(() => main(x, params.get(1), params.get(0)), /TVMError: /);
      close(Array.from(main(x, params.get(0), params.get(1)).toArray()), data.y);
    });
  });

  test("a corrupt or missing weight shard is an exception; the instance goes on", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tvmrt-wasm-"));
    const meta = JSON.parse(fs.readFileSync(path.join(fixtures, "mlp/ndarray-cache.json"), "utf8"));
    const shard = fs.readFileSync(path.join(fixtures, "mlp/params_shard_0.bin"));
    // Truncated shard: the last record's bytes are short.
    fs.writeFileSync(path.join(dir, "params_shard_0.bin"), shard.subarray(0, shard.length - 100));
    fs.writeFileSync(path.join(dir, "ndarray-cache.json"), JSON.stringify(meta));
    const server = await serve(dir);
    tvm.ndarrayCacheClear();
    const logs = [];
    tvm.env.logger = (m) => logs.push(m);
    try {
      await assert.rejects(tvm.fetchNDArrayCache(server.url, tvm.cpu(), "tvmrt-bad1"),
        /TVMError: .*(bytes|size)/);
      // A record whose shape does not match its byte count.
      meta.records[0].records[0].shape = [3, 3];
      fs.writeFileSync(path.join(dir, "params_shard_0.bin"), shard);
      fs.writeFileSync(path.join(dir, "ndarray-cache.json"), JSON.stringify(meta));
      tvm.ndarrayCacheClear();
      await assert.rejects(tvm.fetchNDArrayCache(server.url, tvm.cpu(), "tvmrt-bad2"),
        /TVMError: /);
      // No shard at all.
      fs.rmSync(path.join(dir, "params_shard_0.bin"));
      tvm.ndarrayCacheClear();
      await assert.rejects(tvm.fetchNDArrayCache(server.url, tvm.cpu(), "tvmrt-bad3"), /404/);
    } finally {
      await server.close();
      fs.rmSync(dir, { recursive: true, force: true });
      tvm.env.logger = () => {};
    }
    tvm.withNewScope(() => {
      assert.throws(() => tvm.getParamsFromCacheByName(["no_such_weight"]), /no_such_weight/);
      const b = tvm.empty([2], "float32");
      tvm.systemLib().getFunction("add_one")(tvm.empty([2], "float32").copyFrom([5, 6]), b);
      assert.deepEqual(Array.from(b.toArray()), [6, 7]);
      assert.equal(tvm.getGlobalFunc("testing.add_one")(i32(1)), 2);
    });
  });
}

test("the runtime printed no panic", () => {
  assert.deepEqual(stderrLines.filter((l) => /panicked/.test(l)), []);
});
