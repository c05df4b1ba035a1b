package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"temper.codes/temper-train/internal/kubetest"
	"temper.codes/temper-train/internal/mountinfo"
	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/kubejob"
	"temper.codes/temper-train/observe"
	"temper.codes/temper-train/observe/snapshot"
)

// The job tests run `temper-train job` against a real etcd + kube-apiserver
// (internal/kubetest), started by the first test that needs it.
var testAPI kubetest.Once

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	testAPI.Stop()
	os.Exit(code)
}

// fakeNode is a node of the test cluster on this machine: a name, and the
// kubelet's cgroup tree for its pods (kubepods/...), built under a test
// directory of the machine's cpu (v1) or unified (v2) hierarchy.
type fakeNode struct {
	name       string
	hierarchy  string // the hierarchy's mount point, e.g. /sys/fs/cgroup/cpu
	cgroupRoot string // hierarchy/temper-job-test-XXXX: the node's view of that hierarchy
}

func newFakeNode(t *testing.T) *fakeNode {
	t.Helper()
	need.Root(t, "to create cgroups and mount namespaces")
	all, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	n := &fakeNode{name: "temper-node-" + kubetest.RandomHex(3)}
	for _, m := range all {
		if m.FSType == "cgroup2" || m.FSType == "cgroup" && slices.Contains(m.SuperOptions, "cpu") {
			n.hierarchy = m.MountPoint
			break
		}
	}
	if n.hierarchy == "" {
		need.Unmet(t, "a cgroup v2 or cgroup v1 cpu hierarchy", "mount one")
	}
	n.cgroupRoot = filepath.Join(n.hierarchy, "temper-job-test-"+kubetest.RandomHex(4))
	if err := os.Mkdir(n.cgroupRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testkit.RemoveCgroupTree(t, n.cgroupRoot) })
	return n
}

