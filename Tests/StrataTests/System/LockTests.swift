import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata

@Suite struct LockTests {
    /// Four threads add 100 000 each under the lock: the total is exact only if the lock excludes.
    @Test func excludesAcrossThreads() throws {
        let lock = Lock(0)
        let perThread = 100_000
        let threads = try (0..<4).map { _ in
            try OSThread(name: "lock-test") { for _ in 0..<perThread { lock.withLock { $0 += 1 } } }
        }
        for thread in threads { thread.join() }
        #expect(lock.withLock { $0 } == 4 * perThread)
    }

    @Test func tryLockFailsWhileHeld() throws {
        let lock = Lock("state")
        let entered = Atomic<Bool>(false)
        let release = Atomic<Bool>(false)
        let holder = try OSThread(name: "holder") {
            lock.withLock { _ in
                entered.store(true, ordering: .releasing)
                while !release.load(ordering: .acquiring) { usleep(100) }
            }
        }
        for _ in 0..<50_000 where !entered.load(ordering: .acquiring) { usleep(100) }
        let holderEntered = entered.load(ordering: .acquiring)
        #expect(holderEntered)
        #expect(lock.withLockIfAvailable { $0 } == nil)
        release.store(true, ordering: .releasing)
        holder.join()
        #expect(lock.withLockIfAvailable { $0 } == "state")
    }

    /// A waiter sleeps until the predicate holds; each signal hands over one item.
    @Test func waitingUntilSeesEverySignalledChange() throws {
        let queue = Lock<[Int]>([])
        let taken = Lock<[Int]>([])
        let consumers = try (0..<3).map { _ in
            try OSThread(name: "consumer") {
                while true {
                    let item = queue.withLock(waitingUntil: { !$0.isEmpty }) { $0.removeFirst() }
                    if item < 0 { return }
                    taken.withLock { $0.append(item) }
                }
            }
        }
        for item in 0..<1000 {
            queue.withLock { $0.append(item) }
            queue.signal()
        }
        queue.withLock { $0 += [-1, -1, -1] }
        queue.broadcast()
        for consumer in consumers { consumer.join() }
        #expect(taken.withLock { $0.sorted() } == Array(0..<1000))
    }

    @Test func releasesItsState() {
        final class Probe {}
        weak var weakProbe: Probe?
        do {
            let probe = Probe()
            weakProbe = probe
            let lock = Lock(probe)
            _ = lock.withLock { $0 }
        }
        #expect(weakProbe == nil)
    }
}

@Suite struct SyscallFaultsTests {
    @Test func injectedErrnoFailsOnlyMatchingCallsAndPaths() throws {
        let scratch = ScratchDirectory()
        try FileDescriptor.makeDirectories(scratch.path)
        let file = try FileDescriptor(open: scratch.path + "/a", flags: O_CREAT | O_RDWR)
        let other = try FileDescriptor(open: scratch.parent + "/b", flags: O_CREAT | O_RDWR)
        let bytes: [UInt8] = [1, 2, 3]
        let rule = SyscallFaults.Rule(call: "pwrite", pathContains: scratch.path, errno: ENOSPC, times: 1, after: 1)
        let (_, failures) = SyscallFaults.injecting(rule) {
            // The first matching call passes (after: 1), the second fails, the third passes (times: 1).
            #expect(throws: Never.self) { try bytes.withUnsafeBytes { try file.write($0, at: 0) } }
            #expect(throws: SystemCallError(call: "pwrite", path: scratch.path + "/a", errno: ENOSPC)) {
                try bytes.withUnsafeBytes { try file.write($0, at: 0) }
            }
            #expect(throws: Never.self) { try bytes.withUnsafeBytes { try file.write($0, at: 0) } }
            #expect(throws: Never.self) { try bytes.withUnsafeBytes { try other.write($0, at: 0) } }
        }
        #expect(failures == 1)
        #expect(throws: Never.self) { try bytes.withUnsafeBytes { try file.write($0, at: 0) } }
    }
}
