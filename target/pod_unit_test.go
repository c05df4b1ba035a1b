package target

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestComputeQOS(t *testing.T) {
	c := func(r corev1.ResourceRequirements) corev1.Container { return corev1.Container{Name: "c", Resources: r} }
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want corev1.PodQOSClass
	}{
		{"no resources", corev1.PodSpec{Containers: []corev1.Container{c(resources("", "", "", ""))}}, corev1.PodQOSBestEffort},
		{"requests equal limits", corev1.PodSpec{Containers: []corev1.Container{c(resources("1", "1Gi", "1", "1Gi"))}}, corev1.PodQOSGuaranteed},
		{"equal in another notation", corev1.PodSpec{Containers: []corev1.Container{c(resources("1000m", "1024Mi", "1", "1Gi"))}}, corev1.PodQOSGuaranteed},
		{"limits only (requests default to them in the API server, not here)", corev1.PodSpec{Containers: []corev1.Container{c(resources("", "", "1", "1Gi"))}}, corev1.PodQOSBurstable},
		{"cpu limit only", corev1.PodSpec{Containers: []corev1.Container{c(resources("1", "", "1", ""))}}, corev1.PodQOSBurstable},
		{"request below limit", corev1.PodSpec{Containers: []corev1.Container{c(resources("500m", "1Gi", "1", "1Gi"))}}, corev1.PodQOSBurstable},
		{"one of two containers without limits", corev1.PodSpec{Containers: []corev1.Container{c(resources("1", "1Gi", "1", "1Gi")), c(resources("", "", "", ""))}}, corev1.PodQOSBurstable},
		{"zero quantities do not count", corev1.PodSpec{Containers: []corev1.Container{c(resources("0", "0", "0", "0"))}}, corev1.PodQOSBestEffort},
		{"init container without limits", corev1.PodSpec{
			Containers:     []corev1.Container{c(resources("1", "1Gi", "1", "1Gi"))},
			InitContainers: []corev1.Container{c(resources("100m", "", "", ""))},
		}, corev1.PodQOSBurstable},
		{"other resources do not count", corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: resources("1", "", "", "").Requests[corev1.ResourceCPU]},
		}}}}, corev1.PodQOSBestEffort},
		{"pod-level resources replace the containers'", corev1.PodSpec{
			Resources:  new(resources("2", "1Gi", "2", "1Gi")),
			Containers: []corev1.Container{c(resources("", "", "", ""))},
		}, corev1.PodQOSGuaranteed},
		{"pod-level requests only", corev1.PodSpec{
			Resources:  new(resources("2", "1Gi", "", "")),
			Containers: []corev1.Container{c(resources("1", "1Gi", "1", "1Gi"))},
		}, corev1.PodQOSBurstable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := computeQOS(&corev1.Pod{Spec: tc.spec}); got != tc.want {
				t.Errorf("computeQOS = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestFindContainerCgroups covers runtimes' naming beyond the ones the pod
// test creates, in plain directories.
func TestFindContainerCgroups(t *testing.T) {
	const id = "0123abcd"
	for _, tc := range []struct {
		name string
		dirs []string
		want string // "" for not found
	}{
		{"cgroupfs", []string{"other", id}, id},
		{"containerd scope", []string{"cri-containerd-" + id + ".scope"}, "cri-containerd-" + id + ".scope"},
		{"crio scope beside its conmon scope", []string{"crio-conmon-" + id + ".scope", "crio-" + id + ".scope"}, "crio-" + id + ".scope"},
		{"only conmon", []string{"crio-conmon-" + id + ".scope"}, ""},
		{"unknown runtime scope", []string{"newrt-" + id + ".scope"}, "newrt-" + id + ".scope"},
		{"id prefix is not a match", []string{id + "ff", "cri-containerd-" + id + "ff.scope"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := t.TempDir()
			for _, d := range tc.dirs {
				if err := os.Mkdir(filepath.Join(pod, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got, err := findContainerCgroups([]string{pod}, id)
			if tc.want == "" {
				if err == nil {
					t.Errorf("found %v, want nothing", got)
				}
				return
			}
			if err != nil || !slices.Equal(got, []string{filepath.Join(pod, tc.want)}) {
				t.Errorf("findContainerCgroups = %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}
