// A node-redlock (v4) peer for the interop tests (see remote_test.go): it
// reads one command a line on stdin and answers one line on stdout.
//   try          -> "ok" | "busy"      (lock with retryCount 0)
//   lock         -> "ok <unix ns>"     (lock, retrying every 10ms)
//   unlock       -> "ok <unix ns>"     (unlock)
//   count N      -> "ok <n done>"      (N turns of the critical section)
//   quit
// Any failure answers "err <message>".
// argv: key ttl_ms host:port [host:port ...]; NODE_PATH finds redlock and ioredis.
'use strict';
const Redlock = require('redlock');
const Redis = require('ioredis');
const readline = require('readline');

const [key, ttlArg, ...addrs] = process.argv.slice(2);
const ttl = Number(ttlArg);
const clients = addrs.map((a) => {
  const [host, port] = a.split(':');
  return new Redis({ host, port: Number(port), lazyConnect: false });
});
const redlock = new Redlock(clients, { retryCount: 0 });
redlock.on('clientError', () => {});
const rdb = clients[0];
const counter = 'interop:counter:' + key, inside = 'interop:inside:' + key, overlaps = 'interop:overlaps:' + key;
let held = null;

const nowNs = () => (BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000)) * 1000n).toString();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function acquire(wait) {
  for (;;) {
    try {
      return await redlock.lock(key, ttl);
    } catch (e) {
      if (!(e instanceof Redlock.LockError)) throw e;
      if (!wait) return null;
      await sleep(10);
    }
  }
}

async function critical() {
  if ((await rdb.incr(inside)) !== 1) await rdb.incr(overlaps);
  const v = Number((await rdb.get(counter)) || 0);
  await sleep(1);
  await rdb.set(counter, String(v + 1));
  await rdb.decr(inside);
}

async function handle(cmd) {
  switch (cmd[0]) {
    case 'try': {
      const l = await acquire(false);
      if (!l) return 'busy';
      held = l;
      return 'ok';
    }
    case 'lock':
      held = await acquire(true);
      return 'ok ' + nowNs();
    case 'unlock':
      await held.unlock();
      held = null;
      return 'ok ' + nowNs();
    case 'count': {
      let done = 0;
      for (let i = 0; i < Number(cmd[1]); i++) {
        const l = await acquire(true);
        await critical();
        await l.unlock();
        done++;
      }
      return 'ok ' + done;
    }
    default:
      return 'err unknown command ' + cmd[0];
  }
}

const rl = readline.createInterface({ input: process.stdin });
const lines = rl[Symbol.asyncIterator]();
(async () => {
  for (;;) {
    const { value, done } = await lines.next();
    if (done) break;
    const cmd = value.trim().split(/\s+/);
    if (cmd[0] === '') continue;
    if (cmd[0] === 'quit') break;
    let out;
    try {
      out = await handle(cmd);
    } catch (e) {
      out = 'err ' + String(e && e.message || e).replace(/\n/g, ' ');
    }
    process.stdout.write(out + '\n');
  }
  clients.forEach((c) => c.disconnect());
})();
