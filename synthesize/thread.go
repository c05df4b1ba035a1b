package synthesize

import (
	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/profiles"
)

// MatcherView is an analysed thread as a profile's matchers see it: comm
// and process name cut to the kernel's 15 bytes. Synthesize's self-check
// and the canary's drift check both classify threads through it.
func MatcherView(t analyze.Thread) profiles.Thread {
	return profiles.Thread{Tid: int(t.Tid), Tgid: int(t.Tgid),
		Comm: kernelComm(t.Comm), Pcomm: kernelComm(t.Process), Cmdline: t.Cmdline}
}
