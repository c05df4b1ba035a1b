// Package kubetest starts a real etcd and kube-apiserver for tests that
// talk to Kubernetes (target's --pod resolution, kubejob's Jobs).
// The binaries are built by scripts/kube-bins.sh (make test runs it); a
// test without them needs them (internal/need: a skip on a developer
// machine, a failure under CI), and `go test -short` skips it, saying so.
//
// The server authenticates static tokens (an admin in system:masters, and
// an authenticated user with no role at all) and service account tokens,
// which it also issues (TokenRequest); authorization is RBAC only, so what
// a user or a service account may do is what its roles say.
package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/testkit"
)

// Once starts the server of a test binary on first use and keeps it for
// the other tests; TestMain calls Stop after m.Run. The zero value is ready.
type Once struct {
	once sync.Once
	s    *Server
	err  error
}

// Need returns the test binary's API server, starting it on the first
// call. It skips the test in -short mode, needs the binaries, and fails the
// test if the server could not be started.
func (o *Once) Need(t *testing.T) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("SKIPPED in -short mode: this test needs a real kube-apiserver (run without -short)")
	}
	o.once.Do(func() {
		start := time.Now()
		o.s, o.err = Start()
		if o.err == nil {
			fmt.Fprintf(os.Stderr, "kubetest: kube-apiserver ready at %s after %v\n", o.s.URL, time.Since(start).Round(time.Millisecond))
		}
	})
	if missing := (*MissingBinError)(nil); errors.As(o.err, &missing) {
		need.Unmet(t, "etcd and kube-apiserver", o.err.Error())
	}
	if o.err != nil {
		t.Fatalf("this test needs a real Kubernetes API server: %v", o.err)
	}
	return o.s
}

// Stop stops the server if one was started.
func (o *Once) Stop() {
	if o.s != nil {
		o.s.Stop()
	}
}

// Kubeconfig writes a kubeconfig named name into the server's directory
// that authenticates with token (the server's certificate is not verified,
// as in the other kubeconfigs here).
func (s *Server) Kubeconfig(name, token string) (string, error) {
	path := filepath.Join(s.Dir, name)
	return path, writeKubeconfig(path, s.URL, token)
}

// Tokens of the static token file: admin is in system:masters (RBAC lets it
// do everything), nobody is authenticated but has no role at all.
const (
	AdminToken  = "temper-admin-token"
	NobodyToken = "temper-nobody-token"
)

// Server is a running etcd + kube-apiserver pair.
type Server struct {
	Dir              string // temporary directory: data, certs, keys, logs, kubeconfigs
	URL              string // https://127.0.0.1:PORT
	Port             int
	CACert           string // the PEM file that verifies the server's certificate
	AdminKubeconfig  string // system:masters
	NobodyKubeconfig string // authenticated, no role
	BadKubeconfig    string // a token the server does not know
	Client           *kubernetes.Clientset
	etcd, apiserver  *process
}

// MissingBinError: etcd or kube-apiserver has not been built.
type MissingBinError struct{ bin, dir string }

func (e *MissingBinError) Error() string {
	return fmt.Sprintf("%s is missing in %s; build both with scripts/kube-bins.sh (make test does; ~7.5 min once, then cached) or point KUBE_BINS at a directory holding both", e.bin, e.dir)
}

// kubeBinsDir is where scripts/kube-bins.sh puts the binaries: $KUBE_BINS
// if set, else the directory the script prints with --dir (so the versions
// are written down in one place only).
func kubeBinsDir() (string, error) {
	if d := os.Getenv("KUBE_BINS"); d != "" {
		return d, nil
	}
	root, err := testkit.RepoRoot()
	if err != nil {
		return "", err
	}
	out, err := exec.Command("bash", filepath.Join(root, "scripts", "kube-bins.sh"), "--dir").Output()
	if err != nil {
		return "", fmt.Errorf("scripts/kube-bins.sh --dir: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func Start() (_ *Server, err error) {
	bins, err := kubeBinsDir()
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bins, b)); err != nil {
			return nil, &MissingBinError{b, bins}
		}
	}
	dir, err := os.MkdirTemp("", "target-apiserver-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	ports, err := testkit.FreePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	s.Port = ports[2]
	s.URL = fmt.Sprintf("https://127.0.0.1:%d", s.Port)

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
	if err := os.WriteFile(tokens, []byte(AdminToken+",admin,admin-uid,\"system:masters\"\n"+NobodyToken+",nobody,nobody-uid\n"), 0o600); err != nil {
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
		// As kubeadm and most clusters have it: Jobs that run
		// privileged (temper-train job --privileged) are valid.
		"--allow-privileged=true",
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
	if err := waitHTTP(s.apiserver, s.URL+"/readyz", AdminToken, 60*time.Second); err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	// The API server wrote its self-signed certificate, followed by the CA
	// that signed it, when it started.
	s.CACert = filepath.Join(dir, "certs", "apiserver.crt")

	for _, kc := range []struct {
		path  *string
		name  string
		token string
	}{
		{&s.AdminKubeconfig, "admin.kubeconfig", AdminToken},
		{&s.NobodyKubeconfig, "nobody.kubeconfig", NobodyToken},
		{&s.BadKubeconfig, "bad.kubeconfig", "not-a-known-token"},
	} {
		*kc.path = filepath.Join(dir, kc.name)
		if err := writeKubeconfig(*kc.path, s.URL, kc.token); err != nil {
			return nil, err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.AdminKubeconfig)
	if err != nil {
		return nil, err
	}
	if s.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// Stop stops the API server before etcd (stopped together, the API server
// can hang in its graceful shutdown waiting for etcd) and removes the files.
func (s *Server) Stop() {
	if s.apiserver != nil {
		s.apiserver.stop(15 * time.Second)
	}
	if s.etcd != nil {
		s.etcd.stop(10 * time.Second)
	}
	os.RemoveAll(s.Dir)
}

// writeServiceAccountKey writes a fresh RSA key pair for signing service
// account tokens: the API server issues them (TokenRequest) and accepts
// them, as a cluster's does for the pods of a Job.
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
		fmt.Fprintf(os.Stderr, "kubetest: %s did not stop within %v after SIGTERM; killing it\n", p.name, grace)
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

// RandomHex is n random bytes in hex: unique names (uids, container ids)
// for objects the tests create on the shared API server.
func RandomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
