// Interop test: toolgate's conformance fixture against the official TypeScript MCP SDKs — the
// latest v1 (`@modelcontextprotocol/sdk`) and the v2 client package (`@modelcontextprotocol/client`),
// pinned by package-lock.json. Each test starts its own server (the `conformance` example binary,
// $TOOLGATE_CONFORMANCE_BIN) on a free loopback port, or over stdio, and checks:
//
// 1. every revision the SDK can speak: the client gets the revision it asked for (2025-11-25,
//    2025-06-18 and 2025-03-26 through `initialize`; the v2 client also 2026-07-28 through
//    `server/discover`), lists the tools and calls the calculator (structured content under
//    2025-06-18 and later, text only under 2025-03-26);
// 2. a task-augmented call (the client declares `io.modelcontextprotocol/tasks`) to a tool that
//    requires confirmation is answered with an `input_required` task; approved over REST, the
//    client's `tasks/get` reads `completed` with the call's result. Nothing runs before the yes.
//
// Run with `node --test` from scripts/interop.sh.

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as HttpV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport as StdioV1 } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Client as ClientV2, StreamableHTTPClientTransport as HttpV2 } from "@modelcontextprotocol/client";
import { StdioClientTransport as StdioV2 } from "@modelcontextprotocol/client/stdio";
import * as z from "zod";

const BINARY = process.env.TOOLGATE_CONFORMANCE_BIN;
if (!BINARY) throw new Error("set TOOLGATE_CONFORMANCE_BIN to the conformance fixture (scripts/interop.sh does)");

const TASKS = "io.modelcontextprotocol/tasks";
const LEGACY = ["2025-11-25", "2025-06-18", "2025-03-26"];
const anyResult = z.object({}).passthrough();

async function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Starts the fixture on a free port; `{ url, base, stop }`. */
async function startHttp() {
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const child = spawn(BINARY, [String(port)], { stdio: ["ignore", "ignore", "pipe"] });
    let log = "";
    child.stderr.on("data", (d) => (log += d));
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && child.exitCode === null) {
      try {
        const r = await fetch(`${base}/healthz`);
        if (r.ok) {
          const stop = async () => {
            child.kill("SIGTERM");
            if (child.exitCode === null) await new Promise((r) => child.once("exit", r));
          };
          return { url: new URL(`${base}/mcp`), base, stop, log: () => log };
        }
      } catch {
        // not up yet
      }
      await sleep(50);
    }
    child.kill("SIGKILL");
  }
  throw new Error("the fixture did not come up on 127.0.0.1");
}

/**
 * Wraps a transport: rewrites the `initialize` request's protocolVersion to `pin` (the v1 SDK
 * always offers its newest revision; this is how a client pinned to an older one behaves) and
 * records the revision the server answered with.
 */
function tapped(inner, pin) {
  const seen = { initializeId: undefined, answered: undefined };
  const wrapper = {
    seen,
    start: () => inner.start(),
    close: () => inner.close(),
    async send(message, options) {
      if (message.method === "initialize") {
        seen.initializeId = message.id;
        if (pin) message = { ...message, params: { ...message.params, protocolVersion: pin } };
      }
      return inner.send(message, options);
    },
    setProtocolVersion: (v) => inner.setProtocolVersion?.(v),
    get sessionId() {
      return inner.sessionId;
    },
  };
  inner.onmessage = (message, extra) => {
    if (seen.initializeId !== undefined && message.id === seen.initializeId && message.result) {
      seen.answered = message.result.protocolVersion;
    }
    wrapper.onmessage?.(message, extra);
  };
  inner.onclose = () => wrapper.onclose?.();
  inner.onerror = (e) => wrapper.onerror?.(e);
  return wrapper;
}

async function listAll(client) {
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}

async function listAndCall(client, revision) {
  const tools = await listAll(client);
  const names = tools.map((t) => t.name);
  assert.ok(names.includes("calculator"), `calculator not listed: ${names}`);
  assert.ok(names.includes("test_confirmed_action"), `test_confirmed_action not listed: ${names}`);
  const calculator = tools.find((t) => t.name === "calculator");
  if (revision === "2025-03-26") {
    assert.equal(calculator.outputSchema, undefined, "no output schemas in 2025-03-26");
  } else {
    assert.equal(calculator._meta?.["dev.toolgate/governance"]?.taskSupport, "forbidden");
  }
  const result = await client.callTool({ name: "calculator", arguments: { expression: "6 * 7" } });
  assert.equal(result.isError ?? false, false, JSON.stringify(result));
  if (revision === "2025-03-26") {
    assert.equal(result.structuredContent, undefined, JSON.stringify(result));
    assert.match(result.content[0].text, /42/);
  } else {
    assert.equal(result.structuredContent.result, 42, JSON.stringify(result));
  }
}

const sdks = {
  v1: {
    client: (capabilities = {}) => new ClientV1({ name: "interop-ts-v1", version: "1" }, { capabilities }),
    http: (url) => new HttpV1(url),
    stdio: () => new StdioV1({ command: BINARY, args: ["--stdio"], stderr: "ignore" }),
  },
  v2: {
    client: (capabilities = {}, options = {}) =>
      new ClientV2({ name: "interop-ts-v2", version: "1" }, { capabilities, ...options }),
    http: (url) => new HttpV2(url),
    stdio: () => new StdioV2({ command: BINARY, args: ["--stdio"], stderr: "ignore" }),
  },
};

