// An editor built on the official ACP TypeScript SDK's client, for tests/test_acp_editor.py.
// argv[2] is a JSON plan: {command: [...agent argv], cwd, terminal, buffers, answers, unstable, protocolVersion,
// steps: [...]}.
// `unstable` selects the SDK's entrypoint with v1's unstable methods (session/fork); stable otherwise.
// It keeps files as an editor does (its unsaved buffers first, saving to disk on a write), runs
// commands in terminals of its own when it offers them, answers permissions from `answers`,
// and prints on stdout, as JSON, everything it received.
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";

const plan = JSON.parse(process.argv[2]);
const { client, methods, ndJsonStream } = await import(
  plan.unstable ? "@agentclientprotocol/sdk/unstable" : "@agentclientprotocol/sdk");
const seen = { updates: [], responses: [], errors: [], writes: [], reads: [], permissions: [], terminals: [], timings: {} };
const buffers = plan.buffers || {};
const answers = [...(plan.answers || [])];
const terminals = new Map();
let waiters = [];

function wake() {
  waiters = waiters.filter((w) => !w());
}

function waitFor(predicate, ms = 120000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("timed out waiting")), ms);
    const check = () => (predicate() ? (clearTimeout(timer), resolve(), true) : false);
    if (!check()) waiters.push(check);
  });
}

const app = client({ name: "ketch-e2e-editor" })
  .onNotification(methods.client.session.update, ({ params }) => {
    seen.updates.push({ sessionId: params.sessionId, update: params.update });
    wake();
  })
  .onRequest(methods.client.session.requestPermission, async ({ params }) => {
    seen.permissions.push(params);
    wake();
    const optionId = answers.shift() || "reject_once";
    return { outcome: { outcome: "selected", optionId } };
  })
  .onRequest(methods.client.fs.readTextFile, ({ params }) => {
    seen.reads.push(params);
    const text = params.path in buffers ? buffers[params.path] : readFileSync(params.path, "utf8");
    const lines = text.split(/(?<=\n)/).slice((params.line || 1) - 1);
    return { content: (params.limit ? lines.slice(0, params.limit) : lines).join("") };
  })
  .onRequest(methods.client.fs.writeTextFile, ({ params }) => {
    seen.writes.push(params);
    buffers[params.path] = params.content;
    writeFileSync(params.path, params.content);
    return {};
  })
  .onRequest(methods.client.terminal.create, ({ params }) => {
    const id = `term-${terminals.size + 1}`;
    const env = { ...process.env };
    for (const v of params.env || []) env[v.name] = v.value;
    const child = spawn(params.command, params.args || [], { cwd: params.cwd || plan.cwd, env });
    const term = { id, params, output: "", exit: null, killed: false, released: false, child };
    term.done = new Promise((resolve) => child.on("close", (code, signal) => {
      term.exit = { exitCode: code, signal: signal || null };
      resolve();
    }));
    const take = (chunk) => {
      term.output += chunk.toString();
      wake();
    };
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    terminals.set(id, term);
    seen.terminals.push(term);
    wake();
    return { terminalId: id };
  })
  .onRequest(methods.client.terminal.output, ({ params }) => {
    const term = terminals.get(params.terminalId);
    term.polled = (term.polled || 0) + 1;
    return { output: term.output, truncated: false, exitStatus: term.exit };
  })
  .onRequest(methods.client.terminal.waitForExit, async ({ params }) => {
    const term = terminals.get(params.terminalId);
    await term.done;
    return term.exit;
  })
  .onRequest(methods.client.terminal.kill, ({ params }) => {
    const term = terminals.get(params.terminalId);
    term.killed = true;
    term.child.kill("SIGKILL");
    return {};
  })
  .onRequest(methods.client.terminal.release, ({ params }) => {
    const term = terminals.get(params.terminalId);
    term.released = true;
    if (term.exit === null) term.child.kill("SIGKILL");
    return {};
  });

