package target

import (
	"flag"
	"os"
	"testing"

	"temper.codes/temper-train/internal/kubetest"
)

// The pod tests run against a real etcd and kube-apiserver (internal/kubetest),
// started on the first test that needs them and stopped after the last.

// testAPI is the API server of this test binary.
var testAPI kubetest.Once

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	testAPI.Stop()
	os.Exit(code)
}

// needAPIServer returns the package's API server (see kubetest.Once.Need).
func needAPIServer(t *testing.T) *kubetest.Server {
	t.Helper()
	return testAPI.Need(t)
}
