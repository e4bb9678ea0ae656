// The runtime wasm (target/wasm/tvmjs_runtime.wasm) driven by the unchanged npm tvmjs:
// packed functions both ways, closures, strings, bytes, objects, NDArrays, containers,
// errors. Run by scripts/test_wasm.sh (node --test).
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const { instance, stderrLines } = require("./common.js");

const tvm = instance();
const scoped = (f) => () => tvm.withNewScope(f);
const i32 = (v) => tvm.scalar(v, "int32");

test("the globals tvmjs's Instance needs are there", scoped(() => {
  const names = tvm.listGlobalFuncNames();
  for (const n of ["runtime.SystemLib", "tvmjs.array.decode_storage", "tvmjs.runtime.ArrayConcat",
    "vm.builtin.ndarray_cache.update", "testing.echo", "testing.object_use_count"]) {
    assert.ok(names.includes(n), n);
  }
}));

test("scalars, strings and bytes round-trip through testing.echo", scoped(() => {
  const echo = tvm.getGlobalFunc("testing.echo");
  assert.equal(echo(i32(-7)), -7);
  assert.equal(echo(2.5), 2.5);
  // ASCII: tvmjs 0.18 itself writes and reads C strings byte per UTF-16 unit.
  assert.equal(echo("hello world"), "hello world");
  assert.equal(echo(""), "");
  assert.equal(echo(null), undefined);
  const bytes = new Uint8Array([0, 1, 2, 255, 0, 7]);
  assert.deepEqual(Array.from(echo(bytes)), Array.from(bytes));
  assert.equal(tvm.getGlobalFunc("testing.add_one")(i32(41)), 42);
  assert.equal(tvm.getGlobalFunc("testing.ret_string")("abc"), "abc");
}));

test("JS functions are called from the runtime, with closures and return values", scoped(() => {
  const call = tvm.getGlobalFunc("testing.call");
  let seen = [];
  const r = call((a, b, c) => {
    seen = [a, b, c];
    return a + b;
  }, 40, 2, "x");
  assert.equal(r, 42);
  assert.deepEqual(seen, [40, 2, "x"]);
  // A JS function registered globally, found by the runtime by name.
  let count = 0;
  tvm.registerFunc("tvmrt_test.counter", (step) => (count += step), true);
  const viaRegistry = tvm.getGlobalFunc("tvmrt_test.counter");
  assert.equal(call(viaRegistry, 5), 5);
  assert.equal(call(viaRegistry, 5), 10);
  // A runtime closure wrapping a JS callback, called from JS.
  let fired = 0;
  const wrapped = tvm.getGlobalFunc("testing.wrap_callback")(() => { fired += 1; });
  wrapped();
  wrapped();
  assert.equal(fired, 2);
  // Nested: JS -> runtime -> JS -> runtime.
  const echo = tvm.getGlobalFunc("testing.echo");
  assert.equal(call((s) => echo(s + "!"), "deep"), "deep!");
}));

test("objects: strings, arrays, shape tuples, maps, reference counts", scoped(() => {
  const s = tvm.makeString("a runtime string");
  assert.equal(s.toString(), "a runtime string");
  const arr = tvm.makeTVMArray([tvm.makeString("x"), tvm.makeString("y"), tvm.makeString("z")]);
  assert.equal(arr.size(), 3);
  assert.equal(arr.get(1).toString(), "y");
  const cat = tvm.getGlobalFunc("tvmjs.runtime.ArrayConcat")(arr, tvm.makeTVMArray([s]));
  assert.equal(cat.size(), 4);
  assert.equal(cat.get(3).toString(), "a runtime string");
  const shape = tvm.makeShapeTuple([2, 3, 4]);
  assert.equal(tvm.getGlobalFunc("runtime.GetShapeTupleSize")(shape), 3);
  assert.equal(tvm.getGlobalFunc("runtime.GetShapeTupleElem")(shape, i32(2)), 4);
  const map = tvm.getGlobalFunc("runtime.Map")(tvm.makeString("k"), tvm.makeString("v"));
  assert.equal(tvm.getGlobalFunc("runtime.MapSize")(map), 1);
  const useCount = tvm.getGlobalFunc("testing.object_use_count");
  const before = useCount(s);
  const holder = tvm.makeTVMArray([s]);
  assert.equal(useCount(s), before + 1);
  holder.dispose();
  assert.equal(useCount(s), before);
}));

