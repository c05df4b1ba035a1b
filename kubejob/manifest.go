// Package kubejob runs temper-train as a Kubernetes Job on the node of the
// pod it traces or trains for, and brings the run's outputs back through the
// API server in a ConfigMap.
//
// One run is five kinds of objects, all labelled with the run's id
// (LabelRun) and built by Build:
//
//   - a Job, pinned to the target pod's node by required node affinity,
//     with the privileges the trace (and for train, the scheduler) needs;
//   - a ServiceAccount the Job's pod runs as;
//   - a Role and RoleBinding in the target pod's namespace that let it get
//     that one pod (observe --pod reads it to find its cgroup);
//   - a Role and RoleBinding in the Job's namespace that let it get and
//     update the run's ConfigMap (and nothing else);
//   - the ConfigMap, created empty, that the pod fills with its outputs
//     (Publish) and the caller reads back (Wait, ReadOutputs).
//
// The Job is created suspended and owns the other objects of its namespace,
// so that they exist before its pod starts and go with it when
// ttlSecondsAfterFinished deletes it.
package kubejob

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Labels and annotations on every object of a run.
const (
	// LabelRun is the run's id: `kubectl get all,cm,sa,role,rolebinding
	// -l temper.codes/run=ID` lists a run.
	LabelRun = "temper.codes/run"
	// LabelStage is observe or train.
	LabelStage = "temper.codes/stage"
	// AnnotationTarget is the target pod, NAMESPACE/NAME.
	AnnotationTarget = "temper.codes/target-pod"
	labelManagedBy   = "app.kubernetes.io/managed-by"
	managedBy        = "temper-train"
)

// Stages a Job can run.
const (
	StageObserve = "observe"
	StageTrain   = "train"
)

// OutDir is where the Job's container writes the stage's outputs: an
// emptyDir, the root filesystem being read-only.
const OutDir = "/tmp/out"

// Spec is one run: which pod, which stage with which arguments, in which
// image.
type Spec struct {
	// Pod is the target pod as the API server returned it; its node and
	// tolerations decide where the Job runs.
	Pod       *corev1.Pod
	Container string // trace only this container of the pod ("": all)
	Image     string // an image with temper-train on PATH
	// Namespace is the Job's namespace ("": the pod's).
	Namespace string
	Stage     string   // StageObserve or StageTrain
	Args      []string // the stage's own arguments (no target, --out or --node)
	RunID     string   // names every object; NewRunID makes one
	Deadline  time.Duration
	TTL       time.Duration
	// Privileged runs the container privileged instead of with the listed
	// capabilities, for clusters whose runtime policy (seccomp, AppArmor)
	// refuses bpf() or perf_event_open() to unprivileged containers.
	Privileged bool
}

// Objects are the manifests of one run, in the order they are created.
type Objects struct {
	Job            *batchv1.Job
	ServiceAccount *corev1.ServiceAccount
	ConfigMap      *corev1.ConfigMap
	// Roles and RoleBindings: [0] in the Job's namespace (the ConfigMap),
	// [1] in the pod's (the pod); one each when they are the same
	// namespace, the pod rule then joining the first Role.
	Roles        []*rbacv1.Role
	RoleBindings []*rbacv1.RoleBinding
	// PodUID is the target pod's uid: Wait tells a deleted and recreated
	// pod of the same name from the one the run was made for.
	PodUID types.UID
}

// The argument flags the Job sets itself: a user's copy would point the
// stage at the wrong target, node or directory.
var reservedFlags = []string{"--pod", "--container", "--pid", "--cgroup", "--out", "--node", "--kubeconfig"}

