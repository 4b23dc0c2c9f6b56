package store

// Format is one on-disk or stored format: the version this build writes
// and every version it reads. Each layer that stores bytes lists its own
// (engine.Formats, the etcd store's, receipt's); docs/upgrading.md lists
// them, idemd -version prints them, and a fixture of every version read
// stays under the owner's testdata.
type Format struct {
	Name   string
	Writes string
	Reads  []string
}