/** A v1 or v2 client connected at `revision` (a legacy one: through `initialize`). */
async function connectLegacy(sdk, transport, revision, capabilities = {}) {
  const client =
    sdk === "v1"
      ? sdks.v1.client(capabilities)
      : sdks.v2.client(capabilities, { supportedProtocolVersions: [revision] });
  const tap = tapped(transport, sdk === "v1" ? revision : undefined);
  await client.connect(tap);
  assert.equal(tap.seen.answered, revision, `${sdk} asked for ${revision}`);
  return client;
}

for (const sdk of ["v1", "v2"]) {
  for (const revision of LEGACY) {
    test(`${sdk} over Streamable HTTP gets ${revision}, lists and calls`, async () => {
      const server = await startHttp();
      try {
        const client = await connectLegacy(sdk, sdks[sdk].http(server.url), revision);
        await listAndCall(client, revision);
        await client.close();
      } finally {
        await server.stop();
      }
    });
    test(`${sdk} over stdio gets ${revision}, lists and calls`, async () => {
      const client = await connectLegacy(sdk, sdks[sdk].stdio(), revision);
      try {
        await listAndCall(client, revision);
      } finally {
        await client.close();
      }
    });
  }
}

test("v2 over Streamable HTTP speaks 2026-07-28 through server/discover, lists and calls", async () => {
  const server = await startHttp();
  try {
    const client = sdks.v2.client({}, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
    await client.connect(sdks.v2.http(server.url));
    assert.equal(client.getNegotiatedProtocolVersion(), "2026-07-28");
    assert.equal(client.getProtocolEra(), "modern");
    await listAndCall(client, "2026-07-28");
    await client.close();
  } finally {
    await server.stop();
  }
});

test("v2 over stdio speaks 2026-07-28, lists and calls", async () => {
  const client = sdks.v2.client({}, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
  await client.connect(sdks.v2.stdio());
  try {
    assert.equal(client.getNegotiatedProtocolVersion(), "2026-07-28");
    await listAndCall(client, "2026-07-28");
  } finally {
    await client.close();
  }
});

/** Reads the task with `read` until it is `want` (10 s at most). */
async function until(read, want) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const task = await read();
    if (task.status === want) return task;
    assert.ok(Date.now() < deadline, `task never became ${want}: ${JSON.stringify(task)}`);
    await sleep(100);
  }
}

async function approve(base, id) {
  const r = await fetch(`${base}/v1/approvals/${id}/approve`, { method: "POST" });
  assert.equal(r.status, 200, await r.text());
}

/** The task flow through `request` (the client's own request method or a raw POST). */
async function taskFlow(base, request, label) {
  const created = await request("tools/call", {
    name: "test_confirmed_action",
    arguments: { what: `the ${label} thing` },
  });
  // (The v2 client lifts the wire's `resultType` discriminator out of the results it returns.)
  if ("resultType" in created || !label.startsWith("v2-2025")) {
    assert.equal(created.resultType, "task", JSON.stringify(created));
  }
  assert.equal(created.status, "input_required", JSON.stringify(created));
  const taskId = created.taskId;
  assert.match(taskId, /^apr_/);
  const waiting = await request("tasks/get", { taskId });
  assert.equal(waiting.status, "input_required", JSON.stringify(waiting));
  assert.match(waiting.statusMessage, new RegExp(`/v1/approvals/${taskId}/approve`));
  await approve(base, taskId);
  const done = await until(() => request("tasks/get", { taskId }), "completed");
  assert.equal(done.result.isError, false, JSON.stringify(done));
  assert.ok(JSON.stringify(done.result.content).includes(label), JSON.stringify(done));
}

for (const sdk of ["v1", "v2"]) {
  for (const revision of ["2025-11-25", "2025-06-18"]) {
    test(`${sdk} (${revision}) task-augmented call, approved over REST, then tasks/get has the result`, async () => {
      const server = await startHttp();
      try {
        const client = await connectLegacy(sdk, sdks[sdk].http(server.url), revision, {
          extensions: { [TASKS]: {} },
        });
        const request = (method, params) => client.request({ method, params }, anyResult);
        await taskFlow(server.base, request, `${sdk}-${revision}`);
        await client.close();
      } finally {
        await server.stop();
      }
    });
  }
}

test("v2 (2026-07-28) task-augmented call, approved over REST, then tasks/get has the result", async () => {
  const server = await startHttp();
  try {
    // The client discovers the server and lists tools; the tasks extension's requests, which
    // the v2 client does not send itself in the modern era (ext-tasks frames them for it), go
    // as the raw stateless requests that revision defines.
    const client = sdks.v2.client({ extensions: { [TASKS]: {} } }, {
      versionNegotiation: { mode: { pin: "2026-07-28" } },
    });
    await client.connect(sdks.v2.http(server.url));
    assert.ok(client.getServerCapabilities()?.extensions?.[TASKS], "the server offers tasks");
    let id = 0;
    const request = async (method, params) => {
      const body = {
        jsonrpc: "2.0",
        id: ++id,
        method,
        params: {
          ...params,
          _meta: {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { name: "interop-ts-v2", version: "1" },
            "io.modelcontextprotocol/clientCapabilities": { extensions: { [TASKS]: {} } },
          },
        },
      };
      const headers = {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
      };
      if (params.name ?? params.taskId) headers["mcp-name"] = params.name ?? params.taskId;
      const r = await fetch(server.url, { method: "POST", headers, body: JSON.stringify(body) });
      const text = await r.text();
      const json = text.trim().startsWith("{")
        ? JSON.parse(text)
        : JSON.parse(text.split("\n").filter((l) => l.startsWith("data:")).at(-1).slice(5));
      assert.equal(json.error, undefined, JSON.stringify(json));
      return json.result;
    };
    await taskFlow(server.base, request, "v2-2026-07-28");
    await client.close();
  } finally {
    await server.stop();
  }
});
