package discovery

// For the external tests (resources_test.go).
var (
	ReadDoc  = readDoc
	DocNames = docNames
)
