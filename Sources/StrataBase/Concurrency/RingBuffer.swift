/// A first-in, first-out queue in a power-of-two ring of slots: O(1) append and removal at the
/// front, and a slot is emptied the moment its element leaves, so the queue never keeps a
/// removed element alive (an array with a moving head index would, until it compacts).
///
/// Used by ``LaneQueue`` for a ``BlockingPool``'s jobs. Grows by doubling when full; never shrinks.
package struct RingBuffer<Element> {
    private var slots: [Element?] = []
    /// Index in `slots` of the first element.
    private var head = 0
    /// Number of elements.
    package private(set) var count = 0

    package init() {}

    package var isEmpty: Bool { count == 0 }

    /// Adds `element` at the back.
    package mutating func append(_ element: Element) {
        if count == slots.count { grow() }
        slots[(head + count) & (slots.count - 1)] = element
        count += 1
    }

    /// Removes and returns the front element (its slot no longer refers to it), or `nil`
    /// when empty.
    package mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = slots[head].take()
        head = (head + 1) & (slots.count - 1)
        count -= 1
        return element
    }

    /// The element `offset` places behind the front (`0 ..< count`).
    package subscript(offset: Int) -> Element {
        get {
            precondition(offset >= 0 && offset < count, "ring buffer offset out of range")
            return slots[(head + offset) & (slots.count - 1)]!
        }
        set {
            precondition(offset >= 0 && offset < count, "ring buffer offset out of range")
            slots[(head + offset) & (slots.count - 1)] = newValue
        }
    }

    private mutating func grow() {
        var larger = [Element?](repeating: nil, count: Swift.max(16, slots.count * 2))
        for offset in 0..<count { larger[offset] = slots[(head + offset) & (slots.count - 1)].take() }
        slots = larger
        head = 0
    }
}
