/// The queue of one ``Lane`` in a ``BlockingPool``: first in, first out, with O(1) removal of any
/// element by the sequence number `append` gave it (for cancelling or moving a queued job).
///
/// A removed element leaves an empty slot that ``popFirst()`` skips; ``count`` does not include
/// those, and once no element is left the empty slots are dropped at once, so an idle queue
/// holds nothing. Not thread-safe: the pool keeps it behind its lock.
package struct LaneQueue<Element> {
    package init() {}

    private var slots = RingBuffer<Element?>()
    /// Sequence number of the slot at the front of `slots` (each slot keeps its number, so a
    /// removal finds its slot without a search).
    private var frontSequence: UInt64 = 0
    /// Elements queued, not counting the empty slots of removed ones.
    package private(set) var count = 0

    package var isEmpty: Bool { count == 0 }

    /// Adds `element` at the back; returns its sequence number.
    package mutating func append(_ element: Element) -> UInt64 {
        let sequence = frontSequence &+ UInt64(slots.count)
        slots.append(element)
        count += 1
        return sequence
    }

    /// Removes and returns the front element, skipping empty slots, or `nil` when empty.
    package mutating func popFirst() -> Element? {
        while let slot = slots.popFirst() {
            frontSequence &+= 1
            if let element = slot {
                count -= 1
                return element
            }
        }
        return nil
    }

    /// Removes and returns the element `append` numbered `sequence`, or `nil` when it has left
    /// the queue already. O(1), amortised.
    package mutating func remove(sequence: UInt64) -> Element? {
        let offset = sequence &- frontSequence
        guard offset < UInt64(slots.count), let element = slots[Int(offset)] else { return nil }
        slots[Int(offset)] = nil
        count -= 1
        if count == 0 {
            // Only empty slots are left: drop them (each was made once, so this is amortised O(1)).
            while slots.popFirst() != nil { frontSequence &+= 1 }
        }
        return element
    }
}
