// One Node process that runs a test process's Workers, each as `wrangler dev` runs it.
//
// `wrangler dev` is wrangler's CLI around its dev server API: it parses its flags into a
// `DevEnv` configuration (`startDev` → `setupDevEnv` in wrangler's source) and starts it, as
// `unstable_startWorker` does. Each Worker the tests started used to be a Node of its own, and
// 2.4 s of its 2.9 s of CPU to answer were Node loading and compiling wrangler's 10 MB bundle
// and warming it up, paid again for each of the suite's ~95 Workers. Here wrangler is loaded once
// and each Worker is a `DevEnv` with the configuration `wrangler dev`'s flags give it (0.3 s of
// Node's CPU). The runtime is the same: a `workerd` for wrangler's proxy Worker and one for ours,
// with the same bindings, local state and logs.
//
// Protocol (tests/wrangler_host.rs): one JSON command per line on stdin; each answer is one line
// on stdout after ANSWER (anything else on stdout is not an answer). Commands:
// - {"id", "op": "start", "worker", "port", "inspectorPort", "persist", "log", "vars",
//   "testScheduled"}: starts a Worker (with no DevTools inspector when `inspectorPort` is
//   null), answered once wrangler's proxy listens on `port` (as `wrangler dev` is then "Ready";
//   the Worker's own runtime may still be starting), or with the error that stopped it (a port
//   another process took);
// - {"id", "op": "runtimes", "worker"}: the pids of the Worker's runtimes (`workerd`) so far;
// - {"id", "op": "stop", "worker"}: stops it, answered once its runtimes have exited.
// Every line wrangler logs for a Worker (its request lines, the Worker's console, "Ready on")
// goes to that Worker's `log` file, as `wrangler dev`'s output did; a line that belongs to no
// Worker goes to stderr. When stdin closes (the test process ended), every Worker is stopped.
import { AsyncLocalStorage } from "node:async_hooks";
import childProcess from "node:child_process";
import fs from "node:fs";
import readline from "node:readline";
import util from "node:util";

const ANSWER = "\u0001wrangler-host ";

// The Worker whose work is running: the logs and child processes made under it are its own.
// Node carries it through promises, timers and the callbacks of the pipes and sockets made
// under it (wrangler carries its own log level the same way).
const current = new AsyncLocalStorage();

for (const level of ["log", "info", "warn", "error", "debug", "trace"]) {
  console[level] = (...args) => {
    const worker = current.getStore();
    if (worker && worker.logFd !== undefined) {
      fs.writeSync(worker.logFd, `${util.format(...args)}\n`);
    } else {
      const line = util.format(...args);
      // Wrangler's exit hook names its debug log once anything was logged as an error; the host
      // removes that log when it ends (tests/wrangler_host.rs).
      if (!line.includes("Logs were written to") && !isRebuildOfAStoppedWorker(line)) {
        // stdout carries the answers.
        process.stderr.write(`${line}\n`);
      }
    }
  };
}

// A stopped Worker's bundle folder (.wrangler/tmp/bundle-*) is removed before its esbuild
// watcher is disposed (wrangler's `bundleWorker`), and that watcher, seeing its input removed,
// may rebuild once in between and log "Build failed ... Could not resolve
// .../bundle-*/middleware-loader.entry.ts". `wrangler dev` logs the same as it exits; nothing
// runs that build. Recognised by the folder it names being gone.
function isRebuildOfAStoppedWorker(line) {
  const missing = /Could not resolve "([^"]*[\\/]\.wrangler[\\/]tmp[\\/]bundle-[^"\\/]+)[\\/][^"]*"/.exec(line);
  return missing !== null && !fs.existsSync(missing[1]);
}

const spawn = childProcess.spawn;
childProcess.spawn = function spawnAndRecord(...args) {
  const child = spawn.apply(this, args);
  const worker = current.getStore();
  if (worker && child.pid !== undefined && String(args[0]).includes("workerd")) {
    worker.runtimes.push(child);
    // A start still running when its Worker was stopped (a test that failed meanwhile) must
    // not leave a runtime behind.
    if (worker.stopped) child.kill("SIGKILL");
  }
  return child;
};

// Loaded after the hooks above, so Miniflare's own references go through them.
const { unstable_DevEnv: DevEnv } = await import(
  new URL("../../node_modules/wrangler/wrangler-dist/cli.js", import.meta.url)
);

const workers = new Map();

function answer(id, fields) {
  process.stdout.write(`${ANSWER}${JSON.stringify({ id, ...fields })}\n`);
}

