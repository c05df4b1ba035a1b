package target

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"temper.codes/temper-train/internal/kubetest"
	"temper.codes/temper-train/observe/snapshot"
)

// testNode is the node name the pod tests pretend to run on.
const testNode = "temper-test-node"

// Resources of the test pods' two containers (app, sidecar) per QoS class,
// with the CPU millicores the snapshot must report for them.
var podResources = map[corev1.PodQOSClass]struct {
	app, sidecar corev1.ResourceRequirements
	milli        [2][2]int64 // [container]{request, limit}
}{
	corev1.PodQOSGuaranteed: {
		app:     resources("1500m", "64Mi", "1500m", "64Mi"),
		sidecar: resources("250m", "16Mi", "250m", "16Mi"),
		milli:   [2][2]int64{{1500, 1500}, {250, 250}},
	},
	corev1.PodQOSBurstable: {
		app:   resources("100m", "32Mi", "2", ""),
		milli: [2][2]int64{{100, 2000}, {0, 0}},
	},
	corev1.PodQOSBestEffort: {},
}

// resources builds requests and limits; "" leaves a quantity unset.
func resources(cpuReq, memReq, cpuLim, memLim string) corev1.ResourceRequirements {
	list := func(cpu, mem string) corev1.ResourceList {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	return corev1.ResourceRequirements{Requests: list(cpuReq, memReq), Limits: list(cpuLim, memLim)}
}

// testPod is a pod created in the API server, with the container ids its
// status reports.
type testPod struct {
	pod                  *corev1.Pod
	appID, sidecarID     string // without the containerd:// scheme
	namespace, nameSlash string // nameSlash is NAMESPACE/NAME
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T, api *kubetest.Server) string {
	t.Helper()
	ns := "target-test-" + kubetest.RandomHex(4)
	_, err := api.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns
}

// createPod creates a pod with containers app and sidecar on node (none
// if ""), with the resources of class qos, and, if started, sets its
// status as a kubelet would: Running with container ids.
func createPod(t *testing.T, api *kubetest.Server, ns, name, node string, qos corev1.PodQOSClass, started bool) testPod {
	t.Helper()
	ctx := context.Background()
	res := podResources[qos]
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   ns,
			Labels:      map[string]string{"app": name},
			Annotations: map[string]string{"temper.codes/profile": "test-" + name},
		},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{
				{Name: "app", Image: "registry.example/app:1.0", Resources: res.app},
				{Name: "sidecar", Image: "registry.example/sidecar:2.3", Resources: res.sidecar},
			},
		},
	}
	pod, err := api.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	tp := testPod{pod: pod, namespace: ns, nameSlash: ns + "/" + name}
	if !started {
		return tp
	}
	tp.appID, tp.sidecarID = kubetest.RandomHex(32), kubetest.RandomHex(32)
	now := metav1.NewTime(time.Now())
	status := func(c corev1.Container, id string) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name:        c.Name,
			Image:       c.Image,
			ImageID:     c.Image + "@sha256:" + kubetest.RandomHex(32),
			ContainerID: "containerd://" + id,
			Ready:       true,
			Started:     new(true),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{
		status(pod.Spec.Containers[0], tp.appID),
		status(pod.Spec.Containers[1], tp.sidecarID),
	}
	if tp.pod, err = api.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status of pod %s/%s: %v", ns, name, err)
	}
	return tp
}

// The kubelet's cgroup layouts, written out as the kubelet documents them
// (independently of podCgroupPaths): pod cgroup per driver and QoS class
// (%s is the uid, with dashes as underscores for systemd), and the
// container cgroup inside it (%s is the runtime's scope prefix and id).
var kubeletLayout = map[string]struct {
	pod       map[corev1.PodQOSClass]string
	container func(prefix, id string) string
}{
	"systemd": {
		pod: map[corev1.PodQOSClass]string{
			corev1.PodQOSGuaranteed: "kubepods.slice/kubepods-pod%s.slice",
			corev1.PodQOSBurstable:  "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice",
			corev1.PodQOSBestEffort: "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s.slice",
		},
		container: func(prefix, id string) string { return prefix + id + ".scope" },
	},
	"cgroupfs": {
		pod: map[corev1.PodQOSClass]string{
			corev1.PodQOSGuaranteed: "kubepods/pod%s",
			corev1.PodQOSBurstable:  "kubepods/burstable/pod%s",
			corev1.PodQOSBestEffort: "kubepods/besteffort/pod%s",
		},
		container: func(_, id string) string { return id },
	},
}

