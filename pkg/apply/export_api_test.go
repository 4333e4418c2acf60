package apply

// What the package's external tests reach that is not its API.
var (
	SyncTimeout   = &syncTimeout
	PrepareShared = prepareShared
	WithLive      = withLive
)
