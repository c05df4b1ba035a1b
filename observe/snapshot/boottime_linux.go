package snapshot

import "golang.org/x/sys/unix"

// boottimeNow reads CLOCK_BOOTTIME, the clock of bpf_ktime_get_boot_ns and
// so of observe's trace timestamps (0 if it cannot be read).
func boottimeNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}