// podDir is where the kubelet with driver puts the pod's cgroup under root.
func podDir(root, driver string, p *corev1.Pod, qos corev1.PodQOSClass) string {
	uid := string(p.UID)
	if driver == "systemd" {
		uid = strings.ReplaceAll(uid, "-", "_")
	}
	return filepath.Join(root, fmt.Sprintf(kubeletLayout[driver].pod[qos], uid))
}

func nonEmpty(dirs ...string) []string {
	return slices.DeleteFunc(dirs, func(d string) bool { return d == "" })
}

// TestResolvePod creates pods of every QoS class in a real API server, real
// cgroups laid out as the kubelet's systemd and cgroupfs drivers do in the
// v2 and v1 cpu hierarchies, and real processes in the container cgroups,
// and checks that Resolve finds the pod's cgroup, its version and processes,
// and the container's with Container set, and fills the pod metadata.
func TestResolvePod(t *testing.T) {
	api := needAPIServer(t)
	roots := newCgroupTestRoots(t)
	ns := newNamespace(t, api)
	// The runtimes' scope prefixes for the systemd driver, taken in turn.
	prefixes := []string{"cri-containerd-", "crio-", "docker-"}
	n := 0
	for _, version := range []int{2, 1} {
		for _, driver := range []string{"systemd", "cgroupfs"} {
			for _, qos := range []corev1.PodQOSClass{corev1.PodQOSGuaranteed, corev1.PodQOSBurstable, corev1.PodQOSBestEffort} {
				prefix := prefixes[n%len(prefixes)]
				n++
				t.Run(fmt.Sprintf("v%d/%s/%s", version, driver, qos), func(t *testing.T) {
					root := roots.root(t, version)
					name := strings.ToLower(fmt.Sprintf("v%d-%s-%s", version, driver, qos))
					tp := createPod(t, api, ns, name, testNode, qos, true)

					// The API server classified the pod; computeQOS must agree
					// with it on the spec alone.
					if tp.pod.Status.QOSClass != qos {
						t.Fatalf("API server set QoS %q, the test meant %q", tp.pod.Status.QOSClass, qos)
					}
					bare := tp.pod.DeepCopy()
					bare.Status = corev1.PodStatus{}
					if got := computeQOS(bare); got != qos {
						t.Errorf("computeQOS = %s, API server says %s", got, qos)
					}

					pod := mkCgroup(t, podDir(root, driver, tp.pod, qos))
					layout := kubeletLayout[driver]
					app := mkCgroup(t, filepath.Join(pod, layout.container(prefix, tp.appID)))
					sidecar := mkCgroup(t, filepath.Join(pod, layout.container(prefix, tp.sidecarID)))
					if driver == "systemd" && prefix == "crio-" {
						// CRI-O's monitor scope must not be taken for the container.
						mkCgroup(t, filepath.Join(pod, "crio-conmon-"+tp.sidecarID+".scope"))
					}
					pApp, pSidecar := startSleep(t, app), startSleep(t, sidecar)
					both := []int{pApp, pSidecar}
					slices.Sort(both)

					for _, tc := range []struct {
						container string
						dir       string
						tgids     []int
					}{
						{"", pod, both},
						{"app", app, []int{pApp}},
						{"sidecar", sidecar, []int{pSidecar}},
					} {
						tgt, err := Resolve(context.Background(), Spec{
							Pod:         tp.nameSlash,
							Container:   tc.container,
							Kubeconfig:  api.AdminKubeconfig,
							NodeName:    testNode,
							CgroupRoots: nonEmpty(roots.v2, roots.v1),
						})
						if err != nil {
							t.Fatalf("container %q: %v", tc.container, err)
						}
						if tgt.Kind != KindPod || tgt.Cgroup != tc.dir || tgt.CgroupVersion != version || !slices.Equal(tgt.Tgids, tc.tgids) {
							t.Errorf("container %q: got %s %s v%d tgids %v, want cgroup %s v%d tgids %v",
								tc.container, tgt.Kind, tgt.Cgroup, tgt.CgroupVersion, tgt.Tgids, tc.dir, version, tc.tgids)
						}
						if got, err := tgt.Refresh(); err != nil || !slices.Equal(got, tc.tgids) {
							t.Errorf("container %q: Refresh = %v, %v; want %v", tc.container, got, err, tc.tgids)
						}
						checkPodMeta(t, tgt.Pod, tp, qos)
					}
				})
			}
		}
	}
}