// runPod creates a BestEffort pod on the node, started as the kubelet
// would report it, with the workload running in its container's cgroup
// (the cgroupfs driver's layout). It returns the pod and the workload's pid.
func (n *fakeNode) runPod(t *testing.T, api *kubetest.Server, ns, name, workload string) (*corev1.Pod, int) {
	t.Helper()
	ctx := context.Background()
	pod, err := api.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: n.name, Containers: []corev1.Container{{Name: "app", Image: "registry.example/workload:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := kubetest.RandomHex(32)
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "registry.example/workload:1", ImageID: "sha256:" + kubetest.RandomHex(32),
		ContainerID: "containerd://" + id, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	if pod, err = api.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(n.cgroupRoot, "kubepods", "besteffort", "pod"+string(pod.UID), id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(workload, "--dir", t.TempDir())
	// Killed with the test binary too: a test run cut off (timeout, ^C)
	// never reaches its cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	return pod, cmd.Process.Pid
}

// nodeRun is what playNode did with a Job's pod.
type nodeRun struct {
	job     *batchv1.Job
	exit    error
	outcome kubetest.JobOutcome
	output  string
}

// playNode does what the scheduler, the kubelet and the job controller
// would do with the run's Job in ns, none of which runs here:
//
//   - it waits for the Job to be created and resumed, and takes the node
//     from its required node affinity (the scheduler would bind it there);
//   - it asks the API server for a token of the pod's service account
//     (TokenRequest, as the kubelet does) and writes it with the API
//     server's CA and the namespace where a container finds them,
//     /var/run/secrets/kubernetes.io/serviceaccount;
//   - it runs the container's command, $(NODE_NAME) expanded from the
//     downward API, on this machine with the environment the kubelet gives
//     it (KUBERNETES_SERVICE_HOST/PORT, NODE_NAME) in a private mount
//     namespace (unshare --mount) that gives it what its volumes say: the
//     node's /sys/fs/cgroup (with the fake node's kubepods tree as the
//     cpu hierarchy) and /sys/kernel/btf, read-only where the Job says, an
//     empty /tmp, a /run holding only the service account files, and the
//     "image" (the temper-train binary) as /usr/local/bin;
//   - it writes the Job's status as the job controller would: running,
//     then complete or failed, or past its deadline, where it stops the
//     container (SIGTERM, then SIGKILL after the grace period) as the
//     kubelet does when the controller deletes the pod; and it stops the
//     container when the Job is deleted.
func playNode(t *testing.T, api *kubetest.Server, node *fakeNode, ns, image string) <-chan nodeRun {
	done := make(chan nodeRun, 1)
	go func() {
		r := nodeRun{}
		defer func() { done <- r }()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var job *batchv1.Job
		for job == nil || job.Spec.Suspend != nil && *job.Spec.Suspend {
			if ctx.Err() != nil {
				r.exit = errors.New("no resumed job appeared")
				return
			}
			time.Sleep(50 * time.Millisecond)
			jobs, err := api.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: kubejob.LabelRun})
			if err != nil {
				continue
			}
			for i := range jobs.Items {
				// A Job whose pod has not started yet: the earlier runs'
				// have a start time.
				if jobs.Items[i].Status.StartTime == nil {
					job = &jobs.Items[i]
				}
			}
		}
		r.job = job
		r.exit = runJobPod(ctx, api, node, job, image, &r)
	}()
	return done
}

func runJobPod(ctx context.Context, api *kubetest.Server, node *fakeNode, job *batchv1.Job, image string, r *nodeRun) error {
	tmpl := job.Spec.Template.Spec
	terms := tmpl.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if got := terms[0].MatchFields[0].Values[0]; got != node.name {
		return fmt.Errorf("the job is pinned to node %s, not %s", got, node.name)
	}
	api.SetJobStatus(noFatal{}, job.Namespace, job.Name, kubetest.JobRunning)

	dir, err := os.MkdirTemp("", "temper-job-pod-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The run publishes to its ConfigMap with this account: once the
	// binding the job command made counts (RBAC decides from a watch cache).
	if err := api.WaitAllowed(ctx, job.Namespace+"/"+tmpl.ServiceAccountName, authorizationv1.ResourceAttributes{
		Namespace: job.Namespace, Verb: "update", Resource: "configmaps", Name: job.Name}); err != nil {
		return err
	}
	tr, err := api.Client.CoreV1().ServiceAccounts(job.Namespace).CreateToken(ctx, tmpl.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for the pod's service account: %w", err)
	}
	ca, err := os.ReadFile(api.CACert)
	if err != nil {
		return err
	}
	run := filepath.Join(dir, "run")
	sa := filepath.Join(run, "secrets", "kubernetes.io", "serviceaccount")
	if err := os.MkdirAll(sa, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": ca, "namespace": []byte(job.Namespace)} {
		if err := os.WriteFile(filepath.Join(sa, name), data, 0o644); err != nil {
			return err
		}
	}
	bin := filepath.Join(dir, "image")
	if err := os.Mkdir(bin, 0o755); err != nil {
		return err
	}
	if err := exec.Command("cp", image, filepath.Join(bin, "temper-train")).Run(); err != nil {
		return err
	}

	c := tmpl.Containers[0]
	env := map[string]string{"PATH": "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
		"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": strconv.Itoa(api.Port)}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName":
			env[e.Name] = node.name
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		default:
			return fmt.Errorf("env %s: the test node does not provide %+v", e.Name, e.ValueFrom)
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var argv []string
	for _, a := range c.Command {
		argv = append(argv, ref.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := env[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		}))
	}

	// The mounts, in the container's order, then /run and the image;
	// the emptyDir over /tmp goes last, since every source above is in
	// /tmp.
	script := []string{"set -e"}
	var tmpMount string
	for _, m := range c.VolumeMounts {
		var vol *corev1.Volume
		for i := range tmpl.Volumes {
			if tmpl.Volumes[i].Name == m.Name {
				vol = &tmpl.Volumes[i]
			}
		}
		switch {
		case vol == nil:
			return fmt.Errorf("mount %s: no volume", m.Name)
		case vol.HostPath != nil:
			if vol.HostPath.Path != m.MountPath {
				return fmt.Errorf("mount %s: host path %s at %s: the test node mounts host paths where they are", m.Name, vol.HostPath.Path, m.MountPath)
			}
			if vol.HostPath.Path == "/sys/fs/cgroup" {
				script = append(script, "mount --bind "+node.cgroupRoot+" "+node.hierarchy)
				if m.ReadOnly {
					script = append(script, "mount -o remount,bind,ro "+node.hierarchy)
				}
				continue
			}
			if m.ReadOnly {
				script = append(script, "mount --bind "+m.MountPath+" "+m.MountPath, "mount -o remount,bind,ro "+m.MountPath)
			}
		case vol.EmptyDir != nil:
			if m.MountPath != "/tmp" {
				return fmt.Errorf("mount %s: emptyDir at %s: the test node has one at /tmp only", m.Name, m.MountPath)
			}
			empty := filepath.Join(dir, "empty-"+m.Name)
			if err := os.Mkdir(empty, 0o755); err != nil {
				return err
			}
			tmpMount = "mount --bind " + empty + " /tmp"
		default:
			return fmt.Errorf("mount %s: the test node does not provide %+v", m.Name, vol.VolumeSource)
		}
	}
	script = append(script, "mount --bind "+run+" /run", "mount --bind "+bin+" /usr/local/bin")
	if tmpMount != "" {
		script = append(script, tmpMount)
	}
	script = append(script, `exec "$@"`)

	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "--", "sh", "-c", strings.Join(script, "\n"), "sh"}, argv...)...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(time.Duration(*job.Spec.ActiveDeadlineSeconds) * time.Second)
	grace := time.Duration(*tmpl.TerminationGracePeriodSeconds) * time.Second
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			return <-exited
		}
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	defer func() { r.output = out.String() }()
	for {
		select {
		case err := <-exited:
			r.outcome = kubetest.JobComplete
			if err != nil {
				r.outcome = kubetest.JobFailed
			}
			api.SetJobStatus(noFatal{}, job.Namespace, job.Name, r.outcome)
			return err
		case <-deadline:
			err := stop()
			r.outcome = kubetest.JobDeadline
			api.SetJobStatus(noFatal{}, job.Namespace, job.Name, r.outcome)
			return err
		case <-tick.C:
			j, err := api.Client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || err == nil && j.DeletionTimestamp != nil {
				// The Job's pods go with it: the kubelet stops them.
				return stop()
			}
		}
	}
}

