module github.com/ownerjournal/ownerjournal

go 1.26.8

require (
	github.com/gofrs/flock v0.13.2
	github.com/google/renameio/v2 v2.0.2
	github.com/stretchr/testify v1.12.1
	golang.org/x/sys v0.50.0
)
