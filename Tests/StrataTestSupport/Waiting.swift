import Foundation

/// Polls `condition` (every 2 ms, at most `seconds`); returns whether it became true. The
/// bound is generous: on a 2-core machine running the suite in parallel (and under the
/// sanitizers) the cooperative pool's two threads can be busy with synchronous tests for over
/// a minute (seen on a slow day of the VM), and this poll waits behind them.
package func eventually(_ seconds: Double = 180, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return condition()
}