function describe(error) {
  if (error instanceof Error) {
    return error.cause ? `${error.stack}\ncaused by: ${describe(error.cause)}` : String(error.stack);
  }
  return util.inspect(error);
}

// The configuration `wrangler dev` gives a DevEnv for the flags the tests pass it
// (`--ip 127.0.0.1 --port P --inspector-port Q --persist-to DIR --log-level log
// [--test-scheduled] --var NAME:value...`), less the dev registry (the shared folder through
// which Workers started apart find each other's service bindings: ours has none). Its watchers
// are `wrangler dev`'s, which no option of a DevEnv turns off: a Worker reloads when
// wrangler.toml, its bundle's inputs (edge-api/build/, edge-api/js/) or the explorer's assets
// (edge-api/public/) change, so nothing may rewrite those while Workers run
// (scripts/lib/files.sh writes only what changed).
function devConfig(command) {
  return {
    config: "wrangler.toml",
    bindings: Object.fromEntries(
      Object.entries(command.vars).map(([name, value]) => [name, { type: "plain_text", value }]),
    ),
    dev: {
      remote: false,
      server: { hostname: "127.0.0.1", port: command.port },
      // No inspector unless a profiler will attach: with one, wrangler's inspector proxy
      // forwards every console line of the Worker to Node as a debug line, which wrangler
      // formats and appends to its debug log (about 2 ms of CPU a line across Node and the
      // proxy's runtime, and the Worker logs a line for most requests: docs/testing.md).
      inspector:
        command.inspectorPort === null ? false : { hostname: "127.0.0.1", port: command.inspectorPort },
      persist: command.persist,
      testScheduled: command.testScheduled,
      logLevel: "log",
      liveReload: false,
    },
  };
}

async function start(command) {
  const worker = {
    logFd: fs.openSync(command.log, "w"),
    runtimes: [],
    devEnv: undefined,
    stopped: false,
  };
  workers.set(command.worker, worker);
  let answered = false;
  const fail = async (error) => {
    if (answered) return;
    answered = true;
    console.error(`wrangler failed to start the Worker: ${describe(error)}`);
    await stop(command.worker);
    answer(command.id, { ok: false, error: describe(error) });
  };
  await current.run(worker, async () => {
    try {
      worker.devEnv = new DevEnv();
      // What `wrangler dev` ends on (a port taken, a runtime that failed) comes as an error
      // event; one without a listener would end this process, and every Worker with it.
      worker.devEnv.on("error", (error) => {
        if (answered) {
          console.error(`wrangler: ${describe(error)}`);
        } else {
          void fail(error);
        }
      });
      const started = await worker.devEnv.startWorker(devConfig(command));
      await started.ready;
      if (!answered) {
        answered = true;
        answer(command.id, { ok: true });
      }
    } catch (error) {
      await fail(error);
    }
  });
}

async function stop(name) {
  const worker = workers.get(name);
  if (!worker) return;
  workers.delete(name);
  worker.stopped = true;
  await current.run(worker, async () => {
    try {
      await worker.devEnv?.teardown();
    } catch (error) {
      console.error(`stopping the Worker: ${describe(error)}`);
    }
  });
  // A runtime that outlived its teardown would hold the Worker's ports and state.
  for (const runtime of worker.runtimes) {
    if (runtime.exitCode === null && runtime.signalCode === null) runtime.kill("SIGKILL");
  }
  fs.closeSync(worker.logFd);
  worker.logFd = undefined;
}

process.on("uncaughtException", (error) => console.error(`uncaught: ${describe(error)}`));
process.on("unhandledRejection", (error) => console.error(`unhandled rejection: ${describe(error)}`));

const commands = readline.createInterface({ input: process.stdin });
commands.on("line", (line) => {
  const command = JSON.parse(line);
  if (command.op === "start") {
    void start(command);
  } else if (command.op === "runtimes") {
    const runtimes = workers.get(command.worker)?.runtimes ?? [];
    answer(command.id, { ok: true, runtimes: runtimes.map((runtime) => runtime.pid) });
  } else if (command.op === "stop") {
    void stop(command.worker).then(() => answer(command.id, { ok: true }));
  } else {
    answer(command.id, { ok: false, error: `unknown op ${command.op}` });
  }
});
commands.on("close", async () => {
  await Promise.allSettled([...workers.keys()].map(stop));
  // Wrangler's debug log, one for all the Workers (tests/wrangler_host.rs names it).
  if (process.env.WRANGLER_LOG_PATH) fs.rmSync(process.env.WRANGLER_LOG_PATH, { force: true });
  process.exit(0);
});
