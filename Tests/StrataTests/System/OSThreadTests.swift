import Synchronization
import CStrataLinux
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
import StrataTestSupport

@Suite struct OSThreadTests {
    /// What a thread learned about itself.
    struct Probe: Sendable, Equatable {
        /// Its kernel thread id.
        var tid: Int
        /// Whether it is detached (glibc's `pthread_getattr_np` reports the thread's current
        /// detach state).
        var isDetached: Bool
    }

    /// Called on the thread to examine: its kernel thread id (from `/proc/thread-self`, a
    /// link to `<pid>/task/<tid>`) and whether it is detached.
    static func probeCurrentThread() -> Probe {
        var buffer = [CChar](repeating: 0, count: 64)
        let length = readlink("/proc/thread-self", &buffer, buffer.count - 1)
        let link = length > 0 ? String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        let tid = Int(link.split(separator: "/").last ?? "") ?? -1
        var attributes = pthread_attr_t()
        guard strata_current_thread_attributes(&attributes) == 0 else { return Probe(tid: tid, isDetached: false) }
        defer { pthread_attr_destroy(&attributes) }
        var state: Int32 = -1
        pthread_attr_getdetachstate(&attributes, &state)
        return Probe(tid: tid, isDetached: state == Int32(PTHREAD_CREATE_DETACHED))
    }

    /// Whether the kernel still lists thread `tid` of this process.
    static func threadExists(_ tid: Int) -> Bool { access("/proc/self/task/\(tid)", F_OK) == 0 }

    /// Waits up to 10 s for every thread in `tids` to have exited.
    static func allExit(_ tids: [Int]) -> Bool { waitUntil { !tids.contains(where: threadExists) } != nil }

    // A joinable thread nobody joins keeps its 8 MiB stack mapped after it exits; a detached
    // one gives it back to the C library as it exits. So: the thread must be detached once its
    // `OSThread` is gone, and must then exit. (Measured on the thread itself, not on the
    // process's virtual size, which other suites running at the same time change.)
    @Test func anUnjoinedThreadIsDetachedWhenItsOSThreadGoesAwayAndThenExits() throws {
        let gate = Atomic<Bool>(false)
        let probe = Lock<Probe?>(nil)
        do {
            _ = try OSThread(name: "detach-check") {
                _ = waitUntil { gate.load(ordering: .acquiring) }  // until the OSThread is gone
                let found = Self.probeCurrentThread()
                probe.withLock { $0 = found }
            }
        }
        gate.store(true, ordering: .releasing)
        #expect(waitUntil { probe.withLock { $0 != nil } } != nil, "the thread never ran")
        let found = try #require(probe.withLock { $0 })
        #expect(found.tid > 0)
        #expect(found.isDetached, "nobody joins the thread, yet it is joinable: its stack would leak")
        #expect(Self.allExit([found.tid]), "thread \(found.tid) did not exit")
    }

    /// The probe itself: a plain joinable thread reports that it was not detached.
    @Test func theProbeTellsAJoinableThread() throws {
        let probe = Lock<Probe?>(nil)
        var thread = pthread_t()
        let box = Unmanaged.passRetained(ProbeBox { found in probe.withLock { $0 = found } }).toOpaque()
        #expect(
            pthread_create(
                &thread, nil,
                { raw in
                    let box = Unmanaged<ProbeBox>.fromOpaque(raw!).takeRetainedValue()
                    box.report(OSThreadTests.probeCurrentThread())
                    return nil
                }, box) == 0)
        pthread_join(thread, nil)
        let found = try #require(probe.withLock { $0 })
        #expect(found.tid > 0)
        #expect(!found.isDetached)
        #expect(Self.allExit([found.tid]))
    }

    final class ProbeBox {
        let report: (Probe) -> Void
        init(_ report: @escaping (Probe) -> Void) { self.report = report }
    }

    @Test func aPoolThatShutsDownLetsItsDetachedThreadsExit() throws {
        let width = 4
        let probes = Lock<[Probe]>([])
        let pool = try BlockingPool(width: width, name: "pool") {}
        // Once `init` has returned, the pool has let go of its `OSThread`s. One job per thread:
        // each waits until all have arrived, so no thread takes two.
        let arrived = Atomic<Int>(0)
        for _ in 0..<width {
            try pool.submit { _ in
                arrived.add(1, ordering: .relaxed)
                _ = waitUntil { arrived.load(ordering: .relaxed) == width }
                let found = Self.probeCurrentThread()
                probes.withLock { $0.append(found) }
            }
        }
        pool.shutdown()
        let found = probes.withLock { $0 }
        #expect(found.count == width)
        #expect(Set(found.map(\.tid)).count == width, "the jobs did not run on \(width) different threads")
        #expect(found.filter { !$0.isDetached }.isEmpty, "joinable pool threads would leak their stacks")
        #expect(Self.allExit(found.map(\.tid)), "pool threads still run after shutdown")
    }

    @Test(arguments: ["short", "exactly-15-byte", "pool-日本語日本語-0", "ééééééééé", String(repeating: "x", count: 40)])
    func namesAreCutAtACharacterBoundary(name: String) throws {
        let named = Atomic<Int>(0)
        let thread = try OSThread(name: name) {
            let got = currentThreadName()
            if name.hasPrefix(got) && got.utf8.count <= 15 && !got.isEmpty {
                named.store(1, ordering: .relaxed)
            } else {
                named.store(2, ordering: .relaxed)
            }
        }
        thread.join()
        #expect(named.load(ordering: .relaxed) == 1)
    }
}
