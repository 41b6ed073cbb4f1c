//go:build !linux

package embed

// release does nothing here (see release_linux.go).
func release(data, keep []byte) {}