// noFatal reports SetJobStatus failures from the node's goroutine, where
// t.Fatal must not be called, by panicking: they are bugs of the test.
type noFatal struct{ testing.TB }

func (noFatal) Helper()                   {}
func (noFatal) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

// jobEnv is one end-to-end setup: an API server, a node with a pod running
// the workload, and a namespace.
type jobEnv struct {
	api   *kubetest.Server
	node  *fakeNode
	ns    string
	pod   *corev1.Pod
	pid   int
	image string
	admin string
}

func newJobEnv(t *testing.T) *jobEnv {
	t.Helper()
	needTracing(t)
	need.Tool(t, "unshare", "util-linux")
	api := testAPI.Need(t)
	e := &jobEnv{api: api, node: newFakeNode(t), ns: "shop-" + kubetest.RandomHex(3), image: buildCLI(t), admin: api.AdminKubeconfig}
	if _, err := api.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.pod, e.pid = e.node.runPod(t, api, e.ns, "checkout", buildWorkload(t))
	return e
}

// job runs `temper-train job --wait` against the pod while playNode plays
// the node.
func (e *jobEnv) job(t *testing.T, extra []string, stage ...string) (code int, stdout, stderr string, node nodeRun) {
	t.Helper()
	played := playNode(t, e.api, e.node, e.ns, e.image)
	args := append([]string{"job", "--kubeconfig", e.admin, "--pod", e.ns + "/checkout", "--image", "registry.example/temper-train:test", "--wait"}, extra...)
	code, stdout, stderr = runCLI(append(append(args, "--"), stage...)...)
	node = <-played
	t.Logf("the job's container said:\n%s", node.output)
	return code, stdout, stderr, node
}

