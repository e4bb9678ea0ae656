// Headless Chromium test: serves tests/wasm/browser/index.html, the npm tvmjs, the model wasm
// and the MLP's weights, opens the page in `chromium --headless`, waits for the page to post
// its result, checks it against numpy's output and keeps a screenshot.
//   node --experimental-websocket tests/wasm/browser.js SCREENSHOT.png   (scripts/test_wasm.sh)
// Chromium is driven over the DevTools protocol (node 20 has WebSocket behind the flag).
"use strict";
const fs = require("fs");
const http = require("http");
const path = require("path");
const { spawn } = require("child_process");
const { fixtures, wasmDir } = require("./common.js");

const shot = path.resolve(process.argv[2] || "target/wasm/browser.png");
const tvmjsFile = require.resolve(process.env.TVMJS || "@mlc-ai/web-runtime");
const chromium = process.env.CHROMIUM || "chromium";
const files = {
  "/": path.join(__dirname, "browser/index.html"),
  "/tvmjs.js": tvmjsFile,
  "/data.json": path.join(fixtures, "data.json"),
};
const dirs = { "/wasm/": wasmDir, "/mlp/": path.join(fixtures, "mlp") };

function resolve(urlPath) {
  if (files[urlPath]) return files[urlPath];
  for (const [prefix, dir] of Object.entries(dirs)) {
    if (urlPath.startsWith(prefix)) {
      const p = path.join(dir, urlPath.slice(prefix.length));
      if (p.startsWith(dir)) return p;
    }
  }
  return undefined;
}

const types = { ".html": "text/html", ".js": "text/javascript", ".json": "application/json",
  ".wasm": "application/wasm" };

let finish;
const outcome = new Promise((r) => { finish = r; });
const server = http.createServer((req, res) => {
  const urlPath = decodeURIComponent(new URL(req.url, "http://x").pathname);
  if (req.method === "POST" && urlPath === "/result") {
    let body = "";
    req.on("data", (c) => { body += c; });
    req.on("end", () => {
      res.end("ok");
      finish(JSON.parse(body));
    });
    return;
  }
  const p = resolve(urlPath);
  if (!p || !fs.existsSync(p) || fs.statSync(p).isDirectory()) {
    res.writeHead(404);
    res.end();
    return;
  }
  res.writeHead(200, { "Content-Type": types[path.extname(p)] || "application/octet-stream" });
  res.end(fs.readFileSync(p));
});

/** Reads chromium's stderr until its DevTools endpoint is announced. */
function devtoolsPort(child) {
  return new Promise((resolve, reject) => {
    let buf = "";
    child.stderr.on("data", (c) => {
      buf += c;
      const m = /DevTools listening on ws:\/\/[^:]+:(\d+)\//.exec(buf);
      if (m) resolve(Number(m[1]));
    });
    child.on("exit", (code) => reject(new Error(`chromium exited (${code}):\n${buf.slice(-2000)}`)));
  });
}

/** A minimal Chrome DevTools Protocol client over node's WebSocket. */
async function cdp(wsUrl, onEvent) {
  const ws = new WebSocket(wsUrl);
  await new Promise((r, j) => { ws.onopen = r; ws.onerror = j; });
  let next = 0;
  const pending = new Map();
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    if (msg.id !== undefined && pending.has(msg.id)) {
      pending.get(msg.id)(msg);
      pending.delete(msg.id);
    } else if (msg.method) {
      onEvent(msg);
    }
  };
  return {
    send: (method, params = {}) => new Promise((r) => {
      const id = ++next;
      pending.set(id, r);
      ws.send(JSON.stringify({ id, method, params }));
    }),
    close: () => ws.close(),
  };
}

server.listen(0, "127.0.0.1", async () => {
  const url = `http://127.0.0.1:${server.address().port}/`;
  const args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--no-first-run", "--hide-scrollbars", "--window-size=900,400",
    "--remote-debugging-port=0", "about:blank"];
  const child = spawn(chromium, args, { stdio: ["ignore", "ignore", "pipe"] });
  const consoleLines = [];
  let result;
  try {
    const port = await devtoolsPort(child);
    const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
    const page = targets.find((t) => t.type === "page");
    const client = await cdp(page.webSocketDebuggerUrl, (ev) => {
      if (ev.method === "Runtime.consoleAPICalled") {
        consoleLines.push(ev.params.args.map((a) => a.value ?? a.description).join(" "));
      } else if (ev.method === "Runtime.exceptionThrown") {
        consoleLines.push("exception: " + JSON.stringify(ev.params.exceptionDetails).slice(0, 500));
      }
    });
    await client.send("Runtime.enable");
    await client.send("Page.enable");
    await client.send("Page.navigate", { url });
    let timer;
    const timeout = new Promise((r) => {
      timer = setTimeout(() => r({ ok: false, error: "timed out after 60 s" }), 60000);
    });
    result = await Promise.race([outcome, timeout]);
    clearTimeout(timer);
    const png = await client.send("Page.captureScreenshot", { format: "png" });
    if (png.result && png.result.data) fs.writeFileSync(shot, Buffer.from(png.result.data, "base64"));
    client.close();
  } catch (e) {
    result = { ok: false, error: String(e.stack || e) };
  } finally {
    child.kill();
    server.close();
  }
  const data = JSON.parse(fs.readFileSync(path.join(fixtures, "data.json"), "utf8")).mlp;
  let failed = !result.ok;
  if (result.ok) {
    failed = result.n !== data.y.length || !(result.maxErr <= 1e-3);
  }
  console.log(JSON.stringify(result));
  if (fs.existsSync(shot)) console.log(`screenshot: ${shot}`);
  if (failed) {
    console.error("browser test FAILED\npage console:\n" + consoleLines.join("\n"));
    process.exit(1);
  }
  console.log(`browser test passed (${result.userAgent}): MLP forward ${result.ms.toFixed(3)} ms`);
});
