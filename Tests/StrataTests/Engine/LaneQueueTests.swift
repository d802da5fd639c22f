import Testing
@testable import Strata

@Suite struct LaneQueueTests {
    final class Box {}

    @Test func removalBySequenceLeavesTheOthersInOrder() {
        var queue = LaneQueue<Int>()
        let sequences = (0..<40).map { queue.append($0) }
        #expect(Set(sequences).count == 40)
        for i in stride(from: 1, to: 40, by: 3) { #expect(queue.remove(sequence: sequences[i]) == i) }
        #expect(queue.remove(sequence: sequences[1]) == nil, "removed twice")
        let removed = Set(stride(from: 1, to: 40, by: 3))
        #expect(queue.count == 40 - removed.count)
        var drained: [Int] = []
        while let next = queue.popFirst() { drained.append(next) }
        #expect(drained == (0..<40).filter { !removed.contains($0) })
        #expect(queue.isEmpty && queue.count == 0)
        #expect(queue.remove(sequence: sequences[0]) == nil, "an element that left by popFirst was removed")
    }

    /// Removing the last element drops the empty slots before it; sequence numbers given out
    /// afterwards still find their elements.
    @Test func anEmptiedQueueKeepsNumberingAcrossWrapAround() {
        var queue = LaneQueue<Int>()
        var next = 0
        for round in 0..<30 {
            let sequences = (0..<(round % 9 + 1)).map { _ in
                defer { next += 1 }
                return queue.append(next)
            }
            let values = Array((next - sequences.count)..<next)
            if round % 2 == 0 {
                // Remove every element from the back: the queue ends empty through removals.
                for (sequence, value) in zip(sequences, values).reversed() { #expect(queue.remove(sequence: sequence) == value) }
            } else {
                #expect(queue.remove(sequence: sequences[0]) == values[0])
                for value in values.dropFirst() { #expect(queue.popFirst() == value) }
            }
            #expect(queue.isEmpty)
            #expect(queue.popFirst() == nil)
        }
    }

    @Test func aRemovedElementIsNoLongerReferenced() {
        var queue = LaneQueue<Box>()
        weak var removed: Box?
        let sequence: UInt64
        do {
            let box = Box()
            removed = box
            sequence = queue.append(box)
            _ = queue.append(Box())
        }
        #expect(removed != nil)
        _ = queue.remove(sequence: sequence)
        #expect(removed == nil)
        #expect(queue.count == 1)
    }
}