// Build makes the manifests of a run. It does not talk to the API server.
func Build(s Spec) (*Objects, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ns := s.jobNamespace()
	name := s.RunID
	labels := map[string]string{LabelRun: s.RunID, LabelStage: s.Stage, labelManagedBy: managedBy}
	meta := func(namespace string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: clone(labels),
			Annotations: map[string]string{AnnotationTarget: s.Pod.Namespace + "/" + s.Pod.Name}}
	}
	o := &Objects{
		PodUID:         s.Pod.UID,
		ServiceAccount: &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(ns)},
		ConfigMap:      &corev1.ConfigMap{TypeMeta: typeMeta("v1", "ConfigMap"), ObjectMeta: meta(ns)},
	}
	o.ConfigMap.Annotations[AnnotationStatus] = StatusPending

	// Least privilege: the pod reads its one target pod and writes its one
	// ConfigMap, by name. It lists and watches nothing and creates
	// nothing: the ConfigMap exists before the pod starts.
	podRule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}, ResourceNames: []string{s.Pod.Name}}
	cmRule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update"}, ResourceNames: []string{name}}
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}
	role := func(namespace string, rules ...rbacv1.PolicyRule) (*rbacv1.Role, *rbacv1.RoleBinding) {
		r := &rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta(namespace), Rules: rules}
		b := &rbacv1.RoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta(namespace),
			Subjects: []rbacv1.Subject{subject},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}
		return r, b
	}
	if ns == s.Pod.Namespace {
		r, b := role(ns, podRule, cmRule)
		o.Roles, o.RoleBindings = []*rbacv1.Role{r}, []*rbacv1.RoleBinding{b}
	} else {
		r0, b0 := role(ns, cmRule)
		r1, b1 := role(s.Pod.Namespace, podRule)
		o.Roles, o.RoleBindings = []*rbacv1.Role{r0, r1}, []*rbacv1.RoleBinding{b0, b1}
	}

	o.Job = &batchv1.Job{
		TypeMeta:   typeMeta("batch/v1", "Job"),
		ObjectMeta: meta(ns),
		Spec: batchv1.JobSpec{
			// Created suspended: the pod starts only once its
			// ServiceAccount, Roles and ConfigMap exist (Create resumes it).
			Suspend: new(true),
			// A trace or a training run is not retried: a second attempt
			// would measure a different moment of the workload, and a
			// failure (no BPF, no pod) repeats.
			BackoffLimit:            new(int32(0)),
			ActiveDeadlineSeconds:   new(int64(s.Deadline / time.Second)),
			TTLSecondsAfterFinished: new(int32(s.TTL / time.Second)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: clone(labels)},
				Spec:       s.podSpec(),
			},
		},
	}
	return o, nil
}

// SpecError is a Spec field whose value the job cannot run with; the
// command maps Field to its flag. Test with errors.As.
type SpecError struct {
	Field string // the Spec field: "Image", "Deadline", "TTL"
	Value string // its value ("" when unset)
	Want  string // what it needs
}

func (e *SpecError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("no %s: %s", e.Field, e.Want)
	}
	return fmt.Sprintf("%s %s: %s", e.Field, e.Value, e.Want)
}

// check refuses a Spec that cannot make valid objects, naming the field
// (SpecError) or the pod, stage, run id or argument at fault.
func (s Spec) check() error {
	switch {
	case s.Pod == nil:
		return errors.New("no target pod")
	case s.Pod.Spec.NodeName == "":
		return fmt.Errorf("pod %s/%s is not scheduled to a node yet (phase %s): run the job once it runs", s.Pod.Namespace, s.Pod.Name, s.Pod.Status.Phase)
	case s.Stage != StageObserve && s.Stage != StageTrain:
		return fmt.Errorf("stage %q: the job runs observe or train", s.Stage)
	case s.Image == "":
		return &SpecError{Field: "Image", Want: "give an image with temper-train on PATH, e.g. registry.example/temper-train:v1"}
	case s.Deadline < time.Second:
		return &SpecError{Field: "Deadline", Value: s.Deadline.String(), Want: "want at least 1s"}
	case s.TTL < 0 || s.TTL > time.Duration(1<<31-1)*time.Second:
		return &SpecError{Field: "TTL", Value: s.TTL.String(), Want: "want between 0 and 68 years"}
	}
	if errs := validation.IsDNS1123Label(s.RunID); len(errs) > 0 {
		return fmt.Errorf("run id %q: %s", s.RunID, strings.Join(errs, "; "))
	}
	for _, a := range s.Args {
		flag, _, _ := strings.Cut(a, "=")
		if slices.Contains(reservedFlags, flag) {
			return fmt.Errorf("%s after --: the job sets %s itself (the target pod, its node and the output directory)", flag, strings.Join(reservedFlags, ", "))
		}
	}
	return nil
}

func (s Spec) jobNamespace() string {
	if s.Namespace != "" {
		return s.Namespace
	}
	return s.Pod.Namespace
}

// Command is the container's command line: `temper-train job exec`, which
// runs the stage against the pod on this node and publishes the outputs.
// $(NODE_NAME) is expanded by the kubelet from the downward API.
func (s Spec) Command() []string {
	cmd := []string{"temper-train", "job", "exec", "--configmap", s.RunID, "--", s.Stage}
	cmd = append(cmd, s.Args...)
	cmd = append(cmd, "--pod", s.Pod.Namespace+"/"+s.Pod.Name, "--node", "$(NODE_NAME)", "--out", OutDir)
	if s.Container != "" {
		cmd = append(cmd, "--container", s.Container)
	}
	return cmd
}

// Host paths the container mounts.
const (
	cgroupPath = "/sys/fs/cgroup"  // the target's cgroup: its processes, limits, cpusets
	btfPath    = "/sys/kernel/btf" // the kernel's BTF, which the tracer relocates against
	statePath  = "/run/temper-train"
)

