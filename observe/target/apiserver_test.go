package target

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"temper.codes/temper-train/internal/need"
)

// The pod tests run against a real etcd and kube-apiserver, built by
// scripts/kube-bins.sh (make test runs it) and started once for the package
// by TestMain. Without the binaries they need them (internal/need: a skip on
// a developer machine, a failure under CI); `go test -short` skips them,
// saying so.

// Tokens of the static token file: admin is in system:masters (RBAC lets it
// do everything), nobody is authenticated but has no role at all.
const (
	adminToken  = "temper-admin-token"
	nobodyToken = "temper-nobody-token"
)

// apiServer is a running etcd + kube-apiserver pair.
type apiServer struct {
	dir              string // temporary directory: data, certs, keys, logs, kubeconfigs
	url              string
	adminKubeconfig  string
	nobodyKubeconfig string
	badKubeconfig    string // a token the server does not know
	client           *kubernetes.Clientset
	etcd, apiserver  *process
}

// testAPI is the API server of this test binary, or why there is none.
var (
	testAPI    *apiServer
	testAPIErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if testing.Short() {
		fmt.Fprintln(os.Stderr, "observe/target: -short: NOT starting etcd + kube-apiserver; every test of --pod resolution is SKIPPED")
		return m.Run()
	}
	start := time.Now()
	testAPI, testAPIErr = startAPIServer()
	if testAPIErr != nil {
		fmt.Fprintf(os.Stderr, "observe/target: no API server, the pod tests cannot run: %v\n", testAPIErr)
	} else {
		fmt.Fprintf(os.Stderr, "observe/target: kube-apiserver ready at %s after %v\n", testAPI.url, time.Since(start).Round(time.Millisecond))
		defer testAPI.stop()
	}
	return m.Run()
}

// missingBinError: etcd or kube-apiserver has not been built.
type missingBinError struct{ bin, dir string }

func (e *missingBinError) Error() string {
	return fmt.Sprintf("%s is missing in %s; build both with scripts/kube-bins.sh (make test does; ~7.5 min once, then cached) or point KUBE_BINS at a directory holding both", e.bin, e.dir)
}

// needAPIServer returns the package's API server, skips the test in -short
// mode, needs the binaries, and fails the test if the server could not be
// started.
func needAPIServer(t *testing.T) *apiServer {
	t.Helper()
	if testing.Short() {
		t.Skip("SKIPPED in -short mode: resolving pods against a real kube-apiserver (run without -short to test --pod)")
	}
	if missing := (*missingBinError)(nil); errors.As(testAPIErr, &missing) {
		need.Unmet(t, "etcd and kube-apiserver", testAPIErr.Error())
	}
	if testAPIErr != nil {
		t.Fatalf("this test needs a real Kubernetes API server: %v", testAPIErr)
	}
	return testAPI
}

// kubeBinsDir is where scripts/kube-bins.sh puts the binaries: $KUBE_BINS
// if set, else the directory the script prints with --dir (so the versions
// are written down in one place only).
func kubeBinsDir() (string, error) {
	if d := os.Getenv("KUBE_BINS"); d != "" {
		return d, nil
	}
	out, err := exec.Command("bash", "../../scripts/kube-bins.sh", "--dir").Output()
	if err != nil {
		return "", fmt.Errorf("scripts/kube-bins.sh --dir: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func startAPIServer() (_ *apiServer, err error) {
	bins, err := kubeBinsDir()
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bins, b)); err != nil {
			return nil, &missingBinError{b, bins}
		}
	}
	dir, err := os.MkdirTemp("", "target-apiserver-")
	if err != nil {
		return nil, err
	}
	s := &apiServer{dir: dir}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	s.url = fmt.Sprintf("https://127.0.0.1:%d", ports[2])

	s.etcd, err = startProcess(filepath.Join(bins, "etcd"), filepath.Join(dir, "etcd.log"),
		"--name=default",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(s.etcd, etcdURL+"/health", "", 30*time.Second); err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}

	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(adminToken+",admin,admin-uid,\"system:masters\"\n"+nobodyToken+",nobody,nobody-uid\n"), 0o600); err != nil {
		return nil, err
	}
	saKey, saPub, err := writeServiceAccountKey(dir)
	if err != nil {
		return nil, err
	}
	s.apiserver, err = startProcess(filepath.Join(bins, "kube-apiserver"), filepath.Join(dir, "kube-apiserver.log"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ports[2]),
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+tokens,
		"--authorization-mode=RBAC",
		"--service-account-key-file="+saPub,
		"--service-account-signing-key-file="+saKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.96.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
		"--endpoint-reconciler-type=none",
	)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(s.apiserver, s.url+"/readyz", adminToken, 60*time.Second); err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}

	for _, kc := range []struct {
		path  *string
		name  string
		token string
	}{
		{&s.adminKubeconfig, "admin.kubeconfig", adminToken},
		{&s.nobodyKubeconfig, "nobody.kubeconfig", nobodyToken},
		{&s.badKubeconfig, "bad.kubeconfig", "not-a-known-token"},
	} {
		*kc.path = filepath.Join(dir, kc.name)
		if err := writeKubeconfig(*kc.path, s.url, kc.token); err != nil {
			return nil, err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.adminKubeconfig)
	if err != nil {
		return nil, err
	}
	if s.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// stop stops the API server before etcd (stopped together, the API server
// can hang in its graceful shutdown waiting for etcd) and removes the files.
func (s *apiServer) stop() {
	if s.apiserver != nil {
		s.apiserver.stop(15 * time.Second)
	}
	if s.etcd != nil {
		s.etcd.stop(10 * time.Second)
	}
	os.RemoveAll(s.dir)
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// writeServiceAccountKey writes a fresh RSA key pair for signing service
// account tokens, which the API server requires even though nothing here
// uses one.
func writeServiceAccountKey(dir string) (keyPath, pubPath string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	keyPath, pubPath = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return "", "", err
	}
	return keyPath, pubPath, nil
}

// writeKubeconfig writes a kubeconfig for url with a bearer token. The
// server's certificate is self-signed by the API server at start, so it is
// not verified.
func writeKubeconfig(path, url, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: url, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	cfg.CurrentContext = "test"
	return clientcmd.WriteToFile(*cfg, path)
}

// process is a started server whose exit is watched.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func startProcess(bin, logPath string, args ...string) (*process, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// If the test binary is killed (e.g. by go test's timeout), take the
	// servers with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &process{name: filepath.Base(bin), cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// logTail is the end of the process's log, for error messages.
func (p *process) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		fmt.Fprintf(os.Stderr, "observe/target: %s did not stop within %v after SIGTERM; killing it\n", p.name, grace)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitHTTP polls url until it answers 200 OK, the process exits, or the
// timeout passes.
func waitHTTP(p *process, url, token string, timeout time.Duration) error {
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		last = err
		select {
		case <-p.done:
			return fmt.Errorf("exited (%v) before %s answered; log %s ends:\n%s", p.err, url, p.log, p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v (last: %v); log %s ends:\n%s", url, timeout, last, p.log, p.logTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