// checkPodMeta compares the snapshot metadata with the pod the test made.
func checkPodMeta(t *testing.T, got *snapshot.Pod, tp testPod, qos corev1.PodQOSClass) {
	t.Helper()
	if got == nil {
		t.Fatal("no pod metadata")
	}
	res := podResources[qos]
	want := snapshot.Pod{
		Namespace:   tp.namespace,
		Name:        tp.pod.Name,
		UID:         string(tp.pod.UID),
		Node:        testNode,
		QOSClass:    string(qos),
		Annotations: map[string]string{"temper.codes/profile": "test-" + tp.pod.Name},
		Labels:      map[string]string{"app": tp.pod.Name},
		Containers: []snapshot.Container{
			{Name: "app", Image: "registry.example/app:1.0", ContainerID: "containerd://" + tp.appID, CPURequestMilli: res.milli[0][0], CPULimitMilli: res.milli[0][1]},
			{Name: "sidecar", Image: "registry.example/sidecar:2.3", ContainerID: "containerd://" + tp.sidecarID, CPURequestMilli: res.milli[1][0], CPULimitMilli: res.milli[1][1]},
		},
	}
	if got.Namespace != want.Namespace || got.Name != want.Name || got.UID != want.UID || got.Node != want.Node || got.QOSClass != want.QOSClass ||
		!mapsEqual(got.Annotations, want.Annotations) || !mapsEqual(got.Labels, want.Labels) || !slices.Equal(got.Containers, want.Containers) {
		t.Errorf("pod metadata\n got %+v\nwant %+v", *got, want)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestResolvePodMirroredHierarchies: on a hybrid machine with the systemd
// driver the pod's slices exist in the v2 hierarchy too; the resolver takes
// the first cgroup that holds the processes.
func TestResolvePodMirroredHierarchies(t *testing.T) {
	api := needAPIServer(t)
	roots := newCgroupTestRoots(t)
	v1root, v2root := roots.root(t, 1), roots.root(t, 2)
	ns := newNamespace(t, api)
	tp := createPod(t, api, ns, "mirrored", testNode, corev1.PodQOSBurstable, true)
	mkCgroup(t, filepath.Join(podDir(v2root, "systemd", tp.pod, corev1.PodQOSBurstable), "cri-containerd-"+tp.appID+".scope"))
	v1 := mkCgroup(t, filepath.Join(podDir(v1root, "systemd", tp.pod, corev1.PodQOSBurstable), "cri-containerd-"+tp.appID+".scope"))
	p := startSleep(t, v1)
	tgt, err := Resolve(context.Background(), Spec{Pod: tp.nameSlash, Container: "app", Kubeconfig: api.AdminKubeconfig, NodeName: testNode, CgroupRoots: []string{v2root, v1root}})
	if err != nil {
		t.Fatal(err)
	}
	if tgt.Cgroup != v1 || tgt.CgroupVersion != 1 || !slices.Equal(tgt.Tgids, []int{p}) {
		t.Errorf("got %s v%d %v, want %s v1 [%d]", tgt.Cgroup, tgt.CgroupVersion, tgt.Tgids, v1, p)
	}
}

// TestResolvePodErrors checks each way a pod target can fail, against the
// real API server, and that the error says what to do.
func TestResolvePodErrors(t *testing.T) {
	api := needAPIServer(t)
	roots := newCgroupTestRoots(t)
	ns := newNamespace(t, api)
	host, err := hostNodeName()
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := createPod(t, api, ns, "elsewhere", "other-node", corev1.PodQOSBestEffort, true)
	pending := createPod(t, api, ns, "pending", "", corev1.PodQOSBestEffort, false)
	noCgroup := createPod(t, api, ns, "no-cgroup", testNode, corev1.PodQOSBurstable, true)
	notStarted := createPod(t, api, ns, "not-started", testNode, corev1.PodQOSBurstable, false)
	empty := createPod(t, api, ns, "empty", testNode, corev1.PodQOSGuaranteed, true)
	emptyDir := mkCgroup(t, podDir(roots.root(t, 2), "cgroupfs", empty.pod, corev1.PodQOSGuaranteed))
	mkCgroup(t, filepath.Join(emptyDir, empty.appID))
	cgroupRoots := nonEmpty(roots.v2, roots.v1)

	uid := string(noCgroup.pod.UID)
	uidSystemd := strings.ReplaceAll(uid, "-", "_")
	var tried []string
	for _, r := range cgroupRoots {
		tried = append(tried,
			filepath.Join(r, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+uidSystemd+".slice"),
			filepath.Join(r, "kubepods/burstable/pod"+uid))
	}

	for _, tc := range []struct {
		name       string
		pod        string
		container  string
		kubeconfig string // default: admin
		node       string // default: testNode; "-" for the default (host name)
		errIs      error
		errHas     []string
	}{
		{name: "pod not found", pod: ns + "/missing", errIs: ErrNotFound, errHas: []string{"pod " + ns + "/missing not found"}},
		{name: "namespace not found", pod: "no-such-namespace/x", errIs: ErrNotFound, errHas: []string{"pod no-such-namespace/x not found"}},
		{name: "other node", pod: elsewhere.nameSlash, errIs: ErrWrongNode,
			errHas: []string{"pod " + elsewhere.nameSlash + " runs on node other-node, not on this node " + testNode}},
		{name: "other node than the host name", pod: elsewhere.nameSlash, node: "-", errIs: ErrWrongNode,
			errHas: []string{"runs on node other-node, not on this node " + host}},
		{name: "not scheduled", pod: pending.nameSlash, errIs: ErrWrongNode, errHas: []string{"not scheduled"}},
		{name: "unknown container", pod: noCgroup.nameSlash, container: "db", errIs: ErrNotFound,
			errHas: []string{`has no container "db"`, "its containers are: app, sidecar"}},
		{name: "container not started", pod: notStarted.nameSlash, container: "app", errIs: ErrNotFound, errHas: []string{"has not started"}},
		{name: "no cgroup on this node", pod: noCgroup.nameSlash, errIs: ErrNotFound,
			errHas: append([]string{"pod " + noCgroup.nameSlash + " (uid " + uid + ", QoS Burstable) has no cgroup on this node"}, tried...)},
		{name: "no container cgroup", pod: empty.nameSlash, container: "sidecar", errIs: ErrNotFound,
			errHas: []string{"container sidecar of pod " + empty.nameSlash, empty.sidecarID, emptyDir}},
		{name: "empty pod cgroup", pod: empty.nameSlash, errIs: ErrNothingMatched, errHas: []string{emptyDir, "nothing matched"}},
		{name: "empty container cgroup", pod: empty.nameSlash, container: "app", errIs: ErrNothingMatched, errHas: []string{filepath.Join(emptyDir, empty.appID)}},
		{name: "forbidden", pod: noCgroup.nameSlash, kubeconfig: api.NobodyKubeconfig, errIs: ErrForbidden,
			errHas: []string{`verb "get" on resource "pods" in namespace ` + ns, "RBAC", `User "nobody"`, api.NobodyKubeconfig}},
		{name: "unauthorized", pod: noCgroup.nameSlash, kubeconfig: api.BadKubeconfig, errIs: ErrUnauthorized, errHas: []string{"rejected the credentials", api.BadKubeconfig}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := Spec{Pod: tc.pod, Container: tc.container, Kubeconfig: tc.kubeconfig, NodeName: tc.node, CgroupRoots: cgroupRoots}
			if spec.Kubeconfig == "" {
				spec.Kubeconfig = api.AdminKubeconfig
			}
			switch spec.NodeName {
			case "":
				spec.NodeName = testNode
			case "-":
				spec.NodeName = ""
			}
			_, err := Resolve(context.Background(), spec)
			checkErr(t, err, tc.errIs, tc.errHas...)
		})
	}

	t.Run("missing kubeconfig file", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "kubeconfig")
		_, err := Resolve(context.Background(), Spec{Pod: noCgroup.nameSlash, Kubeconfig: missing})
		if err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("error %v does not name the kubeconfig %s", err, missing)
		}
	})
}

