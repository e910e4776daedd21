// Kura: the object layer — model, container, context, managed objects, fetch
// requests, relationships — on KuraEngine's public API (DESIGN.md, "Layers").
//
// `import Kura` also brings in KuraEngine's public types (Value, KuraError,
// KuraPredicate, ...), which the object layer's API uses.

@_exported import KuraEngine
