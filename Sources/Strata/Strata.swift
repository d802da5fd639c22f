// The `Strata` product is the library's four layers (docs/Architecture.md, "Layers"):
// an embedder's `import Strata` brings all of them.
@_exported import StrataBase
@_exported import StrataCodecs
@_exported import StrataEngine
@_exported import StrataTiers