const agent = spawn(plan.command[0], plan.command.slice(1), { cwd: plan.cwd, stdio: ["pipe", "pipe", "inherit"] });
const stream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const vars = {};
const sub = (value) => (typeof value === "string" && value.startsWith("$") ? vars[value.slice(1)] : value);

try {
  await app.connectWith(stream, async (cx) => {
    for (const [index, step] of plan.steps.entries()) {
      const request = (method, params) => cx.request(method, params);
      let result;
      try {
        switch (step.op) {
          case "initialize":
            result = await request(methods.agent.initialize, {
              protocolVersion: plan.protocolVersion || 1,
              clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: Boolean(plan.terminal) },
              clientInfo: { name: "ketch-e2e-editor", version: "1" },
            });
            seen.timings.initialized = performance.now();
            break;
          case "new":
            result = await request(methods.agent.session.new, { cwd: plan.cwd, mcpServers: [] });
            seen.timings.newAfterInitializeMs = performance.now() - seen.timings.initialized;
            vars[step.as || "sid"] = result.sessionId;
            break;
          case "prompt": {
            const prompt = step.blocks || [{ type: "text", text: step.text }];
            const pending = request(methods.agent.session.prompt, { sessionId: sub(step.session || "$sid"), prompt });
            if (step.touchWhen) {  // the user does something while the turn runs: a file appears
              await waitFor(() => seen.updates.some((u) => JSON.stringify(u.update).includes(step.touchWhen)));
              writeFileSync(step.touch, "");
            }
            if (step.cancelWhen) {
              await waitFor(() => seen.updates.some((u) => JSON.stringify(u.update).includes(step.cancelWhen)));
              await cx.notify(methods.agent.session.cancel, { sessionId: sub(step.session || "$sid") });
            }
            result = await pending;
            break;
          }
          case "load":
            result = await request(methods.agent.session.load, { sessionId: sub(step.id), cwd: plan.cwd, mcpServers: [] });
            break;
          case "resume":
            result = await request(methods.agent.session.resume, { sessionId: sub(step.id), cwd: plan.cwd, mcpServers: [] });
            break;
          case "list":
            result = await request(methods.agent.session.list, { cwd: plan.cwd });
            break;
          case "close":
            result = await request(methods.agent.session.close, { sessionId: sub(step.id) });
            break;
          case "fork":
            result = await request(methods.agent.session.fork, { sessionId: sub(step.id), cwd: plan.cwd, mcpServers: [] });
            if (step.as) vars[step.as] = result.sessionId;
            break;
          case "delete":
            result = await request(methods.agent.session.delete, { sessionId: sub(step.id) });
            break;
          case "setMode":
            result = await request(methods.agent.session.setMode, { sessionId: sub("$sid"), modeId: step.mode });
            break;
          case "setOption":
            result = await request(methods.agent.session.setConfigOption,
              { sessionId: sub("$sid"), configId: step.id, value: step.value });
            break;
          case "authenticate":
            result = await request(methods.agent.authenticate, { methodId: step.method });
            break;
          case "waitUpdate":
            await waitFor(() => seen.updates.some((u) => u.update.sessionUpdate === step.kind
              && (!step.contains || JSON.stringify(u.update).includes(step.contains))));
            break;
          case "fetch":
            await fetch(step.url);
            break;
          case "run": {  // a command the user runs in a terminal meanwhile (ketch auth login, say)
            const ran = spawnSync(step.argv[0], step.argv.slice(1), { cwd: plan.cwd, input: step.input || "" });
            result = { status: ran.status };
            break;
          }
          case "sleep":
            await new Promise((r) => setTimeout(r, step.ms));
            break;
          default:
            throw new Error(`no step ${step.op}`);
        }
        seen.responses.push({ index, op: step.op, result: result ?? null });
      } catch (error) {
        seen.errors.push({ index, op: step.op, code: error.code ?? null, message: String(error.message ?? error),
          data: error.data ?? null });
        if (!step.mayFail) throw error;
      }
    }
  });
} finally {
  for (const term of seen.terminals) delete term.child, delete term.done;
  agent.stdin.end();
  process.stdout.write(JSON.stringify(seen));
}
