package inventory

// What the package's external tests reach that is not its API.
const (
	ObjectsKey     = objectsKey
	ObjectsGzipKey = objectsGzipKey
)
