package kubejob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakePods serves the pods Launch reads (and nothing else: a dry run or a
// refused spec must ask for nothing more) and returns a kubeconfig for it.
func fakePods(t *testing.T, pods ...*corev1.Pod) (kubeconfig string, paths *[]string) {
	t.Helper()
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		for _, p := range pods {
			if r.Method == http.MethodGet && r.URL.Path == fmt.Sprintf("/api/v1/namespaces/%s/pods/%s", p.Namespace, p.Name) {
				json.NewEncoder(w).Encode(p)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound})
	}))
	t.Cleanup(srv.Close)
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: fake, user: u}}]
current-context: c
`, srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, &seen
}

// TestLaunchDryRunAndRefusals: a dry run reads the pod and builds the
// objects, creating nothing; a spec Build refuses is a *BuildError, a pod
// that cannot be read is the client's error.
func TestLaunchDryRunAndRefusals(t *testing.T) {
	scheduled := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout", UID: "u-1"},
		Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
	pending := scheduled.DeepCopy()
	pending.Name, pending.Spec.NodeName = "pending", ""
	kc, seen := fakePods(t, scheduled, pending)
	spec := Spec{Image: "registry.example/temper-train:v1", Stage: StageObserve, Deadline: time.Minute, TTL: time.Hour}
	for _, tc := range []struct {
		name  string
		pod   string
		edit  func(*Spec)
		build string // a *BuildError with this text
		is    error
	}{
		{name: "dry run", pod: "checkout"},
		{name: "no image", pod: "checkout", edit: func(s *Spec) { s.Image = "" }, build: "no Image: "},
		{name: "reserved flag", pod: "checkout", edit: func(s *Spec) { s.Args = []string{"--out=x"} }, build: "--out after --"},
		{name: "not found", pod: "gone", is: ErrNoPod},
		{name: "unscheduled", pod: "pending", is: ErrUnscheduled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			*seen = nil
			s := spec
			if tc.edit != nil {
				tc.edit(&s)
			}
			created := false
			l, err := Launch(context.Background(), LaunchOptions{Kubeconfig: kc, PodNamespace: "shop", PodName: tc.pod, Spec: s, DryRun: true,
				Created: func(*Objects, string) { created = true }})
			var be *BuildError
			switch {
			case tc.build != "":
				if !errors.As(err, &be) || !strings.Contains(err.Error(), tc.build) {
					t.Errorf("Launch error %v; want a *BuildError with %q", err, tc.build)
				}
			case tc.is != nil:
				if !errors.Is(err, tc.is) || errors.As(err, &be) {
					t.Errorf("Launch error %v; want %v", err, tc.is)
				}
			case err != nil:
				t.Fatal(err)
			default:
				job := l.Objects.Job
				if !strings.HasPrefix(job.Name, "temper-observe-checkout-") || job.Namespace != "shop" || l.Objects.PodUID != "u-1" {
					t.Errorf("dry run built job %s/%s for pod %s", job.Namespace, job.Name, l.Objects.PodUID)
				}
			}
			if created || len(*seen) != 1 || !strings.HasPrefix((*seen)[0], "GET /api/v1/namespaces/shop/pods/") {
				t.Errorf("asked the API server %v (created %v); want the pod only", *seen, created)
			}
		})
	}
}
