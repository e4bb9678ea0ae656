// Headless Chromium test: serves tests/wasm/browser/index.html, the npm tvmjs, the model wasm
// and the MLP's weights, opens the page in `chromium --headless`, waits for the page to post
// its result, checks it against numpy's output and keeps a screenshot.
//   node tests/wasm/browser.js SCREENSHOT.png      (run by scripts/test_wasm.sh)
// Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe).
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

/**
 * A minimal Chrome DevTools Protocol client over chromium's --remote-debugging-pipe (messages
 * are NUL-terminated JSON; chromium reads fd 3 and writes fd 4), so that no WebSocket client
 * is needed (node < 22 has none without a flag).
 */
function cdp(child, onEvent) {
  const [, , , toChrome, fromChrome] = child.stdio;
  let next = 0;
  let buf = "";
  const pending = new Map();
  const fail = (why) => {
    for (const r of pending.values()) r({ error: { message: why } });
    pending.clear();
  };
  toChrome.on("error", (e) => fail(`the DevTools pipe: ${e.message}`));
  child.on("error", (e) => fail(`cannot start chromium: ${e.message}`));
  child.on("exit", (code) => fail(`chromium exited (${code})`));
  fromChrome.setEncoding("utf8");
  fromChrome.on("data", (chunk) => {
    buf += chunk;
    let end;
    while ((end = buf.indexOf("\0")) >= 0) {
      const msg = JSON.parse(buf.slice(0, end));
      buf = buf.slice(end + 1);
      if (msg.id !== undefined && pending.has(msg.id)) {
        pending.get(msg.id)(msg);
        pending.delete(msg.id);
      } else if (msg.method) {
        onEvent(msg);
      }
    }
  });
  return (method, params = {}, sessionId = undefined) => new Promise((resolve, reject) => {
    const id = ++next;
    pending.set(id, (msg) => (msg.error ? reject(new Error(`${method}: ${msg.error.message}`))
      : resolve(msg)));
    toChrome.write(JSON.stringify({ id, method, params, sessionId }) + "\0");
  });
}

server.listen(0, "127.0.0.1", async () => {
  const url = `http://127.0.0.1:${server.address().port}/`;
  const args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--no-first-run", "--hide-scrollbars", "--window-size=900,400",
    "--remote-debugging-pipe", "about:blank"];
  const child = spawn(chromium, args, { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (c) => { stderr += c; });
  const consoleLines = [];
  let result;
  try {
    const send = cdp(child, (ev) => {
      if (ev.method === "Runtime.consoleAPICalled") {
        consoleLines.push(ev.params.args.map((a) => a.value ?? a.description).join(" "));
      } else if (ev.method === "Runtime.exceptionThrown") {
        consoleLines.push("exception: " + JSON.stringify(ev.params.exceptionDetails).slice(0, 500));
      }
    });
    const targets = (await send("Target.getTargets")).result.targetInfos;
    const page = targets.find((t) => t.type === "page");
    const session = (await send("Target.attachToTarget", { targetId: page.targetId, flatten: true }))
      .result.sessionId;
    await send("Runtime.enable", {}, session);
    await send("Page.enable", {}, session);
    await send("Page.navigate", { url }, session);
    let timer;
    const timeout = new Promise((r) => {
      timer = setTimeout(() => r({ ok: false, error: "timed out after 60 s" }), 60000);
    });
    result = await Promise.race([outcome, timeout]);
    clearTimeout(timer);
    const png = await send("Page.captureScreenshot", { format: "png" }, session);
    if (png.result && png.result.data) fs.writeFileSync(shot, Buffer.from(png.result.data, "base64"));
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
    console.error("browser test FAILED\npage console:\n" + consoleLines.join("\n") +
      "\nchromium:\n" + stderr.slice(-2000));
    process.exit(1);
  }
  console.log(`browser test passed (${result.userAgent}): MLP forward ${result.ms.toFixed(3)} ms`);
});
