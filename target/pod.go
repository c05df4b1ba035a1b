package target

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"

	"temper.codes/temper-train/internal/kube"
	"temper.codes/temper-train/observe/snapshot"
)

// splitPodName splits NAMESPACE/NAME.
func splitPodName(s string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", newError(ErrInvalidSpec, nil, fmt.Sprintf("pod %q: write it as NAMESPACE/NAME, e.g. default/web-0", s))
	}
	return namespace, name, nil
}

// resolvePod makes a pod target: it reads the pod from the API server, checks
// that it runs on this node, and finds its (or its container's) cgroup here.
func resolvePod(ctx context.Context, spec Spec) (*Target, error) {
	namespace, name, err := splitPodName(spec.Pod)
	if err != nil {
		return nil, err
	}
	src, err := kube.DefaultSource(spec.Kubeconfig)
	if err != nil {
		return nil, newError(ErrNotFound, nil, err.Error())
	}
	cfg, err := kube.Config(src)
	if err != nil {
		return nil, err
	}
	client, err := kube.Client(cfg, corev1.SchemeGroupVersion, corev1.AddToScheme)
	if err != nil {
		return nil, fmt.Errorf("Kubernetes client for %s: %w", src, err)
	}
	// Protobuf unless the kubeconfig asks for a content type, as the
	// clientset's pods client does.
	pod := &corev1.Pod{}
	if err := client.Get().UseProtobufAsDefault().Namespace(namespace).Resource("pods").Name(name).Do(ctx).Into(pod); err != nil {
		return nil, podGetError(namespace, name, cfg.Host, src, err)
	}

	node := spec.NodeName
	if node == "" {
		if node, err = hostNodeName(); err != nil {
			return nil, err
		}
	}
	switch pod.Spec.NodeName {
	case node:
	case "":
		return nil, newError(ErrWrongNode, nil, fmt.Sprintf("pod %s/%s is not scheduled to a node yet (phase %s): trace it once it runs", namespace, name, pod.Status.Phase))
	default:
		return nil, newError(ErrWrongNode, nil, fmt.Sprintf("pod %s/%s runs on node %s, not on this node %s: run the trace on node %s (or give this node's name if it differs from the host name)", namespace, name, pod.Spec.NodeName, node, pod.Spec.NodeName))
	}

	meta := podMetadata(pod)
	var containerID string
	if spec.Container != "" {
		if containerID, err = findContainerID(pod, spec.Container); err != nil {
			return nil, err
		}
	}

	roots, err := cgroupRoots(spec.CgroupRoots)
	if err != nil {
		return nil, err
	}
	dirs, err := findPodCgroups(roots, string(pod.UID), corev1.PodQOSClass(meta.QOSClass))
	if err != nil {
		return nil, newError(ErrNotFound, err, fmt.Sprintf("pod %s/%s (uid %s, QoS %s) has no cgroup on this node", namespace, name, pod.UID, meta.QOSClass))
	}
	what := fmt.Sprintf("pod %s/%s", namespace, name)
	if containerID != "" {
		if dirs, err = findContainerCgroups(dirs, containerID); err != nil {
			return nil, newError(ErrNotFound, err, fmt.Sprintf("container %s of pod %s/%s (id %s) has no cgroup on this node", spec.Container, namespace, name, containerID))
		}
		what += " container " + spec.Container
	}

	// The same pod can have a cgroup in several hierarchies (a hybrid v1/v2
	// machine with systemd mirrors them); the first one holding processes is
	// the target.
	for _, dir := range dirs {
		tgids, err := cgroupTgids(dir)
		if err != nil {
			return nil, err
		}
		if len(tgids) == 0 {
			continue
		}
		version, err := cgroupVersion(dir)
		if err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", dir, err)
		}
		return &Target{
			Kind:          KindPod,
			Description:   fmt.Sprintf("%s (cgroup %s, v%d)", what, dir, version),
			Tgids:         tgids,
			Cgroup:        dir,
			CgroupVersion: version,
			Pod:           meta,
		}, nil
	}
	return nil, newError(ErrNothingMatched, nil, fmt.Sprintf("%s has no processes in its cgroup %s: nothing matched", what, strings.Join(dirs, " or ")))
}

