package snapshot

// Pod is the Kubernetes metadata of an observed pod, as the API server
// reported it when the target was resolved. It is filled by target
// for `observe --pod` and embedded in the snapshot so that synthesize can key
// a profile to the pod's images and annotations without asking the cluster
// again.
type Pod struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	UID         string            `json:"uid"`
	Node        string            `json:"node,omitempty"`
	QOSClass    string            `json:"qos_class"` // Guaranteed, Burstable or BestEffort
	Annotations map[string]string `json:"annotations,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Containers  []Container       `json:"containers"`
}

// Container is one container of a Pod. CPU quantities are in millicores;
// zero means unset.
type Container struct {
	Name            string `json:"name"`
	Image           string `json:"image"`
	ContainerID     string `json:"container_id,omitempty"` // runtime://id from the pod status
	CPURequestMilli int64  `json:"cpu_request_milli,omitempty"`
	CPULimitMilli   int64  `json:"cpu_limit_milli,omitempty"`
}

// Images returns the images of the pod's containers in container order.
func (p *Pod) Images() []string {
	out := make([]string, 0, len(p.Containers))
	for _, c := range p.Containers {
		out = append(out, c.Image)
	}
	return out
}
