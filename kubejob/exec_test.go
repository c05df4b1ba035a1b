package kubejob

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"temper.codes/temper-train/internal/kube"
)

// configMapServer serves one ConfigMap, ns/run, for GET and PUT: what the
// pod's side of a run reads and writes.
type configMapServer struct {
	mu   sync.Mutex
	cm   corev1.ConfigMap
	puts int
}

func (s *configMapServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path != "/api/v1/namespaces/ns/configmaps/run" {
		http.NotFound(w, r)
		return
	}
	if r.Method == http.MethodPut {
		if err := json.NewDecoder(r.Body).Decode(&s.cm); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.puts++
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&s.cm)
}

// TestExec runs a stage the way a Job's pod does and checks what reaches
// the ConfigMap and the pod's own output.
func TestExec(t *testing.T) {
	cases := []struct {
		name       string
		stage      func(stdout, stderr io.Writer) error
		status     string
		errHas     string // "" for success
		errorHas   string // in the published error.txt
		wantOutput int
	}{
		{name: "success", stage: func(stdout, stderr io.Writer) error {
			io.WriteString(stdout, "summary\n")
			io.WriteString(stderr, "progress\n")
			return nil
		}, status: StatusSucceeded, wantOutput: 2},
		{name: "stage fails", stage: func(stdout, stderr io.Writer) error {
			io.WriteString(stderr, strings.Repeat("x", 2*stderrTail)+"last words\n")
			return errors.New("no such container")
		}, status: StatusFailed, errHas: "observe: no such container", errorHas: "no such container\n\nend of its stderr:\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := &configMapServer{cm: corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "run", Annotations: map[string]string{AnnotationStatus: StatusPending}}}}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			client, err := NewClient(&rest.Config{Host: hs.URL}, kube.Source{InCluster: true})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "snapshot.json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			n, err := client.Exec(context.Background(), "ns", "run", StageObserve, dir, &stdout, &stderr, c.stage)
			if c.errHas != "" {
				if err == nil || err.Error() != c.errHas {
					t.Fatalf("err %v, want %q", err, c.errHas)
				}
			} else if err != nil || n != c.wantOutput {
				t.Fatalf("Exec = %d, %v; want %d outputs", n, err, c.wantOutput)
			}
			if got := srv.cm.Annotations[AnnotationStatus]; got != c.status {
				t.Errorf("status %q, want %q", got, c.status)
			}
			if srv.cm.Data["snapshot.json"] != "{}" {
				t.Errorf("snapshot not published: %v", srv.cm.Data)
			}
			if srv.cm.Data[KeySummary] != stdout.String() {
				t.Errorf("summary %q, want the stage's stdout %q", srv.cm.Data[KeySummary], stdout.String())
			}
			if c.errorHas != "" {
				e := srv.cm.Data[KeyError]
				if !strings.Contains(e, c.errorHas) || !strings.HasSuffix(e, "last words\n") || len(e) > stderrTail+200 {
					t.Errorf("error.txt (%d bytes) lacks %q or does not end with the stderr's tail", len(e), c.errorHas)
				}
				if stderr.Len() != 2*stderrTail+len("last words\n") {
					t.Errorf("the pod's own stderr got %d bytes, want all of them", stderr.Len())
				}
			}
		})
	}
}

// TestExecNoConfigMap: a run that could not publish fails before its
// stage runs.
func TestExecNoConfigMap(t *testing.T) {
	hs := httptest.NewServer(http.NotFoundHandler())
	defer hs.Close()
	client, err := NewClient(&rest.Config{Host: hs.URL}, kube.Source{InCluster: true})
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	_, err = client.Exec(context.Background(), "ns", "run", StageObserve, t.TempDir(), io.Discard, io.Discard, func(io.Writer, io.Writer) error {
		ran = true
		return nil
	})
	if err == nil || ran {
		t.Errorf("Exec without a ConfigMap: err %v, stage ran %v", err, ran)
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 5}
	for _, s := range []string{"ab", "cdef", "g"} {
		if n, err := tb.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := string(tb.b); got != "cdefg" {
		t.Errorf("kept %q, want the last 5 bytes cdefg", got)
	}
}

func TestWriteOutputs(t *testing.T) {
	dir := t.TempDir()
	outs := []Output{{Key: KeySummary, Path: KeySummary, Data: []byte("s\n")}, {Key: KeyProfile, Path: "profiles/x/any.toml", Data: []byte("id = \"x\"\n")}}
	got, err := WriteOutputs(dir, outs)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range outs {
		want := filepath.Join(dir, o.Path)
		if i >= len(got) || got[i] != want {
			t.Fatalf("paths %v, want %s at %d", got, want, i)
		}
		if b, err := os.ReadFile(want); err != nil || !bytes.Equal(b, o.Data) {
			t.Errorf("%s: %q, %v", want, b, err)
		}
	}
	got, err = WriteOutputs(dir, []Output{outs[0], {Key: "evil", Path: "../evil"}})
	if err == nil || len(got) != 1 {
		t.Errorf("a path outside dir: %v, %v; want the first written and an error", got, err)
	}
}
