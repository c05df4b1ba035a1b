package kubejob

import (
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"temper.codes/temper-train/internal/kube"
	"temper.codes/temper-train/internal/kubetest"
)

// The tests below run against a real etcd + kube-apiserver
// (internal/kubetest): objects are created, so the API server validates
// them, and RBAC decides what each identity may do.

var testAPI kubetest.Once

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	testAPI.Stop()
	os.Exit(code)
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T, api *kubetest.Server, prefix string) string {
	t.Helper()
	ns := prefix + "-" + kubetest.RandomHex(4)
	if _, err := api.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns
}

// createPod creates a pod bound to node.
func createPod(t *testing.T, api *kubetest.Server, ns, name, node string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
	}
	pod, err := api.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	return pod
}

// clientFor is a kubejob Client authenticating with token.
func clientFor(t *testing.T, api *kubetest.Server, token string) *Client {
	t.Helper()
	path, err := api.Kubeconfig("kc-"+kubetest.RandomHex(4), token)
	if err != nil {
		t.Fatal(err)
	}
	src := kube.Source{Kubeconfigs: []string{path}}
	cfg, err := kube.Config(src)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serviceAccountToken issues a token for a service account, as the kubelet
// asks for one for a pod (TokenRequest).
func serviceAccountToken(t *testing.T, api *kubetest.Server, ns, name string) string {
	t.Helper()
	tr, err := api.Client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for service account %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// startRun builds and creates a run for pod as admin.
func startRun(t *testing.T, api *kubetest.Server, pod *corev1.Pod, jobNS string, edit func(*Spec)) (*Client, *Objects) {
	t.Helper()
	c := clientFor(t, api, kubetest.AdminToken)
	s := Spec{Pod: pod, Image: "registry.example/temper-train:test", Namespace: jobNS, Stage: StageObserve,
		Args: []string{"--duration", "2s"}, RunID: NewRunID(StageObserve, pod.Name, time.Now()) + "-" + kubetest.RandomHex(2),
		Deadline: time.Minute, TTL: time.Hour}
	if edit != nil {
		edit(&s)
	}
	o, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Check(ctx, Permissions(o, true)); err != nil {
		t.Fatalf("admin: %v", err)
	}
	if err := c.Create(ctx, o); err != nil {
		t.Fatalf("create: %v", err)
	}
	return c, o
}

// TestCreate creates runs for real (observe and train, the Job in the pod's
// namespace and in another, capabilities and privileged): the API server
// validates every object. It then reads them back and checks the resumed
// Job, the owner references, and, with the run's own service account
// token, that the pod may get its target pod and update its ConfigMap and
// nothing else.
func TestCreate(t *testing.T) {
	api := testAPI.Need(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		stage      string
		otherNS    bool
		privileged bool
	}{
		{name: "observe", stage: StageObserve},
		{name: "train", stage: StageTrain},
		{name: "observe in another namespace", stage: StageObserve, otherNS: true},
		{name: "train privileged", stage: StageTrain, privileged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t, api, "shop")
			pod := createPod(t, api, ns, "checkout", "node-a")
			createPod(t, api, ns, "other", "node-a")
			jobNS := ""
			if tc.otherNS {
				jobNS = newNamespace(t, api, "temper-system")
			}
			_, o := startRun(t, api, pod, jobNS, func(s *Spec) {
				s.Stage, s.Privileged = tc.stage, tc.privileged
				if tc.stage == StageTrain {
					s.Args = []string{"--id", "checkout", "--bench", "true"}
				}
			})
			runNS := o.Job.Namespace
			job, err := api.Client.BatchV1().Jobs(runNS).Get(ctx, o.Job.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if *job.Spec.Suspend {
				t.Error("the job is still suspended after Create")
			}
			tmpl := job.Spec.Template.Spec
			if got := tmpl.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values; len(got) != 1 || got[0] != "node-a" {
				t.Errorf("stored node affinity %v, want node-a", got)
			}
			sc := tmpl.Containers[0].SecurityContext
			if tc.privileged != (sc.Privileged != nil && *sc.Privileged) || !tmpl.HostPID {
				t.Errorf("stored security context %+v hostPID %v", sc, tmpl.HostPID)
			}
			owned := func(kind string, m metav1.ObjectMeta) {
				t.Helper()
				refs := m.OwnerReferences
				if m.Namespace != runNS {
					if len(refs) != 0 {
						t.Errorf("%s %s/%s in the pod's namespace has owner %v: owners cannot cross namespaces", kind, m.Namespace, m.Name, refs)
					}
					return
				}
				if len(refs) != 1 || refs[0].UID != job.UID || refs[0].Kind != "Job" {
					t.Errorf("%s %s/%s owners %+v, want the job %s", kind, m.Namespace, m.Name, refs, job.UID)
				}
			}
			sa, err := api.Client.CoreV1().ServiceAccounts(runNS).Get(ctx, o.Job.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			owned("ServiceAccount", sa.ObjectMeta)
			cm, err := api.Client.CoreV1().ConfigMaps(runNS).Get(ctx, o.Job.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			owned("ConfigMap", cm.ObjectMeta)
			if cm.Annotations[AnnotationStatus] != StatusPending {
				t.Errorf("configmap status %q, want pending", cm.Annotations[AnnotationStatus])
			}
			for _, r := range o.Roles {
				role, err := api.Client.RbacV1().Roles(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				owned("Role", role.ObjectMeta)
				rb, err := api.Client.RbacV1().RoleBindings(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				owned("RoleBinding", rb.ObjectMeta)
			}

			// What the Job's pod may do, with the token the kubelet
			// would mount for it, once the bindings Create made count.
			api.AwaitAllowed(t, runNS+"/"+o.Job.Name,
				authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "pods", Name: "checkout"},
				authorizationv1.ResourceAttributes{Namespace: runNS, Verb: "update", Resource: "configmaps", Name: o.Job.Name})
			pc := clientFor(t, api, serviceAccountToken(t, api, runNS, o.Job.Name))
			may := func(verb, res, resNS, name string) bool {
				t.Helper()
				group := ""
				if res == "jobs" {
					group = "batch"
				}
				err := pc.Check(ctx, []Permission{{verb, group, res, resNS, name}})
				if err != nil && !errors.Is(err, ErrForbidden) {
					t.Fatal(err)
				}
				return err == nil
			}
			for _, c := range []struct {
				verb, res, ns, name string
				want                bool
			}{
				{"get", "pods", ns, "checkout", true},
				{"get", "pods", ns, "other", false},
				{"list", "pods", ns, "", false},
				{"get", "configmaps", runNS, o.Job.Name, true},
				{"update", "configmaps", runNS, o.Job.Name, true},
				{"create", "configmaps", runNS, "", false},
				{"get", "configmaps", runNS, "kube-root-ca.crt", false},
				{"create", "jobs", runNS, "", false},
				{"get", "secrets", runNS, "", false},
			} {
				if got := may(c.verb, c.res, c.ns, c.name); got != c.want {
					t.Errorf("the run's service account: %s %s %s/%s allowed=%v, want %v", c.verb, c.res, c.ns, c.name, got, c.want)
				}
			}
			// And for real, not only as a review.
			if _, err := pc.Pod(ctx, ns, "checkout"); err != nil {
				t.Errorf("the run's service account cannot get its pod: %v", err)
			}
			if err := pc.Publish(ctx, runNS, o.Job.Name, StatusSucceeded, []Output{{Key: KeySummary, Path: KeySummary, Data: []byte("ok\n"), Required: true}}); err != nil {
				t.Errorf("the run's service account cannot publish: %v", err)
			}
		})
	}
}

// TestPermissionErrors: a user, and a service account, that may read the
// pod but not create jobs get one line naming that permission, before
// anything is created; Create without the check says the same.
func TestPermissionErrors(t *testing.T) {
	api := testAPI.Need(t)
	ctx := context.Background()
	ns := newNamespace(t, api, "shop")
	pod := createPod(t, api, ns, "checkout", "node-a")
	o, err := Build(Spec{Pod: pod, Image: "img", Stage: StageObserve, RunID: "temper-observe-x-1", Deadline: time.Minute, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}

	nobody := clientFor(t, api, kubetest.NobodyToken)
	err = nobody.Check(ctx, Permissions(o, false))
	wantLine(t, err, `cannot get pods checkout in namespace "`+ns+`": ask your admin for a Role granting "get" on pods`)

	readPods := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}
	api.Grant(t, ns, "nobody", readPods)
	err = nobody.Check(ctx, Permissions(o, false))
	wantLine(t, err, `cannot create jobs.batch in namespace "`+ns+`": ask your admin for a Role granting "create" on jobs.batch`)
	err = nobody.Create(ctx, o)
	wantLine(t, err, `cannot create jobs.batch in namespace "`+ns+`"`)

	// A CI pipeline's service account with the same rights.
	if _, err := api.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ci"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	api.Grant(t, ns, ns+"/ci", readPods)
	ci := clientFor(t, api, serviceAccountToken(t, api, ns, "ci"))
	err = ci.Check(ctx, Permissions(o, false))
	wantLine(t, err, `cannot create jobs.batch in namespace "`+ns+`"`)

	// Allowed to create jobs but not the rest: the next missing one.
	api.Grant(t, ns, ns+"/ci", rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "patch"}})
	err = ci.Check(ctx, Permissions(o, false))
	wantLine(t, err, `cannot create serviceaccounts in namespace "`+ns+`"`)
	if jobs, _ := api.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); len(jobs.Items) != 0 {
		t.Errorf("a refused run left %d jobs", len(jobs.Items))
	}
}

func wantLine(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") || !errors.Is(err, ErrForbidden) {
		t.Errorf("got %v\nwant one ErrForbidden line containing %q", err, want)
	}
}
