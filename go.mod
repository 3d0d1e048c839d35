module github.com/dbqueue/dbq

go 1.26.8

require github.com/pressly/goose/v3 v3.29.0

require (
	github.com/mfridman/interpolate v0.0.2 // indirect
	github.com/sethvargo/go-retry v0.5.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	modernc.org/sqlite v1.61.1 // indirect
)
