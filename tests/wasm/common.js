// Shared by the node tests of the WebAssembly build (tests/wasm/*.test.js): loads the
// unchanged npm tvmjs (`@mlc-ai/web-runtime`, installed by scripts/test_wasm.sh) over our
// wasm, and serves files to tvmjs's fetch-based NDArray cache loader.
"use strict";
const fs = require("fs");
const http = require("http");
const path = require("path");

const root = path.resolve(__dirname, "../..");
const wasmDir = path.resolve(process.env.TVMRT_WASM_DIR || path.join(root, "target/wasm"));
const fixtures = process.env.TVMRT_WASM_FIXTURES ||
  path.join(process.env.TVMRT_CACHE || path.join(require("os").homedir(), ".cache/tvm-runtime-rs"),
    "wasm_fixtures");
const tvmjs = require(process.env.TVMJS || "@mlc-ai/web-runtime");

/** What the wasm printed to stderr (emcc's glue binds console.warn when it is loaded). */
const stderrLines = [];
const forward = console.warn.bind(console);
console.warn = (...args) => {
  stderrLines.push(args.join(" "));
  forward(...args);
};

/** A tvmjs Instance over `name`.wasm (target/wasm), with the glue built beside it. */
function instance(name = "tvmjs_runtime", logger = () => {}) {
  const EmccWASI = require(path.join(wasmDir, name + ".wasi.js"));
  const wasm = fs.readFileSync(path.join(wasmDir, name + ".wasm"));
  const tvm = new tvmjs.Instance(new WebAssembly.Module(wasm), new EmccWASI());
  tvm.env.logger = logger;
  return tvm;
}

/** The Cache API tvmjs's ArtifactCache uses, in memory (node has none). */
function installCacheApi() {
  if (globalThis.caches) return;
  const scopes = new Map();
  globalThis.caches = {
    async open(scope) {
      if (!scopes.has(scope)) {
        const store = new Map();
        scopes.set(scope, {
          async match(req) {
            const r = store.get(typeof req === "string" ? req : req.url);
            return r === undefined ? undefined : r.clone();
          },
          async add(req) {
            const r = await fetch(req);
            if (!r.ok) throw new Error(`fetch ${req.url}: HTTP ${r.status}`);
            store.set(req.url, r);
          },
          async keys() {
            return [...store.keys()].map((u) => new Request(u));
          },
          async delete(url) {
            return store.delete(typeof url === "string" ? url : url.url);
          },
        });
      }
      return scopes.get(scope);
    },
  };
}

/** Serves `dir` over HTTP on a free port; resolves to { url, close }. */
function serve(dir) {
  const server = http.createServer((req, res) => {
    const p = path.join(dir, decodeURIComponent(new URL(req.url, "http://x").pathname));
    if (!p.startsWith(dir) || !fs.existsSync(p) || fs.statSync(p).isDirectory()) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200);
    res.end(fs.readFileSync(p));
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      resolve({
        url: `http://127.0.0.1:${server.address().port}/`,
        close: () => new Promise((r) => server.close(r)),
      });
    });
  });
}

function hasModel() {
  return fs.existsSync(path.join(wasmDir, "test_model.wasm")) &&
    fs.existsSync(path.join(fixtures, "data.json"));
}

module.exports = { stderrLines, tvmjs, instance, installCacheApi, serve, fixtures, wasmDir, hasModel };
