# A redis-py Lock peer for the interop tests (see remote_test.go): it reads
# one command a line on stdin and answers one line on stdout.
#   try          -> "ok" | "busy"      (acquire(blocking=False))
#   lock         -> "ok <unix ns>"     (acquire(), polling every 10ms)
#   unlock       -> "ok <unix ns>"     (release())
#   count N      -> "ok <n done>"      (N turns of the critical section)
#   quit
# Any failure answers "err <message>".
# argv: host port key ttl_ms
import sys
import time

import redis

host, port, key, ttl_ms = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
r = redis.Redis(host=host, port=port)
counter, inside, overlaps = "interop:counter:" + key, "interop:inside:" + key, "interop:overlaps:" + key
held = None


def new_lock():
    return r.lock(key, timeout=ttl_ms / 1000.0, sleep=0.01, thread_local=False)


def critical():
    if r.incr(inside) != 1:
        r.incr(overlaps)
    v = int(r.get(counter) or 0)
    time.sleep(0.001)
    r.set(counter, v + 1)
    r.decr(inside)


for line in sys.stdin:
    cmd = line.split()
    try:
        if not cmd:
            continue
        if cmd[0] == "quit":
            break
        if cmd[0] == "try":
            lk = new_lock()
            if lk.acquire(blocking=False):
                held = lk
                print("ok", flush=True)
            else:
                print("busy", flush=True)
        elif cmd[0] == "lock":
            lk = new_lock()
            if not lk.acquire(blocking=True):
                raise RuntimeError("acquire returned False")
            held = lk
            print("ok", time.time_ns(), flush=True)
        elif cmd[0] == "unlock":
            held.release()
            held = None
            print("ok", time.time_ns(), flush=True)
        elif cmd[0] == "count":
            done = 0
            for _ in range(int(cmd[1])):
                lk = new_lock()
                if not lk.acquire(blocking=True):
                    raise RuntimeError("acquire returned False")
                critical()
                lk.release()
                done += 1
            print("ok", done, flush=True)
        else:
            print("err unknown command", cmd[0], flush=True)
    except Exception as e:  # the test reads the message
        print("err", type(e).__name__, str(e).replace("\n", " "), flush=True)
