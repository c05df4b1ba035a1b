//go:build !linux

package snapshot

// boottimeNow is 0 (not recorded) where there is no CLOCK_BOOTTIME: snapshots
// are taken on Linux nodes; other systems only read them.
func boottimeNow() int64 { return 0 }