// TestResolvePodCredentials checks where credentials come from without an
// explicit kubeconfig: $KUBECONFIG, then ~/.kube/config. Reaching the API
// server shows as the wrong-node error for a pod on another node.
func TestResolvePodCredentials(t *testing.T) {
	api := needAPIServer(t)
	ns := newNamespace(t, api)
	elsewhere := createPod(t, api, ns, "elsewhere", "other-node", corev1.PodQOSBestEffort, true)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(api.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".kube", "config"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, kubeconfigEnv, home string
	}{
		{"KUBECONFIG", api.AdminKubeconfig, t.TempDir()},
		{"KUBECONFIG list", filepath.Join(t.TempDir(), "missing") + string(filepath.ListSeparator) + api.AdminKubeconfig, t.TempDir()},
		{"~/.kube/config", "", home},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.kubeconfigEnv)
			t.Setenv("HOME", tc.home)
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			_, err := Resolve(context.Background(), Spec{Pod: elsewhere.nameSlash, NodeName: testNode})
			checkErr(t, err, ErrWrongNode, "runs on node other-node")
		})
	}
	t.Run("none", func(t *testing.T) {
		t.Setenv("KUBECONFIG", "")
		t.Setenv("HOME", t.TempDir())
		t.Setenv("KUBERNETES_SERVICE_HOST", "")
		_, err := Resolve(context.Background(), Spec{Pod: elsewhere.nameSlash, NodeName: testNode})
		checkErr(t, err, ErrNotFound, "no Kubernetes credentials")
	})
}
