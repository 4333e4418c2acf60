package store

// What the package's external tests reach that is not its API.
const ChunkGenerateName = chunkGenerateName
