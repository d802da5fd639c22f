import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The window, probation and protected lists of a ``TinyLFUCore``.
extension TinyLFUCore {
    // MARK: lists

    @inlinable @inline(__always)
    package mutating func withList<R>(_ queue: Queue, _ body: (inout List) -> R) -> R {
        switch queue {
        case .window: return body(&window)
        case .probation: return body(&probation)
        case .protected: return body(&protected)
        }
    }

    // Lists are circular (the tail's next is the head), so that giving the head a second
    // pass — CLOCK's "advance the hand" — is O(1) and writes no node.

    @inlinable
    package mutating func unlink(_ i: Int32) {
        let prev = nodes[Int(i)].prev, next = nodes[Int(i)].next, cost = nodes[Int(i)].cost
        let queue = nodes[Int(i)].queue
        let alone = next == i
        if !alone {
            nodes[Int(prev)].next = next
            nodes[Int(next)].prev = prev
        }
        withList(queue) { list in
            if alone {
                list.head = -1
                list.tail = -1
            } else {
                if list.head == i { list.head = next }
                if list.tail == i { list.tail = prev }
            }
            list.count -= 1
            list.cost -= cost
        }
    }

    @inlinable
    package mutating func append(_ i: Int32, to queue: Queue) {
        let cost = nodes[Int(i)].cost
        let (oldHead, oldTail) = withList(queue) { list -> (Int32, Int32) in
            let ends = (list.head, list.tail)
            if list.tail < 0 { list.head = i }
            list.tail = i
            list.count += 1
            list.cost += cost
            return ends
        }
        if oldTail >= 0 {
            nodes[Int(oldTail)].next = i
            nodes[Int(oldHead)].prev = i
            nodes[Int(i)].prev = oldTail
            nodes[Int(i)].next = oldHead
        } else {
            nodes[Int(i)].prev = i
            nodes[Int(i)].next = i
        }
        nodes[Int(i)].queue = queue
    }

    /// Moves slot `i` to the tail of `queue` (the caller has taken its referenced bit).
    @inlinable
    package mutating func move(_ i: Int32, to queue: Queue) {
        if nodes[Int(i)].queue == queue, withList(queue, { $0.tail }) == i { return }
        unlink(i)
        append(i, to: queue)
    }

    /// Makes the head the tail (a second chance; the caller has taken its referenced bit).
    @inlinable
    package mutating func rotate(_ queue: Queue) {
        let h = withList(queue) { $0.head }
        let n = nodes[Int(h)].next
        withList(queue) { list in
            list.head = n
            list.tail = h
        }
    }

    /// The entry after `i` in its list, or -1 after the tail.
    @inlinable
    package func successor(_ i: Int32) -> Int32 {
        let isTail: Bool
        switch nodes[Int(i)].queue {
        case .window: isTail = window.tail == i
        case .probation: isTail = probation.tail == i
        case .protected: isTail = protected.tail == i
        }
        return isTail ? -1 : nodes[Int(i)].next
    }
}
