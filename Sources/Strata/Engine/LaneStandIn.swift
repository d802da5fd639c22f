// Temporary until the lanes branch lands (it defines Lane beside BlockingPool).
public enum Lane: Sendable, Hashable, Comparable { case prefetch, urgent }