test("NDArrays: alloc, copy in and out, views over dtypes", scoped(() => {
  const a = tvm.empty([2, 3], "float32", tvm.cpu());
  a.copyFrom([1, 2, 3, 4, 5, 6]);
  assert.deepEqual(Array.from(a.toArray()), [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(a.shape, [2, 3]);
  assert.equal(a.dtype, "float32");
  const b = tvm.empty([2, 3], "float32").copyFrom(a);
  assert.deepEqual(Array.from(b.toArray()), [1, 2, 3, 4, 5, 6]);
  const v = a.view([3, 2]);
  assert.deepEqual(v.shape, [3, 2]);
  assert.deepEqual(Array.from(v.toArray()), [1, 2, 3, 4, 5, 6]);
  // tvmjs's view() drops its dtype argument: the runtime's view function, called directly.
  const bits = tvm.getGlobalFunc("runtime.TVMArrayCreateView")(
    a, tvm.makeShapeTuple([6]), "int32", i32(0));
  assert.equal(bits.toArray()[0], 0x3f800000);
  for (const [dtype, vals] of [["int8", [-1, 2, 127]], ["uint8", [0, 200, 255]],
    ["int32", [-5, 0, 7]], ["float64", [0.5, -1.25, 3]]]) {
    const t = tvm.empty([3], dtype).copyFrom(vals);
    const got = Array.from(t.toArray(), Number);
    assert.deepEqual(got, vals, dtype);
  }
  // Large blocks (>= 128 KiB) go through the allocator's reuse cache, which reads the clock.
  for (let i = 0; i < 3; ++i) {
    const big = tvm.detachFromCurrentScope(tvm.empty([1 << 18], "float32"));
    big.copyFrom(new Float32Array(1 << 18).fill(i));
    assert.equal(big.toArray()[(1 << 18) - 1], i);
    big.dispose();
  }
  const echoed = tvm.getGlobalFunc("testing.echo")(a);
  assert.deepEqual(Array.from(echoed.toArray()), [1, 2, 3, 4, 5, 6]);
}));

test("the NDArray cache: update, get, decode_storage (raw and bfloat16), remove", scoped(() => {
  const a = tvm.empty([4], "float32");
  const raw = new Float32Array([1.5, -2, 3.25, 0]);
  tvm.getGlobalFunc("tvmjs.array.decode_storage")(a, new Uint8Array(raw.buffer), "raw", "float32");
  assert.deepEqual(Array.from(a.toArray()), Array.from(raw));
  const bf16 = new Uint16Array(Array.from(new Uint32Array(raw.buffer), (u) => u >>> 16));
  const b = tvm.empty([4], "float32");
  tvm.getGlobalFunc("tvmjs.array.decode_storage")(b, new Uint8Array(bf16.buffer), "f32-to-bf16", "float32");
  assert.deepEqual(Array.from(b.toArray()), [1.5, -2, 3.25, 0]);
  tvm.ndarrayCacheUpdate("tvmrt_test.w", a, true);
  assert.deepEqual(Array.from(tvm.ndarrayCacheGet("tvmrt_test.w").toArray()), Array.from(raw));
  const params = tvm.getParamsFromCacheByName(["tvmrt_test.w"]);
  assert.equal(params.size(), 1);
  tvm.ndarrayCacheRemove("tvmrt_test.w");
  assert.equal(tvm.ndarrayCacheGet("tvmrt_test.w"), undefined);
}));

test("the system library of the bare runtime is a module", scoped(() => {
  const lib = tvm.systemLib();
  assert.ok(lib.getHandle() !== 0);
  assert.throws(() => lib.getFunction("no_such_kernel"), /no_such_kernel|Cannot find/);
}));

test("runtime errors are JS exceptions with the runtime's message; the instance goes on", scoped(() => {
  assert.throws(() => tvm.getGlobalFunc("tvmrt_test.no_such_global"), /tvmrt_test\.no_such_global/);
  const addOne = tvm.getGlobalFunc("testing.add_one");
  assert.throws(() => addOne(i32(1), i32(2)), (e) => {
    assert.match(e.message, /^TVMError: /);
    assert.match(e.message, /testing\.add_one/);
    assert.match(e.message, /1 argument|expects 1|arguments/);
    return true;
  });
  const a = tvm.empty([2], "float32");
  assert.throws(() => tvm.getGlobalFunc("tvmjs.array.decode_storage")(
    a, new Uint8Array(3), "raw", "float32"), /TVMError: .*decode_storage|bytes/);
  assert.throws(() => tvm.getGlobalFunc("testing.call")(() => { throw new Error("from JS"); }),
    /from JS/);
  assert.throws(() => tvm.getGlobalFunc("testing.log_fatal_str")("fatal from the runtime"),
    /TVMError: .*fatal from the runtime/);
  // A Rust panic unwinds (wasm exception handling) to the C boundary and becomes an error.
  assert.throws(() => tvm.getGlobalFunc("testing.tvmrt_panic")("deliberate panic"),
    /TVMError: .*deliberate panic/);
  // Still usable.
  assert.equal(addOne(i32(1)), 2);
  assert.equal(tvm.getGlobalFunc("testing.echo")("alive"), "alive");
}));

test("many calls do not grow the wasm memory", scoped(() => {
  const echo = tvm.getGlobalFunc("testing.echo");
  for (let i = 0; i < 2000; ++i) echo("x".repeat(64));
  const before = tvm.memory.memory.buffer.byteLength;
  for (let i = 0; i < 20000; ++i) tvm.withNewScope(() => echo(tvm.makeString("y".repeat(64))));
  assert.equal(tvm.memory.memory.buffer.byteLength, before);
}));

test("the runtime printed no panic but the deliberate one", () => {
  assert.deepEqual(stderrLines.filter((l) => /panicked/.test(l) && !/src.c_api.web\.rs/.test(l)), []);
  assert.equal(stderrLines.filter((l) => /panicked/.test(l)).length, 1);
});
