package engine

// What the package's external tests reach that is not its API.
var StorageVersionHash = storageVersionHash
