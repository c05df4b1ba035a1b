package machine

import (
	"os"
	"testing"
)

func TestIdentify(t *testing.T) {
	id := Identify(Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1})
	host, _ := os.Hostname()
	if id.Shape != "2cpu-2c-smt1" || id.Hostname != host || id.Kernel == "" {
		t.Errorf("Identify = %+v, want shape 2cpu-2c-smt1, host %q and a kernel release", id, host)
	}
}
