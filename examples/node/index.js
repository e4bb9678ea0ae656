// Calls the TVM C runtime from Node.js through koffi: load a compiled library, call its
// `myadd(A, B, C)` kernel on float32 arrays, check the result, and show an error message.
//
//   node index.js LIBTVM_RUNTIME.so LIBRARY.so
'use strict';
const koffi = require('koffi');

const [runtimePath, libPath] = process.argv.slice(2);
if (!runtimePath || !libPath) {
  console.error('usage: node index.js LIBTVM_RUNTIME.so LIBRARY.so');
  process.exit(2);
}
const rt = koffi.load(runtimePath);

const DLDevice = koffi.struct('DLDevice', { device_type: 'int', device_id: 'int' });
const DLDataType = koffi.struct('DLDataType', { code: 'uint8', bits: 'uint8', lanes: 'uint16' });
const DLTensor = koffi.struct('DLTensor', {
  data: 'void *', device: DLDevice, ndim: 'int', dtype: DLDataType,
  shape: 'int64 *', strides: 'int64 *', byte_offset: 'uint64',
});
// Every argument here is a handle, and TVMValue is an 8-byte union, so an array of
// `void *` has the layout of `TVMValue[]`; the return slot is read as an int64.

const api = {
  getLastError: rt.func('const char *TVMGetLastError()'),
  modLoad: rt.func('int TVMModLoadFromFile(const char *file, const char *fmt, _Out_ void **out)'),
  modGetFunction: rt.func('int TVMModGetFunction(void *mod, const char *name, int q, _Out_ void **out)'),
  modFree: rt.func('int TVMModFree(void *mod)'),
  funcFree: rt.func('int TVMFuncFree(void *f)'),
  funcCall: rt.func('int TVMFuncCall(void *f, void **args, int *codes, int n, _Out_ int64 *ret, _Out_ int *ret_code)'),
  arrayAlloc: rt.func('int TVMArrayAlloc(const int64 *shape, int ndim, int code, int bits, int lanes, int dev_type, int dev_id, _Out_ DLTensor **out)'),
  arrayFree: rt.func('int TVMArrayFree(DLTensor *arr)'),
  copyFromBytes: rt.func('int TVMArrayCopyFromBytes(DLTensor *arr, void *data, size_t n)'),
  copyToBytes: rt.func('int TVMArrayCopyToBytes(DLTensor *arr, _Out_ void *data, size_t n)'),
};

function check(ret, what) {
  if (ret !== 0) throw new Error(`${what}: ${api.getLastError()}`);
}

function fromFloats(values) {
  const out = [null];
  check(api.arrayAlloc([values.length], 1, 2, 32, 1, 1, 0, out), 'TVMArrayAlloc');
  const buf = Buffer.from(new Float32Array(values).buffer);
  check(api.copyFromBytes(out[0], buf, buf.length), 'TVMArrayCopyFromBytes');
  return out[0];
}

function toFloats(arr, n) {
  const buf = Buffer.alloc(n * 4);
  check(api.copyToBytes(arr, buf, buf.length), 'TVMArrayCopyToBytes');
  return Array.from(new Float32Array(buf.buffer, buf.byteOffset, n));
}

const mod = [null];
check(api.modLoad(libPath, 'so', mod), 'TVMModLoadFromFile');
const fn = [null];
check(api.modGetFunction(mod[0], 'myadd', 1, fn), 'TVMModGetFunction');
if (!fn[0]) throw new Error('the library has no myadd');

const n = 1024;
const a = Array.from({ length: n }, (_, i) => i);
const b = Array.from({ length: n }, (_, i) => 3 * i);
const ta = fromFloats(a), tb = fromFloats(b), tc = fromFloats(new Array(n).fill(0));
const kTVMNDArrayHandle = 13;
const args = [ta, tb, tc];
const ret = [0], retCode = [0];
check(api.funcCall(fn[0], args, [kTVMNDArrayHandle, kTVMNDArrayHandle, kTVMNDArrayHandle], 3, ret, retCode), 'TVMFuncCall');
const c = toFloats(tc, n);
const bad = c.findIndex((v, i) => v !== a[i] + b[i]);
if (bad >= 0) {
  console.error(`mismatch at ${bad}: ${c[bad]}`);
  process.exit(1);
}
console.log(`node: myadd over ${n} elements correct, c[7] = ${c[7]}`);

const missing = [null];
if (api.modLoad('/nonexistent.so', 'so', missing) === 0) {
  console.error('loading a missing file should fail');
  process.exit(1);
}
console.log(`node: missing file gives: ${api.getLastError().split('\n')[0]}`);

[ta, tb, tc].forEach((t) => check(api.arrayFree(t), 'TVMArrayFree'));
check(api.funcFree(fn[0]), 'TVMFuncFree');
check(api.modFree(mod[0]), 'TVMModFree');