// podGetError turns a failed GET of the pod into an error that says what to
// check.
func podGetError(namespace, name, host string, src kube.Source, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return newError(ErrNotFound, err, fmt.Sprintf("pod %s/%s not found (API server %s; check the namespace and name with kubectl get pods -n %s)", namespace, name, host, namespace))
	case apierrors.IsForbidden(err):
		return newError(ErrForbidden, err, fmt.Sprintf("not allowed to get pod %s/%s: the identity from %s needs RBAC permission for verb \"get\" on resource \"pods\" in namespace %s (check with kubectl auth can-i get pods -n %s)", namespace, name, src, namespace, namespace))
	case apierrors.IsUnauthorized(err):
		return newError(ErrUnauthorized, err, fmt.Sprintf("API server %s rejected the credentials from %s (expired or wrong token or certificate?)", host, src))
	}
	return fmt.Errorf("get pod %s/%s from API server %s (using %s): %w", namespace, name, host, src, err)
}

// podMetadata copies what the snapshot keeps of a pod.
func podMetadata(pod *corev1.Pod) *snapshot.Pod {
	ids := containerIDs(pod)
	p := &snapshot.Pod{
		Namespace:   pod.Namespace,
		Name:        pod.Name,
		UID:         string(pod.UID),
		Node:        pod.Spec.NodeName,
		QOSClass:    string(pod.Status.QOSClass),
		Annotations: maps.Clone(pod.Annotations),
		Labels:      maps.Clone(pod.Labels),
		Containers:  make([]snapshot.Container, 0, len(pod.Spec.Containers)),
	}
	if p.QOSClass == "" {
		p.QOSClass = string(computeQOS(pod))
	}
	for _, c := range pod.Spec.Containers {
		p.Containers = append(p.Containers, snapshot.Container{
			Name:            c.Name,
			Image:           c.Image,
			ContainerID:     ids[c.Name],
			CPURequestMilli: milliCPU(c.Resources.Requests),
			CPULimitMilli:   milliCPU(c.Resources.Limits),
		})
	}
	return p
}

// milliCPU is the cpu quantity of a resource list in millicores, 0 if unset.
func milliCPU(l corev1.ResourceList) int64 {
	if q, ok := l[corev1.ResourceCPU]; ok {
		return q.MilliValue()
	}
	return 0
}

// containerIDs maps container names (regular and init containers) to the
// runtime://id the kubelet reported in the pod status.
func containerIDs(pod *corev1.Pod) map[string]string {
	ids := map[string]string{}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range list {
			if s.ContainerID != "" {
				ids[s.Name] = s.ContainerID
			}
		}
	}
	return ids
}

// findContainerID returns the runtime's id (without the runtime:// scheme)
// of the named container, which may be a regular or an init (e.g. sidecar)
// container.
func findContainerID(pod *corev1.Pod, container string) (string, error) {
	var names []string
	known := false
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range list {
			names = append(names, c.Name)
			known = known || c.Name == container
		}
	}
	if !known {
		return "", newError(ErrNotFound, nil, fmt.Sprintf("pod %s/%s has no container %q; its containers are: %s", pod.Namespace, pod.Name, container, strings.Join(names, ", ")))
	}
	id := containerIDs(pod)[container]
	if id == "" {
		return "", newError(ErrNotFound, nil, fmt.Sprintf("container %s of pod %s/%s has not started (the pod status has no container ID for it)", container, pod.Namespace, pod.Name))
	}
	if _, after, ok := strings.Cut(id, "://"); ok {
		id = after
	}
	return id, nil
}

