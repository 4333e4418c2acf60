package render

// What the package's external tests reach that is not its API.
const MaxArchiveDepth = maxArchiveDepth
