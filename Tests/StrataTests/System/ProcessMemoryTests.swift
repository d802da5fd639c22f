import Testing
@testable import Strata

@Suite("ProcessMemory")
struct ProcessMemoryTests {
    @Test("the kB lines of /proc/PID/status, tab-separated as the kernel writes them, in bytes")
    func parsesStatus() {
        let text =
            "Name:\tstrata\nVmHWM:\t  524288 kB\nVmRSS:\t  262144 kB\nRssAnon:\t  200000 kB\nRssFile:\t   62144 kB\nRssShmem:\t       0 kB\nThreads:\t12\n"
        let fields = ProcessMemory.parseStatus(text)
        #expect(fields["VmRSS"] == 262_144 << 10)
        #expect(fields["RssAnon"] == 200_000 << 10)
        #expect(fields["RssFile"] == 62_144 << 10)
        #expect(fields["Threads"] == nil)  // not a size
    }

    @Test("this process's own figures are read and add up")
    func current() {
        let memory = ProcessMemory.current()
        #expect(memory.resident > 0)
        #expect(memory.anonymous > 0 && memory.anonymous <= memory.resident)
        #expect(memory.anonymous + memory.fileBacked + memory.shared <= memory.resident + (1 << 20))
        #expect(memory.mallocTotal >= memory.mallocFree)
    }
}