func (s Spec) podSpec() corev1.PodSpec {
	train := s.Stage == StageTrain
	hostDir := corev1.HostPathDirectory
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	vols := []corev1.Volume{
		{Name: "cgroup", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: cgroupPath, Type: &hostDir}}},
		{Name: "btf", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: btfPath, Type: &hostDir}}},
		{Name: "out", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	mounts := []corev1.VolumeMount{
		// observe only reads the cgroup tree; train's CFS backend writes
		// cpusets and its revert state.
		{Name: "cgroup", MountPath: cgroupPath, ReadOnly: !train},
		{Name: "btf", MountPath: btfPath, ReadOnly: true},
		{Name: "out", MountPath: "/tmp"},
	}
	if train {
		// The CFS backend's revert state lives on the node, so that a
		// run killed mid-way (deadline, eviction) can be reverted by
		// `temper-train apply --revert` on that node.
		vols = append(vols, corev1.Volume{Name: "state", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: statePath, Type: &dirOrCreate}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "state", MountPath: statePath})
	}
	c := corev1.Container{
		Name:    "temper-train",
		Image:   s.Image,
		Command: s.Command(),
		Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
		VolumeMounts: mounts,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("100m"),
			corev1.ResourceMemory: resource.MustParse("256Mi"),
		}},
		SecurityContext: s.securityContext(),
	}
	return corev1.PodSpec{
		ServiceAccountName: s.RunID,
		RestartPolicy:      corev1.RestartPolicyNever,
		// The target's processes, by their host pids: /proc of the node,
		// the pids in its cgroup.procs, the pids the tracer reports.
		HostPID: true,
		// Pinned to the target pod's node through the scheduler rather
		// than spec.nodeName: the scheduler still checks resources and
		// taints, and a pod that cannot run there stays Pending with a
		// reason instead of being bound and rejected by the kubelet.
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{s.Pod.Spec.NodeName},
				}}}},
			},
		}},
		// It runs where the target runs, so it tolerates the taints the
		// target tolerates.
		Tolerations: slices.Clone(s.Pod.Spec.Tolerations),
		// Time for observe to finish its trace and for train to revert
		// the scheduling it changed.
		TerminationGracePeriodSeconds: new(int64(60)),
		Containers:                    []corev1.Container{c},
		Volumes:                       vols,
	}
}

// Capabilities the container gets, all others dropped:
//
//	BPF, PERFMON  load the tracer and attach it to the scheduler tracepoints
//	              (tp_btf/raw_tp); for train also the sched_ext backend, whose
//	              struct_ops map the kernel creates for CAP_BPF
//	SYS_RESOURCE  lift RLIMIT_MEMLOCK for the BPF maps on kernels before
//	              5.11, which charge them to it
//	SYS_NICE      (train) set another pod's threads' affinity, policy and nice
//
// No CAP_SYS_ADMIN: nothing here needs it on kernels with CAP_BPF (5.8+).
// Privileged replaces the list where a runtime policy still refuses.
func (s Spec) capabilities() []corev1.Capability {
	caps := []corev1.Capability{"BPF", "PERFMON", "SYS_RESOURCE"}
	if s.Stage == StageTrain {
		caps = append(caps, "SYS_NICE")
	}
	return caps
}

func (s Spec) securityContext() *corev1.SecurityContext {
	sc := &corev1.SecurityContext{
		// Root for the node's root-owned files: cgroup.procs, cpuset
		// files, /sys/kernel/btf/vmlinux (0444, but its directory), the
		// revert state in /run/temper-train.
		RunAsUser:              new(int64(0)),
		RunAsNonRoot:           new(false),
		ReadOnlyRootFilesystem: new(true),
		SeccompProfile:         &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if s.Privileged {
		sc.Privileged = new(true)
		return sc
	}
	sc.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: s.capabilities()}
	sc.AllowPrivilegeEscalation = new(false)
	return sc
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func clone(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// NewRunID makes a run id from the stage, the pod's name, the time and
// four random hex digits (two runs for one pod in one second differ): a
// DNS-1123 label (it names objects and is a label value), at most 63
// characters.
func NewRunID(stage, pod string, now time.Time) string {
	var r [2]byte
	_, _ = rand.Read(r[:])
	stamp := strconv.FormatInt(now.Unix(), 36) + hex.EncodeToString(r[:])
	prefix := "temper-" + stage + "-"
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(pod))
	if room := validation.DNS1123LabelMaxLength - len(prefix) - len(stamp) - 1; len(name) > room {
		name = name[:room]
	}
	return prefix + strings.Trim(name, "-") + "-" + stamp
}

// YAML writes the objects as one YAML stream, in creation order, as
// `kubectl apply -f` reads it. The Job's owner references are set when it
// is created, so they are not in it.
func (o *Objects) YAML() ([]byte, error) {
	list := []any{o.Job, o.ServiceAccount, o.ConfigMap}
	for i := range o.Roles {
		list = append(list, o.Roles[i], o.RoleBindings[i])
	}
	var out []byte
	for i, obj := range list {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, b...)
	}
	return out, nil
}