// computeQOS classifies a pod the way Kubernetes does when status.qosClass
// is empty (Kubernetes' ComputePodQOS): only cpu and memory count, and only
// positive quantities. With no request or limit anywhere the pod is
// BestEffort. It is Guaranteed when every container (init containers
// included) has both a cpu and a memory limit and, summed over containers,
// requests equal limits for every resource. Pod-level resources, when the pod
// has them, replace the containers' in that computation. Anything else is
// Burstable.
func computeQOS(pod *corev1.Pod) corev1.PodQOSClass {
	requests := map[corev1.ResourceName]*resource.Quantity{}
	limits := map[corev1.ResourceName]*resource.Quantity{}
	limitsOnAll := true
	add := func(sum map[corev1.ResourceName]*resource.Quantity, l corev1.ResourceList) (cpu, mem bool) {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			q, ok := l[name]
			if !ok || q.Sign() <= 0 {
				continue
			}
			if s, ok := sum[name]; ok {
				s.Add(q)
			} else {
				c := q.DeepCopy()
				sum[name] = &c
			}
			if name == corev1.ResourceCPU {
				cpu = true
			} else {
				mem = true
			}
		}
		return cpu, mem
	}
	if r := pod.Spec.Resources; r != nil && (len(r.Requests) > 0 || len(r.Limits) > 0) {
		add(requests, r.Requests)
		if len(r.Limits) > 0 {
			cpu, mem := add(limits, r.Limits)
			limitsOnAll = cpu && mem
		}
	} else {
		for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for _, c := range list {
				add(requests, c.Resources.Requests)
				cpu, mem := add(limits, c.Resources.Limits)
				limitsOnAll = limitsOnAll && cpu && mem
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if !limitsOnAll || len(requests) != len(limits) {
		return corev1.PodQOSBurstable
	}
	for name, req := range requests {
		if lim, ok := limits[name]; !ok || lim.Cmp(*req) != 0 {
			return corev1.PodQOSBurstable
		}
	}
	return corev1.PodQOSGuaranteed
}

// podCgroupPaths returns where the kubelet puts a pod's cgroup, relative to
// a hierarchy root: with the systemd cgroup driver (slices named with the
// uid's dashes as underscores, as systemd unit names need) and with the
// cgroupfs driver. Guaranteed pods sit directly under the kubepods cgroup,
// the others under one per QoS class.
func podCgroupPaths(uid string, qos corev1.PodQOSClass) (systemd, cgroupfs string) {
	escaped := strings.ReplaceAll(uid, "-", "_")
	switch qos {
	case corev1.PodQOSGuaranteed:
		return "kubepods.slice/kubepods-pod" + escaped + ".slice",
			"kubepods/pod" + uid
	default:
		class := strings.ToLower(string(qos)) // burstable, besteffort
		return "kubepods.slice/kubepods-" + class + ".slice/kubepods-" + class + "-pod" + escaped + ".slice",
			"kubepods/" + class + "/pod" + uid
	}
}

// findPodCgroups returns the pod's cgroup directories that exist under the
// roots, in root order. The error lists every path tried.
func findPodCgroups(roots []string, uid string, qos corev1.PodQOSClass) ([]string, error) {
	systemd, cgroupfs := podCgroupPaths(uid, qos)
	var found, tried []string
	for _, root := range roots {
		for _, rel := range []string{systemd, cgroupfs} {
			dir := filepath.Join(root, rel)
			fi, err := os.Stat(dir)
			switch {
			case err == nil && fi.IsDir():
				found = append(found, dir)
			case err == nil || errors.Is(err, fs.ErrNotExist):
				tried = append(tried, dir)
			default:
				return nil, err
			}
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("tried %s (the kubelet's systemd and cgroupfs driver layouts under each cgroup root; a kubelet with a non-default --cgroup-root needs that root given as a cgroup root)", strings.Join(tried, ", "))
	}
	return found, nil
}

// Container runtimes' systemd scope prefixes: cri-containerd-ID.scope,
// crio-ID.scope, docker-ID.scope. CRI-O also puts its monitor in a sibling
// crio-conmon-ID.scope, which is not the container.
var scopePrefixes = []string{"cri-containerd-", "crio-", "docker-", "containerd-", "libpod-"}

// findContainerCgroups returns, for each pod cgroup directory, the
// container's cgroup in it: a directory named after the container id
// (cgroupfs driver) or a systemd scope ending in -ID.scope (systemd driver).
func findContainerCgroups(podDirs []string, id string) ([]string, error) {
	var found []string
	for _, pd := range podDirs {
		entries, err := os.ReadDir(pd)
		if err != nil {
			return nil, fmt.Errorf("read pod cgroup: %w", err)
		}
		var generic string
		match := ""
		for _, e := range entries {
			n := e.Name()
			if !e.IsDir() {
				continue
			}
			if n == id {
				match = n
				break
			}
			if !strings.HasSuffix(n, "-"+id+".scope") {
				continue
			}
			prefix := strings.TrimSuffix(n, id+".scope")
			for _, p := range scopePrefixes {
				if prefix == p {
					match = n
				}
			}
			if match != "" {
				break
			}
			if !strings.Contains(prefix, "conmon") && generic == "" {
				generic = n // an unknown runtime's scope
			}
		}
		if match == "" {
			match = generic
		}
		if match != "" {
			found = append(found, filepath.Join(pd, match))
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no directory %s or *-%s.scope in %s", id, id, strings.Join(podDirs, ", "))
	}
	return found, nil
}
