package kubejob

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

func testTargetPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout", UID: "uid-1"},
		Spec: corev1.PodSpec{NodeName: "node-7",
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "shop", Effect: corev1.TaintEffectNoSchedule}}},
	}
}

func testSpec(stage string) Spec {
	return Spec{Pod: testTargetPod(), Image: "registry.example/temper-train:v1", Stage: stage,
		Args: []string{"--duration", "20s"}, RunID: "temper-observe-checkout-1", Deadline: 10 * time.Minute, TTL: time.Hour}
}

// TestBuild checks what the Job must be: pinned to the pod's node, host
// pids, the mounts and capabilities of its stage and nothing more, the
// deadline and TTL, the command with the target the job sets; and the RBAC
// objects: get on the one pod, get/update on the one ConfigMap.
func TestBuild(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stage      string
		namespace  string
		privileged bool
		caps       []corev1.Capability
		cgroupRO   bool
		roles      int
	}{
		{name: "observe", stage: StageObserve, caps: []corev1.Capability{"BPF", "PERFMON", "SYS_RESOURCE"}, cgroupRO: true, roles: 1},
		{name: "train", stage: StageTrain, caps: []corev1.Capability{"BPF", "PERFMON", "SYS_RESOURCE", "SYS_NICE"}, roles: 1},
		{name: "other namespace", stage: StageObserve, namespace: "temper-system", caps: []corev1.Capability{"BPF", "PERFMON", "SYS_RESOURCE"}, cgroupRO: true, roles: 2},
		{name: "privileged", stage: StageObserve, privileged: true, cgroupRO: true, roles: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec(tc.stage)
			s.Namespace, s.Privileged = tc.namespace, tc.privileged
			o, err := Build(s)
			if err != nil {
				t.Fatal(err)
			}
			job := o.Job
			wantNS := "shop"
			if tc.namespace != "" {
				wantNS = tc.namespace
			}
			if job.Namespace != wantNS || o.ConfigMap.Namespace != wantNS || o.ServiceAccount.Namespace != wantNS {
				t.Errorf("namespaces: job %s configmap %s sa %s, want %s", job.Namespace, o.ConfigMap.Namespace, o.ServiceAccount.Namespace, wantNS)
			}
			for _, m := range []metav1.ObjectMeta{job.ObjectMeta, o.ConfigMap.ObjectMeta, o.ServiceAccount.ObjectMeta, job.Spec.Template.ObjectMeta} {
				if m.Labels[LabelRun] != s.RunID {
					t.Errorf("%s: label %s = %q, want %q", m.Name, LabelRun, m.Labels[LabelRun], s.RunID)
				}
			}
			spec := job.Spec
			if !*spec.Suspend || *spec.BackoffLimit != 0 || *spec.ActiveDeadlineSeconds != 600 || *spec.TTLSecondsAfterFinished != 3600 {
				t.Errorf("suspend %v backoffLimit %d deadline %d ttl %d", *spec.Suspend, *spec.BackoffLimit, *spec.ActiveDeadlineSeconds, *spec.TTLSecondsAfterFinished)
			}
			pod := spec.Template.Spec
			if pod.NodeName != "" {
				t.Errorf("nodeName %q: the Job must go through the scheduler", pod.NodeName)
			}
			terms := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if len(terms) != 1 || len(terms[0].MatchFields) != 1 || terms[0].MatchFields[0].Key != "metadata.name" ||
				!slices.Equal(terms[0].MatchFields[0].Values, []string{"node-7"}) {
				t.Errorf("node affinity %+v, want metadata.name in [node-7]", terms)
			}
			if len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "dedicated" {
				t.Errorf("tolerations %+v, want the target pod's", pod.Tolerations)
			}
			if !pod.HostPID || pod.HostNetwork || pod.HostIPC {
				t.Errorf("hostPID %v hostNetwork %v hostIPC %v, want only hostPID", pod.HostPID, pod.HostNetwork, pod.HostIPC)
			}
			if pod.ServiceAccountName != s.RunID || pod.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("serviceAccountName %q restartPolicy %s", pod.ServiceAccountName, pod.RestartPolicy)
			}
			c := pod.Containers[0]
			sc := c.SecurityContext
			if tc.privileged {
				if sc.Privileged == nil || !*sc.Privileged || sc.Capabilities != nil {
					t.Errorf("privileged: %+v", sc)
				}
			} else {
				if sc.Privileged != nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, tc.caps) {
					t.Errorf("capabilities %+v, want drop ALL add %v", sc.Capabilities, tc.caps)
				}
				if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
					t.Error("allowPrivilegeEscalation is not false")
				}
			}
			if !*sc.ReadOnlyRootFilesystem || *sc.RunAsUser != 0 || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("security context %+v", sc)
			}
			mounts := map[string]corev1.VolumeMount{}
			for _, m := range c.VolumeMounts {
				mounts[m.MountPath] = m
			}
			if m, ok := mounts["/sys/fs/cgroup"]; !ok || m.ReadOnly != tc.cgroupRO {
				t.Errorf("cgroup mount %+v, want read-only %v", m, tc.cgroupRO)
			}
			if m, ok := mounts["/sys/kernel/btf"]; !ok || !m.ReadOnly {
				t.Errorf("btf mount %+v, want read-only", m)
			}
			if _, ok := mounts["/run/temper-train"]; ok != (tc.stage == StageTrain) {
				t.Errorf("revert state mount: %v, want it for train only", ok)
			}
			for _, p := range []string{"/sys/kernel/tracing", "/sys/kernel/debug"} {
				if _, ok := mounts[p]; ok {
					t.Errorf("%s is mounted: the tracer attaches through BTF, not tracefs", p)
				}
			}
			cmd := strings.Join(c.Command, " ")
			want := "temper-train job exec --configmap " + s.RunID + " -- " + tc.stage + " --duration 20s --pod shop/checkout --node $(NODE_NAME) --out " + OutDir
			if cmd != want {
				t.Errorf("command\n got %s\nwant %s", cmd, want)
			}
			if c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
				t.Errorf("env %+v", c.Env)
			}

			if len(o.Roles) != tc.roles || len(o.RoleBindings) != tc.roles {
				t.Fatalf("%d roles, %d bindings, want %d", len(o.Roles), len(o.RoleBindings), tc.roles)
			}
			var rules []string
			for i, r := range o.Roles {
				b := o.RoleBindings[i]
				if b.Namespace != r.Namespace || b.RoleRef.Name != r.Name || b.Subjects[0].Name != s.RunID || b.Subjects[0].Namespace != wantNS {
					t.Errorf("binding %+v does not bind role %s/%s to the run's service account", b, r.Namespace, r.Name)
				}
				for _, rule := range r.Rules {
					rules = append(rules, r.Namespace+":"+strings.Join(rule.Resources, ",")+":"+strings.Join(rule.Verbs, ",")+":"+strings.Join(rule.ResourceNames, ","))
				}
			}
			slices.Sort(rules)
			wantRules := []string{wantNS + ":configmaps:get,update:" + s.RunID, "shop:pods:get:checkout"}
			slices.Sort(wantRules)
			if !slices.Equal(rules, wantRules) {
				t.Errorf("rules %v, want %v", rules, wantRules)
			}

			y, err := o.YAML()
			if err != nil {
				t.Fatal(err)
			}
			docs := strings.Split(string(y), "\n---\n")
			if len(docs) != 3+2*tc.roles {
				t.Errorf("%d YAML documents, want %d", len(docs), 3+2*tc.roles)
			}
			var back struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(docs[0]), &back); err != nil || back.Kind != "Job" {
				t.Errorf("first document: kind %q, %v", back.Kind, err)
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Spec)
		want string
	}{
		{"unscheduled pod", func(s *Spec) { s.Pod.Spec.NodeName = "" }, "is not scheduled to a node yet"},
		{"no image", func(s *Spec) { s.Image = "" }, "no Image: give an image"},
		{"unknown stage", func(s *Spec) { s.Stage = "refine" }, `stage "refine"`},
		{"reserved flag", func(s *Spec) { s.Args = []string{"--out=/x"} }, "--out after --: the job sets"},
		{"reserved pod", func(s *Spec) { s.Args = []string{"--pod", "a/b"} }, "--pod after --"},
		{"short deadline", func(s *Spec) { s.Deadline = 0 }, "Deadline 0s: want at least 1s"},
		{"negative ttl", func(s *Spec) { s.TTL = -time.Second }, "TTL -1s: want between 0 and 68 years"},
		{"bad run id", func(s *Spec) { s.RunID = "Bad_ID" }, `run id "Bad_ID"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec(StageObserve)
			tc.edit(&s)
			_, err := Build(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Build: %v, want one line with %q", err, tc.want)
			}
		})
	}
}

func TestNewRunID(t *testing.T) {
	now := time.Unix(1_790_000_000, 0)
	for _, pod := range []string{"checkout", "Web_0", strings.Repeat("very-long-pod-name-", 6), "--x--"} {
		id := NewRunID(StageTrain, pod, now)
		if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
			t.Errorf("NewRunID(%q) = %q: %v", pod, id, errs)
		}
		if !strings.HasPrefix(id, "temper-train-") {
			t.Errorf("NewRunID(%q) = %q", pod, id)
		}
	}
}

// TestPack: outputs go in whole and in order; an optional one that does
// not fit is left out whole and named in the note; a required one that
// does not fit is an error; nothing is ever cut.
func TestPack(t *testing.T) {
	blob := func(n int) []byte { return []byte(strings.Repeat("x", n)) }
	outs := []Output{
		{Key: KeySummary, Data: blob(100), Required: true},
		{Key: KeyProfile, Data: blob(200), Required: true},
		{Key: "analysis.json", Data: blob(600)},
		{Key: "REPORT.md", Data: blob(50)},
		{Key: "trace.pftrace.gz", Data: blob(300), Binary: true},
	}
	data, binary, _, note, err := Pack(outs, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(data[KeySummary]) != 100 || len(data[KeyProfile]) != 200 || len(data["analysis.json"]) != 600 || len(data["REPORT.md"]) != 50 {
		t.Errorf("data sizes %d %d %d %d", len(data[KeySummary]), len(data[KeyProfile]), len(data["analysis.json"]), len(data["REPORT.md"]))
	}
	if _, ok := binary["trace.pftrace.gz"]; ok {
		t.Error("the trace was packed past the limit")
	}
	if !strings.Contains(note, "left out trace.pftrace.gz (300 B)") {
		t.Errorf("note %q does not name what was left out", note)
	}
	if _, _, _, _, err := Pack(outs, 250); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "profile.toml 200 B") {
		t.Errorf("required outputs over the limit: %v", err)
	}
}