// TestJobObserveEndToEnd runs `temper-train job --wait -- observe` for a
// pod whose workload runs on this machine: the Job is created (validated
// by the API server), the node plays its pod for real (BPF trace, in-cluster
// config, service account token, ConfigMap), and the outputs come back
// through the API into --out.
func TestJobObserveEndToEnd(t *testing.T) {
	e := newJobEnv(t)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr, node := e.job(t, []string{"--out", out}, "observe", "--duration", "1500ms")
	if code != exitOK || node.outcome != kubetest.JobComplete {
		t.Fatalf("exit %d, job %s (%v)\nstdout:\n%s\nstderr:\n%s", code, node.outcome, node.exit, stdout, stderr)
	}
	for _, want := range []string{"target    pod " + e.ns + "/checkout", "lost      none", "wl-compute-0"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("printed summary lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "job "+e.ns+"/"+node.job.Name+" created for pod "+e.ns+"/checkout on node "+e.node.name) {
		t.Errorf("stderr:\n%s", stderr)
	}
	snap, err := snapshot.Load(filepath.Join(out, "snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Pod == nil || snap.Pod.Node != e.node.name || snap.Pod.UID != string(e.pod.UID) {
		t.Errorf("snapshot pod %+v", snap.Pod)
	}
	r, err := observe.Open(filepath.Join(out, "trace.pftrace.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sum, err := observe.Summarize(r)
	if err != nil {
		t.Fatal(err)
	}
	var threads []string
	for _, th := range sum.Threads {
		if int(th.Tgid) == e.pid {
			threads = append(threads, th.Name)
		}
	}
	for _, name := range workloadThreads {
		if !slices.Contains(threads, name) {
			t.Errorf("the trace that came back lacks the pod's thread %s (has %v)", name, threads)
		}
	}
	summary, err := os.ReadFile(filepath.Join(out, kubejob.KeySummary))
	if err != nil || string(summary) != stdout {
		t.Errorf("summary.txt differs from what was printed (%v)", err)
	}
}

// TestJobWaitErrors: a stage that fails in the pod, a run past its
// deadline and a target pod deleted mid-run are one line each, exit 1.
func TestJobWaitErrors(t *testing.T) {
	e := newJobEnv(t)
	t.Run("failure", func(t *testing.T) {
		code, _, stderr, node := e.job(t, nil, "observe", "--duration", "1s", "--attach", "nosuch")
		checkJobErr(t, code, stderr, node, kubetest.JobFailed, `failed: --attach "nosuch": want auto, tp_btf or raw_tp`)
	})
	t.Run("deadline", func(t *testing.T) {
		code, _, stderr, node := e.job(t, []string{"--deadline", "2s"}, "observe", "--duration", "60s")
		checkJobErr(t, code, stderr, node, kubetest.JobDeadline, "ran past its deadline of 2s (activeDeadlineSeconds) and was stopped: give a longer --deadline")
	})
	t.Run("pod deleted", func(t *testing.T) {
		played := playNode(t, e.api, e.node, e.ns, e.image)
		go func() {
			// Once the trace runs, the pod goes away.
			for range 200 {
				time.Sleep(100 * time.Millisecond)
				jobs, err := e.api.Client.BatchV1().Jobs(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: kubejob.LabelRun})
				if err == nil && slices.ContainsFunc(jobs.Items, func(j batchv1.Job) bool { return j.Status.Active == 1 }) {
					time.Sleep(time.Second)
					_ = e.api.Client.CoreV1().Pods(e.ns).Delete(context.Background(), "checkout", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
					return
				}
			}
		}()
		code, _, stderr := runCLI("job", "--kubeconfig", e.admin, "--pod", e.ns+"/checkout", "--image", "img", "--wait", "--", "observe", "--duration", "60s")
		node := <-played
		t.Logf("the job's container said:\n%s", node.output)
		checkJobErr(t, code, stderr, node, "", "pod "+e.ns+"/checkout was deleted while job")
		if !strings.Contains(stderr, "the job was deleted") {
			t.Errorf("stderr does not say the job was deleted:\n%s", stderr)
		}
	})
}

func checkJobErr(t *testing.T, code int, stderr string, node nodeRun, outcome kubetest.JobOutcome, want string) {
	t.Helper()
	t.Logf("job's stderr:\n%s", stderr)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	last := lines[len(lines)-1]
	if code != exitFailure || !strings.Contains(last, want) || node.outcome != outcome {
		t.Errorf("exit %d, job %q (want %q), last line:\n%s\nwant it to contain %q\nstderr:\n%s", code, node.outcome, outcome, last, want, stderr)
	}
}

// TestJobPermissions: a user who may read the pod but not create jobs
// gets one line naming the permission; the dry run needs only the pod and
// prints the manifests.
func TestJobPermissions(t *testing.T) {
	api := testAPI.Need(t)
	ctx := context.Background()
	ns := "shop-" + kubetest.RandomHex(3)
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "checkout"},
		Spec: corev1.PodSpec{NodeName: "node-b", Containers: []corev1.Container{{Name: "app", Image: "img"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pending"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "img"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	api.Grant(t, ns, "nobody", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}})
	base := []string{"job", "--kubeconfig", api.NobodyKubeconfig, "--image", "registry.example/temper-train:v1"}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"cannot create jobs", []string{"--pod", ns + "/checkout", "--", "observe"}, exitFailure,
			`temper-train: cannot create jobs.batch in namespace "` + ns + `": ask your admin for a Role granting "create" on jobs.batch`},
		{"pod not scheduled", []string{"--pod", ns + "/pending", "--", "observe"}, exitFailure, "pod " + ns + "/pending is not scheduled to a node yet"},
		{"no such pod", []string{"--pod", ns + "/gone", "--", "observe"}, exitFailure, "pod " + ns + "/gone not found"},
		{"no stage", []string{"--pod", ns + "/checkout"}, exitUsage, "give the stage after --"},
		{"reserved flag", []string{"--pod", ns + "/checkout", "--", "observe", "--out", "x"}, exitUsage, "--out after --: the job sets"},
		{"ttl too short to wait", []string{"--pod", ns + "/checkout", "--wait", "--ttl", "10s", "--", "observe"}, exitUsage, "--ttl 10s with --wait: give at least 1m"},
		{"not a stage", []string{"--pod", ns + "/checkout", "--", "refine"}, exitUsage, `stage "refine": the job runs observe or train`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(append(base, tc.args...)...)
			first, _, _ := strings.Cut(stderr, "\n")
			if code != tc.code || !strings.Contains(first, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and a first line containing %q", code, stderr, tc.code, tc.want)
			}
		})
	}
	if jobs, _ := api.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); len(jobs.Items) != 0 {
		t.Errorf("refused runs left %d jobs", len(jobs.Items))
	}

	// The dry run reads the pod and prints what it would create, pinned
	// to the pod's node (node-b, not this machine's).
	code, stdout, stderr := runCLI(append(base, "--pod", ns+"/checkout", "--dry-run", "--", "train", "--id", "checkout", "--bench", "true")...)
	if code != exitOK {
		t.Fatalf("dry run: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"kind: Job", "kind: ServiceAccount", "kind: ConfigMap", "kind: Role", "kind: RoleBinding",
		"- node-b", "hostPID: true", "- SYS_NICE", "activeDeadlineSeconds: 1800", "ttlSecondsAfterFinished: 3600", "suspend: true"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, stdout)
		}
	}
}
