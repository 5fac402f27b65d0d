// CuratorDriver runs Apache Curator's lock recipes for zklock's interop
// tests, one command a line on stdin, one answer a line on stdout:
//
//	<tag> connect <connect string>
//	<tag> mutex|rw|latch|selector <id> <path>
//	<tag> sem <id> <path> <max leases>
//	<tag> lock|read|write|lease <id> <wait ms, or -1 for ever>   answers ok or timeout
//	<tag> unlock|unread|unwrite|unlease <id>                    answers ok
//	<tag> start|leader|close <id>   (a LeaderLatch: start, hasLeadership, close)
//	<tag> lead <id> <wait ms>       (a LeaderSelector: start, answer ok once it leads)
//	<tag> unlead <id>               (return from takeLeadership, and close)
//	<tag> nodes <id>                the participant nodes (of a mutex, read-write lock
//	                                or semaphore), comma separated
//
// Every answer starts with its command's tag; a failure answers
// "<tag> error <message>". Each lock runs its commands in order on a thread
// of its own (Curator's locks belong to the thread that took them), so a
// command that waits holds up only its own lock.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayDeque;
import java.util.Collection;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorDriver {
    static CuratorFramework client;
    static final Map<String, Object> locks = new ConcurrentHashMap<>();
    static final Map<String, ExecutorService> threads = new ConcurrentHashMap<>();
    static final Map<String, ArrayDeque<Lease>> leases = new ConcurrentHashMap<>();

    static class Selector {
        LeaderSelector s;
        final CountDownLatch led = new CountDownLatch(1);
        final CountDownLatch done = new CountDownLatch(1);
    }

    static synchronized void answer(String tag, String text) {
        System.out.println(tag + " " + text);
        System.out.flush();
    }

    static String run(String[] f) throws Exception {
        String cmd = f[1];
        switch (cmd) {
        case "connect":
            client = CuratorFrameworkFactory.newClient(f[2], 10000, 10000, new ExponentialBackoffRetry(100, 5));
            client.start();
            if (!client.blockUntilConnected(20, TimeUnit.SECONDS)) return "error not connected";
            return "ok";
        case "mutex": locks.put(f[2], new InterProcessMutex(client, f[3])); return "ok";
        case "rw": locks.put(f[2], new InterProcessReadWriteLock(client, f[3])); return "ok";
        case "sem":
            locks.put(f[2], new InterProcessSemaphoreV2(client, f[3], Integer.parseInt(f[4])));
            leases.put(f[2], new ArrayDeque<>());
            return "ok";
        case "latch": locks.put(f[2], new LeaderLatch(client, f[3])); return "ok";
        case "selector": {
            Selector sel = new Selector();
            sel.s = new LeaderSelector(client, f[3], new LeaderSelectorListenerAdapter() {
                @Override
                public void takeLeadership(CuratorFramework c) throws Exception {
                    sel.led.countDown();
                    sel.done.await();
                }
            });
            locks.put(f[2], sel);
            return "ok";
        }
        }
        Object l = locks.get(f[2]);
        if (l == null) return "error no lock " + f[2];
        long ms = f.length > 3 ? Long.parseLong(f[3]) : -1;
        switch (cmd) {
        case "lock": return took(((InterProcessMutex) l), ms);
        case "unlock": ((InterProcessMutex) l).release(); return "ok";
        case "read": return took(((InterProcessReadWriteLock) l).readLock(), ms);
        case "unread": ((InterProcessReadWriteLock) l).readLock().release(); return "ok";
        case "write": return took(((InterProcessReadWriteLock) l).writeLock(), ms);
        case "unwrite": ((InterProcessReadWriteLock) l).writeLock().release(); return "ok";
        case "lease": {
            InterProcessSemaphoreV2 s = (InterProcessSemaphoreV2) l;
            Lease got = ms < 0 ? s.acquire() : s.acquire(ms, TimeUnit.MILLISECONDS);
            if (got == null) return "timeout";
            leases.get(f[2]).addLast(got);
            return "ok";
        }
        case "unlease": {
            Lease got = leases.get(f[2]).pollFirst();
            if (got == null) return "error no lease held";
            got.close();
            return "ok";
        }
        case "nodes": {
            Collection<String> c;
            try {
            if (l instanceof InterProcessSemaphoreV2) c = ((InterProcessSemaphoreV2) l).getParticipantNodes();
            else if (l instanceof InterProcessMutex) c = ((InterProcessMutex) l).getParticipantNodes();
            else if (l instanceof InterProcessReadWriteLock) c = ((InterProcessReadWriteLock) l).writeLock().getParticipantNodes();
            else return "error no nodes for " + f[2];
            } catch (org.apache.zookeeper.KeeperException.NoNodeException e) {
                c = java.util.Collections.emptyList(); // the path is gone: no participants
            }
            return "ok " + String.join(",", c);
        }
        case "lead": {
            Selector sel = (Selector) l;
            sel.s.start();
            if (ms < 0) {
                sel.led.await();
                return "ok";
            }
            return sel.led.await(ms, TimeUnit.MILLISECONDS) ? "ok" : "timeout";
        }
        case "unlead": {
            Selector sel = (Selector) l;
            sel.done.countDown();
            sel.s.close();
            return "ok";
        }
        case "start": ((LeaderLatch) l).start(); return "ok";
        case "leader": return ((LeaderLatch) l).hasLeadership() ? "ok leader" : "ok follower";
        case "close": ((LeaderLatch) l).close(); return "ok";
        }
        return "error unknown command " + cmd;
    }

    static String took(InterProcessMutex m, long ms) throws Exception {
        boolean ok = ms < 0 ? acquireForEver(m) : m.acquire(ms, TimeUnit.MILLISECONDS);
        return ok ? "ok" : "timeout";
    }

    static boolean acquireForEver(InterProcessMutex m) throws Exception {
        m.acquire();
        return true;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split("\\s+");
            if (f.length < 2) continue;
            String key = f.length > 2 && !f[1].equals("connect") ? f[2] : "";
            ExecutorService ex = threads.computeIfAbsent(key, k -> Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r);
                t.setDaemon(true);
                return t;
            }));
            ex.submit(() -> {
                String out;
                try {
                    out = run(f);
                } catch (Throwable e) {
                    out = "error " + e.toString().replace('\n', ' ');
                }
                answer(f[0], out);
            });
        }
        if (client != null) client.close();
        System.exit(0);
    }
}
